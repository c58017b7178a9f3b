"""The parameters of ``podsim validate``: podsim's predictions against the published
measurements it ships (or a user's own rows)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from ..validation.rows import SETS as ROW_SETS
from .outputs import JSON
from .simulation import BACKEND

#: the sets of shipped rows: ``fitted`` (what podsim's parameters were fitted to) and ``reported``
SETS: tuple[str, ...] = tuple(ROW_SETS)


@dataclass(frozen=True)
class ValidateJob(JobSpec):
    """Everything one ``podsim validate`` run depends on.

    Attributes:
        rows: a CSV of the user's rows instead of the shipped ones (None: the shipped rows).
        sets: the sets of shipped rows to compare (None: every set, :data:`SETS`).
        only: keep the rows whose id starts with it.
        backend: the network backend of the throughput rows.
        jobs: rows simulated in parallel (None: the CPUs, at most 8).
        json: the compared rows as JSON.
    """

    rows: str | None = param(
        Param(
            "rows",
            "path",
            metavar="CSV",
            help="your own rows (the columns of docs/calibration.md, or a training-steps CSV of "
            "benchmarks/gpu/training_steps.py: docs/compute.md) instead of the shipped ones",
        )
    )
    sets: tuple[str, ...] | None = param(
        Param(
            "set",
            "choice",
            None,
            SETS,
            field="sets",
            repeat=True,
            help="only this set of the shipped rows (repeatable; default: both)",
        )
    )
    only: str | None = param(Param("only", "text", metavar="PREFIX", help="only rows whose id starts with PREFIX"))
    backend: str = param(replace(BACKEND, help="for the throughput rows: " + BACKEND.help))
    jobs: int | None = param(
        Param(
            "jobs",
            "count",
            metavar="N",
            aliases=("j",),
            sweep=False,
            help="rows simulated in parallel, in N processes (default: the CPUs, at most 8)",
        )
    )
    json: str | None = param(replace(JSON, help="write every row as JSON (fields: docs/calibration.md)"))


#: every parameter of ``podsim validate``, in --help order
VALIDATE_PARAMS: tuple[Param, ...] = params_of(ValidateJob)
