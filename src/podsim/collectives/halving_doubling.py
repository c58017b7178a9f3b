"""Halving-doubling collectives (ASTRA-sim's ``halvingDoubling``): partners at distance
1, 2, 4, ... exchange half, a quarter, ... of the data (reduce-scatter), then the reverse
(all-gather).  ``log2(N)`` steps each way, with ASTRA-sim's integer truncations."""

from __future__ import annotations

import math

from ..errors import InputError
from ..workload.ops import CollectiveKind
from .base import ClosedForm, Direction, LogicalRing, PhaseAlgorithm
from .registry import register_phase


@register_phase
class HalvingDoublingPhase(PhaseAlgorithm):
    """One rank's part of a halving-doubling phase."""

    name = "halvingDoubling"
    kinds = frozenset((CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER))
    closed_form = ClosedForm.STEPS

    def __init__(self, kind: CollectiveKind, ring: LogicalRing, data_size: int) -> None:
        super().__init__(kind, ring, data_size)
        n = self.n
        log = math.log2(n)
        if kind == CollectiveKind.ALL_REDUCE:
            self.stream_count = int(2 * log)
            self.final_data_size, self.msg_size = data_size, data_size // 2
            self.rank_offset, self.multiplier = 1, 2.0
        elif kind == CollectiveKind.ALL_GATHER:
            self.stream_count = int(log)
            self.final_data_size, self.msg_size = data_size * n, data_size
            self.rank_offset, self.multiplier = n // 2, 0.5
        elif kind == CollectiveKind.REDUCE_SCATTER:
            self.stream_count = int(log)
            self.final_data_size, self.msg_size = data_size // n, data_size // 2
            self.rank_offset, self.multiplier = 1, 2.0
        else:
            label = kind.label.replace("_", "-")
            raise InputError(
                f"halvingDoubling does not implement {label}; choose another {label}-implementation",
                where=f"{label}-implementation",
            )
        self._log = log
        self._aim()

    def _direction(self) -> Direction:
        if self.rank_offset == 0:
            return Direction.CLOCKWISE
        return Direction.CLOCKWISE if (self.ring.index // self.rank_offset) % 2 == 0 else Direction.ANTICLOCKWISE

    def _aim(self) -> None:
        r = self.ring.receiver_at(self.id, self.rank_offset, self._direction())
        self.curr_receiver = self.curr_sender = r

    def _nonzero_packets(self) -> int:
        return int(self._log - 1 * self.parallel_reduce)

    def _after_release(self) -> None:
        self.rank_offset = int(self.rank_offset * self.multiplier)
        self.msg_size = int(self.msg_size / self.multiplier)
        if self.rank_offset == self.n and self.kind == CollectiveKind.ALL_REDUCE:
            self.multiplier = 0.5
            self.rank_offset = int(self.rank_offset * self.multiplier)
            self.msg_size = int(self.msg_size / self.multiplier)
        self._aim()
