"""podsim collective: nccl-tests in simulation."""

from __future__ import annotations

import argparse
import sys

from ..api.collective import cluster_presets, run_job
from ..api.jobs import COLLECTIVE_PARAMS, CollectiveJob, echo
from ..report.collective import format_cluster_list, format_collective
from ..report.json_out import write_document
from .options import add_params

EPILOG_COLLECTIVE = """examples:
  podsim collective all_reduce --cluster dgx-a100-superpod --gpus 16 -b 1K -e 4G
  podsim collective all_gather --cluster my_cluster.yaml --gpus 64 --backend flow --json ag.json
  podsim collective all_reduce --cluster dgx-h100 --gpus 8 --algo nvls
  podsim collective all_reduce --cluster dgx-h100 --gpus 16 -b 1G -e 1G --slow-nics 5:0.5   # a halved NIC
  podsim collective all_reduce --cluster dgx-h100 --gpus 16 --slow-links 'gpu0<->seg0.rail0:0.25'
  podsim collective --list-clusters

busbw follows nccl-tests: algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather,
reduce_scatter and all_to_all.  Sizes: 1K = 1024 B, 4G = 4 GiB (or "16 MB" = 16e6 B).
GB/s = 1e9 B/s."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"collective": "_run_collective"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.collective.CollectiveJob`."""
    c = sub.add_parser(
        "collective",
        help="nccl-tests in simulation: time a collective over a range of sizes",
        epilog=EPILOG_COLLECTIVE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(c, COLLECTIVE_PARAMS)
    c.add_argument(
        "--list", "--list-clusters", dest="list_clusters", action="store_true", help="list the shipped cluster presets"
    )
    c.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_collective(args: argparse.Namespace) -> int:
    if args.list_clusters:
        presets = cluster_presets()
        if presets:
            print(format_cluster_list(presets))
        return 0
    job = CollectiveJob.from_values(vars(args))

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r  size {done}/{total} ")
            sys.stderr.flush()

    try:
        table = run_job(job, progress=progress)
    finally:
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 30 + "\r")
    print(format_collective(table))
    if job.outputs.json:
        write_document({**table.to_dict(), "inputs": echo(job)}, job.outputs.json)
        print(f"# wrote {job.outputs.json}")
    return 0
