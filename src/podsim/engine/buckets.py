"""ASTRA-sim's per-rank event buckets on top of the global event queue.

Each rank keeps a list of callbacks per absolute tick.  The first callback registered for a
tick schedules one global event at that tick, which runs the rank's whole list in order
(callbacks added to the list while it runs are run too).  This reproduces ASTRA-sim's
same-tick ordering exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from .events import EventQueue


class RankBuckets:
    """The event buckets of one rank."""

    __slots__ = ("queue", "_lists")

    def __init__(self, queue: EventQueue) -> None:
        self.queue = queue
        self._lists: dict[int, list[Callable[[], None]]] = {}

    def register(self, delay_ns: int, fn: Callable[[], None]) -> None:
        """Run ``fn()`` ``delay_ns`` from now, in this rank's bucket for that tick."""
        q = self.queue
        t = q.now + delay_ns
        lists = self._lists
        lst = lists.get(t)
        if lst is None:
            lists[t] = [fn]
            q.schedule(t, self._flush, t)
        else:
            lst.append(fn)

    def crowded(self) -> list[Callable[[], None]] | None:
        """This rank's callbacks for the tick running now, when there is more than one; else None."""
        lst = self._lists.get(self.queue.now)
        return lst if lst is not None and len(lst) > 1 else None

    def _flush(self, t: object) -> None:
        lst = self._lists[t]  # type: ignore[index]
        i = 0
        while i < len(lst):
            lst[i]()
            i += 1
        del self._lists[t]  # type: ignore[arg-type]
