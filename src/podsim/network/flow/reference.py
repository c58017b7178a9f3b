"""The per-flow flow network: the reference that :class:`~podsim.network.flow.network.FlowNetwork`
must agree with, flow object by flow object (slow: about 10 us of Python per flow).

The model is :mod:`podsim.network.flow.network`'s (max-min fair rates re-solved for the
component a start or an end touches, once per instant; a flow's last byte arrives after its
route's latency); here each flow is a Python object, each link a set of flow ids, and each flow
end its own event.  ``tests/test_flow_arrays.py`` runs both.

Units: bytes, ns, bytes per ns.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..fabric import Fabric
from ..routing import Router
from .maxmin import max_min_rates
from .network import Clock, LinkStats, NetworkEnds, Started

Done = Callable[[], None] | None


class _Flow:
    __slots__ = (
        "fid",
        "path",
        "size",
        "remaining",
        "rate",
        "last",
        "version",
        "on_done",
        "latency",
        "start",
        "src",
        "dst",
        "max_rate",
    )

    def __init__(
        self,
        fid: int,
        path: tuple[int, ...],
        size: int,
        on_done: Done,
        latency: int,
        start: int,
        src: int,
        dst: int,
        max_rate: float,
    ) -> None:
        self.fid = fid
        self.path = path
        self.size = size
        self.remaining = float(size)
        self.rate = 0.0
        self.last = start
        self.version = 0
        self.on_done = on_done
        self.latency = latency
        self.start = start
        self.src = src
        self.dst = dst
        self.max_rate = max_rate


class ReferenceFlowNetwork(NetworkEnds):
    """Max-min fair flow network over a fabric, one Python object per flow; arguments as
    :class:`~podsim.network.flow.network.FlowNetwork`'s."""

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
        self._link_flows: list[set[int]] = [set() for _ in range(fabric.num_links)]
        self._flows: dict[int, _Flow] = {}
        self._next_fid = 0
        self._dirty: set[int] = set()
        self._resolve_pending = False
        nl = fabric.num_links
        # per-link counters as Python lists: the hot path touches single elements
        self._bytes = [0.0] * nl
        self._busy = [0] * nl
        self._busy_since = [0] * nl
        self._count = [0] * nl
        self._peak = [0] * nl
        self._load = np.zeros(nl)
        self._capped = 0  # flows with a rate cap still running

    # -- public API -------------------------------------------------------------------------

    def start_nodes(
        self, src: int, dst: int, size: int, on_done: Done, label: int = 0, max_rate: float = math.inf
    ) -> tuple[int, ...]:
        """:meth:`start` between fabric node ids (e.g. a GPU and an NVSwitch for NVLS); returns
        the flow's route."""
        clock = self.clock
        now = clock.now
        self.flows_started += 1
        path = self.router.route(src, dst, label, self._count) if src != dst else ()
        lat = self.path_latency(path)
        if size <= 0 or not path:
            if on_done is not None:
                clock.schedule(now + lat, _call, on_done)
            return path
        fid = self._next_fid
        self._next_fid = fid + 1
        f = _Flow(fid, path, size, on_done, lat, now, src, dst, max_rate)
        if max_rate != math.inf:
            self._capped += 1
        self._flows[fid] = f
        lf = self._link_flows
        count, peak, since = self._count, self._peak, self._busy_since
        for link in path:
            lf[link].add(fid)
            c = count[link] + 1
            count[link] = c
            if c == 1:
                since[link] = now
            peak[link] = max(peak[link], c)
        self._dirty.update(path)
        self._request_resolve()
        return path

    def start_batch(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        nbytes: np.ndarray,
        labels: np.ndarray,
        on_done: Callable[[], None] | Callable[[int], None] | None,
        max_rate: float = math.inf,
        each: bool = False,
        same_as: object = None,
    ) -> Started:
        """The flows started one by one in index order (see
        :meth:`podsim.network.flow.network.FlowNetwork.start_batch`)."""
        k = len(src)
        left = [k]
        pad = self.fabric.num_links

        def one(i: int) -> Done:
            if on_done is None:
                return None
            if each:
                return lambda: on_done(i)  # type: ignore[call-arg]

            def arrived() -> None:
                left[0] -= 1
                if left[0] == 0:
                    on_done()  # type: ignore[call-arg]

            return arrived

        paths = [
            self.start_nodes(int(a), int(b), int(x), one(i), int(lab), max_rate)
            for i, (a, b, x, lab) in enumerate(zip(src, dst, nbytes, labels))
        ]
        if k == 0 and on_done is not None and not each:
            self.clock.schedule(self.clock.now, _call, on_done)
        width = max((len(p) for p in paths), default=1) or 1
        rows = np.full((k, width), pad, dtype=np.int64)
        for i, p in enumerate(paths):
            rows[i, : len(p)] = p
        return Started(rows, np.asarray([self.path_latency(p) for p in paths], dtype=np.int64), pad)

    def internal_callbacks(self) -> tuple[Callable[[object], None], ...]:
        """The network's own event callbacks (re-solves and flow ends)."""
        return (self._resolve, self._finish)

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
        """As :meth:`podsim.network.flow.network.FlowNetwork.credit`, flow by flow."""
        b, busy = self._bytes, self._busy
        pad = self.fabric.num_links
        seen: set[int] = set()
        for row, x in zip(paths.tolist(), np.asarray(nbytes).tolist()):
            for link in row:
                if link == pad:
                    continue
                b[link] += x * times
                if link not in seen:
                    seen.add(link)
                    busy[link] += busy_ns * times
        self._credit_loads(loads, t_from, t_to)

    @property
    def active_flows(self) -> int:
        return len(self._flows)

    def link_stats(self) -> LinkStats:
        """Statistics so far (busy time counts links still busy up to now)."""
        busy = np.asarray(self._busy, dtype=np.int64)
        count = np.asarray(self._count)
        open_ = count > 0
        busy[open_] += self.clock.now - np.asarray(self._busy_since, dtype=np.int64)[open_]
        return LinkStats(np.asarray(self._bytes), busy, np.asarray(self._peak, dtype=np.int64))

    # -- internals --------------------------------------------------------------------------

    def _request_resolve(self) -> None:
        if not self._resolve_pending:
            self._resolve_pending = True
            self.clock.schedule(self.clock.now, self._resolve, None)

    def _component(self) -> tuple[list[_Flow], set[int]]:
        """Flows connected (through shared links) to the dirty links, and those links."""
        lf = self._link_flows
        flows = self._flows
        seen_links = set(self._dirty)
        stack = list(seen_links)
        self._dirty = set()
        comp: dict[int, _Flow] = {}
        while stack:
            link = stack.pop()
            for fid in lf[link]:
                if fid in comp:
                    continue
                f = flows[fid]
                comp[fid] = f
                for l2 in f.path:
                    if l2 not in seen_links:
                        seen_links.add(l2)
                        stack.append(l2)
        return list(comp.values()), seen_links

    def _resolve(self, _arg: object) -> None:
        self._resolve_pending = False
        now = self.clock.now
        comp, touched = self._component()
        if self.record_load:
            self._record_idle(touched, comp, now)
        if not comp:
            return
        self.solves += 1
        self.solved_flows += len(comp)
        local: dict[int, int] = {}
        links: list[int] = []
        indptr = [0]
        for f in comp:
            el = now - f.last
            if el:
                f.remaining -= f.rate * el
                f.last = now
            for link in f.path:
                i = local.get(link)
                if i is None:
                    i = local[link] = len(local)
                links.append(i)
            indptr.append(len(links))
        gl = np.fromiter(local.keys(), dtype=np.int64, count=len(local))
        caps = np.fromiter((f.max_rate for f in comp), dtype=np.float64, count=len(comp)) if self._capped else None
        rates = max_min_rates(np.asarray(indptr), np.asarray(links), self.capacity[gl], caps)
        sched = self.clock.schedule
        for f, r in zip(comp, rates.tolist()):
            if r != f.rate:
                f.rate = r
                f.version += 1
                rem = f.remaining
                dt = int(math.ceil(rem / r - 1e-6)) if rem > 0 else 0
                sched(now + dt, self._finish, (f.fid, f.version))
        if self.record_load:
            load = np.zeros(len(gl))
            np.add.at(load, np.asarray(links), np.repeat(rates, np.diff(indptr)))
            old = self._load[gl]
            changed = np.flatnonzero(np.abs(load - old) > 1e-12 * np.maximum(old, 1.0))
            for i in changed.tolist():
                self.load_samples.append((now, int(gl[i]), float(load[i])))
            self._load[gl] = load

    def _record_idle(self, touched: set[int], comp: list[_Flow], now: int) -> None:
        """Record a zero load on touched links that no flow crosses any more."""
        lf = self._link_flows
        for link in sorted(touched):
            if not lf[link] and self._load[link] != 0.0:
                self._load[link] = 0.0
                self.load_samples.append((now, link, 0.0))

    def _finish(self, arg: object) -> None:
        fid, version = arg  # type: ignore[misc]
        f = self._flows.get(fid)
        if f is None or f.version != version:
            return
        now = self.clock.now
        del self._flows[fid]
        if f.max_rate != math.inf:
            self._capped -= 1
        lf = self._link_flows
        count, since, busy, nbytes = self._count, self._busy_since, self._busy, self._bytes
        size = f.size
        for link in f.path:
            lf[link].discard(fid)
            nbytes[link] += size
            c = count[link] - 1
            count[link] = c
            if c == 0:
                busy[link] += now - since[link]
        self._dirty.update(f.path)
        self._request_resolve()
        if f.on_done is not None:
            self.clock.schedule(now + f.latency, _call, f.on_done)


def _call(fn: object) -> None:
    fn()  # type: ignore[operator]
