"""The ``podsim`` command line.  It parses arguments and calls the API, nothing more: one module
per subcommand (its parser and its runner), built from the shared options of :mod:`.options`."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import InputError, PodsimError
from . import (
    collective,
    convert,
    example,
    fabric,
    goodput,
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
    goodput,
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


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a shorter error: one line first (with the closest flag or command
    when the given one is misspelt), then where the help is, without the usage block."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {self._closest(message)}\n  (run '{self.prog} --help' for its options)\n")

    def _closest(self, message: str) -> str:
        """``message`` with a did-you-mean for each misspelt flag (``--global_batch``) or command."""
        if message.startswith("unrecognized arguments: "):
            flags = sorted({o for o in self._option_string_actions if o.startswith("--")})
            parts = []
            for tok in message.removeprefix("unrecognized arguments: ").split():
                if not tok.startswith("-"):
                    continue
                name = tok.split("=", 1)[0]
                near = difflib.get_close_matches(name.replace("_", "-").lower(), flags, n=1, cutoff=0.6)
                parts.append(f"{name}" + (f" (did you mean {near[0]}?)" if near else ""))
            if parts:
                return f"unknown option{'s' if len(parts) > 1 else ''} {', '.join(parts)}"
            return message
        m = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(3))
            near = difflib.get_close_matches(m.group(2), choices, n=1, cutoff=0.5)
            if m.group(1) == "COMMAND":
                hint = f"did you mean {near[0]!r}? " if near else ""
                return f"unknown command {m.group(2)!r}: {hint}(one of {', '.join(choices)})"
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return f"{m.group(1)}: {m.group(2)!r} is not one of {', '.join(choices)}{hint}"
        return message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="podsim",
        description="Simulate distributed deep-learning jobs on GPU clusters.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="run 'podsim COMMAND --help' for a command's options and examples",
    )
    parser.add_argument("--version", action="version", version=f"podsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in _MODULES:
        module.add_parser(sub)
    return parser


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The parser of ``command`` (the top-level one without a command)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if command in getattr(action, "choices", {}):
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``podsim`` console script; returns the exit status."""

    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # named by the subcommand's parser, which knows the flags it meant
            _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help (0) or a bad flag (2, with the one-line message above)
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
