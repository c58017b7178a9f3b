"""Ready-made parallel builders for a HuggingFace causal LM built from a local config (no
download): FSDP2, FSDP2 + tensor parallel, and FSDP2 + tensor parallel + pipelining.

* **FSDP2** (``fully_shard``): each decoder layer, then the whole model, sharded over the
  mesh's ``dp`` dimension (these builders always shard: ``fsdp`` in the layout is implied).
* **Tensor parallel** (``tp=T``, DTensor ``parallelize_module``): Megatron's split of a Llama-style
  layer: ``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj`` and ``up_proj`` column-parallel,
  ``o_proj`` and ``down_proj`` row-parallel.  Needs attention and key/value heads divisible by
  T.  (GPT-2's fused ``c_attn`` is not split: use FSDP2 alone, or a builder of your own.)
* **Pipelining** (``pp=P``, ``torch.distributed.pipelining``): the decoder layers split into P
  stages of consecutive layers (the embedding on the first, the final norm and LM head on the
  last), a 1F1B schedule over ``2 * P`` micro-batches, with static shapes so that no stage
  needs another's data to start.

torch and transformers are imported here only.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..optional import require
from .models import hf_config
from .parallel import ParallelContext, TrainingStep, one_f_one_b

_COLWISE = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_ROWWISE = ("o_proj", "down_proj")


def _tensor_parallel(layer: Any, mesh: Any, torch: Any, where: str) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {}
    for name, module in layer.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, torch.nn.Linear) and leaf in _COLWISE:
            plan[name] = ColwiseParallel()
        elif isinstance(module, torch.nn.Linear) and leaf in _ROWWISE:
            plan[name] = RowwiseParallel()
    if not any(isinstance(s, RowwiseParallel) for s in plan.values()):
        raise InputError(
            "the ready-made tensor-parallel builder splits Llama-style layers (q_proj, k_proj, v_proj, "
            "o_proj, gate_proj, up_proj, down_proj); this model has none: use tp=1, or give a builder "
            "of your own (module:callable)",
            where,
            "--layout",
        )
    parallelize_module(layer, mesh, plan)


def _layers(model: Any, where: str) -> Any:
    inner = getattr(model, "model", None) or getattr(model, "transformer", None)
    layers = getattr(inner, "layers", None) or getattr(inner, "h", None)
    if layers is None:
        raise InputError("the model has no decoder layers (model.layers or transformer.h) to shard", where, "--model")
    return layers


def build(config_path: str, batch_size: int, ctx: ParallelContext) -> tuple[Any, ...] | TrainingStep:
    """The model of ``config_path`` on this rank, in ``ctx``'s layout: ``(model, inputs, targets,
    loss_fn)``, or a :class:`TrainingStep` for pipelining.

    Raises:
        InputError: for heads not divisible by the TP degree, fewer decoder layers than
            stages, a batch not divisible into micro-batches, context parallelism (not built
            here), or a model whose layers are not Llama-style under TP.
    """
    torch = require("torch", "capturing a trace")
    from torch.distributed.fsdp import fully_shard

    transformers, config = hf_config(config_path)
    lay = ctx.layout
    if lay.cp > 1:
        raise InputError(
            "the ready-made HuggingFace builders do not do context parallelism (cp): give a builder of "
            "your own (module:callable)",
            where="--layout",
        )
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    kv = int(getattr(config, "num_key_value_heads", heads) or heads)
    if lay.tp > 1 and (heads % lay.tp or kv % lay.tp):
        raise InputError(
            f"tp={lay.tp} must divide the attention heads ({heads}) and key/value heads ({kv})", config_path, "--layout"
        )
    torch.manual_seed(0)  # every rank builds the same model (FSDP2 and DTensor shard it)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model = model.to(ctx.device).train()
    layers = _layers(model, config_path)
    mesh = ctx.mesh
    for layer in layers:
        if lay.tp > 1:
            _tensor_parallel(layer, mesh["tp"], torch, config_path)
    ids = torch.randint(0, int(config.vocab_size), (batch_size, ctx.seq_len), device=ctx.device)
    if lay.pp == 1:
        for layer in layers:
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        return (model, ids, ids, lambda m, a, b: m(input_ids=a, labels=b).loss)
    return _pipeline(model, layers, ids, batch_size, ctx, config, torch, fully_shard, config_path)


def _pipeline(
    model: Any,
    layers: Any,
    ids: Any,
    batch_size: int,
    ctx: ParallelContext,
    config: Any,
    torch: Any,
    fully_shard: Any,
    where: str,
) -> TrainingStep:
    """Stage ``ctx.coords['pp']`` of a 1F1B pipeline over the decoder layers."""
    lay, pp = ctx.layout, ctx.coords["pp"]
    n = len(layers)
    if n < lay.pp:
        raise InputError(
            f"pp={lay.pp} stages need at least as many decoder layers; the model has {n}", where, "--layout"
        )
    micro = 2 * lay.pp
    if batch_size % micro:
        raise InputError(
            f"pipelining runs {micro} micro-batches (2 x pp): the batch size must be a multiple of "
            f"{micro}, got {batch_size}",
            where="--batch-size",
        )
    lo, hi = pp * n // lay.pp, (pp + 1) * n // lay.pp
    inner = model.model
    stage = _stage_module(torch)(inner, list(layers)[lo:hi], pp == 0, pp == lay.pp - 1, model.lm_head)
    for layer in stage.layers:
        fully_shard(layer, mesh=ctx.mesh["dp"])
    fully_shard(stage, mesh=ctx.mesh["dp"])
    mb = batch_size // micro
    hidden = int(config.hidden_size)
    act = torch.zeros(mb, ctx.seq_len, hidden, device=ctx.device)
    logits = torch.zeros(mb, ctx.seq_len, int(config.vocab_size), device=ctx.device)
    vocab = int(config.vocab_size)

    def loss_fn(out: Any, target: Any) -> Any:
        return torch.nn.functional.cross_entropy(out.reshape(-1, vocab), target.reshape(-1))

    return one_f_one_b(
        stage,
        ctx,
        micro,
        ids,
        ids,
        ids[:mb] if pp == 0 else act,
        logits if pp == lay.pp - 1 else act,
        act,
        loss_fn,
        list(stage.parameters()),
    )


def _stage_module(torch: Any) -> type:
    class Stage(torch.nn.Module):
        """Consecutive decoder layers of a Llama-style model (embedding first, norm and head last)."""

        def __init__(self, inner: Any, layers: list[Any], first: bool, last: bool, head: Any) -> None:
            super().__init__()
            self.embed = inner.embed_tokens if first else None
            self.layers = torch.nn.ModuleList(layers)
            self.norm = inner.norm if last else None
            self.head = head if last else None
            self.rotary = inner.rotary_emb

        def forward(self, x: Any) -> Any:
            h = self.embed(x) if self.embed is not None else x
            pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
            rope = self.rotary(h, pos)
            for layer in self.layers:
                out = layer(h, position_embeddings=rope, attention_mask=None, position_ids=pos)
                h = out[0] if isinstance(out, tuple) else out
            if self.head is not None:
                h = self.head(self.norm(h))
            return h

    return Stage
