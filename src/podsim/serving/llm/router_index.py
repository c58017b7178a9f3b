"""An index over a pool of replicas for the routers that read them (:mod:`.router`): the replica
a scan of the whole pool, each brought up to the present, would choose -- the same one, ties
included -- with heap operations (logarithmic in the pool's size) for the replicas that changed
and the few whose bounds reach the best, rather than a look at every replica.

Two heaps, each entry keyed by the replica's place in the pool:

* *due*: each replica's :meth:`~.replica.Replica.due` time, up to which advancing it changes
  nothing.  A choice at ``now`` (ns) advances only the replicas due before ``now``; every other
  one is already as advancing it would leave it.
* *bounds*: each replica's router ``bound``, a lower bound of its key (the least key wins) until
  it is due, touched, or the time the bound came with (then it is due too).  A choice pops them
  in order (bound, then place), computes the exact key of each replica popped, and stops at the
  first (bound, place) beyond the best (key, place) found: no replica left can beat it, nor tie
  it from a lower place.  Least-outstanding's bound is its key (one replica looked at); jsq's the
  tokens left after as many of a pending decode run's steps as keep it above the least key found
  last (``level``), until the last of them ends (a replica near the least is renewed each step,
  one far above it seldom); kv-aware's its key when last looked at (a decode run only takes
  blocks).  A replica advanced here times its pending run ahead
  (:meth:`~.replica.Replica.advance_ahead`).

Whatever changes a replica besides the index's own advancing (a request joining it, a KV
transfer reaching or leaving it, its events run by the simulation in time order) must be
followed by :meth:`PoolIndex.touch`.  Entries go stale lazily (a replica's due time, a version
of its bound) and the heaps are rebuilt when they outgrow the pool twice over.
"""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heapify, heappop, heappush

from .replica import INF, Replica
from .router import ObservingRouter


class PoolIndex:
    """The replicas of one pool as ``router`` sees them (see the module docstring).

    Args:
        pool: the replicas, in the order the router's indices refer to.
        router: a router that observes (its ``key`` and ``bound``).
        now: the present (ns); every replica advanced to it.
    """

    __slots__ = ("pool", "router", "place", "due_at", "dues", "bounds", "ver", "heap", "level")

    def __init__(self, pool: Sequence[Replica], router: ObservingRouter, now: int = 0) -> None:
        self.pool = list(pool)
        self.router = router
        self.place = {rep.index: i for i, rep in enumerate(self.pool)}
        n = len(self.pool)
        self.level = 0  # the least key the last choice found
        self.due_at = [-1] * n
        self.dues: list[tuple[int, int]] = []
        self.bounds = [0] * n
        self.ver = [0] * n
        self.heap: list[tuple[int, int, int]] = []
        for i, rep in enumerate(self.pool):
            self._renew(i, rep, now, popped=True)

    def touch(self, rep: Replica, now: int) -> None:
        """``rep`` (of the pool, advanced to ``now`` ns) changed: renew its entries."""
        self._renew(self.place[rep.index], rep, now)

    def _renew(self, i: int, rep: Replica, now: int, popped: bool = False) -> None:
        """Renew place ``i``'s due time and bound (its bound's entry was popped: push it anew)."""
        b, until = self.router.bound(rep, now, self.level)
        d = rep.due()
        if until < d:
            d = until
        if d != self.due_at[i]:
            self.due_at[i] = d
            if d < INF:
                heappush(self.dues, (d, i))
        if popped or b != self.bounds[i]:
            self.bounds[i] = b
            self.ver[i] += 1
            heappush(self.heap, (b, i, self.ver[i]))

    def choose(self, now: int) -> int:
        """The place, in the pool, of the replica the router picks at ``now`` (ns): the least
        key, the lowest place among equal ones, as :meth:`scan` finds."""
        pool, dues, due_at = self.pool, self.dues, self.due_at
        while dues and dues[0][0] < now:
            d, i = heappop(dues)
            if d == due_at[i]:  # else stale
                rep = pool[i]
                rep.advance_ahead(now)
                self._renew(i, rep, now)
        heap, ver, bounds = self.heap, self.ver, self.bounds
        key = self.router.key
        best_k = best_i = -1
        looked: list[int] = []
        while heap:
            b, i, v = heap[0]
            if v != ver[i]:
                heappop(heap)
                continue
            if looked and (b > best_k or (b == best_k and i > best_i)):
                break
            heappop(heap)
            looked.append(i)
            k = key(pool[i], now)
            if len(looked) == 1 or k < best_k or (k == best_k and i < best_i):
                best_k, best_i = k, i
        self.level = best_k
        for i in looked:  # back in, with a bound as tight as now allows
            self._renew(i, pool[i], now, popped=True)
        n = len(pool)
        if len(heap) > 2 * n + 64:
            self.heap = [(bounds[i], i, ver[i]) for i in range(n)]
            heapify(self.heap)
        if len(dues) > 2 * n + 64:
            self.dues = [(d, i) for i, d in enumerate(due_at) if d < INF]
            heapify(self.dues)
        return best_i

    def scan(self, now: int) -> int:
        """The reference: every replica advanced to ``now`` (ns), the router's scan of the pool."""
        for i, rep in enumerate(self.pool):
            rep.advance_to(now)
            self._renew(i, rep, now)
        return self.router.choose(self.pool, now)
