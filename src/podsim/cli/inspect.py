"""podsim inspect: summaries of Chakra traces."""

from __future__ import annotations

import argparse

from ..api.inspect import inspect_chakra
from ..report.traces import format_trace_summaries, trace_summaries_json, write_json_doc
from .options import count_arg

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"inspect": "_run_inspect"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    i = sub.add_parser(
        "inspect",
        help="summarize Chakra traces: nodes by type, dependencies, durations",
        epilog="examples:\n  podsim inspect traces/llm            # <prefix>: every <prefix>.<rank>.et\n"
        "  podsim inspect traces/llm.0.et --json summary.json\n\n"
        "Durations are in microseconds, Chakra's own unit.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("trace", help="a .et file, or a prefix of <prefix>.<rank>.et files")
    i.add_argument(
        "--ranks", type=count_arg, default=4, metavar="N", help="how many rank files to summarize (default 4)"
    )
    i.add_argument("--json", metavar="OUT", help="write the summaries as JSON (fields: docs/outputs.md)")
    i.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_inspect(args: argparse.Namespace) -> int:
    n, sums = inspect_chakra(args.trace, args.ranks)
    print(format_trace_summaries(n, sums))
    if args.json:
        write_json_doc(trace_summaries_json(n, sums), args.json)
        print(f"wrote {args.json}")
    return 0
