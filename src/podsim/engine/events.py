"""A discrete-event queue in integer nanoseconds.

Events at the same time run in the order they were scheduled (a sequence number breaks
ties), so a run is deterministic bit for bit.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable


class EventQueue:
    """Min-heap of ``(time_ns, seq, callback, arg)``."""

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[object], None], object]] = []
        self._seq = 0
        self.now = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, time_ns: int, callback: Callable[[object], None], arg: object = None) -> None:
        """Run ``callback(arg)`` at absolute time ``time_ns`` (>= now)."""
        if time_ns < self.now:
            raise ValueError(f"event scheduled in the past: {time_ns} < {self.now}")
        seq = self._seq + 1
        self._seq = seq
        heapq.heappush(self._heap, (time_ns, seq, callback, arg))

    def after(self, delay_ns: int, callback: Callable[[object], None], arg: object = None) -> None:
        """Run ``callback(arg)`` ``delay_ns`` from now."""
        self.schedule(self.now + delay_ns, callback, arg)

    def any_before(self, time_ns: int, ignore: tuple[Callable[[object], None], ...] = ()) -> bool:
        """Whether an event other than those whose callback is in ``ignore`` is due before
        ``time_ns`` (a scan of the pending events)."""
        return any(t < time_ns and cb not in ignore for t, _, cb, _ in self._heap)

    def run_with_progress(self, report: Callable[[], None], every_s: float = 1.0) -> int:
        """Like :meth:`run`, calling ``report()`` about every ``every_s`` seconds of wall time."""
        heap = self._heap
        pop = heapq.heappop
        last = time.perf_counter()
        count = 0
        while heap:
            t, _, cb, arg = pop(heap)
            self.now = t
            cb(arg)
            count += 1
            if count & 4095 == 0 and time.perf_counter() - last >= every_s:
                last = time.perf_counter()
                report()
        return self.now

    def run(self, until: int | None = None) -> int:
        """Process events until the queue is empty (or past ``until``); returns the time."""
        heap = self._heap
        pop = heapq.heappop
        while heap:
            if until is not None and heap[0][0] > until:
                break
            t, _, cb, arg = pop(heap)
            self.now = t
            cb(arg)
        return self.now
