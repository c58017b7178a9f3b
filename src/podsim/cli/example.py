"""podsim example: the built-in examples, and the inputs the tour needs."""

from __future__ import annotations

import argparse
import os
import tempfile

from .options import (
    add_outputs,
    check_outputs,
    emit,
)

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
    e = sub.add_parser("example", help="run a built-in example", epilog=EPILOG_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("name", nargs="?", default="allreduce", help="example name (see --list)")
    e.add_argument("--list", action="store_true", help="list the examples")
    e.add_argument("--write", metavar="DIR", help="also keep the example's input files in DIR")
    add_outputs(e)


def _run_example(args: argparse.Namespace) -> int:
    from ..api import simulate
    from ..errors import InputError
    from ..examples import CLUSTER_EXAMPLES, EXAMPLES, SERVE_EXAMPLES, write_example

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
            print(f"podsim example: wrote the inputs of '{args.name}' to {args.write}/: "
                  + ", ".join(sorted(_shown(p) for p in paths.values())))
        if args.name in SERVE_EXAMPLES:
            argv = ["serve", *SERVE_EXAMPLES[args.name], "-w", paths["workload"], "-p", paths["placement"]]
            if args.json:
                argv += ["--json", args.json]
            if args.trace:
                argv += ["--trace", args.trace]
            print("podsim example: running podsim " + " ".join(argv))
            from . import main
            return main(argv)
        if args.name in CLUSTER_EXAMPLES:
            preset, backend = CLUSTER_EXAMPLES[args.name]
            res = simulate(paths["workload"], cluster=preset, backend=backend,
                           use_symmetry=not args.no_symmetry, record_timeline=bool(args.trace or args.plot))
        else:
            res = simulate(paths["workload"], paths["system"], paths["network"], paths["remote_memory"],
                           use_symmetry=not args.no_symmetry, record_timeline=bool(args.trace or args.plot))
        res.info["workload"] = f"built-in example '{args.name}': {EXAMPLES[args.name]}"
        return emit(res, args)


def _shown(path: str) -> str:
    """An input's file name; a Chakra prefix (no extension) as its ``<rank>.et`` files."""
    name = os.path.basename(path)
    return name if os.path.splitext(name)[1] else f"{name}.<rank>.et"
