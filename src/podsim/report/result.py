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

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field

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
    stands for); each of ``more`` then adds to them (``more(rank_simulated, slices)``).  A
    rank's timeline may be set or deleted like a dict's; a copy or a pickle is a plain dict."""

    def __init__(self, of: dict[int, int], build: Callable[[int], list[Slice]]) -> None:
        self._of = of
        self._build = build
        self._built: dict[int, list[Slice]] = {}
        self._set: dict[int, list[Slice]] = {}
        self.more: list[Callable[[int, list[Slice]], None]] = []

    def __getitem__(self, rank: int) -> list[Slice]:
        got = self._set.get(rank)
        if got is not None:
            return got
        q = self._of[rank]
        got = self._built.get(q)
        if got is None:
            got = self._built[q] = self._build(q)
            for add in self.more:
                add(q, got)
        return got

    def rank_of(self, rank: int) -> int:
        """The rank simulated for ``rank``."""
        return self._of[rank]

    def __setitem__(self, rank: int, slices: list[Slice]) -> None:
        self._set[rank] = slices
        if rank not in self._of:
            self._of[rank] = rank

    def __delitem__(self, rank: int) -> None:
        del self._of[rank]
        self._set.pop(rank, None)

    def __iter__(self) -> Iterator[int]:
        return iter(self._of)

    def __len__(self) -> int:
        return len(self._of)

    def __contains__(self, rank: object) -> bool:
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


@dataclass
class Result:
    """What a simulation produced.

    Attributes:
        ranks: one :class:`RankResult` per rank, in rank order.
        timelines: per rank, the slices of its ops (empty when not recorded; an engine's are a
            :class:`Timelines`, built as they are read).  Ranks that were simulated once for a
            class of equivalent ranks share the same list object.
        flows: point-to-point messages, for trace arrows (may be empty).
        info: what was simulated (inputs, backend, mode, equivalence classes, wall time).
        notes: things the user should know (dropped dependencies, assumptions).
        links: per-link use on a cluster fabric with the flow backend, busiest first.
        counters: per-link load over time (fraction of line rate), for Perfetto counters.
    """

    ranks: list[RankResult]
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
        return max((r.finish_ns for r in self.ranks), default=0)

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
