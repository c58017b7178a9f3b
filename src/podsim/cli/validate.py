"""podsim validate: predictions against published measurements."""

from __future__ import annotations

import argparse
import sys

from ..api.validate import SETS, validate
from ..report.json_out import write_document
from ..report.validate import format_validation
from .options import (
    add_backend,
    count_arg,
)

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"validate": "_run_validate"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    va = sub.add_parser(
        "validate",
        help="compare predictions with every published measurement podsim can run",
        epilog="examples:\n  podsim validate\n  podsim validate --set reported --json v.json\n"
        "  podsim validate --only megatron_sc21_t1\n  podsim validate --rows my_runs.csv\n"
        "  podsim validate --rows steps.csv     # steps measured by "
        "benchmarks/gpu/training_steps.py\n\n"
        "Rows ship with podsim: the FITTED set (what its parameters were fitted to) and the\n"
        "REPORTED set (published figures it was never fitted to); errors are shown per set,\n"
        "per GPU type and per source.  Columns of a rows file: docs/calibration.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    va.add_argument(
        "--rows",
        default=None,
        metavar="CSV",
        help="your own rows (the columns of docs/calibration.md, or a training-steps CSV of "
        "benchmarks/gpu/training_steps.py: docs/compute.md) instead of the shipped ones",
    )
    va.add_argument(
        "--set",
        dest="sets",
        action="append",
        choices=SETS,
        help="only this set of the shipped rows (repeatable; default: both)",
    )
    va.add_argument("--only", default=None, metavar="PREFIX", help="only rows whose id starts with PREFIX")
    add_backend(va, "for the throughput rows")
    va.add_argument(
        "--jobs",
        "-j",
        type=count_arg,
        default=None,
        metavar="N",
        help="rows simulated in parallel, in N processes (default: the CPUs, at most 8)",
    )
    va.add_argument("--json", metavar="OUT", help="write every row as JSON (fields: docs/calibration.md)")
    va.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_validate(args: argparse.Namespace) -> int:
    def progress(row: str) -> None:
        if row.startswith("not runnable"):
            sys.stderr.write(("\r" if sys.stderr.isatty() else "") + f"note: {row}\n")
        elif sys.stderr.isatty():
            sys.stderr.write(f"\r  {row:<60}")
            sys.stderr.flush()

    v = validate(args.rows, args.only, tuple(args.sets) if args.sets else SETS, args.backend, args.jobs, progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 64 + "\r")
    print(format_validation(v))
    if args.json:
        write_document(v.to_dict(), args.json)
    return 0
