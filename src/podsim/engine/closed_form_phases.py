"""Every rank's ring, halving-doubling and direct phases in closed form, inside the system
layer's queues.

Which phases: those whose algorithm declares a closed form
(:attr:`~podsim.collectives.base.PhaseAlgorithm.closed_form`): ``RING`` (the ring recurrence
below), ``STEPS`` (a step recurrence) or ``DIRECT`` (every peer at once).  A phase that declares
none is sent as messages.

:mod:`.ring_fast` completes whole collectives when the machine is a one-dimensional ring with
one queue and one active chunk.  Everywhere else (several dimensions, several queues or active
chunks, rings on communicator groups, other algorithms on some dimensions, all-to-alls), the
system layer still splits each collective into chunks and each chunk into phases, and still
decides, queue by queue and rank by rank, when each phase starts -- exactly as before.  Only a
*ring phase* is no longer stepped message by message: :class:`ClosedFormPhases` collects the
start of one phase (a chunk's stream, its phase number, the ring and its direction) on every
member of the ring, and when the last member has started it computes every member's end with
:func:`.ring_fast.ring_phase_ends` (its hops may differ, as a communicator group's do) and
schedules each member's ``proceed`` at its end.  Halving-doubling phases are timed the same way
by their step recurrence (:mod:`.phase_steps`), and direct phases that send to every peer at
once by their own closed form (:meth:`ClosedFormPhases._start_direct`).

Why this is exact: on the analytical network a message's delay does not depend on other
traffic, and a phase's packets touch only its own state, so two phases running at once on a
rank (other chunks, other queues, other algorithms still sent as messages) never change each
other's times; what couples them is when the queues start them, and that is left to the system
layer.  What the closed form cannot reproduce is the order of events in one rank's tick, which
the engine takes from when they were scheduled: an end is therefore run only when it is alone
in its rank's tick, or shares it only with the ends of *twins*; else
(:class:`.ring_fast.TieFound`) the simulation stops and runs again with that collective's
messages sent.  A phase is sent as messages when its last step could be scheduled in its own
tick (an endpoint delay under 1 ns, or a last step that reduces in 0 ns).  Twins are phases of the same ring and
kind that start at the same times on every member, in the same order on every member (two
chunks of one collective, with several active chunks a queue): the per-message engine runs
every event of the first before the same event of the second, so it ends them in their start
order, and so does the closed form, which completes the first first.
``tests/test_closed_form_phases.py`` compares every rank's ops and chunks with the per-message engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..collectives.base import ClosedForm, Direction, PhaseAlgorithm
from ..collectives.direct import DirectPhase
from ..collectives.ring import RingPhase
from ..errors import SimulationError
from ..workload.ops import CollectiveKind
from .phase_steps import StepPattern, StepTable, step_pattern
from .ring_fast import TieFound, ring_phase_ends, ring_phase_ends_small

if TYPE_CHECKING:
    from ..collectives.base import LogicalRing
    from ..network.analytical import AnalyticalNetwork
    from .system import RankSystem, Stream, SystemParams

#: rings up to this many ranks are computed in plain Python, longer ones with numpy
_SMALL = 128

#: the collectives whose ring phases are modelled, and whether their first ``n - 1`` steps reduce
_REDUCES = {
    CollectiveKind.ALL_REDUCE: True,
    CollectiveKind.REDUCE_SCATTER: True,
    CollectiveKind.ALL_GATHER: False,
    CollectiveKind.ALL_TO_ALL: False,
}


def phase_mode_reason(mirror: bool, rendezvous: bool, system: SystemParams) -> str | None:
    """None when ring phases may run in closed form, else why not."""
    if mirror:
        return "equivalent ranks are simulated once"
    if rendezvous:
        return "rendezvous messages"
    if system.model_shared_bus:
        return "the shared memory bus couples a rank's phases"
    return None


class _Open:
    """One ring phase as its members start it."""

    __slots__ = ("starts", "order", "members", "count", "meta")

    def __init__(self, n: int, meta: tuple) -> None:
        self.starts = [0] * n  # by position in the ring's direction
        self.order = [0] * n  # the batch's count of starts when each member started
        self.members: list[tuple[RankSystem, Stream] | None] = [None] * n
        self.count = 0
        self.meta = meta


class _Twins:
    """What makes two completed phases twins (the module docstring): their ring, direction and
    parameters, every member's start, and the order they started in."""

    __slots__ = ("key", "starts", "order")

    def __init__(self, key: tuple, starts: list[int], order: list[int]) -> None:
        self.key = key
        self.starts = starts
        self.order = order

    def before(self, other: "_Twins") -> bool:
        """Whether this phase and ``other`` are twins, this one started first on every member."""
        return (
            self.key == other.key
            and self.starts == other.starts
            and all(a < b for a, b in zip(self.order, other.order))
        )


class ClosedFormPhases:
    """Completes the phases whose algorithm declares a closed form (the module docstring); any
    other phase is started as messages.  One per simulation; each rank's system layer calls
    :meth:`start` instead of starting a phase."""

    def __init__(self, network: AnalyticalNetwork) -> None:
        self.network = network
        self._open: dict[tuple, _Open] = {}
        self._hops: dict[tuple, list[int]] = {}
        self._patterns: dict[tuple, StepPattern | None] = {}  # (shape, ring position) -> its steps
        self._tables: dict[tuple, StepTable] = {}  # (ring, shape) -> every member's steps
        self._pairs: dict[tuple, np.ndarray] = {}  # (ring, bytes) -> delays between members
        self._started = 0
        self.messages = 0  #: messages the closed form stood for
        self.phases = 0  #: ring phases completed in closed form

    def start(self, sysl: RankSystem, st: Stream) -> None:
        """Stream ``st`` of rank ``sysl.rank`` starts its current phase now.

        Raises:
            SimulationError: when the ranks of one ring disagree on the phase.
        """
        alg = st.phase.algorithm  # type: ignore[union-attr]
        form = alg.closed_form
        if form is ClosedForm.STEPS:
            self._start_steps(sysl, st, alg)
        elif form is ClosedForm.DIRECT:
            self._start_direct(sysl, st, alg)  # type: ignore[arg-type]
        elif form is ClosedForm.RING:
            self._start_ring(sysl, st, alg)  # type: ignore[arg-type]
        else:
            alg.start(st)  # type: ignore[arg-type]

    def _start_ring(self, sysl: RankSystem, st: Stream, alg: RingPhase) -> None:
        """A phase timed by the ring recurrence (:func:`.ring_fast.ring_phase_ends`)."""
        kind = alg.kind
        reduces = _REDUCES.get(kind)
        endpoint = 10 if alg.fast else sysl.p.endpoint_delay_ns
        if reduces is None or endpoint < 1:
            alg.start(st)  # type: ignore[arg-type]
            return
        reduction = sysl.reduction_ns(alg.msg_size) if reduces else 0
        if kind == CollectiveKind.REDUCE_SCATTER and reduction < 1:  # the last step reduces
            alg.start(st)  # type: ignore[arg-type]
            return
        ring = alg.ring
        n = alg.n
        key = (st.sid, st.steps_finished, ring.key, alg.direction)
        meta = (kind, alg.msg_size, alg.stream_count, endpoint, reduction)
        pos = ring.index if alg.direction is Direction.CLOCKWISE else n - 1 - ring.index
        entry = self._collect(sysl, st, key, meta, n, pos)
        if entry is None:
            return
        hops = self._hop_delays(ring, alg.direction, alg.msg_size)
        reducing = n - 1 if reduces else 0
        if n <= _SMALL:
            ends = ring_phase_ends_small(entry.starts, hops, endpoint, reduction, alg.stream_count, reducing)
        else:
            ends = ring_phase_ends(
                np.array(entry.starts, dtype=np.int64),
                np.arange(n),
                1,
                np.array(hops),
                endpoint,
                reduction,
                alg.stream_count,
                reducing,
            )[0].tolist()
        self.messages += n * alg.stream_count
        self._finish(entry, (ring.key, alg.direction, meta), ends)

    def _start_steps(self, sysl: RankSystem, st: Stream, alg: PhaseAlgorithm) -> None:
        """A phase timed by its step recurrence (:mod:`.phase_steps`)."""
        endpoint = 10 if alg.fast else sysl.p.endpoint_delay_ns
        ring = alg.ring
        shape = (type(alg), alg.kind, alg.n, alg.data_size, alg.fast)
        pkey = shape + (ring.index,)
        if pkey not in self._patterns:
            self._patterns[pkey] = step_pattern(alg)
        pattern = self._patterns[pkey]
        if (
            endpoint < 1
            or pattern is None
            or (pattern.bundles[-1][0] and sysl.reduction_ns(pattern.bundles[-1][1]) < 1)
        ):
            alg.start(st)  # type: ignore[arg-type]  # its last step could end in its own tick
            return
        meta = shape + (endpoint,)
        entry = self._collect(sysl, st, (st.sid, st.steps_finished, ring.key, None), meta, alg.n, ring.index)
        if entry is None:
            return
        tkey = (ring.key, meta)
        table = self._tables.get(tkey)
        if table is None:
            patterns = [self._patterns[shape + (i,)] for i in range(alg.n)]
            sysl0 = entry.members[0][0]  # type: ignore[index]
            try:
                table = self._tables[tkey] = StepTable(
                    patterns,
                    ring.members,  # type: ignore[arg-type]
                    self.network.delay_ns,
                    endpoint,
                    sysl0.reduction_ns,
                )
            except ValueError as e:
                raise SimulationError(f"internal: the {alg.name} phase's steps do not chain: {e}") from None
        self.messages += table.messages
        self._finish(entry, tkey, table.ends(entry.starts))

    def _start_direct(self, sysl: RankSystem, st: Stream, alg: DirectPhase) -> None:
        """A direct phase whose window covers every peer (not an all-reduce, not on a local
        ring): each rank's first packets cross the bus together (``E``), it sends to every peer
        at once and posts every receive, and each arrival crosses the bus (``E``, ``+ R`` in a
        reduce-scatter), so ``end_r = max(S_r, max_p (S_p + H_pr)) + 2E + R``."""
        kind, n = alg.kind, alg.n
        endpoint = sysl.p.endpoint_delay_ns
        if (
            alg.fast
            or kind == CollectiveKind.ALL_REDUCE
            or alg.stream_count != n - 1
            or alg.parallel_reduce != n - 1
            or endpoint < 1
            or kind not in _REDUCES
        ):
            alg.start(st)  # type: ignore[arg-type]
            return
        reduction = sysl.reduction_ns(alg.msg_size) if kind == CollectiveKind.REDUCE_SCATTER else 0
        if kind == CollectiveKind.REDUCE_SCATTER and reduction < 1:  # its last packet reduces
            alg.start(st)  # type: ignore[arg-type]
            return
        ring = alg.ring
        meta = ("direct", kind, alg.msg_size, endpoint, reduction)
        entry = self._collect(sysl, st, (st.sid, st.steps_finished, ring.key, "direct"), meta, n, ring.index)
        if entry is None:
            return
        hop = self._pair_delays(ring, alg.msg_size)
        arrive = (np.asarray(entry.starts, dtype=np.int64)[:, None] + hop).max(axis=0)  # over senders
        ends = np.maximum(arrive, entry.starts) + 2 * endpoint + reduction
        self.messages += n * (n - 1)
        self._finish(entry, (ring.key, "direct", meta), ends.tolist())

    def _pair_delays(self, ring: LogicalRing, msg: int) -> np.ndarray:
        """``d[p, r]``: a message's delay from position ``p`` to ``r`` of the ring (ns); a large
        negative number on the diagonal, so that a rank is not its own sender."""
        key = (ring.key, "pairs", msg)
        d = self._pairs.get(key)
        if d is None:
            ids = ring.members
            delay = self.network.delay_ns
            n = len(ids)
            d = np.array([[delay(a, b, msg) if a != b else 0 for b in ids] for a in ids], dtype=np.int64)
            d[np.arange(n), np.arange(n)] = np.iinfo(np.int64).min // 4
            self._pairs[key] = d
        return d

    def _collect(self, sysl: RankSystem, st: Stream, key: tuple, meta: tuple, n: int, pos: int) -> _Open | None:
        """Note rank ``sysl.rank``'s start of the phase ``key`` at ring position ``pos``; the
        phase when every member has started it, else None."""
        entry = self._open.get(key)
        if entry is None:
            entry = self._open[key] = _Open(n, meta)
        elif entry.meta != meta:
            raise SimulationError(
                f"rank {sysl.rank}'s phase {st.steps_finished} of stream {st.sid} differs from "
                f"another rank's on the same ring ({meta[:3]} against {entry.meta[:3]}): every "
                "rank must issue the same collectives in the same order"
            )
        if entry.members[pos] is not None:
            raise SimulationError(
                f"two ranks at position {pos} of one ring started phase {st.steps_finished} of stream {st.sid}"
            )
        entry.starts[pos] = sysl.buckets.queue.now
        self._started += 1
        entry.order[pos] = self._started
        entry.members[pos] = (sysl, st)
        entry.count += 1
        if entry.count < n:
            return None
        del self._open[key]
        return entry

    def _finish(self, entry: _Open, twin_key: tuple, ends: list[int]) -> None:
        """Schedule every member's end (ns, by position)."""
        self.phases += 1
        twins = _Twins(twin_key, entry.starts, entry.order)
        now = -1
        for (sysl, st), t in zip(entry.members, ends):  # type: ignore[misc]
            b = sysl.buckets
            if now < 0:
                now = b.queue.now
            b.register(t - now, _PhaseEnd(sysl, st, twins))

    def _hop_delays(self, ring: LogicalRing, direction: Direction, msg: int) -> list[int]:
        """The delay of one message into each position of the ring (in its direction), ns."""
        key = (ring.key, direction, msg)
        hops = self._hops.get(key)
        if hops is None:
            ids = ring.members if direction is Direction.CLOCKWISE else ring.members[::-1]
            delay = self.network.delay_ns
            hops = self._hops[key] = [delay(ids[j - 1], ids[j], msg) for j in range(len(ids))]
        return hops


class _PhaseEnd:
    """A rank's end of a closed-form ring phase: its stream proceeds, alone in its rank's tick or
    beside its twins' ends in their start order (else :class:`TieFound`)."""

    __slots__ = ("sysl", "st", "twins")

    def __init__(self, sysl: RankSystem, st: Stream, twins: _Twins) -> None:
        self.sysl = sysl
        self.st = st
        self.twins = twins

    def __call__(self) -> None:
        b = self.sysl.buckets
        lst = b.crowded()
        if lst is not None and not _twins_in_order(lst):
            raise TieFound(self.st.dataset.collective, self.sysl.rank, b.queue.now)
        self.sysl.proceed(self.st)


def _twins_in_order(callbacks: list) -> bool:
    """Whether a tick's callbacks are all ends of twin phases, in their start order."""
    if not all(type(c) is _PhaseEnd for c in callbacks):
        return False
    return all(a.twins.before(b.twins) for a, b in zip(callbacks, callbacks[1:]))
