"""podsim search: the best training layouts of a model on a number of GPUs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..api.jobs import SEARCH_PARAMS, SearchCommand, echo
from ..api.search import check_kind, search, write_search_report
from ..errors import InputError
from ..report.json_out import write_document
from ..report.search import format_search
from .options import add_params, count_bar

EPILOG_SEARCH = """examples:
  podsim search --model llama3-8b --gpu h100 --gpus 64 --global-batch 256 --seq-len 8192
  podsim search --model llama3-70b --gpu h100 --gpus 512,1024 --global-batch 1024 --seq-len 8192 \\
      --objective mfu --top 5 --flow-top 5 --json best.json --report best.html
  podsim search --model llama3-8b --gpu h100 --gpus 8,16,32 --global-batch 64 --objective cost \\
      --gpu-hour-price 2.5   # the cheapest tokens at $2.50 a GPU-hour
  podsim search --model llama3-70b --gpu h100 --gpus 1024 --global-batch 1024 --ray head:6379
  podsim search --model llama3-405b --gpu h100 --gpus 1024 --global-batch 512 --seq-len 8192 \\
      --tp-values 8 --pp-values 8,16 --stack torchtitan   # on torchtitan: FSDP, its even pipeline split
  podsim search --model llama3-70b --gpu h100 --gpus 2048,4096 --global-batch 2048 --seq-len 8192 \
      --goodput --train-tokens 15e12   # ranked by the time to train with failures (docs/goodput.md)
  podsim search --model llama3-70b --gpu h100 --gpus 8 --workload poisson:2,prompt=uniform:1000-3000,output=256 \\
      --slo-ttft 2 --slo-tpot 0.05 --tp-values 2,4,8 --pd-values off,all --objective cost   # ways to serve

Every layout of TP, PP, VPP, CP, EP, micro-batch, recomputation, sequence parallelism, the
distributed optimizer / ZeRO and the overlap options (the values: --tp-values and the like)
that the model takes and that fits in the GPU's memory is first estimated in closed form (the
same kernel and collective times as the simulation), then the best --simulate-top are simulated
exactly as `podsim llm` would (a small space is simulated whole); each row prints the
`podsim llm` command that reproduces it.  --store keeps every result in a DuckDB file, so that
a search run again evaluates only what is missing.  --stack runs every layout on a software
stack, as `podsim llm --stack` does: its rules fill the dimensions whose values are left at
their defaults (docs/search.md).

With --workload it ranks the ways to serve the model instead (TP, PP, EP per replica, the
replicas the GPUs leave, scheduler, token budget, P/D split), each at its capacity under the
SLOs (podsim serve-llm --find-capacity), by requests/s per GPU or cost per million output
tokens; each row prints the podsim serve-llm command that reproduces it (docs/serving-llm.md)."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"search": "_run_search"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.search.SearchJob` and its outputs."""
    s = sub.add_parser(
        "search",
        help="find the best training layouts of an LLM on N GPUs",
        epilog=EPILOG_SEARCH,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(s, SEARCH_PARAMS)
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_search(args: argparse.Namespace) -> int:
    cmd = SearchCommand.from_values(vars(args))
    job, out = cmd.job, cmd.outputs
    check_kind(job, ["--report"] if out.report is not None else [])
    if out.report and (Path(args.report).is_dir() or not Path(args.report).resolve().parent.is_dir()):
        raise InputError("cannot write the report there: give a file in an existing folder", out.report, "--report")
    words = {
        "screen": "estimated {done}/{total} layouts",
        "simulate": "simulated {done}/{total} best layouts",
        "flow": "flow backend: {done}/{total} best layouts",
        "serve": "capacity of {done}/{total} ways to serve",
    }
    bars: dict = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase not in bars:
            if bars and sys.stderr.isatty():
                sys.stderr.write("\n")
            bars[phase] = count_bar(words[phase])
        bars[phase](done, total)

    ranked = search(job, progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(format_search(ranked, out.top))
    if out.json:
        write_document({**ranked.to_dict(out.top), "inputs": echo(cmd)}, out.json)
        print(f"  wrote {out.json}")
    if out.report:
        write_search_report(out.report, ranked, out.top)  # type: ignore[arg-type]
        print(f"  wrote {out.report}")
    return 0
