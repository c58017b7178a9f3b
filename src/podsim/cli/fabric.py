"""podsim fabric: a cluster's fabric, summarized or written as a SimAI topology."""

from __future__ import annotations

import argparse

from ..api.fabric import FABRIC_PARAMS, FabricJob, fabric, write_simai_topology
from ..report.fabric import format_fabric
from .options import add_params

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"fabric": "_run_fabric"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.fabric.FabricJob`."""
    f = sub.add_parser(
        "fabric",
        help="build a cluster's fabric: summary, SimAI topology file",
        epilog="examples:\n  podsim fabric --cluster dgx-h100 --gpus 64\n"
        "  podsim fabric --cluster my.yaml --gpus 16 --simai topo.txt   # SimAI/ns-3 topology",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(f, FABRIC_PARAMS)
    f.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_fabric(args: argparse.Namespace) -> int:
    job = FabricJob.from_values(vars(args))
    fab = fabric(job.cluster, job.gpus)
    print(format_fabric(fab))
    if job.simai:
        write_simai_topology(fab, job.simai)
        print(f"  wrote {job.simai}")
    return 0
