"""The parameters of ``podsim serve-workload generate``: a serving workload's open-loop arrivals
(DLSIM's workload CSV).  The SLOs, the seed, the duration and the name are ``podsim serve``'s
own parameters, reworded.

Units: rates in requests per second, durations and SLOs in s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from .serve import ServeJob, numbers

#: ``podsim serve``'s parameters by name, the ones a workload shares
_SERVE = {p.name: p for p in params_of(ServeJob)}


def _numbers(text: str, where: str) -> tuple[float, ...]:
    """``0.8,0.2``: comma-separated finite numbers (an error names ``where``)."""
    return tuple(numbers(text, where))


@dataclass(frozen=True, kw_only=True)
class ServeWorkloadJob(JobSpec):
    """Everything one generated workload depends on.

    Attributes:
        models: the number of models.
        rate: the total rate (req/s), shared by ``proportions`` (default equal shares);
            exactly one of it and ``rates``.
        proportions: each model's share of ``rate``.
        rates: each model's own rate (req/s), instead of ``rate``.
        duration_s: seconds of arrivals.
        cv: the coefficient of variation of the gaps (1: Poisson; other: Gamma).
        slos_s: each model's SLO in s, or one for all (None: none, i.e. infinite).
        seed: the seed of the arrivals.
        name: the workload's name (None: the output file's).
        out: the workload CSV to write.
    """

    models: int = param(Param("models", "count", metavar="N", required=True, help="number of models"), required=True)
    rate: float | None = param(
        Param(
            "rate",
            "number",
            metavar="RPS",
            unit="req/s",
            help="total rate in req/s, split by --proportions (default: equal shares)",
        )
    )
    proportions: tuple[float, ...] | None = param(
        Param("proportions", "list", metavar="P0,P1,...", parse=_numbers, help="each model's share of --rate")
    )
    rates: tuple[float, ...] | None = param(
        Param(
            "rates",
            "list",
            metavar="R0,R1,...",
            unit="req/s",
            parse=_numbers,
            help="each model's own rate in req/s (instead of --rate)",
        )
    )
    duration_s: float = param(replace(_SERVE["duration"], help="seconds of arrivals", required=True), required=True)
    cv: float = param(
        Param(
            "cv",
            "nonneg",
            1.0,
            help="coefficient of variation of the gaps (1: Poisson, the default; other: Gamma)",
        )
    )
    slos_s: tuple[float, ...] | None = param(
        replace(_SERVE["slos"], help="each model's SLO in seconds (or one for all; default none)")
    )
    seed: int = param(replace(_SERVE["seed"], help="seed of the arrivals (default 0)"))
    name: str | None = param(replace(_SERVE["name"], help="the workload's name (default: the output file's)"))
    out: str = param(
        Param(
            "out",
            "path",
            aliases=("o",),
            metavar="FILE",
            sweep=False,
            required=True,
            help="the workload CSV to write (DLSIM's format)",
        ),
        required=True,
    )


#: every parameter of ``podsim serve-workload generate``, in --help order
SERVE_WORKLOAD_PARAMS: tuple[Param, ...] = params_of(ServeWorkloadJob)
