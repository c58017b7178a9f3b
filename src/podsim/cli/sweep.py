"""podsim sweep: any podsim run over a grid or list of parameter values and hardware what-ifs,
into one table (and a results store that lets it resume)."""

from __future__ import annotations

import argparse
import sys
import time

from ..api.sweep import example_spec, sweep, sweep_examples, write_example
from ..errors import InputError
from ..report.sweep import check_output_files, format_examples, format_sweep, write_sweep_csv, write_sweep_json
from .options import add_workers, count_bar, count_status

EPILOG_SWEEP = """examples:
  podsim sweep --example collective          # a built-in spec: all-reduce, NIC and NVLink what-ifs
  podsim sweep --example llm --write llm.yaml --store llm.duckdb   # keep the spec to edit
  podsim sweep llm.yaml --store llm.duckdb --workers 4 --csv llm.csv
  podsim sweep llm.yaml --store llm.duckdb --ray head-node:6379   # on a Ray cluster
  podsim sweep --list

A spec (YAML) names a run (llm, collective, simulate, serve), its parameters (the subcommand's
flags: fixed values, a grid whose product is taken, and/or a list of points) and hardware
what-ifs (GPU peak x 2, NIC bandwidth halved, another fabric), each crossed with every point:

  run: llm
  fixed: {model: llama3-8b, gpu: h100, global-batch: 256, seq-len: 4096}
  grid: {gpus: [64, 128], tp: [2, 4, 8]}
  what-if: [{name: baseline}, {name: 2x peak, gpu: {peak_scale: 2}}]

With --store, every point is added to a DuckDB file as soon as it finishes; run again, the sweep
evaluates only what the store lacks.  Columns and units: docs/sweep.md."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"sweep": "_run_sweep"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser(
        "sweep",
        help="run llm, collective, simulate or serve over a grid of parameters and hardware what-ifs, into one table",
        epilog=EPILOG_SWEEP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("spec", nargs="?", metavar="SPEC.yaml", help="the sweep spec (docs/sweep.md)")
    s.add_argument("--example", metavar="NAME", help="run a built-in spec instead (see --list)")
    s.add_argument("--list", action="store_true", help="list the built-in specs")
    s.add_argument("--write", metavar="SPEC.yaml", help="with --example: also keep its spec in this file")
    s.add_argument(
        "--store",
        metavar="PATH",
        help="a results store (DuckDB file; pip install podsim[search]): "
        "every point is added as it finishes, and a sweep run again skips what it holds (default: the "
        "spec's store, if it names one)",
    )
    add_workers(s)
    s.add_argument("--json", metavar="OUT", help="write the table as JSON (rows and their columns)")
    s.add_argument("--csv", metavar="OUT", help="write the table as CSV (every column)")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _progress(what: str):  # type: ignore[no-untyped-def]
    """``progress(done, total)``: :func:`count_bar` on a terminal; elsewhere (a log, a CI job) a
    line on stderr at each tenth of the points at most once a second, and at the end."""
    if sys.stderr.isatty():
        return count_bar(what)
    start = time.perf_counter()
    last = {"step": 0, "at": start}

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        step = 10 * done // max(total, 1)
        if total and done and (done == total or (step > last["step"] and now - last["at"] >= 1)):
            last.update(step=step, at=now)
            print("  " + count_status(what, done, total, now - start), file=sys.stderr, flush=True)

    return show


def _run_sweep(args: argparse.Namespace) -> int:
    if args.list:
        print(format_examples(sweep_examples()))
        return 0
    if (args.spec is None) == (args.example is None):
        raise InputError(
            "give a sweep spec (podsim sweep SPEC.yaml) or a built-in one (--example NAME, see --list), one of them"
        )
    if args.write and not args.example:
        raise InputError("--write keeps a built-in spec: use it with --example NAME", where="--write")
    check_output_files({"--csv": args.csv, "--write": args.write})
    spec = example_spec(args.example) if args.example else args.spec
    if args.write:
        write_example(args.example, args.write)
        print(f"podsim sweep: wrote the spec of '{args.example}' to {args.write}")
    res = sweep(
        spec,
        store=args.store,
        workers=args.workers,
        ray=args.ray,
        progress=_progress("evaluated {done}/{total} points"),
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(format_sweep(res))
    if args.csv:
        write_sweep_csv(res, args.csv)
        print(f"  wrote {args.csv}")
    if args.json:
        write_sweep_json(res, args.json)
        print(f"  wrote {args.json}")
    return 0
