"""Run a :class:`~podsim.workload.Workload` on an analytical network with ASTRA-sim 2.x's
system-layer semantics, and build a :class:`~podsim.report.Result`.

Equivalent ranks are simulated once: when every rank runs the same program, no op names a
peer or a sub-group, and nothing is shared between ranks (a remote memory pool), all ranks
behave identically on the symmetric topologies podsim supports, so one representative rank is
simulated against a mirrored network (see :class:`~podsim.engine.messaging.MirrorMessaging`)
and its figures are reported for every rank.
"""

from __future__ import annotations

import copy
import gc
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import SimulationError
from ..hardware.remote_memory import RemoteMemory
from ..intervals import union_length_of
from ..network.analytical import AnalyticalNetwork
from ..network.topology import Topology
from ..report.result import Flow, RankResult, RankResults, Result, Slice, Timelines
from ..report.summary import rank_ranges
from ..workload import NO_VALUE, SEGMENTS, OpKind, Program, Workload
from .buckets import RankBuckets
from .closed_form_phases import ClosedFormPhases, phase_mode_reason
from .events import EventQueue
from .messaging import Messaging, MirrorMessaging, Rendezvous
from .rank import CPU, ProgramPlan, RankRunner
from .ring_fast import RingCollectiveBatch, TieFound, fast_path_reason
from .system import RankSystem, SystemParams

MAX_FLOWS = 100_000  # point-to-point arrows kept for the trace


@dataclass
class ComputeTiming:
    """How the engine times a trace's compute ops: their replayed durations, or ASTRA-sim's
    roofline from their flops and bytes (kernels on a GPU and a software stack are timed by
    :class:`podsim.compute.model.ComputeModel` instead).

    Units: ``local_mem_bw_GBps`` in 10^9 B/s, ``peak_TFLOPS`` in 10^12 FLOP/s.
    """

    roofline: bool = False
    local_mem_bw_GBps: float | None = None
    peak_TFLOPS: float | None = None
    replay_only: bool = False

    def op_ns(self, p: Program, i: int) -> int:
        """Duration of op ``i`` (ns); -1 means 'skip as invalid' (roofline, no tensor size)."""
        if self.roofline and not p.is_cpu[i] and p.kind[i] == OpKind.COMPUTE and not self.replay_only:
            size = float(p.size_bytes[i])
            if size == 0:
                return -1
            flops = float(p.flops[i])
            bw = (self.local_mem_bw_GBps or 0) * 1000000000.0
            peak = (self.peak_TFLOPS or 0) * 1000000000000.0
            perf = min(bw * (flops / size), peak)
            return int(flops / perf * 1e9)
        d = int(p.duration_ns[i])
        return d if d > 0 else 1


@dataclass
class RemoteMemoryParams:
    """Remote memory model settings (bandwidth in bytes per ns)."""

    memory_type: str = "NO_MEMORY_EXPANSION"
    latency_ns: float = 0.0
    bandwidth: float | None = None
    npus_per_node: int | None = None
    num_nodes: int | None = None


def equivalent_ranks(
    workload: Workload, remote: RemoteMemoryParams | None, system: SystemParams | None = None
) -> tuple[bool, str]:
    """Whether all ranks are provably equivalent (and why not, if not)."""
    if system is not None:
        if system.custom or system.custom_per_node:
            return False, "custom collectives"
        for algos in system.algorithms.values():
            for a in algos:
                if a.phase.roles_differ:
                    return False, a.phase.roles_differ
    sigs = {p.signature() for p in workload.programs}
    if len(sigs) != 1:
        return False, "ranks run different programs"
    p = workload.programs[0]
    kinds = set(int(k) for k in p.kind)
    if OpKind.SEND in kinds or OpKind.RECV in kinds:
        return False, "point-to-point sends and receives"
    if (p.group != NO_VALUE).any():
        used = {p.group_keys[int(g)] for g in p.group[p.group != NO_VALUE]}
        world = {g.name for g in workload.groups if len(set(g.ranks)) == workload.num_ranks}
        partial = {g.name for g in workload.groups if len(set(g.ranks)) != workload.num_ranks}
        if not used <= world or used & partial:
            return False, "collectives on communicator groups"
    if (
        (OpKind.MEM_LOAD in kinds or OpKind.MEM_STORE in kinds)
        and remote is not None
        and remote.memory_type in ("PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")
    ):
        return False, "shared remote memory"
    return True, "all ranks run the same program on a symmetric topology"


def _categories(p: Program) -> list[tuple[str, str]]:
    """(track, category) of every op: cpu, compute, comm (collectives and point-to-point),
    mem, or other."""
    kinds, cpu = p.kind.tolist(), p.is_cpu.tolist()
    table = {
        int(OpKind.COMPUTE): ("compute", "compute"),
        int(OpKind.COLLECTIVE): ("comm", "comm"),
        int(OpKind.SEND): ("comm", "comm"),
        int(OpKind.RECV): ("comm", "comm"),
        int(OpKind.MEM_LOAD): ("mem", "mem"),
        int(OpKind.MEM_STORE): ("mem", "mem"),
    }
    return [("cpu", "cpu") if c else table.get(k, ("other", "other")) for k, c in zip(kinds, cpu)]


def simulate(
    workload: Workload,
    topology: Topology,
    system: SystemParams,
    compute: ComputeTiming | None = None,
    remote_memory: RemoteMemoryParams | None = None,
    use_symmetry: bool = True,
    record_timeline: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    rendezvous: bool = False,
    use_ctrl_deps: bool = True,
    fast_collectives: bool = True,
) -> Result:
    """Simulate ``workload`` and return per-rank results (all times integer ns).

    ``use_ctrl_deps``: control dependencies order ops as data dependencies do (ASTRA-sim's
    FeederV3 behaviour); False uses data dependencies only (the legacy Chakra feeder).
    ``rendezvous`` makes every message wait for an 8 KiB handshake from its receiver
    (ASTRA-sim's ``--rendezvous-protocol``).

    ``progress(now_ns, ranks_finished, ranks_simulated)`` is called about once a second of
    wall time, if given.
    ``fast_collectives``: when every rank is simulated, collectives are computed in closed
    form, exact to the ns: whole ring collectives on a 1-D ring with one queue and one active
    chunk (:mod:`.ring_fast`), else each ring, halving-doubling or direct phase the system layer
    starts (:mod:`.closed_form_phases`; not with rendezvous or a shared bus).  A closed-form end
    that falls in a rank's tick beside other events stops the run, which starts again with that
    collective (and, once one like it tied before, every collective of its group, kind and
    bytes) sent as messages: up to :data:`TIE_RUNS` runs, then every message is sent.  False
    sends every message.
    """
    t0 = time.perf_counter()
    plans: dict[tuple[int, bool, bool], ProgramPlan] = {}  # one per program, shared by its ranks and every run
    args = (
        workload,
        topology,
        system,
        compute,
        remote_memory,
        use_symmetry,
        record_timeline,
        progress,
        rendezvous,
        use_ctrl_deps,
        plans,
    )
    send: frozenset[tuple] = frozenset()
    tied: set[tuple] = set()  # the like() keys of the collectives that tied
    first: TieFound | None = None
    for _ in range(TIE_RUNS if fast_collectives else 1):
        try:
            res = _simulate(*args, fast_collectives, send)
            break
        except TieFound as tie:
            first = first or tie
            c = tie.collective
            # this collective; the second time one like it ties, every collective like it
            send = send | {c.like() if c.like() in tied else c.this()}
            tied.add(c.like())
    else:
        res = _simulate(*args, False, frozenset())
        res.info["closed_form_collectives"] = (
            f"none: closed-form ends fell in ticks beside other events in {TIE_RUNS} runs (first: {first})"
        )
        send = frozenset()
    if send:
        one = sum(1 for k in send if k[0] == "this")
        like = len(send) - one
        what = ", ".join(
            x
            for x in (
                f"{one} collective{'s' if one > 1 else ''}" if one else "",
                f"{like} kind{'s' if like > 1 else ''} of collective (group, kind, bytes)" if like else "",
            )
            if x
        )
        res.info["closed_form_collectives"] += (
            f"; {what} sent as messages, closed-form ends falling in ticks beside other events (first: {first})"
        )
    res.info["wall_s"] = round(time.perf_counter() - t0, 6)
    return res


#: how many runs :func:`simulate` starts, each sending one more collective (or kind of
#: collective) as messages, before it sends every message
TIE_RUNS = 6


def _simulate(
    workload: Workload,
    topology: Topology,
    system: SystemParams,
    compute: ComputeTiming | None,
    remote_memory: RemoteMemoryParams | None,
    use_symmetry: bool,
    record_timeline: bool,
    progress: Callable[[int, int, int], None] | None,
    rendezvous: bool,
    use_ctrl_deps: bool,
    plans: dict[tuple[int, bool, bool], ProgramPlan],
    fast_collectives: bool,
    send_messages: frozenset[tuple],
) -> Result:
    """One run, ``send_messages`` sent as messages.

    Raises:
        TieFound: when a closed-form end falls in a rank's tick beside other events.
    """
    t0 = time.perf_counter()
    compute = compute or ComputeTiming()
    n = topology.num_npus
    if workload.num_ranks != n:
        raise SimulationError(f"the workload has {workload.num_ranks} ranks but the network has {n} NPUs")
    network = AnalyticalNetwork(topology)
    queue = EventQueue()
    mirror, why = equivalent_ranks(workload, remote_memory, system) if use_symmetry else (False, "disabled")
    msg: Messaging | MirrorMessaging | Rendezvous = (
        MirrorMessaging(queue, network) if mirror else Messaging(queue, network)
    )
    if rendezvous:
        msg = Rendezvous(msg)
    flows: list[Flow] = []
    if record_timeline and not mirror:

        def on_delivery(src: int, dst: int, size: int, t_send: int, t_arrive: int, tag: int) -> None:
            if tag >= 0 and len(flows) < MAX_FLOWS:  # point-to-point (not collective-internal) messages
                flows.append(Flow(src, dst, t_send, t_arrive, size, f"send {size} B"))

        msg.on_delivery = on_delivery
    remote = None
    buckets: dict[int, RankBuckets] = {}
    if remote_memory is not None and remote_memory.memory_type != "NO_MEMORY_EXPANSION":
        remote = RemoteMemory(
            remote_memory.memory_type,
            remote_memory.latency_ns,
            remote_memory.bandwidth,
            remote_memory.npus_per_node,
            remote_memory.num_nodes,
            lambda rank, delay, fn: buckets[rank].register(delay, fn),
        )
    ranks = [0] if mirror else list(range(n))
    fast_ring = None
    fast_why = (
        fast_path_reason(workload, topology, system, rendezvous, mirror, compute.replay_only)
        if fast_collectives
        else "disabled"
    )
    fast_phases = None
    if fast_why is None:
        fast_ring = RingCollectiveBatch(n, network)
    elif fast_collectives and phase_mode_reason(mirror, rendezvous, system) is None:
        fast_phases = ClosedFormPhases(network)
    runners: list[RankRunner] = []
    for r in ranks:
        b = buckets[r] = RankBuckets(queue)
        sysl = RankSystem(r, topology.shape, system, b, msg)
        sysl.fast_ring = fast_ring
        sysl.fast_phases = fast_phases
        sysl.send_messages = send_messages
        runner = RankRunner(
            r,
            workload,
            workload.program_of(r),
            sysl,
            b,
            compute.op_ns,
            remote.issue if remote else None,
            record_timeline,
            use_ctrl_deps,
            plans=plans,
        )
        runner.replay_all = compute.replay_only
        if record_timeline:
            sysl.phase_log = []
        runners.append(runner)
    run_ranks(queue, runners, msg, workload, progress)
    results, timelines = _collect(runners, n, mirror, record_timeline)
    wall = time.perf_counter() - t0
    info: dict[str, object] = {
        "mode": "ASTRA-sim 2.x compatible (congestion-unaware analytical network)",
        "equivalent_ranks": mirror,
        "equivalence": why,
        "simulated_ranks": len(runners),
        "messages_simulated": msg.messages,
        "messages_closed_form": (
            fast_ring.messages if fast_ring is not None else fast_phases.messages if fast_phases is not None else 0
        ),
        "closed_form_collectives": (
            "ring collectives of every rank"
            if fast_ring is not None
            else f"ring phases of every rank (whole collectives not: {fast_why})"
            if fast_phases is not None
            else fast_why
        ),
        "wall_s": round(wall, 6),
    }
    notes = []
    for p in workload.programs:
        notes.extend(p.notes)
    return Result(results, timelines, flows, info, notes)


def run_ranks(
    queue: EventQueue,
    runners: list[RankRunner],
    msg: object,
    workload: Workload,
    progress: Callable[[int, int, int], None] | None,
    delays: dict[int, int] | None = None,
) -> None:
    """Start every runner (rank ``r`` ``delays[r]`` ns late, if given) and run the event loop to
    the end.

    Raises:
        SimulationError: naming what the ranks left unfinished wait on.
    """
    # The event loop allocates millions of short-lived objects but creates no reference cycles
    # that outlive it; the cyclic collector would rescan the growing heap again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for runner in runners:
            late = delays.get(runner.rank, 0) if delays else 0
            if late > 0:
                queue.schedule(late, lambda _a, rr=runner: rr.fire())
            else:
                runner.fire()
        if progress is not None:
            queue.run_with_progress(lambda: progress(queue.now, sum(rr.finished for rr in runners), len(runners)))
        else:
            queue.run()
    finally:
        if gc_was_on:
            gc.enable()
    stuck = [rr for rr in runners if not rr.finished]
    if stuck:
        raise SimulationError(_deadlock_message(stuck, msg, runners, workload))


class _Parts:
    """What :func:`_collect` reads of one program, shared by the ranks that run it: which ops
    count as compute, communication or memory time, and the parts of its fused ops (their
    offsets, durations and kinds as arrays)."""

    def __init__(self, p: Program, resource: list[int]) -> None:
        kinds = p.kind
        gpu = np.array([r != CPU for r in resource], dtype=bool)
        fused = sorted(i for i, e in p.extras.items() if e.get(SEGMENTS))
        whole = np.ones(len(p), dtype=bool)
        whole[fused] = False
        self.mem = np.flatnonzero(whole & ((kinds == OpKind.MEM_LOAD) | (kinds == OpKind.MEM_STORE)))
        comm_kind = (kinds == OpKind.COLLECTIVE) | (kinds == OpKind.SEND) | (kinds == OpKind.RECV)
        self.comm = np.flatnonzero(whole & gpu & comm_kind)
        self.comp = np.flatnonzero(whole & gpu & (kinds == OpKind.COMPUTE))
        #: a fused op -> its parts, for the timeline
        self.segments: dict[int, list[tuple]] = {i: p.extras[i][SEGMENTS] for i in fused}  # type: ignore[misc]
        flat = [seg for i in fused for seg in self.segments[i]]
        self.seg_op = np.repeat(np.array(fused, dtype=np.int64), [len(self.segments[i]) for i in fused])
        self.seg_off = np.array([seg[0] for seg in flat], dtype=np.int64)
        self.seg_dur = np.array([seg[1] for seg in flat], dtype=np.int64)
        self.seg_comp = np.array([seg[3] == "compute" for seg in flat], dtype=bool)

    def rescaled(self, off: np.ndarray, dur: np.ndarray) -> _Parts:
        """These parts with the fused ops' parts at offsets ``off`` and of durations ``dur``
        (ns, every part in order): a slow GPU's."""
        out = copy.copy(self)
        out.seg_off, out.seg_dur = off, dur
        out.segments = _ScaledSegments(self.segments, off, dur)  # type: ignore[assignment]
        return out

    def times(self, starts: list[int], ends: list[int]) -> tuple[int, int, int, int]:
        """(compute, communication, memory, compute-communication overlap) time of a rank that
        ran the program from ``starts`` to ``ends`` (ns per op)."""
        a = np.array(starts, dtype=np.int64)
        b = np.array(ends, dtype=np.int64)
        sa = a[self.seg_op] + self.seg_off
        sb = sa + self.seg_dur
        sc = self.seg_comp
        nc = ~sc
        comp_a = np.concatenate((a[self.comp], sa[sc]))
        comp_b = np.concatenate((b[self.comp], sb[sc]))
        comm_a = np.concatenate((a[self.comm], sa[nc]))
        comm_b = np.concatenate((b[self.comm], sb[nc]))
        comp = union_length_of(comp_a, comp_b)
        comm = union_length_of(comm_a, comm_b)
        both = union_length_of(np.concatenate((comp_a, comm_a)), np.concatenate((comp_b, comm_b)))
        mem = union_length_of(a[self.mem], b[self.mem])
        return comp, comm, mem, comp + comm - both


class _ScaledSegments(Mapping[int, list[tuple]]):
    """A fused op's parts (as in ``extras[SEGMENTS]``) at other offsets and durations, made
    when read (a timeline reads few ranks)."""

    def __init__(self, base: dict[int, list[tuple]], off: np.ndarray, dur: np.ndarray) -> None:
        self.base = base
        self.off, self.dur = off, dur
        self.first: dict[int, int] = {}
        k = 0
        for i, segs in base.items():
            self.first[i] = k
            k += len(segs)

    def __getitem__(self, i: int) -> list[tuple]:
        k = self.first[i]
        segs = self.base[i]
        off = self.off[k : k + len(segs)].tolist()
        dur = self.dur[k : k + len(segs)].tolist()
        return [(o, d, *seg[2:]) for o, d, seg in zip(off, dur, segs)]

    def __iter__(self) -> Iterator[int]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)

    def __contains__(self, i: object) -> bool:
        return i in self.base


def _collect(
    runners: list[RankRunner],
    n: int,
    mirror: bool,
    record: bool,
    reps: np.ndarray | None = None,
    scaled: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[list[RankResult] | RankResults, dict[int, list[Slice]] | Timelines]:
    """Every rank's statistics and (``record``) its timeline, from its runner; with ``mirror``
    or ``reps`` (each rank's representative), every rank's copied from the simulated ones'
    (a :class:`~podsim.report.result.RankResults`: one array over the ranks, not one object
    per rank).  ``scaled``: ranks whose fused ops' parts ran at other offsets and durations
    than their program's (a slow GPU's), as (offsets, durations) of every part in program
    order.  The timelines are :class:`~podsim.report.result.Timelines`: a rank's slices are
    made when first read."""
    per: dict[int, RankResult] = {}
    parts: dict[int, _Parts] = {}  # id(program) -> its parts
    own: dict[int, _Parts] = {}  # a rank with scaled parts -> its own
    for rr in runners:
        p = rr.p
        pp = parts.get(id(p))
        if pp is None:
            pp = parts[id(p)] = _Parts(p, rr.resource)
        if scaled and rr.rank in scaled:
            pp = own[rr.rank] = pp.rescaled(*scaled[rr.rank])
        _, comm_ns, mem_ns, overlap = pp.times(rr.starts, rr.ends)
        per[rr.rank] = RankResult(
            rr.rank,
            rr.finish_ns,
            rr.gpu_ops_ns,
            comm_ns,
            rr.finish_ns - rr.gpu_ops_ns,
            rr.cpu_ops_ns,
            mem_ns,
            overlap,
        )
    of = None
    if mirror or reps is not None:  # each rank -> the rank simulated for it
        of = np.zeros(n, dtype=np.int64) if mirror else np.asarray(reps, dtype=np.int64)
    timelines: dict[int, list[Slice]] | Timelines = {}
    if record:
        # what a rank's timeline is made of (not the runner: the network and queues may go)
        ran = {
            rr.rank: (
                rr.p,
                own.get(rr.rank) or parts[id(rr.p)],
                rr.starts,
                rr.ends,
                rr.sys.phase_log,
                rr.sys.p.queues_per_dim,
            )
            for rr in runners
        }

        def build(rank: int) -> list[Slice]:
            return _timeline(*ran[rank])

        timelines = Timelines(of if of is not None else {r: r for r in ran}, build)
    if of is not None:
        return RankResults(per, of), timelines
    return [per[r] for r in range(n)], timelines


def _timeline(
    p: Program, pp: _Parts, starts: list[int], ends: list[int], phase_log: list | None, nq: int
) -> list[Slice]:
    """The slices of a rank that ran ``p`` from ``starts`` to ``ends``: its ops (a fused op's
    parts one by one), then its collectives' phases (``phase_log``, ``nq`` queues per
    dimension)."""
    # many slices, none in a cycle: the cyclic collector would rescan them again and again
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        slices: list[Slice] = []
        extras = p.extras
        cats = _categories(p)
        nids = p.node_id.tolist()
        sizes = p.size_bytes.tolist()
        noop = int(OpKind.NOOP)
        names = p.names
        fused = pp.segments
        for i, k in enumerate(p.kind.tolist()):
            a = starts[i]
            if i in fused:  # a fused op: its parts, compute and closed-form collectives
                for seg in fused[i]:
                    off, dur, sname, cat = seg[0], seg[1], seg[2], seg[3]
                    if cat == "compute":
                        sargs: dict[str, object] = {}
                        track = "compute"
                    else:
                        sargs = {"group": cat}
                        track = "comm"
                    if len(seg) > 4:
                        sargs.update(seg[4])
                    slices.append(Slice(sname, track, a + off, a + off + dur, track, sargs))
                continue
            if k == noop:
                continue
            stream, cat = cats[i]
            name = names[i] or f"node {nids[i]}"
            args: dict[str, object] = {"node_id": nids[i]}
            if sizes[i]:
                args["bytes"] = sizes[i]
            if i in extras:  # what the workload says of the op (stage, layer, ...), for traces and reports
                args.update(
                    (k, v) for k, v in extras[i].items() if isinstance(v, (str, int, float, bool)) and k != SEGMENTS
                )
            slices.append(Slice(name, stream, a, ends[i], cat, args))
        for q, label, kind, algo, size, a, b in phase_log or []:
            track = f"comm dim {q // nq}" + (f" queue {q % nq}" if nq > 1 else "")
            slices.append(
                Slice(
                    f"{label}: {kind.replace('_', '-')} ({algo})",
                    track,
                    a,
                    b,
                    "chunk",
                    {"bytes": size, "algorithm": algo},
                )
            )
        return slices
    finally:
        if gc_was_on:
            gc.enable()


def _ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(ranks)


def _deadlock_message(stuck: list[RankRunner], msg: object, runners: list[RankRunner], workload: Workload) -> str:
    """Name the ranks that cannot finish, what they wait on and, for collectives, which
    ranks never joined; then unmatched point-to-point messages."""
    waits: dict[tuple[str, int, str], list[int]] = {}
    blocked_ops = 0
    for rr in stuck:
        p = rr.p
        issued = [
            i
            for i in range(len(p))
            if i not in rr.free and rr.pending_deps[i] == 0 and rr.ends[i] == 0 and int(p.kind[i]) != OpKind.NOOP
        ]
        blocked_ops += sum(1 for d in rr.pending_deps if d > 0)
        for i in issued[:3]:
            kind = OpKind(int(p.kind[i])).name.lower()
            waits.setdefault((kind, int(p.node_id[i]), p.names[i]), []).append(rr.rank)
    parts = []
    all_ranks = {rr.rank for rr in runners}
    for (kind, nid, name), ranks in sorted(waits.items(), key=lambda kv: kv[1][0]):
        label = f"node {nid}" + (f" ({name})" if name else "")
        verb = "waits" if len(ranks) == 1 else "wait"
        text = f"{_ranks_text(ranks)} {verb} on {kind} {label}"
        if kind == "collective":
            missing = sorted(all_ranks - set(ranks))
            p0 = next(rr.p for rr in runners if rr.rank == ranks[0])
            idx = [i for i in range(len(p0)) if int(p0.node_id[i]) == nid]
            g = int(p0.group[idx[0]]) if idx else -1
            if g >= 0:
                grp = workload.group_of(p0.group_keys[g], ranks[0])
                if grp is not None:
                    missing = sorted(set(grp.ranks) - set(ranks))
            if missing:
                text += f", which {_ranks_text(missing)} never issued"
        parts.append(text)
    if blocked_ops:
        parts.append(f"{blocked_ops} more ops are blocked behind them")
    pend = getattr(msg, "pending", lambda: [])()
    p2p = [x for x in pend if x[0] >= 0]
    for tag, src, dst, size, missing in p2p[:5]:
        parts.append(f"message rank {src} -> rank {dst} ({size} B, tag {tag}) has no matching {missing}")
    if not p2p and not waits:
        parts.append(f"{len(stuck)} ranks have ops left")
    return "simulation cannot finish: " + "; ".join(parts)


Callback = Callable[[], None]
