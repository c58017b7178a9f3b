"""podsim serve and serve-workload: inference serving (DLSIM) and its workloads."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from ..api.jobs import SERVE_PARAMS, ServeCommand, echo
from ..api.serve import SERVE_WORKLOAD_PARAMS, ServeWorkloadJob, generate, serve, write_workload
from ..errors import InputError
from ..report.serving import (
    format_serve_summary,
    plot_latency_cdf,
    summarize,
    write_serve_json,
    write_serving_trace,
)
from .options import add_params

EPILOG_SERVE = """examples:
  podsim serve -n 1 -d 2 -c 16 -w test_workload_8to2_6.667Hz_20s -p placement_intraop.json --chrome_trace
  podsim serve --cluster dgx-a100-superpod -w w.csv -p placement.yaml --scheduler least-outstanding \\
      --json out.json --cdf latency.png
  podsim serve --closed-loop 8,2 --think-ms 50 --duration 60 --slos 0.25 -p placement_intraop.json

Model i of the workload goes to the i-th service of the placement (in order of first
appearance).  Latencies in ms; SLO attainment counts dropped requests as misses."""


EPILOG_SERVE_WORKLOAD = """examples:
  podsim serve-workload generate --models 2 --rate 6.667 --proportions 0.8,0.2 --duration 20 \\
      --slos 0.25 -o skewed.csv                       # DLSIM's generator (Poisson)
  podsim serve-workload generate --models 4 --rates 8,4,2,1 --cv 4 --duration 60 -o bursty.csv

Arrivals start at t = 0 (DLSIM's convention); the file is DLSIM's workload CSV."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"serve": "_run_serve", "serve-workload": "_run_serve_workload"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add these subcommands to ``sub`` (argparse's subparsers): the flags of ``serve`` are the
    parameters of :class:`~podsim.jobs.serve.ServeCommand`, those of ``serve-workload generate``
    the parameters of :class:`~podsim.jobs.serve_workload.ServeWorkloadJob`."""
    sv = sub.add_parser(
        "serve",
        help="simulate inference serving: requests, model placements, per-GPU queues (DLSIM's flags work)",
        epilog=EPILOG_SERVE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(sv, SERVE_PARAMS)
    sv.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    sw = sub.add_parser(
        "serve-workload",
        help="write serving workloads (DLSIM's CSV): open-loop Poisson or Gamma arrivals",
        epilog=EPILOG_SERVE_WORKLOAD,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    swsub = sw.add_subparsers(dest="action", metavar="ACTION")
    gen = swsub.add_parser(
        "generate",
        help="generate arrivals",
        description="Generate open-loop arrivals (Poisson, or Gamma with --cv) and write DLSIM's workload CSV.",
    )
    add_params(gen, SERVE_WORKLOAD_PARAMS)
    gen.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _dlsim_path(path: str, folder: str) -> str:
    """``path``, or DLSIM's ``./workload/<path>`` / ``./placements/<path>`` where only that
    exists (DLSIM's command line names its inputs so)."""
    if not os.path.exists(path) and os.path.isfile(os.path.join(folder, path)):
        return os.path.join(folder, path)
    return path


def _run_serve(args: argparse.Namespace) -> int:
    cmd = ServeCommand.from_values(vars(args))
    out = cmd.outputs
    for flag, path in (("--json", out.json), ("--cdf", out.cdf), ("--chrome-trace", out.trace)):
        if path and os.path.isdir(path):
            raise InputError(f"{path} is a folder; give the file to write", where=flag)
    job = cmd.job
    if job.placement is None:
        raise InputError("give a placement: -p FILE (DLSIM's JSON, or YAML)", where="-p")
    job = replace(
        job,
        placement=_dlsim_path(job.placement, "placements"),
        workload=None if job.workload is None else _dlsim_path(job.workload, "workload"),
    )
    result = serve(job)
    doc = summarize(result)
    print(format_serve_summary(doc))
    name = job.name or result.workload.name or "serve"
    if out.trace is not None:
        path = out.trace or os.path.join("chrome_trace", f"{name}.json")
        write_serving_trace(result, path)
        print(f"\n  wrote {path} (open it at https://ui.perfetto.dev)")
    if out.json:
        write_serve_json({**doc, "inputs": echo(cmd)}, name, out.json)
        print(f"  wrote {out.json}")
    if out.cdf:
        plot_latency_cdf(result, out.cdf)
        print(f"  wrote {out.cdf}")
    return 0


def _run_serve_workload(args: argparse.Namespace) -> int:
    if args.action != "generate":
        raise InputError("say what to do: podsim serve-workload generate ... (see --help)")
    job = ServeWorkloadJob.from_values(vars(args))
    w = generate(job)
    write_workload(w, job.out)
    print(
        f"podsim serve-workload: {len(w)} requests of {job.models} model(s) over {job.duration_s:g} s "
        f"({len(w) / job.duration_s:.3f} req/s) -> {job.out}"
    )
    return 0
