"""Capacity search: the highest request rate whose run meets the SLOs (Vidur-Search's binary
search on the arrival rate).

A rate *meets* the SLOs when its run's SLO attainment is at least ``target`` (e.g. 0.99: 99% of
requests meet both the TTFT and the TPOT SLO).  The search first brackets the capacity --
doubling the rate from ``start_qps`` while it meets, or halving it while it does not -- then
bisects the bracket until it is within ``rel_tol`` of its upper end or ``iterations`` runs have
been spent.  It assumes attainment falls as the rate rises (true of queueing, up to the noise of
one seeded workload).  Each run's workload comes from ``run(qps)``: the same requests re-timed
to the rate (:func:`~.requests.with_poisson_arrivals`, or a generator's spec at that rate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import InputError
from .metrics import LLMServeResult

#: the most doublings or halvings spent bracketing the capacity
MAX_BRACKET_STEPS = 24


@dataclass
class Capacity:
    """The search's answer.

    Attributes:
        qps: the highest rate found to meet the SLOs (requests/s), 0 if even the lowest tried did not.
        attainment: that run's SLO attainment.
        upper_qps: the lowest rate found not to meet them (None if every rate tried met them).
        result: that run's result (None when no rate met them).
        probes: every (rate, attainment) tried, in order.
        bound: ``estimate`` (the run at ``qps`` reached a steady state) or ``upper`` (it ended
            before its queues filled: its attainment is optimistic, the capacity at most ``qps``).
    """

    qps: float
    attainment: float | None
    upper_qps: float | None
    result: LLMServeResult | None
    probes: list[tuple[float, float]] = field(default_factory=list)
    bound: str = "estimate"

    def to_dict(self) -> dict[str, object]:
        """``capacity_qps``, ``capacity_bound``, ``attainment``, ``upper_qps``, ``probes: [{qps,
        slo_attainment}]`` and the best run's document under ``result``."""
        return {
            "capacity_qps": self.qps,
            "capacity_bound": self.bound,
            "attainment": self.attainment,
            "upper_qps": self.upper_qps,
            "probes": [{"qps": q, "slo_attainment": a} for q, a in self.probes],
            "result": self.result.to_dict() if self.result is not None else None,
        }


def find_capacity(
    run: Callable[[float], LLMServeResult],
    target: float = 0.99,
    start_qps: float = 1.0,
    iterations: int = 12,
    rel_tol: float = 0.02,
    progress: Callable[[int, int], None] | None = None,
) -> Capacity:
    """Binary-search the highest rate whose run meets the SLOs (the module docstring).

    Args:
        run: the simulation at a rate (requests/s).
        target: the share of requests that must meet the SLOs (0 to 1).
        start_qps: the first rate tried (> 0).
        iterations: the most bisection runs after the bracket is found.
        rel_tol: stop bisecting once the bracket is narrower than this share of its upper end.
        progress: called with (runs done, the most runs) after each run.

    Raises:
        InputError: for a target outside (0, 1], a rate <= 0, or runs without SLOs.
    """
    if not 0 < target <= 1:
        raise InputError(f"the SLO attainment target must be in (0, 1], got {target}", where="--capacity-target")
    if not start_qps > 0:
        raise InputError(f"the first rate must be > 0, got {start_qps}")
    probes: list[tuple[float, float]] = []
    best: list[LLMServeResult] = []  # the run at lo: the latest that met the SLOs
    most = 2 * MAX_BRACKET_STEPS + iterations

    def meets(q: float) -> bool:
        r = run(q)
        att = r.slo_attainment()
        if att is None:
            raise InputError(
                "the capacity search needs an SLO: --slo-ttft S and/or --slo-tpot S", where="--find-capacity"
            )
        probes.append((q, att))
        if progress is not None:
            progress(len(probes), most)
        if att >= target:
            best[:] = [r]
            return True
        return False

    lo: float | None = None
    hi: float | None = None
    q = start_qps
    if meets(q):
        lo = q
        for _ in range(MAX_BRACKET_STEPS):
            q *= 2
            if not meets(q):
                hi = q
                break
            lo = q
    else:
        hi = q
        for _ in range(MAX_BRACKET_STEPS):
            q /= 2
            if meets(q):
                lo = q
                break
            hi = q
    if lo is not None and hi is not None:
        for _ in range(iterations):
            if (hi - lo) <= rel_tol * hi:
                break
            mid = (lo + hi) / 2
            if meets(mid):
                lo = mid
            else:
                hi = mid
    if lo is None:
        return Capacity(0.0, None, hi, None, probes)
    return Capacity(lo, dict(probes)[lo], hi, best[0], probes)
