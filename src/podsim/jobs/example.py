"""The parameters of ``podsim example``: which built-in example to run, where to keep its
inputs, and the outputs of any simulation of ranks."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import JobSpec, Param, nested, param, params_of
from .outputs import ResultOutputs

#: the example run when none is named (ASTRA-sim's 1 MiB ring all-reduce on 8 NPUs)
DEFAULT_EXAMPLE = "allreduce"


@dataclass(frozen=True)
class ExampleJob(JobSpec):
    """One built-in example: its name (``podsim example --list``), the folder that keeps its
    input files (if any) and what to write."""

    name: str = param(
        Param("name", "name", DEFAULT_EXAMPLE, positional=True, sweep=False, help="example name (see --list)")
    )
    write: str | None = param(
        Param("write", "path", metavar="DIR", sweep=False, help="also keep the example's input files in DIR")
    )
    outputs: ResultOutputs = nested(ResultOutputs)


#: every parameter of ``podsim example``, in --help order
EXAMPLE_PARAMS: tuple[Param, ...] = params_of(ExampleJob)
