"""podsim serve and serve-workload: inference serving (DLSIM) and its workloads."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from ..api.jobs import SERVE_PARAMS, ServeCommand
from ..api.serve import generate_workload, numbers, per_model, serve, write_workload
from ..errors import InputError
from ..report.serving import (
    format_serve_summary,
    plot_latency_cdf,
    summarize,
    write_serve_json,
    write_serving_trace,
)
from .options import add_params, count_arg, natural_arg, non_negative_arg, positive_arg

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
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
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
    gen = swsub.add_parser("generate", help="generate arrivals")
    gen.add_argument("--models", type=count_arg, required=True, metavar="N", help="number of models")
    gen.add_argument(
        "--rate",
        type=positive_arg,
        default=None,
        metavar="RPS",
        help="total requests per second (with --proportions; default equal shares)",
    )
    gen.add_argument("--proportions", default=None, metavar="P0,P1,...", help="each model's share of --rate")
    gen.add_argument("--rates", default=None, metavar="R0,R1,...", help="each model's own rate (instead of --rate)")
    gen.add_argument("--duration", type=positive_arg, required=True, metavar="S", help="seconds of arrivals")
    gen.add_argument(
        "--cv",
        type=non_negative_arg,
        default=1.0,
        help="coefficient of variation of the gaps (1: Poisson; other: Gamma)",
    )
    gen.add_argument("--slos", default=None, metavar="S0,S1,...", help="each model's SLO in seconds (or one for all)")
    gen.add_argument("--seed", type=natural_arg, default=0)
    gen.add_argument("--name", default=None, help="the workload's name (default: the output file's)")
    gen.add_argument("-o", "--out", required=True, metavar="FILE")
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
        write_serve_json(doc, name, out.json)
        print(f"  wrote {out.json}")
    if out.cdf:
        plot_latency_cdf(result, out.cdf)
        print(f"  wrote {out.cdf}")
    return 0


def _run_serve_workload(args: argparse.Namespace) -> int:
    if args.action != "generate":
        raise InputError("say what to do: podsim serve-workload generate ... (see --help)")
    rates = None if args.rates is None else numbers(args.rates, "--rates")
    props = None if args.proportions is None else numbers(args.proportions, "--proportions")
    slos = per_model(None if args.slos is None else numbers(args.slos, "--slos"), args.models, "--slos")
    if (rates is None) == (args.rate is None):
        raise InputError("give --rate (with optional --proportions) or --rates, one of them", where="--rate")
    name = args.name or os.path.basename(args.out)
    w = generate_workload(
        args.models,
        args.rate or 0.0,
        args.duration,
        proportions=props,
        rates=rates,
        cv=args.cv,
        slos_s=slos,
        seed=args.seed,
        name=name,
    )
    write_workload(w, args.out)
    print(
        f"podsim serve-workload: {len(w)} requests of {args.models} model(s) over {args.duration:g} s "
        f"({len(w) / args.duration:.3f} req/s) -> {args.out}"
    )
    return 0
