"""A batch of flows' routes as arrays, for starting many flows in one array operation.

:func:`route_batch` routes every flow of a batch in arrays (the router's
:meth:`~podsim.network.routing.Router.batch_paths`) and lays the routes out as a padded link
matrix, with each route's latency summed in arrays too.  Under adaptive routing a route with a choice
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


def route_batch(
    router: Router, src: np.ndarray, dst: np.ndarray, labels: np.ndarray, latency: dict[tuple[int, ...], int]
) -> RouteBatch:
    """Route a batch of flows between fabric nodes (``latency``: the caller's cache of
    :func:`path_latency_ns` per route, for routes taken one by one later; the batch's own are
    summed in arrays)."""
    pad = router.fabric.num_links
    paths, lengths, is_choice, read = router.batch_paths(src, dst, labels)
    lat = np.ceil(paths_latency(router, paths) - 1e-9).astype(np.int64)
    if len(read):
        mark = np.zeros(pad + 1, dtype=bool)
        mark[read] = True
        in_order = np.flatnonzero(is_choice | mark[paths].any(axis=1))
    else:
        in_order = np.zeros(0, dtype=np.int64)
    return RouteBatch(paths, lengths, lat, in_order, is_choice[in_order], read, pad)


def paths_latency(router: Router, paths: np.ndarray) -> np.ndarray:
    """Each row's summed link latency (ns, float), added link by link from the first as
    :func:`path_latency_ns` adds them (rows of link ids padded with the link count)."""
    fab = router.fabric
    kept = fab.derived.get("link_lat_padded")
    if kept is None or kept[0] is not fab.link_lat:  # a copy of every link's latency, once per fabric
        kept = fab.derived["link_lat_padded"] = (fab.link_lat, np.append(fab.link_lat, 0.0))
    lat = kept[1]
    out = np.zeros(len(paths), dtype=np.float64)
    for j in range(paths.shape[1]):
        out += lat[paths[:, j]]
    return out


def place_in_order(
    router: Router,
    rb: RouteBatch,
    src: list[int],
    dst: list[int],
    labels: list[int],
    count: list[int],
    counted: list[bool],
    latency: dict[tuple[int, ...], int],
) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """Route a batch's choosing flows one by one in batch order, as if its flows started one
    after another: ``count`` (flows per link, updated in place) must already hold the flows no
    choice can see; the batch's other flows are counted as they start (``counted``: those that
    carry bytes).  Returns the routes, their latencies and the links whose count changed."""
    paths = rb.paths.copy()
    lat = rb.latency_ns.copy()
    touched: set[int] = set()
    for i, chosen in zip(rb.in_order.tolist(), rb.choice.tolist()):
        if chosen:
            path = router.route(src[i], dst[i], labels[i], count)
            if len(path) > paths.shape[1]:
                paths = np.concatenate(
                    [paths, np.full((len(paths), len(path) - paths.shape[1]), rb.pad, dtype=np.int64)], axis=1
                )
            paths[i, : len(path)] = path
            v = latency.get(path)
            if v is None:
                v = latency[path] = path_latency_ns(router, path)
            lat[i] = v
        else:
            row = paths[i]
            path = tuple(row[row != rb.pad].tolist())
        if counted[i]:
            for link in path:
                count[link] += 1
            touched.update(path)
    return paths, lat, touched
