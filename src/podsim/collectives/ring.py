"""Ring collectives (ASTRA-sim's ``ring``): each rank talks to its ring neighbours.

All-reduce takes ``2(N-1)`` steps of ``size/N`` bytes, the first ``N-1`` reducing;
reduce-scatter ``N-1`` reducing steps of ``size/N``; all-gather ``N-1`` steps of ``size``
(the input is the shard); all-to-all ``N(N-1)/2`` steps of ``size/N``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InputError
from ..workload.ops import CollectiveKind
from .base import ClosedForm, Direction, LogicalRing, PhaseAlgorithm
from .registry import register_phase

if TYPE_CHECKING:
    from .plan import LogicalDim


@register_phase
class RingPhase(PhaseAlgorithm):
    """One rank's part of a ring phase."""

    name = "ring"
    kinds = frozenset(
        (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL)
    )
    closed_form = ClosedForm.RING
    nccl = "ring"

    @classmethod
    def for_dim(cls, kind: CollectiveKind, dim: LogicalDim, data_size: int, direction: Direction) -> PhaseAlgorithm:
        return cls(kind, dim.ring, data_size, direction)

    def __init__(
        self, kind: CollectiveKind, ring: LogicalRing, data_size: int, direction: Direction = Direction.CLOCKWISE
    ) -> None:
        super().__init__(kind, ring, data_size)
        n = self.n
        self.direction = direction
        self.curr_receiver = ring.receiver(self.id, direction)
        self.curr_sender = ring.sender(self.id, direction)
        if kind == CollectiveKind.ALL_REDUCE:
            self.stream_count = 2 * (n - 1)
            self.final_data_size, self.msg_size = data_size, data_size // n
        elif kind == CollectiveKind.ALL_TO_ALL:
            self.stream_count = (n - 1) * n // 2
            self.final_data_size, self.msg_size = data_size, data_size // n
        elif kind == CollectiveKind.ALL_GATHER:
            self.stream_count = n - 1
            self.final_data_size, self.msg_size = data_size * n, data_size
        elif kind == CollectiveKind.REDUCE_SCATTER:
            self.stream_count = n - 1
            self.final_data_size = self.msg_size = data_size // n
        else:
            label = kind.label.replace("_", "-")
            raise InputError(
                f"ring does not implement {label}; choose another {label}-implementation",
                where=f"{label}-implementation",
            )
