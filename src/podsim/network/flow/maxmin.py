"""Max-min fair rates by progressive filling.

Every flow's rate rises at the same pace until some link is full; the flows crossing a full
link are frozen at the level reached, the others keep rising.  The result is the unique
max-min fair allocation: no flow can get more without taking from a flow that has no more.

Input is the flow/link incidence in CSR form: flow ``f`` crosses links
``links[indptr[f]:indptr[f+1]]`` (local link indices ``0..num_links-1``).  Units are the
caller's (bytes per ns throughout podsim).  Each iteration is a few numpy calls over the
(flow, link) pairs, so the cost is O(levels x pairs); symmetric collectives have one or two
levels.
"""

from __future__ import annotations

import math

import numpy as np


def max_min_rates(
    indptr: np.ndarray, links: np.ndarray, capacity: np.ndarray, flow_cap: np.ndarray | None = None
) -> np.ndarray:
    """Max-min fair rate of each flow.

    Args:
        indptr: int array, ``len = flows + 1``.
        links: int array of local link indices, one run per flow.
        capacity: float array, capacity of each local link.
        flow_cap: optional per-flow upper bound on the rate (``inf`` for none).

    Returns:
        float array of rates, one per flow.  A flow that crosses no link and has no cap gets
        ``inf``.
    """
    nflows = len(indptr) - 1
    rates = np.zeros(nflows)
    if nflows == 0:
        return rates
    counts = np.diff(indptr)
    owner = np.repeat(np.arange(nflows), counts)
    remaining = np.asarray(capacity, dtype=np.float64).copy()
    nlinks = len(remaining)
    active = np.ones(nflows, dtype=bool)
    cap = None if flow_cap is None else np.asarray(flow_cap, dtype=np.float64)
    pair_flow = owner
    pair_link = np.asarray(links, dtype=np.int64)
    level = 0.0
    while True:
        users = np.bincount(pair_link, minlength=nlinks)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(users > 0, remaining / np.maximum(users, 1), np.inf)
        step = float(share.min()) if nlinks else np.inf
        if cap is not None:
            step = min(step, float((cap[active] - level).min()) if active.any() else np.inf)
        if not np.isfinite(step):
            rates[active] = np.inf
            break
        step = max(step, 0.0)
        level += step
        remaining -= step * users
        # links that are now full (relative tolerance against rounding)
        full = (users > 0) & (remaining <= 1e-9 * np.maximum(capacity, 1e-300))
        frozen_pairs = full[pair_link]
        frozen = np.zeros(nflows, dtype=bool)
        frozen[pair_flow[frozen_pairs]] = True
        if cap is not None:
            frozen |= active & np.isfinite(cap) & (cap - level <= 1e-12 * np.maximum(cap, 1.0))
        frozen &= active
        if not frozen.any():  # numerical corner: freeze the tightest link's flows
            tight = int(np.argmin(np.where(users > 0, remaining, np.inf)))
            frozen[pair_flow[pair_link == tight]] = True
            frozen &= active
        rates[frozen] = level
        active &= ~frozen
        if not active.any():
            break
        keep = active[pair_flow]
        pair_flow = pair_flow[keep]
        pair_link = pair_link[keep]
        if len(pair_link) == 0:
            if cap is not None:
                rates[active] = cap[active]
            else:
                rates[active] = np.inf
            break
    return rates


def max_min_rates_small(
    indptr: list[int], links: list[int], capacity: list[float], flow_cap: list[float] | None = None
) -> list[float]:
    """:func:`max_min_rates` for a handful of flows, in plain Python: the same arithmetic in the
    same order, so the same floats (no numpy call overhead, which dominates below a few dozen
    flows).  Arguments as :func:`max_min_rates`, as lists."""
    nflows = len(indptr) - 1
    rates = [0.0] * nflows
    if nflows == 0:
        return rates
    nlinks = len(capacity)
    remaining = [float(c) for c in capacity]
    tol = [1e-9 * max(float(c), 1e-300) for c in capacity]
    pairs = [(f, links[k]) for f in range(nflows) for k in range(indptr[f], indptr[f + 1])]
    active = [True] * nflows
    inf = math.inf
    level = 0.0
    while True:
        users = [0] * nlinks
        for _, link in pairs:
            users[link] += 1
        step = inf
        for link in range(nlinks):
            u = users[link]
            if u > 0:
                share = remaining[link] / u
                if share < step:
                    step = share
        if flow_cap is not None:
            gap = inf
            for f in range(nflows):
                if active[f]:
                    g = flow_cap[f] - level
                    if g < gap:
                        gap = g
            step = min(step, gap)
        if not math.isfinite(step):
            for f in range(nflows):
                if active[f]:
                    rates[f] = inf
            break
        step = max(step, 0.0)
        level += step
        for link in range(nlinks):
            remaining[link] -= step * users[link]
        full = [users[link] > 0 and remaining[link] <= tol[link] for link in range(nlinks)]
        frozen = [False] * nflows
        for f, link in pairs:
            if full[link]:
                frozen[f] = True
        if flow_cap is not None:
            for f in range(nflows):
                c = flow_cap[f]
                if active[f] and math.isfinite(c) and c - level <= 1e-12 * max(c, 1.0):
                    frozen[f] = True
        frozen = [a and b for a, b in zip(frozen, active)]
        if not any(frozen):  # numerical corner: freeze the tightest link's flows
            tight, best = 0, inf
            for link in range(nlinks):
                if users[link] > 0 and remaining[link] < best:
                    tight, best = link, remaining[link]
            for f, link in pairs:
                if link == tight and active[f]:
                    frozen[f] = True
        for f in range(nflows):
            if frozen[f]:
                rates[f] = level
                active[f] = False
        if not any(active):
            break
        pairs = [(f, link) for f, link in pairs if active[f]]
        if not pairs:
            for f in range(nflows):
                if active[f]:
                    rates[f] = flow_cap[f] if flow_cap is not None else inf
            break
    return rates
