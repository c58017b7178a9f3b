"""podsim sweep: any podsim run over a grid or list of parameter values and hardware what-ifs,
into one table (and a results store that lets it resume)."""

from __future__ import annotations

import argparse
import sys
import time

from ..api.sweep import SWEEP_PARAMS, SweepJob, example_spec, sweep, sweep_examples, write_example
from ..errors import InputError
from ..report.sweep import check_output_files, format_examples, format_sweep, write_sweep_csv, write_sweep_json
from .options import add_params, count_bar, count_status

EPILOG_SWEEP = """examples:
  podsim sweep --example collective          # a built-in spec: all-reduce, NIC and NVLink what-ifs
  podsim sweep --example llm --write llm.yaml --store llm.duckdb   # keep the spec to edit
  podsim sweep llm.yaml --store llm.duckdb --workers 4 --csv llm.csv
  podsim sweep llm.yaml --store llm.duckdb --ray head-node:6379   # on a Ray cluster
  podsim sweep --list

A spec (YAML) names a run (llm, goodput, collective, simulate, serve, serve-llm), its parameters
(the subcommand's flags: fixed values, a grid whose product is taken, and/or a list of points) and hardware
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
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.sweep.SweepJob` (not those of its runs: a spec names them)."""
    s = sub.add_parser(
        "sweep",
        help="run llm, goodput, collective, simulate, serve or serve-llm over a grid of parameters and hardware "
        "what-ifs, into one table",
        epilog=EPILOG_SWEEP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(s, SWEEP_PARAMS)
    s.add_argument("--list", action="store_true", help="list the built-in specs")
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
    job = SweepJob.from_values(vars(args))
    if (job.spec is None) == (job.example is None):
        raise InputError(
            "give a sweep spec (podsim sweep SPEC.yaml) or a built-in one (--example NAME, see --list), one of them"
        )
    if job.write and not job.example:
        raise InputError("--write keeps a built-in spec: use it with --example NAME", where="--write")
    check_output_files({"--csv": job.csv, "--write": job.write})
    spec = example_spec(job.example) if job.example else job.spec
    if job.write:
        write_example(job.example, job.write)
        print(f"podsim sweep: wrote the spec of '{job.example}' to {job.write}")
    res = sweep(
        spec,
        store=job.store,
        workers=job.workers,
        ray=job.ray,
        progress=_progress("evaluated {done}/{total} points"),
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(format_sweep(res))
    if res.rows and res.failed == len(res.rows):  # nothing was evaluated: the table says why, then an error
        raise InputError(f"every one of the {len(res.rows):,} points failed; the first: {res.rows[0]['error']}")
    if job.csv:
        write_sweep_csv(res, job.csv)
        print(f"  wrote {job.csv}")
    if job.json:
        write_sweep_json(res, job.json)
        print(f"  wrote {job.json}")
    return 0
