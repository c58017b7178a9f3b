"""Fit the roofline :class:`ComputeModel` to a measured kernel table (one GPU, one precision).

The objective is the mean absolute log error of predicted over measured time, weighted by the
square root of the measured time (big kernels dominate a layer), per kernel family (GEMMs;
memory-bound kernels; fused attention, forward and backward), the families weighted equally;
a multiplicative coordinate descent over ``gemm_max``, ``gemm_knee``, ``memory_max``,
``flash_max``, ``flash_knee`` and ``launch_ns``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ..hardware.gpu import GpuSpec
from .model import DEFAULT_EFFICIENCY, ComputeModel
from .table import KernelRow

BOUNDS = {
    "gemm_max": (0.3, 1.0),
    "gemm_knee": (1.0, 2000.0),
    "memory_max": (0.3, 1.0),
    "flash_max": (0.1, 1.0),
    "flash_knee": (1.0, 2000.0),
    "launch_ns": (0.0, 20000.0),
}

P = TypeVar("P")


def coordinate_descent(
    start: P,
    loss: Callable[[P], float],
    bounds: dict[str, tuple[float, float]],
    rounds: int,
    step: float = 1.3,
    from_zero: float = 50.0,
    tol: float = 1e-6,
    on_better: Callable[[int, str, float, float], None] | None = None,
) -> tuple[P, float]:
    """Multiplicative coordinate descent over the fields ``bounds`` names of a frozen dataclass
    ``start``: each field is scaled by ``step`` (then ``1 / step``) while ``loss`` falls by more
    than ``tol``, clipped to its bounds (a field at 0 jumps to ``from_zero``); ``step`` shrinks
    to its square root every round.  Returns the best point and its loss; ``on_better(round,
    field, value, loss)`` hears of every improvement."""
    best_p, best = start, loss(start)
    for rnd in range(rounds):
        for name, (lo, hi) in bounds.items():
            for direction in (step, 1 / step):
                while True:
                    v = getattr(best_p, name)
                    new = min(max(v * direction if v > 0 else from_zero, lo), hi)
                    if new == v:
                        break
                    trial = replace(best_p, **{name: new})  # type: ignore[type-var]
                    score = loss(trial)
                    if score >= best - tol:
                        break
                    best_p, best = trial, score
                    if on_better is not None:
                        on_better(rnd, name, new, score)
        step = math.sqrt(step)
    return best_p, best


def _family_errors(cm: ComputeModel, rows: list[KernelRow]) -> dict[str, float]:
    errs: dict[str, list[tuple[float, float]]] = {"gemm": [], "memory": [], "attention": []}
    for r in rows:
        t = r.time_us * 1e3
        if r.kernel == "gemm":
            p = cm.gemm_ns(r.m, r.n, r.k, r.batch)
            fam = "gemm"
        elif r.kernel == "memory":
            p = cm.memory_ns(r.m)
            fam = "memory"
        elif r.kernel in ("attention_fwd", "attention_bwd"):
            p = cm.attention_ns(r.batch, r.m, r.n, r.k, r.kernel == "attention_bwd")
            fam = "attention"
        else:
            continue
        errs[fam].append((abs(math.log(p / t)), math.sqrt(t)))
    # weighted by sqrt(time): the kernels that dominate a layer count more than tiny ones
    return {k: sum(e * w for e, w in v) / sum(w for _, w in v) for k, v in errs.items() if v}


def fit_to_table(
    rows: list[KernelRow], gpu: GpuSpec, dtype: str = "bf16", rounds: int = 6
) -> tuple[dict[str, float], dict[str, float]]:
    """Fitted efficiency parameters and, per kernel family, the mean |time error| (fraction)."""
    mine = [r for r in rows if r.dtype == dtype]
    cm = ComputeModel(gpu, dtype, **DEFAULT_EFFICIENCY)

    def loss(m: ComputeModel) -> float:
        e = _family_errors(m, mine)
        return sum(e.values()) / max(len(e), 1)

    cm, _ = coordinate_descent(cm, loss, BOUNDS, rounds)
    params = {k: round(float(getattr(cm, k)), 4 if k.endswith("max") else 1) for k in BOUNDS}
    errs = {k: math.exp(v) - 1 for k, v in _family_errors(cm, mine).items()}
    return params, errs
