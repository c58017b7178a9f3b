"""podsim convert: workloads to Chakra ET; one-GPU traces to TrioSim."""

from __future__ import annotations

import argparse

from ..api.convert import CONVERT_PARAMS, ConvertJob, run_job
from ..report.traces import format_converted
from .options import add_params

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"convert": "_run_convert"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.trace.ConvertJob`."""
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
    add_params(cv, CONVERT_PARAMS)
    cv.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_convert(args: argparse.Namespace) -> int:
    print(format_converted(run_job(ConvertJob.from_values(vars(args)))))
    return 0
