"""Run a workload on a cluster fabric with NCCL-like collectives.

Each rank runs its program as in ASTRA-sim mode (same dependency and resource rules, see
:mod:`podsim.engine.rank`), but a collective is not chunked over logical dimensions: when every
rank of its group has issued it, the NCCL-like selector picks an algorithm and protocol and
the collective runs as a whole on the fabric:

* ``analytical`` backend: it takes the closed-form time of its schedule (no contention with
  other traffic);
* ``flow`` backend: its rounds run as flows on the shared max-min network, so concurrent
  collectives and point-to-point messages slow each other where they share links.

Point-to-point sends are one flow (flow backend) or the route's latency plus bytes over the
bottleneck bandwidth (analytical).  Group ranks are GPU ranks: rank ``r`` of the workload is
GPU ``r`` of the fabric, so Chakra ``pg_name`` groups land on the GPUs they name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..arrays import unique
from ..collectives.nccl import NcclTuning
from ..collectives.nccl.planner import COLLECTIVE_NAMES as _NAMES
from ..collectives.nccl.planner import CollectivePlanner, FabricDelay
from ..collectives.nccl.schedule import Schedule
from ..collectives.nccl.timing import link_capacity
from ..errors import SimulationError
from ..hardware.remote_memory import RemoteMemory
from ..network.fabric import Fabric
from ..network.flow import FlowNetwork
from ..network.flow.reference import ReferenceFlowNetwork
from ..report.result import Counter, LinkUse, Result, Slice, Timelines
from ..workload import CollectiveKind, Workload
from .buckets import RankBuckets
from .events import EventQueue
from .faults import ComputeScaler, FaultPlan, WaitLog
from .messaging import Messaging, Rendezvous
from .rank import RankRunner
from .simulator import (
    ComputeTiming,
    RemoteMemoryParams,
    _collect,
    equivalent_ranks,
    run_ranks,
)


class FlowMessaging(Messaging):
    """Message matching whose messages are flows on a :class:`FlowNetwork`."""

    def __init__(self, queue: EventQueue, net: FlowNetwork) -> None:
        super().__init__(queue, None)
        self.net = net

    def _transmit(self, src: int, dst: int, size: int, tag: int, full: tuple) -> None:
        t0 = self.queue.now

        def arrived() -> None:
            if self.on_delivery is not None:
                self.on_delivery(src, dst, size, t0, self.queue.now, tag)
            self._arrive(full)

        self.net.start(src, dst, size, arrived, label=tag & 0xFFFF)


@dataclass
class _Pending:
    kind: CollectiveKind
    size: int
    callbacks: list[Callable[[int], None]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    arrivals: list[tuple[int, int]] = field(default_factory=list)  #: (rank, ns it issued), with a wait log


class ClusterCollectives:
    """Rendezvous of collective calls and their execution on the fabric."""

    def __init__(
        self,
        queue: EventQueue,
        fabric: Fabric,
        tuning: NcclTuning,
        backend: str,
        mirror: bool,
        net: FlowNetwork | None,
        fast_forward: bool = True,
        bulk: bool = False,
    ) -> None:
        self.queue = queue
        #: flow backend: run each schedule step's identical rounds as one round of flows
        #: carrying all their bytes (then the summed per-round latency)
        self.bulk = bulk
        self.fast_forward = fast_forward
        self.fabric = fabric
        self.tuning = tuning
        self.backend = backend
        self.mirror = mirror
        self.planner = CollectivePlanner.shared(fabric, tuning)
        self.net = net
        self._seq: dict[tuple[int, tuple[int, ...]], int] = {}
        self._pending: dict[tuple[tuple[int, ...], int], _Pending] = {}
        self.log: list[tuple[str, str, str, int, int, int, tuple[int, ...]]] = []
        self.calls = 0
        self.rounds_skipped = 0  #: identical rounds fast-forwarded (ran alone, nothing could interfere)
        self.simulated: set[int] | None = None  #: the ranks simulated, when only representatives are
        #: flow backend: time collectives inside one server in closed form (their NVLink traffic
        #: is then not shared with other flows, e.g. PXN relays)
        self.intra_closed_form = False
        self._servers: dict[tuple[int, ...], bool] = {}
        self._joins: dict[tuple[int, ...], int] = {}
        #: who waits on whom (when faults are injected)
        self.waits: WaitLog | None = None

    def issue(
        self, rank: int, kind: CollectiveKind, size: int, ranks: tuple[int, ...], done: Callable[[int], None], name: str
    ) -> None:
        """Rank ``rank`` issues a collective on ``ranks``; ``done(0)`` runs when it ends."""
        if kind not in _NAMES:
            raise SimulationError(f"collective {kind.name} is not supported on a cluster")
        k = (rank, ranks)
        seq = self._seq.get(k, 0)
        self._seq[k] = seq + 1
        key = (ranks, seq)
        p = self._pending.get(key)
        if p is None:
            p = self._pending[key] = _Pending(kind, size)
        elif p.kind != kind or p.size != size:
            raise SimulationError(
                f"rank {rank} issues {_NAMES[kind]} of {size} B as call {seq} on ranks "
                f"{ranks[0]}..{ranks[-1]}, where others issued {_NAMES[p.kind]} of {p.size} B"
            )
        p.callbacks.append(done)
        p.names.append(name)
        if self.waits is not None:
            p.arrivals.append((rank, self.queue.now))
        if len(p.callbacks) == self._expected(ranks):
            del self._pending[key]
            if self.waits is not None:
                self.waits.started(p.names[0], p.arrivals, self.queue.now)
            self._start(p, ranks)

    def _expected(self, ranks: tuple[int, ...]) -> int:
        """How many simulated ranks of ``ranks`` must issue a call before it starts."""
        if self.mirror:
            return 1
        if self.simulated is None:
            return len(ranks)
        n = self._joins.get(ranks)
        if n is None:
            n = self._joins[ranks] = sum(1 for r in ranks if r in self.simulated)
        return n

    def _one_server(self, ranks: tuple[int, ...]) -> bool:
        hit = self._servers.get(ranks)
        if hit is None:
            g = self.fabric.gpus_per_node
            hit = self._servers[ranks] = len({r // g for r in ranks}) == 1
        return hit

    def pending(self) -> list[tuple[tuple[int, ...], int, int]]:
        """Collectives some ranks issued and others did not: (ranks, call number, joined)."""
        return [(r, s, len(p.callbacks)) for (r, s), p in self._pending.items()]

    def _start(self, p: _Pending, ranks: tuple[int, ...]) -> None:
        self.calls += 1
        sched, t_ns = self.planner.plan(ranks, p.kind, p.size)
        start = self.queue.now

        def finish() -> None:
            self.log.append((p.names[0], sched.algorithm, sched.protocol, start, self.queue.now, p.size, ranks))
            for cb in p.callbacks:
                cb(0)

        if self.backend == "analytical" or not sched.steps or (self.intra_closed_form and self._one_server(ranks)):
            self.queue.schedule(start + t_ns, lambda _a: finish())
        else:
            _FlowRun(self, sched, finish).begin()


class _FlowRun:
    """One collective's rounds on the flow network: each round's flows start together (one
    batch); the next round starts when all have arrived and the round's per-step latency has
    passed."""

    def __init__(self, owner: ClusterCollectives, sched: Schedule, finish: Callable[[], None]) -> None:
        self.o = owner
        self.sched = sched
        self.finish = finish
        self.step = 0
        self.round = 0
        t = owner.tuning
        key = sched.algorithm if sched.algorithm in t.base_latency_ns else "ring"
        self.key = key
        self.cap = t.channel_cap(key)
        self.wire = 1.0 / float(t.protocol_efficiency[sched.protocol])  # wire bytes per payload byte
        self._sizes: dict[int, np.ndarray] = {}

    def begin(self) -> None:
        base = int(math.ceil(self.o.tuning.base_ns(self.key, self.sched.protocol)))
        self.o.queue.schedule(self.o.queue.now + base, lambda _a: self._round())

    def _round(self) -> None:
        if self.step >= len(self.sched.steps):
            self.finish()
            return
        st = self.sched.steps[self.step]
        net = self.o.net
        assert net is not None
        sizes = self._sizes.get(self.step)
        if sizes is None:  # wire bytes per flow (the channel cap is on payload, a flow carries wire bytes)
            mult = st.repeat if self.o.bulk else 1
            sizes = self._sizes[self.step] = np.ceil(st.nbytes * self.wire * mult).astype(np.int64)
        self.alone = net.active_flows == 0
        self.started = net.flows_started
        self.t_round = self.o.queue.now
        self.sizes = sizes
        if st.num_flows == 0:
            self.paths = np.zeros((0, 1), dtype=np.int64)
            self.latency = np.zeros(0, dtype=np.int64)
            self._next()
            return
        got = net.start_batch(st.src, st.dst, sizes, st.label, self._next, self.cap * self.wire, same_as=st)
        self.paths, self.latency = got.paths, got.latency_ns

    def _next(self) -> None:
        st = self.sched.steps[self.step]
        t = self.o.tuning
        hop = int(math.ceil(sum(n * t.hop_ns(cls, self.key, self.sched.protocol) for cls, n in st.hops.items())))
        q = self.o.queue
        if self.o.bulk:  # the step's rounds ran as one: add the other rounds' latencies, go on
            wire = int(self.latency.max()) if len(self.latency) else 0
            self.step += 1
            self.round = 0
            q.schedule(q.now + hop * st.repeat + wire * (st.repeat - 1), lambda _a: self._round())
            return
        self.round += 1
        left = st.repeat - self.round
        if left > 0 and self.o.fast_forward and self._alone_throughout():
            # The round just ended ran alone, and nothing else can start before the step's
            # remaining identical rounds would end: they would take exactly as long.  Skip them.
            dur = q.now - self.t_round
            t_end = q.now + left * (hop + dur)
            if not q.any_before(t_end + hop, self.o.net.internal_callbacks()):  # type: ignore[union-attr]
                self.o.net.credit(
                    self.paths,
                    self.sizes,
                    dur,
                    left,
                    q.now + hop,
                    t_end,  # type: ignore[union-attr]
                    self._loads(dur),
                )
                self.o.rounds_skipped += left
                self.round = st.repeat
                q.schedule(t_end, lambda _a: self._after_step(hop))
                return
        if self.round >= st.repeat:
            self.step += 1
            self.round = 0
        q.schedule(q.now + hop, lambda _a: self._round())

    def _after_step(self, hop: int) -> None:
        self.step += 1
        self.round = 0
        self.o.queue.schedule(self.o.queue.now + hop, lambda _a: self._round())

    def _alone_throughout(self) -> bool:
        net = self.o.net
        assert net is not None
        return self.alone and net.flows_started - self.started == len(self.paths) and net.active_flows == 0

    def _loads(self, dur: int) -> dict[int, float]:
        """Average load per link over one round (bytes per ns), for the counters."""
        if dur <= 0 or not self.o.net.record_load:  # type: ignore[union-attr]
            return {}
        out: dict[int, float] = {}
        pad = self.o.fabric.num_links
        for row, x in zip(self.paths.tolist(), self.sizes.tolist()):
            for link in row:
                if link != pad:
                    out[link] = out.get(link, 0.0) + x / dur
        return out


class ClusterRankSystem:
    """What a :class:`RankRunner` needs from its system layer, on a cluster."""

    def __init__(self, rank: int, total: int, colls: ClusterCollectives, msg: Messaging) -> None:
        self.rank = rank
        self.total_npus = total
        self.colls = colls
        self.msg = msg
        self.phase_log: list | None = None

        class _P:
            queues_per_dim = 1

        self.p = _P()

    def generate(
        self,
        kind: CollectiveKind,
        size: int,
        involved: object,
        group: tuple[int, ...] | None,
        key: str | None,
        priority: int,
        done: Callable[[int], None],
        node_id: int,
        name: str,
    ) -> None:
        ranks = group if group is not None else tuple(range(self.total_npus))
        self.colls.issue(self.rank, kind, size, ranks, done, name)


def simulate_cluster(
    workload: Workload,
    fabric: Fabric,
    tuning: NcclTuning,
    backend: str = "flow",
    compute: ComputeTiming | None = None,
    use_symmetry: bool = True,
    record_timeline: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    max_link_tracks: int = 256,
    fast_forward: bool = True,
    intra_server_closed_form: bool = False,
    granularity: str = "round",
    rendezvous: bool = False,
    remote_memory: RemoteMemoryParams | None = None,
    reference_flows: bool = False,
    record_link_load: bool | None = None,
    faults: FaultPlan | None = None,
) -> Result:
    """Simulate ``workload`` on ``fabric`` (rank ``r`` on GPU ``r``).  Times are integer ns.

    ``faults``: slow ranks' compute factors and hosts' start delays
    (:class:`~podsim.engine.faults.FaultPlan`; its link factors are the caller's to apply,
    with :func:`~podsim.engine.faults.degraded_fabric`, to the ``fabric`` it passes): every
    rank is then simulated (no representatives), the result's ``faults`` says who waited on
    whom at collectives, and its timelines show the faults and the waits.

    ``record_timeline``: keep every rank's timeline (built when read, see
    :class:`~podsim.report.result.Timelines`); ``record_link_load`` (default: the same) the
    flow backend's link loads over time, the counter tracks of a Perfetto trace (they cost a
    third of a large run's simulation).

    ``fast_forward``: when a collective's round ran with no other traffic and no event can
    start any before its step's remaining identical rounds would end, skip simulating them
    (exact; their bytes and busy time are credited to the links).

    ``intra_server_closed_form``: with the flow backend, time collectives whose GPUs share one
    server in closed form instead of as flows (much faster for tensor parallelism; their NVLink
    traffic then does not contend with other flows).

    ``granularity``: ``round`` (default) simulates every round of a collective's schedule as
    flows; ``bulk`` runs each step's identical rounds as one round of flows carrying all their
    bytes, followed by the other rounds' latencies: exact for a collective running alone (to
    a few ns of rounding), an approximation under contention (no per-round barrier), and far
    fewer flows -- for iteration-scale runs with thousands of GPUs.

    ``rendezvous``: a point-to-point message starts only once its receiver has posted the
    receive (an 8 KiB handshake first, as ASTRA-sim's rendezvous protocol and NCCL's
    send/recv of large messages do), so a send holds its stream until the peer is ready; with
    the flow backend the handshakes are timed in closed form, not as flows.

    ``remote_memory``: the model that times memory load / store ops (host or pooled memory;
    :class:`podsim.hardware.remote_memory.RemoteMemory`), for workloads that have them.

    ``reference_flows``: run the flow backend on the per-flow reference network
    (:class:`podsim.network.flow.reference.ReferenceFlowNetwork`, about 20x slower) instead of
    the array one; the two give the same times (the tests compare them)."""
    if granularity not in ("round", "bulk"):
        raise SimulationError(f"granularity must be 'round' or 'bulk', not {granularity!r}")
    t0 = time.perf_counter()
    compute = compute or ComputeTiming()
    n = fabric.num_gpus
    if workload.num_ranks != n:
        raise SimulationError(f"the workload has {workload.num_ranks} ranks but the cluster has {n} GPUs")
    queue = EventQueue()
    if faults is not None and faults.every_rank:
        use_symmetry = False
    reps = workload.representatives if use_symmetry else None
    if reps is not None:
        mirror, why = False, "the workload's generator names equivalent ranks (one per pipeline stage)"
    elif faults is not None and faults.every_rank:
        mirror, why = False, "faults injected: the ranks differ, every rank is simulated"
    else:
        mirror, why = equivalent_ranks(workload, remote_memory) if use_symmetry else (False, "disabled")
    shared = CollectivePlanner.shared(fabric, tuning)  # plans and routes kept with the fabric
    colls_timer = shared.timer
    net = None
    if backend == "flow":
        network = ReferenceFlowNetwork if reference_flows else FlowNetwork
        net = network(
            fabric,
            queue,
            router=colls_timer.router,
            capacity=link_capacity(fabric, tuning),
            record_load=record_timeline if record_link_load is None else record_link_load,
        )
        msg: Messaging = FlowMessaging(queue, net)
    else:
        msg = Messaging(queue, FabricDelay(fabric, colls_timer))  # type: ignore[arg-type]
    if rendezvous:
        control = Messaging(queue, FabricDelay(fabric, colls_timer)) if net is not None else None  # type: ignore[arg-type]
        msg = Rendezvous(msg, control)  # type: ignore[arg-type, assignment]
    colls = ClusterCollectives(queue, fabric, tuning, backend, mirror, net, fast_forward, granularity == "bulk")
    colls.intra_closed_form = intra_server_closed_form
    colls.planner = shared
    if faults is not None:
        colls.waits = WaitLog(n, record_timeline)
    scalers: dict[int, ComputeScaler] = {}  # one per program of a slow rank
    scaled: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # slow rank -> its fused ops' segments
    ranks = [0] if mirror else list(range(n))
    if reps is not None:
        ranks = unique(reps).tolist()
        colls.simulated = set(ranks)
    runners = []
    buckets: dict[int, RankBuckets] = {}
    remote = None
    if remote_memory is not None and remote_memory.memory_type != "NO_MEMORY_EXPANSION":
        remote = RemoteMemory(
            remote_memory.memory_type,
            remote_memory.latency_ns,
            remote_memory.bandwidth,
            remote_memory.npus_per_node,
            remote_memory.num_nodes,
            lambda rank, delay, fn: buckets[rank].register(delay, fn),
        )
    plans: dict = {}  # one ProgramPlan per program, shared by its ranks
    for r in ranks:
        b = buckets[r] = RankBuckets(queue)
        sysl = ClusterRankSystem(r, n, colls, msg)
        runner = RankRunner(
            r,
            workload,
            workload.program_of(r),
            sysl,
            b,
            compute.op_ns,  # type: ignore[arg-type]
            remote.issue if remote else None,
            record_timeline,
            True,
            per_stream=True,
            plans=plans,
        )
        runner.replay_all = compute.replay_only
        factor = faults.compute.get(r, 1.0) if faults is not None else 1.0
        if factor != 1.0:
            prog = runner.p
            sc = scalers.get(id(prog))
            if sc is None:
                sc = scalers[id(prog)] = ComputeScaler(prog)
            runner.compute_ns = sc.op_ns(compute.op_ns, factor)
            _, comm_part, off, dur = sc.fused_times(factor)
            if comm_part:
                runner._comm_part = comm_part
                scaled[r] = (off, dur)
        runners.append(runner)
    run_ranks(queue, runners, msg, workload, progress, faults.delay_ns if faults is not None else None)
    results, timelines = _collect(runners, n, mirror, record_timeline, reps, scaled)
    if isinstance(timelines, Timelines):
        timelines.more.append(_collective_slices(timelines, colls, mirror))
        if faults is not None:
            timelines.more.append(_fault_slices(faults, colls.waits, results))
    links, counters = _link_report(fabric, net, queue.now, max_link_tracks)
    info: dict[str, object] = {
        "mode": f"cluster: NCCL-like collectives, {backend} backend",
        "fabric": f"{fabric.name}: {n} GPUs in {fabric.num_servers} servers, {fabric.num_nodes} nodes, "
        f"{fabric.num_links} directed links",
        "equivalent_ranks": mirror,
        "equivalence": why,
        "simulated_ranks": len(runners),
        "collectives": colls.calls,
        "messages_simulated": msg.messages,
        "wall_s": round(time.perf_counter() - t0, 6),
    }
    if net is not None:
        info["flows"] = net.flows_started
        info["flow_solves"] = net.solves
        info["rounds_fast_forwarded"] = colls.rounds_skipped
        info["granularity"] = granularity
        info["flow_network"] = "per-flow reference" if reference_flows else "arrays"
    if faults is not None:
        info["faults"] = dict(faults.described)
    notes = [x for p in workload.programs for x in p.notes]
    res = Result(results, timelines, [], info, notes)
    res.links = links
    res.counters = counters
    if colls.waits is not None:
        res.faults = colls.waits.summary()
    return res


def _fault_slices(faults: FaultPlan, waits: WaitLog | None, results: list):  # type: ignore[no-untyped-def]
    """What adds the faults to a rank's timeline: a ``fault`` track (a slow GPU over the whole
    step, a host's stall before it), the slow rank's compute slices marked (``slowed`` in their
    args), and a ``wait`` track: a slice "waiting for rank R" from the time the rank issued a
    collective to the time the last rank of its group (R) did."""
    per: dict[int, list[tuple[int, int, int]]] = {}
    if waits is not None:
        for r, a, b, last in waits.slices:
            per.setdefault(r, []).append((a, b, last))

    def add(q: int, slices: list[Slice]) -> None:
        f = faults.compute.get(q, 1.0)
        if f != 1.0:
            for s in slices:
                if s.category == "compute":
                    s.args = {**s.args, "slowed": round(f, 6)}
            end = results[q].finish_ns
            slices.append(Slice(f"slow GPU: computes {f:.3g}x", "fault", 0, end, "fault", {"factor": f}))
        d = faults.delay_ns.get(q, 0)
        if d:
            slices.append(Slice(f"host hiccup: stalls {d / 1e6:g} ms", "fault", 0, d, "fault", {"delay_ns": d}))
        for a, b, last in per.get(q, ()):
            slices.append(Slice(f"waiting for rank {last}", "wait", a, b, "wait", {"rank": last, "wait_ns": b - a}))

    return add


def _collective_slices(timelines: Timelines, colls: ClusterCollectives, mirror: bool):  # type: ignore[no-untyped-def]
    """What adds the collectives (their algorithm and protocol) to a simulated rank's
    timeline: one slice on the ``collective`` track for each collective a rank it stands for
    takes part in (rank 0 alone when one rank stands for all).  The ranks it stands for share
    its timeline, so each sees the slice once."""

    def add(q: int, slices: list[Slice]) -> None:
        stands: dict[int, set[int]] = {}  # id of a log entry's ranks -> the simulated ranks among them
        for name, algo, proto, a, b, size, ranks in colls.log:
            of = stands.get(id(ranks))
            if of is None:
                of = stands[id(ranks)] = timelines.simulated_for([0] if mirror else ranks)
            if q in of:
                s = Slice(
                    f"{name}: {algo}/{proto}",
                    "collective",
                    a,
                    b,
                    "chunk",
                    {"bytes": size, "algorithm": algo, "protocol": proto, "ranks": len(ranks)},
                )
                slices.append(s)

    return add


def _link_report(
    fabric: Fabric, net: FlowNetwork | None, end_ns: int, max_tracks: int
) -> tuple[list[LinkUse], list[Counter]]:
    if net is None:
        return [], []
    st = net.link_stats()
    used = [i for i in range(fabric.num_links) if st.bytes[i] > 0]
    used.sort(key=lambda i: -st.bytes[i])
    links = [
        LinkUse(
            fabric.link_name(i),
            int(fabric.link_tier[i]),
            float(st.bytes[i]),
            int(st.busy_ns[i]),
            int(st.peak_flows[i]),
            float(fabric.link_bw[i]),
            float(st.bytes[i] / (fabric.link_bw[i] * end_ns)) if end_ns else 0.0,
        )
        for i in used
    ]
    keep = set(used[:max_tracks])
    series: dict[int, list[tuple[int, float]]] = {}
    for t, link, load in net.load_samples:
        if link in keep:
            series.setdefault(link, []).append((t, load / float(fabric.link_bw[link])))
    counters = [Counter(fabric.link_name(i), "network links", series[i]) for i in used[:max_tracks] if i in series]
    return links, counters
