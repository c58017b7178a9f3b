"""podsim inspect: summaries of Chakra traces."""

from __future__ import annotations

import argparse

from ..api.inspect import INSPECT_PARAMS, InspectJob, run_job
from ..report.traces import format_trace_summaries, trace_summaries_json, write_json_doc
from .options import add_params

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"inspect": "_run_inspect"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.trace.InspectJob`."""
    i = sub.add_parser(
        "inspect",
        help="summarize Chakra traces: nodes by type, dependencies, durations",
        epilog="examples:\n  podsim inspect traces/llm            # <prefix>: every <prefix>.<rank>.et\n"
        "  podsim inspect traces/llm.0.et --json summary.json\n\n"
        "Durations are in microseconds, Chakra's own unit.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(i, INSPECT_PARAMS)
    i.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_inspect(args: argparse.Namespace) -> int:
    job = InspectJob.from_values(vars(args))
    n, sums = run_job(job)
    print(format_trace_summaries(n, sums))
    if job.json:
        write_json_doc(trace_summaries_json(n, sums), job.json)
        print(f"wrote {job.json}")
    return 0
