"""The parameters of ``podsim sweep`` (many runs from one spec) itself, not of its runs: which
spec, where its results are kept, where its runs go and what it writes.  The runs' own
parameters are those of the subcommand a spec names (:mod:`podsim.sweep.runs`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from .outputs import JSON
from .search import SEARCH_PARAMS
from .simulation import RAY, WORKERS

#: ``--store``: the results store a search keeps too
_STORE = next(p for p in SEARCH_PARAMS if p.name == "store")


@dataclass(frozen=True)
class SweepJob(JobSpec):
    """Everything one ``podsim sweep`` depends on.

    Attributes:
        spec: the sweep spec's YAML (docs/sweep.md); exactly one of it and ``example``.
        example: the name of a built-in spec to run instead.
        write: with ``example``: also keep its spec in this file (YAML).
        store: a DuckDB results store (None: the spec's, if it names one).
        workers: local worker processes (None: the CPUs, at most 8; 1: this process).
        ray: a Ray cluster's address to run on instead (``local``: start Ray here).
        json: write the table as JSON.
        csv: write the table as CSV.
    """

    spec: str | None = param(
        Param(
            "spec",
            "path",
            positional=True,
            metavar="SPEC.yaml",
            sweep=False,
            help="the sweep spec (docs/sweep.md)",
        )
    )
    example: str | None = param(
        Param("example", "name", metavar="NAME", sweep=False, help="run a built-in spec instead (see --list)")
    )
    write: str | None = param(
        Param(
            "write",
            "path",
            metavar="SPEC.yaml",
            sweep=False,
            help="with --example: also keep its spec in this file",
        )
    )
    store: str | None = param(
        replace(
            _STORE,
            sweep=False,
            help="a results store (DuckDB file; pip install podsim[search]): every point is added as it finishes, "
            "and a sweep run again skips what it holds (default: the spec's store, if it names one)",
        )
    )
    workers: int | None = param(WORKERS)
    ray: str | None = param(RAY)
    json: str | None = param(replace(JSON, help="write the table as JSON (rows and their columns)"))
    csv: str | None = param(
        Param("csv", "path", metavar="OUT", sweep=False, help="write the table as CSV (every column)")
    )


#: every parameter of ``podsim sweep``, in --help order
SWEEP_PARAMS: tuple[Param, ...] = params_of(SweepJob)
