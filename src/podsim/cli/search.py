"""podsim search: the best training layouts of a model on a number of GPUs."""

from __future__ import annotations

import argparse
import sys

from .options import add_backend, add_cluster, add_workers, count_arg, count_bar, positive_arg

EPILOG_SEARCH = """examples:
  podsim search --model llama3-8b --gpu h100 --gpus 64 --global-batch 256 --seq-len 8192
  podsim search --model llama3-70b --gpu h100 --gpus 512,1024 --global-batch 1024 --seq-len 8192 \\
      --objective mfu --top 5 --json best.json
  podsim search --model llama3-8b --gpu h100 --gpus 8,16,32 --global-batch 64 --objective cost \\
      --gpu-hour-price 2.5   # the cheapest tokens at $2.50 a GPU-hour

Every layout of TP, PP, VPP, CP, EP, micro-batch, recomputation, sequence parallelism and the
distributed optimizer (the values: --tp-values and the like) that the model takes and that fits
in the GPU's memory is simulated as `podsim llm` would; each row prints the `podsim llm` command
that reproduces it.  In progress (issue #15): no Ray or HTML report yet."""

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


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("search", help="find the best training layouts of an LLM on N GPUs", epilog=EPILOG_SEARCH,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a zoo model (podsim llm --list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    s.add_argument("--gpu", default="a100-80gb", metavar="NAME", help="a GPU key or alias, as in podsim llm")
    s.add_argument("--gpus", type=_ints, required=True, metavar="N[,N...]", help="GPU counts to search")
    s.add_argument("--global-batch", type=count_arg, required=True, metavar="B", help="sequences per iteration")
    s.add_argument("--seq-len", type=count_arg, default=2048, metavar="S")
    s.add_argument("--objective", default="tokens", choices=["tokens", "mfu", "time", "cost"],
                   help="rank by tokens/s (default), MFU, iteration time or cost per million tokens")
    s.add_argument("--gpu-hour-price", type=positive_arg, default=None, metavar="USD",
                   help="the price of one GPU-hour in US dollars: rows then say their cost per million tokens "
                        "(needed by --objective cost)")
    s.add_argument("--top", type=count_arg, default=10, metavar="K", help="layouts to print (default 10)")
    add_workers(s)
    for dim, default in (("tp", "1,2,4,8"), ("pp", "1,2,4,8,16"), ("vpp", "1,2"), ("cp", "1"), ("ep", "1"),
                         ("micro-batch", "1,2,4")):
        s.add_argument(f"--{dim}-values", type=_ints, default=_ints(default), metavar="N,N,...",
                       help=f"{dim.upper() if dim != 'micro-batch' else 'micro-batch'} values to try (default {default})")
    add_cluster(s, "the cluster (default: as podsim llm picks for the GPU)")
    add_backend(s)
    s.add_argument("--store", metavar="PATH", help="a results store (DuckDB file; pip install podsim[search]): "
                   "every evaluated layout is added as it finishes, and a search run again skips what it holds")
    s.add_argument("--json", metavar="OUT", help="evaluated, rejected (by reason) and the best layouts, as JSON")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_search(args: argparse.Namespace) -> int:
    import json

    from ..fileio import atomic_write_text
    from ..hardware.gpu import get_gpu
    from ..sweep.search import load_model, search
    from ..sweep.space import Space

    model = load_model(args.model, args.model_config)
    gpu = get_gpu(args.gpu)
    model_arg = f"--model {args.model}" if args.model else f"--model-config {args.model_config}"
    space = Space(gpus=args.gpus, global_batch=args.global_batch, seq_len=args.seq_len, tp=args.tp_values,
                  pp=args.pp_values, vpp=args.vpp_values, cp=args.cp_values, ep=args.ep_values,
                  micro_batch=args.micro_batch_values)

    progress = count_bar("evaluated {done}/{total} layouts")
    res = search(model, model_arg, space, args.gpu, gpu.memory_gib, args.cluster, args.backend, args.objective,
                 args.workers, progress, args.store, args.gpu_hour_price)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(f"podsim search: {model.name} on {', '.join(map(str, args.gpus))} x {gpu.name}, global batch "
          f"{args.global_batch} x {args.seq_len} tokens: {res.evaluated:,} layouts evaluated"
          + (f" ({res.reused:,} more taken from {args.store})" if res.reused else "")
          + f", {sum(res.rejected.values()):,} rejected")
    for reason, n in res.rejected.most_common():
        print(f"  rejected {n:>6,}: {reason}")
    cost = args.gpu_hour_price is not None
    print(f"\n  {'#':>3}  {'tokens/s':>12}  {'MFU':>6}  {'iter (s)':>9}  {'mem (GiB)':>9}"
          + (f"  {'$/Mtok':>8}" if cost else "") + "  layout")
    for i, r in enumerate(res.rows[:args.top], 1):
        lay = r["layout"]
        desc = (f"gpus {lay['gpus']} tp {lay['tp']} pp {lay['pp']} vpp {lay['vpp']} cp {lay['cp']} ep {lay['ep']} "
                f"dp {lay['dp']} mb {lay['micro_batch']} recompute {lay['recompute']}"
                + (" sp" if lay["sequence_parallel"] else "") + (" dist-opt" if lay["distributed_optimizer"] else ""))
        print(f"  {i:>3}  {r['tokens_per_s']:>12,.0f}  {r['mfu']:>6.3f}  {r['iteration_time_s']:>9.3f}  "
              f"{r['memory_peak_gib']:>9.1f}  " + (f"{r['cost_per_mtok_usd']:>8.3f}  " if cost else "") + desc)
    if res.rows:
        print(f"\n  reproduce the best: {res.rows[0]['command']}")
    if args.json:
        out = {"model": model.name, "gpu": gpu.name, "objective": args.objective, "evaluated": res.evaluated,
               "reused": res.reused,
               "rejected": dict(res.rejected.most_common()), "best": res.rows[:args.top]}
        atomic_write_text(args.json, json.dumps(out, indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0
