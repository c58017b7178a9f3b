"""Direct collectives (ASTRA-sim's ``direct`` / ``directK``): each rank sends to every other
rank of the dimension, ``window`` messages at a time (all ``N-1`` if no window)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..workload.ops import CollectiveKind
from .base import ClosedForm, Direction, LogicalRing, PhaseAlgorithm
from .registry import register_phase
from .ring import RingPhase

if TYPE_CHECKING:
    from .plan import LogicalDim


@register_phase
class DirectPhase(RingPhase):
    """One rank's part of a direct phase (ASTRA-sim's AllToAll class)."""

    name = "direct"
    closed_form = ClosedForm.DIRECT  # when its window covers every peer (the engine checks the rest)
    windowed = True
    nccl = "direct"

    @classmethod
    def for_dim(cls, kind: CollectiveKind, dim: LogicalDim, data_size: int, direction: Direction) -> PhaseAlgorithm:
        return cls(kind, dim.ring, data_size, dim.algo.window, direction)

    def __init__(
        self,
        kind: CollectiveKind,
        ring: LogicalRing,
        data_size: int,
        window: int = -1,
        direction: Direction = Direction.CLOCKWISE,
    ) -> None:
        super().__init__(kind, ring, data_size, direction)
        n = self.n
        self.middle_point = n - 1
        self.parallel_reduce = n - 1 if window == -1 else min(window, n - 1)
        if kind == CollectiveKind.ALL_TO_ALL:
            self.stream_count = n - 1

    def _nonzero_packets(self) -> int:
        if not self.ring.local:
            return self.parallel_reduce
        return (self.n - 1) * self.parallel_reduce

    def _after_release(self) -> None:
        r = self.ring.receiver(self.curr_receiver, self.direction)
        if r == self.id:
            r = self.ring.receiver(r, self.direction)
        self.curr_receiver = r
        s = self.ring.sender(self.curr_sender, self.direction)
        if s == self.id:
            s = self.ring.sender(s, self.direction)
        self.curr_sender = s

    def on_general(self) -> None:
        self.free_packets += 1
        if self.kind == CollectiveKind.ALL_REDUCE and self.stream_count <= self.middle_point:
            if self.total_received < self.middle_point:
                return
            for _ in range(self.parallel_reduce):
                self._ready()
            self._iteratable()
        else:
            self._ready()
            self._iteratable()
