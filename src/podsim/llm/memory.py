"""Memory per GPU of a training layout: weights, gradients, optimizer states, activations.

**Weights, gradients, optimizer** (mixed precision with Adam), bytes per parameter:

================================  =======  =========  ===========
setting                           weights  gradients  optimizer
================================  =======  =========  ===========
Megatron (bf16/fp16/fp8)          2        4 (fp32)   12 (fp32 master, m, v)
Megatron distributed optimizer    2        4          12 / DP
DeepSpeed ZeRO-1 / 2 / 3          2(/DP)   2(/DP)     12 / DP
fp32                              4        4          8
================================  =======  =========  ===========

(ZeRO-2 shards gradients, ZeRO-3 also weights; all over DP x CP, the routed experts' over the
expert data-parallel ranks ``Layout.edp``.)  A GPU holds the layers of all its virtual stages
(:meth:`Layout.chunk_layers`, uneven splits included) divided by TP (routed experts by ETP x EP
instead); pipeline rank 0 also holds the input embedding (virtual stage 0)
and the last rank the output layer (the last virtual stage).  ZeRO-3 / FSDP adds temporary
buffers: the bf16 weights of the unit being computed and of the prefetched next one (a layer,
or the embedding / output layer; the two largest the rank holds).

**Activations** follow Korthikanti et al. (2022), bytes per layer per micro-batch of ``b``
sequences of ``s`` tokens (``h`` hidden, ``a`` heads, ``t`` TP):

* no recompute: ``s b h (10 + 24/t + 5 a s / (h t))``; with sequence parallelism the 10 is
  divided by ``t`` too: ``s b h (34/t + 5 a s / (h t))``;
* selective recompute drops the ``5 a s / (h t)`` attention-score term, and so does fused
  (flash) attention, which never stores the scores;
* full recompute keeps only each layer's input: ``2 s b h`` (``/ t`` with SP) -- with
  ``recompute_layers = N`` only for the first N layers of each virtual stage;
* selective recompute of more modules (``recompute_modules``): ``act`` drops the activation's
  output (half the MLP term), ``mlp`` both MLP intermediates, ``layernorm`` the norms' outputs
  (4 of the 10).

The 24 (parallel part) is generalised as ``(4 + 4 kv/a) + 4 f/h`` for GELU MLPs of width ``f``
and ``6 f/h`` for SwiGLU (``kv`` KV heads), which is 24 for GPT's ``f = 4h``.  MoE layers keep
the MLP term ``top_k + shared`` times.  CP divides ``s``.  A pipeline stage stores the
activations of its in-flight passes, found by walking its pipeline schedule
(:mod:`podsim.workload.pipeline_schedules`: a forward of a virtual stage adds that stage's
layers' activations, its backward frees them; the peak is kept): ``pp - stage`` micro-batches
with 1F1B, all ``m`` with GPipe, ``2 (p - s - 1) + (v - 1) p + 1`` chunk passes interleaved --
for the first stage Korthikanti's ``1 + (p - 1) / (p v)`` times ``p`` micro-batches of its
layers, and the right count when virtual stages hold different numbers of layers.  Every
in-flight pass of virtual stage 0 also keeps the embedding dropout output (``s b h``, ``/t``
with SP) and the last stage the output layer's input and fp32 logits (``4 s b h + 4 s b V / t``).

Units: bytes (reported in GiB = 2^30 B).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ..workload.pipeline_schedules import schedule
from .layout import Layout
from .model import ModelConfig

GIB = float(1 << 30)


@dataclass
class StageMemory:
    """Bytes one GPU of a pipeline stage holds at its peak."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations_layers: float  #: the transformer layers' activations (Korthikanti)
    activations_other: float  #: embedding dropout, output layer input, logits
    buffers: float = 0.0  #: temporary: a recomputed layer, gathered K/V or ZeRO-3 weights

    @property
    def activations(self) -> float:
        return self.activations_layers + self.activations_other

    @property
    def states(self) -> float:
        """Weights + gradients + optimizer states."""
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> float:
        return self.states + self.activations + self.buffers

    def as_gib(self) -> dict[str, float]:
        return {
            "stage": self.stage,
            "weights_gib": self.weights / GIB,
            "gradients_gib": self.gradients / GIB,
            "optimizer_gib": self.optimizer / GIB,
            "activations_gib": self.activations / GIB,
            "buffers_gib": self.buffers / GIB,
            "total_gib": self.total / GIB,
        }


def bytes_per_param(layout: Layout, shards: int | None = None) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter of this GPU's shard, the states
    sharded over ``shards`` ranks (default DP x CP, over which the dense layers' gradients are
    reduced; the routed experts' are reduced over the expert data-parallel ranks,
    ``Layout.edp``)."""
    d = layout.dp * layout.cp if shards is None else shards
    if layout.precision == "fp32":
        w, g, o = 4.0, 4.0, 8.0
    else:
        w, g, o = 2.0, 4.0, 12.0
    if layout.distributed_optimizer:
        return w, g, o / d
    if layout.zero:
        g = 2.0 if layout.precision != "fp32" else g
        return (w / d if layout.zero >= 3 else w), (g / d if layout.zero >= 2 else g), o / d
    return w, g, o


def stage_layers(model: ModelConfig, layout: Layout, stage: int) -> list[int]:
    """The layers pipeline rank ``stage`` holds (all its virtual stages)."""
    out: list[int] = []
    for v in range(layout.vpp):
        out.extend(layout.chunk_layers(model, stage, v))
    return out


def layer_params(model: ModelConfig, layout: Layout, i: int) -> float:
    """Parameters of layer ``i`` on one GPU (TP-sharded; routed experts split over ETP x EP)."""
    t = layout.tp
    if model.is_moe_layer(i):
        dense = model.attention_params() + model.norm_params() + model.hidden * model.experts
        dense += model.shared_experts * model.mlp_params(model.expert_ffn)
        return dense / t + expert_params(model, layout, i)
    return model.layer_params(i) / t


def expert_params(model: ModelConfig, layout: Layout, i: int) -> float:
    """Routed-expert parameters of layer ``i`` on one GPU (0 for a dense layer): the experts
    split over EP ranks, each expert's matrices over ETP ranks.  Their gradients are reduced
    (and a sharded optimizer's states split) over the expert data-parallel ranks."""
    if not model.is_moe_layer(i):
        return 0.0
    return model.experts * model.mlp_params(model.expert_ffn) / (layout.expert_tp * layout.ep)


def stage_expert_params(model: ModelConfig, layout: Layout, stage: int) -> float:
    """Routed-expert parameters one GPU of pipeline rank ``stage`` holds."""
    return sum(expert_params(model, layout, i) for i in stage_layers(model, layout, stage))


def embedding_params(model: ModelConfig, layout: Layout) -> float:
    """The input embedding on one GPU of pipeline rank 0 (TP-sharded)."""
    return model.embedding_params() / layout.tp


def output_params(model: ModelConfig, layout: Layout) -> float:
    """The output layer on one GPU of the last pipeline rank (TP-sharded); with tied
    embeddings and PP > 1 the last rank keeps its own copy of the embedding matrix."""
    out = model.output_params()
    if model.tied_embeddings and layout.pp > 1:
        out += model.vocab * model.hidden
    return out / layout.tp


def stage_params(model: ModelConfig, layout: Layout, stage: int, matrices_only: bool = False) -> float:
    """Parameters one GPU of pipeline rank ``stage`` holds (TP- and EP-sharded).

    ``matrices_only`` counts only the transformer layers' weight matrices (no embeddings,
    biases or norms), as Korthikanti et al.'s Figure 1 does (``12 L h^2`` for GPT)."""
    if matrices_only:
        return sum(model.layer_matrix_params(i) for i in stage_layers(model, layout, stage)) / layout.tp
    p = 0.0
    for i in stage_layers(model, layout, stage):
        p += layer_params(model, layout, i)
    if stage == 0:
        p += embedding_params(model, layout)
    if stage == layout.pp - 1:
        p += output_params(model, layout)
    return p


def layer_activation_bytes(model: ModelConfig, layout: Layout, layer: int, recomputed: bool | None = None) -> float:
    """Activation bytes one layer keeps for one micro-batch on one GPU (Korthikanti).

    ``recomputed``: whether full recomputation re-runs this layer (default: every layer under
    ``recompute == "full"``).  Selective recomputation drops the activations its modules would
    keep: ``core_attn`` the attention scores, ``act`` the MLP activation's output (half the MLP
    term), ``mlp`` both MLP intermediates, ``layernorm`` the two norms' outputs (4 s b h)."""
    s = layout.seq_len / layout.cp
    b, h, a, t = layout.micro_batch, model.hidden, model.heads, layout.tp
    sbh = s * b * h
    sp = layout.sequence_parallel
    if layout.recompute == "full" if recomputed is None else recomputed:
        return 2 * sbh / (t if sp else 1)
    mlp = (
        (6.0 if model.activation == "swiglu" else 4.0) * model.expert_ffn / h
        if model.is_moe_layer(layer)
        else (6.0 if model.activation == "swiglu" else 4.0) * model.ffn / h
    )
    if model.is_moe_layer(layer):
        mlp *= model.top_k + model.shared_experts
    if layout.recomputes("mlp"):
        mlp = 0.0
    elif layout.recomputes("act"):
        mlp /= 2
    parallel = 4 + 4 * model.kv / a + mlp
    rest = 6.0 if layout.recomputes("layernorm") else 10.0
    coef = (rest + parallel) / t if sp else rest + parallel / t
    if not layout.recomputes("core_attn") and not layout.flash_attention:
        coef += 5 * a * s / (h * t)
    return sbh * coef


def inflight(layout: Layout, stage: int) -> int:
    """Micro-batches whose activations pipeline rank ``stage`` holds at once."""
    m = layout.num_microbatches
    if layout.pp == 1:
        return 1
    if layout.schedule == "gpipe":
        return m
    return min(layout.pp - stage, m)


def peak_activations(model: ModelConfig, layout: Layout, stage: int) -> tuple[float, float]:
    """(transformer layers, embedding output) activation bytes pipeline rank ``stage`` holds at
    its peak: its schedule walked pass by pass, each virtual stage's forward adding its own
    layers' activations (and, on virtual stage 0, the embedding output) until its backward."""
    p, v = layout.pp, layout.vpp
    sp_t = layout.tp if layout.sequence_parallel else 1
    emb = layout.seq_len / layout.cp * layout.micro_batch * model.hidden / sp_t
    chunk_act = [
        sum(
            layer_activation_bytes(model, layout, i, layout.recomputed_layer(model, stage, c, i))
            for i in layout.chunk_layers(model, stage, c)
        )
        for c in range(v)
    ]
    chunk_emb = [emb if c * p + stage == 0 else 0.0 for c in range(v)]
    kind = "interleaved" if layout.interleaved and p > 1 else layout.schedule
    best = (-1.0, 0.0, 0.0)
    for live in _live_after_forwards(kind, p, stage, layout.num_microbatches, v if p > 1 else 1):
        layers = sum(n * a for n, a in zip(live, chunk_act))
        other = sum(n * a for n, a in zip(live, chunk_emb))
        if layers + other > best[0]:
            best = (layers + other, layers, other)
    return best[1], best[2]


@functools.lru_cache(maxsize=4096)
def _live_after_forwards(kind: str, p: int, stage: int, m: int, v: int) -> tuple[tuple[int, ...], ...]:
    """The micro-batch counts held per virtual stage right after each forward of a schedule
    that no other such state holds more of in every virtual stage (activations are never
    negative, so only these can be the peak), distinct, in the order they first occur (a pure
    function of the schedule, memoized: a search asks for the same schedules many times)."""
    live = [0] * v
    seen: dict[tuple[int, ...], None] = {}
    for forward, _mb, c in schedule(kind, p, stage, m, v):
        live[c] += 1 if forward else -1
        if forward:
            seen.setdefault(tuple(live))
    states = list(seen)
    return tuple(a for a in states if not any(b != a and all(x >= y for x, y in zip(b, a)) for b in states))


def stage_memory(model: ModelConfig, layout: Layout, stage: int) -> StageMemory:
    """Peak memory of one GPU of pipeline rank ``stage``."""
    params = stage_params(model, layout, stage)
    experts = stage_expert_params(model, layout, stage)
    wb, gb, ob = bytes_per_param(layout)
    ew, eg, eo = bytes_per_param(layout, layout.edp) if experts else (wb, gb, ob)
    layers = stage_layers(model, layout, stage)
    act, other = peak_activations(model, layout, stage)
    s = layout.seq_len / layout.cp
    sbh = s * layout.micro_batch * model.hidden
    t = layout.tp
    if stage == layout.pp - 1:
        other += 4 * sbh / (t if layout.sequence_parallel else 1) + 4 * s * layout.micro_batch * model.vocab / t
    # temporary buffers at the peak: the layer being recomputed holds its full activations;
    # context parallelism gathers the whole sequence's K and V of a layer; ZeRO-3 holds the
    # gathered weights of the current and the prefetched layer
    buffers = 0.0
    if layers and layout.recompute == "full":
        buffers += layer_activation_bytes(model, replace(layout, recompute="none"), layers[0])
    if layout.cp > 1:
        buffers += 2 * layout.micro_batch * layout.seq_len * max(model.kv / t, 1) * model.dhead * 2
    if layout.zero >= 3 and layout.dp * layout.cp > 1:
        units = [layer_params(model, layout, i) for i in layers]
        if stage == 0:
            units.append(embedding_params(model, layout))
        if stage == layout.pp - 1:
            units.append(output_params(model, layout))
        units.sort(reverse=True)
        buffers += 2 * sum(units[:2])  # gathered bf16 weights of the current and the prefetched unit
    dense = params - experts
    return StageMemory(
        stage, dense * wb + experts * ew, dense * gb + experts * eg, dense * ob + experts * eo, act, other, buffers
    )


def memory(model: ModelConfig, layout: Layout) -> list[StageMemory]:
    """Every pipeline stage's peak memory per GPU."""
    return [stage_memory(model, layout, s) for s in range(layout.pp)]


def worst_stage(stages: list[StageMemory]) -> StageMemory:
    """The stage that needs the most memory per GPU (the first of equals): a layout fits when it does."""
    return max(stages, key=lambda s: s.total)


def fits(stage: StageMemory, memory_gib: float) -> bool:
    """Whether ``stage`` fits in ``memory_gib`` GiB (2^30 B) per GPU: its total at most that.

    The one test of a layout's memory: ``podsim llm``'s (:func:`podsim.api.train.check_fits`),
    the search's screen (:func:`podsim.sweep.space.enumerate_layouts`, in the GPU's memory less
    ``--memory-reserve``) and a result's ``memory_fits`` all call it on :func:`worst_stage`."""
    return stage.total / GIB <= memory_gib
