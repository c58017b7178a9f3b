"""podsim fabric: a cluster's fabric, summarized or written as a SimAI topology."""

from __future__ import annotations

import argparse

from ..api.fabric import fabric, write_simai_topology
from ..report.fabric import format_fabric
from .options import (
    add_cluster,
    count_arg,
)

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"fabric": "_run_fabric"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    f = sub.add_parser(
        "fabric",
        help="build a cluster's fabric: summary, SimAI topology file",
        epilog="examples:\n  podsim fabric --cluster dgx-h100 --gpus 64\n"
        "  podsim fabric --cluster my.yaml --gpus 16 --simai topo.txt   # SimAI/ns-3 topology",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_cluster(f, "a preset, a cluster YAML or a SimAI topology", required=True)
    f.add_argument("--gpus", "-g", type=count_arg, required=True, metavar="N", help="number of GPUs")
    f.add_argument("--simai", metavar="OUT", help="write the fabric as a SimAI topology file")
    f.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_fabric(args: argparse.Namespace) -> int:
    fab = fabric(args.cluster, args.gpus)
    print(format_fabric(fab))
    if args.simai:
        write_simai_topology(fab, args.simai)
        print(f"  wrote {args.simai}")
    return 0
