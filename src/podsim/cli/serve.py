"""podsim serve and serve-workload: inference serving (DLSIM) and its workloads."""

from __future__ import annotations

import argparse
import os

from ..api.serve import (
    MEMORY_CHECKS,
    SCHEDULERS,
    ServeJob,
    describe_schedulers,
    generate_workload,
    numbers,
    per_model,
    serve,
    whole_numbers,
    write_workload,
)
from ..errors import InputError
from ..report.serving import (
    format_serve_summary,
    plot_latency_cdf,
    summarize,
    write_serve_json,
    write_serving_trace,
)
from .options import (
    add_cluster,
    count_arg,
    natural_arg,
    non_negative_arg,
    positive_arg,
)


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
    sv = sub.add_parser("serve", help="simulate inference serving: requests, model placements, per-GPU queues "
                        "(DLSIM's flags work)", epilog=EPILOG_SERVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sv.add_argument("-w", "--workload", help="a DLSIM workload CSV, or a request trace CSV with a header naming "
                    "model_id and arrival_s columns (replayed as recorded)")
    sv.add_argument("--closed-loop", metavar="C0,C1,...",
                    help="instead of -w: closed-loop clients per model (each sends, waits, thinks, sends again)")
    sv.add_argument("--think-ms", type=non_negative_arg, default=0.0, metavar="MS",
                    help="with --closed-loop: mean think time between a response and the next request (default 0)")
    sv.add_argument("--duration", type=positive_arg, default=None, metavar="S",
                    help="with --closed-loop: seconds clients keep sending (required)")
    sv.add_argument("--slos", default=None, metavar="S0,S1,...",
                    help="SLOs in seconds per model (or one for all): for --closed-loop and request traces, or to "
                         "override a workload's")
    sv.add_argument("--seed", type=natural_arg, default=0, help="with --closed-loop: seed of the think times")
    sv.add_argument("-p", "--placement", required=True, help="a placement (DLSIM's JSON, or YAML)")
    add_cluster(sv, "GPUs per node and memory from a cluster preset or YAML (nodes: -n, default what the "
                    "placement uses)")
    sv.add_argument("-n", "--num-nodes", "--num_nodes", dest="num_nodes", type=count_arg, default=None,
                    help="nodes (default 1, or what the placement uses with --cluster)")
    sv.add_argument("-d", "--num-devices-per-node", "--num_devices_per_node", dest="gpus_per_node", type=count_arg,
                    default=None, help="GPUs per node (default 2)")
    sv.add_argument("-c", "--memory-capacity", "--memory_capacity", dest="memory_gb", type=positive_arg, default=None,
                    help="GPU memory in GB (default 16)")
    sv.add_argument("--profile", default=None, metavar="FILE",
                    help="executables' stage shapes and latencies (YAML; default: DLSIM's V100 profile)")
    sv.add_argument("--scheduler", default=ServeJob.scheduler, choices=SCHEDULERS.spellings(),
                    help=f"replica choice (serve-llm's --router): {describe_schedulers()}")
    sv.add_argument("--dispatch-overhead", default="dlsim", metavar="dlsim|none|MS",
                    help="added to a stage's start when its mesh is busy: dlsim (3 ms multi-stage, 4 ms single-"
                         "stage), none, or a number of ms")
    sv.add_argument("--drop-late", action="store_true",
                    help="drop a request whose predicted finish misses its SLO (AlpaServe)")
    sv.add_argument("--memory-check", default=ServeJob.memory_check, choices=MEMORY_CHECKS,
                    help="placements whose weights exceed a GPU's memory: refuse (default), warn, or skip the check")
    sv.add_argument("--name", default=None, help="run name (default: the workload's); names the Chrome trace")
    sv.add_argument("--trace", "--chrome-trace", "--chrome_trace", dest="chrome_trace", nargs="?", const="",
                    default=None, metavar="OUT",
                    help="write a Chrome/Perfetto trace (default chrome_trace/<name>.json; --chrome_trace is "
                         "DLSIM's spelling)")
    sv.add_argument("--json", metavar="OUT", help="write the statistics and every request as JSON")
    sv.add_argument("--cdf", metavar="OUT.png", help="plot the latency CDF (needs matplotlib)")
    sv.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    sw = sub.add_parser("serve-workload", help="write serving workloads (DLSIM's CSV): open-loop Poisson or Gamma "
                        "arrivals", epilog=EPILOG_SERVE_WORKLOAD, formatter_class=argparse.RawDescriptionHelpFormatter)
    swsub = sw.add_subparsers(dest="action", metavar="ACTION")
    gen = swsub.add_parser("generate", help="generate arrivals")
    gen.add_argument("--models", type=count_arg, required=True, metavar="N", help="number of models")
    gen.add_argument("--rate", type=positive_arg, default=None, metavar="RPS",
                     help="total requests per second (with --proportions; default equal shares)")
    gen.add_argument("--proportions", default=None, metavar="P0,P1,...", help="each model's share of --rate")
    gen.add_argument("--rates", default=None, metavar="R0,R1,...", help="each model's own rate (instead of --rate)")
    gen.add_argument("--duration", type=positive_arg, required=True, metavar="S", help="seconds of arrivals")
    gen.add_argument("--cv", type=non_negative_arg, default=1.0, help="coefficient of variation of the gaps (1: Poisson; "
                     "other: Gamma)")
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
    for flag, path in (("--json", args.json), ("--cdf", args.cdf), ("--chrome-trace", args.chrome_trace)):
        if path and os.path.isdir(path):
            raise InputError(f"{path} is a folder; give the file to write", where=flag)
    job = ServeJob(
        placement=_dlsim_path(args.placement, "placements"),
        workload=None if args.workload is None else _dlsim_path(args.workload, "workload"),
        closed_loop=None if args.closed_loop is None else whole_numbers(args.closed_loop, "--closed-loop"),
        think_ms=args.think_ms, duration_s=args.duration,
        slos_s=None if args.slos is None else tuple(numbers(args.slos, "--slos")), seed=args.seed,
        profile=args.profile, cluster=args.cluster, num_nodes=args.num_nodes, gpus_per_node=args.gpus_per_node,
        memory_gb=args.memory_gb, scheduler=args.scheduler, dispatch_overhead=args.dispatch_overhead,
        drop_late=args.drop_late, memory_check=args.memory_check, name=args.name)
    result = serve(job)
    doc = summarize(result)
    print(format_serve_summary(doc))
    name = args.name or result.workload.name or "serve"
    if args.chrome_trace is not None:
        out = args.chrome_trace or os.path.join("chrome_trace", f"{name}.json")
        write_serving_trace(result, out)
        print(f"\n  wrote {out} (open it at https://ui.perfetto.dev)")
    if args.json:
        write_serve_json(doc, name, args.json)
        print(f"  wrote {args.json}")
    if args.cdf:
        plot_latency_cdf(result, args.cdf)
        print(f"  wrote {args.cdf}")
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
    w = generate_workload(args.models, args.rate or 0.0, args.duration, proportions=props, rates=rates, cv=args.cv,
                          slos_s=slos, seed=args.seed, name=name)
    write_workload(w, args.out)
    print(f"podsim serve-workload: {len(w)} requests of {args.models} model(s) over {args.duration:g} s "
          f"({len(w) / args.duration:.3f} req/s) -> {args.out}")
    return 0
