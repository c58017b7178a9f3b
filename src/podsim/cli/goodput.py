"""podsim goodput: how long a training run takes once failures, checkpoints and restarts count."""

from __future__ import annotations

import argparse

from ..api.goodput import GOODPUT_PARAMS, GoodputJob, goodput
from ..api.jobs import echo
from ..report.goodput import format_goodput, goodput_json, plot_goodput
from ..report.json_out import write_document
from .options import add_params

EPILOG_GOODPUT = """examples:
  podsim goodput --model llama3-8b --gpu h100 --gpus 1024 --tp 8 --global-batch 1024 \\
      --train-tokens 1e12 --json goodput.json
  podsim goodput --model llama3-405b --gpu h100 --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 \\
      --last-stage-layers 7 --global-batch 2048 --seq-len 8192 --sequence-parallel \\
      --distributed-optimizer --recompute full --days 54 --storage-bandwidth 2000
  podsim goodput --model llama3-70b --gpu h100 --gpus 100000 --tp 8 --pp 4 --global-batch 12500 \\
      --seq-len 8192 --sequence-parallel --distributed-optimizer --recompute full --train-tokens 15e12 \\
      --checkpoint-mode async --seed 1
  podsim goodput --model llama3-8b --gpu h100 --gpus 4096 --tp 8 --global-batch 4096 --days 30 \\
      --checkpoint-mode memory --checkpoint-interval 1800 --plot goodput.png
      # your own failure rates: --reliability FILE.yaml (docs/goodput.md)

The step is simulated as `podsim llm` does (the same layout flags); failures by kind follow the
shipped rates (docs/goodput.md: each with its source) or --reliability; the checkpoint's size
follows podsim's memory model.  Goodput: Daly's expected-time model at the best interval (Young's
and Daly's estimates next to it); time to train: a seeded Monte Carlo (p10/p50/p90)."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"goodput": "_run_goodput"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.goodput.GoodputJob`."""
    g = sub.add_parser(
        "goodput",
        help="time to train a model under failures: interruptions, checkpoints, goodput",
        epilog=EPILOG_GOODPUT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(g, GOODPUT_PARAMS)
    g.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_goodput(args: argparse.Namespace) -> int:
    job = GoodputJob.from_values(vars(args))
    r = goodput(job)
    print(format_goodput(r))
    out = job.outputs
    if out.json:
        write_document({**goodput_json(r), "inputs": echo(job)}, out.json)
        print(f"  wrote {out.json}")
    if out.plot:
        plot_goodput(r, out.plot)
        print(f"  wrote {out.plot} (goodput vs GPUs and vs checkpoint interval)")
    return 0
