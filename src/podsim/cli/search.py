"""podsim search: the best training layouts of a model on a number of GPUs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..api.search import (
    DEFAULT_ROUTER,
    FLOW_TOP,
    RECOMPUTE,
    ROUTERS,
    SCHEDULERS,
    SIMULATE_TOP,
    TP_OVERLAP,
    SearchJob,
    check_kind,
    job_fields,
    search,
    write_search_report,
)
from ..errors import InputError
from ..report.json_out import write_document
from ..report.search import format_search
from .options import (
    add_backend,
    add_cluster,
    add_workers,
    count_arg,
    count_bar,
    natural_arg,
    non_negative_arg,
    positive_arg,
)

EPILOG_SEARCH = """examples:
  podsim search --model llama3-8b --gpu h100 --gpus 64 --global-batch 256 --seq-len 8192
  podsim search --model llama3-70b --gpu h100 --gpus 512,1024 --global-batch 1024 --seq-len 8192 \\
      --objective mfu --top 5 --flow-top 5 --json best.json --report best.html
  podsim search --model llama3-8b --gpu h100 --gpus 8,16,32 --global-batch 64 --objective cost \\
      --gpu-hour-price 2.5   # the cheapest tokens at $2.50 a GPU-hour
  podsim search --model llama3-70b --gpu h100 --gpus 1024 --global-batch 1024 --ray head:6379
  podsim search --model llama3-70b --gpu h100 --gpus 8 --workload poisson:2,prompt=uniform:1000-3000,output=256 \
      --slo-ttft 2 --slo-tpot 0.05 --tp-values 2,4,8 --pd-values off,all --objective cost   # ways to serve

Every layout of TP, PP, VPP, CP, EP, micro-batch, recomputation, sequence parallelism, the
distributed optimizer / ZeRO and the overlap options (the values: --tp-values and the like)
that the model takes and that fits in the GPU's memory is first estimated in closed form (the
same kernel and collective times as the simulation), then the best --simulate-top are simulated
exactly as `podsim llm` would (a small space is simulated whole); each row prints the
`podsim llm` command that reproduces it.  --store keeps every result in a DuckDB file, so that
a search run again evaluates only what is missing.

With --workload it ranks the ways to serve the model instead (TP, PP, EP per replica, the
replicas the GPUs leave, scheduler, token budget, P/D split), each at its capacity under the
SLOs (podsim serve-llm --find-capacity), by requests/s per GPU or cost per million output
tokens; each row prints the podsim serve-llm command that reproduces it (docs/serving-llm.md)."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"search": "_run_search"}


def _ints(text: str) -> tuple[int, ...]:
    """``1,2,4``: whole numbers >= 1 (argparse type)."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return out


def _zero(text: str) -> tuple[int, ...]:
    """``0,1,2,3``: ZeRO stages (argparse type)."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        out = ()
    if not out or any(z not in (0, 1, 2, 3) for z in out):
        raise argparse.ArgumentTypeError(f"expected ZeRO stages 0-3 separated by commas, got {text!r}")
    return out


def _words(choices: tuple[str, ...]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> tuple[str, ...]:
        out = tuple(x.strip() for x in text.split(","))
        bad = [x for x in out if x not in choices]
        if bad or not out:
            raise argparse.ArgumentTypeError(f"expected some of {', '.join(choices)} separated by commas, got {text!r}")
        return out
    return parse


def _switches(text: str) -> tuple[bool, ...]:
    """``on``, ``off`` or ``on,off`` (argparse type)."""
    words = {"on": True, "off": False, "true": True, "false": False}
    out = tuple(words.get(x.strip().lower(), None) for x in text.split(","))  # type: ignore[misc]
    if not out or any(x is None for x in out):
        raise argparse.ArgumentTypeError(f"expected on, off or on,off, got {text!r}")
    return tuple(dict.fromkeys(out))  # type: ignore[arg-type]


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("search", help="find the best training layouts of an LLM on N GPUs", epilog=EPILOG_SEARCH,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a zoo model (podsim llm --list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    s.add_argument("--gpu", default="a100-80gb", metavar="NAME", help="a GPU key or alias, as in podsim llm")
    s.add_argument("--gpus", type=_ints, required=True, metavar="N[,N...]", help="GPU counts to search")
    s.add_argument("--global-batch", type=count_arg, default=None, metavar="B",
                   help="sequences per iteration (a training search needs it)")
    s.add_argument("--seq-len", type=count_arg, default=None, metavar="S", help="tokens per sequence (default 2048)")
    s.add_argument("--objective", default=None, choices=["tokens", "mfu", "time", "cost", "capacity"],
                   help="rank by tokens/s (default), MFU, time (an iteration's, or to train --train-tokens) or cost "
                        "per million tokens; a serving search by capacity (requests/s per GPU meeting the SLOs, its "
                        "default), tokens (output tokens/s per GPU at capacity) or cost (per million output tokens)")
    s.add_argument("--gpu-hour-price", type=positive_arg, default=None, metavar="USD",
                   help="the price of one GPU-hour in US dollars: rows then say their cost per million tokens "
                        "(with --objective cost and no price, the GPU's price in --gpu-prices)")
    s.add_argument("--train-tokens", type=positive_arg, default=None, metavar="N",
                   help="tokens to train (e.g. 15e12): rows then say the hours it takes (time_to_train_h)")
    s.add_argument("--gpu-prices", metavar="FILE", default=None,
                   help="a YAML file of GPU-hour prices ({gpu key: {usd_per_gpu_hour: USD}}; default: podsim's "
                        "hardware/prices.yaml, published on-demand prices of 2026)")
    s.add_argument("--memory-reserve", type=non_negative_arg, default=0.0, metavar="GIB",
                   help="GiB per GPU to keep free of the model's states and activations (the CUDA context, NCCL's "
                        "buffers, the allocator's fragmentation); a layout must fit in the rest (default 0)")
    s.add_argument("--top", type=count_arg, default=10, metavar="K", help="layouts to print (default 10)")
    add_workers(s)
    for dim, default in (("tp", "1,2,4,8"), ("pp", "1,2,4,8,16"), ("vpp", "1,2"), ("cp", "1"), ("ep", "1"),
                         ("micro-batch", "1,2,4")):
        s.add_argument(f"--{dim}-values", type=_ints, default=None if dim == "pp" else _ints(default),
                       metavar="N,N,...",
                       help=f"{dim.upper() if dim != 'micro-batch' else 'micro-batch'} values to try (default "
                       f"{default}" + ("; a serving search: 1)" if dim == "pp" else ")"))
    s.add_argument("--zero-values", type=_zero, default=(0,), metavar="N,N,...",
                   help="ZeRO stages to try besides the distributed optimizer (0-3; default 0)")
    for name, choices, default in (("recompute", RECOMPUTE, ",".join(RECOMPUTE)), ("tp-overlap", TP_OVERLAP, "te")):
        s.add_argument(f"--{name}-values", type=_words(choices), default=tuple(default.split(",")), metavar="X,X,...",
                       help=f"{name} values to try, of {', '.join(choices)} (default {default})")
    for name, default in (("sequence-parallel", "on,off"), ("distributed-optimizer", "on,off"),
                          ("overlap-grad-reduce", "on"), ("overlap-param-gather", "on")):
        s.add_argument(f"--{name}-values", type=_switches, default=_switches(default), metavar="on,off",
                       help=f"{name.replace('-', ' ')} on, off or both (default {default})")
    s.add_argument("--simulate-top", type=count_arg, default=SIMULATE_TOP, metavar="N",
                   help=f"after every layout is estimated in closed form, simulate the best N exactly as podsim llm "
                        f"does (default {SIMULATE_TOP}; a space of at most N layouts is simulated whole)")
    s.add_argument("--flow-top", type=natural_arg, default=FLOW_TOP, metavar="N",
                   help="re-run the best N with the flow backend (congestion) as well (default 0)")
    s.add_argument("--report", metavar="OUT.html", help="write an HTML report: the Pareto front, the best "
                   "layouts' time breakdown and memory per stage, filters by parallel dimension")
    add_cluster(s, "the cluster (default: as podsim llm picks for the GPU)")
    add_backend(s)
    s.add_argument("--store", metavar="PATH", help="a results store (DuckDB file; pip install podsim[search]): "
                   "every evaluated layout is added as it finishes, and a search run again skips what it holds")
    s.add_argument("--json", metavar="OUT", help="evaluated, rejected (by reason) and the best layouts, as JSON")
    g = s.add_argument_group("a serving search (--workload): the ways to serve the model on --gpus GPUs (TP, PP, EP "
                             "per replica, the replicas the GPUs leave, scheduler, token budget, P/D split), each at "
                             "its capacity: the highest request rate meeting the SLOs (podsim serve-llm "
                             "--find-capacity)")
    g.add_argument("--workload", metavar="TRACE.csv|poisson:QPS[,...]", default=None,
                   help="the requests (as podsim serve-llm --workload): makes this a serving search")
    g.add_argument("--requests", type=count_arg, default=1000, metavar="N",
                   help="requests of each capacity run (default 1000; more make a steadier answer at high rates)")
    g.add_argument("--slo-ttft", type=positive_arg, default=None, metavar="S", help="time-to-first-token SLO (s)")
    g.add_argument("--slo-tpot", type=positive_arg, default=None, metavar="S", help="time-per-output-token SLO (s)")
    g.add_argument("--capacity-target", type=positive_arg, default=0.99, metavar="SHARE",
                   help="the share of requests that must meet the SLOs (default 0.99)")
    g.add_argument("--scheduler-values", type=_words(SCHEDULERS.names()), default=("vllm", "sarathi"),
                   metavar="X,X,...",
                   help=f"schedulers to try, of {', '.join(SCHEDULERS.names())} (default vllm,sarathi)")
    g.add_argument("--chunk-values", type=_ints, default=(512, 2048, 8192), metavar="N,N,...",
                   help="token budgets of a step to try (vllm's --max-batched-tokens, sarathi's --chunk-size; default "
                        "512,2048,8192)")
    g.add_argument("--pd-values", default="off", metavar="off,P:D,all",
                   help="prefill/decode splits to try: off (mixed replicas; default), P:D, all (every split)")
    g.add_argument("--router", default=DEFAULT_ROUTER, choices=list(ROUTERS.spellings()),
                   help="how requests are spread over replicas (default round-robin)")
    g.add_argument("--max-context", type=count_arg, default=None, metavar="TOKENS",
                   help="the model's context (default: the model's)")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_search(args: argparse.Namespace) -> int:
    job = SearchJob(**{name: getattr(args, name) for name in job_fields()})
    check_kind(job, ["--report"] if args.report is not None else [])
    if args.report and (Path(args.report).is_dir() or not Path(args.report).resolve().parent.is_dir()):
        raise InputError("cannot write the report there: give a file in an existing folder", args.report, "--report")
    words = {"screen": "estimated {done}/{total} layouts", "simulate": "simulated {done}/{total} best layouts",
             "flow": "flow backend: {done}/{total} best layouts", "serve": "capacity of {done}/{total} ways to serve"}
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
    print(format_search(ranked, args.top))
    if args.json:
        write_document(ranked.to_dict(args.top), args.json)
        print(f"  wrote {args.json}")
    if args.report:
        write_search_report(args.report, ranked, args.top)   # type: ignore[arg-type]
        print(f"  wrote {args.report}")
    return 0
