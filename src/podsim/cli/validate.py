"""podsim validate: predictions against published measurements."""

from __future__ import annotations

import argparse
import sys

from ..api.validate import VALIDATE_PARAMS, ValidateJob, validate
from ..report.json_out import write_document
from ..report.validate import format_validation
from .options import add_params, clear_progress_line, count_bar

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"validate": "_run_validate"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.validate.ValidateJob`."""
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
    add_params(va, VALIDATE_PARAMS)
    va.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_validate(args: argparse.Namespace) -> int:
    job = ValidateJob.from_values(vars(args))
    bar = count_bar("validated {done}/{total} rows")
    tty = sys.stderr.isatty()

    def note(text: str) -> None:  # the rows that could not run, each on a line of its own
        if text.startswith("not runnable"):
            sys.stderr.write(("\r" + " " * 80 + "\r" if tty else "") + f"note: {text}\n")

    try:
        v = validate(job.rows, job.only, job.sets, job.backend, job.jobs, note, bar)
    finally:  # done or interrupted (Ctrl-C: the workers are stopped, main says so on a line of its own)
        clear_progress_line(bar if tty else None)
    print(format_validation(v))
    if job.json:
        write_document(v.to_dict(), job.json)
    return 0
