"""Export a generated training iteration: SimAI / AICB workload ``.txt`` and Chakra ET files.

**SimAI** (``write_simai``): one representative rank of pipeline stage ``stage`` in AICB's
``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` layout, gradient accumulation unrolled (every micro-batch
repeats the stage's rows).  Each layer becomes rows of (forward compute, the collective after
it) paired with (backward compute, the collective after it), so that SimAI's semantics --
forward rows 0 to N-1, then backward rows N-1 to 0, forward and input-gradient collectives
blocking -- replay the same kernels and TP / EP collectives in the same order.  The
data-parallel gradient reduction of a layer sits in the weight-gradient column of its first
row in micro-batch 0, whose backward SimAI runs last (non-blocking, overlapping the rest of the
backward as Megatron's does); the optimizer step is the
input-gradient compute of a first ``optimizer`` row, so it runs last.  SimAI has no pipeline
schedule and no context-parallel group: pipeline traffic is the header's ``pp_comm`` (SimAI does
not simulate it) and CP > 1 is refused.

**Chakra**: :func:`podsim.formats.chakra.write_workload_with_groups` of the unfused workload
(:func:`~podsim.llm.generate.generate` without ``fold``):
``<prefix>.<rank>.et`` for every rank plus an ASTRA-sim comm-group JSON
(``<prefix>.comm_groups.json``); each collective's ``pg_name`` names its group's id there.  Ops
are not fused (every TP collective stays a node).
"""

from __future__ import annotations

import os

from ..compute.model import KernelTimer
from ..errors import InputError
from ..fileio import atomic_write_text
from ..workload import CollectiveKind
from .layout import Layout
from .memory import stage_params
from .model import ModelConfig
from .ops import LayerCosts, PassStep

_SIMAI_NAME = {
    CollectiveKind.ALL_REDUCE: "ALLREDUCE",
    CollectiveKind.ALL_GATHER: "ALLGATHER",
    CollectiveKind.REDUCE_SCATTER: "REDUCESCATTER",
    CollectiveKind.ALL_TO_ALL: "ALLTOALL",
}


def _segments(steps: list[PassStep]) -> list[tuple[int, str, int]]:
    """(compute ns, collective after it or NONE, bytes): one per collective, plus the tail."""
    out: list[tuple[int, str, int]] = []
    ns = 0.0
    for st in steps:
        if st.collective is None:
            ns += st.ns
            continue
        name = _SIMAI_NAME[st.collective] + ("_EP" if st.group == "ep" else "")
        out.append((int(round(ns)), name, st.nbytes))
        ns = 0.0
    if ns > 0 or not out:
        out.append((int(round(ns)), "NONE", 0))
    return out


def _rows(name: str, fwd: list[PassStep], bwd: list[PassStep], dp: tuple[str, int] | None) -> list[str]:
    f, b = _segments(fwd), _segments(bwd)
    n = max(len(f), len(b))
    lines = []
    for r in range(n):
        fn, fc, fs = f[r] if r < len(f) else (0, "NONE", 0)
        j = n - 1 - r  # backward runs rows from the last to the first
        bn, bc, bs = b[j] if 0 <= j < len(b) else (0, "NONE", 0)
        wc, ws = dp if (dp is not None and r == 0) else ("NONE", 0)
        lines.append(f"{name}_{r}\t-1\t{fn}\t{fc}\t{fs}\t{bn}\t{bc}\t{bs}\t0\t{wc}\t{ws}\t100")
    return lines


def simai_text(model: ModelConfig, layout: Layout, cm: KernelTimer, stage: int = 0) -> str:
    """The SimAI workload text of pipeline stage ``stage``.

    Raises:
        InputError: for context parallelism (no such group in SimAI) or a stage out of range.
    """
    layout.check(model)
    if layout.cp > 1:
        raise InputError("SimAI's workload format has no context-parallel group; export with --cp 1")
    if not 0 <= stage < layout.pp:
        raise InputError(f"stage {stage} is not a pipeline stage (PP {layout.pp})")
    costs = LayerCosts(model, layout, cm)
    sharded = layout.distributed_optimizer or layout.zero >= 1
    dp_name = "REDUCESCATTER" if sharded else "ALLREDUCE"
    layers = [i for v in range(layout.vpp) for i in layout.chunk_layers(model, stage, v)]
    first, last = stage == 0, stage == layout.pp - 1
    lines: list[str] = []
    params = stage_params(model, layout, stage)
    shard = params / (layout.dp * layout.cp) if sharded else params
    gather = ("ALLGATHER", int(params * 2)) if sharded and layout.dp * layout.cp > 1 else None
    lines += _rows("optimizer", [], [costs.optimizer(shard)], gather)
    mbs = layout.num_microbatches
    for mb in range(mbs):
        if first:
            lines += _rows(f"mb{mb}_embedding_layer", costs.embedding_steps(False), costs.embedding_steps(True), None)
        for i in layers:
            moe = model.is_moe_layer(i)
            bwd = (list(costs.forward(moe)) if layout.recompute == "full" else []) + list(costs.backward(moe))
            dp = None
            # SimAI runs micro-batch 0's backward last; its DP group (all_gpus / (TP x PP)) is
            # Megatron's DP x CP, over which the gradients are reduced
            if mb == 0 and layout.dp * layout.cp > 1:
                dp = (dp_name, int(model.layer_params(i) / layout.tp * layout.grad_reduce_bytes))
            lines += _rows(f"mb{mb}_layer{i}", list(costs.forward(moe)), bwd, dp)
        if last:
            lines += _rows(f"mb{mb}_final_column", costs.output_steps(False), costs.output_steps(True), None)
    head = (
        f"HYBRID_TRANSFORMER_FWD_IN_BCKWD\tmodel_parallel_NPU_group: {layout.tp} ep: {layout.ep} "
        f"pp: {layout.pp} vpp: {len(layers)} ga: {mbs} all_gpus: {layout.gpus} checkpoints: 0 "
        f"checkpoint_initiates: 0"
    )
    if layout.pp > 1:
        head += f" pp_comm: {costs.act_bytes // (layout.tp if layout.sequence_parallel else 1)}"
    return "\n".join([head, str(len(lines))] + lines) + "\n"


def write_simai(
    model: ModelConfig, layout: Layout, cm: KernelTimer, path: str | os.PathLike[str], stage: int = 0
) -> None:
    """Write :func:`simai_text` to ``path`` (atomically)."""
    atomic_write_text(path, simai_text(model, layout, cm, stage))
