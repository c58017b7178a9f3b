"""Every rank's ring all-reduce in closed form, exact to the ns of the per-message engine
(issue #17).

When every rank is simulated (no two programs alike), the engine's cost is its messages: a ring
all-reduce on ``n`` ranks sends ``2 (n - 1)`` messages per rank and chunk.  On a one-dimensional
ring, with one active chunk per dimension, one queue, no shared bus and no rendezvous, the
engine's rules for one chunk reduce to a max-plus recurrence over the ranks (per rank ``r``,
``T_r(k)`` the time it sends message ``k`` and posts the receive of message ``k`` from its
predecessor ``p(r)``):

    T_r(1)   = S_r + E
    T_r(k+1) = max(T_p(r)(k) + H, T_r(k)) + E + (R if k <= n - 1 else 0),   k = 1 .. 2n - 2
    done_r   = T_r(2n - 1)

with ``S_r`` the chunk's start on rank ``r`` (the previous chunk's end, or the collective's
issue), ``E`` the endpoint delay, ``H`` one hop of a message (the analytical network's delay),
``R`` the reduction of a message at local memory bandwidth (reduce-scatter half only).  Every
path through it takes all ``2n - 2`` steps, so (``H >= 0``)

    done_r = (2n - 1) E + (n - 1) R + (n - 1) H + max_{i=0..n-1} (S_{p^(i-1)(r)} + i H)

-- a circular sliding-window maximum of a ramp over the ring order, O(n) per chunk with numpy.
No event ordering within a tick changes any of these times.  :class:`RingAllReduceBatch` collects
each rank's start of its ``k``-th collective (the engine matches collectives by their order on
every rank, as its message tags do), computes every rank's end when the last rank has started
(each end is at or after every start, so nothing is scheduled in the past) and completes each
rank's collective at its end.  ``tests/test_ring_fast.py`` checks it against the per-message
engine (``fast_collectives=False``), rank by rank, on skewed starts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..collectives.plan import plan_chunks
from ..collectives.ring import RingPhase
from ..errors import SimulationError
from ..network.topology import BlockKind, Topology
from ..workload import NO_VALUE, OpKind, Workload
from ..workload.ops import CollectiveKind


def ring_window_max(starts: np.ndarray, order: np.ndarray, hop_ns: int) -> np.ndarray:
    """For each position ``j`` of the ring order ``order`` (rank ``order[j]`` receives from
    ``order[j - 1]``): ``max_{i=0..n-1} starts[order[(j + 1 - i) mod n]] + i hop_ns``, in O(n).
    Returns the values per rank (int64 ns)."""
    n = order.size
    s = starts[order]                                # in ring order
    e = np.arange(2 * n, dtype=np.int64)
    p = e - (n - 2)                                  # the unwrapped source position j + 1 - i
    v = s[p % n] - p * hop_ns
    v[2 * n - 1] = np.iinfo(np.int64).min // 4       # padding: windows are [j, j + n - 1] of [0, 2n - 2]
    suffix = np.maximum.accumulate(v[:n][::-1])[::-1]
    prefix = np.maximum.accumulate(v[n:])
    w = suffix.copy()
    w[1:] = np.maximum(suffix[1:], prefix[:n - 1])
    w += (np.arange(n, dtype=np.int64) + 1) * hop_ns
    out = np.empty(n, dtype=np.int64)
    out[order] = w
    return out


def ring_allreduce_ends(starts: np.ndarray, order: np.ndarray, chunks: int, hop_ns: int, endpoint_ns: int,
                        reduction_ns: int) -> list[np.ndarray]:
    """Each chunk's end on every rank (ns, int64 arrays), the chunks run back to back from
    ``starts`` (the module docstring's closed form)."""
    n = order.size
    c = (2 * n - 1) * endpoint_ns + (n - 1) * reduction_ns + (n - 1) * hop_ns
    s = np.asarray(starts, dtype=np.int64)
    ends = []
    for _ in range(chunks):
        s = c + ring_window_max(s, order, hop_ns)
        ends.append(s)
    return ends


def ring_allreduce_steps(starts: np.ndarray, pred: np.ndarray, chunks: int, hop_ns: int, endpoint_ns: int,
                         reduction_ns: int) -> np.ndarray:
    """The same ends by the step recurrence itself (vector over ranks, loop over steps): the
    reference the closed form is tested against.  ``pred[r]``: the rank ``r`` receives from."""
    n = pred.size
    s = np.asarray(starts, dtype=np.int64)
    for _ in range(chunks):
        t = s + endpoint_ns
        for k in range(1, 2 * n - 1):
            t = np.maximum(t[pred] + hop_ns, t) + endpoint_ns + (reduction_ns if k <= n - 1 else 0)
        s = t
    return s


def fast_path_reason(workload: Workload, topology: Topology, system: object, rendezvous: bool,
                     mirror: bool, replay_only: bool) -> str | None:
    """None when every collective of ``workload`` may run in closed form, else why not."""
    from .system import SystemParams
    p: SystemParams = system  # type: ignore[assignment]
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
    algos = p.algorithms.get(CollectiveKind.ALL_REDUCE)
    if not algos or len(algos) != 1 or algos[0].base != "ring" or algos[0].spans_all:
        return "the all-reduce is not a ring"
    world = {g.name for g in workload.groups if len(set(g.ranks)) == workload.num_ranks}
    for prog in workload.programs:
        coll = prog.kind == int(OpKind.COLLECTIVE)
        if not coll.any():
            continue
        if (prog.collective[coll] != int(CollectiveKind.ALL_REDUCE)).any() or prog.replay_only[coll].any():
            return "collectives other than all-reduces"
        for i in np.flatnonzero(coll).tolist():
            g = int(prog.group[i])
            if g != NO_VALUE and prog.group_keys[g] not in world:
                return "all-reduces on communicator groups"
            if i in prog.extras and prog.extras[i].get("involved_dim") is not None:
                return "all-reduces on some dimensions only"
    return None


class RingAllReduceBatch:
    """Collects every rank's ``k``-th all-reduce and completes them all in closed form (the
    module docstring).  One per simulation; each rank's system calls :meth:`arrive`."""

    def __init__(self, n: int, network: object) -> None:
        self.n = n
        self.network = network
        self._count = [0] * n                       # collectives each rank has issued
        self._open: dict[int, tuple[np.ndarray, list, list[int]]] = {}
        self.messages = 0                           #: messages the closed form stood for

    def arrive(self, sysl: object, size: int, on_done: Callable[[int], None], label: str = "") -> None:
        """Rank ``sysl.rank`` issues its next all-reduce of ``size`` bytes now (``label`` names
        its chunks in the timeline)."""
        r = sysl.rank  # type: ignore[attr-defined]
        k = self._count[r]
        self._count[r] = k + 1
        entry = self._open.get(k)
        if entry is None:
            entry = self._open[k] = (np.zeros(self.n, dtype=np.int64), [None] * self.n, [0, size])
        starts, done, meta = entry
        if size != meta[1]:
            raise SimulationError(f"rank {r}'s all-reduce number {k + 1} is {size} bytes, another rank's {meta[1]}: "
                                  "every rank must issue the same all-reduces in the same order")
        starts[r] = sysl.buckets.queue.now  # type: ignore[attr-defined]
        done[r] = (sysl, on_done, label)
        meta[0] += 1
        if meta[0] == self.n:
            del self._open[k]
            self._complete(starts, done, size)

    def _complete(self, starts: np.ndarray, done: list, size: int) -> None:
        from ..workload.ops import CollectiveKind as CK
        n = self.n
        sys0 = done[0][0]
        per_chunk: list[np.ndarray]
        dims = sys0._dims(CK.ALL_REDUCE, None)
        p = sys0.p
        chunks = plan_chunks(CK.ALL_REDUCE, size, dims, None, sys0.levels, p.preferred_dataset_splits,
                             sys0.total_npus, p.collective_optimization)
        if not chunks:
            ends = starts.copy()
            per_chunk: list[np.ndarray] = []
        else:
            alg = chunks[0][0].algorithm
            if len(chunks[0]) != 1 or not isinstance(alg, RingPhase) or alg.ring.local:
                raise SimulationError("internal: the closed-form ring all-reduce met a chunk it does not model")
            # the ring order: each rank receives from its sender in the chunk's direction
            order = np.empty(n, dtype=np.int64)
            x = 0
            for j in range(n):
                order[j] = x
                x = alg.ring.receiver(x, alg.direction)
            m = alg.msg_size
            hop = self.network.delay_ns(int(order[0]), int(order[1]), m)  # type: ignore[attr-defined]
            red = sys0.reduction_ns(m)
            per_chunk = ring_allreduce_ends(starts, order, len(chunks), hop, p.endpoint_delay_ns, red)
            ends = per_chunk[-1]
            self.messages += n * len(chunks) * 2 * (n - 1)
        now = sys0.buckets.queue.now
        for r, (sysl, on_done, label) in enumerate(done):
            if sysl.phase_log is not None and per_chunk:   # the chunks as the engine logs them
                a = int(starts[r])
                for c, e in enumerate(per_chunk):
                    ph = chunks[c][0]
                    name = f"{label} chunk {c}" if len(chunks) > 1 else label
                    sysl.phase_log.append((abs(ph.queue), name, ph.algorithm.kind.label, ph.algorithm.name,
                                           int(ph.algorithm.data_size), a, int(e[r])))
                    a = int(e[r])
            t = int(ends[r])
            sysl.buckets.register(t - now, _Done(on_done, t - int(starts[r])))


class _Done:
    """``on_done(execution_ns)`` as a bucket callback."""

    __slots__ = ("fn", "ns")

    def __init__(self, fn: Callable[[int], None], ns: int) -> None:
        self.fn = fn
        self.ns = ns

    def __call__(self) -> None:
        self.fn(self.ns)
