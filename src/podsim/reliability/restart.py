"""What a failure costs besides the lost work: the restart.

A restart is detection (noticing the failure: an immediate crash, or a hang caught by the
collective watchdog's timeout), rescheduling (draining and swapping the failed node for a
healthy one -- only for kinds whose part must be replaced, :attr:`FailureKind.replace`; hot
spares shorten it), warm-up (starting the processes, forming the communicators, loading
data) and restoring the last checkpoint (:class:`~podsim.reliability.checkpoint.CheckpointCost`),
plus, with asynchronous checkpoints, their durability lag (a failure within it falls back one
checkpoint more: on average one lag more of lost work per failure).

The mean over kinds, weighted by their rates, is the restart cost of the goodput model
(a failure's kind does not depend on when it strikes, so the mean is exact in expectation).
Times are float seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checkpoint import CheckpointCost
from .rates import Reliability


@dataclass(frozen=True)
class RestartTimes:
    """The parts of a restart, in seconds (each >= 0)."""

    detect_s: float
    reschedule_s: float
    warmup_s: float


def restart_by_kind(times: RestartTimes, ckpt: CheckpointCost, reliability: Reliability) -> dict[str, float]:
    """Each kind's restart cost (s): detection, rescheduling if its part is replaced, warm-up,
    the restore and the async lag."""
    common = times.detect_s + times.warmup_s + ckpt.restore_s + ckpt.lag_s
    return {n: common + (times.reschedule_s if k.replace else 0.0) for n, k in reliability.kinds.items()}


def mean_restart_s(by_kind: dict[str, float], rates_per_s: dict[str, float]) -> float:
    """The rate-weighted mean of ``by_kind`` (the plain mean when no kind fails)."""
    lam = sum(rates_per_s.values())
    if lam <= 0:
        return sum(by_kind.values()) / max(len(by_kind), 1)
    return sum(by_kind[k] * r for k, r in rates_per_s.items()) / lam
