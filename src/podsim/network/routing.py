"""Shortest-path routing with ECMP over a :class:`~podsim.network.fabric.Fabric`.

Routes take the fewest hops.  Only forwarding nodes (switches, and GPUs of direct-connect
fabrics) appear inside a route.  Where several next hops are equally short, the router picks
one by hashing ``(src, dst, label, seed, node)``, as a switch's ECMP hash would: the same flow
label always takes the same path, different labels (NCCL channels, queue pairs) spread over
the equal-cost paths, and a different ``seed`` gives another deterministic spread.

Distances between forwarding nodes are computed once (a BFS from each); the distance from a
forwarding node to any destination then follows from the destination's in-links.  Routes are
cached per ``(src, dst, label)``.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .fabric import Fabric

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


class Router:
    """ECMP shortest-path router.

    Args:
        fabric: the fabric to route on.
        seed: the ECMP hash seed (any integer); routes are deterministic for a given seed.
    """

    def __init__(self, fabric: Fabric, seed: int = 0) -> None:
        self.fabric = fabric
        self.seed = int(seed)
        n = fabric.num_nodes
        src = fabric.link_src
        dst = fabric.link_dst
        fwd = fabric.forwards
        self._out: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (link, dst)
        self._in: list[list[int]] = [[] for _ in range(n)]               # source nodes
        for link, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
            self._out[a].append((link, b))
            self._in[b].append(a)
        self._fwd_ids = np.flatnonzero(fwd)
        self._fwd_index = np.full(n, -1, dtype=np.int64)
        self._fwd_index[self._fwd_ids] = np.arange(len(self._fwd_ids))
        self._dist = self._forwarding_distances()
        self._to_cache: dict[int, np.ndarray] = {}
        self._route_cache: dict[tuple[int, int, int], tuple[int, ...]] = {}

    def _forwarding_distances(self) -> np.ndarray:
        """Hop distances between forwarding nodes, travelling through forwarding nodes only."""
        ids = self._fwd_ids.tolist()
        index = self._fwd_index
        k = len(ids)
        dist = np.full((k, k), _UNREACHABLE, dtype=np.int32)
        nbrs = [[int(index[b]) for _, b in self._out[u] if index[b] >= 0] for u in ids]
        for i in range(k):
            row = [-1] * k
            row[i] = 0
            frontier = [i]
            d = 0
            while frontier:
                d += 1
                nxt = []
                for u in frontier:
                    for v in nbrs[u]:
                        if row[v] < 0:
                            row[v] = d
                            nxt.append(v)
                frontier = nxt
            r = np.asarray(row, dtype=np.int32)
            r[r < 0] = _UNREACHABLE
            dist[i] = r
        return dist

    def distances_to(self, dst: int) -> np.ndarray:
        """For every node, hops to ``dst`` (``_UNREACHABLE`` where none); non-forwarding nodes
        other than ``dst`` count as sources only."""
        cached = self._to_cache.get(dst)
        if cached is not None:
            return cached
        n = self.fabric.num_nodes
        out = np.full(n, _UNREACHABLE, dtype=np.int64)
        out[dst] = 0
        preds = [self._fwd_index[w] for w in self._in[dst] if self._fwd_index[w] >= 0]
        if len(self._fwd_ids):
            if preds:
                via = self._dist[:, preds].min(axis=1).astype(np.int64) + 1
            else:
                via = np.full(len(self._fwd_ids), _UNREACHABLE, dtype=np.int64)
            if self._fwd_index[dst] >= 0:
                via[self._fwd_index[dst]] = 0
            out[self._fwd_ids] = np.minimum(via, _UNREACHABLE)
        out[dst] = 0
        self._to_cache[dst] = out
        return out

    def route(self, src: int, dst: int, label: int = 0) -> tuple[int, ...]:
        """The directed links a flow from node ``src`` to node ``dst`` takes (empty if equal).

        Raises:
            InputError: when no route exists.
        """
        key = (src, dst, label)
        cached = self._route_cache.get(key)
        if cached is not None:
            return cached
        if src == dst:
            return ()
        to = self.distances_to(dst)
        fwd = self.fabric.forwards
        path: list[int] = []
        u = src
        while u != dst:
            best = _UNREACHABLE
            cands: list[tuple[int, int]] = []
            for link, v in self._out[u]:
                if v != dst and not fwd[v]:
                    continue
                d = int(to[v])
                if d < best:
                    best, cands = d, [(link, v)]
                elif d == best:
                    cands.append((link, v))
            if best >= _UNREACHABLE or not cands:
                f = self.fabric
                raise InputError(f"no route from {f.node_name[src]} to {f.node_name[dst]} in fabric "
                                 f"{f.name!r}")
            if len(cands) > 1:
                link, u = cands[mix64(src, dst, label, self.seed, u) % len(cands)]
            else:
                link, u = cands[0]
            path.append(link)
        out = tuple(path)
        self._route_cache[key] = out
        return out

    def gpu_route(self, src_rank: int, dst_rank: int, label: int = 0) -> tuple[int, ...]:
        """:meth:`route` between GPU ranks."""
        g = self.fabric.gpus
        return self.route(int(g[src_rank]), int(g[dst_rank]), label)

    def path_latency_ns(self, path: tuple[int, ...]) -> float:
        """Sum of the links' latencies (ns)."""
        lat = self.fabric.link_lat
        return float(sum(lat[i] for i in path))
