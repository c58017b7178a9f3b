"""Convert a trace from one format to another (``podsim convert``): any format podsim reads to
any it writes (:func:`podsim.formats.registry.writable`: Chakra ET for a workload, TrioSim's
format for one GPU's step)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..formats.registry import TRACE_FORMATS, writable, write
from ..jobs.trace import CONVERT_PARAMS, ConvertJob
from ..parallelize import load_step
from .simulate import load_workload

PathLike = str | os.PathLike[str]

__all__ = ["CONVERT_PARAMS", "ConvertJob", "Converted", "convert", "run_job", "writable_formats"]


@dataclass(frozen=True)
class Converted:
    """What a conversion read and wrote.

    Attributes:
        source: the workload's name, or the one-GPU step's source.
        format: the format written.
        writes: ``"workload"`` or ``"step"`` (what the format holds).
        output: the output prefix or folder, as given.
        paths: the files written.
        ops: the step's ops (a step format), or the workload's ranks (a workload format).
    """

    source: str
    format: str
    writes: str
    output: str
    paths: tuple[str, ...]
    ops: int


def writable_formats() -> tuple[str, ...]:
    """The names of the trace formats podsim writes, sorted."""
    return writable()


def convert(
    source: PathLike, to: str, output: PathLike, gpus: int | None = None, trace_format: str | None = None
) -> Converted:
    """Read ``source`` (format ``trace_format``, default sniffed) and write it in format ``to``
    to ``output``: a workload format gets the whole job (on ``gpus`` ranks where the source does
    not say), a step format one GPU's training step.

    Raises:
        InputError: for an unknown format (with the closest name), one podsim does not write, a
            source without a one-GPU step for a step format, or a bad source.
    """
    fmt = TRACE_FORMATS.get(to)
    if fmt.writes == "step":
        step = load_step(path=source, trace_format=trace_format)
        return Converted(step.source, fmt.name, fmt.writes, str(output), write(step, output, fmt.name), len(step.ops))
    w = load_workload(source, gpus, trace_format=trace_format)
    return Converted(w.name, fmt.name, fmt.writes, str(output), write(w, output, fmt.name), w.num_ranks)


def run_job(job: ConvertJob) -> Converted:
    """The conversion ``job`` asks for (``podsim convert``): :func:`convert` of its fields.

    Raises:
        InputError: as :func:`convert`.
    """
    return convert(job.input, job.to, job.output, job.gpus, job.trace_format)
