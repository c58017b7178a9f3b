"""Fit a stack's free parameters to measured runs: a bounded least-squares fit of the log
residuals, one parameter per run at most.

:func:`fit` is generic: ``predict(values) -> [prediction per run]`` is the caller's (podsim's
simulator under the stack with ``values`` set); the measured values and each free parameter's
bounds come with it.  With fewer runs than free parameters, the first ``runs`` are fitted (in the
stack's ``free`` order) and the rest held at their base values; the result says which.  A fit is
refused (:attr:`Fit.refusal`) when a fitted value lands on a bound (the parameter cannot explain
the runs inside its physical range) or a residual stays over ``max_residual``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: a fit whose value is within this fraction of its range from a bound has landed on it
BOUND_MARGIN = 0.01
#: the largest residual a fit may leave (relative error of a run)
MAX_RESIDUAL = 0.10
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass
class Fit:
    """A fit's outcome.

    Attributes:
        fitted: parameter -> fitted value.
        held: parameter -> value kept (free, but more parameters than runs, or one the runs do
            not depend on: see ``flat``).
        flat: the held parameters the runs do not depend on (no change across their bounds:
            e.g. the host time of runs whose kernels are long).
        before, after: each run's relative error (predicted / measured - 1) at the base values
            and at the fitted ones.
        evaluations: predictions made.
        refusal: why the fit is not usable ('' when it is).
    """

    fitted: dict[str, float] = field(default_factory=dict)
    held: dict[str, float] = field(default_factory=dict)
    flat: list[str] = field(default_factory=list)
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)
    evaluations: int = 0
    refusal: str = ""


def _loss(pred: Sequence[float], measured: Sequence[float]) -> float:
    return sum(math.log(max(p, 1e-30) / m) ** 2 for p, m in zip(pred, measured))


def _golden(f: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    """The minimum of a unimodal ``f`` on ``[lo, hi]`` to ``tol`` (in log space for a range over
    a decade)."""
    log = lo > 0 and hi / lo > 10
    a, b = (math.log(lo), math.log(hi)) if log else (lo, hi)
    g = (lambda x: f(math.exp(x))) if log else f
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = g(c), g(d)
    while abs(b - a) > tol * (1 if log else max(abs(hi), 1e-9)):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = g(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = g(d)
    x = (a + b) / 2
    return math.exp(x) if log else x


def fit(
    predict: Callable[[dict[str, float]], list[float]],
    measured: Sequence[float],
    free: dict[str, tuple[float, float]],
    base: dict[str, float],
    max_residual: float = MAX_RESIDUAL,
    tol: float = 2e-3,
    sweeps: int = 3,
) -> Fit:
    """Fit the first ``len(measured)`` parameters of ``free`` (name -> bounds), starting from and
    holding the rest at ``base``, by coordinate-wise golden-section search on the squared log
    residuals (``sweeps`` passes over the parameters)."""
    out = Fit()
    names = list(free)[: len(measured)]
    out.held = {k: base[k] for k in list(free)[len(measured) :]}
    values = {k: base[k] for k in free}
    calls = [0]

    def run(v: dict[str, float]) -> list[float]:
        calls[0] += 1
        return predict(v)

    out.before = [p / m - 1 for p, m in zip(run(values), measured)]
    for k in list(names):  # a parameter the runs do not depend on is held, not fitted
        lo, hi = free[k]
        ends = [run({**values, k: x}) for x in (lo, hi)]
        if all(abs(a / b - 1) < 1e-6 for a, b in zip(*ends)):
            names.remove(k)
            out.flat.append(k)
            out.held[k] = values[k]
    for _ in range(sweeps if len(names) > 1 else 1):
        for k in names:
            lo, hi = free[k]

            def f(x: float, k: str = k) -> float:
                return _loss(run({**values, k: x}), measured)

            values[k] = _golden(f, lo, hi, tol)
    out.fitted = {k: values[k] for k in names}
    out.after = [p / m - 1 for p, m in zip(run(values), measured)]
    out.evaluations = calls[0]
    for k in names:
        lo, hi = free[k]
        log = lo > 0 and hi / lo > 10  # as _golden searched it
        pos, span = (math.log(values[k] / lo), math.log(hi / lo)) if log else (values[k] - lo, hi - lo)
        if min(pos, span - pos) < BOUND_MARGIN * span:
            out.refusal = (
                f"{k} landed on its bound ({values[k]:.4g}, bounds [{lo:g}, {hi:g}]): the stack's free "
                "parameters cannot explain these runs inside their physical range"
            )
            return out
    worst = max(range(len(out.after)), key=lambda i: abs(out.after[i]), default=None)
    if worst is not None and abs(out.after[worst]) > max_residual:
        out.refusal = (
            f"run {worst + 1} is still {100 * out.after[worst]:+.1f}% off after the fit (more than "
            f"{100 * max_residual:.0f}%): these runs need more than the stack's free parameters"
        )
    return out
