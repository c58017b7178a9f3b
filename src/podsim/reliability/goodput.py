"""Expected goodput of a checkpointed run under failures, in closed form.

The run alternates ``tau`` seconds of training and a checkpoint that blocks ``C`` seconds.
Failures of the job arrive as a Poisson process of rate ``lam`` (per second of wall clock, the
sum over kinds, :meth:`~podsim.reliability.rates.Reliability.job_rates_per_s`), at any time --
while training, checkpointing or restarting.  A failure loses the work since the last
checkpoint and costs a restart of ``R`` seconds (detection, rescheduling, warm-up, restore);
a failure during a restart starts it again.  Daly's model (Daly 2006, "A higher order estimate
of the optimum checkpoint interval for restart dumps", FGCS 22) gives the expected wall time of
one segment of ``tau`` seconds of work::

    T(tau) = exp(lam R) (exp(lam (tau + C)) - 1) / lam

so the expected **goodput** (useful training time over wall time) is

    G(tau) = tau / T(tau) = lam tau exp(-lam R) / (exp(lam (tau + C)) - 1)      (lam > 0)
    G(tau) = tau / (tau + C)                                                   (lam = 0)

Its first order in ``lam`` is ``G1 = tau / (tau + C) x (1 - lam ((tau + C) / 2 + R))``.  The
interval that maximises ``G`` solves ``1 - exp(-lam (tau + C)) = lam tau`` (``R`` only scales
``G``), i.e. ``tau* = (1 + W0(-exp(-(lam C + 1)))) / lam`` with ``W0`` Lambert's principal
branch, found here by bisection.  Next to it: Young's ``sqrt(2 C M)`` (Young 1974, CACM 17) and
Daly's higher-order estimate ``sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C`` (``M`` for
``C >= 2M``), ``M = 1 / lam`` the job's mean time between failures.

Times are float seconds; rates per second.
"""

from __future__ import annotations

import math


def goodput(lam: float, tau: float, checkpoint_s: float, restart_s: float) -> float:
    """Expected goodput (0-1) with interval ``tau`` s (Daly's model, see the module docstring)."""
    if tau <= 0:
        return 0.0
    if lam <= 0:
        return tau / (tau + checkpoint_s)
    x = lam * (tau + checkpoint_s)
    if x > 700 or lam * restart_s > 700:  # exp overflows: practically no progress
        return 0.0
    return lam * tau * math.exp(-lam * restart_s) / math.expm1(x)


def segment_time_s(lam: float, work_s: float, checkpoint_s: float, restart_s: float) -> float:
    """Expected wall time (s) of ``work_s`` of training followed by a checkpoint."""
    if lam <= 0:
        return work_s + checkpoint_s
    x, y = lam * restart_s, lam * (work_s + checkpoint_s)
    if x + y > 700:  # exp overflows: practically never finishes
        return math.inf
    return math.exp(x) * math.expm1(y) / lam


def first_order_goodput(lam: float, tau: float, checkpoint_s: float, restart_s: float) -> float:
    """The first-order (in ``lam``) expansion of :func:`goodput`; may be negative where the
    expansion fails (failures as frequent as segments)."""
    return tau / (tau + checkpoint_s) * (1.0 - lam * ((tau + checkpoint_s) / 2.0 + restart_s))


def optimal_interval_s(lam: float, checkpoint_s: float) -> float:
    """The interval (s) that maximises :func:`goodput` (``inf`` when ``lam`` is 0: never checkpoint).

    Solves ``1 - exp(-lam (tau + C)) = lam tau`` for ``x = lam tau`` in (0, 1) by bisection."""
    if lam <= 0:
        return math.inf
    c = lam * checkpoint_s
    if c == 0:  # free checkpoints: as often as possible
        return 0.0
    lo, hi = 0.0, 1.0  # g(x) = 1 - x - exp(-c - x): g(0) > 0 for c > 0, g(1) < 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 1.0 - mid - math.exp(-c - mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return 0.5 * (lo + hi) / lam


def young_interval_s(lam: float, checkpoint_s: float) -> float:
    """Young's interval ``sqrt(2 C M)``, ``M = 1 / lam`` (s; ``inf`` without failures)."""
    if lam <= 0:
        return math.inf
    return math.sqrt(2.0 * checkpoint_s / lam)


def daly_interval_s(lam: float, checkpoint_s: float) -> float:
    """Daly's higher-order estimate of the optimum (s; ``inf`` without failures)."""
    if lam <= 0:
        return math.inf
    m = 1.0 / lam
    c = checkpoint_s
    if c >= 2 * m:
        return m
    r = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(r) / 3 + r / 9) - c
