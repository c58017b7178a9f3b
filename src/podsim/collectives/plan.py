"""Turning one collective into chunks ("streams") and each chunk into per-dimension phases,
as ASTRA-sim 2.x does.

* chunk size = ``size // preferred-dataset-splits``; for everything but all-gather, a chunk
  smaller than the number of NPUs is inflated to that number (and the collective to
  ``splits * NPUs`` bytes);
* ``baseline``: the same collective on every active dimension in order (all-gather in
  reverse order);
* ``localBWAware`` all-reduce: reduce-scatter up to the last active dimension, all-reduce
  there, all-gather back down;
* the data size carried into the next phase is the previous phase's final size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import InputError
from ..workload.ops import CollectiveKind
from .base import Direction, LogicalRing, PhaseAlgorithm
from .registry import PHASE_ALGORITHMS

SUPPORTED = (
    CollectiveKind.ALL_REDUCE,
    CollectiveKind.REDUCE_SCATTER,
    CollectiveKind.ALL_GATHER,
    CollectiveKind.ALL_TO_ALL,
)


@dataclass(frozen=True)
class Algo:
    """An algorithm choice for one dimension: a name of
    :data:`~podsim.collectives.registry.PHASE_ALGORITHMS` (``ring``, ``direct`` with a window,
    ``halvingDoubling``, ``doubleBinaryTree``), or a ``one*`` variant spanning all dims."""

    name: str
    window: int = -1

    @property
    def spans_all(self) -> bool:
        return self.name.startswith("one")

    @property
    def base(self) -> str:
        if self.spans_all:
            b = self.name[3:]
            return b[0].lower() + b[1:]
        return self.name

    @property
    def phase(self) -> type[PhaseAlgorithm]:
        """The algorithm's class (what it supports, how it makes a phase).

        Raises:
            InputError: for a name no algorithm is registered under."""
        return PHASE_ALGORITHMS.get(self.base)


@dataclass
class LogicalDim:
    """One dimension of the logical topology for one rank: a ring, its algorithm and what the
    algorithm prepared for it (:meth:`PhaseAlgorithm.prepare_dim`: a tree pair)."""

    ring: LogicalRing
    algo: Algo
    prepared: object | None = None


def logical_dims(rank: int, shape: Sequence[int], algos: Sequence[Algo]) -> list[LogicalDim]:
    """The logical dimensions a rank uses for a collective type (ASTRA-sim's
    GeneralComplexTopology): one per listed algorithm; a ``one*`` algorithm makes a single
    ring over all NPUs and ends the list."""
    if len(algos) > len(shape):
        raise InputError(
            f"{len(algos)} algorithms given for a network of {len(shape)} dimensions", where="*-implementation"
        )
    out: list[LogicalDim] = []
    offset = 1
    for d, algo in enumerate(algos):
        if algo.spans_all:
            total = 1
            for s in shape:
                total *= s
            out.append(LogicalDim(LogicalRing(rank, total, rank % total, 1), algo))
            return out
        size = shape[d]
        ring = LogicalRing(rank, size, (rank % (offset * size)) // offset, offset)
        out.append(LogicalDim(ring, algo, algo.phase.prepare_dim(rank, size, offset, d == len(algos) - 1)))
        offset *= size
    return out


def make_phase(kind: CollectiveKind, dim: LogicalDim, data_size: int, direction: Direction) -> PhaseAlgorithm:
    """Instantiate the algorithm of ``dim`` for ``kind`` on ``data_size`` bytes."""
    return dim.algo.phase.for_dim(kind, dim, data_size, direction)


class QueueLevel:
    """Queue allocation for one dimension (ASTRA-sim's QueueLevelHandler)."""

    def __init__(self, first_queue: int, count: int) -> None:
        self.queues = list(range(first_queue, first_queue + count))
        self.allocator = 0
        self.first_allocator = 0
        self.last_allocator = count // 2

    def next(self) -> tuple[int, Direction]:
        n = len(self.queues)
        d = Direction.ANTICLOCKWISE if n > 1 and self.allocator >= n // 2 else Direction.CLOCKWISE
        q = self.queues[self.allocator]
        self.allocator = (self.allocator + 1) % n
        return q, d

    def first(self) -> tuple[int, Direction]:
        q = self.queues[self.first_allocator]
        self.first_allocator += 1
        if self.first_allocator >= len(self.queues) // 2:
            self.first_allocator = 0
        return q, Direction.CLOCKWISE

    def last(self) -> tuple[int, Direction]:
        q = self.queues[self.last_allocator]
        self.last_allocator += 1
        if self.last_allocator >= len(self.queues):
            self.last_allocator = len(self.queues) // 2
        return q, Direction.ANTICLOCKWISE


@dataclass
class PhaseSpec:
    """A planned phase: which queue (dimension queue id), and its algorithm instance."""

    queue: int
    algorithm: PhaseAlgorithm

    @property
    def kind(self) -> CollectiveKind:
        return self.algorithm.kind


@dataclass
class ChunkPlan:
    """All chunks of one collective on one rank."""

    chunks: list[list[PhaseSpec]] = field(default_factory=list)


def chunk_size(size: int, kind: CollectiveKind, splits: int, total_npus: int) -> tuple[int, int]:
    """ASTRA-sim's determine_chunk_size: returns ``(chunk, possibly inflated size)``."""
    chunk = size // splits
    if kind != CollectiveKind.ALL_GATHER and total_npus > chunk:
        chunk = total_npus
        size = splits * chunk
    return chunk, size


def plan_chunks(
    kind: CollectiveKind,
    size: int,
    dims: list[LogicalDim],
    involved: Sequence[bool] | None,
    levels: list[QueueLevel],
    splits: int,
    total_npus: int,
    optimization: str,
) -> list[list[PhaseSpec]]:
    """Split a collective into chunks and plan each chunk's phases (in issue order)."""
    chunk, size = chunk_size(size, kind, splits, total_npus)
    if chunk <= 0:
        raise InputError(
            f"a {kind.label.replace('_', '-')} of {size} bytes cannot be split into {splits} chunks "
            "(ASTRA-sim would loop forever); lower preferred-dataset-splits",
            where="comm_size",
        )
    nd = len(dims)

    def active(d: int) -> bool:
        on = True if involved is None or d >= len(involved) else bool(involved[d])
        return dims[d].ring.size != 1 and on

    mapper = list(range(nd))
    if kind == CollectiveKind.ALL_GATHER:
        mapper.reverse()
    chunks: list[list[PhaseSpec]] = []
    while size > 0:
        size = 0 if chunk > size else size - chunk
        remain = chunk
        phases: list[PhaseSpec] = []

        def add(k: CollectiveKind, d: int, queue: tuple[int, Direction], out: list[PhaseSpec] = phases) -> None:
            nonlocal remain
            alg = make_phase(k, dims[d], remain, queue[1])
            out.append(PhaseSpec(queue[0], alg))
            remain = alg.final_data_size

        if kind != CollectiveKind.ALL_REDUCE or optimization == "baseline":
            for i in range(nd):
                d = mapper[i]
                if active(d):
                    add(kind, d, levels[d].next())
        else:
            last_active = 0
            for i in range(nd):
                if active(mapper[i]):
                    last_active = i
            i = 0
            while i < last_active:
                if active(mapper[i]):
                    add(CollectiveKind.REDUCE_SCATTER, mapper[i], levels[mapper[i]].first())
                i += 1
            while i > 0 and not active(mapper[i]):
                i -= 1
            if active(mapper[i]):
                add(CollectiveKind.ALL_REDUCE, mapper[i], levels[mapper[i]].first())
            i -= 1
            while i >= 0:
                if active(mapper[i]):
                    add(CollectiveKind.ALL_GATHER, mapper[i], levels[mapper[i]].last())
                i -= 1
        if not phases:
            break
        chunks.append(phases)
    return chunks
