"""podsim sweep: any podsim run over a grid or list of parameter values and hardware what-ifs,
into one table (and a results store that lets it resume)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

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
    s = sub.add_parser("sweep", help="run llm, collective, simulate or serve over a grid of parameters and "
                       "hardware what-ifs, into one table", epilog=EPILOG_SWEEP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("spec", nargs="?", metavar="SPEC.yaml", help="the sweep spec (docs/sweep.md)")
    s.add_argument("--example", metavar="NAME", help="run a built-in spec instead (see --list)")
    s.add_argument("--list", action="store_true", help="list the built-in specs")
    s.add_argument("--write", metavar="SPEC.yaml", help="with --example: also keep its spec in this file")
    s.add_argument("--store", metavar="PATH", help="a results store (DuckDB file; pip install podsim[search]): "
                   "every point is added as it finishes, and a sweep run again skips what it holds (default: the "
                   "spec's store, if it names one)")
    add_workers(s)
    s.add_argument("--json", metavar="OUT", help="write the table as JSON (rows and their columns)")
    s.add_argument("--csv", metavar="OUT", help="write the table as CSV (every column)")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _progress(what: str):  # type: ignore[no-untyped-def]
    """``progress(done, total)``: :func:`count_bar` on a terminal; elsewhere (a log, a CI job) a
    line on stderr at each tenth of the points at most once a second, and at the end."""
    import time
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


def _cell(v: Any) -> str:
    """A table cell: integers with separators, numbers to 4 significant figures (whole from
    1,000 up)."""
    import math
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a == 0:
            return "0"
        if a < 1e-4:
            return f"{v:.3e}"
        return f"{v:.{max(0, 3 - math.floor(math.log10(a)))}f}"
    return str(v)


def format_table(res) -> str:  # type: ignore[no-untyped-def]
    """The sweep's table for the terminal: the swept parameters, the what-if, the run's main
    metrics (their units in their names)."""
    spec = res.spec
    cols = [spec.run.param(p).column for p in spec.swept]
    if len(spec.whatifs) > 1:
        cols.append("what_if")
    cols += list(spec.run.shown)
    cells = [[_cell(r[c]) if not (r["error"] and c in spec.run.metrics) else "error" for c in cols] for r in res.rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    numeric = [all(_numeric(r[c]) for r in res.rows) for c in cols]

    def line(vals: list[str]) -> str:
        return "  " + "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(c) for c in cells])


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _run_sweep(args: argparse.Namespace) -> int:
    import csv
    import io
    import json

    from ..errors import InputError
    from ..fileio import atomic_write_text, check_output_file
    from ..sweep.examples import SWEEP_EXAMPLES
    from ..sweep.spec import load_spec, spec_from_text
    from ..sweep.sweep import run_sweep

    if args.list:
        for k, (what, _) in SWEEP_EXAMPLES.items():
            print(f"  {k:<12} {what}")
        return 0
    if (args.spec is None) == (args.example is None):
        raise InputError("give a sweep spec (podsim sweep SPEC.yaml) or a built-in one (--example NAME, see --list), "
                         "one of them")
    if args.write and not args.example:
        raise InputError("--write keeps a built-in spec: use it with --example NAME", where="--write")
    for flag, path in (("--csv", args.csv), ("--write", args.write)):
        if path:
            check_output_file(path, flag)
    if args.example:
        if args.example not in SWEEP_EXAMPLES:
            from ..errors import unknown_key_error
            raise unknown_key_error(args.example, SWEEP_EXAMPLES, None, "example")
        text = SWEEP_EXAMPLES[args.example][1]
        spec = spec_from_text(text, f"built-in example {args.example!r}", None, args.example)
        if args.write:
            atomic_write_text(args.write, text)
            print(f"podsim sweep: wrote the spec of '{args.example}' to {args.write}")
    else:
        spec = load_spec(args.spec)
    points = spec.expand()
    store = args.store or spec.store
    progress = _progress("evaluated {done}/{total} points")
    res = run_sweep(spec, store, args.workers, args.ray, progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    n_w = len(spec.whatifs)
    n_p = len({json.dumps(p.params, sort_keys=True, default=str) for p in points})
    runs = f"{n_p:,} point{'s' if n_p > 1 else ''}" + (f" x {n_w} what-ifs = {len(points):,} runs" if n_w > 1 else "")
    print(f"podsim sweep: {spec.name} ({spec.run.name}, {runs}): {res.evaluated:,} evaluated"
          + (f", {res.reused:,} taken from {store}" if store else "")
          + (f", {res.failed:,} failed (see the error column)" if res.failed else ""))
    print()
    print(format_table(res))
    if res.failed:
        print(f"\n  {res.failed} run{'s' if res.failed > 1 else ''} failed:")
        for r in [r for r in res.rows if r["error"]][:5]:
            label = ", ".join(f"{p} {_cell(r[spec.run.param(p).column])}" for p in spec.swept)
            label += (", " if label else "") + (r["what_if"] if n_w > 1 else "")
            print(f"    {label.rstrip(', ')}: {r['error']}")
        if res.failed > 5:
            print(f"    ... {res.failed - 5} more (--csv or --json, or the store, hold every error)")
    if store:
        print(f"\n  results store: {store} (table 'sweep'; duckdb.connect({store!r}).sql('from sweep').df())")
    columns = res.columns
    if args.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in res.rows:
            w.writerow(["" if r[c] is None else r[c] for c in columns])
        atomic_write_text(args.csv, buf.getvalue())
        print(f"  wrote {args.csv}")
    if args.json:
        doc = {"sweep": spec.name, "run": spec.run.name, "source": spec.source, "store": store,
               "runs": len(points), "evaluated": res.evaluated, "reused": res.reused, "failed": res.failed,
               "columns": columns, "rows": res.rows}
        atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0
