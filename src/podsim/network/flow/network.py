"""Flow-level network: every transfer is a flow on a routed path sharing links max-min fairly.

A flow of ``size`` bytes starts at once on its route; its rate is its max-min fair share of
the links it crosses, re-solved whenever a flow starts or ends.  Only the *component* touched
by the change is re-solved: the flows linked to the changed links through shared links.  All
starts and ends at one timestamp are batched into one re-solve.  The last byte reaches the
destination after the route's summed link latency, so a lone flow takes
``latency + size / bottleneck_bandwidth`` (integer ns, rounded up once).

Links are directed (a full-duplex cable is two links that never contend).  The network keeps
per-link statistics (bytes carried, busy time, peak concurrent flows) and, when asked, a
time series of each link's load for Perfetto counter tracks.

The network needs a clock: any object with an integer ``now`` (ns) and
``schedule(time_ns, callback, arg)``; :class:`podsim.engine.events.EventQueue` is one.

How it is fast: flows live in arrays (one slot per running flow: route row, bytes left,
rate, ...), and flows are started in batches (:meth:`FlowNetwork.start_batch`: a collective's
round is one call) whose caller hears once, when the batch's last flow has arrived.  Starting
a batch, finding the component to re-solve (a breadth-first search over the running flows'
route matrix, one array step per level), re-solving it, and ending the flows that finish at
one time are each a few array operations, not a loop over flows.  A re-solve schedules one
event per distinct finish time.  The per-flow network it replaced is kept as
:class:`podsim.network.flow.reference.ReferenceFlowNetwork`; the tests run both and compare
every rank's times.

Same-time order: flows that end at one time in one batch are handled in the order they
started, and a batch's caller is called back at the time its last flow arrives.

Units: bytes, ns, bytes per ns.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...errors import SimulationError
from ..fabric import Fabric
from ..routing import Router
from .maxmin import max_min_rates, max_min_rates_small
from .routes import RouteBatch, path_latency_ns, place_in_order, route_batch


class Clock(Protocol):
    """What the flow network needs from an event loop."""

    now: int

    def schedule(self, time_ns: int, callback: Callable[[object], None], arg: object = None) -> None: ...


Done = Callable[[], None] | None

_INF = math.inf
_BATCH_CACHE_FLOWS = 2_000_000  #: routed flows kept in the batch-route cache before it is emptied
_FEW = 64  #: running flows up to which the component search runs on Python lists
_FEW_SOLVED = 32  #: component size up to which a re-solve's bookkeeping runs element by element
_CHOICES_KEPT = 4096  #: adaptive batches' choices remembered (by the counts they read)


@dataclass
class LinkStats:
    """Per-directed-link statistics of a run (arrays indexed by link id).

    ``bytes``: bytes carried; ``busy_ns``: time with at least one flow on the link;
    ``peak_flows``: most flows sharing the link at once.
    """

    bytes: np.ndarray
    busy_ns: np.ndarray
    peak_flows: np.ndarray


@dataclass(frozen=True)
class Started:
    """What :meth:`FlowNetwork.start_batch` started: each flow's route (rows of link ids
    padded with ``pad``) and its latency (ns)."""

    paths: np.ndarray
    latency_ns: np.ndarray
    pad: int


class NetworkEnds:
    """What both flow networks share: their settings and counters, GPU ranks to fabric nodes,
    route latencies and the load counters of fast-forwarded rounds (arguments as
    :class:`FlowNetwork`'s)."""

    def __init__(
        self,
        fabric: Fabric,
        clock: Clock,
        router: Router | None,
        seed: int | None,
        capacity: np.ndarray | None,
        record_load: bool,
    ) -> None:
        self.fabric = fabric
        self.clock = clock
        self.router = router or Router(fabric, seed)
        self.capacity = np.asarray(fabric.link_bw if capacity is None else capacity, dtype=np.float64)
        self._capacity_list: list[float] = self.capacity.tolist()  # for small components, element by element
        self.record_load = record_load
        self.load_samples: list[tuple[int, int, float]] = []  #: (t ns, link, bytes per ns)
        self.flows_started = 0
        self.solves = 0
        self.solved_flows = 0
        self._lat_cache: dict[tuple[int, ...], int] = {}

    def start_nodes(
        self, src: int, dst: int, size: int, on_done: Done, label: int = 0, max_rate: float = _INF
    ) -> tuple[int, ...]:
        raise NotImplementedError

    def start(
        self, src_rank: int, dst_rank: int, size: int, on_done: Done, label: int = 0, max_rate: float = _INF
    ) -> None:
        """Send ``size`` bytes from GPU ``src_rank`` to GPU ``dst_rank``; ``on_done()`` runs
        when the last byte has arrived.  ``max_rate`` (bytes per ns) caps the flow's rate (an
        endpoint limit such as a channel's copy engine); the network may give it less."""
        g = self.fabric.gpus
        self.start_nodes(int(g[src_rank]), int(g[dst_rank]), size, on_done, label, max_rate)

    def path_latency(self, path: tuple[int, ...]) -> int:
        """The summed link latency of a route (ns), as a flow on it pays once."""
        lat = self._lat_cache.get(path)
        if lat is None:
            lat = self._lat_cache[path] = path_latency_ns(self.router, path)
        return lat

    def _credit_loads(self, loads: dict[int, float] | None, t_from: int, t_to: int) -> None:
        """The load counters of fast-forwarded rounds: ``loads`` (bytes per ns) from ``t_from``
        to ``t_to``."""
        if self.record_load and loads:
            for link, load in sorted(loads.items()):
                self.load_samples.append((t_from, link, load))
                self.load_samples.append((t_to, link, 0.0))


class FlowNetwork(NetworkEnds):
    """Max-min fair flow network over a fabric.

    Args:
        fabric: the fabric.
        clock: the event loop the network schedules its events on.
        router: the router (default: ECMP with ``seed``).
        seed: ECMP hash seed when no router is given.
        capacity: effective capacity per directed link (bytes per ns); default the fabric's.
        record_load: keep a time series of link loads (for counter tracks).
    """

    def __init__(
        self,
        fabric: Fabric,
        clock: Clock,
        *,
        router: Router | None = None,
        seed: int | None = None,
        capacity: np.ndarray | None = None,
        record_load: bool = False,
    ) -> None:
        super().__init__(fabric, clock, router, seed, capacity, record_load)
        nl = self._nl = fabric.num_links
        # per-link arrays, one extra entry for the route padding (never reported)
        self._count = np.zeros(nl + 1, dtype=np.int64)
        self._peak = np.zeros(nl + 1, dtype=np.int64)
        self._busy = np.zeros(nl + 1, dtype=np.int64)
        self._since = np.zeros(nl + 1, dtype=np.int64)
        self._bytes = np.zeros(nl + 1, dtype=np.float64)
        self._load = np.zeros(nl + 1, dtype=np.float64)
        self._dirty = np.zeros(nl + 1, dtype=bool)  # links changed by batches (when _dirty_masked)
        self._dirty_masked = False
        self._dirty_links: list[int] = []  # links changed by single flows
        self._resolve_pending = False
        # per-flow slots
        self._slots = 0  # slots allocated
        self._hi = 0  # slots ever used
        self._free = np.zeros(0, dtype=np.int64)  # a stack of free slots: the first _nfree
        self._nfree = 0
        self._active = 0
        self._capped = 0  # running flows with a rate cap
        self._width = 1
        self._paths = np.full((1, 0), nl, dtype=np.int64)  # route links, one row per position
        self._size = np.zeros(0, dtype=np.int64)
        self._plen = np.zeros(0, dtype=np.int64)
        self._rem = np.zeros(0)
        self._rate = np.zeros(0)
        self._last = np.zeros(0, dtype=np.int64)
        self._lat = np.zeros(0, dtype=np.int64)
        self._maxr = np.zeros(0)
        self._token = np.zeros(0, dtype=np.int64)
        self._order = np.zeros(0, dtype=np.int64)
        self._group = np.zeros(0, dtype=np.int64)
        self._alive = np.zeros(0, dtype=bool)
        self._tokens = 0
        # batches ("groups") waiting for their flows
        self._g_left: dict[int, int] = {}
        self._g_arrive: dict[int, int] = {}
        self._g_done: dict[int, Callable[[], None] | Callable[[int], None] | None] = {}
        self._g_each: dict[int, bool] = {}
        self._g_first: dict[int, int] = {}  # each-mode: the batch's first flow's order number
        self._next_group = 0
        self._batches: dict[tuple[bytes, bytes, bytes], RouteBatch] = {}
        self._batched_flows = 0
        # while few flows run: slot -> (start order, route links), and link -> slots on it
        self._few: dict[int, tuple[int, list[int]]] | None = {}
        self._crossing: dict[int, set[int]] | None = {}
        self._batches_of: dict[int, tuple[object, RouteBatch]] = {}
        self._choices: dict[tuple[int, bytes, bytes], tuple[RouteBatch, np.ndarray, np.ndarray, np.ndarray]] = {}

    # -- public API -------------------------------------------------------------------------

    def start_nodes(
        self, src: int, dst: int, size: int, on_done: Done, label: int = 0, max_rate: float = _INF
    ) -> tuple[int, ...]:
        """:meth:`start` between fabric node ids (e.g. a GPU and an NVSwitch for NVLS); returns
        the flow's route.  (:meth:`start_batch` for one flow, element by element: a point-to-
        point message should not pay for array operations.)"""
        now = self.clock.now
        self.flows_started += 1
        gid = self._next_group
        self._next_group = gid + 1
        path = self.router.route(src, dst, label, self._count) if src != dst else ()
        lat = self.path_latency(path)
        self._g_done[gid] = on_done
        self._g_each[gid] = False
        self._g_first[gid] = self.flows_started - 1
        if size <= 0 or not path:
            self._g_left[gid] = 0
            self._g_arrive[gid] = now + lat
            self._group_done(gid)
            return path
        self._g_left[gid] = 1
        self._g_arrive[gid] = now
        count, since, peak = self._count, self._since, self._peak
        for link in path:
            c = count[link] + 1
            count[link] = c
            if c == 1:
                since[link] = now
            if c > peak[link]:
                peak[link] = c
        self._dirty_links.extend(path)
        slot = self._take_slot(len(path))
        col = self._paths[:, slot]
        col[:] = self._nl
        col[: len(path)] = path
        self._fill(slot, 1, len(path), size, lat, max_rate, self.flows_started - 1, gid, now)
        if self._few is not None:
            self._remember([slot], [list(path)], [self.flows_started - 1])
        self._request_resolve()
        return path

    def _fill(
        self,
        slots: int | np.ndarray,
        k: int,
        lengths: int | np.ndarray,
        sizes: int | np.ndarray,
        lat: int | np.ndarray,
        max_rate: float,
        order: int | np.ndarray,
        gid: int,
        now: int,
    ) -> None:
        """Give ``k`` new flows' fields to ``slots`` (one slot and scalars, or arrays): route
        length, bytes, latency (ns), rate cap (bytes/ns), start order and batch; running from
        ``now`` (ns) at no rate yet.  Their routes are written by the caller."""
        self._plen[slots] = lengths
        self._size[slots] = sizes
        self._rem[slots] = sizes
        self._rate[slots] = 0.0
        self._last[slots] = now
        self._lat[slots] = lat
        self._maxr[slots] = max_rate
        self._token[slots] = -1
        self._order[slots] = order
        self._group[slots] = gid
        self._alive[slots] = True
        self._active += k
        if max_rate != _INF:
            self._capped += k

    def _take_slot(self, width: int) -> int:
        """A free slot for one flow whose route has ``width`` links."""
        if width > self._width:
            extra = np.full((width - self._width, self._slots), self._nl, dtype=np.int64)
            self._paths = np.concatenate([self._paths, extra], axis=0)
            self._width = width
        if self._nfree:
            self._nfree -= 1
            return int(self._free[self._nfree])
        if self._hi >= self._slots:
            self._grow(self._hi + 1)
        self._hi += 1
        return self._hi - 1

    def start_batch(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        nbytes: np.ndarray,
        labels: np.ndarray,
        on_done: Callable[[], None] | Callable[[int], None] | None,
        max_rate: float = _INF,
        each: bool = False,
        same_as: object = None,
    ) -> Started:
        """Start flows between fabric nodes together, now: flow ``i`` carries ``nbytes[i]``
        (int) from ``src[i]`` to ``dst[i]`` with ECMP label ``labels[i]``, at most ``max_rate``
        bytes per ns.  ``on_done()`` runs once, when the last flow has arrived; with ``each``,
        ``on_done(i)`` runs as each flow ``i`` arrives.  The same as starting the flows one by
        one in index order (adaptive routes see the flows started before them).

        ``same_as``: an object that stands for these flows' ends and labels (a schedule's
        step): batches started with the same object must have the same ``src``, ``dst`` and
        ``labels``, and their routing is looked up by it rather than by the arrays."""
        k = len(src)
        now = self.clock.now
        self.flows_started += k
        gid = self._next_group
        self._next_group = gid + 1
        rb = self._routes(src, dst, labels, same_as)
        sizes = np.asarray(nbytes, dtype=np.int64)
        carry = sizes > 0
        every = bool(carry.all())
        if len(rb.in_order):
            paths, lat, lengths = self._place_in_order(rb, src, dst, labels, carry, every)
        else:
            paths, lat, lengths = rb.paths, rb.latency_ns, rb.lengths
            self._add_counts(paths if every else paths[carry], now, None)
        real = carry & (lengths > 0)
        nreal = int(np.count_nonzero(real))
        self._g_left[gid] = nreal
        self._g_done[gid] = on_done
        self._g_each[gid] = each
        self._g_first[gid] = self.flows_started - k
        # flows with nothing to carry arrive after their route's latency
        if nreal < k:
            idle = np.flatnonzero(~real)
            if each:
                if on_done is not None:
                    for i in idle.tolist():
                        self.clock.schedule(now + int(lat[i]), _call_each, (on_done, i))
            self._g_arrive[gid] = now + int(lat[idle].max())
        else:
            self._g_arrive[gid] = now
        if nreal == 0:
            self._group_done(gid)
        else:
            self._add_flows(np.flatnonzero(real) if nreal < k else None, paths, lat, lengths, sizes, gid, max_rate, now)
            self._request_resolve()
        return Started(paths, lat, rb.pad)

    def internal_callbacks(self) -> tuple[Callable[[object], None], ...]:
        """The network's own event callbacks (re-solves and flow ends)."""
        return (self._resolve, self._finish, self._finish_one)

    def credit(
        self,
        paths: np.ndarray,
        nbytes: np.ndarray,
        busy_ns: int,
        times: int,
        t_from: int,
        t_to: int,
        loads: dict[int, float] | None = None,
    ) -> None:
        """Account ``times`` repetitions of a round whose flows took ``paths`` (rows of link
        ids padded with the link count) carrying ``nbytes`` each and kept each link busy
        ``busy_ns``, fast-forwarded from ``t_from`` to ``t_to`` (ns) without simulating them;
        with ``loads``, the load counters show that load over the interval."""
        nl = self._nl
        flat = paths.ravel()
        w = np.repeat(np.asarray(nbytes, dtype=np.float64) * times, paths.shape[1])
        self._bytes += np.bincount(flat, weights=w, minlength=nl + 1)
        used = np.bincount(flat, minlength=nl + 1) > 0
        used[nl] = False
        self._busy[used] += busy_ns * times
        self._credit_loads(loads, t_from, t_to)

    @property
    def active_flows(self) -> int:
        return self._active

    def link_stats(self) -> LinkStats:
        """Statistics so far (busy time counts links still busy up to now)."""
        nl = self._nl
        busy = self._busy[:nl].copy()
        open_ = self._count[:nl] > 0
        busy[open_] += self.clock.now - self._since[:nl][open_]
        return LinkStats(self._bytes[:nl].copy(), busy, self._peak[:nl].copy())

    # -- starting ---------------------------------------------------------------------------

    def _routes(self, src: np.ndarray, dst: np.ndarray, labels: np.ndarray, same_as: object) -> RouteBatch:
        if same_as is not None:
            hit = self._batches_of.get(id(same_as))
            if hit is not None and hit[0] is same_as:
                return hit[1]
            rb = self._routes(src, dst, labels, None)
            self._batches_of[id(same_as)] = (same_as, rb)
            return rb
        s = np.asarray(src, dtype=np.int64)
        d = np.asarray(dst, dtype=np.int64)
        lab = np.asarray(labels, dtype=np.int64)
        key = (s.tobytes(), d.tobytes(), lab.tobytes())
        rb = self._batches.get(key)
        if rb is None:
            if self._batched_flows > _BATCH_CACHE_FLOWS:
                self._batches.clear()
                self._batches_of.clear()
                self._batched_flows = 0
            rb = self._batches[key] = route_batch(self.router, s, d, lab, self._lat_cache)
            self._batched_flows += len(s)
        return rb

    def _add_counts(self, paths: np.ndarray, now: int, before: np.ndarray | None) -> None:
        """Count a batch's flows on their links (``before``: the counts before the batch,
        when already applied)."""
        count = self._count
        if before is None:
            before = count.copy()
            count += np.bincount(paths.ravel(), minlength=self._nl + 1)
            count[self._nl] = 0
        opened = (before == 0) & (count > 0)
        self._since[opened] = now
        np.maximum(self._peak, count, out=self._peak)
        self._dirty[paths.ravel()] = True
        self._dirty[self._nl] = False
        self._dirty_masked = True

    def _place_in_order(
        self, rb: RouteBatch, src: np.ndarray, dst: np.ndarray, labels: np.ndarray, carry: np.ndarray, every: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Route and count a batch where some flows' routes depend on the load: the flows no
        choice can see are counted at once, the others one by one in batch order (flows that
        carry nothing are routed but not counted)."""
        now = self.clock.now
        count = self._count
        # The choices are a function of the counts they read (which the other flows do not
        # touch): a ring's rounds repeat them.
        key = (id(rb), carry.tobytes(), count[rb.reads].tobytes())
        hit = self._choices.get(key)
        if hit is not None and hit[0] is rb:
            paths = hit[1]
            self._add_counts(paths if every else paths[carry], now, None)
            return paths, hit[2], hit[3]
        before = count.copy()
        loose = carry.copy()
        loose[rb.in_order] = False
        count += np.bincount(rb.paths[loose].ravel(), minlength=self._nl + 1)
        count[self._nl] = 0
        cl = count.tolist()  # the router reads single counts: a list is faster than the array
        paths, lat, touched = place_in_order(
            self.router, rb, src.tolist(), dst.tolist(), labels.tolist(), cl, carry.tolist(), self._lat_cache
        )
        if touched:
            at = np.fromiter(touched, dtype=np.int64, count=len(touched))
            count[at] = [cl[x] for x in at.tolist()]
        if len(self._choices) >= _CHOICES_KEPT:
            self._choices.clear()
        lengths = (paths != rb.pad).sum(axis=1)
        self._choices[key] = (rb, paths, lat, lengths)
        self._add_counts(paths if every else paths[carry], now, before)
        return paths, lat, lengths

    def _grow(self, need: int) -> None:
        n = max(need, 2 * self._slots, 1024)

        def grown(a: np.ndarray, fill: object) -> np.ndarray:
            out = np.full((n,) + a.shape[1:], fill, dtype=a.dtype)
            out[: len(a)] = a
            return out

        paths = np.full((self._width, n), self._nl, dtype=np.int64)
        paths[:, : self._paths.shape[1]] = self._paths
        self._paths = paths
        self._size = grown(self._size, 0)
        self._plen = grown(self._plen, 0)
        self._rem = grown(self._rem, 0.0)
        self._rate = grown(self._rate, 0.0)
        self._last = grown(self._last, 0)
        self._lat = grown(self._lat, 0)
        self._maxr = grown(self._maxr, _INF)
        self._token = grown(self._token, -1)
        self._order = grown(self._order, 0)
        self._group = grown(self._group, 0)
        self._alive = grown(self._alive, False)
        self._slots = n

    def _add_flows(
        self,
        pick: np.ndarray | None,
        paths: np.ndarray,
        lat: np.ndarray,
        lengths: np.ndarray,
        sizes: np.ndarray,
        gid: int,
        max_rate: float,
        now: int,
    ) -> None:
        """Give the batch's flows that carry bytes (rows ``pick``, or all) slots."""
        first = self.flows_started - len(paths)
        order = np.arange(first, first + len(paths), dtype=np.int64)
        if pick is not None:
            paths, lat, lengths, sizes, order = paths[pick], lat[pick], lengths[pick], sizes[pick], order[pick]
        k = len(paths)
        take = min(k, self._nfree)
        self._nfree -= take
        reused = self._free[self._nfree : self._nfree + take]
        fresh = k - take
        if self._hi + fresh > self._slots:
            self._grow(self._hi + fresh)
        slots = np.concatenate([reused, np.arange(self._hi, self._hi + fresh, dtype=np.int64)])
        self._hi += fresh
        w = paths.shape[1]
        if w > self._width:
            extra = np.full((w - self._width, self._slots), self._nl, dtype=np.int64)
            self._paths = np.concatenate([self._paths, extra], axis=0)
            self._width = w
        self._paths[:w, slots] = paths.T
        if w < self._width:
            self._paths[w:, slots] = self._nl
        self._fill(slots, k, lengths, sizes, lat, max_rate, order, gid, now)
        if self._few is not None:
            if self._active > _FEW:
                self._few = self._crossing = None
            else:
                self._remember(
                    slots.tolist(), [r[:n] for r, n in zip(paths.tolist(), lengths.tolist())], order.tolist()
                )

    # -- re-solving -------------------------------------------------------------------------

    def _request_resolve(self) -> None:
        if not self._resolve_pending:
            self._resolve_pending = True
            self.clock.schedule(self.clock.now, self._resolve, None)

    def _component(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The running flows connected (through shared links) to the dirty links, in start
        order, and (when link loads are recorded) the mask of links reached."""
        nl = self._nl
        extra = self._dirty_links
        self._dirty_links = []
        reached: np.ndarray | None = None
        if self._dirty_masked:
            reached = self._dirty
            self._dirty = np.zeros(nl + 1, dtype=bool)
            self._dirty_masked = False
        if self._active and self._active <= _FEW:
            start = np.flatnonzero(reached).tolist() + extra if reached is not None else extra
            return self._component_of_few(start)
        if reached is None:
            reached = np.zeros(nl + 1, dtype=bool)
        if extra:
            reached[extra] = True
        if not self._active or not (reached & (self._count > 0)).any():
            return np.zeros(0, dtype=np.int64), reached
        hi = self._hi
        cols = self._paths[:, :hi]
        free = self._alive[:hi].copy()  # running flows not yet in the component
        while True:
            hit = reached[cols[0]]
            for j in range(1, len(cols)):
                hit |= reached[cols[j]]
            hit &= free
            if not hit.any():
                break
            free &= ~hit
            idx = np.flatnonzero(hit)
            for j in range(len(cols)):
                reached[cols[j][idx]] = True
            reached[nl] = False
        comp = np.flatnonzero(self._alive[:hi] & ~free)
        order = self._order[comp]
        if len(order) > 1 and not (order[1:] > order[:-1]).all():
            comp = comp[np.argsort(order)]
        return comp, reached

    def _remember(self, slots: list[int], rows: list[list[int]], orders: list[int]) -> None:
        """Add running flows to the lists kept while few flows run."""
        few, crossing = self._few, self._crossing
        assert few is not None and crossing is not None
        for slot, row, o in zip(slots, rows, orders):
            few[slot] = (o, row)
            for link in row:
                on = crossing.get(link)
                if on is None:
                    crossing[link] = {slot}
                else:
                    on.add(slot)

    def _forget(self, slots: list[int]) -> None:
        few, crossing = self._few, self._crossing
        assert few is not None and crossing is not None
        for slot in slots:
            for link in few.pop(slot)[1]:
                crossing[link].discard(slot)

    def _component_of_few(self, start: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`_component` when few flows run: the same search over per-link sets of flows,
        kept while few flows run (rebuilt from the arrays when the flows become few again)."""
        if self._few is None:
            self._few, self._crossing = {}, {}
            act = np.flatnonzero(self._alive[: self._hi])
            self._remember(
                act.tolist(),
                [r[:n] for r, n in zip(self._paths[:, act].T.tolist(), self._plen[act].tolist())],
                self._order[act].tolist(),
            )
        few, crossing = self._few, self._crossing
        assert crossing is not None
        stack = list(start)
        seen = set(stack)
        found: set[int] = set()
        while stack:
            on = crossing.get(stack.pop())
            if not on:
                continue
            for slot in on:
                if slot not in found:
                    found.add(slot)
                    for link in few[slot][1]:
                        if link not in seen:
                            seen.add(link)
                            stack.append(link)
        reached = None
        if self.record_load:
            reached = np.zeros(self._nl + 1, dtype=bool)
            reached[list(seen)] = True
            reached[self._nl] = False
        comp = sorted(found, key=lambda x: few[x][0])
        return np.asarray(comp, dtype=np.int64), reached

    def _resolve(self, _arg: object) -> None:
        self._resolve_pending = False
        now = self.clock.now
        comp, reached = self._component()
        if self.record_load and reached is not None:
            self._record_idle(reached, now)
        if not len(comp):
            return
        self.solves += 1
        self.solved_flows += len(comp)
        if len(comp) <= _FEW_SOLVED and not self.record_load:
            self._resolve_few(comp, now)
            return
        el = now - self._last[comp]
        moved = el != 0
        if moved.any():
            c = comp[moved]
            self._rem[c] -= self._rate[c] * el[moved]
            self._last[comp] = now
        rows = self._paths[:, comp].T
        lengths = self._plen[comp]
        flat = rows[rows != self._nl]
        mark = np.zeros(self._nl + 1, dtype=bool)
        mark[flat] = True
        gl = np.flatnonzero(mark)
        where = np.empty(self._nl + 1, dtype=np.int64)
        where[gl] = np.arange(len(gl))
        local = where[flat]
        indptr = np.zeros(len(comp) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        caps = self._maxr[comp] if self._capped else None
        rates = max_min_rates(indptr, local, self.capacity[gl], caps)
        changed = rates != self._rate[comp]
        if changed.any():
            self._reschedule(comp[changed], rates[changed], now)
        if self.record_load:
            load = np.bincount(local, weights=np.repeat(rates, lengths), minlength=len(gl))
            old = self._load[gl]
            moved_links = np.flatnonzero(np.abs(load - old) > 1e-12 * np.maximum(old, 1.0))
            for i in moved_links.tolist():
                self.load_samples.append((now, int(gl[i]), float(load[i])))
            self._load[gl] = load

    def _resolve_few(self, comp: np.ndarray, now: int) -> None:
        """The rest of :meth:`_resolve` for a small component, element by element (the same
        arithmetic, one event per flow end)."""
        rem, rate, last = self._rem, self._rate, self._last
        slots = comp.tolist()
        local: dict[int, int] = {}
        links: list[int] = []
        indptr = [0]
        few = self._few
        if few is not None:
            rows = [few[x][1] for x in slots]
        else:
            rows = [r[:n] for r, n in zip(self._paths[:, comp].T.tolist(), self._plen[comp].tolist())]
        for slot, row in zip(slots, rows):
            el = now - int(last[slot])
            if el:
                rem[slot] -= rate[slot] * el
                last[slot] = now
            for link in row:
                i = local.get(link)
                if i is None:
                    i = local[link] = len(local)
                links.append(i)
            indptr.append(len(links))
        capacity = self._capacity_list
        caps = self._maxr[comp].tolist() if self._capped else None
        rates = max_min_rates_small(indptr, links, [capacity[link] for link in local], caps)
        sched = self.clock.schedule
        for slot, r in zip(slots, rates):
            if r != rate[slot]:
                if not r > 0:
                    raise SimulationError("a flow got no bandwidth (a link of zero capacity on its route)")
                rate[slot] = r
                left = float(rem[slot])
                dt = int(math.ceil(left / r - 1e-6)) if left > 0 else 0
                token = self._tokens
                self._tokens = token + 1
                self._token[slot] = token
                sched(now + dt, self._finish_one, (slot, token))

    def _reschedule(self, slots: np.ndarray, rates: np.ndarray, now: int) -> None:
        """New rates: each flow's end moves; one event per distinct end time."""
        if not np.all(rates > 0):
            raise SimulationError("a flow got no bandwidth (a link of zero capacity on its route)")
        self._rate[slots] = rates
        rem = self._rem[slots]
        with np.errstate(invalid="ignore"):
            dt = np.where(rem > 0, np.ceil(rem / rates - 1e-6), 0.0).astype(np.int64)
        tokens = np.arange(self._tokens, self._tokens + len(slots), dtype=np.int64)
        self._tokens += len(slots)
        self._token[slots] = tokens
        ends = now + dt
        if len(ends) > 1 and not np.all(ends == ends[0]):
            order = np.argsort(ends, kind="stable")
            ends, slots, tokens = ends[order], slots[order], tokens[order]
            cut = np.flatnonzero(np.diff(ends)) + 1
            bounds = [0, *cut.tolist(), len(ends)]
        else:
            bounds = [0, len(ends)]
        sched = self.clock.schedule
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b - a == 1:
                sched(int(ends[a]), self._finish_one, (int(slots[a]), int(tokens[a])))
            else:
                sched(int(ends[a]), self._finish, (slots[a:b], tokens[a:b]))

    def _record_idle(self, reached: np.ndarray, now: int) -> None:
        """Record a zero load on reached links that no flow crosses any more."""
        nl = self._nl
        idle = np.flatnonzero(reached[:nl] & (self._count[:nl] == 0) & (self._load[:nl] != 0.0))
        for link in idle.tolist():
            self._load[link] = 0.0
            self.load_samples.append((now, link, 0.0))

    # -- ending -----------------------------------------------------------------------------

    def _finish(self, arg: object) -> None:
        slots, tokens = arg  # type: ignore[misc]
        live = self._token[slots] == tokens
        if not live.all():
            slots = slots[live]
            if not len(slots):
                return
        now = self.clock.now
        nl = self._nl
        self._token[slots] = -1
        self._alive[slots] = False
        nf = self._nfree + len(slots)
        if nf > len(self._free):
            self._free = np.concatenate(
                [self._free[: self._nfree], np.zeros(max(nf, 2 * len(self._free)) - self._nfree, dtype=np.int64)]
            )
        self._free[self._nfree : nf] = slots
        self._nfree = nf
        self._active -= len(slots)
        if self._few is not None:
            self._forget(slots.tolist())
        if self._capped:
            self._capped -= int(np.count_nonzero(self._maxr[slots] != _INF))
        flat = self._paths[:, slots].ravel()
        on = np.bincount(flat, minlength=nl + 1)
        sizes = self._size[slots]
        if sizes.min() == sizes.max():  # whole integers: the same sums as flow by flow
            self._bytes += on * float(sizes[0])
        else:
            self._bytes += np.bincount(flat, weights=np.tile(sizes.astype(np.float64), self._width), minlength=nl + 1)
        self._count -= on
        self._count[nl] = 0
        touched = on > 0
        touched[nl] = False
        closed = touched & (self._count == 0)
        self._busy[closed] += now - self._since[closed]
        self._dirty |= touched
        self._dirty_masked = True
        self._request_resolve()
        arrive = now + self._lat[slots]
        groups = self._group[slots]
        if len(slots) == 1 or np.all(groups == groups[0]):
            self._arrived(int(groups[0]), len(slots), int(arrive.max()), slots, arrive)
            return
        # slots come in start order, and batches start in order: each batch is one run
        cut = np.flatnonzero(groups[1:] != groups[:-1]) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [len(groups)]])
        latest = np.maximum.reduceat(arrive, starts)
        for a, b, t in zip(starts.tolist(), ends.tolist(), latest.tolist()):
            self._arrived(int(groups[a]), b - a, t, slots[a:b], arrive[a:b])

    def _finish_one(self, arg: object) -> None:
        """:meth:`_finish` for one flow, element by element."""
        slot, token = arg  # type: ignore[misc]
        if self._token[slot] != token:
            return
        now = self.clock.now
        self._token[slot] = -1
        self._alive[slot] = False
        if self._nfree == len(self._free):
            self._free = np.concatenate([self._free, np.zeros(max(16, len(self._free)), dtype=np.int64)])
        self._free[self._nfree] = slot
        self._nfree += 1
        self._active -= 1
        if self._few is not None:
            self._forget([slot])
        if self._maxr[slot] != _INF:
            self._capped -= 1
        size = float(self._size[slot])
        count, since, busy, nbytes = self._count, self._since, self._busy, self._bytes
        path = self._paths[: self._plen[slot], slot].tolist()
        for link in path:
            nbytes[link] += size
            c = count[link] - 1
            count[link] = c
            if c == 0:
                busy[link] += now - since[link]
        self._dirty_links.extend(path)
        self._request_resolve()
        gid = int(self._group[slot])
        arrive = now + int(self._lat[slot])
        if self._g_each[gid]:
            cb = self._g_done[gid]
            if cb is not None:
                self.clock.schedule(arrive, _call_each, (cb, int(self._order[slot]) - self._g_first[gid]))
        if arrive > self._g_arrive[gid]:
            self._g_arrive[gid] = arrive
        left = self._g_left[gid] - 1
        if left:
            self._g_left[gid] = left
        else:
            self._group_done(gid)

    def _arrived(self, gid: int, n: int, latest: int, slots: np.ndarray, arrive: np.ndarray) -> None:
        """``n`` flows of batch ``gid`` ended now; the last of them arrives at ``latest``."""
        if self._g_each[gid]:
            cb = self._g_done[gid]
            if cb is not None:
                base = self._g_first[gid]
                for o, t in zip((self._order[slots] - base).tolist(), arrive.tolist()):
                    self.clock.schedule(t, _call_each, (cb, o))
        left = self._g_left[gid] - n
        if latest > self._g_arrive[gid]:
            self._g_arrive[gid] = latest
        if left:
            self._g_left[gid] = left
        else:
            self._group_done(gid)

    def _group_done(self, gid: int) -> None:
        cb = self._g_done.pop(gid)
        at = self._g_arrive.pop(gid)
        del self._g_left[gid]
        each = self._g_each.pop(gid)
        del self._g_first[gid]
        if cb is not None and not each:
            self.clock.schedule(at, _call, cb)


def _call(fn: object) -> None:
    fn()  # type: ignore[operator]


def _call_each(arg: object) -> None:
    fn, i = arg  # type: ignore[misc]
    fn(i)


class _LocalClock:
    """A minimal event loop for running a batch of flows on their own."""

    def __init__(self) -> None:
        self._push = heapq.heappush
        self._pop = heapq.heappop
        self._heap: list[tuple[int, int, Callable[[object], None], object]] = []
        self._seq = 0
        self.now = 0

    def schedule(self, time_ns: int, callback: Callable[[object], None], arg: object = None) -> None:
        self._seq += 1
        self._push(self._heap, (time_ns, self._seq, callback, arg))

    def run(self) -> None:
        while self._heap:
            t, _, cb, arg = self._pop(self._heap)
            self.now = t
            cb(arg)


def run_batch(
    fabric: Fabric,
    src: list[int],
    dst: list[int],
    nbytes: list[int],
    labels: list[int],
    *,
    router: Router | None = None,
    capacity: np.ndarray | None = None,
    max_rate: float = math.inf,
) -> tuple[list[int], FlowNetwork]:
    """Start flows between fabric nodes together at time 0 and run them to the end.

    Returns:
        each flow's arrival time (ns) and the network (for its statistics).
    """
    clock = _LocalClock()
    net = FlowNetwork(fabric, clock, router=router, capacity=capacity)
    arrivals = [0] * len(src)

    def done(i: int) -> None:
        arrivals[i] = clock.now

    net.start_batch(
        np.asarray(src, dtype=np.int64),
        np.asarray(dst, dtype=np.int64),
        np.asarray(nbytes, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
        done,
        max_rate,
        each=True,
    )
    clock.run()
    return arrivals, net
