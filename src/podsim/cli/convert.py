"""podsim convert: workloads to Chakra ET; one-GPU traces to TrioSim."""

from __future__ import annotations

import argparse

from ..api.convert import convert, writable_formats
from ..report.traces import format_converted
from .options import count_arg

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"convert": "_run_convert"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    cv = sub.add_parser(
        "convert",
        help="convert a workload (TrioSim, PyTorch traces, ASTRA-sim 1.0 text, SimAI, "
        "Chakra) to Chakra ET; a one-GPU trace to TrioSim's format",
        epilog="examples:\n  podsim convert sample_trace/vgg13 --to chakra et/vgg13\n"
        "  podsim convert Resnet50_DataParallel.txt --gpus 16 --to chakra et/resnet\n"
        "  podsim convert gpt13b.txt --to chakra et/gpt13b        # SimAI, its all_gpus\n"
        "  podsim convert traces/resnet50 --to triosim traces/resnet50-triosim\n\n"
        "--to chakra writes OUT.<rank>.et for every rank (and OUT.comm_groups.json when the\n"
        "workload has communicator groups); run them with podsim simulate or ASTRA-sim.\n"
        "--to triosim writes OUT/trace.csv and OUT/tensor.csv from a one-GPU trace (a podsim\n"
        "trace folder, a Kineto trace or a TrioSim folder); run it with simulate --triosim.\n"
        "The input's format is sniffed (docs/traces.md); --format names it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cv.add_argument(
        "input",
        help="a TrioSim trace directory, a podsim trace folder (every rank), a PyTorch Kineto "
        "or execution trace (.json), a .txt workload or a Chakra prefix",
    )
    cv.add_argument("--to", required=True, choices=list(writable_formats()), help="the output format")
    cv.add_argument("output", metavar="OUT", help="the output prefix (chakra) or folder (triosim)")
    cv.add_argument(
        "--format",
        dest="trace_format",
        default=None,
        metavar="NAME",
        help="the input's format, instead of sniffing it (docs/traces.md)",
    )
    cv.add_argument(
        "--gpus",
        type=count_arg,
        default=None,
        metavar="N",
        help="ranks to write (required for ASTRA-sim 1.0 text; SimAI default: all_gpus)",
    )
    cv.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_convert(args: argparse.Namespace) -> int:
    print(format_converted(convert(args.input, args.to, args.output, args.gpus, args.trace_format)))
    return 0
