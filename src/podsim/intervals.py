"""Sets of time intervals ``[start, end)`` in integer ns, as sorted, disjoint lists: what the
reports measure timelines with (busy time, overlap, exposed communication).  Many intervals
at once (an engine's ops) are measured as numpy arrays by :func:`union_length_of`."""

from __future__ import annotations

import bisect

import numpy as np

Spans = list[tuple[int, int]]


def merged(spans: Spans) -> Spans:
    """The union of ``spans`` as sorted, disjoint, non-empty intervals (touching ones joined)."""
    out: Spans = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        elif b > a:
            out.append((a, b))
    return out


def length(spans: Spans) -> int:
    """Total length of disjoint ``spans``."""
    return sum(b - a for a, b in spans)


def union_length(spans: Spans) -> int:
    """Length of the union of any ``spans``."""
    return length(merged(spans))


def union_length_of(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the intervals ``[starts[i], ends[i])`` (integer ns arrays of
    equal length, in any order): :func:`union_length` in numpy, for many intervals.  Sorted by
    start, an interval adds what it reaches past the furthest end before it."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    a, b = starts[order], ends[order]
    reach = np.maximum.accumulate(b)
    covered = np.empty_like(reach)
    covered[0] = a[0]
    np.maximum(a[1:], reach[:-1], out=covered[1:])
    return int(np.clip(b - covered, 0, None).sum())


def subtract(spans: Spans, holes: Spans) -> Spans:
    """Disjoint sorted ``spans`` less disjoint sorted ``holes``."""
    out: Spans = []
    j = 0
    for a, b in spans:
        while j < len(holes) and holes[j][1] <= a:
            j += 1
        k, cur = j, a
        while k < len(holes) and holes[k][0] < b:
            if holes[k][0] > cur:
                out.append((cur, holes[k][0]))
            cur = max(cur, holes[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def clip(a: int, b: int, spans: Spans, starts: list[int] | None = None) -> Spans:
    """The parts of disjoint sorted ``spans`` inside ``[a, b)``; ``starts`` (their start times)
    may be given to save building it on every call."""
    starts = starts if starts is not None else [s for s, _ in spans]
    out: Spans = []
    j = max(bisect.bisect_right(starts, a) - 1, 0)
    while j < len(spans) and spans[j][0] < b:
        lo, hi = max(a, spans[j][0]), min(b, spans[j][1])
        if hi > lo:
            out.append((lo, hi))
        j += 1
    return out
