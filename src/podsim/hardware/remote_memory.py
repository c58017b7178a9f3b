"""Remote (disaggregated) memory, as ASTRA-sim's analytical remote memory model.

A transfer of ``b`` bytes takes ``int(latency + b / bandwidth)`` ns.  PER_NPU memory has no
contention; PER_NODE memory is one first-come-first-served channel per node of
``npus_per_node`` NPUs; MEMORY_POOL is one channel for everyone.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import InputError


class RemoteMemory:
    """Times memory loads and stores.  ``schedule(t, fn)`` runs ``fn`` at absolute time t."""

    def __init__(self, memory_type: str, latency_ns: float, bandwidth: float | None,
                 npus_per_node: int | None, now: Callable[[], int],
                 schedule: Callable[[int, Callable[[], None]], None]) -> None:
        self.memory_type = memory_type
        self.latency_ns = latency_ns
        self.bandwidth = bandwidth
        self.npus_per_node = npus_per_node or 1
        self._now = now
        self._schedule = schedule
        self._busy: dict[int, int] = {}

    def duration_ns(self, size: int) -> int:
        assert self.bandwidth is not None
        return int(self.latency_ns + size / self.bandwidth)

    def channel(self, rank: int) -> int | None:
        if self.memory_type == "PER_NODE_MEMORY_EXPANSION":
            return rank // self.npus_per_node
        if self.memory_type == "MEMORY_POOL":
            return 0
        return None

    def issue(self, rank: int, size: int, kind: int, done: Callable[[], None]) -> None:
        if self.memory_type == "NO_MEMORY_EXPANSION":
            raise InputError(f"rank {rank} issues a memory load/store but the remote memory type is "
                             "NO_MEMORY_EXPANSION", where="memory-type")
        now = self._now()
        ch = self.channel(rank)
        dur = self.duration_ns(size)
        if ch is None:
            self._schedule(now + dur, done)
            return
        start = max(now, self._busy.get(ch, 0))
        self._busy[ch] = start + dur
        self._schedule(start + dur, done)
