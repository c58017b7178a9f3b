"""podsim search: the best training layouts of a model on a number of GPUs."""

from __future__ import annotations

import argparse
import sys

from ..serving.llm.router import DEFAULT_ROUTER, ROUTERS
from ..serving.llm.schedulers import SCHEDULERS
from ..sweep.search import FLOW_TOP, SIMULATE_TOP
from .options import add_backend, add_cluster, add_workers, count_arg, count_bar, natural_arg, non_negative_arg, positive_arg

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
                   help="rank by tokens/s (default), MFU, time (an iteration's, or to train --train-tokens) or cost per "
                        "million tokens; a serving search by capacity (requests/s per GPU meeting the SLOs, its "
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
                       metavar="N,N,...", help=f"{dim.upper() if dim != 'micro-batch' else 'micro-batch'} values to try "
                       f"(default {default}" + ("; a serving search: 1)" if dim == "pp" else ")"))
    s.add_argument("--zero-values", type=_zero, default=(0,), metavar="N,N,...",
                   help="ZeRO stages to try besides the distributed optimizer (0-3; default 0)")
    for name, choices, default in (("recompute", ("none", "selective", "full"), "none,selective,full"),
                                   ("tp-overlap", ("te", "async", "none"), "te")):
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


#: the options only a training search takes, and those only a serving search (--workload) takes
_TRAINING_ONLY = ("global_batch", "seq_len", "vpp_values", "cp_values", "micro_batch_values", "zero_values",
                  "recompute_values", "tp_overlap_values", "sequence_parallel_values", "distributed_optimizer_values",
                  "overlap_grad_reduce_values", "overlap_param_gather_values", "simulate_top", "flow_top",
                  "memory_reserve", "train_tokens", "backend", "store", "report")
_SERVING_ONLY = ("requests", "slo_ttft", "slo_tpot", "capacity_target", "scheduler_values", "chunk_values",
                 "pd_values", "router", "max_context")


def _given(args: argparse.Namespace, dests: tuple[str, ...]) -> list[str]:
    """The options of ``dests`` given other values than their defaults, as flags."""
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers())
    defaults = vars(p.parse_args(["search", "--model", "m", "--gpus", "1"]))
    return ["--" + d.replace("_", "-") for d in dests if getattr(args, d) != defaults[d]]


def _run_search(args: argparse.Namespace) -> int:
    from ..errors import InputError

    if args.workload is not None:
        given = _given(args, _TRAINING_ONLY)
        if given:
            raise InputError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for a training search; a "
                             "serving search (--workload) takes --requests, --slo-ttft, --slo-tpot, "
                             "--scheduler-values, --chunk-values, --pd-values and the like", where=given[0])
        return _run_serving_search(args)
    given = _given(args, _SERVING_ONLY)
    if given:
        raise InputError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for a serving search: give "
                         "--workload TRACE.csv|poisson:QPS,... as well", where=given[0])
    if args.global_batch is None:
        raise InputError("a training search needs --global-batch B (or --workload for a serving search)",
                         where="--global-batch")
    return _run_training_search(args)


def _run_serving_search(args: argparse.Namespace) -> int:
    import json

    from ..fileio import atomic_write_text
    from ..hardware.gpu import get_gpu
    from ..sweep.search import gpu_hour_price, load_model
    from ..sweep.serving_search import RequestMix, ServingSpace, parse_pd, search_serving

    model = load_model(args.model, args.model_config)
    gpu = get_gpu(args.gpu)
    model_arg = f"--model {args.model}" if args.model else f"--model-config {args.model_config}"
    objective = args.objective or "capacity"
    price, price_note = args.gpu_hour_price, ""
    if price is None:
        from ..errors import InputError
        try:
            price = gpu_hour_price(args.gpu, args.gpu_prices)
            price_note = (f"  a GPU-hour of the {gpu.name} at ${price:g} ({args.gpu_prices or 'podsim/hardware/prices.yaml'}"
                          "; --gpu-hour-price USD sets another)")
        except InputError:
            if objective == "cost" or args.gpu_prices:
                raise
    space = ServingSpace(gpus=args.gpus, tp=args.tp_values, pp=args.pp_values or (1,), ep=args.ep_values,
                         scheduler=args.scheduler_values, chunk=args.chunk_values,
                         pd=tuple(parse_pd(args.pd_values)))
    workload = RequestMix(args.workload, args.requests, args.slo_ttft, args.slo_tpot, args.capacity_target,
                        args.router, args.max_context)
    bar = count_bar("capacity of {done}/{total} ways to serve")
    res = search_serving(model, model_arg, args.gpu, space, workload, objective, args.cluster, price,
                         args.workers, args.ray, bar)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    ok = [r for r in res.rows if not r["error"]]
    slos = " and ".join([f"TTFT <= {args.slo_ttft:g} s"] * (args.slo_ttft is not None)
                        + [f"TPOT <= {args.slo_tpot:g} s"] * (args.slo_tpot is not None))
    print(f"podsim search: serving {model.name} on {', '.join(map(str, args.gpus))} x {gpu.name}, {args.workload} "
          f"({args.requests} requests a run), {slos} for {100 * args.capacity_target:g}% of requests: "
          f"{res.evaluated:,} ways evaluated, {len(res.rows) - len(ok):,} could not serve; "
          f"{sum(res.rejected.values()):,} rejected")
    for reason, n in res.rejected.most_common():
        print(f"  rejected {n:>6,}: {reason}")
    if price_note:
        print(price_note)
    cost = price is not None
    print(f"\n  {'#':>3}  {'req/s':>8}  {'req/s/GPU':>9}  {'tok/s/GPU':>9}  {'TTFT p99':>8}  {'TPOT p99':>8}"
          + (f"  {'$/Mtok':>8}" if cost else "") + "  serving")
    for i, r in enumerate(res.rows[:args.top], 1):
        desc = (f"gpus {r['gpus']} tp {r['tp']} pp {r['pp']}" + (f" ep {r['ep']}" if r["ep"] > 1 else "")
                + (f" replicas {r['replicas']}" if r["pd"] == "off" else f" pd {r['pd']}") + f" {r['scheduler']}"
                + (f" chunk {r['chunk']}" if r["chunk"] is not None else ""))
        if r["error"]:
            print(f"  {i:>3}  {'-':>8}  {'-':>9}  {'-':>9}  {'-':>8}  {'-':>8}" + (f"  {'-':>8}" if cost else "")
                  + f"  {desc}: {r['error']}")
            continue

        def ms(x: float | None) -> str:
            return f"{'-':>8}" if x is None else f"{1e3 * x:6.0f}ms"
        print(f"  {i:>3}  {r['capacity_qps']:>8.3g}  {r['capacity_qps_per_gpu']:>9.3g}  {r['tokens_per_s_per_gpu']:>9,.0f}"
              f"  {ms(r['ttft_p99_s'])}  {ms(r['tpot_p99_s'])}"
              + (f"  {r['cost_per_mtok_usd']:>8.3f}" if cost and r["cost_per_mtok_usd"] is not None else
                 f"  {'-':>8}" if cost else "") + f"  {desc}")
    shaky = sum(1 for r in res.rows[:args.top] if not r["error"] and not r["steady"])
    if shaky:
        print(f"\n  note: {shaky} of these rows' runs at capacity end before their queues can fill (arrivals over less "
              "than 10 mean end-to-end latencies): their capacity is optimistic; give more --requests")
    if ok:
        print(f"\n  reproduce the best: {ok[0]['command']}")
    doc = {"model": model.name, "gpu": gpu.name, "gpus": list(args.gpus), "workload": args.workload,
           "requests": args.requests, "slo_ttft_s": args.slo_ttft, "slo_tpot_s": args.slo_tpot,
           "capacity_target": args.capacity_target, "objective": objective, "usd_per_gpu_hour": price,
           "evaluated": res.evaluated, "rejected": dict(res.rejected.most_common()), "best": res.rows[:args.top]}
    if args.json:
        atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0


def _run_training_search(args: argparse.Namespace) -> int:
    import json

    from ..errors import InputError
    from ..fileio import atomic_write_text
    from ..hardware.gpu import get_gpu
    from ..sweep.search import gpu_hour_price, load_model, search
    from ..sweep.space import Space

    if args.objective == "capacity":
        raise InputError("capacity ranks a serving search (--workload); a training search ranks by tokens, mfu, time "
                         "or cost", where="--objective")
    args.objective = args.objective or "tokens"
    args.seq_len = args.seq_len or 2048
    args.pp_values = args.pp_values or (1, 2, 4, 8, 16)
    model = load_model(args.model, args.model_config)
    gpu = get_gpu(args.gpu)
    model_arg = f"--model {args.model}" if args.model else f"--model-config {args.model_config}"
    space = Space(gpus=args.gpus, global_batch=args.global_batch, seq_len=args.seq_len, tp=args.tp_values,
                  pp=args.pp_values, vpp=args.vpp_values, cp=args.cp_values, ep=args.ep_values,
                  micro_batch=args.micro_batch_values, recompute=args.recompute_values,
                  sequence_parallel=args.sequence_parallel_values,
                  distributed_optimizer=args.distributed_optimizer_values, zero=args.zero_values,
                  tp_overlap=args.tp_overlap_values, overlap_grad_reduce=args.overlap_grad_reduce_values,
                  overlap_param_gather=args.overlap_param_gather_values)
    if args.report:
        from pathlib import Path
        if Path(args.report).is_dir() or not Path(args.report).resolve().parent.is_dir():
            raise InputError("cannot write the report there: give a file in an existing folder", args.report,
                             "--report")
    words = {"screen": "estimated {done}/{total} layouts", "simulate": "simulated {done}/{total} best layouts",
             "flow": "flow backend: {done}/{total} best layouts"}
    bars: dict = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase not in bars:
            if bars and sys.stderr.isatty():
                sys.stderr.write("\n")
            bars[phase] = count_bar(words[phase])
        bars[phase](done, total)

    price = args.gpu_hour_price
    if price is None and (args.objective == "cost" or args.gpu_prices):
        price = gpu_hour_price(args.gpu, args.gpu_prices)
        print(f"podsim search: a GPU-hour of the {gpu.name} at ${price:g} ({args.gpu_prices or 'podsim/hardware/prices.yaml'}"
              "; --gpu-hour-price USD sets another)")
    room = gpu.memory_gib - args.memory_reserve
    if room <= 0:
        raise InputError(f"the {gpu.name} has {gpu.memory_gib:g} GiB: a reserve of {args.memory_reserve:g} GiB "
                         "leaves nothing", where="--memory-reserve")
    res = search(model, model_arg, space, args.gpu, room, args.cluster, args.backend, args.objective,
                 args.workers, progress, args.store, price, args.simulate_top, args.flow_top,
                 args.ray, args.train_tokens)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(f"podsim search: {model.name} on {', '.join(map(str, args.gpus))} x {gpu.name}, global batch "
          f"{args.global_batch} x {args.seq_len} tokens: {res.evaluated:,} layouts evaluated "
          f"({res.evaluated - res.simulated:,} estimated, {res.simulated:,} simulated"
          + (f", {res.flow} also with the flow backend" if res.flow else "") + ")"
          + (f", {res.reused:,} results taken from {args.store}" if res.reused else "")
          + f"; {sum(res.rejected.values()):,} rejected")
    for reason, n in res.rejected.most_common():
        print(f"  rejected {n:>6,}: {reason}")
    cost = price is not None
    flow = res.flow > 0
    print(f"\n  {'#':>3}  {'tokens/s':>12}  {'MFU':>6}  {'iter (s)':>9}" + (f"  {'flow (s)':>9}" if flow else "")
          + f"  {'mem (GiB)':>9}" + (f"  {'$/Mtok':>8}" if cost else "")
          + (f"  {'train (h)':>10}" if args.train_tokens else "") + "  layout")
    for i, r in enumerate(res.rows[:args.top], 1):
        lay = r["layout"]
        desc = (f"gpus {lay['gpus']} tp {lay['tp']} pp {lay['pp']} vpp {lay['vpp']} cp {lay['cp']} ep {lay['ep']} "
                f"dp {lay['dp']} mb {lay['micro_batch']} recompute {lay['recompute']}"
                + (" sp" if lay["sequence_parallel"] else "") + (" dist-opt" if lay["distributed_optimizer"] else "")
                + (f" zero-{lay['zero']}" if lay["zero"] else "")
                + (f" tp-overlap {lay['tp_overlap']}" if lay["tp"] > 1 and lay["tp_overlap"] != "te" else "")
                + ("" if lay["overlap_grad_reduce"] else " no-overlap-grad-reduce")
                + ("" if r["method"] == "simulated" else "  (estimated)"))
        fl = r.get("flow")
        print(f"  {i:>3}  {r['tokens_per_s']:>12,.0f}  {r['mfu']:>6.3f}  {r['iteration_time_s']:>9.3f}  "
              + (f"{fl['iteration_time_s']:>9.3f}  " if fl else " " * 11 if flow else "")
              + f"{r['memory_peak_gib']:>9.1f}  " + (f"{r['cost_per_mtok_usd']:>8.3f}  " if cost else "")
              + (f"{r['time_to_train_h']:>10,.1f}  " if args.train_tokens else "") + desc)
    if res.rows:
        print(f"\n  reproduce the best: {res.rows[0]['command']}")
    doc = {"model": model.name, "gpu": gpu.name, "gpus": list(args.gpus), "global_batch": args.global_batch,
           "seq_len": args.seq_len, "objective": args.objective, "train_tokens": args.train_tokens, "evaluated": res.evaluated,
           "simulated": res.simulated, "flow": res.flow, "reused": res.reused,
           "rejected": dict(res.rejected.most_common()), "best": res.rows[:min(args.top, res.simulated)]}
    if args.json:
        atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
        print(f"  wrote {args.json}")
    if args.report:
        from ..sweep.report import write_report
        write_report(args.report, dict(doc, rows=res.rows))
        print(f"  wrote {args.report}")
    return 0
