"""Shortest-path routing with ECMP over a :class:`~podsim.network.fabric.Fabric`.

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

Distances come from the fabric's :class:`~.route_tables.RoutingTables` (built once per fabric
and shared): distances between *twin classes* of forwarding nodes, so that memory and time grow
with the fabric's nodes and links, not with their square (a million GPUs on DGX H100 rails
have 3 classes).  A node's next hops are read off its links grouped by the class and weight of
their far end.  :meth:`Router.route` routes one flow (cached per ``(src, dst, label)``);
:meth:`Router.batch_paths` routes many flows in arrays (:mod:`.route_arrays`), taking exactly
the same routes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .fabric import Fabric
from .route_arrays import choice_reads, walk
from .route_tables import UNREACHABLE, RoutingTables

_UNREACHABLE = UNREACHABLE
_MASK = (1 << 64) - 1
_BIG = 1 << 62
#: the scalar next-hop cache is emptied when it holds more entries than this
_NEXT_CACHE_MAX = 1 << 20
#: routes walked in arrays this many at a time
_WALK_BLOCK = 1 << 18
#: batches of at most this many rows are routed one by one
_SCALAR_ROWS = 64


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


@dataclass(frozen=True)
class PairRoutes:
    """A batch of flows' routes, per (source, destination) pair.

    ``inv``: each flow's pair; ``table``: each pair's route as a row of link ids padded with
    ``pad`` (the link count), ``length`` its links; ``chooses``: the pairs whose route has an
    adaptive choice to make (their rows are empty); ``by_label``: the flows whose route depends
    on their label (hashed choices), routed one by one as ``rows`` (padded) of ``row_length``
    links -- for those flows the pair's row is their pair's first flow's route; ``reads``: the
    links adaptive choices may read (sorted)."""

    inv: np.ndarray
    table: np.ndarray
    length: np.ndarray
    chooses: np.ndarray
    by_label: np.ndarray
    rows: np.ndarray
    row_length: np.ndarray
    reads: np.ndarray
    pad: int


def pair_index(key: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(key, return_index=True, return_inverse=True)`` for a batch of flows' (source,
    destination) keys, faster: the distinct keys (ascending), the index of each one's first
    flow, and each flow's index among them.  A collective's channels often repeat the same
    pairs (channel ``c + 8`` as channel ``c`` on 8-GPU servers), so the keys are first tested
    for a period that starts where the label changes (the flows from there on repeat those
    before): only one period is sorted.  An unstable argsort gives each key's first flow as the
    least index among its flows."""
    k = len(key)
    period = k
    for p in (np.flatnonzero(labels[1:] != labels[:-1]) + 1).tolist():
        if k % p == 0 and key[p] == key[0] and np.array_equal(key[p:], key[:-p]):
            period = p
            break
    head = key[:period]
    order = np.argsort(head)
    ordered = head[order]
    starts = np.empty(period, dtype=bool)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    inv = np.empty(period, dtype=np.int64)
    inv[order] = np.cumsum(starts) - 1
    first = np.minimum.reduceat(order, np.flatnonzero(starts)) if period else np.zeros(0, dtype=np.int64)
    return ordered[starts], first, np.tile(inv, k // period) if period < k else inv


def routing_tables(fabric: Fabric) -> RoutingTables:
    """The fabric's routing tables, built on first use and shared by its routers."""
    t = fabric.derived.get("routing_tables")
    if t is None:
        t = fabric.derived["routing_tables"] = RoutingTables(fabric)
    return t


class Router:
    """ECMP shortest-path router.

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
        self._t = routing_tables(fabric)
        self._route_cache: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._next_cache: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        self._group_cache: dict[int, tuple[tuple[int, int], ...]] = {}
        self._in_cache: dict[int, list[int]] = {}
        self._dst_cache: dict[int, tuple[list[int], list[int], list[tuple[int, int]]]] = {}
        self._groups_cache: dict[int, list[tuple[int, int, int, int]]] = {}
        self._onward_cache: dict[tuple[int, int], list[int]] = {}
        self._reads_cache: dict[tuple[int, int], frozenset[int] | None] = {}
        self._plan_cache: dict[tuple[int, int], list] = {}
        self._pair_cache: dict[tuple[int, int], tuple[int, ...]] = {}

    def distances_to(self, dst: int) -> np.ndarray:
        """For every node, the distance to ``dst`` in whole ns (``_UNREACHABLE`` where none);
        non-forwarding nodes other than ``dst`` count as sources only (``_UNREACHABLE``)."""
        return self._t.distances_to(dst)

    def route(self, src: int, dst: int, label: int = 0, load: np.ndarray | list[int] | None = None) -> tuple[int, ...]:
        """The directed links a flow from node ``src`` to node ``dst`` takes (empty if equal).
        ``load`` (flows per link) is used by adaptive routing only.

        Raises:
            InputError: when no route exists.
        """
        key = (src, dst, label)
        adaptive = self.adaptive and load is not None and self.has_choice(src, dst)
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
        path, chose = self._walk_one(src, dst, label, load if adaptive else None)
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
            onward = self._onward_many([c[1] for c in cands], dst) if len(cands) >= 8 else None
            plan = []
            for i, c in enumerate(cands):
                if c[1] == dst:
                    plan.append((c, c[0], -1))
                else:
                    a = onward[i] if onward is not None else self._onward_links(c[1], dst)
                    plan.append((c, c[0], a[0] if len(a) == 1 else tuple(a)))
            if len(self._plan_cache) >= _NEXT_CACHE_MAX:
                self._plan_cache.clear()
            self._plan_cache[(u, dst)] = plan
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

    def route_pairs(self, src: np.ndarray, dst: np.ndarray, labels: np.ndarray) -> PairRoutes:
        """Many flows' routes at once, in arrays (:mod:`.route_arrays`), held per (source,
        destination) pair: each pair is walked once (with its first flow's label), and again
        flow by flow where a hashed choice makes the label matter.  The same routes as
        :meth:`route`; :meth:`batch_paths` lays them out flow by flow."""
        t = self._t
        pad = self.fabric.num_links
        n = self.fabric.num_nodes
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        pairs, first, inv = pair_index(src * n + dst, labels)
        a, b = pairs // n, pairs % n
        cols, plen, chose = self._walk(a, b, labels[first])
        reads = np.zeros(0, dtype=np.int64)
        if self.adaptive:
            chooses, by_label = chose, np.zeros(len(pairs), dtype=bool)
            if chooses.sum() <= _SCALAR_ROWS:
                got = [self.adaptive_reads(x, y) or () for x, y in zip(a[chooses].tolist(), b[chooses].tolist())]
                reads = np.array(sorted(set().union(*got)), dtype=np.int64)
            else:
                reads = choice_reads(t, a[chooses], b[chooses], self._choice_links, self._onward)
            plen = np.where(chooses, 0, plen)
        else:
            chooses, by_label = np.zeros(len(pairs), dtype=bool), chose
        width = max(1, int(plen.max(initial=0)))
        table = np.full((len(pairs), width), pad, dtype=np.int64)
        for j, col in enumerate(cols[:width]):
            table[:, j] = col
        table[chooses] = pad
        fl = np.flatnonzero(by_label[inv]) if by_label.any() else np.zeros(0, dtype=np.int64)
        cols, flen, _ = self._walk(src[fl], dst[fl], labels[fl])
        rows = np.full((len(fl), max(1, len(cols))), pad, dtype=np.int64)
        for j, col in enumerate(cols):
            rows[:, j] = col
        return PairRoutes(inv, table, plen, chooses, fl, rows, flen, reads, pad)

    def _walk(self, src: np.ndarray, dst: np.ndarray, labels: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
        """:func:`.route_arrays.walk` in blocks of rows (its temporaries stay small); a few rows
        one by one (:meth:`_walk_one`: arrays cost more than they save there)."""
        k = len(src)
        if k <= _SCALAR_ROWS:
            pad = self.fabric.num_links
            walks = [self._walk_one(a, b, c) for a, b, c in zip(src.tolist(), dst.tolist(), labels.tolist())]
            hops = max((len(p) for p, _ in walks), default=0)
            cols = [np.array([p[j] if j < len(p) else pad for p, _ in walks], dtype=np.int64) for j in range(hops)]
            length = np.array([len(p) for p, _ in walks], dtype=np.int64)
            return cols, length, np.array([c for _, c in walks], dtype=bool)
        if k <= _WALK_BLOCK:
            return walk(self._t, src, dst, labels, self.seed, self._choice_links)
        parts = [
            walk(
                self._t,
                src[i : i + _WALK_BLOCK],
                dst[i : i + _WALK_BLOCK],
                labels[i : i + _WALK_BLOCK],
                self.seed,
                self._choice_links,
            )
            for i in range(0, k, _WALK_BLOCK)
        ]
        hops = max(len(p[0]) for p in parts)
        pad = self.fabric.num_links
        cols = []
        for j in range(hops):
            cols.append(
                np.concatenate([p[0][j] if j < len(p[0]) else np.full(len(p[1]), pad, dtype=np.int64) for p in parts])
            )
        return cols, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])

    def _walk_one(
        self, src: int, dst: int, label: int, load: np.ndarray | list[int] | None = None
    ) -> tuple[list[int], bool]:
        """One flow's hashed route (:meth:`route` without its caches; ``load``: adaptive, each
        choice narrowed to the least congested first), and whether it met a choice of several links."""
        path: list[int] = []
        u, chose = src, False
        while u != dst:
            cands = self._next_hops(u, dst)
            if len(cands) > 1 and load is not None:
                cands = self._least_congested(u, cands, dst, load)
            if len(cands) > 1:
                chose = True
                link, u = cands[mix64(src, dst, label, self.seed, u) % len(cands)]
            else:
                link, u = cands[0]
            path.append(link)
        return path, chose

    def batch_paths(
        self, src: np.ndarray, dst: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Many flows' routes at once (:meth:`route_pairs`), flow by flow.

        Returns:
            each route as a row of link ids padded with the link count, the routes' lengths,
            which flows have an adaptive choice to make (their rows are left empty: route them
            when they start, with :meth:`route` and the flow counts then), and the links those
            choices may read (sorted).
        """
        pr = self.route_pairs(src, dst, labels)
        paths = pr.table[pr.inv]
        lengths = pr.length[pr.inv]
        if len(pr.by_label):  # hashed choices: the route depends on the label
            w = pr.rows.shape[1]
            if w > paths.shape[1]:
                paths = np.concatenate([paths, np.full((len(paths), w - paths.shape[1]), pr.pad, dtype=np.int64)], 1)
            paths[pr.by_label] = pr.pad
            paths[pr.by_label, :w] = pr.rows
            lengths[pr.by_label] = pr.row_length
        return paths, lengths, pr.chooses[pr.inv], pr.reads

    def has_choice(self, src: int, dst: int) -> bool:
        """Whether a route from ``src`` to ``dst`` meets several equal-cost links somewhere
        (then :meth:`adaptive_reads` is not ``None``): the first node that offers a choice
        lies on the one path that leads to it."""
        got = self._reads_cache.get((src, dst), False)
        if got is not False:
            return got is not None
        u = src
        while u != dst:
            cands = self._next_hops(u, dst)
            if len(cands) > 1:
                return True
            u = cands[0][1]
        return False

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
                cands = self._next_hops(u, dst)
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
        its links to the nodes ``dst`` hangs off (a spine's one link down to the leaf), else
        ``v``'s equal-cost next hops.  (Of parallel links, the one of the highest id.)"""
        key = (v, dst)
        got = self._onward_cache.get(key)
        if got is None:
            got = self._onward_cache[key] = self._onward_links(v, dst)
        return got

    def _onward_links(self, v: int, dst: int) -> list[int]:
        """:meth:`_onward`, not cached."""
        t = self._t
        direct = t.last_link(v, dst)
        if direct >= 0:
            return [direct]
        got = [x for x in (t.last_link(v, w) for w in self._in_of(dst)) if x >= 0]
        return got if got else [x[0] for x in self._next_hops(v, dst)]

    def _onward_many(self, ends: list[int], dst: int) -> list[list[int] | None]:
        """:meth:`_onward_links` of many nodes (``None`` for ``dst`` itself), their links looked
        up in arrays.  Twins (one class) all link to a forwarding node or none do, so a
        forwarding in-neighbour of ``dst`` that one of them has no link to is skipped."""
        t = self._t
        vs = np.asarray(ends, dtype=np.int64)
        direct = t.last_links(vs, dst).tolist()
        rep = next((v for v in ends if v != dst), -1)
        twins = bool((t.cls[vs] == t.cls[rep]).all()) and t.cls[rep] >= 0 if rep >= 0 else False
        cols = []
        for w in self._in_of(dst):
            if twins and t.fwd[w] and t.last_link(rep, w) < 0:
                continue
            cols.append(t.last_links(vs, w).tolist())
        out: list[list[int] | None] = []
        for i, v in enumerate(ends):
            if v == dst:
                out.append(None)
            elif direct[i] >= 0:
                out.append([direct[i]])
            else:
                got = [col[i] for col in cols if col[i] >= 0]
                out.append(got if got else [x[0] for x in self._next_hops(v, dst)])
        return out

    def _in_of(self, dst: int) -> list[int]:
        """The sources of ``dst``'s in-links, in link order."""
        got = self._in_cache.get(dst)
        if got is None:
            t = self._t
            if len(self._in_cache) >= _NEXT_CACHE_MAX:
                self._in_cache.clear()
            got = self._in_cache[dst] = t.in_src[t.in_start[dst] : t.in_start[dst + 1]].tolist()
        return got

    def _choice_links(self, u: int, dst: int) -> list[int]:
        """The links of :meth:`_next_hops`."""
        return [x[0] for x in self._next_hops(u, dst)]

    def _next_hops(self, u: int, dst: int) -> tuple[tuple[int, int], ...]:
        """The equal-cost (link, next node) choices at ``u`` towards ``dst``, by ascending link id.

        A link ``u -> v`` costs its weight plus ``v``'s distance to ``dst`` (``v`` forwarding or
        ``v`` = ``dst``).  The links to forwarding nodes come in groups of one far-end class
        and one weight, whose members cost the same unless they lead to ``dst`` or one of its
        attachments (costed one by one).

        Raises:
            InputError: when ``dst`` cannot be reached from ``u``.
        """
        key = (u, dst)
        got = self._next_cache.get(key)
        if got is not None:
            return got
        t = self._t
        acls, ws, special = self._dst_info(dst)
        cd = t.class_dist1
        spec: list[tuple[int, int]] = []  # (link, cost)
        nspec: dict[int, int] = {}
        for s, ts in special:
            links = t.links_between(u, s)
            for link in links:
                spec.append((link, t.weight_of(link) + ts))
                g = t.group_of(link)
                if g >= 0:
                    nspec[g] = nspec.get(g, 0) + 1
        gvals: list[tuple[int, int]] = []  # (group, cost)
        for g, e, w, size in self._node_groups(u):
            if size > nspec.get(g, 0):  # a group of special links only has no generic member
                best = _UNREACHABLE
                for c, aw in zip(acls, ws):
                    d = cd(e, c) + aw
                    if d < best:
                        best = d
                gvals.append((g, w + best))
        best = min([c for _, c in gvals] + [c for _, c in spec] + [_BIG])
        if best >= _UNREACHABLE:
            f = self.fabric
            raise InputError(f"no route from {f.node_name[u]} to {f.node_name[dst]} in fabric {f.name!r}")
        at = [g for g, c in gvals if c == best]
        extra = [link for link, c in spec if c == best]
        if len(at) == 1 and all(t.group_of(x) == at[0] for x in extra):
            got = self._group(at[0])
        else:
            chosen = set(extra)
            for g in at:
                chosen.update(t.glinks[t.grp_lo[g] : t.grp_hi[g]].tolist())
            ordered = sorted(chosen)
            got = tuple(zip(ordered, t.link_dst[ordered].tolist()))
        if len(self._next_cache) >= _NEXT_CACHE_MAX:
            self._next_cache.clear()
        self._next_cache[key] = got
        return got

    def _dst_info(self, dst: int) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """``dst``'s attachments' classes and weights, and its special nodes (the attachments,
        and ``dst`` itself when it does not forward) with their own distance to ``dst``."""
        got = self._dst_cache.get(dst)
        if got is None:
            t = self._t
            nodes, ws = t.attachments(dst)
            acls = [int(t.cls[a]) for a in nodes]
            special = []
            for s, cs in zip(nodes, acls):
                if s == dst:
                    special.append((s, 0))
                else:
                    d = [(0 if s == a else t.class_dist1(cs, c)) + w for a, c, w in zip(nodes, acls, ws)]
                    special.append((s, min(d + [_UNREACHABLE])))
            if not t.fwd[dst]:
                special.append((dst, 0))
            if len(self._dst_cache) >= _NEXT_CACHE_MAX:
                self._dst_cache.clear()
            got = self._dst_cache[dst] = (acls, ws, special)
        return got

    def _node_groups(self, u: int) -> list[tuple[int, int, int, int]]:
        """``u``'s groups: (group id, far-end class, weight, links)."""
        got = self._groups_cache.get(u)
        if got is None:
            t = self._t
            lo, hi = int(t.grp_start[u]), int(t.grp_start[u + 1])
            got = list(
                zip(
                    range(lo, hi),
                    t.grp_cls[lo:hi].tolist(),
                    t.grp_w[lo:hi].tolist(),
                    (t.grp_hi[lo:hi] - t.grp_lo[lo:hi]).tolist(),
                )
            )
            if len(self._groups_cache) >= _NEXT_CACHE_MAX:
                self._groups_cache.clear()
            self._groups_cache[u] = got
        return got

    def _group(self, g: int) -> tuple[tuple[int, int], ...]:
        """A group's (link, far end) pairs, shared by every choice made of that group alone."""
        got = self._group_cache.get(g)
        if got is None:
            t = self._t
            links = t.glinks[t.grp_lo[g] : t.grp_hi[g]]
            got = tuple(zip(links.tolist(), t.link_dst[links].tolist()))
            if len(got) > 2:  # (a GPU's one link to its switch is not worth keeping)
                self._group_cache[g] = got
        return got

    def gpu_route(self, src_rank: int, dst_rank: int, label: int = 0) -> tuple[int, ...]:
        """:meth:`route` between GPU ranks."""
        g = self.fabric.gpus
        return self.route(int(g[src_rank]), int(g[dst_rank]), label)

    def path_latency_ns(self, path: tuple[int, ...]) -> float:
        """Sum of the links' latencies (ns)."""
        lat = self.fabric.link_lat
        return float(sum(lat[i] for i in path))
