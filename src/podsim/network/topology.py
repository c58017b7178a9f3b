"""Multi-dimensional topologies built from basic blocks (ASTRA-sim's taxonomy).

A :class:`Topology` is the Cartesian product of :class:`Dimension` blocks.  An NPU id is a
mixed-radix number with dimension 0 varying fastest: for dims ``[4, 2]``, NPU 5 sits at
coordinates ``(1, 1)``.

Units: bandwidth in bytes per nanosecond (one direction of one link), latency in ns per hop.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import InputError


class BlockKind(str, Enum):
    """The shape of one dimension."""

    RING = "Ring"  #: bidirectional ring; a message takes the shorter way
    FULLY_CONNECTED = "FullyConnected"  #: a direct link between every pair: 1 hop
    SWITCH = "Switch"  #: every NPU on one switch: 2 hops (up and down)


@dataclass(frozen=True)
class Dimension:
    """One dimension: ``npus`` NPUs joined as ``kind``."""

    kind: BlockKind
    npus: int
    bandwidth: float  #: bytes per ns, per link per direction
    latency_ns: float  #: per hop

    def hops(self, a: int, b: int) -> int:
        """Hops between positions ``a`` and ``b`` (0 if equal)."""
        if a == b:
            return 0
        if self.kind is BlockKind.RING:
            d = abs(a - b)
            return min(d, self.npus - d)
        if self.kind is BlockKind.FULLY_CONNECTED:
            return 1
        return 2

    def distance_histogram(self) -> dict[int, int]:
        """For one position, how many peers lie at each hop count (the same for every
        position: each block is vertex-transitive)."""
        hist: dict[int, int] = {}
        for b in range(1, self.npus):
            h = self.hops(0, b)
            hist[h] = hist.get(h, 0) + 1
        return hist


@dataclass(frozen=True)
class Topology:
    """A product of dimensions."""

    dims: tuple[Dimension, ...]

    def __post_init__(self) -> None:
        if not self.dims:
            raise InputError("a topology needs at least one dimension")

    @property
    def num_npus(self) -> int:
        """Total NPUs: the product of the dimension sizes."""
        n = 1
        for d in self.dims:
            n *= d.npus
        return n

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.npus for d in self.dims)

    def coords(self, npu: int) -> tuple[int, ...]:
        """Mixed-radix coordinates of ``npu`` (dimension 0 fastest)."""
        out = []
        for d in self.dims:
            out.append(npu % d.npus)
            npu //= d.npus
        return tuple(out)

    def npu_at(self, coords: tuple[int, ...]) -> int:
        """Inverse of :meth:`coords`."""
        npu = 0
        stride = 1
        for c, d in zip(coords, self.dims):
            npu += c * stride
            stride *= d.npus
        return npu

    def stride(self, dim: int) -> int:
        """Distance in NPU ids between neighbours along ``dim``."""
        s = 1
        for d in self.dims[:dim]:
            s *= d.npus
        return s

    def first_differing_dim(self, src: int, dst: int) -> int:
        """The lowest dimension in which ``src`` and ``dst`` differ (-1 if equal)."""
        for i, d in enumerate(self.dims):
            if src % d.npus != dst % d.npus:
                return i
            src //= d.npus
            dst //= d.npus
        return -1
