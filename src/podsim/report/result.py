"""The result of a simulation: per-rank statistics and (optionally) timelines.

Fields of :class:`RankResult` (all integer nanoseconds):

* ``finish_ns``: when the rank's last op finished;
* ``compute_ns``: time the rank's GPU compute stream was busy (the union of its compute ops);
* ``comm_ns``: time at least one communication op (collective, send/recv) was in flight;
* ``exposed_comm_ns``: ``finish_ns - compute_ns``, as ASTRA-sim reports "exposed
  communication" (time the rank was not computing);
* ``overlap_ns``: time the GPU computed while communication was in flight;
* ``cpu_ns``: host (CPU) op time; ``mem_ns``: time at least one remote memory op was in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from ..arrays import unique
from ..network.fabric import LinkTier


@dataclass(slots=True)
class Slice:
    """One op on a rank's timeline (slotted: a long run keeps millions)."""

    name: str
    stream: str
    start_ns: int
    end_ns: int
    category: str = "compute"  #: compute | comm | cpu | mem | other
    args: dict[str, object] = field(default_factory=dict)


class Timelines(MutableMapping[int, list[Slice]]):
    """Per rank, the slices of its ops, built the first time they are read: a long run has
    millions, and a summary reads one rank's, a trace the first few.  ``of`` maps every rank
    to the rank simulated for it, whose slices ``build`` makes (once, shared by the ranks it
    stands for); each of ``more`` then adds to them (``more(rank_simulated, slices)``).  ``of``
    may be an array (rank ``r``, for ``r`` in ``0 .. len(of) - 1``, is simulated as ``of[r]``):
    a million ranks then take no dict until a rank is set or deleted.  A rank's timeline may be
    set or deleted like a dict's; a copy or a pickle is a plain dict."""

    def __init__(self, of: dict[int, int] | np.ndarray, build: Callable[[int], list[Slice]]) -> None:
        self._of_array: np.ndarray | None = None
        self._of_dict: dict[int, int] | None = None
        if isinstance(of, np.ndarray):
            self._of_array = of
        else:
            self._of_dict = of
        self._build = build
        self._built: dict[int, list[Slice]] = {}
        self._set: dict[int, list[Slice]] = {}
        self.more: list[Callable[[int, list[Slice]], None]] = []

    @property
    def _of(self) -> dict[int, int]:
        """Every rank's simulated rank as a dict (made from the array when first needed)."""
        if self._of_dict is None:
            self._of_dict = dict(enumerate(self._of_array.tolist()))  # type: ignore[union-attr]
            self._of_array = None
        return self._of_dict

    def __getitem__(self, rank: int) -> list[Slice]:
        got = self._set.get(rank)
        if got is not None:
            return got
        q = self.rank_of(rank)
        got = self._built.get(q)
        if got is None:
            got = self._built[q] = self._build(q)
            for add in self.more:
                add(q, got)
        return got

    def rank_of(self, rank: int) -> int:
        """The rank simulated for ``rank``."""
        of = self._of_array
        if of is None:
            return self._of[rank]
        if isinstance(rank, (int, np.integer)) and 0 <= rank < len(of):
            return int(of[rank])
        raise KeyError(rank)

    def simulated_for(self, ranks: Sequence[int]) -> set[int]:
        """The ranks simulated for those of ``ranks`` that have a timeline."""
        of = self._of_array
        if of is None:
            return {self._of[r] for r in ranks if r in self._of}
        a = np.asarray(ranks, dtype=np.int64)
        return set(unique(of[a[(a >= 0) & (a < len(of))]]).tolist())

    def __setitem__(self, rank: int, slices: list[Slice]) -> None:
        self._set[rank] = slices
        if rank not in self:
            self._of[rank] = rank

    def __delitem__(self, rank: int) -> None:
        del self._of[rank]
        self._set.pop(rank, None)

    def __iter__(self) -> Iterator[int]:
        if self._of_array is not None:
            return iter(range(len(self._of_array)))
        return iter(self._of)

    def __len__(self) -> int:
        return len(self._of_array) if self._of_array is not None else len(self._of)

    def __contains__(self, rank: object) -> bool:
        if self._of_array is not None:
            return isinstance(rank, (int, np.integer)) and 0 <= rank < len(self._of_array)
        return rank in self._of

    def __reduce__(self) -> tuple:
        return (dict, (dict(self.items()),))


@dataclass
class Flow:
    """A message from one rank to another, drawn as an arrow between slices."""

    src_rank: int
    dst_rank: int
    send_ns: int
    recv_ns: int
    size_bytes: int
    name: str = "send"


@dataclass
class LinkUse:
    """How a directed link was used (flow backend): ``bytes`` carried, ``busy_ns`` with at
    least one flow, ``peak_flows`` at once, ``bandwidth`` in GB/s (10^9 B/s) per direction,
    ``utilization`` = bytes / (bandwidth x run time)."""

    name: str
    tier: int
    bytes: float
    busy_ns: int
    peak_flows: int
    bandwidth: float
    utilization: float

    def as_dict(self) -> dict[str, object]:

        return {
            "link": self.name,
            "tier": LinkTier(self.tier).name.lower(),
            "bytes": round(self.bytes),
            "busy_ns": self.busy_ns,
            "peak_flows": self.peak_flows,
            "bandwidth_GBps": self.bandwidth,
            "utilization": round(self.utilization, 6),
        }


@dataclass
class Counter:
    """A counter track: ``samples`` of (time ns, value), a step function."""

    name: str
    group: str
    samples: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class RankResult:
    """Per-rank statistics (ns)."""

    rank: int
    finish_ns: int
    compute_ns: int = 0
    comm_ns: int = 0
    exposed_comm_ns: int = 0
    cpu_ns: int = 0
    mem_ns: int = 0
    overlap_ns: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "rank": self.rank,
            "finish_ns": self.finish_ns,
            "compute_ns": self.compute_ns,
            "comm_ns": self.comm_ns,
            "exposed_comm_ns": self.exposed_comm_ns,
            "overlap_ns": self.overlap_ns,
            "cpu_ns": self.cpu_ns,
            "mem_ns": self.mem_ns,
        }


class RankResults(Sequence[RankResult]):
    """Every rank's :class:`RankResult`, where ranks copy the figures of the ranks simulated
    for them: ``simulated`` (one result per simulated rank) and ``of`` (for each rank ``r``,
    the rank simulated for it), so that a million ranks take one array, not a million
    objects.  Reads as the list ``[RankResult(r, <the figures of of[r]>) for r in ranks]``:
    an item is made when read (a new object each time)."""

    def __init__(self, simulated: dict[int, RankResult], of: np.ndarray) -> None:
        self._base = list(simulated.values())
        position = {rank: i for i, rank in enumerate(simulated)}
        ranks = np.asarray(of, dtype=np.int64)
        # each rank's position in _base, through a table over the simulated ranks' numbers
        table = np.full(int(ranks.max()) + 1 if len(ranks) else 0, -1, dtype=np.int64)
        for rank, i in position.items():
            if rank < len(table):
                table[rank] = i
        self._at = table[ranks] if len(ranks) else np.zeros(0, dtype=np.int64)
        if len(ranks) and (self._at < 0).any():
            missing = int(ranks[np.flatnonzero(self._at < 0)[0]])
            raise ValueError(f"rank {missing} stands for other ranks but has no result")
        self._finish = np.array([b.finish_ns for b in self._base], dtype=np.int64)
        #: the simulated results that some rank reads
        self._used = np.flatnonzero(np.bincount(self._at, minlength=len(self._base)))

    def __len__(self) -> int:
        return len(self._at)

    def _make(self, rank: int) -> RankResult:
        b = self._base[self._at[rank]]
        return RankResult(
            rank, b.finish_ns, b.compute_ns, b.comm_ns, b.exposed_comm_ns, b.cpu_ns, b.mem_ns, b.overlap_ns
        )

    @overload
    def __getitem__(self, i: int) -> RankResult: ...

    @overload
    def __getitem__(self, i: slice) -> list[RankResult]: ...

    def __getitem__(self, i: int | slice) -> RankResult | list[RankResult]:
        if isinstance(i, slice):
            return [self._make(r) for r in range(*i.indices(len(self)))]
        n = len(self)
        r = int(i)
        if r < 0:
            r += n
        if not 0 <= r < n:
            raise IndexError(f"rank {i} of {n}")
        return self._make(r)

    def __iter__(self) -> Iterator[RankResult]:
        for r in range(len(self)):
            yield self._make(r)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RankResults, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def finish_ns(self) -> int:
        """The time the last rank finished (ns); 0 without ranks."""
        return int(self._finish[self._used].max()) if len(self._used) else 0

    def last(self) -> RankResult:
        """The first rank (in rank order) of those that finish last."""
        return self._make(int(np.argmax(self._finish[self._at])))

    def classes(self) -> list[tuple[RankResult, np.ndarray]]:
        """Each simulated result that some rank reads, and the ranks that read it (ascending)."""
        order = np.argsort(self._at, kind="stable")
        bounds = np.searchsorted(self._at[order], np.arange(len(self._base) + 1))
        return [(self._base[i], order[bounds[i] : bounds[i + 1]]) for i in self._used.tolist()]


@dataclass
class Result:
    """What a simulation produced.

    Attributes:
        ranks: one :class:`RankResult` per rank, in rank order (a list, or :class:`RankResults`
            where ranks copy simulated ones).
        timelines: per rank, the slices of its ops (empty when not recorded; an engine's are a
            :class:`Timelines`, built as they are read).  Ranks that were simulated once for a
            class of equivalent ranks share the same list object.
        flows: point-to-point messages, for trace arrows (may be empty).
        info: what was simulated (inputs, backend, mode, equivalence classes, wall time).
        notes: things the user should know (dropped dependencies, assumptions).
        links: per-link use on a cluster fabric with the flow backend, busiest first.
        counters: per-link load over time (fraction of line rate), for Perfetto counters.
    """

    ranks: list[RankResult] | RankResults
    timelines: MutableMapping[int, list[Slice]] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    links: list[LinkUse] = field(default_factory=list)  #: busiest first (flow backend)
    counters: list[Counter] = field(default_factory=list)  #: link load tracks (flow backend)
    #: injected faults: what they cost and who waited on whom (docs/outputs.md, ``faults``);
    #: empty when none were injected
    faults: dict[str, object] = field(default_factory=dict)

    @property
    def finish_ns(self) -> int:
        """The time the last rank finished (ns)."""
        if isinstance(self.ranks, RankResults):
            return self.ranks.finish_ns()
        return max((r.finish_ns for r in self.ranks), default=0)

    def last_rank(self) -> RankResult:
        """The rank that finishes last (the first in rank order, where several do).

        Raises:
            ValueError: without ranks."""
        if isinstance(self.ranks, RankResults):
            if not len(self.ranks):
                raise ValueError("a result without ranks has no last rank")
            return self.ranks.last()
        return max(self.ranks, key=lambda r: r.finish_ns)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    def to_dict(self) -> dict[str, object]:
        """The JSON document written by ``--json`` (see docs/outputs.md)."""
        return {
            "podsim_version": self.info.get("podsim_version"),
            "finish_ns": self.finish_ns,
            "gpus": self.num_ranks,
            "num_ranks": self.num_ranks,
            "ranks": [r.as_dict() for r in self.ranks],
            "info": {k: v for k, v in self.info.items() if k != "podsim_version"},
            "notes": list(self.notes),
            "links": [x.as_dict() for x in self.links],
            **({"faults": self.faults} if self.faults else {}),
        }
