"""podsim collective: nccl-tests in simulation."""

from __future__ import annotations

import argparse
import sys

from ..api.collective import ALGORITHMS, COLLECTIVES, DTYPES, PROTOCOLS, cluster_presets, collective
from ..errors import InputError
from ..report.collective import format_cluster_list, format_collective
from ..report.json_out import write_document
from .options import (
    add_backend,
    add_cluster,
    count_arg,
)

EPILOG_COLLECTIVE = """examples:
  podsim collective all_reduce --cluster dgx-a100-superpod --gpus 16 -b 1K -e 4G
  podsim collective all_gather --cluster my_cluster.yaml --gpus 64 --backend flow --json ag.json
  podsim collective all_reduce --cluster dgx-h100 --gpus 8 --algo nvls
  podsim collective --list-clusters

busbw follows nccl-tests: algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather,
reduce_scatter and all_to_all.  Sizes: 1K = 1024 B, 4G = 4 GiB (or "16 MB" = 16e6 B).
GB/s = 1e9 B/s."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"collective": "_run_collective"}

def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    c = sub.add_parser("collective", help="nccl-tests in simulation: time a collective over a range of sizes",
                       epilog=EPILOG_COLLECTIVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("name", nargs="?", help=", ".join(COLLECTIVES))
    add_cluster(c, "a preset name or a cluster YAML file")
    c.add_argument("--gpus", "-g", type=count_arg, metavar="N", help="number of GPUs")
    c.add_argument("--min-bytes", "-b", default="1K", metavar="SIZE", help="smallest size (default 1K)")
    c.add_argument("--max-bytes", "-e", default="1G", metavar="SIZE", help="largest size (default 1G)")
    c.add_argument("--factor", "-f", type=count_arg, default=2, metavar="X", help="size multiplier (default 2)")
    add_backend(c)
    c.add_argument("--dtype", "-d", default="float", metavar="TYPE",
                   help=f"element type for the count column: {', '.join(DTYPES)} (default float)")
    c.add_argument("--algo", default=None, metavar="ALGO", help=f"force an algorithm ({', '.join(ALGORITHMS)})")
    c.add_argument("--proto", default=None, metavar="PROTO", help=f"force a protocol ({', '.join(PROTOCOLS)})")
    c.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    c.add_argument("--list", "--list-clusters", dest="list_clusters", action="store_true",
                   help="list the shipped cluster presets")
    c.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_collective(args: argparse.Namespace) -> int:
    if args.list_clusters:
        presets = cluster_presets()
        if presets:
            print(format_cluster_list(presets))
        return 0
    for flag, val in (("NAME", args.name), ("--cluster", args.cluster), ("--gpus", args.gpus)):
        if val is None:
            raise InputError(f"missing {flag} (see podsim collective --help)")

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r  size {done}/{total} ")
            sys.stderr.flush()

    try:
        table = collective(args.name, args.cluster, args.gpus, min_bytes=args.min_bytes,
                           max_bytes=args.max_bytes, factor=args.factor, backend=args.backend,
                           dtype=args.dtype, algorithm=args.algo, protocol=args.proto, progress=progress)
    finally:
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 30 + "\r")
    print(format_collective(table))
    if args.json:
        write_document(table.to_dict(), args.json)
        print(f"# wrote {args.json}")
    return 0
