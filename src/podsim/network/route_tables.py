"""A fabric's routing tables, built once and shared by its routers: link lookups, each
destination's attachments, and least-latency distances between forwarding nodes held per
*class* of interchangeable nodes rather than per pair of nodes.

Link weights are the links' latencies rounded to whole ns, at least 1 (see
:mod:`podsim.network.routing`).  Distances are over paths whose every node is a forwarding node
(switches, and GPUs of direct-connect fabrics).

Twin classes: two forwarding nodes are twins when their links to and from other forwarding
nodes go to the same nodes with the same weights (the leaves of a two-tier Clos, which each
have one link to every spine; the spines; the leaves of one pod; the cores of one group; every
server's NVSwitch, which has no forwarding neighbour at all).  Swapping two twins maps the
forwarding graph onto itself, so the distance from ``x`` to ``y`` (``x != y``) depends only on
their classes: ``T[class x, class y]``.  Because twins also share their neighbours, a walk
between classes lifts to a walk between any members of them, so ``T`` is the least-weight
non-empty walk on the quotient graph of classes.  A fabric of a million GPUs has 3 classes
(DGX H100 rails: NVSwitches, leaves, spines), a three-tier fat-tree a few per pod; ``T`` is
one dense table up to :data:`DENSE_CLASSES` classes and is computed a column at a time beyond
(a torus, whose every GPU is its own class).  Memory and time grow with the nodes and links.

A destination's attachments are its forwarding in-neighbours with their least link weight (a
forwarding destination is its own, at weight 0): the distance from a forwarding node ``v`` to
destination ``d`` is ``min over attachments (a, w) of dist(v, a) + w``.

Units: ns (integer weights).
"""

from __future__ import annotations

import numpy as np

from ..arrays import unique
from .fabric import Fabric

#: the distance that stands for "no path" (as podsim's routers always had it)
UNREACHABLE = np.iinfo(np.int32).max // 4
#: at most this many twin classes get a dense class-distance table (64 MiB of int32)
DENSE_CLASSES = 4096

_U64 = np.uint64


def splitmix_array(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array (wrapping arithmetic)."""
    z = np.asarray(x, dtype=_U64)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def _csr_starts(keys: np.ndarray, n: int) -> np.ndarray:
    """Start offsets (length ``n + 1``) of sorted ``keys`` in ``0 .. n-1``."""
    return np.concatenate(([0], np.cumsum(np.bincount(keys, minlength=n)))).astype(np.int64)


def _segment_sum_u64(owner: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per owner, the wrapping uint64 sum of its values (an order-free hash of a multiset)."""
    out = np.zeros(n, dtype=_U64)
    np.add.at(out, owner, values)
    return out


def twin_classes(n: int, fwd: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, int]:
    """Twin classes of the forwarding graph (links ``a -> b`` of weight ``w``, both ends
    forwarding): a class id per node (-1 for a node that does not forward) and the number of
    classes.  Grouped by a hash of each node's out- and in-link multisets, then checked link by
    link against the class's first member (regrouped exactly, should a hash ever collide)."""
    cls = np.full(n, -1, dtype=np.int64)
    nodes = np.flatnonzero(fwd)
    if not len(nodes):
        return cls, 0
    a64, b64, w64 = a.astype(_U64), b.astype(_U64), w.astype(_U64)
    h_out = splitmix_array(splitmix_array(b64 + _U64(0x9E3779B97F4A7C15)) ^ w64)
    h_in = splitmix_array(splitmix_array(a64 + _U64(0x632BE59BD9B4E019)) ^ w64)
    out_deg = np.bincount(a, minlength=n)
    in_deg = np.bincount(b, minlength=n)
    rows = np.stack(
        [
            _segment_sum_u64(a, h_out, n)[nodes],
            _segment_sum_u64(b, h_in, n)[nodes],
            out_deg[nodes].astype(_U64),
            in_deg[nodes].astype(_U64),
        ],
        axis=1,
    )
    _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    cls[nodes] = inv
    rep = np.full(n, -1, dtype=np.int64)
    rep[nodes] = nodes[first[inv]]
    if _same_lists(n, rep, a, b, w, out_deg) and _same_lists(n, rep, b, a, w, in_deg):
        return cls, len(first)
    return _exact_classes(n, nodes, a, b, w)  # pragma: no cover - a 64-bit hash collision


def _same_lists(n: int, rep: np.ndarray, own: np.ndarray, other: np.ndarray, w: np.ndarray, deg: np.ndarray) -> bool:
    """Whether every node's sorted (neighbour, weight) list equals its class representative's."""
    if not len(own):
        return True
    o = np.lexsort((w, other, own))
    so, sn, sw = own[o], other[o], w[o]
    start = np.concatenate(([0], np.cumsum(deg)))
    pos = np.arange(len(so)) - start[so]
    rpos = start[rep[so]] + pos
    return bool(np.array_equal(sn[rpos], sn) and np.array_equal(sw[rpos], sw))


def _exact_classes(
    n: int, nodes: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, int]:  # pragma: no cover - only after a hash collision
    """Twin classes by comparing whole neighbour lists (slow; a fallback)."""
    keys: dict[int, list] = {int(x): [[], []] for x in nodes}
    for x, y, ww in zip(a.tolist(), b.tolist(), w.tolist()):
        keys[x][0].append((y, ww))
        keys[y][1].append((x, ww))
    ids: dict[tuple, int] = {}
    cls = np.full(n, -1, dtype=np.int64)
    for x in nodes.tolist():
        k = (tuple(sorted(keys[x][0])), tuple(sorted(keys[x][1])))
        cls[x] = ids.setdefault(k, len(ids))
    return cls, len(ids)


class RoutingTables:
    """Everything a :class:`~podsim.network.routing.Router` needs about a fabric, in arrays.

    Attributes (node and link ids are the fabric's):
        weight: int64 per link, its latency in whole ns (at least 1).
        fwd: bool per node, whether it forwards.
        pair_key, pair_link: every link's ``src * nodes + dst`` sorted, and the link ids in that
            order (parallel links by id): :meth:`links_between` looks links up by their ends.
        in_start, in_src: every node's in-links' sources, in link order (CSR by destination).
        att_start, att_node, att_w: every node's attachments (CSR; forwarding in-neighbours by
            id with their least weight, or the node itself at 0 when it forwards).
        cls, num_classes: each node's twin class (-1: does not forward).
        grp_start: per node, its range of groups (CSR); a group is the node's links to
            forwarding nodes of one class with one weight: ``grp_cls``, ``grp_w``, and
            ``glinks[grp_lo:grp_hi]`` (its link ids, ascending).  ``link_grp``: each link's group
            (-1 for a link to a node that does not forward).
    """

    def __init__(self, fabric: Fabric) -> None:
        n = fabric.num_nodes
        self.n = n
        src = fabric.link_src.astype(np.int64)
        dst = fabric.link_dst.astype(np.int64)
        self.link_src, self.link_dst = src, dst
        w = np.maximum(np.rint(fabric.link_lat), 1).astype(np.int64)
        self.weight = w
        fwd = np.asarray(fabric.forwards, dtype=bool)
        self.fwd = fwd
        key = src * n + dst
        order = np.argsort(key, kind="stable")
        self.pair_key = key[order]
        self.pair_link = order
        order_in = np.argsort(dst, kind="stable")
        self.in_start = _csr_starts(dst, n)
        self.in_src = src[order_in]
        self._attachments(n, src, dst, w, fwd)
        both = fwd[src] & fwd[dst]
        fa, fb, fw = src[both], dst[both], w[both]
        self.cls, self.num_classes = twin_classes(n, fwd, fa, fb, fw)
        self._groups(n, src, dst, w, np.flatnonzero(fwd[dst]))
        self._quotient()
        self._dense: np.ndarray | None = None
        self._cols: dict[int, np.ndarray] = {}
        self._adj: dict[int, dict[int, int | tuple[int, ...]]] = {}

    # -- construction ---------------------------------------------------------------------------

    def _attachments(self, n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray, fwd: np.ndarray) -> None:
        m = fwd[src] & ~fwd[dst]
        k = dst[m] * n + src[m]
        aw = w[m]
        o = np.lexsort((aw, k))
        k, aw = k[o], aw[o]
        first = np.ones(len(k), dtype=bool)
        first[1:] = k[1:] != k[:-1]
        k, aw = k[first], aw[first]
        owner = k // n
        node = k % n
        selves = np.flatnonzero(fwd)  # a forwarding destination is its own attachment
        owner = np.concatenate([owner, selves])
        node = np.concatenate([node, selves])
        aw = np.concatenate([aw, np.zeros(len(selves), dtype=np.int64)])
        o = np.lexsort((node, owner))
        self.att_start = _csr_starts(owner, n)
        self.att_node = node[o]
        self.att_w = aw[o]

    def _groups(self, n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray, links: np.ndarray) -> None:
        c = self.cls[dst[links]]
        o = np.lexsort((links, w[links], c, src[links]))
        g = links[o]
        gs, gc, gw = src[g], c[o], w[g]
        new = np.ones(len(g), dtype=bool)
        new[1:] = (gs[1:] != gs[:-1]) | (gc[1:] != gc[:-1]) | (gw[1:] != gw[:-1])
        lo = np.flatnonzero(new)
        self.glinks = g
        self.grp_lo = lo
        self.grp_hi = np.append(lo[1:], len(g)).astype(np.int64)
        self.grp_node = gs[lo]
        self.grp_cls = gc[lo]
        self.grp_w = gw[lo]
        self.grp_start = _csr_starts(self.grp_node, n)
        link_grp = np.full(len(src), -1, dtype=np.int64)
        link_grp[g] = np.cumsum(new) - 1
        self.link_grp = link_grp

    def _quotient(self) -> None:
        """The class graph's edges ``qa -> qb`` with their least weight ``qw``, read off each
        class's first member."""
        k = self.num_classes
        if not k:
            self.qa = self.qb = self.qw = np.zeros(0, dtype=np.int64)
            return
        fwd_nodes = np.flatnonzero(self.fwd)
        _, first = np.unique(self.cls[fwd_nodes], return_index=True)
        reps = fwd_nodes[first]
        is_rep = np.zeros(self.n, dtype=bool)
        is_rep[reps] = True
        sel = is_rep[self.grp_node]
        qa, qb, qw = self.cls[self.grp_node[sel]], self.grp_cls[sel], self.grp_w[sel]
        o = np.lexsort((qw, qb, qa))
        qa, qb, qw = qa[o], qb[o], qw[o]
        keep = np.ones(len(qa), dtype=bool)
        keep[1:] = (qa[1:] != qa[:-1]) | (qb[1:] != qb[:-1])
        self.qa, self.qb, self.qw = qa[keep], qb[keep], qw[keep]

    # -- class distances ------------------------------------------------------------------------

    def _dense_table(self) -> np.ndarray:
        """``T`` for every pair of classes, by min-plus relaxation over blocks of sources."""
        k = self.num_classes
        table = np.full((k, k), UNREACHABLE, dtype=np.int32)
        if not len(self.qa):
            return table
        o = np.argsort(self.qb, kind="stable")
        qa, qb, qw = self.qa[o], self.qb[o], self.qw[o]
        targets, starts = np.unique(qb, return_index=True)
        block = max(1, 4_000_000 // max(len(qa), k))
        for lo in range(0, k, block):
            hi = min(k, lo + block)
            d = np.full((hi - lo, k), UNREACHABLE, dtype=np.int64)
            d[np.arange(hi - lo), np.arange(lo, hi)] = 0
            while True:
                cand = np.minimum.reduceat(d[:, qa] + qw, starts, axis=1)
                new = np.minimum(d[:, targets], cand)
                if np.array_equal(new, d[:, targets]):
                    break
                d[:, targets] = new
            last = np.full((hi - lo, k), UNREACHABLE, dtype=np.int64)  # a walk of at least one link
            last[:, targets] = np.minimum.reduceat(d[:, qa] + qw, starts, axis=1)
            table[lo:hi] = np.minimum(last, UNREACHABLE)
        return table

    def _column(self, c: int) -> np.ndarray:
        """``T[:, c]``, by relaxation towards class ``c`` (for fabrics of many classes)."""
        col = self._cols.get(c)
        if col is not None:
            return col
        k = self.num_classes
        out = np.full(k, UNREACHABLE, dtype=np.int64)
        if len(self.qa):
            sources, starts = np.unique(self.qa, return_index=True)  # qa is sorted
            s = np.full(k, UNREACHABLE, dtype=np.int64)
            s[c] = 0
            while True:
                cand = np.minimum.reduceat(self.qw + s[self.qb], starts)
                new = np.minimum(s[sources], cand)
                if np.array_equal(new, s[sources]):
                    break
                s[sources] = new
            out[sources] = np.minimum.reduceat(self.qw + s[self.qb], starts)
        col = self._cols[c] = np.minimum(out, UNREACHABLE).astype(np.int32)
        return col

    def class_dist(self, e: np.ndarray, c: np.ndarray) -> np.ndarray:
        """``T[e, c]`` elementwise (int64): the distance from a node of class ``e`` to another
        node of class ``c`` (``UNREACHABLE`` where none)."""
        e = np.maximum(np.asarray(e, dtype=np.int64), 0)  # (rows that do not count may hold -1)
        c = np.maximum(np.asarray(c, dtype=np.int64), 0)
        if not self.num_classes:
            return np.full(np.broadcast(e, c).shape, UNREACHABLE, dtype=np.int64)
        if self.num_classes <= DENSE_CLASSES:
            if self._dense is None:
                self._dense = self._dense_table()
            return self._dense[e, c].astype(np.int64)
        e, c = np.broadcast_arrays(e, c)
        out = np.empty(e.shape, dtype=np.int64)
        for cc in unique(c).tolist():
            m = c == cc
            out[m] = self._column(cc)[e[m]]
        return out

    def class_dist1(self, e: int, c: int) -> int:
        """:meth:`class_dist` of one pair."""
        if not self.num_classes:
            return UNREACHABLE
        if self.num_classes <= DENSE_CLASSES:
            if self._dense is None:
                self._dense = self._dense_table()
            return int(self._dense[e, c])
        return int(self._column(c)[e])

    # -- lookups --------------------------------------------------------------------------------

    def adjacency(self, u: int) -> dict[int, int | tuple[int, ...]]:
        """``u``'s links by far end: a link id, or the ids of parallel links (ascending), for
        the nodes asked about, built on first use."""
        adj = self._adj.get(u)
        if adj is None:
            n = self.n
            lo, hi = np.searchsorted(self.pair_key, [u * n, (u + 1) * n])
            adj = self._adj[u] = {}
            for k, link in zip((self.pair_key[lo:hi] - u * n).tolist(), self.pair_link[lo:hi].tolist()):
                got = adj.get(k)
                adj[k] = link if got is None else (got if isinstance(got, tuple) else (got,)) + (link,)
        return adj

    def links_between(self, u: int, v: int) -> tuple[int, ...]:
        """The links ``u -> v`` (ascending ids)."""
        got = self.adjacency(u).get(v)
        if got is None:
            return ()
        return got if isinstance(got, tuple) else (got,)

    def last_link(self, u: int, v: int) -> int:
        """The highest id of a link ``u -> v`` (-1: none)."""
        got = self.adjacency(u).get(v)
        if got is None:
            return -1
        return got[-1] if isinstance(got, tuple) else got

    def last_links(self, u: np.ndarray, v: int) -> np.ndarray:
        """For each node of ``u``, the highest id of a link to ``v`` (-1: none), in arrays."""
        key = u * self.n + v
        at = np.searchsorted(self.pair_key, key, "right") - 1
        ok = at >= 0
        ok[ok] = self.pair_key[at[ok]] == key[ok]
        return np.where(ok, self.pair_link[np.maximum(at, 0)], -1)

    def weight_of(self, link: int) -> int:
        """A link's weight (ns)."""
        return int(self.weight[link])

    def group_of(self, link: int) -> int:
        """A link's group (-1: its far end does not forward)."""
        return int(self.link_grp[link])

    def attachments(self, dst: int) -> tuple[list[int], list[int]]:
        """``dst``'s attachments: forwarding in-neighbours (or itself) and their weights."""
        lo, hi = int(self.att_start[dst]), int(self.att_start[dst + 1])
        return self.att_node[lo:hi].tolist(), self.att_w[lo:hi].tolist()

    def distances_to(self, dst: int) -> np.ndarray:
        """For every node, the distance to ``dst`` through forwarding nodes (0 at ``dst``,
        ``UNREACHABLE`` at nodes that do not forward and where there is no path)."""
        nodes, ws = self.attachments(dst)
        out = np.full(self.n, UNREACHABLE, dtype=np.int64)
        fwd = np.flatnonzero(self.fwd)
        if nodes:
            best = np.full(len(fwd), UNREACHABLE + max(ws) + 1, dtype=np.int64)
            for a, w in zip(nodes, ws):
                d = self.class_dist(self.cls[fwd], np.full(len(fwd), self.cls[a]))
                d[fwd == a] = 0
                np.minimum(best, d + w, out=best)
            out[fwd] = np.minimum(best, UNREACHABLE)
        out[dst] = 0
        return out
