"""podsim infer: the prefill and decode step times of an LLM on one replica (issue #16)."""

from __future__ import annotations

import argparse

from .options import add_cluster, count_arg, host_overhead_arg

EPILOG_INFER = """examples:
  podsim infer --model llama2-70b --gpu h100 --tp 4 --batch 1 --prompt-tokens 1024 --output-tokens 128
  podsim infer --model bloom-176b --gpu a100 --tp 8 --batch 16 --prompt-tokens 512 --output-tokens 32 --json b.json
  podsim infer --model mixtral-8x7b --gpu h100 --tp 2 --ep 2 --batch 64 --prompt-tokens 2048 --output-tokens 256 \\
      --precision fp8
  podsim infer --model llama2-70b --gpu h100 --tp 4 --batch 8 --prompt-tokens 1024 --output-tokens 64 \\
      --write-profile prof          # podsim's times as Vidur's profiling CSVs under prof/
  podsim infer --model llama2-70b --gpu h100 --tp 4 --batch 8 --prompt-tokens 1024 --output-tokens 64 \\
      --profile my_profiles         # step times from your own tables in Vidur's layout

One prefill pass over B prompts of N tokens (it yields each sequence's first token), then K - 1
decode steps while the B sequences grow from N to N + K tokens, from podsim's compute model and
the cluster's fabric (docs/serving-llm.md), or from measured tables in Vidur's profile layout
(--profile).  Times in s; memory in GiB per GPU."""

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"infer": "_run_infer"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("infer", help="LLM inference step times: one prefill and the decode steps after it",
                       epilog=EPILOG_INFER, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="NAME", help="a zoo model (podsim llm --list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    s.add_argument("--gpu", default="a100-80gb", metavar="NAME", help="a GPU key or alias, as in podsim llm")
    add_cluster(s, "the cluster whose fabric carries the TP / EP collectives (default: the GPU's preset)")
    s.add_argument("--tp", type=count_arg, default=1, help="tensor-parallel GPUs of the replica")
    s.add_argument("--pp", type=count_arg, default=1, help="pipeline stages of the replica")
    s.add_argument("--ep", type=count_arg, default=1, help="expert-parallel degree (MoE models)")
    s.add_argument("--batch", type=count_arg, default=1, metavar="B", help="sequences in the batch (default 1)")
    s.add_argument("--prompt-tokens", type=count_arg, required=True, metavar="N", help="tokens per prompt")
    s.add_argument("--output-tokens", type=count_arg, required=True, metavar="K", help="tokens generated per sequence")
    s.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp8"],
                   help="weights and GEMMs (fp8: 1-byte weights, fp8 tensor cores); default bf16")
    s.add_argument("--kv-cache-dtype", default=None, choices=["bf16", "fp16", "fp8"],
                   help="the KV cache's element type (default bf16)")
    s.add_argument("--host-overhead-ms", type=host_overhead_arg, default=0.0, metavar="MS|eager|cuda-graphs",
                   help="CPU time per step that the GPU waits for (scheduling, input preparation, sampling; "
                        "default 0), or eager / cuda-graphs: the host time measured on this GPU for such an "
                        "engine, by the step's sequences (docs/serving-llm.md, 'Measured serving steps')")
    s.add_argument("--profile", metavar="DIR",
                   help="step times from measured tables in Vidur's profile layout: DIR holds mlp.csv, attention.csv "
                        "(all_reduce.csv for TP > 1, send_recv.csv for PP > 1), or Vidur's compute/<device>/<model>/ "
                        "and network/<network device>/ folders (docs/serving-llm.md); memory, the logits and the "
                        "host overhead stay podsim's model")
    s.add_argument("--write-profile", metavar="DIR",
                   help="first write podsim's compute-model times of this model, GPU and cluster as Vidur's profiling "
                        "CSVs under DIR (TP 1, 2, 4, 8 and --tp), for Vidur or --profile")
    s.add_argument("--json", metavar="OUT", help="the result as JSON (fields: docs/serving-llm.md)")
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_infer(args: argparse.Namespace) -> int:
    import json

    from ..fileio import atomic_write_text
    from ..serving.llm.steps import infer, step_timer
    from ..sweep.search import load_model

    model = load_model(args.model, args.model_config)
    if args.write_profile:
        from ..serving.llm.vidur_tables import write_vidur_profiles
        tps = [t for t in sorted({1, 2, 4, 8, args.tp}) if t == args.tp or (model.heads % t == 0 and t <= 8)]
        files = write_vidur_profiles(args.write_profile, model, args.gpu, tps, precision=args.precision,
                                     cluster=args.cluster)
        print(f"podsim infer: wrote {model.name}'s step tables (TP {', '.join(map(str, tps))}) in Vidur's layout: "
              + ", ".join(str(f) for f in files))
    timer = step_timer(model, args.gpu, args.tp, args.pp, args.ep, args.precision, args.cluster,
                       args.host_overhead_ms, kv_cache_dtype=args.kv_cache_dtype, profile=args.profile)
    r = infer(timer, args.batch, args.prompt_tokens, args.output_tokens)
    print(f"podsim infer: {r.model} on {r.tp * r.pp} x {r.gpu} (tp {r.tp}, pp {r.pp}, ep {r.ep}, {r.precision}), "
          f"batch {r.batch} x {r.prompt_tokens} prompt + {r.output_tokens} output tokens")
    if args.profile:
        print(f"  step times from the tables in {args.profile} (Vidur's layout); memory, logits and host: podsim's model")
    print(f"  prefill (time to first token)  {r.prefill_s * 1e3:10.2f} ms")
    print(f"  decode step, mean               {r.decode_step_mean_s * 1e3:10.3f} ms"
          + (f"   ({r.batch / r.decode_step_mean_s:,.0f} output tokens/s)" if r.decode_step_mean_s else ""))
    print(f"  end to end                      {r.e2e_s:10.3f} s")
    print(f"  memory per GPU: weights {r.weights_gib_per_gpu:.1f} GiB, KV cache {r.kv_cache_gib:.2f} GiB, "
          f"in all {r.memory_gib_per_gpu:.1f} GiB" + ("" if r.memory_fits else
                                                      f"  -- does not fit in {timer.memory_utilization:.0%} of "
                                                      f"{timer.gpu.memory_gib:g} GiB"))
    for what, parts in (("prefill", r.prefill_parts_s), ("decode", r.decode_parts_s)):
        total = sum(parts.values()) or 1.0
        print(f"  {what:<8}" + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts.items() if v))
    if args.json:
        atomic_write_text(args.json, json.dumps(r.to_dict(), indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0
