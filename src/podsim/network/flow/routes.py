"""A batch of flows' routes as arrays, for starting many flows in one array operation.

:func:`route_batch` routes every flow of a batch once (through the router's per-flow cache)
and lays the routes out as a padded link matrix.  Under adaptive routing a route with a choice
to make depends on the flow counts at the moment the flow starts, so such flows are marked:
the network routes them one by one, in batch order, after the batch's other flows -- except
that a flow whose fixed route crosses a link some choice reads is placed in order too, so
every choice sees exactly the counts it would see if the flows started one after another.

Units: link ids, ns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..routing import Router


@dataclass(frozen=True)
class RouteBatch:
    """The routes of a batch of flows.

    ``paths``: int64 ``(flows, width)`` link ids, each row padded with ``pad`` (the fabric's
    link count); ``lengths``: links per route; ``latency_ns``: each route's summed link
    latency rounded up (what a flow pays once); ``in_order``: the flows that must be placed
    one by one in batch order (sorted), and ``choice``: which of those the router chooses
    for at start time (adaptive routing; their ``paths`` rows are placeholders); ``reads``:
    the links those choices may read (sorted), so the choices are a function of the flow
    counts there.
    """

    paths: np.ndarray
    lengths: np.ndarray
    latency_ns: np.ndarray
    in_order: np.ndarray
    choice: np.ndarray
    reads: np.ndarray
    pad: int


def path_latency_ns(router: Router, path: tuple[int, ...]) -> int:
    """A route's summed link latency, rounded up to whole ns (0 for an empty route)."""
    if not path:
        return 0
    lat = router.fabric.link_lat
    return int(math.ceil(float(sum(lat[list(path)])) - 1e-9))


def route_batch(router: Router, src: np.ndarray, dst: np.ndarray, labels: np.ndarray,
                latency: dict[tuple[int, ...], int]) -> RouteBatch:
    """Route a batch of flows between fabric nodes (``latency``: the caller's cache of
    :func:`path_latency_ns` per route)."""
    pad = router.fabric.num_links
    k = len(src)
    found, reads = router.batch_routes(src.tolist(), dst.tolist(), labels.tolist())
    is_choice = np.fromiter((r is None for r in found), dtype=bool, count=k)
    routes = [r if r is not None else () for r in found]
    lengths = np.fromiter((len(p) for p in routes), dtype=np.int64, count=k)
    width = int(lengths.max()) if k else 0
    paths = np.full((k, max(width, 1)), pad, dtype=np.int64)
    if k and width:
        rows = np.repeat(np.arange(k), lengths)
        cols = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        paths[rows, cols] = np.fromiter((x for p in routes for x in p), dtype=np.int64, count=len(rows))
    lat = np.zeros(k, dtype=np.int64)
    for i, p in enumerate(routes):
        if p:
            v = latency.get(p)
            if v is None:
                v = latency[p] = path_latency_ns(router, p)
            lat[i] = v
    read = np.asarray(sorted(reads), dtype=np.int64)
    if reads:
        mark = np.zeros(pad + 1, dtype=bool)
        mark[read] = True
        in_order = np.flatnonzero(is_choice | mark[paths].any(axis=1))
    else:
        in_order = np.zeros(0, dtype=np.int64)
    return RouteBatch(paths, lengths, lat, in_order, is_choice[in_order], read, pad)
