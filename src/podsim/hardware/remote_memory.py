"""Remote (disaggregated) memory, as ASTRA-sim's analytical remote memory model.

A load or store of ``b`` bytes takes ``int(latency) + int(b / bandwidth)`` ns (bandwidth in
bytes per ns).  PER_NPU memory has no contention; PER_NODE memory is one first-come,
first-served channel per node of ``npus_per_node`` NPUs; MEMORY_POOL is one channel for
everyone.  A request that finds its channel busy waits in a FIFO queue and starts when the
transfer ahead of it ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..errors import InputError

Register = Callable[[int, int, Callable[[], None]], None]
"""``register(rank, delay_ns, fn)``: run ``fn`` after ``delay_ns`` in ``rank``'s event bucket."""


class RemoteMemory:
    """Times memory loads and stores."""

    def __init__(
        self,
        memory_type: str,
        latency_ns: float,
        bandwidth: float | None,
        npus_per_node: int | None,
        num_nodes: int | None,
        register: Register,
    ) -> None:
        self.memory_type = memory_type
        self.latency_ns = int(latency_ns)
        self.bandwidth = bandwidth
        self.npus_per_node = npus_per_node or 1
        self.num_nodes = num_nodes
        self._register = register
        self._busy: dict[int, bool] = {}
        self._pending: dict[int, deque[tuple[int, int, Callable[[], None]]]] = {}

    def duration_ns(self, size: int) -> int:
        """Time of one transfer of ``size`` bytes (ns)."""
        assert self.bandwidth is not None
        return self.latency_ns + int(float(size) / self.bandwidth)

    def channel(self, rank: int) -> int | None:
        if self.memory_type == "PER_NODE_MEMORY_EXPANSION":
            ch = rank // self.npus_per_node
            if self.num_nodes is not None and ch >= self.num_nodes:
                raise InputError(
                    f"rank {rank} is on node {ch} but the remote memory has {self.num_nodes} nodes", where="num-nodes"
                )
            return ch
        if self.memory_type == "MEMORY_POOL":
            return 0
        return None

    def issue(self, rank: int, size: int, kind: int, done: Callable[[], None]) -> None:
        """Start a load/store of ``size`` bytes for ``rank``; ``done()`` when it completes."""
        if self.memory_type == "NO_MEMORY_EXPANSION":
            raise InputError(
                f"rank {rank} issues a memory load/store but the remote memory type is NO_MEMORY_EXPANSION",
                where="memory-type",
            )
        ch = self.channel(rank)
        if ch is None:
            self._register(rank, self.duration_ns(size), done)
        elif self._busy.get(ch):
            self._pending.setdefault(ch, deque()).append((rank, size, done))
        else:
            self._start(ch, rank, size, done)

    def _start(self, ch: int, rank: int, size: int, done: Callable[[], None]) -> None:
        rt = self.duration_ns(size)
        self._busy[ch] = True
        self._register(rank, rt, done)
        self._register(rank, rt, lambda: self._next(ch))

    def _next(self, ch: int) -> None:
        q = self._pending.get(ch)
        if q:
            self._start(ch, *q.popleft())
        else:
            self._busy[ch] = False
