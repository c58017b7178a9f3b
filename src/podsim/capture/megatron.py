"""A ready-made parallel builder for Megatron-Core's GPT model (``pip install megatron-core``):
``podsim trace --model megatron:CONFIG.json --world-size N --layout tp=T[,pp=P][,cp=C] ...``.

CONFIG.json is a HuggingFace-style config of the model's sizes (``hidden_size``,
``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``, ``vocab_size``).  The model
is Megatron-Core's ``GPTModel`` with its local layer spec (no Transformer Engine), on
Megatron's own process groups (``parallel_state.initialize_model_parallel`` with the layout's
TP, PP and CP; its rank order ``tp-cp-dp-pp`` is podsim's), sequence parallel when TP > 1 and
Transformer Engine or Apex is installed (Megatron's torch LayerNorm refuses it otherwise), and
Megatron's 1F1B schedule (``get_forward_backward_func``) over ``2 * pp`` micro-batches when
PP > 1; gradients reduced over data parallel by Megatron's ``DistributedDataParallel``.

Megatron-Core's forward pass needs CUDA (its attention takes buffers from
``torch.cuda.current_device()``): on the CPU the model builds, then the step fails and podsim
says so; trace it with ``--device cuda`` on a machine with a GPU.  torch and megatron-core are
imported here only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import load_json, read_text
from ..optional import require
from .parallel import ParallelContext, TrainingStep


def _sizes(path: str) -> dict[str, int]:
    p = Path(path)
    if not p.is_file():
        raise InputError("no such config file", path, "--model")
    cfg = load_json(read_text(p, "config file"), path)
    if not isinstance(cfg, dict):
        raise InputError("expected a JSON object (a HuggingFace config.json)", path)
    out = {}
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"expected a whole number >= 1, got {v!r}", path, key)
        out[key] = v
    out["intermediate_size"] = int(cfg.get("intermediate_size") or 4 * out["hidden_size"])
    out["num_key_value_heads"] = int(cfg.get("num_key_value_heads") or out["num_attention_heads"])
    return out


def build(config_path: str, batch_size: int, ctx: ParallelContext) -> TrainingStep:
    """Megatron-Core's GPT on this rank, in ``ctx``'s layout.

    Raises:
        InputError: megatron-core is not installed, or sizes the layout does not divide.
    """
    torch = require("torch", "capturing a trace")
    require("megatron.core", "Megatron-Core models (pip install megatron-core)", "--model")
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    sizes, lay = _sizes(config_path), ctx.layout
    if sizes["num_attention_heads"] % lay.tp or sizes["num_key_value_heads"] % lay.tp:
        raise InputError(f"tp={lay.tp} must divide the attention and key/value heads", config_path, "--layout")
    if sizes["num_hidden_layers"] % lay.pp:
        raise InputError(f"pp={lay.pp} must divide the {sizes['num_hidden_layers']} layers", config_path, "--layout")
    micro = 2 * lay.pp if lay.pp > 1 else 1
    if batch_size % micro:
        raise InputError(f"the batch size must be a multiple of the {micro} micro-batches", where="--batch-size")
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=lay.tp, pipeline_model_parallel_size=lay.pp, context_parallel_size=lay.cp
    )
    fused_norm = any(importlib.util.find_spec(m) is not None for m in ("transformer_engine", "apex"))
    cfg = TransformerConfig(
        num_layers=sizes["num_hidden_layers"],
        hidden_size=sizes["hidden_size"],
        ffn_hidden_size=sizes["intermediate_size"],
        num_attention_heads=sizes["num_attention_heads"],
        num_query_groups=sizes["num_key_value_heads"],
        tensor_model_parallel_size=lay.tp,
        pipeline_model_parallel_size=lay.pp,
        context_parallel_size=lay.cp,
        sequence_parallel=lay.tp > 1 and fused_norm,
        pipeline_dtype=torch.float32,
        use_cpu_initialization=ctx.device == "cpu",
    )
    pp = ctx.coords["pp"]
    model = GPTModel(
        config=cfg,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=sizes["vocab_size"],
        max_sequence_length=ctx.seq_len,
        pre_process=pp == 0,
        post_process=pp == lay.pp - 1,
        position_embedding_type="rope",
    )
    model = model.to(ctx.device)
    if lay.dp > 1:  # gradients reduced over data parallel by Megatron's own DDP
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

        model = DistributedDataParallel(config=cfg, ddp_config=DistributedDataParallelConfig(), module=model)
    mb = batch_size // micro
    ids = torch.randint(0, sizes["vocab_size"], (mb, ctx.seq_len), device=ctx.device)
    pos = torch.arange(ctx.seq_len, device=ctx.device).unsqueeze(0).expand(mb, -1)

    def loss_func(out: Any) -> Any:
        loss = out.float().mean()
        return loss, {"loss": loss.detach()}

    def forward_step(_data: Any, m: Any) -> Any:
        return m(input_ids=ids, position_ids=pos, attention_mask=None, labels=ids), loss_func

    schedule = get_forward_backward_func()

    def step() -> None:
        schedule(
            forward_step_func=forward_step,
            data_iterator=iter(range(micro)),
            model=[model],
            num_microbatches=micro,
            seq_length=ctx.seq_len,
            micro_batch_size=mb,
        )
        if hasattr(model, "finish_grad_sync"):
            model.finish_grad_sync()

    return TrainingStep(step, list(model.parameters()))
