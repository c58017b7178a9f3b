"""Turn (model, layout, GPU) into a :class:`~podsim.workload.Workload`: one training iteration.

Ranks are numbered as Megatron does: TP fastest, then CP, then DP, then PP, so
``rank = tp + TP (cp + CP (dp + DP pp))``.  Every rank of a pipeline stage runs the same
program (peers are relative offsets), and all ranks of a stage are equivalent: the workload
names the stage's TP-, CP- and DP-rank-0 GPU as their representative.

A stage's program follows its pipeline schedule (:mod:`podsim.workload.pipeline_schedules`).  Each pass
receives its input from the neighbouring stage (point-to-point, its own stream), runs its
layers (compute and blocking TP / CP / EP collectives, :mod:`podsim.llm.ops`), and sends its
output on.  Gradients are reduced over the data-parallel group in buckets as the last
micro-batch's backward produces them (every micro-batch's with ZeRO-2, which keeps only its
gradient shard), on a separate stream, overlapping the rest of the backward; then the
optimizer steps.  A sharded optimizer's updated weights are all-gathered bucket by bucket
under the next forward (``Layout.overlap_param_gather``, as this iteration's first forward
waits for the previous step's), or after the optimizer step.  Compute that overlaps these
data-parallel collectives runs slower (:meth:`StageProgram._dp_interference`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..compute.model import KernelTimer
from ..workload import SEGMENTS, CollectiveKind, GroupTable, OpKind, ProgramBuilder, Workload
from ..workload.pipeline_schedules import schedule
from .layout import Layout
from .memory import (
    embedding_params,
    expert_params,
    layer_params,
    output_params,
    stage_expert_params,
    stage_layers,
    stage_params,
)
from .model import ModelConfig
from .ops import LayerCosts, PassStep

BUCKET_PARAMS = 40_000_000  #: Megatron's default gradient bucket (elements)

#: Decides which blocking collectives are folded into fused ops: ``fold(kind, bytes, group)``
#: returns the collective's closed-form time (ns), or None to keep it a collective op.
Folder = Callable[[CollectiveKind, int, str], "int | None"]


def rank_of(layout: Layout, tp: int, cp: int, dp: int, pp: int) -> int:
    """Global rank of a (TP, CP, DP, PP) position."""
    return tp + layout.tp * (cp + layout.cp * (dp + layout.dp * pp))


def build_groups(layout: Layout) -> GroupTable:
    """TP, CP, DP (data-parallel with context-parallel ranks: DP x CP) and PP groups of a
    layout, and its experts' groups: inside a pipeline stage the ``tp * cp * dp`` ranks are
    renumbered ``etp + ETP (ep + EP edp)`` (Megatron-Core's expert rank generator) and grouped
    into ETP, EP and expert data-parallel (``edp``) groups, each where it has two ranks or more
    and differs from the dense groups.  Kept as blocks of rank rows (a million GPUs have
    hundreds of thousands of groups; the engine reads a few)."""
    t, c, d, p = layout.tp, layout.cp, layout.dp, layout.pp
    groups = GroupTable()
    # every rank at its (PP, DP, CP, TP) position (rank_of), the groups read off it in arrays
    grid = np.arange(p * d * c * t, dtype=np.int64).reshape(p, d, c, t)
    for pp in range(p):
        groups.add("tp", grid[pp].reshape(d * c, t))
        for tp in range(t):
            if c > 1:
                groups.add("cp", grid[pp, :, :, tp])
            # gradients are reduced, and optimizer states / ZeRO-3 parameters sharded, over
            # DP x CP (Megatron's data-parallel group with context parallelism)
            groups.add("dp", grid[pp, :, :, tp].reshape(1, d * c))
    et, e, ed = layout.expert_tp, layout.ep, layout.edp
    stride = t * c * d
    etp, ep = et > 1 and et != t, e > 1
    for pp in range(p):
        # a stage's rank at expert position (edp x, ep y, etp i): base + i + ET (y + EP x)
        ranks = pp * stride + np.arange(ed * e * et, dtype=np.int64).reshape(ed, e, et)
        if etp and ep:  # each expert data-parallel position's ETP groups, then its EP groups
            for x in range(ed):
                groups.add("etp", ranks[x])
                groups.add("ep", ranks[x].T)
        elif etp:
            groups.add("etp", ranks.reshape(ed * e, et))
        elif ep:
            groups.add("ep", ranks.transpose(0, 2, 1).reshape(ed * et, e))
        if layout.expert_grads_apart and ed > 1:
            groups.add("edp", ranks.transpose(2, 1, 0).reshape(et * e, ed))
    if p > 1:  # by TP, then CP, then DP position
        groups.add("pp", grid.transpose(3, 2, 1, 0).reshape(t * c * d, p))
    return groups


class StageProgram:
    """Builds one pipeline stage's program."""

    def __init__(
        self,
        model: ModelConfig,
        layout: Layout,
        costs: LayerCosts,
        stage: int,
        fold: Folder | None = None,
        estimate: Folder | None = None,
    ) -> None:
        self.m, self.lay, self.costs, self.s = model, layout, costs, stage
        self.fold = fold
        self.fused: list[tuple[int, int, str, str]] = []  # pending (offset, ns, name, category)
        self.fused_ns = 0
        self.fused_flops = 0.0
        self.beside: int | None = None  # an overlapped collective op to join
        self.beside_fused: tuple[int, str, str] | None = None  # the same, fused: (ns, name, group)
        self.b = ProgramBuilder(f"stage{stage}")
        #: what the next op waits for: the last op, plus a receive or an overlapped collective
        #: that must also be done (a join without a no-op, whose instant completion would not
        #: wake its successor under ASTRA-sim's issue rules)
        self.prev: list[int] = []
        self.stride = layout.tp * layout.cp * layout.dp
        self.nodes = 0
        self.pending_dp: list[int] = []
        self.bucket = 0.0
        #: the routed experts' gradients, when reduced apart over the expert data-parallel group
        self.ebucket = 0.0
        self.act_bytes = costs.act_bytes // (layout.tp if layout.sequence_parallel else 1)
        #: compute slows by this factor while data-parallel collectives run beside it (the
        #: last micro-batch's backward: gradient reduce-scatters; the first forward: the
        #: overlapped parameter all-gathers), see :meth:`_dp_interference`
        self.slow = 1.0
        self.slow_bwd, self.slow_fwd = self._dp_interference(estimate)
        self.param_gathers: dict[int, list[int]] = {}  # first layer of a bucket -> its all-gather ops
        self.z3_gathers: dict[int | str, list[int]] = {}  # ZeRO-3: prefetched unit -> its all-gathers
        #: (id of a pass's steps, slowdown) -> (the steps, and the parts, ns and flops it adds to the
        #: pending fused op, or None where it does more), see :meth:`steps`
        self._passes: dict[tuple[int, float], tuple[list[PassStep], tuple | None]] = {}

    def _add(self, kind: OpKind, name: str, deps: list[int], **kw: object) -> int:
        self.nodes += 1
        return self.b.add(kind, name, data_deps=deps, node_id=self.nodes, **kw)

    def _flush(self) -> None:
        """Emit the pending fused steps as one compute op (its parts kept as ``segments``)."""
        if not self.fused:
            return
        segs, total, flops = tuple(self.fused), self.fused_ns, self.fused_flops
        self.fused, self.fused_ns, self.fused_flops = [], 0, 0.0
        name = segs[0][2] if len(segs) == 1 else f"{segs[0][2]} .. {segs[-1][2]}"
        extra = {SEGMENTS: segs} if len(segs) > 1 or segs[0][3] != "compute" else None
        self.nodes += 1
        self.prev = [
            self.b.add(
                OpKind.COMPUTE,
                name,
                data_deps=self.prev,
                node_id=self.nodes,
                duration_ns=total,
                flops=flops,
                extra=extra,
            )
        ]

    def chain(self, kind: OpKind, name: str, extra: list[int] | None = None, **kw: object) -> int:
        self._flush()
        op = self._add(kind, name, self.prev + (extra or []), **kw)
        self.prev = [op]
        return op

    def steps(self, steps: list[PassStep], label: str) -> None:
        """:meth:`step` each of ``steps`` (a layer pass, its ops named ``label`` and the step's
        name).  A pass that only adds parts to the pending fused op (every step fused, nothing
        overlapped left over) adds the same parts every time it runs at the same slowdown, but
        for their names: the first run's parts are kept and copied after that."""
        if self.fold is None or self.beside is not None or self.beside_fused is not None:
            for st in steps:
                self.step(st, label)
            return
        key = (id(steps), self.slow)
        hit = self._passes.get(key)
        if hit is None:
            ns0, n0, nodes0 = self.fused_ns, len(self.fused), self.nodes
            for st in steps:
                self.step(st, label)
            if self.nodes != nodes0 or self.beside is not None or self.beside_fused is not None:
                self._passes[key] = (steps, None)  # not a pure fused pass: always step by step
                return
            cut = len(label) + 1
            parts = [(off - ns0, d, " " + name[cut:], cat) for off, d, name, cat in self.fused[n0:]]
            flops = [st.flops for st in steps if st.collective is None and st.ns > 0]
            self._passes[key] = (steps, (parts, self.fused_ns - ns0, flops))
            return
        if hit[1] is None:
            for st in steps:
                self.step(st, label)
            return
        parts, total, flops = hit[1]
        ns0 = self.fused_ns
        self.fused.extend([(ns0 + off, d, label + name, cat) for off, d, name, cat in parts])
        self.fused_ns = ns0 + total
        for f in flops:  # one by one, as step() adds them: the same float sum
            self.fused_flops += f

    def step(self, st: PassStep, label: str) -> None:
        if st.collective is None:
            ns = st.ns
            if ns > 0 and self.slow != 1.0:
                ns = ns * self.slow
            if ns > 0:
                if self.fold is not None and self.beside is None:
                    d = max(1, int(math.ceil(ns)))
                    self.fused.append((self.fused_ns, d, f"{label} {st.name}", "compute"))
                    if self.beside_fused is not None:  # the overlapped collective, from the same start
                        t, name, group = self.beside_fused
                        self.fused.append((self.fused_ns, t, name, group))
                        d = max(d, t)
                        self.beside_fused = None
                    self.fused_ns += d
                    self.fused_flops += st.flops
                    return
                self.chain(OpKind.COMPUTE, f"{label} {st.name}", duration_ns=max(1, int(math.ceil(ns))), flops=st.flops)
                if self.beside is not None:  # the next op waits for the collective alongside too
                    self.prev.append(self.beside)
                    self.beside = None
        else:
            t = self.fold(st.collective, st.nbytes, st.group) if self.fold is not None else None
            if t is not None:
                if st.overlap:
                    self.beside_fused = (t, f"{label} {st.name}", st.group)
                    return
                self.fused.append((self.fused_ns, t, f"{label} {st.name}", st.group))
                self.fused_ns += t
                return
            if st.overlap:
                self._flush()
                self.beside = self._add(
                    OpKind.COLLECTIVE,
                    f"{label} {st.name}",
                    list(self.prev),
                    collective=int(st.collective),
                    size_bytes=st.nbytes,
                    group=st.group,
                    stream=st.group,
                )
                return
            self.chain(
                OpKind.COLLECTIVE,
                f"{label} {st.name}",
                collective=int(st.collective),
                size_bytes=st.nbytes,
                group=st.group,
                stream=st.group,
            )

    def _tag(self, mb: int, vstage: int, forward: bool) -> int:
        return (mb * self.lay.pp * self.lay.vpp + vstage) * 2 + (0 if forward else 1)

    def _peer(self, vstage: int) -> int:
        """Rank offset of the pipeline rank that runs virtual stage ``vstage``."""
        return (vstage % self.lay.pp - self.s) * self.stride

    def recv(self, mb: int, vstage: int, src_vstage: int, forward: bool) -> int:
        self._flush()
        return self._add(
            OpKind.RECV,
            f"recv {'activation' if forward else 'gradient'} mb{mb}",
            list(self.prev),
            peer=self._peer(src_vstage),
            size_bytes=self.act_bytes,
            tag=self._tag(mb, vstage, forward),
            stream="pp",
        )

    def send(self, mb: int, dst_vstage: int, forward: bool) -> None:
        self._flush()
        self._add(
            OpKind.SEND,
            f"send {'activation' if forward else 'gradient'} mb{mb}",
            list(self.prev),
            peer=self._peer(dst_vstage),
            size_bytes=self.act_bytes,
            tag=self._tag(mb, dst_vstage, forward),
            stream="pp",
        )

    def dp_grads(self, params: float, experts: float = 0.0, force: bool = False) -> None:
        """Add gradients to their buckets and reduce a bucket once it is full (every bucket
        with ``force``): the dense parameters' (``params``) over DP x CP, the routed experts'
        (``experts``) over the expert data-parallel group."""
        lay = self.lay
        if lay.dp * lay.cp > 1:
            self.bucket += params
            if self._full(self.bucket, lay.dp * lay.cp, force):
                self._reduce(self.bucket, "dp")
                self.bucket = 0.0
        if self.lay.expert_grads_apart and lay.edp > 1:
            self.ebucket += experts
            if self._full(self.ebucket, lay.edp, force):
                self._reduce(self.ebucket, "edp")
                self.ebucket = 0.0

    @staticmethod
    def _full(bucket: float, ranks: int, force: bool) -> bool:
        """Whether a gradient bucket of ``bucket`` parameters reduced over ``ranks`` is due."""
        return bucket > 0 and (force or bucket >= max(BUCKET_PARAMS, 1_000_000 * ranks))

    def _reduce(self, params: float, group: str) -> None:
        lay = self.lay
        sharded = lay.distributed_optimizer or lay.zero >= 1
        kind = CollectiveKind.REDUCE_SCATTER if sharded else CollectiveKind.ALL_REDUCE
        nbytes = int(params * lay.grad_reduce_bytes * (self.comm_bwd if self.slow != 1.0 else 1.0))
        self._flush()
        name = f"{'expert ' if group == 'edp' else ''}dp grad {'reduce-scatter' if sharded else 'all-reduce'}"
        self.pending_dp.append(self._dp_collective(name, kind, nbytes, group, list(self.prev)))

    def _dp_collective(self, name: str, kind: CollectiveKind, nbytes: int, group: str, deps: list[int]) -> int:
        """A data-parallel collective (``group``: ``dp`` or ``edp``) of ``nbytes`` on the DP stream,
        after ``deps``; its op id."""
        return self._add(
            OpKind.COLLECTIVE, name, deps, collective=int(kind), size_bytes=nbytes, group=group, stream="dp"
        )

    def _grads(self, i: int) -> tuple[float, float]:
        """(dense, routed-expert) parameters of layer ``i`` whose gradients go to the DP x CP
        and the expert data-parallel buckets."""
        total = self._layer_params(i)
        e = expert_params(self.m, self.lay, i) if self.lay.expert_grads_apart else 0.0
        return total - e, e

    def build(self) -> ProgramBuilder:
        m, lay, costs, s = self.m, self.lay, self.costs, self.s
        p, v = lay.pp, lay.vpp
        last_v = p * v - 1
        mbs = lay.num_microbatches
        zero3 = lay.zero >= 3 and lay.dp * lay.cp > 1
        if self._gathers_overlapped():
            self._issue_param_gathers()
        for forward, mb, chunk in schedule(lay.schedule, p, s, mbs, v):
            g = chunk * p + s
            layers = lay.chunk_layers(m, s, chunk)
            label = f"{'F' if forward else 'B'} mb{mb}"
            if forward:
                self.slow = self.slow_fwd if mb == 0 else 1.0
                if g > 0:
                    r = self.recv(mb, g, g - 1, True)
                    self.prev = self.prev + [r]
                else:
                    if zero3:
                        self._gather_params("emb", label, layers[0] if layers else None)
                    self.steps(costs.embedding_steps(False), label)
                for n, i in enumerate(layers):
                    if zero3:
                        self._gather_params(i, label, layers[n + 1] if n + 1 < len(layers) else None)
                    elif mb == 0 and i in self.param_gathers:  # the overlapped parameter all-gathers
                        self._flush()
                        self.prev = self.prev + self.param_gathers[i]
                    self.steps(costs.forward(m.is_moe_layer(i)), f"{label} L{i}")
                if g == last_v:
                    if zero3:
                        self._gather_params("out", label)
                    self.steps(costs.output_steps(False), label)
                else:
                    self.send(mb, g + 1, True)
            else:
                if g < last_v:
                    r = self.recv(mb, g, g + 1, False)
                    self.prev = self.prev + [r]
                else:
                    if zero3:
                        self._gather_params("out", label)
                    self.steps(costs.output_steps(True), label)
                    if zero3:
                        self._scatter_grads("out", label)
                last_mb = mb == mbs - 1
                # ZeRO-2 / FSDP without resharding keep only their gradient shard: every
                # micro-batch's gradients are reduce-scattered as its backward produces them
                reduce_now = (last_mb or lay.zero == 2) and lay.overlap_grad_reduce
                self.slow = self.slow_bwd if reduce_now else 1.0
                order = list(reversed(layers))
                for n, i in enumerate(order):
                    if zero3:
                        self._gather_params(i, label, order[n + 1] if n + 1 < len(order) else None)
                    if lay.recomputed_layer(m, s, chunk, i):
                        self.steps(costs.forward(m.is_moe_layer(i)), f"{label} L{i} recompute")
                    self.steps(costs.backward(m.is_moe_layer(i)), f"{label} L{i}")
                    if zero3:
                        self._scatter_grads(i, label)
                    elif reduce_now:
                        self.dp_grads(*self._grads(i))
                    elif last_mb:  # reduced after the backward
                        dense, experts = self._grads(i)
                        self.bucket += dense
                        self.ebucket += experts
                if g == 0:
                    if zero3:
                        self._gather_params("emb", label)
                    self.steps(costs.embedding_steps(True), label)
                    if zero3:
                        self._scatter_grads("emb", label)
                else:
                    self.send(mb, g - 1, False)
        self.slow = 1.0
        self._finish()
        return self.b

    def _layer_params(self, i: int) -> float:
        return layer_params(self.m, self.lay, i)

    def _gather_params(self, i: int | str, label: str, prefetch: int | str | None = None) -> None:
        """ZeRO-3 / FSDP: layer ``i`` waits for its weights' all-gathers (issued now if no
        prefetch did), then the next layer's (``prefetch``) are issued on the DP stream to run
        under layer ``i``'s compute, as FSDP's and DeepSpeed's prefetching do."""
        ops = self.z3_gathers.pop(i, None)
        if ops is None:
            ops = self._zero3_ops(i, label, CollectiveKind.ALL_GATHER, "param all-gather")
        self._flush()
        self.prev = self.prev + ops
        if prefetch is not None and prefetch not in self.z3_gathers:
            self.z3_gathers[prefetch] = self._zero3_ops(prefetch, label, CollectiveKind.ALL_GATHER, "param all-gather")

    def _unit(self, i: int | str) -> tuple[str, int, int]:
        """A ZeRO-3 unit's name and its bf16 weight bytes on one GPU: (name, the bytes sharded
        over DP x CP, the routed experts' bytes sharded over the expert data-parallel ranks).  A
        unit is a layer, or the input embedding (``"emb"``) / the output layer (``"out"``)."""
        if i == "emb":
            return "embedding", int(embedding_params(self.m, self.lay) * 2), 0
        if i == "out":
            return "output layer", int(output_params(self.m, self.lay) * 2), 0
        dense, experts = self._grads(int(i))
        return f"L{i}", int(dense * 2), int(experts * 2)

    def _zero3_ops(self, i: int | str, label: str, kind: CollectiveKind, what: str) -> list[int]:
        """Unit ``i``'s ZeRO-3 collectives on the DP stream: its dense weights over DP x CP and,
        where the routed experts are apart (EP, or an ETP other than TP), theirs over the expert
        data-parallel ranks that hold the same experts (none where that group is one rank)."""
        self._flush()
        name, dense, experts = self._unit(i)
        ops = []
        for group, nbytes, part in (("dp", dense, ""), ("edp", experts, " experts")):
            if nbytes <= 0 or (group == "edp" and self.lay.edp == 1):
                continue
            ops.append(self._dp_collective(f"{label} {name}{part} zero-3 {what}", kind, nbytes, group, list(self.prev)))
        return ops

    def _scatter_grads(self, i: int | str, label: str) -> None:
        self.pending_dp.extend(self._zero3_ops(i, label, CollectiveKind.REDUCE_SCATTER, "grad reduce-scatter"))

    def _finish(self) -> None:
        self._flush()
        lay, m = self.lay, self.m
        params = stage_params(m, lay, self.s)
        experts = stage_expert_params(m, lay, self.s) if self.lay.expert_grads_apart else 0.0
        dense = params - experts
        rest = params - sum(self._layer_params(i) for i in stage_layers(m, lay, self.s))
        if lay.zero < 3:
            self.dp_grads(rest, force=True)  # embeddings / output layer, and what is left
        sharded = dense / (lay.dp * lay.cp) + experts / lay.edp
        shard = sharded if (lay.distributed_optimizer or lay.zero) else params
        local = sharded if lay.zero >= 3 else params
        self.chain(
            OpKind.COMPUTE,
            "optimizer step",
            self.pending_dp,
            duration_ns=max(1, int(math.ceil(self.costs.optimizer(shard, local).ns))),
        )
        if self._sharded() and not self._gathers_overlapped():
            for group, n in (("dp", dense), ("edp", experts)):
                if n > 0 and (lay.dp * lay.cp if group == "dp" else lay.edp) > 1:
                    self.chain(
                        OpKind.COLLECTIVE,
                        f"{'expert ' if group == 'edp' else ''}dp param all-gather",
                        collective=int(CollectiveKind.ALL_GATHER),
                        size_bytes=int(n * 2),
                        group=group,
                        stream="dp",
                    )

    # -- the distributed optimizer's parameter all-gather and DP interference ----------------

    def _sharded(self) -> bool:
        lay = self.lay
        return (lay.distributed_optimizer or lay.zero in (1, 2)) and lay.dp * lay.cp > 1

    def _gathers_overlapped(self) -> bool:
        return self._sharded() and self.lay.overlap_param_gather

    def _issue_param_gathers(self) -> None:
        """Megatron-Core's --overlap-param-gather: the previous step's updated weights are
        all-gathered bucket by bucket (bf16, in forward order) on the DP stream as this
        iteration starts -- the dense parameters over DP x CP, the routed experts' over the
        expert data-parallel group, each in buckets of its own; the first micro-batch's forward
        of a layer waits for the buckets that begin with it."""
        lay, m = self.lay, self.m
        layers = list(stage_layers(m, lay, self.s))
        params = stage_params(m, lay, self.s)
        rest = params - sum(self._layer_params(i) for i in layers)
        tracks = [["dp", lay.dp * lay.cp, rest, None]]  # group, ranks, bucket, its first layer
        if self.lay.expert_grads_apart and lay.edp > 1:
            tracks.append(["edp", lay.edp, 0.0, None])
        for n, i in enumerate(layers):
            dense, experts = self._grads(i)
            for track, add in zip(tracks, (dense, experts)):
                group, ranks, bucket, first = track
                if first is None and add > 0:
                    first = i
                bucket += add
                if first is not None and (bucket >= max(BUCKET_PARAMS, 1_000_000 * ranks) or n == len(layers) - 1):
                    if ranks > 1:
                        name = f"{'expert ' if group == 'edp' else ''}dp param all-gather L{first}"
                        op = self._dp_collective(
                            name, CollectiveKind.ALL_GATHER, int(bucket * 2 * self.comm_fwd), group, []
                        )
                        self.param_gathers.setdefault(first, []).append(op)
                    bucket, first = 0.0, None
                track[2], track[3] = bucket, first

    def _dp_interference(self, estimate: Folder | None) -> tuple[float, float]:
        """(backward, forward) compute slowdown factors while DP collectives run beside it:
        ``1 + nccl_compute_slowdown x duty``, the duty being the collectives' closed-form time
        over the compute they overlap (one micro-batch's backward for the gradient
        reduce-scatters, its forward for the parameter all-gathers), at most 1.  The
        collectives slow too: their bytes are scaled by ``1 + nccl_comm_slowdown x share``, the
        share of their time that compute runs beside them (``comm_bwd`` / ``comm_fwd``)."""
        lay = self.lay
        self.comm_bwd = self.comm_fwd = 1.0
        if estimate is None or lay.dp * lay.cp == 1 or lay.zero >= 3:
            return 1.0, 1.0
        a = self.costs.stack.nccl_compute_slowdown
        params = stage_params(self.m, lay, self.s)
        experts = stage_expert_params(self.m, lay, self.s) if self.lay.expert_grads_apart else 0.0
        params -= experts
        sharded = lay.distributed_optimizer or lay.zero >= 1
        kind = CollectiveKind.REDUCE_SCATTER if sharded else CollectiveKind.ALL_REDUCE
        layers = [i for c in range(lay.vpp) for i in lay.chunk_layers(self.m, self.s, c)]
        fwd = sum(st.ns for i in layers for st in self.costs.forward(self.m.is_moe_layer(i)) if st.collective is None)
        bwd = sum(st.ns for i in layers for st in self.costs.backward(self.m.is_moe_layer(i)) if st.collective is None)

        b = self.costs.stack.nccl_comm_slowdown

        def duty(k: CollectiveKind, per_param: float, window: float) -> tuple[float, float]:
            t = estimate(k, int(params * per_param), "dp") or 0
            if experts > 0 and lay.edp > 1:
                t += estimate(k, int(experts * per_param), "edp") or 0
            if t <= 0 or window <= 0:
                return 0.0, 0.0
            return min(1.0, t / window), min(1.0, window / t)

        slow_bwd = slow_fwd = 1.0
        if lay.overlap_grad_reduce:
            d, share = duty(kind, lay.grad_reduce_bytes, bwd)
            slow_bwd, self.comm_bwd = 1 + a * d, 1 + b * share
        if self._gathers_overlapped():
            d, share = duty(CollectiveKind.ALL_GATHER, 2, fwd)
            slow_fwd, self.comm_fwd = 1 + a * d, 1 + b * share
        return slow_bwd, slow_fwd


def generate(
    model: ModelConfig,
    layout: Layout,
    cm: KernelTimer,
    flash_attention: bool | None = None,
    costs: LayerCosts | None = None,
    fold: Folder | None = None,
    estimate: Folder | None = None,
) -> Workload:
    """One training iteration of ``model`` under ``layout`` on GPUs timed by ``cm`` (or by
    ``costs``, which gives every layer pass's steps).

    ``fold``: fuse each run of compute steps and blocking collectives whose time ``fold``
    knows in closed form (tensor parallelism inside a server) into one compute op whose
    ``extras[SEGMENTS]`` keep the parts: the same timeline, an order of magnitude fewer
    ops to simulate.

    Raises:
        InputError: when the layout does not fit the model (see :meth:`Layout.check`).
    """
    layout.check(model)
    flash = layout.flash_attention if flash_attention is None else flash_attention
    costs = costs or LayerCosts(model, layout, cm, flash, comm_ns=estimate)
    programs = []
    for s in range(layout.pp):
        prog = StageProgram(model, layout, costs, s, fold, estimate).build().build()
        prog.relative_peers = True
        programs.append(prog)
    n = layout.gpus
    stride = layout.tp * layout.cp * layout.dp
    stage_of = np.arange(n) // stride
    reps = stage_of * stride
    w = Workload(
        programs,
        stage_of.astype(np.int32),
        build_groups(layout),
        f"{model.name} tp{layout.tp} pp{layout.pp} dp{layout.dp}",
    )
    w.representatives = reps
    return w
