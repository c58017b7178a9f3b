"""Summaries of Chakra traces (``podsim inspect``): nodes by type, dependencies, durations."""

from __future__ import annotations

import os

from ..formats.chakra.inspect import TraceSummary, summarize_prefix, summarize_trace
from ..jobs.trace import INSPECT_PARAMS, InspectJob

PathLike = str | os.PathLike[str]

__all__ = ["INSPECT_PARAMS", "InspectJob", "TraceSummary", "inspect_chakra", "run_job"]


def inspect_chakra(trace: PathLike, max_ranks: int = 4) -> tuple[int, list[TraceSummary]]:
    """(rank files, summaries): of one ``.et`` file, or of the first ``max_ranks`` rank files of
    a prefix (``<prefix>.<rank>.et``).  Durations in microseconds, Chakra's unit.

    Raises:
        InputError: for a missing or unreadable trace.
    """
    if os.path.isfile(trace):
        return 1, [summarize_trace(trace)]
    return summarize_prefix(trace, max_ranks)


def run_job(job: InspectJob) -> tuple[int, list[TraceSummary]]:
    """(rank files, summaries) of the trace ``job`` names (``podsim inspect``): :func:`inspect_chakra`.

    Raises:
        InputError: for a missing or unreadable trace.
    """
    return inspect_chakra(job.trace, job.ranks)
