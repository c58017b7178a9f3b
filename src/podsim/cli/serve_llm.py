"""podsim serve-llm: LLM inference serving on replicas (continuous batching, a paged KV cache,
schedulers, routers, prefill/decode disaggregation; issue #16)."""

from __future__ import annotations

import argparse

from .options import (
    host_overhead_arg,
    add_cluster,
    announce,
    count_arg,
    count_bar,
    non_negative_arg,
    positive_arg,
)

EPILOG = """examples:
  podsim serve-llm --model llama2-70b --gpu h100 --tp 4 --replicas 4 \\
      --workload ../shared/data/llm-serving/azure_llm_2023_conv.csv --max-context 16384 \\
      --slo-ttft 2 --slo-tpot 0.1 --json conv.json --plot conv.png
  podsim serve-llm --model llama3-8b --gpu h100 --workload poisson:20,prompt=lognormal:1000:0.5,output=128 \\
      --requests 2000 --scheduler sarathi --chunk-size 512 --trace steps.json
  podsim serve-llm --model llama3-70b --gpu h100 --tp 4 --pd 2:2 --workload poisson:8,prompt=2048,output=256 \\
      --requests 1000 --router least-outstanding --slo-ttft 1 --slo-tpot 0.05
  podsim serve-llm --model llama3-8b --gpu a100 --workload poisson:1,prompt=uniform:500-1500,output=200 \\
      --requests 500 --slo-ttft 0.5 --slo-tpot 0.05 --find-capacity

Workloads: a trace CSV (arrived_at, num_prefill_tokens, num_decode_tokens: the Azure LLM trace as
Vidur keeps it; or the raw release's TIMESTAMP, ContextTokens, GeneratedTokens)
or poisson:QPS[,prompt=D,output=D,seed=S] / gamma:QPS,cv=C[,...] with lengths D = N,
uniform:A-B or lognormal:MEDIAN:SIGMA.  vLLM's defaults follow `vllm serve`: 8192 batched
tokens and 1024 sequences on GPUs of 70 GiB or more other than the A100, else 2048 and 256.
vllm-v0's default budget is the model's context (at least 2048 tokens) and 256 sequences.
Latencies in s (ms in the summary); docs/serving-llm.md lists every field."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"serve-llm": "_run_serve_llm"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("serve-llm", help="simulate LLM serving: requests on replicas with continuous batching, a "
                       "paged KV cache, schedulers (vLLM, Sarathi, Orca, ...), routers and P/D disaggregation",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a zoo model (podsim llm --list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    s.add_argument("--gpu", default="a100-80gb", metavar="NAME", help="a GPU key or alias, as in podsim llm")
    add_cluster(s, "the cluster whose fabric carries the TP / EP collectives and the P/D KV transfers (default: "
                   "the GPU's preset)")
    s.add_argument("--tp", type=count_arg, default=1, help="tensor-parallel GPUs of a replica")
    s.add_argument("--pp", type=count_arg, default=1, help="pipeline stages of a replica")
    s.add_argument("--ep", type=count_arg, default=1, help="expert-parallel degree (MoE models)")
    s.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp8"], help="weights and GEMMs")
    s.add_argument("--kv-cache-dtype", default=None, choices=["bf16", "fp16", "fp8"],
                   help="the KV cache's element type (default bf16)")
    s.add_argument("--host-overhead-ms", type=host_overhead_arg, default=0.0, metavar="MS|eager|cuda-graphs",
                   help="CPU time per step that the GPU waits for (scheduling, input preparation, sampling; "
                        "default 0), or eager / cuda-graphs: the host time measured on this GPU for such an "
                        "engine, by the step's sequences (docs/serving-llm.md, 'Measured serving steps')")
    s.add_argument("--profile", metavar="DIR", help="step times from measured tables in Vidur's profile layout "
                   "(as podsim infer --profile)")
    s.add_argument("--replicas", type=count_arg, default=None, metavar="R", help="model replicas (default 1)")
    s.add_argument("--workload", required=True, metavar="TRACE.csv|poisson:QPS[,...]",
                   help="a request trace CSV or a generator (see below)")
    s.add_argument("--requests", type=count_arg, default=None, metavar="N",
                   help="the first N requests of a trace (default all), or N generated ones (default 1000)")
    s.add_argument("--scheduler", default="vllm", metavar="NAME",
                   help="vllm (V1: chunked prefill, token budget, recompute preemption; default), vllm-v0 (V0's "
                        "prefill-first steps, whole prompts), sarathi, orca, static (FasterTransformer), lightllm")
    s.add_argument("--max-num-seqs", type=count_arg, default=None, metavar="N",
                   help="most requests running on a replica (vllm default: see below; others 256)")
    s.add_argument("--max-batched-tokens", type=count_arg, default=None, metavar="N",
                   help="token budget of a step (vllm default: see below; orca, static, lightllm: none)")
    s.add_argument("--chunk-size", type=count_arg, default=None, metavar="N",
                   help="sarathi's token budget of a step (default 512)")
    s.add_argument("--router", default="round-robin", metavar="NAME",
                   help="round-robin (default), least-outstanding, jsq (fewest tokens to compute), kv-aware (most "
                        "free KV blocks)")
    s.add_argument("--slo-ttft", type=positive_arg, default=None, metavar="S", help="time-to-first-token SLO (s)")
    s.add_argument("--slo-tpot", type=positive_arg, default=None, metavar="S", help="time-per-output-token SLO (s)")
    s.add_argument("--pd", default=None, metavar="P:D",
                   help="prefill/decode disaggregation: P prefill and D decode replicas (instead of --replicas)")
    s.add_argument("--pd-backend", default="flow", choices=["flow", "analytical", "link"],
                   help="P/D KV transfers on the cluster's fabric: flow (they share links, default) or analytical "
                        "(no contention); link: a fixed link of --pd-bandwidth and --pd-latency")
    s.add_argument("--pd-bandwidth", type=positive_arg, default=50.0, metavar="GB/s",
                   help="--pd-backend link: each GPU's bandwidth (10^9 B/s, default 50)")
    s.add_argument("--pd-latency", type=non_negative_arg, default=10.0, metavar="US",
                   help="--pd-backend link: latency in microseconds (default 10)")
    s.add_argument("--prefix-hit-rate", type=non_negative_arg, default=0.0, metavar="H",
                   help="share of each prompt found in the prefix cache (0 to below 1; default 0: the trace's "
                        "prefix_id column, if any)")
    s.add_argument("--spec-decode", default=None, metavar="K:A",
                   help="speculative decoding: draft length K, acceptance rate A (e.g. 4:0.7)")
    s.add_argument("--preemption", default="recompute", choices=["recompute", "swap"],
                   help="how a request gives up its KV blocks when the cache is full: recompute (vLLM V1; default) "
                        "or swap (to host memory and back, vLLM V0's swap mode)")
    s.add_argument("--swap-space", type=non_negative_arg, default=4.0, metavar="GIB",
                   help="--preemption swap: host memory for swapped blocks, GiB per GPU (vLLM's default 4)")
    s.add_argument("--swap-bandwidth", type=positive_arg, default=25.0, metavar="GB/s",
                   help="--preemption swap: GPU-host copies, GB/s per GPU (default 25, PCIe 4.0 x16; ~50 on PCIe 5.0)")
    s.add_argument("--draft-model", metavar="NAME|FILE", default=None,
                   help="--spec-decode: the draft model (a zoo name or a HuggingFace config.json), run on the "
                        "replica's GPUs at its TP: its passes add to each step and its weights and KV cache take "
                        "memory (default: drafts cost nothing)")
    s.add_argument("--kv-blocks", type=count_arg, default=None, metavar="N",
                   help="KV blocks per replica (default: what GPU memory holds after weights and activations)")
    s.add_argument("--block-size", type=count_arg, default=16, metavar="TOKENS", help="KV block size (default 16)")
    s.add_argument("--max-context", type=count_arg, default=None, metavar="TOKENS",
                   help="the model's context: longer prompt + output is refused (default: the model's)")
    s.add_argument("--find-capacity", action="store_true",
                   help="binary-search the highest request rate meeting the SLOs (the workload's requests re-timed "
                        "as Poisson arrivals, a generator's own process)")
    s.add_argument("--capacity-target", type=positive_arg, default=0.99, metavar="SHARE",
                   help="--find-capacity: the share of requests that must meet the SLOs (default 0.99)")
    s.add_argument("--gpu-hour-price", type=positive_arg, default=None, metavar="USD",
                   help="the price of one GPU-hour in US dollars: the summary and JSON then say the cost per million "
                        "output tokens")
    s.add_argument("--json", metavar="OUT", help="write the result as JSON (fields: docs/serving-llm.md)")
    s.add_argument("--trace", "--chrome-trace", dest="trace", metavar="OUT",
                   help="write a Perfetto/Chrome trace JSON: a track per replica, a slice per step")
    s.add_argument("--plot", metavar="OUT.png", help="draw latency CDFs and KV use as a PNG (needs matplotlib)")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _draft(name: str | None):  # type: ignore[no-untyped-def]
    """The draft model: a zoo name, or a HuggingFace-style config file (a path that exists or
    ends in .json)."""
    if name is None:
        return None
    from pathlib import Path

    from ..sweep.search import load_model
    if name.endswith(".json") or Path(name).exists():
        return load_model(None, name)
    return load_model(name, None)


def _cost(gpus: int, usd_per_gpu_hour: float, tokens_per_s: float | None) -> dict[str, object]:
    """The JSON document's cost fields: ``gpus``, ``usd_per_gpu_hour`` and ``cost_per_mtok_usd``
    (US dollars per million output tokens at ``tokens_per_s``)."""
    from ..serving.llm.run import usd_per_mtok
    return {"gpus": gpus, "usd_per_gpu_hour": usd_per_gpu_hour,
            "cost_per_mtok_usd": usd_per_mtok(gpus, usd_per_gpu_hour, tokens_per_s)}


def _run_serve_llm(args: argparse.Namespace) -> int:
    import json
    import sys

    from ..errors import InputError
    from ..fileio import atomic_write_text
    from ..serving.llm.metrics import format_summary
    from ..serving.llm.requests import is_generator, load_requests, parse_generator
    from ..serving.llm.run import PDLink, ReplicaSpec, parse_pair, prepare, requests_at
    from ..serving.llm.simulate import ServeConfig
    from ..sweep.search import load_model
    from .options import clear_progress_line

    model = load_model(args.model, args.model_config)
    pd = parse_pair(args.pd, "--pd", whole=True)
    if pd is not None and args.replicas is not None and args.replicas != sum(pd):
        raise InputError(f"--pd {args.pd} makes {sum(pd)} replicas, --replicas says {args.replicas}", where="--pd")
    cfg = ServeConfig(replicas=args.replicas or 1, scheduler=args.scheduler, max_num_seqs=args.max_num_seqs,
                      max_batched_tokens=args.max_batched_tokens, chunk_size=args.chunk_size, router=args.router,
                      pd=pd, block_size=args.block_size, kv_blocks=args.kv_blocks,
                      max_context=args.max_context or model.seq_len, prefix_hit_rate=args.prefix_hit_rate,
                      spec_decode=parse_pair(args.spec_decode, "--spec-decode"), slo_ttft_s=args.slo_ttft,
                      slo_tpot_s=args.slo_tpot, preemption=args.preemption, swap_space_gib=args.swap_space,
                      swap_bandwidth_gbps=args.swap_bandwidth)
    serving = prepare(ReplicaSpec(model, args.gpu, args.tp, args.pp, args.ep, args.precision, args.kv_cache_dtype,
                                  args.host_overhead_ms, args.cluster, args.profile, _draft(args.draft_model)),
                      cfg, PDLink(args.pd_backend, args.pd_bandwidth, args.pd_latency))
    cfg = serving.config
    try:
        requests = load_requests(args.workload, args.requests)
    except InputError as e:
        raise e if e.source or e.where else InputError(e.message, where="--workload") from None
    where = serving.describe()

    def serve(reqs, record: bool, what: str):  # type: ignore[no-untyped-def]
        bar = count_bar(what)
        r = serving.run(reqs, record_steps=record, progress=bar)
        clear_progress_line(bar if sys.stderr.isatty() else None)
        return r

    if args.find_capacity:
        gen = parse_generator(args.workload) if is_generator(args.workload) else None
        cap = serving.capacity(requests, gen, args.capacity_target,
                               run_at=lambda q, reqs: serve(reqs, False, f"{q:.3g} req/s: served {{done}}/{{total}} "
                                                                          "requests"))
        print(f"podsim serve-llm --find-capacity: {where}, {len(requests)} requests a run, "
              f"{args.scheduler} scheduler, {args.router} router")
        for q, a in cap.probes:
            print(f"  {q:10.4g} req/s   SLO met by {100 * a:5.1f}%   {'meets' if a >= args.capacity_target else '-'}")
        print(f"  capacity: {cap.qps:.4g} req/s meet the SLOs for {100 * args.capacity_target:g}% of requests"
              + (f" ({cap.upper_qps:.4g} req/s do not)" if cap.upper_qps is not None else ""))
        from ..serving.llm.run import transient_note
        note = transient_note(cap.result) if cap.result is not None else None
        if note:
            print(f"  note: at capacity, {note}")
        doc = cap.to_dict()
        if args.gpu_hour_price is not None:
            tps = cap.qps * sum(r.output_tokens for r in requests) / len(requests)
            doc.update(_cost(serving.gpus, args.gpu_hour_price, tps))
            if doc["cost_per_mtok_usd"] is not None:
                print(f"  cost: ${doc['cost_per_mtok_usd']:.4g} per million output tokens at capacity "
                      f"({tps:,.0f} output tokens/s on {serving.gpus} GPUs at ${args.gpu_hour_price:g} a GPU-hour)")
        if args.json:
            atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
            print(f"  wrote {args.json}")
        if cap.result is None or not (args.trace or args.plot):
            return 0
        result = cap.result
        if args.trace:
            result = serve(requests_at(requests, gen, cap.qps), True, "served {done}/{total} requests")
    else:
        result = serve(requests, bool(args.trace), "served {done}/{total} requests")
        result.info["notes"] = [f"{where}; KV cache {result.info['kv_blocks']:,} blocks of "
                                f"{cfg.block_size} tokens a replica"]
        print(format_summary(result))
        doc = result.to_dict()
        if args.gpu_hour_price is not None:
            doc.update(_cost(serving.gpus, args.gpu_hour_price, doc["tokens_per_s"]))   # type: ignore[arg-type]
            if doc["cost_per_mtok_usd"] is not None:
                print(f"  cost          ${doc['cost_per_mtok_usd']:.4g} per million output tokens ({serving.gpus} GPUs "
                      f"at ${args.gpu_hour_price:g} a GPU-hour)")
        if args.json:
            atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
            print(f"\n  wrote {args.json}")
    if args.trace:
        from ..serving.llm.trace import write_serve_trace
        n = write_serve_trace(result, args.trace, announce)
        print(f"  wrote {args.trace} ({n:,} steps; open it at https://ui.perfetto.dev)")
    if args.plot:
        from ..serving.llm.plot import plot_serving
        plot_serving(result, args.plot, model.name)
        print(f"  wrote {args.plot}")
    return 0
