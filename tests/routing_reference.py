"""The brute-force reference router for tests: podsim's router as it was before issue #29
(all-pairs distances between forwarding nodes, a full distance vector per destination, next
hops by scanning every out-link).  Quadratic in the forwarding nodes: for small fabrics only.
The new :class:`podsim.network.routing.Router` must take exactly the routes this one takes.

Its original docstring follows.

Shortest-path routing with ECMP over a :class:`~podsim.network.fabric.Fabric`.

Routes minimise the summed link latency, each link counting at least 1 ns (integer ns), so
traffic between GPUs of one server stays on NVLink rather than detouring through a NIC, and
hop count decides between links of equal latency.  Only forwarding nodes (switches, and GPUs
of direct-connect fabrics) appear inside a route.  Where several next hops are equally
short, the router picks
one by hashing ``(src, dst, label, seed, node)``, as a switch's ECMP hash would: the same flow
label always takes the same path, different labels (NCCL channels, queue pairs) spread over
the equal-cost paths, and a different ``seed`` gives another deterministic spread.

With ``adaptive=True`` (InfiniBand adaptive routing, Spectrum-X) a caller that passes the
current per-link flow counts gets, at each hop, the equal-cost link whose path is least
congested -- the most flows on it or, one hop further, on the emptiest link it can continue
on (the hash breaks ties) -- and such routes are not cached.

Distances between forwarding nodes are computed once (min-plus relaxation over all sources
at once, in blocks); the distance from a forwarding node to any destination then follows from
the destination's in-links.  Routes are
cached per ``(src, dst, label)``.
"""

from __future__ import annotations

import numpy as np

from podsim.errors import InputError
from podsim.network.fabric import Fabric

_UNREACHABLE = np.iinfo(np.int32).max // 4
_MASK = (1 << 64) - 1


def mix64(*values: int) -> int:
    """A deterministic 64-bit hash of integers (splitmix64 steps); the same on every run
    and every platform, unlike Python's salted string hashes."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK)) & _MASK
        h = (h + 0x9E3779B97F4A7C15) & _MASK
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        h = z ^ (z >> 31)
    return h


class ReferenceRouter:
    """ECMP shortest-path router (the reference).

    Args:
        fabric: the fabric to route on.
        seed: the ECMP hash seed (any integer; default the fabric's ``meta["ecmp_seed"]`` or 0);
            routes are deterministic for a given seed.
        adaptive: adaptive routing (default: the fabric's ``meta["routing"] == "adaptive"``).
    """

    def __init__(self, fabric: Fabric, seed: int | None = None, adaptive: bool | None = None) -> None:
        self.fabric = fabric
        self.seed = int(fabric.meta.get("ecmp_seed", 0) if seed is None else seed)
        self.adaptive = bool(fabric.meta.get("routing") == "adaptive") if adaptive is None else adaptive
        self._weight, self._out, self._in, self._fwd_ids, self._fwd_index = self._tables(fabric)
        self._dist = self._forwarding_distances()
        self._link_of_pair: dict[tuple[int, int], int] | None = None
        self._to_cache: dict[int, np.ndarray] = {}
        self._route_cache: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._next_cache: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._onward_cache: dict[tuple[int, int], list[int]] = {}
        self._reads_cache: dict[tuple[int, int], frozenset[int] | None] = {}
        self._plan_cache: dict[tuple[int, int], list] = {}
        self._hash_cache: dict[tuple[int, int, int, int], int] = {}
        self._pair_cache: dict[tuple[int, int], tuple[int, ...]] = {}

    @staticmethod
    def _tables(fabric: Fabric) -> tuple:
        """Link weights, adjacency lists and the forwarding nodes' index (read-only, shared)."""
        n = fabric.num_nodes
        weight = np.maximum(np.rint(fabric.link_lat), 1).astype(np.int64)
        w = weight.tolist()
        out: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]  # (link, dst, weight)
        into: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (source node, weight)
        for link, (a, b) in enumerate(zip(fabric.link_src.tolist(), fabric.link_dst.tolist())):
            out[a].append((link, b, w[link]))
            into[b].append((a, w[link]))
        fwd_ids = np.flatnonzero(fabric.forwards)
        fwd_index = np.full(n, -1, dtype=np.int64)
        fwd_index[fwd_ids] = np.arange(len(fwd_ids))
        return weight, out, into, fwd_ids, fwd_index

    def _forwarding_distances(self) -> np.ndarray:
        """Least-latency distances between forwarding nodes, through forwarding nodes only."""
        f = self.fabric
        index = self._fwd_index
        k = len(self._fwd_ids)
        keep = (index[f.link_src] >= 0) & (index[f.link_dst] >= 0)
        a = index[f.link_src[keep]]
        b = index[f.link_dst[keep]]
        w = self._weight[keep]
        order = np.argsort(b, kind="stable")
        a, b, w = a[order], b[order], w[order]
        targets, starts = np.unique(b, return_index=True)
        dist = np.full((k, k), _UNREACHABLE, dtype=np.int64)
        block = max(1, 4_000_000 // max(len(a), 1))
        for lo in range(0, k, block):
            d = dist[lo : lo + block]
            d[np.arange(d.shape[0]), np.arange(lo, lo + d.shape[0])] = 0
            if not len(a):
                continue
            while True:
                cand = np.minimum.reduceat(d[:, a] + w, starts, axis=1)
                new = np.minimum(d[:, targets], cand)
                if np.array_equal(new, d[:, targets]):
                    break
                d[:, targets] = new
        return np.minimum(dist, _UNREACHABLE)

    def distances_to(self, dst: int) -> np.ndarray:
        """For every node, hops to ``dst`` (``_UNREACHABLE`` where none); non-forwarding nodes
        other than ``dst`` count as sources only."""
        cached = self._to_cache.get(dst)
        if cached is not None:
            return cached
        n = self.fabric.num_nodes
        out = np.full(n, _UNREACHABLE, dtype=np.int64)
        out[dst] = 0
        preds = [(self._fwd_index[a], w) for a, w in self._in[dst] if self._fwd_index[a] >= 0]
        if len(self._fwd_ids):
            if preds:
                cols = [p for p, _ in preds]
                wts = np.asarray([w for _, w in preds], dtype=np.int64)
                via = (self._dist[:, cols] + wts).min(axis=1)
            else:
                via = np.full(len(self._fwd_ids), _UNREACHABLE, dtype=np.int64)
            if self._fwd_index[dst] >= 0:
                via[self._fwd_index[dst]] = 0
            out[self._fwd_ids] = np.minimum(via, _UNREACHABLE)
        out[dst] = 0
        self._to_cache[dst] = out
        return out

    def route(self, src: int, dst: int, label: int = 0, load: np.ndarray | list[int] | None = None) -> tuple[int, ...]:
        """The directed links a flow from node ``src`` to node ``dst`` takes (empty if equal).
        ``load`` (flows per link) is used by adaptive routing only.

        Raises:
            InputError: when no route exists.
        """
        key = (src, dst, label)
        adaptive = self.adaptive and load is not None and self.adaptive_reads(src, dst) is not None
        cached = None if adaptive else self._route_cache.get(key)
        if cached is not None:
            return cached
        if src == dst:
            return ()
        if not adaptive:
            same = self._pair_cache.get((src, dst))
            if same is not None:  # a route with no choice on it: the same for every label
                self._route_cache[key] = same
                return same
        path: list[int] = []
        u = src
        nxt = self._next_cache
        chose = False
        while u != dst:
            cands = nxt.get((u, dst))
            if cands is None:
                cands = nxt[(u, dst)] = self._next_hops(u, dst)
            if len(cands) > 1 and adaptive:
                cands = self._least_congested(u, cands, dst, load)  # type: ignore[arg-type]
            if len(cands) > 1:
                chose = True
                h = self._hash_cache.get((src, dst, label, u))
                if h is None:
                    h = self._hash_cache[(src, dst, label, u)] = mix64(src, dst, label, self.seed, u)
                link, u = cands[h % len(cands)]
            else:
                link, u = cands[0]
            path.append(link)
        out = tuple(path)
        if not adaptive:
            self._route_cache[key] = out
            if not chose:
                self._pair_cache[(src, dst)] = out
        return out

    def _least_congested(
        self, u: int, cands: list[tuple[int, int]], dst: int, load: np.ndarray | list[int]
    ) -> list[tuple[int, int]]:
        """The adaptive choices whose path is least congested: the most flows on the link or,
        one hop further, on the least-loaded link it can continue on (a spine has one link down
        to each leaf, so choosing the uplink chooses the downlink too: without the look-ahead,
        flows that each take the emptiest uplink collide on the downlink behind it).  Ties: the
        fewest flows on the link itself."""
        plan = self._plan_cache.get((u, dst))
        if plan is None:  # each choice: (choice, its link, the link after it, several, or -1 at dst)
            plan = self._plan_cache[(u, dst)] = []
            for c in cands:
                after = -1 if c[1] == dst else tuple(self._onward(c[1], dst))
                plan.append((c, c[0], after[0] if after != -1 and len(after) == 1 else after))
        best0 = best1 = -1
        out: list[tuple[int, int]] = []
        for c, link, onward in plan:
            here = load[link]
            if best0 >= 0 and here > best0:
                continue  # already worse than the best, whatever lies behind it
            if onward.__class__ is int:
                if onward < 0:
                    s0 = here
                else:
                    after = load[onward]
                    s0 = here if here >= after else after
            else:
                after = min(load[x] for x in onward)
                s0 = here if here >= after else after
            if best0 < 0 or s0 < best0 or (s0 == best0 and here < best1):
                best0, best1, out = s0, here, [c]
            elif s0 == best0 and here == best1:
                out.append(c)
        return out

    def batch_paths(
        self, src: np.ndarray, dst: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]], np.ndarray, set[int]]:
        """Many flows' routes at once, routed once per (source, destination) pair where the
        label cannot matter (no choice on the way).

        Returns:
            each route as a row of link ids padded with the link count, the routes' lengths,
            each flow's index into the list of distinct routes, that list, which flows have an
            adaptive choice to make (their rows are left empty: route them when they start,
            with :meth:`route` and the flow counts then), and the links those choices may read.
        """
        pad = self.fabric.num_links
        n = self.fabric.num_nodes
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        pairs, first, inv = np.unique(src * n + dst, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        routes: list[tuple[int, ...]] = []
        chooses = np.zeros(len(pairs), dtype=bool)
        by_label: list[int] = []
        read_sets: set[frozenset[int]] = set()
        for j, (pair, f) in enumerate(zip(pairs.tolist(), first.tolist())):
            a, b = divmod(pair, n)
            path: tuple[int, ...] | None = ()
            if a != b:
                reads = self.adaptive_reads(a, b) if self.adaptive else None
                if reads is not None:
                    chooses[j] = True
                    read_sets.add(reads)
                else:
                    path = self._pair_cache.get((a, b))
                    if path is None:
                        route = self.route(a, b, int(labels[f]))
                        path = self._pair_cache.get((a, b))
                        if path is None:  # hashed choices: the route depends on the label
                            by_label.append(j)
                            path = route
            routes.append(path)
        width = max(1, max((len(r) for r in routes), default=1))
        table = np.full((len(routes), width), pad, dtype=np.int64)
        for j, r in enumerate(routes):
            table[j, : len(r)] = r
        lengths_of = np.fromiter((len(r) for r in routes), dtype=np.int64, count=len(routes))
        paths = table[inv]
        lengths = lengths_of[inv]
        route_of = inv.copy()
        if by_label:
            for i in np.flatnonzero(np.isin(inv, by_label)).tolist():
                r = self.route(int(src[i]), int(dst[i]), int(labels[i]))
                if len(r) > paths.shape[1]:
                    paths = np.concatenate(
                        [paths, np.full((len(paths), len(r) - paths.shape[1]), pad, dtype=np.int64)], axis=1
                    )
                paths[i] = pad
                paths[i, : len(r)] = r
                lengths[i] = len(r)
                route_of[i] = len(routes)
                routes.append(r)
        return paths, lengths, route_of, routes, chooses[inv], set().union(*read_sets)

    def adaptive_reads(self, src: int, dst: int) -> frozenset[int] | None:
        """The links whose flow counts an adaptive route from ``src`` to ``dst`` may read:
        ``None`` when the route has no choice to make (then it is the same whatever the load,
        and :meth:`route` caches it).  A superset: every choice point on every equal-cost path,
        with the links it and its look-ahead compare."""
        key = (src, dst)
        got = self._reads_cache.get(key, False)
        if got is not False:
            return got  # type: ignore[return-value]
        reads: set[int] = set()
        if self.adaptive and src != dst:
            seen = {src}
            stack = [src]
            while stack:
                u = stack.pop()
                cands = self._next_cache.get((u, dst))
                if cands is None:
                    cands = self._next_cache[(u, dst)] = self._next_hops(u, dst)
                if len(cands) > 1:
                    for link, v in cands:
                        reads.add(link)
                        if v != dst:
                            reads.update(self._onward(v, dst))
                for _, v in cands:
                    if v != dst and v not in seen:
                        seen.add(v)
                        stack.append(v)
        out = frozenset(reads) if reads else None
        self._reads_cache[key] = out
        return out

    def _onward(self, v: int, dst: int) -> list[int]:
        """The links from ``v`` that carry a flow on towards ``dst``: ``v``'s link to ``dst``, or
        its links to the switches ``dst`` hangs off (a spine's one link down to the leaf), else
        ``v``'s equal-cost next hops."""
        key = (v, dst)
        got = self._onward_cache.get(key)
        if got is None:
            pairs = self._link_of_pair
            if pairs is None:
                f = self.fabric
                pairs = self._link_of_pair = {
                    (a, b): i for i, (a, b) in enumerate(zip(f.link_src.tolist(), f.link_dst.tolist()))
                }
            if (v, dst) in pairs:
                got = [pairs[(v, dst)]]
            else:
                got = [pairs[(v, w)] for w, _ in self._in[dst] if (v, w) in pairs]
                if not got:
                    nxt = self._next_cache.get(key)
                    if nxt is None:
                        nxt = self._next_cache[key] = self._next_hops(v, dst)
                    got = [x[0] for x in nxt]
            self._onward_cache[key] = got
        return got

    def _next_hops(self, u: int, dst: int) -> list[tuple[int, int]]:
        """The equal-cost (link, next node) choices at ``u`` towards ``dst``.

        Raises:
            InputError: when ``dst`` cannot be reached from ``u``.
        """
        to = self.distances_to(dst)
        fwd = self.fabric.forwards
        best = _UNREACHABLE
        cands: list[tuple[int, int]] = []
        for link, v, w in self._out[u]:
            if v != dst and not fwd[v]:
                continue
            d = int(to[v]) + w
            if d < best:
                best, cands = d, [(link, v)]
            elif d == best:
                cands.append((link, v))
        if best >= _UNREACHABLE or not cands:
            f = self.fabric
            raise InputError(f"no route from {f.node_name[u]} to {f.node_name[dst]} in fabric {f.name!r}")
        return cands

    def gpu_route(self, src_rank: int, dst_rank: int, label: int = 0) -> tuple[int, ...]:
        """:meth:`route` between GPU ranks."""
        g = self.fabric.gpus
        return self.route(int(g[src_rank]), int(g[dst_rank]), label)

    def path_latency_ns(self, path: tuple[int, ...]) -> float:
        """Sum of the links' latencies (ns)."""
        lat = self.fabric.link_lat
        return float(sum(lat[i] for i in path))
