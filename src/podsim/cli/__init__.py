"""The ``podsim`` command line.  It parses arguments and calls the API, nothing more: one module
per subcommand (its parser and its runner), built from the shared options of :mod:`.options`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import InputError, PodsimError
from . import (
    collective,
    convert,
    example,
    fabric,
    infer,
    inspect,
    kernels,
    llm,
    search,
    serve,
    serve_llm,
    simulate,
    stack,
    sweep,
    trace,
    validate,
)
from .options import check_output_paths

#: the subcommands' modules, in the order --help lists them
_MODULES = (
    simulate,
    inspect,
    collective,
    llm,
    search,
    sweep,
    validate,
    stack,
    kernels,
    trace,
    convert,
    fabric,
    serve,
    infer,
    serve_llm,
    example,
)
#: subcommand -> its module and the name of its runner there (each module's RUNNERS)
_RUNNERS = {cmd: (module, name) for module in _MODULES for cmd, name in module.RUNNERS.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podsim",
        description="Simulate distributed deep-learning jobs on GPU clusters.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="run 'podsim COMMAND --help' for a command's options and examples",
    )
    parser.add_argument("--version", action="version", version=f"podsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _MODULES:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``podsim`` console script; returns the exit status."""

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, with argparse's one-line message)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    if args.command is None:
        parser.print_help()
        return 2
    try:
        check_output_paths(args)
        module, runner = _RUNNERS[args.command]
        return getattr(module, runner)(args)
    except PodsimError as e:
        if getattr(args, "debug", False):
            raise
        kind = "error" if isinstance(e, InputError) else "simulation error"
        print(f"podsim: {kind}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("podsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a path that is missing, a directory, unreadable or unwritable
        if getattr(args, "debug", False):
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"podsim: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: one line, the traceback under --debug
        if getattr(args, "debug", False):
            raise
        print(
            f"podsim: internal error: {type(e).__name__}: {e} (run again with --debug for the traceback, "
            "and please report it)",
            file=sys.stderr,
        )
        return 70
