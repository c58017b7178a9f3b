"""Many routes at once, in arrays: the equal-cost next hops of many (node, destination) rows,
the hashed walk of many flows, and the links that adaptive choices read.

Exactly the router's rules (:mod:`podsim.network.routing`): at node ``u`` towards ``dst`` a
link ``u -> v`` costs its weight plus ``v``'s distance to ``dst`` (``v`` forwarding, or ``v``
is ``dst``); the cheapest links, in ascending id order, are the choices, and a flow takes
choice ``mix64(src, dst, label, seed, u) % choices`` where there are several.

How it stays linear in the rows: ``u``'s links to forwarding nodes are grouped by the twin
class and weight of their far end (:class:`~.route_tables.RoutingTables`), and every member of
a group costs the same -- the group's weight plus the class distance to ``dst``'s attachments --
except the few *special* ones, the attachments themselves and ``dst`` (which sit closer).  So a
row's choices are whole groups, or special links, or (rarely: a group made only of special
links, parallel links to one special node, a destination with very many attachments) what the
scalar router says, which rows of that kind are handed to.

Units: link ids; distances in whole ns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..arrays import unique
from .route_tables import UNREACHABLE, RoutingTables

_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_BIG = np.int64(1) << np.int64(62)
#: destinations with more attachments than this are routed by the scalar router
MAX_ATTACHMENTS = 16
#: at most this many of a destination's in-neighbours are looked at in arrays for the
#: adaptive look-ahead (more: the scalar router)
MAX_IN = 64
#: adaptive read sets are explored from this many (node, destination) states at a time
_READS_BLOCK = 1 << 16


def mix64_array(*values: np.ndarray | int) -> np.ndarray:
    """:func:`podsim.network.routing.mix64` of many tuples at once (one array per position,
    or one integer for all): bit for bit the same hashes, as uint64."""
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    n = len(arrays[0]) if arrays else 1
    h = np.full(n, _GOLDEN, dtype=np.uint64)
    for v in values:
        if isinstance(v, np.ndarray):
            x = v.astype(np.int64).astype(np.uint64)  # two's complement: v & (2**64 - 1)
        else:
            x = np.uint64(int(v) & _MASK)
        h ^= x
        h += _GOLDEN
        z = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = z ^ (z >> np.uint64(31))
    return h


@dataclass
class Choices:
    """Each row's equal-cost links: ``count`` of them, ascending, at ``offset`` in the tables'
    ``glinks`` (``own`` false: a whole group) or in ``links`` (``own`` true)."""

    offset: np.ndarray
    count: np.ndarray
    own: np.ndarray
    links: np.ndarray

    def pick(self, glinks: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Each row's ``k``-th choice."""
        at = self.offset + k
        out = np.empty(len(at), dtype=np.int64)
        own = self.own
        out[own] = self.links[at[own]]
        out[~own] = glinks[at[~own]]
        return out

    def expand(self, glinks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every choice of every row: (row, link) pairs, rows ascending, links ascending."""
        rows = np.repeat(np.arange(len(self.count)), self.count)
        first = np.cumsum(self.count) - self.count
        at = self.offset[rows] + (np.arange(len(rows)) - first[rows])
        own = self.own[rows]
        links = np.empty(len(rows), dtype=np.int64)
        links[own] = self.links[at[own]]
        links[~own] = glinks[at[~own]]
        return rows, links


Scalar = Callable[[int, int], list[int]]


def _lookup(t: RoutingTables, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each (u, v): how many links ``u -> v`` there are and the first one's id (-1: none)."""
    key = u * t.n + v
    lo = np.searchsorted(t.pair_key, key, "left")
    hi = np.searchsorted(t.pair_key, key, "right")
    cnt = hi - lo
    link = np.where(cnt > 0, t.pair_link[np.minimum(lo, len(t.pair_link) - 1)] if len(t.pair_link) else -1, -1)
    return cnt, link


def _lookup_last(t: RoutingTables, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """For each (u, v): the highest id of a link ``u -> v`` (-1: none)."""
    key = u * t.n + v
    hi = np.searchsorted(t.pair_key, key, "right")
    ok = (hi > 0) & (t.pair_key[np.maximum(hi - 1, 0)] == key) if len(t.pair_key) else np.zeros(len(key), bool)
    return np.where(ok, t.pair_link[np.maximum(hi - 1, 0)] if len(t.pair_link) else -1, -1)


def _padded(start: np.ndarray, values: list[np.ndarray], owners: np.ndarray, width: int, fill: int) -> list[np.ndarray]:
    """Rows ``owners`` of CSR tables (``start``, each of ``values``) as ``(len(owners), width)``
    matrices padded with ``fill``."""
    lo = start[owners]
    cnt = np.minimum(start[owners + 1] - lo, width)
    col = np.arange(width)
    ok = col[None, :] < cnt[:, None]
    at = np.where(ok, lo[:, None] + col[None, :], 0)
    return [np.where(ok, v[at] if len(v) else fill, fill) for v in values]


def _dist_to_attachments(t: RoutingTables, v: np.ndarray, a: np.ndarray, aw: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``min(UNREACHABLE, min over valid j of dist(v, a_j) + w_j)`` per row (``v``: forwarding
    nodes, one per row; ``a``, ``aw``, ``ok``: the row's attachments, padded)."""
    cv = t.cls[v]
    d = t.class_dist(np.broadcast_to(cv[:, None], a.shape), t.cls[np.maximum(a, 0)])
    d = np.where(v[:, None] == a, 0, d) + aw
    d = np.where(ok, d, _BIG)
    return np.minimum(d.min(axis=1, initial=_BIG), UNREACHABLE) if a.shape[1] else np.full(len(v), UNREACHABLE)


def choices(t: RoutingTables, u: np.ndarray, dst: np.ndarray, scalar: Scalar) -> Choices:
    """The equal-cost next hops of each row (``u != dst``); ``scalar(u, dst)`` gives a row's
    choices where the arrays do not (and raises where there is no route)."""
    r = len(u)
    fallback = np.zeros(r, dtype=bool)
    # -- each destination's attachments and special nodes ---------------------------------------
    ud, dinv = np.unique(dst, return_inverse=True)
    dinv = dinv.reshape(-1)
    nat = t.att_start[ud + 1] - t.att_start[ud]
    m = int(min(MAX_ATTACHMENTS, nat.max(initial=0)))
    fallback |= (nat > MAX_ATTACHMENTS)[dinv]
    a_node, a_w = _padded(t.att_start, [t.att_node, t.att_w], ud, m, -1)
    a_ok = a_node >= 0
    a_cls = np.where(a_ok, t.cls[np.maximum(a_node, 0)], -1)
    dfwd = t.fwd[ud]
    # each attachment's own distance to the destination (0 + its weight, or less through another)
    a_to = np.full(a_node.shape, UNREACHABLE, dtype=np.int64)
    for j in range(m):
        ok = a_ok[:, j]
        if ok.any():
            a_to[ok, j] = _dist_to_attachments(t, a_node[ok, j], a_node[ok], a_w[ok], a_ok[ok])
    # specials: the attachments, and the destination itself when it does not forward
    s_node = np.concatenate([a_node, np.where(dfwd, -1, ud)[:, None]], axis=1)
    s_to = np.concatenate([a_to, np.zeros((len(ud), 1), dtype=np.int64)], axis=1)
    # a destination's signature: its attachments' (class, weight) pairs, sorted
    o = np.lexsort((np.where(a_ok, a_w, -1), a_cls), axis=1) if m else np.zeros((len(ud), 0), dtype=np.int64)
    sig_rows = np.concatenate([np.take_along_axis(a_cls, o, 1), np.take_along_axis(np.where(a_ok, a_w, -1), o, 1)], 1)
    if m:
        sig_u, sig_of = np.unique(sig_rows, axis=0, return_inverse=True)
        sig_of = sig_of.reshape(-1)
    else:
        sig_u, sig_of = np.zeros((1, 0), dtype=np.int64), np.zeros(len(ud), dtype=np.int64)
    sig_cls, sig_w = sig_u[:, :m], sig_u[:, m:]
    sig_ok = sig_cls >= 0
    ns = len(sig_u)
    # -- each (node, signature)'s cheapest groups ------------------------------------------------
    pkey = u * ns + sig_of[dinv]
    up, pinv = np.unique(pkey, return_inverse=True)
    pinv = pinv.reshape(-1)
    pu, ps = up // ns, up % ns
    p_best, p_off, p_cnt, p_own, p_links = _cheapest_groups(t, pu, sig_cls[ps], sig_w[ps], sig_ok[ps], None)
    own_parts: list[np.ndarray] = [p_links]
    own_len = len(p_links)
    gb = p_best[pinv]
    offset = p_off[pinv]
    count = p_cnt[pinv]
    own = p_own[pinv]
    # -- each row's special links -----------------------------------------------------------------
    sn = s_node[dinv]
    s_ok = sn >= 0
    cnt, link = _lookup(t, np.broadcast_to(u[:, None], sn.shape), np.maximum(sn, 0))
    found = s_ok & (cnt > 0)
    fallback |= (s_ok & (cnt > 1)).any(axis=1)
    lw = np.where(found, t.weight[np.maximum(link, 0)], 0)
    sval = np.where(found, lw + s_to[dinv], _BIG)
    sgrp = np.where(found, t.link_grp[np.maximum(link, 0)], -1)
    rs = ps[pinv]
    full = np.zeros(sn.shape, dtype=bool)
    if sn.shape[1] and len(t.grp_lo):  # a group made only of special links has no generic member: skip it
        same = (sgrp[:, :, None] == sgrp[:, None, :]) & (sgrp[:, None, :] >= 0)
        gsize = np.where(sgrp >= 0, t.grp_hi[np.maximum(sgrp, 0)] - t.grp_lo[np.maximum(sgrp, 0)], _BIG)
        full = (sgrp >= 0) & (gsize <= same.sum(axis=2))
        rows = np.flatnonzero(full.any(axis=1))
        if len(rows):
            r_best, r_off, r_cnt, r_own, r_links = _cheapest_groups(
                t, u[rows], sig_cls[rs[rows]], sig_w[rs[rows]], sig_ok[rs[rows]], np.where(full[rows], sgrp[rows], -1)
            )
            gb[rows] = r_best
            offset[rows] = np.where(r_own, r_off + own_len, r_off)
            count[rows] = r_cnt
            own[rows] = r_own
            own_parts.append(r_links)
            own_len += len(r_links)
    # the generic cost of each special link's group
    sgv = np.where(
        sgrp >= 0,
        lw + _class_to_rows(t, np.where(sgrp >= 0, t.cls[np.maximum(sn, 0)], 0), sig_cls[rs], sig_w[rs], sig_ok[rs]),
        _BIG,
    )
    best = np.minimum(gb, sval.min(axis=1, initial=_BIG))
    fallback |= best >= UNREACHABLE  # the scalar router raises the error
    gen_in = gb == best
    spec_at = found & (sval == best[:, None])
    extra = spec_at & ~(gen_in[:, None] & (sgrp >= 0) & ~full & (sgv == best[:, None]))
    fallback |= gen_in & extra.any(axis=1)
    # -- assemble -------------------------------------------------------------------------------
    spec_rows = ~gen_in & ~fallback
    if spec_rows.any():
        rows = np.flatnonzero(spec_rows)
        sl = np.where(spec_at[rows], link[rows], _BIG)
        sl.sort(axis=1)
        c = (sl < _BIG).sum(axis=1)
        flat = sl[sl < _BIG]
        offset[rows] = own_len + np.cumsum(c) - c
        count[rows] = c
        own[rows] = True
        own_parts.append(flat)
        own_len += len(flat)
    if fallback.any():
        rows = np.flatnonzero(fallback)
        lists = [scalar(int(a), int(b)) for a, b in zip(u[rows].tolist(), dst[rows].tolist())]
        c = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        offset[rows] = own_len + np.cumsum(c) - c
        count[rows] = c
        own[rows] = True
        own_parts.append(np.fromiter((x for lst in lists for x in lst), dtype=np.int64, count=int(c.sum())))
    return Choices(offset, count, own, np.concatenate(own_parts))


def _cheapest_groups(
    t: RoutingTables, nodes: np.ndarray, c: np.ndarray, w: np.ndarray, ok: np.ndarray, exclude: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each key (a node, and its destination's attachment classes ``c`` and weights ``w``,
    valid where ``ok``), the cheapest cost of a generic member of one of the node's groups and
    those groups' links: ``(cost, offset, count, own, links)`` -- one group's links lie in
    ``glinks`` (``own`` false), the union of several (ascending) at ``offset`` in ``links``.
    ``exclude``: per key, group ids to skip (-1: none)."""
    k = len(nodes)
    gcount = t.grp_start[nodes + 1] - t.grp_start[nodes]
    row = np.repeat(np.arange(k), gcount)
    gfirst = np.cumsum(gcount) - gcount
    gid = t.grp_start[nodes][row] + (np.arange(len(row)) - gfirst[row])
    gv = t.grp_w[gid] + _class_to(t, t.grp_cls[gid], c[row], w[row], ok[row])
    if exclude is not None and exclude.shape[1]:
        gv = np.where((exclude[row] == gid[:, None]).any(axis=1), _BIG, gv)
    best = np.full(k, _BIG, dtype=np.int64)
    has = gcount > 0
    if len(gv):
        best[has] = np.minimum.reduceat(gv, gfirst[has])
    at_min = (gv == best[row]) & (gv < _BIG)
    nmin = np.bincount(row[at_min], minlength=k)
    off = np.zeros(k, dtype=np.int64)
    cnt = np.zeros(k, dtype=np.int64)
    own = np.zeros(k, dtype=bool)
    one = at_min & (nmin[row] == 1)
    g1 = gid[one]
    off[row[one]] = t.grp_lo[g1]
    cnt[row[one]] = t.grp_hi[g1] - t.grp_lo[g1]
    several = at_min & (nmin[row] > 1)
    if not several.any():
        return best, off, cnt, own, np.zeros(0, dtype=np.int64)
    gs, keys = gid[several], row[several]  # the union of several groups, merged in id order
    size = t.grp_hi[gs] - t.grp_lo[gs]
    lr = np.repeat(keys, size)
    first = np.cumsum(size) - size
    links = t.glinks[np.repeat(t.grp_lo[gs], size) + (np.arange(len(lr)) - np.repeat(first, size))]
    o = np.lexsort((links, lr))
    lr, links = lr[o], links[o]
    which, start, n = np.unique(lr, return_index=True, return_counts=True)
    off[which] = start
    cnt[which] = n
    own[which] = True
    return best, off, cnt, own, links


def _class_to(t: RoutingTables, e: np.ndarray, c: np.ndarray, w: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per row, ``min(UNREACHABLE, min over valid j of T[e, c_j] + w_j)``: the distance from a
    node of class ``e`` that is none of the attachments to the destination."""
    if not c.shape[1]:
        return np.full(len(e), UNREACHABLE, dtype=np.int64)
    d = t.class_dist(np.broadcast_to(e[:, None], c.shape), np.maximum(c, 0)) + w
    d = np.where(ok, d, _BIG)
    return np.minimum(d.min(axis=1), UNREACHABLE)


def _class_to_rows(t: RoutingTables, e: np.ndarray, c: np.ndarray, w: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """:func:`_class_to` for a matrix of classes ``e`` (rows x specials) against each row's
    attachments."""
    if not e.shape[1]:
        return np.zeros(e.shape, dtype=np.int64)
    out = np.empty(e.shape, dtype=np.int64)
    for j in range(e.shape[1]):
        out[:, j] = _class_to(t, e[:, j], c, w, ok)
    return out


def walk(
    t: RoutingTables, src: np.ndarray, dst: np.ndarray, labels: np.ndarray, seed: int, scalar: Scalar
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Route each flow: its links as columns (one array per hop, padded with the link count),
    its length and whether it met a choice of several links on the way."""
    pad = len(t.link_src)
    k = len(src)
    cur = src.copy()
    length = np.zeros(k, dtype=np.int64)
    chose = np.zeros(k, dtype=bool)
    cols: list[np.ndarray] = []
    active = np.flatnonzero(cur != dst)
    while len(active):
        if len(cols) > t.n:  # pragma: no cover - weights are at least 1: shortest paths end
            raise RuntimeError("routing did not reach its destination")
        u, d = cur[active], dst[active]
        c = choices(t, u, d, scalar)
        pick = np.zeros(len(active), dtype=np.int64)
        many = c.count > 1
        if many.any():
            h = mix64_array(src[active[many]], d[many], labels[active[many]], seed, u[many])
            pick[many] = (h % c.count[many].astype(np.uint64)).astype(np.int64)
        link = c.pick(t.glinks, pick)
        col = np.full(k, pad, dtype=np.int64)
        col[active] = link
        cols.append(col)
        chose[active] |= many
        length[active] += 1
        nxt = t.link_dst[link]
        cur[active] = nxt
        active = active[nxt != d]
    return cols, length, chose


def onward(t: RoutingTables, v: np.ndarray, dst: np.ndarray, scalar_onward: Scalar, scalar: Scalar) -> np.ndarray:
    """The links each row's ``v`` carries a flow on by towards ``dst``
    (:meth:`podsim.network.routing.Router._onward`), all rows' together."""
    out: list[np.ndarray] = []
    direct = _lookup_last(t, v, dst)
    out.append(direct[direct >= 0])
    rest = np.flatnonzero(direct < 0)
    if not len(rest):
        return np.concatenate(out)
    v, dst = v[rest], dst[rest]
    deg = t.in_start[dst + 1] - t.in_start[dst]
    big = deg > MAX_IN
    width = int(min(MAX_IN, deg.max(initial=0)))
    (ins,) = _padded(t.in_start, [t.in_src], dst, width, -1)
    got = np.where(ins >= 0, _lookup_last(t, np.broadcast_to(v[:, None], ins.shape), np.maximum(ins, 0)), -1)
    some = (got >= 0).any(axis=1)
    out.append(got[(got >= 0) & ~big[:, None]])
    none = np.flatnonzero(~some & ~big)
    if len(none):
        c = choices(t, v[none], dst[none], scalar)
        out.append(c.expand(t.glinks)[1])
    for i in np.flatnonzero(big).tolist():
        out.append(np.asarray(scalar_onward(int(v[i]), int(dst[i])), dtype=np.int64))
    return np.concatenate(out)


def choice_reads(
    t: RoutingTables, src: np.ndarray, dst: np.ndarray, scalar: Scalar, scalar_onward: Scalar
) -> np.ndarray:
    """The links that adaptive routes from ``src`` to ``dst`` (rows) may read, all rows'
    together (sorted, unique): at every node of every equal-cost path that offers several links,
    those links and the links their far ends carry the flow on by
    (:meth:`podsim.network.routing.Router.adaptive_reads`)."""
    n = t.n
    parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    frontier = unique(src * n + dst)
    while len(frontier):  # level by level; along a route the distance to dst falls: no cycle
        if len(frontier) > _READS_BLOCK:
            parts += [
                choice_reads(t, f // n, f % n, scalar, scalar_onward)
                for f in np.split(frontier, range(_READS_BLOCK, len(frontier), _READS_BLOCK))
            ]
            break
        u, d = frontier // n, frontier % n
        c = choices(t, u, d, scalar)
        rows, links = c.expand(t.glinks)
        v = t.link_dst[links]
        dr = d[rows]
        multi = (c.count > 1)[rows]
        parts.append(links[multi])
        sel = multi & (v != dr)
        if sel.any():
            key = unique(v[sel] * n + dr[sel])
            parts.append(onward(t, key // n, key % n, scalar_onward, scalar))
        frontier = unique(v[v != dr] * n + dr[v != dr])
    return unique(np.concatenate(parts))
