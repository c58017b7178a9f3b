"""podsim example: the built-in examples, and the inputs the tour needs."""

from __future__ import annotations

import argparse
import tempfile

from ..api.example import EXAMPLES, example_input_name, run_example, serve_example_args, write_example
from ..api.jobs import EXAMPLE_PARAMS
from ..errors import InputError
from . import serve as serve_cli
from .options import add_params, check_output_paths, check_outputs, emit

EPILOG_EXAMPLE = """examples:
  podsim example                 # the 1 MiB all-reduce on 8 NPUs (117,780 ns)
  podsim example layers --trace trace.json
  podsim example cluster --trace trace.json   # two DGX A100s, flow backend: link load counters
  podsim example --write traces               # also keep its inputs (Chakra ETs, system.json, ...)
  podsim example serving --write serving      # a DLSIM-format workload and placement, served
  podsim example --list"""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"example": "_run_example"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    e = sub.add_parser(
        "example",
        help="run a built-in example",
        epilog=EPILOG_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("--list", action="store_true", help="list the examples")
    add_params(e, EXAMPLE_PARAMS)
    e.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_example(args: argparse.Namespace) -> int:
    check_outputs(args)
    if args.list:
        for k, v in EXAMPLES.items():
            print(f"  {k:<10} {v}")
        return 0
    if args.name not in EXAMPLES:
        raise InputError(f"unknown example {args.name!r}; examples: {', '.join(EXAMPLES)}")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_example(args.name, args.write or tmp)
        if args.write:
            print(
                f"podsim example: wrote the inputs of '{args.name}' to {args.write}/: "
                + ", ".join(sorted(example_input_name(p) for p in paths.values()))
            )
        serve_flags = serve_example_args(args.name)
        if serve_flags is not None:
            argv = ["serve", *serve_flags, "-w", paths["workload"], "-p", paths["placement"]]
            if args.json:
                argv += ["--json", args.json]
            if args.trace:
                argv += ["--trace", args.trace]
            print("podsim example: running podsim " + " ".join(argv))
            return _run_serve(argv)
        res = run_example(
            args.name, paths, use_symmetry=not args.no_symmetry, record_timeline=bool(args.trace or args.plot)
        )
        return emit(res, args)


def _run_serve(argv: list[str]) -> int:
    """``podsim serve ARGV``, parsed by the serve subcommand's own parser and run by its runner."""
    parser = argparse.ArgumentParser(prog="podsim")
    serve_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    check_output_paths(args)
    return getattr(serve_cli, serve_cli.RUNNERS["serve"])(args)
