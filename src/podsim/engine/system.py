"""ASTRA-sim's system layer for one rank: collectives become streams (chunks) that move
through per-dimension queues, at most ``ceil(active-chunks-per-dimension / queues)`` running
per queue, ordered by priority (LIFO, FIFO or explicit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..collectives.base import LogicalRing, PhaseAlgorithm
from ..collectives.custom import CustomPhase
from ..collectives.plan import (
    Algo,
    LogicalDim,
    PhaseSpec,
    QueueLevel,
    logical_dims,
    plan_chunks,
)
from ..errors import InputError
from ..workload import Program
from ..workload.ops import CollectiveKind
from .buckets import RankBuckets
from .ring_fast import CollectiveId
from .shared_bus import SharedBus


@dataclass
class SystemParams:
    """Settings of the system layer (from an ASTRA-sim system JSON)."""

    scheduling_policy: str = "LIFO"
    collective_optimization: str = "baseline"
    active_chunks_per_dimension: int = 1
    preferred_dataset_splits: int = 1
    endpoint_delay_ns: int = 10
    local_mem_bw_GBps: float | None = None
    queues_per_dim: int = 1
    algorithms: dict[CollectiveKind, tuple[Algo, ...]] = field(default_factory=dict)
    #: the LogGP shared memory bus (model-shared-bus): L, o, g in ns, G in ns per byte
    model_shared_bus: bool = False
    loggp: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    local_reduction_delay: int = 1
    #: custom collectives: per collective kind, one program per participant position
    custom: dict[CollectiveKind, list[Program]] = field(default_factory=dict)
    #: custom collectives for single workload nodes (by node id), same layout
    custom_per_node: dict[int, list[Program]] = field(default_factory=dict)


class DataSet:
    """The chunks of one collective; calls ``on_done(execution_ns)`` when all finished."""

    __slots__ = ("total", "finished", "created", "on_done", "collective", "closed_form")

    def __init__(
        self,
        created: int,
        on_done: Callable[[int], None],
        collective: CollectiveId = CollectiveId(None, 0, 0, 0),
        closed_form: bool = True,
    ) -> None:
        self.total = 0
        self.finished = 0
        self.created = created
        self.on_done = on_done
        #: the collective as every member names it (:class:`.ring_fast.TieFound`)
        self.collective = collective
        #: whether its phases may run in closed form (not sent as messages after a tie)
        self.closed_form = closed_form


class Stream:
    """One chunk of a collective with its remaining phases."""

    __slots__ = (
        "sid",
        "phases",
        "phase",
        "queue",
        "priority",
        "dataset",
        "initialized",
        "steps_finished",
        "sys",
        "phase_start",
        "label",
    )

    def __init__(self, sys: "RankSystem", sid: int, phases: list[PhaseSpec], priority: int, dataset: DataSet) -> None:
        self.sys = sys
        self.sid = sid
        self.phases = phases
        self.phase: PhaseSpec | None = None
        self.queue = -1
        self.priority = priority
        self.dataset = dataset
        self.initialized = False
        self.steps_finished = 0
        self.phase_start = -1
        self.label = ""

    # PhaseHost interface ---------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.sys.rank

    def bundle(self, fast: bool, needs_processing: bool, size: int, to_memory: bool, send_back: bool = False) -> None:
        self.sys.bundle(self, fast, needs_processing, size, to_memory, send_back)

    def send(self, dst: int, size: int) -> None:
        self.sys.msg.send(self.sys.rank, dst, size, -1 - self.sid, None)

    def recv(self, src: int, size: int) -> None:
        alg = self.phase.algorithm  # type: ignore[union-attr]
        self.sys.msg.recv(self.sys.rank, src, size, -1 - self.sid, alg.on_packet_received)

    def phase_done(self) -> None:
        self.sys.proceed(self)

    # services for custom collectives (point-to-point with the ET's own tags)
    def p2p_send(self, dst: int, size: int, tag: int, done: Callable[[], None]) -> None:
        self.sys.msg.send(self.sys.rank, dst, size, tag, done)

    def p2p_recv(self, src: int, size: int, tag: int, done: Callable[[], None]) -> None:
        self.sys.msg.recv(self.sys.rank, src, size, tag, done)

    def after(self, ns: int, fn: Callable[[], None]) -> None:
        self.sys.buckets.register(ns, fn)


class RankSystem:
    """The system layer of one rank."""

    def __init__(
        self, rank: int, shape: tuple[int, ...], params: SystemParams, buckets: RankBuckets, msg: object
    ) -> None:
        self.rank = rank
        self.shape = shape
        self.p = params
        self.buckets = buckets
        self.msg = msg  # Messaging or MirrorMessaging
        self.total_npus = math.prod(shape)
        nq = params.queues_per_dim
        self.levels = [QueueLevel(d * nq, nq) for d in range(len(shape))]
        self.active: dict[int, list[Stream]] = {q: [] for q in range(len(shape) * nq)}
        self.running: dict[int, int] = {q: 0 for q in self.active}
        self.threshold = math.ceil(params.active_chunks_per_dimension / nq)
        self.ready: list[Stream] = []
        self.priority_counter = 0
        self.num_streams = 0
        self.group_streams: dict[str, int] = {}
        self.first_phase_streams = 0
        self.total_running = 0
        self._dims_cache: dict[tuple, list[LogicalDim]] = {}
        lmb = params.local_mem_bw_GBps
        self._lmb = None if lmb is None else lmb * 1000000000.0
        self.comm_delay = params.endpoint_delay_ns
        #: (queue, stream label, collective, algorithm, bytes, start, end) of every finished phase,
        #: kept when timelines are recorded
        self.phase_log: list[tuple[int, str, str, str, int, int, int]] | None = None
        #: the closed-form ring collectives (:mod:`.ring_fast`), when the simulation allows it
        self.fast_ring = None
        #: every rank's ring phases in closed form (:mod:`.closed_form_phases`), when the simulation allows it
        self.fast_phases = None
        #: collectives sent as messages although a closed form could run them (:class:`.ring_fast.TieFound`)
        self.send_messages: frozenset[tuple] = frozenset()  # CollectiveId.this() and .like() keys
        self._issued: dict[str | None, int] = {}
        self.shared_bus = None
        if params.model_shared_bus:
            L, o, g, G = params.loggp
            self.shared_bus = SharedBus(buckets, int(L), int(o), int(g), float(G), params.local_reduction_delay)

    # -- collective generation ----------------------------------------------------------
    def _dims(self, kind: CollectiveKind, group: tuple[int, ...] | None) -> list[LogicalDim]:
        key = (kind, group)
        dims = self._dims_cache.get(key)
        if dims is None:
            algos = self.p.algorithms.get(kind)
            if not algos:
                raise InputError(
                    f"no implementation configured for {kind.label.replace('_', '-')} "
                    f"(set '{kind.label.replace('_', '-')}-implementation')",
                    where=f"{kind.label.replace('_', '-')}-implementation",
                )
            if group is None:
                dims = logical_dims(self.rank, self.shape, algos)
            else:
                # a sub-group is one logical ring in the order the comm-group file lists it
                members = list(group)
                algo = algos[0] if len(algos) == 1 else Algo("ring")
                if algo.spans_all:
                    algo = Algo(algo.base, algo.window)
                ring = LogicalRing(self.rank, len(members), members.index(self.rank), members=members, local=True)
                if not algo.phase.on_groups:
                    raise InputError(
                        f"{algo.phase.name} on a communicator group is not supported", where="all-reduce-implementation"
                    )
                dims = [LogicalDim(ring, algo)]
            self._dims_cache[key] = dims
        return dims

    def priority(self, explicit: int) -> int:
        pol = self.p.scheduling_policy
        if pol == "LIFO":
            self.priority_counter += 1
            return self.priority_counter - 1
        if pol == "FIFO":
            self.priority_counter -= 1
            return self.priority_counter + 1
        return explicit

    def _stream_id(self, group_key: str | None) -> int:
        if group_key is None:
            sid = self.num_streams
            self.num_streams += 1
            return sid
        sid = self.group_streams.get(group_key, int(group_key) * 1000000 if group_key.isdecimal() else 0)
        self.group_streams[group_key] = sid + 1
        return sid

    def _custom(self, kind: CollectiveKind, node_id: int) -> list[Program] | None:
        progs = self.p.custom_per_node.get(node_id)
        return progs if progs is not None else self.p.custom.get(kind)

    def generate(
        self,
        kind: CollectiveKind,
        size: int,
        involved: tuple[bool, ...] | None,
        group: tuple[int, ...] | None,
        group_key: str | None,
        explicit_priority: int,
        on_done: Callable[[int], None],
        node_id: int = -1,
        label: str = "",
    ) -> None:
        """Start a collective of ``size`` bytes; ``on_done(execution_ns)`` when it ends.
        ``label`` names its chunks in the timeline."""
        custom = self._custom(kind, node_id)
        if custom is not None:
            pos = self.rank if group is None else sorted(group).index(self.rank)
            if pos >= len(custom):
                raise InputError(
                    f"the custom collective has {len(custom)} participants but rank {self.rank} is participant {pos}",
                    where="*-implementation-custom",
                )
            ds = DataSet(self.buckets.queue.now, on_done)
            ds.total = 1  # ASTRA-sim expects ceil(size / chunk) streams but creates one
            pri = self.priority(explicit_priority)
            phase = PhaseSpec(0, CustomPhase(kind, custom[pos], group, size))  # type: ignore[arg-type]
            st = Stream(self, self._stream_id(group_key), [phase], pri, ds)
            st.label = label
            self._insert(self.ready, st)
            self._schedule()
            return
        pri = self.priority(explicit_priority)
        number = self._issued.get(group_key, 0)
        self._issued[group_key] = number + 1
        coll = CollectiveId(group_key, number, int(kind), size)
        sent = self.send_messages
        closed = not sent or (coll.this() not in sent and coll.like() not in sent)
        if self.fast_ring is not None and closed and self.fast_ring.arrive(self, kind, size, on_done, label, coll):
            return  # every rank's ring collective in closed form (ring_fast)
        dims = self._dims(kind, group)
        levels = self.levels if group is None else [QueueLevel(0, self.p.queues_per_dim)]
        inv = involved if group is None else None
        chunks = plan_chunks(
            kind,
            size,
            dims,
            inv,
            levels,
            self.p.preferred_dataset_splits,
            self.total_npus,
            self.p.collective_optimization,
        )
        ds = DataSet(self.buckets.queue.now, on_done, coll, closed)
        ds.total = len(chunks)
        if not chunks:
            # ASTRA-sim never finishes such a collective; podsim completes it at once.
            on_done(0)
            return
        for k, phases in enumerate(chunks):
            st = Stream(self, self._stream_id(group_key), phases, pri, ds)
            st.label = f"{label} chunk {k}" if len(chunks) > 1 else label
            self._insert(self.ready, st)
            self._schedule()

    # -- scheduling ---------------------------------------------------------------------
    @staticmethod
    def _insert(queue: list[Stream], st: Stream) -> None:
        i = 0
        n = len(queue)
        while i < n:
            other = queue[i]
            if other.initialized or other.priority >= st.priority:
                i += 1
                continue
            break
        queue.insert(i, st)

    def _schedule(self) -> None:
        count = len(self.ready)
        while count > 0:
            st = self.ready[0]
            self.proceed(st)
            self.ready.pop(0)
            count -= 1
            self.first_phase_streams += 1
            self.total_running += 1

    def _init_queue(self, q: int) -> None:
        lst = self.active[q]
        while self.running[q] < len(lst) and self.running[q] < self.threshold:
            st = lst[self.running[q]]
            self.running[q] += 1
            st.initialized = True
            st.phase_start = self.buckets.queue.now
            if self.fast_phases is not None and st.dataset.closed_form:
                self.fast_phases.start(self, st)  # ring phases in closed form (closed_form_phases)
            else:
                st.phase.algorithm.start(st)  # type: ignore[union-attr]

    def _removed(self, q: int) -> None:
        self.running[q] -= 1
        self._schedule()
        self._init_queue(q)

    def proceed(self, st: Stream) -> None:
        """Move a stream to its next phase (or finish it): ASTRA-sim's
        proceed_to_next_vnet_baseline, step for step."""
        prev = st.queue
        if self.phase_log is not None and st.phase is not None and st.phase_start >= 0:
            alg = st.phase.algorithm
            self.phase_log.append(
                (
                    st.queue,
                    st.label,
                    alg.kind.label,
                    getattr(alg, "name", ""),
                    int(getattr(alg, "data_size", 0)),
                    st.phase_start,
                    self.buckets.queue.now,
                )
            )
            st.phase_start = -1
        if st.steps_finished == 1:
            self.first_phase_streams -= 1
        if not st.phases:
            ds = st.dataset
            ds.finished += 1
            if ds.finished == ds.total:
                ds.on_done(self.buckets.queue.now - ds.created)
        if st.queue >= 0 and st.phase is not None:
            lst = self.active[st.phase.queue]
            for i, other in enumerate(lst):
                if other.sid == st.sid:
                    del lst[i]
                    break
        if not st.phases:
            self.total_running -= 1
            if prev >= 0:
                self._removed(prev)
            return
        st.steps_finished += 1
        st.phase = st.phases.pop(0)
        st.queue = abs(st.phase.queue)
        st.initialized = False
        self._insert(self.active[st.queue], st)
        if prev >= 0:
            self._removed(prev)
        self._init_queue(st.queue)

    # -- memory bus -----------------------------------------------------------------------
    def bundle(
        self,
        st: Stream,
        fast: bool,
        needs_processing: bool,
        size: int,
        to_memory: bool = False,
        send_back: bool = False,
    ) -> None:
        alg: PhaseAlgorithm = st.phase.algorithm  # type: ignore[union-attr]
        if self.shared_bus is not None and not fast:

            def arrived() -> None:  # ASTRA-sim's PacketBundle::call, reached through the bus
                if needs_processing:
                    self.buckets.register(self.reduction_ns(size), alg.on_general)
                else:
                    alg.on_general()

            if to_memory:
                self.shared_bus.to_memory(size, needs_processing, send_back, arrived)
            else:
                self.shared_bus.to_npu(size, needs_processing, send_back, arrived)
            return
        delay = 10 if fast else self.comm_delay
        if needs_processing:

            def processed() -> None:
                self.buckets.register(self.reduction_ns(size), alg.on_general)

            self.buckets.register(delay, processed)
        else:
            self.buckets.register(delay, alg.on_general)

    def reduction_ns(self, size: int) -> int:
        """One write and two reads of ``size`` bytes at local memory bandwidth."""
        if self._lmb is None:
            raise InputError("'local-mem-bw' is not set, but a reduction needs it (GB/s)", where="local-mem-bw")
        one = int(float(size) / self._lmb * 1e9)
        return 3 * one
