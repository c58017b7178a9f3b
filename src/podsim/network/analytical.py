"""Congestion-unaware analytical network (ASTRA-sim 2.x semantics).

A message of ``size`` bytes from ``src`` to ``dst`` is charged to the first dimension in
which their coordinates differ, and takes ``int(hops * latency + size / bandwidth)`` ns, where
``hops`` is 1 (FullyConnected), 2 (Switch) or the shorter ring distance (Ring).  Links never
contend.  The truncation to integer ns happens once, on the sum, as ASTRA-sim does.
"""

from __future__ import annotations

from .topology import Topology


class AnalyticalNetwork:
    """Closed-form message delays over a :class:`Topology`."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._shape = topology.shape
        self._dims = topology.dims
        self._cache: dict[tuple[int, int, int], int] = {}
        self._pair_cache: dict[tuple[int, int, int], int] = {}

    @property
    def num_npus(self) -> int:
        return self.topology.num_npus

    def hops_and_dim(self, src: int, dst: int) -> tuple[int, int]:
        """(hops, dimension) a message from ``src`` to ``dst`` is charged."""
        for d, dim in enumerate(self._dims):
            a, b = src % dim.npus, dst % dim.npus
            if a != b:
                return dim.hops(a, b), d
            src //= dim.npus
            dst //= dim.npus
        raise ValueError("source and destination are the same NPU")

    def delay_ns(self, src: int, dst: int, size: int) -> int:
        """Time from send to arrival, integer ns."""
        key0 = (src, dst, size)
        v = self._pair_cache.get(key0)
        if v is not None:
            return v
        v = self._pair_cache[key0] = self._delay(src, dst, size)
        return v

    def _delay(self, src: int, dst: int, size: int) -> int:
        hops, d = self.hops_and_dim(src, dst)
        key = (d, hops, size)
        v = self._cache.get(key)
        if v is None:
            dim = self._dims[d]
            v = int(hops * dim.latency_ns + float(size) / dim.bandwidth)
            self._cache[key] = v
        return v
