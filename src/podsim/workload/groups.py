"""Process groups: a :class:`Group` (a named set of ranks), and a :class:`GroupTable` of them
kept as blocks of rank rows (numpy), for layouts of up to millions of ranks.

A :class:`GroupTable` is a sequence of :class:`Group`: the same groups,
in the same order, as a list of them, but stored as a few 2-D arrays (one row of ranks per group)
instead of one tuple of Python ints per group.  A layout of 1,048,576 GPUs has about 400,000
TP, DP and PP groups; the engine reads the few its simulated ranks take part in.  A group is
made when first read (and kept); :meth:`GroupTable.rank_index` answers "which group of this name
holds this rank" for every rank at once, in an array.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np


@dataclass(frozen=True)
class Group:
    """A named set of ranks (a communicator).  Several groups may share a name (e.g. every
    tensor-parallel group is called ``"tp"``); each rank belongs to at most one group of a
    given name."""

    name: str
    ranks: tuple[int, ...]


class GroupTable(Sequence[Group]):
    """Groups stored block by block: each block is a name and a ``(groups, ranks per group)``
    integer array whose rows are the groups' ranks, in order."""

    def __init__(self) -> None:
        self._blocks: list[tuple[str, np.ndarray]] = []
        #: index of each block's first group (and, last, the number of groups)
        self._first: list[int] = [0]
        self._made: dict[int, Group] = {}

    def add(self, name: str, rows: np.ndarray) -> None:
        """Append one group of ranks per row of ``rows`` (a 2-D integer array), all called
        ``name``; a block without rows adds nothing."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 2:
            raise ValueError(f"a block of groups is a 2-D array (groups x ranks), got {rows.ndim} dimensions")
        if len(rows) == 0:
            return
        self._blocks.append((name, rows))
        self._first.append(self._first[-1] + len(rows))

    def __len__(self) -> int:
        return self._first[-1]

    @overload
    def __getitem__(self, i: int) -> Group: ...

    @overload
    def __getitem__(self, i: slice) -> list[Group]: ...

    def __getitem__(self, i: int | slice) -> Group | list[Group]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"group {i} of {n}")
        g = self._made.get(i)
        if g is None:
            b = bisect_right(self._first, i) - 1
            name, rows = self._blocks[b]
            g = self._made[i] = Group(name, tuple(rows[i - self._first[b]].tolist()))
        return g

    def __iter__(self) -> Iterator[Group]:
        for b, (name, rows) in enumerate(self._blocks):
            first = self._first[b]
            for j, ranks in enumerate(rows.tolist()):
                g = self._made.get(first + j)
                yield g if g is not None else Group(name, tuple(ranks))

    def names(self) -> list[str]:
        """The group names, each once, in the order of their first block."""
        return list(dict.fromkeys(name for name, _ in self._blocks))

    def rank_index(self, name: str, num_ranks: int) -> np.ndarray | None:
        """For each rank ``0 .. num_ranks - 1``, the index (in this sequence) of the group called
        ``name`` that holds it, -1 where none does; None when a rank is in two groups of that
        name or a group holds a rank outside ``0 .. num_ranks - 1``."""
        index = np.full(num_ranks, -1, dtype=np.int64)
        seen = np.zeros(num_ranks, dtype=np.int64)
        for b, (bname, rows) in enumerate(self._blocks):
            if bname != name:
                continue
            if rows.size and (rows.min() < 0 or rows.max() >= num_ranks):
                return None
            first = self._first[b]
            index[rows] = np.arange(first, first + len(rows), dtype=np.int64)[:, None]
            seen += np.bincount(rows.ravel(), minlength=num_ranks)
        if seen.size and seen.max() > 1:
            return None
        return index
