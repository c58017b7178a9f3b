"""Pipeline parallelism from a one-GPU step: the model cut into stages of balanced time, the
batch into micro-batches, run with GPipe or 1F1B.

* **Partition**: forward ops stay in order and are cut into P runs that minimize the largest
  run's time.  When the backward has as many ops as the forward (autograd mirrors it op for op,
  as in VGG), op k of the backward belongs with forward op n-1-k and the runs balance forward +
  backward time; otherwise the runs balance forward time and each backward op goes to the stage
  whose share of the forward it mirrors, by cumulative backward time counted from the end.
* **Micro-batches**: each op of a pass takes ``1/M`` of its traced time (the traced batch is
  split into M micro-batches; work per sample is taken as constant, as in batch
  extrapolation).
* **Transfers**: a stage sends its last forward op's output (1/M of it) to the next stage, and
  the same bytes of gradient back.
* **Optimizer**: each stage steps its own parameters: the traced optimizer time times the
  stage's share of the parameter bytes.

One GPU per stage and replica: with ``replicas`` > 1 (data parallelism across pipelines), rank
``s * replicas + d`` runs stage ``s`` of replica ``d``; each stage's replicas all-reduce its
gradients after the last backward pass, and its optimizer waits for that.  Each pass is one op
whose parts (the original ops) are kept for the timeline.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep, StepOp
from ..workload import SEGMENTS, CollectiveKind, Group, OpKind, ProgramBuilder, Workload
from ..workload.pipeline_schedules import schedule


def _balanced_cuts(times: list[int], stages: int) -> list[int]:
    """Cut points 0 = c0 < c1 < ... < cP = n of ``times`` into ``stages`` non-empty runs
    minimizing the largest run's sum (dynamic programming)."""
    n = len(times)
    pre = [0]
    for t in times:
        pre.append(pre[-1] + t)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    arg = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    for k in range(1, stages + 1):
        for i in range(k, n - (stages - k) + 1):
            for j in range(k - 1, i):
                v = max(best[k - 1][j], pre[i] - pre[j])
                if v < best[k][i]:
                    best[k][i], arg[k][i] = v, j
    cuts = [n]
    for k in range(stages, 0, -1):
        cuts.append(arg[k][cuts[-1]])
    return cuts[::-1]


def partition(step: OneGpuStep, stages: int) -> tuple[list[list[StepOp]], list[list[StepOp]]]:
    """(forward ops, backward ops) of each stage."""
    fwd = [o for o in step.ops if o.stage == "forward"]
    bwd = [o for o in step.ops if o.stage == "backward"]
    if len(fwd) < stages:
        raise InputError(f"{stages} pipeline stages need at least {stages} forward ops; the trace has {len(fwd)}")
    n = len(fwd)
    if len(bwd) == n:
        # autograd's backward mirrors the forward op for op: balance forward + backward
        cuts = _balanced_cuts([fwd[i].ns + bwd[n - 1 - i].ns for i in range(n)], stages)
        f_parts = [fwd[a:b] for a, b in zip(cuts, cuts[1:])]
        b_parts = [bwd[n - b : n - a] for a, b in zip(cuts, cuts[1:])]
        return f_parts, b_parts
    total = sum(o.ns for o in fwd) or 1
    cuts = _balanced_cuts([o.ns for o in fwd], stages)
    f_parts = [fwd[a:b] for a, b in zip(cuts, cuts[1:])]
    edges = [sum(o.ns for o in fwd[:c]) / total for c in cuts]
    b_total = sum(o.ns for o in bwd) or 1
    b_parts = [[] for _ in range(stages)]
    done = 0
    for o in bwd:
        from_end = 1.0 - (done + o.ns / 2) / b_total  # the forward position this op mirrors
        st = max(k for k in range(stages) if edges[k] <= from_end or k == 0)
        b_parts[st].append(o)
        done += o.ns
    return f_parts, b_parts


def _boundary_bytes(part: list[StepOp]) -> int:
    """What a stage hands the next: the tensor its last forward op returns (in place or not),
    skipping the tiny results of buffer updates (a batch norm's step counter) when a real
    activation (4 KiB or more) precedes them."""
    sizes = [o.result_bytes for o in part if o.result_bytes > 0]
    big = [b for b in sizes if b >= 4096]
    return (big or sizes or [0])[-1]


def pipeline_parallel(
    step: OneGpuStep, stages: int, micro_batches: int, kind: str = "1f1b", replicas: int = 1
) -> Workload:
    """The pipeline-parallel workload of ``step`` on ``stages`` x ``replicas`` GPUs with
    ``micro_batches`` per pipeline (each replica's batch is the step's).

    Raises:
        InputError: for fewer stages, micro-batches or replicas than 1, more stages than forward
            ops, or an unknown schedule.
    """
    if stages < 1 or micro_batches < 1 or replicas < 1:
        raise InputError(
            f"stages, micro-batches and replicas must be at least 1, got {stages}, {micro_batches} and {replicas}"
        )
    if kind not in ("gpipe", "1f1b"):
        raise InputError(f"pipeline schedule must be 'gpipe' or '1f1b', not {kind!r}")
    f_parts, b_parts = partition(step, stages)
    opt = [o for o in step.ops if o.stage == "optimizer"]
    params = [sum(o.param_bytes for o in part) for part in f_parts]
    all_params = sum(params) or 1
    m = micro_batches
    programs = []
    for s in range(stages):
        b = ProgramBuilder(f"stage{s}")
        prev: list[int] = []
        nid = 0

        def add(k: OpKind, name: str, deps: list[int], **kw: object) -> int:
            nonlocal nid
            nid += 1
            return b.add(k, name, data_deps=deps, node_id=nid, **kw)

        def fused(label: str, ops: list[StepOp], deps: list[int], scale: float) -> list[int]:
            segs, t = [], 0
            for o in ops:
                d = max(1, math.ceil(o.ns * scale))
                segs.append((t, d, o.name, "compute", {"stage": o.stage, "layer": o.layer}))
                t += d
            if not segs:
                return deps
            return [add(OpKind.COMPUTE, label, deps, duration_ns=t, extra={SEGMENTS: tuple(segs)})]

        up = max(1, (_boundary_bytes(f_parts[s - 1]) if s > 0 else 0) // m)
        down = max(1, _boundary_bytes(f_parts[s]) // m)
        # transfers are rows of the per-layer report of their own: the stage boundary they cross
        edge_in = {"layer": f"pp stages {s - 1}-{s} transfers"}
        edge_out = {"layer": f"pp stages {s}-{s + 1} transfers"}
        for forward, mb, _chunk in schedule(kind, stages, s, m):
            tag = mb * 2 + (0 if forward else 1)
            if forward:
                if s > 0:
                    prev = prev + [
                        add(
                            OpKind.RECV,
                            f"recv activation mb{mb}",
                            list(prev),
                            peer=-replicas,
                            size_bytes=up,
                            tag=tag * stages + s,
                            stream="pp",
                            extra=edge_in,
                        )
                    ]
                prev = fused(f"F mb{mb}", f_parts[s], prev, 1 / m)
                if s < stages - 1:
                    add(
                        OpKind.SEND,
                        f"send activation mb{mb}",
                        list(prev),
                        peer=replicas,
                        size_bytes=down,
                        tag=tag * stages + s + 1,
                        stream="pp",
                        extra=edge_out,
                    )
            else:
                if s < stages - 1:
                    prev = prev + [
                        add(
                            OpKind.RECV,
                            f"recv gradient mb{mb}",
                            list(prev),
                            peer=replicas,
                            size_bytes=down,
                            tag=tag * stages + s,
                            stream="pp",
                            extra=edge_out,
                        )
                    ]
                prev = fused(f"B mb{mb}", b_parts[s], prev, 1 / m)
                if s > 0:
                    add(
                        OpKind.SEND,
                        f"send gradient mb{mb}",
                        list(prev),
                        peer=-replicas,
                        size_bytes=up,
                        tag=tag * stages + s - 1,
                        stream="pp",
                        extra=edge_in,
                    )
        if replicas > 1 and params[s] > 0:
            prev = [
                add(
                    OpKind.COLLECTIVE,
                    f"stage {s} gradient all-reduce ({params[s]:,} B)",
                    prev,
                    collective=int(CollectiveKind.ALL_REDUCE),
                    size_bytes=params[s],
                    group="dp",
                    stream="dp",
                    extra={"layer": f"dp all-reduce (stage {s})", "stage": "backward"},
                )
            ]
        share = params[s] / all_params
        if opt and share > 0:
            fused("optimizer step", opt, prev, share)
        prog = b.build()
        prog.relative_peers = True  # peers are the stage before and after, in the same replica
        programs.append(prog)
    n = stages * replicas
    stage_of = np.arange(n) // replicas
    groups = (
        [Group("dp", tuple(range(st * replicas, (st + 1) * replicas))) for st in range(stages)] if replicas > 1 else []
    )
    dp = f", dp {replicas}" if replicas > 1 else ""
    # no representatives: a stage's replicas run alike only when the fabric places them alike
    # (they may straddle servers), so every rank is simulated
    return Workload(programs, stage_of, groups, f"{step.source} (pp {stages}{dp}, {m} micro-batches, {kind})")
