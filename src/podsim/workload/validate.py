"""Structural checks of programs: dependencies in range and acyclic."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .program import Program


def check_acyclic(program: Program, use_ctrl: bool = False, source: str | None = None) -> None:
    """Raise :class:`InputError` naming a cycle if the dependency graph has one.

    Uses Kahn's algorithm over data dependencies (and control dependencies if ``use_ctrl``).
    """
    n = len(program)
    indeg = np.diff(program.data_ptr).astype(np.int64)
    ptrs = [(program.data_ptr, program.data_idx)]
    if use_ctrl:
        indeg = indeg + np.diff(program.ctrl_ptr)
        ptrs.append((program.ctrl_ptr, program.ctrl_idx))
    # children lists
    src_all = []
    dst_all = []
    for ptr, idx in ptrs:
        counts = np.diff(ptr)
        dst_all.append(np.repeat(np.arange(n, dtype=np.int64), counts))
        src_all.append(idx.astype(np.int64))
    src = np.concatenate(src_all) if src_all else np.zeros(0, np.int64)
    dst = np.concatenate(dst_all) if dst_all else np.zeros(0, np.int64)
    order = np.argsort(src, kind="stable")
    src_sorted, dst_sorted = src[order], dst[order]
    child_ptr = np.searchsorted(src_sorted, np.arange(n + 1))
    indeg = indeg.copy()
    stack = list(np.flatnonzero(indeg == 0))
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for v in dst_sorted[child_ptr[u] : child_ptr[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    if seen == n:
        return
    cycle = _find_cycle(program, indeg > 0, use_ctrl)
    ids = " -> ".join(str(int(program.node_id[i])) for i in cycle)
    raise InputError(f"dependency cycle among nodes {ids}", source, f"program {program.name!r}")


def _find_cycle(program: Program, candidates: np.ndarray, use_ctrl: bool) -> list[int]:
    """Walk dependencies inside the unresolved set until a node repeats."""
    start = int(np.flatnonzero(candidates)[0])
    path: list[int] = []
    pos: dict[int, int] = {}
    u = start
    while u not in pos:
        pos[u] = len(path)
        path.append(u)
        deps = list(program.data_deps(u))
        if use_ctrl:
            deps += list(program.ctrl_deps(u))
        nxt = [int(d) for d in deps if candidates[d]]
        if not nxt:  # should not happen
            return path
        u = nxt[0]
    cyc = path[pos[u] :] + [u]
    return cyc[::-1]
