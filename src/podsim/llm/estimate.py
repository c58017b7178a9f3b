"""A closed-form estimate of one training iteration, for screening many layouts fast
(``podsim search``): the same kernel times, collective times and pipeline schedule as
:func:`podsim.api.train.simulate_training` with the analytical backend, without building the
workload or running the event engine.

What it keeps from the simulation: each pipeline stage's passes in its schedule's order
(:mod:`podsim.workload.pipeline_schedules`), a pass lasting the sum of its layers' fused steps
(compute steps rounded up to whole ns and slowed while data-parallel collectives run beside
them, folded TP / CP / EP collectives, as :mod:`podsim.llm.generate` fuses them); a pass starts
when the stage is free and its input has arrived from the neighbouring stage (the congestion-free
point-to-point time of the activation, plus the rendezvous handshake).  What it simplifies: the
data-parallel gradient buckets (their reduction overlaps the last micro-batch's backward and only
what does not fit in it is exposed), the overlapped parameter all-gathers (the first forward
waits for them as a whole) and the engine's one-op-per-resource issue rules.  The estimate is a
screen: ``podsim search`` simulates the best estimated layouts exactly afterwards; the accuracy
against the engine is measured in tests/test_search_estimate.py and benchmarks/bench_search.py.

Everything that layouts share is computed once per :class:`LayoutEstimator`: the compute model
per dtype, the fabric per GPU count, collective times per (group, kind, bytes), the layer steps
per (TP, CP, EP, micro-batch, sequence length, recomputation, precision ...) and the pass times.
Collectives above 1 MiB are timed at sizes on a geometric grid (4 per doubling) and
interpolated between them, so that every layout's buckets reuse the same few selections.
Units: ns.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence

from ..collectives.nccl.planner import CollectivePlanner, FabricDelay
from ..compute.model import ComputeModel
from ..hardware.cluster import ClusterSpec, shared_fabric
from ..hardware.gpu import GpuSpec
from ..network.fabric import Fabric
from ..workload import CollectiveKind
from ..workload.pipeline_schedules import schedule
from .generate import BUCKET_PARAMS, Folder, StageProgram
from .layout import Layout
from .memory import stage_expert_params, stage_params
from .model import ModelConfig
from .ops import LayerCosts, PassStep
from .stack import Stack
from .training import group_ranks

_GRID_FROM = 1 << 20  #: collectives above this size are timed on a grid of sizes (B)
_PER_OCTAVE = 4  #: grid points per doubling of the size
_HANDSHAKE_BYTES = 8192  #: the rendezvous control message before a pipeline send (as the engine's)


_FIRST_FORWARD, _LAST_BACKWARD = 1, 2


@functools.lru_cache(maxsize=1024)
def _plan(kind: str, p: int, m: int, v: int) -> tuple[tuple[list[int], list[int], list[int], list[int]], ...]:
    """Each pipeline rank's passes in schedule order as flat lists (a pure function of the
    schedule, memoized: layouts share it): the pass's id (``((mb p v + g) << 1) | backward``
    for virtual stage ``g``), the id of the pass whose output it waits for (-1: none), its
    duration class (``(backward v + chunk) << 1 | special``: special is the first micro-batch's
    forward, the last one's backward) and a flag (:data:`_FIRST_FORWARD`, :data:`_LAST_BACKWARD`
    of the last chunk, or 0)."""
    last_v, out = p * v - 1, []
    for s in range(p):
        own, dep, cls, flag = [], [], [], []
        for forward, mb, chunk in schedule(kind, p, s, m, v):
            g = chunk * p + s
            own.append(((mb * p * v + g) << 1) | (0 if forward else 1))
            if forward:
                dep.append(((mb * p * v + g - 1) << 1) if g > 0 else -1)
            else:
                dep.append((((mb * p * v + g + 1) << 1) | 1) if g < last_v else -1)
            special = mb == 0 if forward else mb == m - 1
            cls.append((((0 if forward else 1) * v + chunk) << 1) | int(special))
            flag.append(
                _FIRST_FORWARD
                if forward and special
                else _LAST_BACKWARD
                if not forward and special and chunk == v - 1
                else 0
            )
        out.append((own, dep, cls, flag))
    return tuple(out)


class LayoutEstimator:
    """Estimates iteration times of many layouts of one model on one GPU and cluster, sharing
    kernel and collective times between them.

    ``stack``: the step parameters kernels are timed with, as the simulation takes them:
    ``Stack.for_gpu(gpu.key, software)`` under a software stack (its relative efficiencies,
    elementwise traffic and host time); default the GPU's own (Megatron-Core's).  The stack's
    framework rules are the layouts' own (:func:`podsim.stacks.rules.apply_rules` fills them).
    """

    def __init__(self, model: ModelConfig, gpu: GpuSpec, cluster: ClusterSpec, stack: Stack | None = None) -> None:
        self.model = model
        self.gpu = gpu
        self.cluster = cluster
        self.stack = stack or Stack.for_gpu(gpu.key)
        self._cms: dict[str, ComputeModel] = {}
        self._fabrics: dict[int, tuple[Fabric, CollectivePlanner, FabricDelay]] = {}
        self._costs: dict[tuple, LayerCosts] = {}
        self._pass: dict[tuple, int] = {}
        self._curves: dict[tuple, int] = {}  # (gpus, ranks, kind, grid point) -> ns

    # -- shared pieces -------------------------------------------------------------------------

    def _fabric(self, gpus: int) -> tuple[Fabric, CollectivePlanner, FabricDelay]:
        hit = self._fabrics.get(gpus)
        if hit is None:
            fabric = shared_fabric(self.cluster, gpus)
            planner = CollectivePlanner.shared(fabric, self.cluster.nccl)
            hit = self._fabrics[gpus] = (fabric, planner, FabricDelay(fabric, planner.timer))
        return hit

    def _compute_model(self, dtype: str) -> ComputeModel:
        cm = self._cms.get(dtype)
        if cm is None:
            cm = self._cms[dtype] = ComputeModel.for_gpu(self.gpu, dtype)
        return cm

    def folder(self, layout: Layout) -> Folder:
        """A layout's closed-form collective time, ``(kind, bytes, group) -> ns | None``, with the
        plans shared across layouts of the same GPU count."""
        _, planner, _ = self._fabric(layout.gpus)
        curves = self._curves

        def exact(ranks: tuple[int, ...], kind: CollectiveKind, nbytes: int) -> int:
            return planner.plan(ranks, kind, nbytes)[1]

        groups = {g: group_ranks(layout, g) for g in ("tp", "cp", "ep", "etp", "dp", "edp")}

        def timed(kind: CollectiveKind, nbytes: int, group: str) -> int | None:
            ranks = groups.get(group)
            if ranks is None or nbytes <= 0:
                return None
            if nbytes <= _GRID_FROM:
                return exact(ranks, kind, nbytes)
            # between two sizes of a geometric grid (2^(1/4) apart), linearly: the collective's
            # time is close to affine in bytes there, and the grid's times are shared by every
            # layout with the same group
            x = math.log2(nbytes) * _PER_OCTAVE
            lo = math.floor(x)
            a, b = int(2 ** (lo / _PER_OCTAVE)), int(2 ** ((lo + 1) / _PER_OCTAVE))
            ta, tb = (curves.get((layout.gpus, ranks, kind, k)) for k in (lo, lo + 1))
            if ta is None:
                ta = curves[(layout.gpus, ranks, kind, lo)] = exact(ranks, kind, a)
            if tb is None:
                tb = curves[(layout.gpus, ranks, kind, lo + 1)] = exact(ranks, kind, b)
            return int(round(ta + (tb - ta) * (nbytes - a) / max(1, b - a)))

        return timed

    def costs(self, layout: Layout) -> LayerCosts:
        """The layer steps of ``layout`` (shared by layouts that differ only in PP, VPP, DP or
        the optimizer's sharding)."""
        key = (
            layout.gpus,
            layout.tp,
            layout.cp,
            layout.ep,
            layout.etp,
            layout.micro_batch,
            layout.seq_len,
            layout.sequence_parallel,
            layout.recompute,
            tuple(layout.recompute_modules),
            layout.precision,
            layout.flash_attention,
            layout.tp_overlap,
            layout.loss_fusion,
            layout.zero,
        )
        hit = self._costs.get(key)
        if hit is None:
            hit = self._costs[key] = LayerCosts(
                self.model,
                layout,
                self._compute_model(layout.compute_dtype),
                layout.flash_attention,
                comm_ns=self.folder(layout),
                stack=self.stack,
            )
        return hit

    def _steps_ns(self, key: tuple, steps: Sequence[PassStep], slow: float, fold: Folder) -> int:
        """A run of steps fused as :meth:`StageProgram.step` fuses them: compute rounded up to
        whole ns after the slowdown, folded collectives added, an overlapped one running beside
        the next compute step."""
        hit = self._pass.get(key)
        if hit is not None:
            return hit
        total, beside = 0, None
        for st in steps:
            if st.collective is None:
                ns = st.ns * slow if st.ns > 0 and slow != 1.0 else st.ns
                if ns > 0:
                    d = max(1, int(math.ceil(ns)))
                    if beside is not None:
                        d, beside = max(d, beside), None
                    total += d
            else:
                t = fold(st.collective, st.nbytes, st.group) or 0
                if st.overlap:
                    beside = t
                else:
                    total += t
        self._pass[key] = total
        return total

    # -- one layout ----------------------------------------------------------------------------

    def iteration_ns(self, layout: Layout) -> int:
        """The estimated iteration time of ``layout`` (ns).  ZeRO-3 is not estimated (it raises
        ValueError): simulate it."""
        m, lay = self.model, layout
        if lay.zero >= 3:
            raise ValueError("ZeRO-3 layouts are simulated, not estimated")
        costs = self.costs(lay)
        fold = self.folder(lay)
        fabric, planner, delay = self._fabric(lay.gpus)
        p, v, mbs = lay.pp, lay.vpp, lay.num_microbatches
        last_v = p * v - 1
        stride = lay.tp * lay.cp * lay.dp
        ckey = id(costs)
        act = costs.act_bytes // (lay.tp if lay.sequence_parallel else 1)
        hop = 0
        if p > 1:
            hop = delay.delay_ns(0, stride, act) + delay.delay_ns(stride, 0, _HANDSHAKE_BYTES)

        def layer_ns(moe: bool, what: str, slow: float) -> int:
            steps = costs.forward(moe) if what == "F" else costs.backward(moe)
            return self._steps_ns((ckey, what, moe, slow), steps, slow, fold)

        def extra_ns(what: str, backward: bool, slow: float) -> int:
            steps = costs.embedding_steps(backward) if what == "emb" else costs.output_steps(backward)
            return self._steps_ns((ckey, what, backward, slow), steps, slow, fold)

        stages = []
        for s in range(p):
            prog = StageProgram(m, lay, costs, s, fold, fold)

            def dur(forward: bool, chunk: int, special: bool, s: int = s, prog: StageProgram = prog) -> int:
                g = chunk * p + s
                layers = lay.chunk_layers(m, s, chunk)
                total = 0
                # layers of the same kind (MoE or dense; recomputed or not) take the same time
                kinds = Counter(
                    (m.is_moe_layer(i), not forward and lay.recomputed_layer(m, s, chunk, i)) for i in layers
                )
                if forward:
                    slow = prog.slow_fwd if special else 1.0
                    if g == 0:
                        total += extra_ns("emb", False, slow)
                    total += sum(n * layer_ns(moe, "F", slow) for (moe, _), n in kinds.items())
                    if g == last_v:
                        total += extra_ns("out", False, slow)
                else:
                    reduce_now = (special or lay.zero == 2) and lay.overlap_grad_reduce
                    slow = prog.slow_bwd if reduce_now else 1.0
                    if g == last_v:
                        total += extra_ns("out", True, slow)
                    total += sum(
                        n * ((layer_ns(moe, "F", slow) if again else 0) + layer_ns(moe, "B", slow))
                        for (moe, again), n in kinds.items()
                    )
                    if g == 0:
                        total += extra_ns("emb", True, slow)
                return total

            # durations by class: (backward, chunk, special) -> ns (see _plan)
            table = [dur(bwd == 0, chunk, special == 1) for bwd in (0, 1) for chunk in range(v) for special in (0, 1)]
            stages.append((prog, table))

        # the first forward waits for the overlapped parameter all-gathers (as a whole)
        # the routed experts' parameters are reduced, sharded and gathered over the expert
        # data-parallel group (generate.StageProgram does the same), the rest over DP x CP
        params = [stage_params(m, lay, s) for s in range(p)]
        experts = [stage_expert_params(m, lay, s) if lay.expert_grads_apart else 0.0 for s in range(p)]
        dense = [params[s] - experts[s] for s in range(p)]
        sharded = (lay.distributed_optimizer or lay.zero in (1, 2)) and lay.dp * lay.cp > 1
        gathers = [0] * p
        if sharded and lay.overlap_param_gather:
            gathers = [
                self._dp_total(fold, lay, CollectiveKind.ALL_GATHER, dense[s] * 2 * stages[s][0].comm_fwd)
                + self._dp_total(fold, lay, CollectiveKind.ALL_GATHER, experts[s] * 2 * stages[s][0].comm_fwd, "edp")
                for s in range(p)
            ]
        plan = _plan(lay.schedule, p, mbs, v)
        fin = [0] * (mbs * p * v * 2)  # finish time of each pass (0: not yet), by _plan's pass id
        idx, now = [0] * p, [0] * p
        last_bwd_start = [0] * p
        left = sum(len(own) for own, _, _, _ in plan)
        while left:
            moved = False
            for s in range(p):
                own, dep, cls, flag = plan[s]
                table = stages[s][1]
                t, k, n = now[s], idx[s], len(own)
                while k < n:
                    d = dep[k]
                    if d >= 0:
                        f = fin[d]
                        if not f:
                            break
                        start = f + hop if f + hop > t else t
                    else:
                        start = t
                    c = cls[k]
                    t = start + table[c]
                    if flag[k]:
                        if flag[k] == _LAST_BACKWARD:
                            last_bwd_start[s] = start
                        elif gathers[s]:  # the first micro-batch's forward waits for the gathers
                            layers = max(1, len(lay.chunk_layers(m, s, (c >> 1) % v)))
                            t = max(t, gathers[s] + table[c] // layers)
                    fin[own[k]] = t
                    k += 1
                if k != idx[s]:
                    left -= k - idx[s]
                    moved = True
                now[s], idx[s] = t, k
            if not moved:  # a schedule whose inputs never come: cannot happen for valid schedules
                raise ValueError(f"pipeline schedule {lay.schedule!r} deadlocks for pp {p} vpp {v} m {mbs}")
        end = 0
        for s, (prog, _) in enumerate(stages):
            t = now[s]
            if lay.dp * lay.cp > 1:
                kind = (
                    CollectiveKind.REDUCE_SCATTER
                    if (lay.distributed_optimizer or lay.zero >= 1)
                    else CollectiveKind.ALL_REDUCE
                )
                scale = prog.comm_bwd if lay.overlap_grad_reduce else 1.0
                total, last = self._dp_buckets(fold, lay, kind, dense[s] * lay.grad_reduce_bytes * scale)
                e_total, e_last = self._dp_buckets(fold, lay, kind, experts[s] * lay.grad_reduce_bytes * scale, "edp")
                total, last = total + e_total, max(last, e_last)
                if lay.overlap_grad_reduce:
                    t = max(t + last, last_bwd_start[s] + total)
                else:
                    t += total
            split = dense[s] / (lay.dp * lay.cp) + experts[s] / lay.edp
            shard = split if (lay.distributed_optimizer or lay.zero) else params[s]
            t += max(1, int(math.ceil(costs.optimizer(shard, params[s]).ns)))
            if sharded and not lay.overlap_param_gather:
                t += fold(CollectiveKind.ALL_GATHER, int(dense[s] * 2), "dp") or 0
                if experts[s] > 0:
                    t += fold(CollectiveKind.ALL_GATHER, int(experts[s] * 2), "edp") or 0
            end = max(end, t)
        return end

    @staticmethod
    def _dp_buckets(
        fold: Folder, lay: Layout, kind: CollectiveKind, nbytes: float, group: str = "dp"
    ) -> tuple[int, int]:
        """(all buckets' time, the last bucket's time) of a data-parallel reduction of
        ``nbytes`` in Megatron's buckets over ``group`` (``dp``: DP x CP; ``edp``: the experts'
        data-parallel group), ns; (0, 0) for nothing to reduce."""
        if nbytes <= 0:
            return 0, 0
        ranks = lay.dp * lay.cp if group == "dp" else lay.edp
        limit = max(BUCKET_PARAMS, 1_000_000 * ranks) * lay.grad_reduce_bytes
        n = max(1, int(math.ceil(nbytes / limit)))
        full = fold(kind, int(min(limit, nbytes)), group) or 0
        rest = nbytes - (n - 1) * limit
        last = fold(kind, int(rest), group) or 0
        return (n - 1) * full + last, last

    def _dp_total(self, fold: Folder, lay: Layout, kind: CollectiveKind, nbytes: float, group: str = "dp") -> int:
        return self._dp_buckets(fold, lay, kind, nbytes, group)[0]
