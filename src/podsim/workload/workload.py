"""A workload: programs, the rank -> program map, and process groups."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .groups import Group, GroupTable
from .program import Program


@dataclass(eq=False)
class Workload:
    """What every rank runs.

    Attributes:
        programs: distinct programs.
        rank_program: for each rank, the index of its program in ``programs``.
        groups: process groups (a list, or a :class:`~podsim.workload.groups.GroupTable` for
            layouts of many ranks); an op's group key is resolved per rank with :meth:`group_of`.
        name: a label for reports.
    """

    programs: list[Program]
    rank_program: np.ndarray
    groups: Sequence[Group] = field(default_factory=list)
    name: str = "workload"
    #: optional: for each rank, the rank whose behaviour it provably shares (a generator that
    #: knows its layout is regular says so); engines may simulate only the representatives
    representatives: np.ndarray | None = None
    #: optional: a label for each rank (its coordinates in a parallel layout, ``pp=0 dp=3 tp=1``),
    #: for traces and reports
    rank_labels: list[str] | None = None
    _index: dict[tuple[str, int], int] = field(default_factory=dict, init=False, repr=False)
    #: a group table's index: per group name, each rank's group (-1: none), see :meth:`group_of`
    _rank_index: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.rank_program = np.asarray(self.rank_program, dtype=np.int32)
        if isinstance(self.groups, GroupTable):
            n = len(self.rank_program)
            for name in self.groups.names():
                index = self.groups.rank_index(name, n)
                if index is None:  # a rank in two groups, or beyond the ranks: checked (and said) below
                    self._rank_index.clear()
                    break
                self._rank_index[name] = index
            else:
                return
        for gi, g in enumerate(self.groups):
            for r in g.ranks:
                key = (g.name, r)
                if key in self._index:
                    raise InputError(f"rank {r} is in two groups named {g.name!r}", where="groups")
                self._index[key] = gi

    @property
    def num_ranks(self) -> int:
        """Number of ranks."""
        return len(self.rank_program)

    def program_of(self, rank: int) -> Program:
        """The program rank ``rank`` runs."""
        return self.programs[self.rank_program[rank]]

    def group_of(self, key: str, rank: int) -> Group | None:
        """The group called ``key`` that contains ``rank``; None if there is none."""
        if self._rank_index:
            index = self._rank_index.get(key)
            if index is None or not 0 <= rank < len(index) or index[rank] < 0:
                return None
            return self.groups[int(index[rank])]
        gi = self._index.get((key, rank))
        return None if gi is None else self.groups[gi]

    def total_ops(self) -> int:
        """Ops summed over ranks (not over distinct programs)."""
        counts = np.array([len(p) for p in self.programs], dtype=np.int64)
        return int(counts[self.rank_program].sum()) if len(self.rank_program) else 0


def dedupe_programs(per_rank: Sequence[Program], include_ids: bool = True) -> tuple[list[Program], np.ndarray]:
    """Share programs between ranks whose programs are identical.

    Returns the distinct programs and the rank -> program index array.
    """
    seen: dict[str, int] = {}
    programs: list[Program] = []
    mapping = np.empty(len(per_rank), dtype=np.int32)
    for r, p in enumerate(per_rank):
        sig = p.signature(include_ids=include_ids)
        if sig not in seen:
            seen[sig] = len(programs)
            programs.append(p)
        mapping[r] = seen[sig]
    return programs, mapping


def groups_from_mapping(mapping: dict[str, Iterable[int]]) -> list[Group]:
    """Build groups from ``{name: ranks}`` (each name one group)."""
    return [Group(str(k), tuple(int(r) for r in v)) for k, v in mapping.items()]
