"""Every rank's ring collectives in closed form, exact to the ns of the per-message engine.

When every rank is simulated (no two programs alike), the engine's cost is its messages: a ring
all-reduce on ``n`` ranks sends ``2 (n - 1)`` messages per rank and chunk, a reduce-scatter or an
all-gather ``n - 1``.  On a one-dimensional ring, with one active chunk per dimension, one
queue, no shared bus and no rendezvous, the engine's rules for one chunk reduce to a max-plus
recurrence over the ranks (per rank ``r``, ``T_r(k)`` the time it sends message ``k`` and posts
the receive of message ``k`` from its predecessor ``p(r)``; ``m`` messages a rank):

    T_r(1)   = S_r + E
    T_r(k+1) = max(T_p(r)(k) + H, T_r(k)) + E + (R if step k reduces else 0),   k = 1 .. m
    done_r   = T_r(m + 1)

with ``S_r`` the chunk's start on rank ``r`` (the previous chunk's end, or the collective's
issue), ``E`` the endpoint delay, ``H`` one hop of a message (the analytical network's delay)
and ``R`` the reduction of a message at local memory bandwidth: on the first ``n - 1`` steps of
an all-reduce and a reduce-scatter, on none of an all-gather.  Every path through it takes all
``m`` steps, so, with ``shift = m - n + 1`` (``n - 1`` for an all-reduce, 0 for the others) and
``H >= 0``:

    done_r = (m + 1) E + (reducing steps) R + shift H + max_{j=0..n-1} (S_{p^(shift + j)(r)} + j H)

-- a circular sliding-window maximum of a ramp over the ring order, O(n) per chunk.  With hops
that differ (a communicator group's ring across dimensions) the ramp ``j H`` becomes the hop
delays summed along the ring (:func:`ring_phase_ends`).  :class:`RingCollectiveBatch` collects
each rank's start of its ``k``-th collective (the engine matches collectives by their order on
every rank, as its message tags do), computes every rank's end when the last rank has started
(each end is after every start, so nothing is scheduled in the past) and completes each rank's
collective at its end.  No event ordering within a tick changes these times, but the engine
orders a rank's same-tick events by when they were scheduled, which the closed form does not
know: an end that shares its rank's tick with other events raises :class:`TieFound`, and
:func:`podsim.engine.simulate` runs again with that collective's messages sent.
:mod:`.closed_form_phases` uses the same closed form phase by phase on every other machine.
``tests/test_ring_fast.py`` checks it against the per-message engine (``fast_collectives=False``),
rank by rank and chunk by chunk, on skewed starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..arrays import unique
from ..collectives.base import ClosedForm
from ..collectives.plan import plan_chunks
from ..errors import SimulationError
from ..network.topology import BlockKind, Topology
from ..workload import NO_VALUE, OpKind, Workload
from ..workload.ops import CollectiveKind

if TYPE_CHECKING:
    from .system import SystemParams


class CollectiveId(NamedTuple):
    """A collective as every member names it: its group key, its number among the rank's
    collectives on that group, its kind (code) and bytes."""

    group: str | None
    number: int
    kind: int
    size: int

    def this(self) -> tuple:
        """The key that sends this collective's messages."""
        return ("this", self.group, self.number)

    def like(self) -> tuple:
        """The key that sends the messages of every collective of its group, kind and size."""
        return ("like", self.group, self.kind, self.size)


class TieFound(Exception):
    """A closed-form end fell in a rank's tick beside other events.

    The per-message engine runs a rank's events of one tick in the order they were scheduled,
    which the closed form does not reproduce: :func:`podsim.engine.simulate` stops the run and
    runs again with ``collective`` sent as messages (and, when a collective like it tied before,
    every collective like it)."""

    def __init__(self, collective: CollectiveId, rank: int, time_ns: int) -> None:
        super().__init__(f"rank {rank} at {time_ns} ns")
        self.collective = collective
        self.rank = rank
        self.time_ns = time_ns


#: the collectives modelled here, and how many of a rank's ``n - 1`` or ``2 (n - 1)`` steps reduce
_KINDS = [int(CollectiveKind.ALL_REDUCE), int(CollectiveKind.REDUCE_SCATTER), int(CollectiveKind.ALL_GATHER)]
_REDUCES = {CollectiveKind.ALL_REDUCE: True, CollectiveKind.REDUCE_SCATTER: True, CollectiveKind.ALL_GATHER: False}


def _window_max(v: np.ndarray) -> np.ndarray:
    """``w[u] = max(v[u], v[u + 1], ..., v[u + n - 1])`` for ``u = 0 .. n - 1`` of ``v`` of
    length ``2n - 1``, in O(n) (a suffix maximum of the first block, a prefix maximum of the
    second)."""
    n = (v.size + 1) // 2
    suffix = np.maximum.accumulate(v[:n][::-1])[::-1]
    w = suffix.copy()
    if n > 1:
        w[1:] = np.maximum(suffix[1:], np.maximum.accumulate(v[n:]))
    return w


def ring_phase_ends(
    starts: np.ndarray,
    order: np.ndarray,
    chunks: int,
    hop_ns: int | np.ndarray,
    endpoint_ns: int,
    reduction_ns: int,
    messages: int,
    reducing: int,
) -> list[np.ndarray]:
    """Each chunk's end on every rank (ns, int64 arrays indexed by rank) of a ring phase of
    ``messages`` messages a rank (``>= n - 1``), the first ``reducing`` of them reduced on
    arrival, the chunks back to back from ``starts`` (indexed by rank); ``order``: the ring
    order (``order[j]`` receives from ``order[j - 1]``); ``hop_ns``: one message's delay, the
    same on every hop, or per hop (``hop_ns[j]`` into ``order[j]``).

    The module docstring's closed form, with ``P`` the hop delays summed along the ring unrolled
    (``P(e) = sum of hop_ns over positions 1 .. e``, ``P(e + n) = P(e) + C``, ``C`` one lap):
    ``end(q) = (messages + 1) E + reducing R + P(q) + max_{e = q - m .. q - m + n - 1}
    (start(e mod n) - P(e))`` -- every path to ``q`` takes ``m`` steps, each a hop or a wait,
    and with delays ``>= 0`` the longest from a given rank goes round as often as it can."""
    n = order.size
    shift = messages - n + 1
    if shift < 0:
        raise ValueError(f"a ring phase of {messages} messages on {n} ranks is not modelled")
    hops = np.broadcast_to(np.asarray(hop_ns, dtype=np.int64), (n,))
    cum = np.zeros(n, dtype=np.int64)  # P(0 .. n-1)
    np.cumsum(hops[1:], out=cum[1:])
    lap = int(cum[-1] + hops[0])  # C
    c = (messages + 1) * endpoint_ns + reducing * reduction_ns
    # u = q - shift; the window of u is e = u - n + 1 .. u.  w(u + k n) = w(u) - k C, so the
    # window maxima of u = 0 .. n - 1 (e = -(n - 1) .. n - 1) give every other u.
    e_cum = np.concatenate((cum[1:] - lap, cum))  # P(e), e = -(n - 1) .. n - 1
    u = np.arange(n, dtype=np.int64) - shift
    k, um = np.divmod(u, n)
    s = np.asarray(starts, dtype=np.int64)
    ends = []
    for _ in range(chunks):
        sq = s[order]
        v = np.concatenate((sq[1:], sq)) - e_cum
        w = _window_max(v)
        end_q = c + cum + w[um] - k * lap
        s = np.empty(n, dtype=np.int64)
        s[order] = end_q
        ends.append(s)
    return ends


def ring_phase_ends_small(
    starts: list[int], hops: list[int], endpoint_ns: int, reduction_ns: int, messages: int, reducing: int
) -> list[int]:
    """:func:`ring_phase_ends` for one chunk, in plain Python (no numpy call overhead: faster on
    the short rings of multi-dimensional networks); ``starts`` and ``hops`` by ring position
    (``hops[j]`` into position ``j``), the ends by ring position."""
    n = len(starts)
    shift = messages - n + 1
    if shift < 0:
        raise ValueError(f"a ring phase of {messages} messages on {n} ranks is not modelled")
    cum = [0] * n
    acc = 0
    for j in range(1, n):
        acc += hops[j]
        cum[j] = acc
    lap = acc + hops[0]
    c = (messages + 1) * endpoint_ns + reducing * reduction_ns
    # v[i] = start(e mod n) - P(e) for e = i - (n - 1); the window of u is v[u .. u + n - 1]
    v = [starts[i + 1] - cum[i + 1] + lap for i in range(n - 1)] + [starts[i] - cum[i] for i in range(n)]
    w = v[:n]
    for i in range(n - 2, -1, -1):  # suffix maxima of the first block
        if w[i + 1] > w[i]:
            w[i] = w[i + 1]
    best = v[n]
    for u in range(1, n):  # with prefix maxima of the second
        x = v[n - 1 + u]
        if x > best:
            best = x
        if best > w[u]:
            w[u] = best
    out = []
    for q in range(n):
        k, um = divmod(q - shift, n)
        out.append(c + cum[q] + w[um] - k * lap)
    return out


def ring_phase_steps(
    starts: np.ndarray,
    pred: np.ndarray,
    chunks: int,
    hop_ns: int | np.ndarray,
    endpoint_ns: int,
    reduction_ns: int,
    messages: int,
    reducing: int,
) -> np.ndarray:
    """The same ends by the step recurrence itself (vector over ranks, loop over messages): the
    reference the closed form is tested against.  ``pred[r]``: the rank ``r`` receives from;
    ``hop_ns``: scalar, or per receiving rank."""
    s = np.asarray(starts, dtype=np.int64)
    hop = np.asarray(hop_ns, dtype=np.int64)
    for _ in range(chunks):
        t = s + endpoint_ns
        for k in range(1, messages + 1):
            t = np.maximum(t[pred] + hop, t) + endpoint_ns + (reduction_ns if k <= reducing else 0)
        s = t
    return s


def fast_path_reason(
    workload: Workload, topology: Topology, system: SystemParams, rendezvous: bool, mirror: bool, replay_only: bool
) -> str | None:
    """None when every collective of ``workload`` may run in closed form, else why not."""
    p = system
    if mirror:
        return "equivalent ranks are simulated once"
    dims = topology.dims
    if len(dims) != 1 or dims[0].kind is not BlockKind.RING or dims[0].npus < 2:
        return "not a one-dimensional ring"
    if rendezvous or replay_only or p.model_shared_bus or p.custom or p.custom_per_node:
        return "rendezvous, replay, a shared bus or custom collectives"
    if p.queues_per_dim != 1 or p.active_chunks_per_dimension != 1:
        return "more than one queue or active chunk per dimension"
    if p.collective_optimization not in ("baseline", "localBWAware") or p.local_mem_bw_GBps is None:
        return "another collective optimization, or no local memory bandwidth"
    if p.endpoint_delay_ns < 1:
        return "an endpoint delay under 1 ns"
    world = {g.name for g in workload.groups if len(set(g.ranks)) == workload.num_ranks}
    used: set[int] = set()
    for prog in workload.programs:
        coll = prog.kind == int(OpKind.COLLECTIVE)
        if not coll.any():
            continue
        codes = prog.collective[coll]
        if not np.isin(codes, _KINDS + [int(CollectiveKind.BROADCAST)]).all() or prog.replay_only[coll].any():
            return "collectives other than all-reduces, reduce-scatters, all-gathers and broadcasts"
        # a broadcast with a recorded duration is replayed for it (no messages); one without is
        # timed as an all-gather of its size (the rank layer's rule)
        bcast = codes == int(CollectiveKind.BROADCAST)
        if bcast.any():
            codes = codes.copy()
            codes[bcast & (prog.duration_ns[coll] <= 0)] = int(CollectiveKind.ALL_GATHER)
            codes = codes[codes != int(CollectiveKind.BROADCAST)]
        used.update(int(k) for k in unique(codes))
        for i in np.flatnonzero(coll).tolist():
            g = int(prog.group[i])
            if g != NO_VALUE and prog.group_keys[g] not in world:
                return "collectives on communicator groups"
            if i in prog.extras and prog.extras[i].get("involved_dim") is not None:
                return "collectives on some dimensions only"
    for code in sorted(used):
        kind = CollectiveKind(code)
        algos = p.algorithms.get(kind)
        if not algos or len(algos) != 1 or algos[0].spans_all or algos[0].phase.closed_form is not ClosedForm.RING:
            return f"the {kind.label.replace('_', '-')} is not a ring"
    return None


class RingCollectiveBatch:
    """Collects every rank's ``k``-th collective and completes them all in closed form (the
    module docstring).  One per simulation; each rank's system calls :meth:`arrive`."""

    def __init__(self, n: int, network: object) -> None:
        self.n = n
        self.network = network
        self._count = [0] * n  # collectives each rank has issued
        self._open: dict[int, tuple[np.ndarray, list, list]] = {}
        self._modelled: dict[int, bool] = {}  # reduce-scatters by size: closed form or messages
        self.messages = 0  #: messages the closed form stood for

    def arrive(
        self,
        sysl: object,
        kind: CollectiveKind,
        size: int,
        on_done: Callable[[int], None],
        label: str = "",
        collective: CollectiveId = CollectiveId(None, 0, 0, 0),
    ) -> bool:
        """Rank ``sysl.rank`` issues its next collective, ``kind`` of ``size`` bytes, now
        (``label`` names its chunks in the timeline, ``collective`` it in :class:`TieFound`).
        False: the collective is not one the closed form reproduces (a reduce-scatter whose
        reductions take 0 ns: its last step ends in the tick it is scheduled); the caller sends
        its messages, as every rank does.

        Raises:
            SimulationError: when ranks issue different collectives as their ``k``-th.
        """
        r = sysl.rank  # type: ignore[attr-defined]
        k = self._count[r]
        self._count[r] = k + 1
        if kind == CollectiveKind.REDUCE_SCATTER:
            ok = self._modelled.get(size)
            if ok is None:
                chunks = self._plan(sysl, kind, size)
                ok = self._modelled[size] = not chunks or sysl.reduction_ns(chunks[0][0].algorithm.msg_size) > 0
            if not ok:
                return False
        entry = self._open.get(k)
        if entry is None:
            entry = self._open[k] = (np.zeros(self.n, dtype=np.int64), [None] * self.n, [0, kind, size])
        starts, done, meta = entry
        if (kind, size) != (meta[1], meta[2]):
            raise SimulationError(
                f"rank {r}'s collective number {k + 1} is a {kind.label} of {size} bytes, another "
                f"rank's a {meta[1].label} of {meta[2]} bytes: every rank must issue the same "
                "collectives in the same order"
            )
        starts[r] = sysl.buckets.queue.now  # type: ignore[attr-defined]
        done[r] = (sysl, on_done, label, collective)
        meta[0] += 1
        if meta[0] == self.n:
            del self._open[k]
            self._complete(starts, done, kind, size)
        return True

    @staticmethod
    def _plan(sysl: object, kind: CollectiveKind, size: int) -> list:
        s: Any = sysl
        return plan_chunks(
            kind,
            size,
            s._dims(kind, None),
            None,
            s.levels,
            s.p.preferred_dataset_splits,
            s.total_npus,
            s.p.collective_optimization,
        )

    def _complete(self, starts: np.ndarray, done: list, kind: CollectiveKind, size: int) -> None:
        n = self.n
        sys0 = done[0][0]
        p = sys0.p
        chunks = self._plan(sys0, kind, size)
        per_chunk: list[np.ndarray] = []
        ends = starts
        if chunks:
            alg = chunks[0][0].algorithm
            if any(len(c) != 1 for c in chunks) or alg.closed_form is not ClosedForm.RING or alg.ring.local:
                raise SimulationError("internal: the closed-form ring collective met a chunk it does not model")
            # the ring order: each rank receives from its sender in the chunk's direction
            order = np.empty(n, dtype=np.int64)
            x = 0
            for j in range(n):
                order[j] = x
                x = alg.ring.receiver(x, alg.direction)
            hop = self.network.delay_ns(int(order[0]), int(order[1]), alg.msg_size)  # type: ignore[attr-defined]
            reducing = n - 1 if _REDUCES[kind] else 0
            red = sys0.reduction_ns(alg.msg_size) if reducing else 0
            per_chunk = ring_phase_ends(
                starts, order, len(chunks), hop, p.endpoint_delay_ns, red, alg.stream_count, reducing
            )
            ends = per_chunk[-1]
            self.messages += n * len(chunks) * alg.stream_count
        now = sys0.buckets.queue.now
        for r, (sysl, on_done, label, collective) in enumerate(done):
            if sysl.phase_log is not None:  # the chunks as the engine logs them
                a = int(starts[r])
                for c, e in enumerate(per_chunk):
                    ph = chunks[c][0]
                    name = f"{label} chunk {c}" if len(chunks) > 1 else label
                    sysl.phase_log.append(
                        (
                            abs(ph.queue),
                            name,
                            ph.algorithm.kind.label,
                            ph.algorithm.name,
                            int(ph.algorithm.data_size),
                            a,
                            int(e[r]),
                        )
                    )
                    a = int(e[r])
            t = int(ends[r])
            sysl.buckets.register(t - now, _Done(sysl, on_done, t - int(starts[r]), collective))


class _Done:
    """``on_done(execution_ns)`` as a bucket callback, alone in its rank's tick (else
    :class:`TieFound`)."""

    __slots__ = ("sysl", "fn", "ns", "collective")

    def __init__(self, sysl: object, fn: Callable[[int], None], ns: int, collective: CollectiveId) -> None:
        self.sysl = sysl
        self.fn = fn
        self.ns = ns
        self.collective = collective

    def __call__(self) -> None:
        b = self.sysl.buckets  # type: ignore[attr-defined]
        if b.crowded() is not None:
            raise TieFound(self.collective, self.sysl.rank, b.queue.now)  # type: ignore[attr-defined]
        self.fn(self.ns)
