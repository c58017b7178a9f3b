"""podsim llm: one training iteration of an LLM under a parallel layout."""

from __future__ import annotations

import argparse

from .options import (
    TRACE_RANKS,
    add_backend,
    add_cluster,
    announce,
    clear_progress_line,
    count_arg,
    natural_arg,
    progress_line,
)


EPILOG_LLM = """examples:
  podsim llm --model gpt3-175b --gpu a100-80gb --gpus 1024 --tp 8 --pp 16 --global-batch 1536 \\
      --recompute selective --sequence-parallel --distributed-optimizer
  podsim llm --model llama3-70b --gpu h100-80gb --gpus 512 --tp 8 --pp 4 --vpp 5 \\
      --global-batch 512 --seq-len 8192 --json run.json --trace run.trace.json
  podsim llm --model-config config.json --gpu h100 --gpus 64 --tp 8 --global-batch 64
  podsim llm --model llama3-405b --gpu h100 --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 \\
      --last-stage-layers 7 --global-batch 2048 --seq-len 8192 --backend flow
  podsim llm --model llama3-405b --gpu h100 --gpus 8192 --tp 8 --pp 8 --vpp 8 \\
      --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \\
      --global-batch 2048 --seq-len 8192 --sequence-parallel --distributed-optimizer --backend flow
  podsim llm --model llama3-8b --gpu h100 --gpus 64 --fsdp --global-batch 64 --seq-len 8192
  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 32 --kernel-table measured
  podsim llm --model llama3-70b --gpu h100 --gpus 64 --tp 8 --sequence-parallel --global-batch 64 \
      --precision fp8 --kernels          # where a step's time goes, kernel by kernel
  podsim llm --model gpt3-13b --gpus 128 --tp 8 --global-batch 128 --simai w.txt --chakra et/gpt

DP = GPUs / (TP x PP x CP).  Model TFLOP/s and MFU use the model-FLOPs formula in docs/llm.md
(forward + backward, no recomputation); times in s, memory in GiB."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"llm": "_run_llm"}

def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    lm = sub.add_parser("llm", help="simulate one training iteration of an LLM under a parallel layout",
                        epilog=EPILOG_LLM, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = lm.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="NAME", help="a zoo model (--list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    src.add_argument("--list", action="store_true", help="list the zoo's models and the GPUs, then exit")
    lm.add_argument("--gpu", default="a100-80gb", metavar="NAME",
                    help="a GPU key or alias (see --list): v100-32gb, a100-40gb, a100-80gb, h100-80gb, h200, "
                         "b200, b300, gb200, gb300, mi300x")
    lm.add_argument("--gpus", type=count_arg, metavar="N", help="GPUs in the job (required)")
    lm.add_argument("--tp", type=count_arg, default=1, metavar="T")
    lm.add_argument("--pp", type=count_arg, default=1, metavar="P")
    lm.add_argument("--vpp", type=count_arg, default=1, metavar="V", help="virtual stages per pipeline rank (interleaved 1F1B)")
    lm.add_argument("--first-stage-layers", "--decoder-first-pipeline-num-layers", type=natural_arg, default=None,
                    metavar="L", help="uneven pipeline split: layers on the first pipeline rank (with --vpp V, "
                                      "a multiple of V, split evenly over its virtual stages)")
    lm.add_argument("--last-stage-layers", "--decoder-last-pipeline-num-layers", type=natural_arg, default=None,
                    metavar="L", help="uneven pipeline split: layers on the last pipeline rank (likewise)")
    lm.add_argument("--account-for-embedding-in-pipeline-split", action="store_true",
                    help="count the embedding as one layer of the split: the first virtual stage gets one "
                         "transformer layer fewer")
    lm.add_argument("--account-for-loss-in-pipeline-split", action="store_true",
                    help="count the loss (output layer) as one layer of the split: the last virtual stage gets "
                         "one transformer layer fewer")
    lm.add_argument("--pipeline-layers", metavar="N,N,...",
                    help="explicit split: layers per virtual stage, PP x VPP numbers (chunk 0 of ranks 0..PP-1, "
                         "then chunk 1, ...)")
    lm.add_argument("--ep", type=count_arg, default=1, metavar="E")
    lm.add_argument("--cp", type=count_arg, default=1, metavar="C")
    lm.add_argument("--global-batch", type=count_arg, metavar="B", help="sequences per iteration (required)")
    lm.add_argument("--micro-batch", "--micro-batch-size", dest="micro_batch", type=count_arg, default=1, metavar="M")
    lm.add_argument("--seq-len", type=count_arg, default=None, metavar="S", help="default: the model's")
    lm.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    lm.add_argument("--recompute-modules", default="core_attn", metavar="M,M,...",
                    help="selective recompute's modules: core_attn (default), act, mlp, layernorm")
    lm.add_argument("--recompute-num-layers", type=count_arg, default=None, metavar="N",
                    help="full recompute of only the first N layers of each virtual stage (Megatron's block "
                         "method)")
    lm.add_argument("--sequence-parallel", action="store_true")
    lm.add_argument("--schedule", "--pipeline-schedule", dest="schedule", default="1f1b",
                    choices=["1f1b", "gpipe", "interleaved"])
    opt = lm.add_mutually_exclusive_group()
    opt.add_argument("--distributed-optimizer", action="store_true")
    opt.add_argument("--zero", type=int, default=0, choices=[0, 1, 2, 3])
    opt.add_argument("--fsdp", dest="zero", action="store_const", const=3,
                     help="fully sharded data parallelism (= --zero 3)")
    lm.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"],
                    help="fp8: Transformer Engine's per-tensor scaling (delayed or current); mxfp8, nvfp4: "
                         "Blackwell's block-scaled formats (layer GEMMs at the fp8 / fp4 peak)")
    lm.add_argument("--no-flash-attention", action="store_true", help="unfused attention (Megatron of 2021)")
    lm.add_argument("--no-overlap-grad-reduce", action="store_true", help="reduce gradients after the backward")
    lm.add_argument("--no-overlap-param-gather", action="store_true",
                    help="the distributed optimizer's parameter all-gather follows the optimizer step instead of "
                         "running under the next forward")
    lm.add_argument("--tp-overlap", default="te", choices=["te", "async", "none"],
                    help="TP communication overlap: te = Transformer Engine's --tp-comm-overlap (default; needs "
                         "--sequence-parallel), async = Megatron-Core's default (backward only), none = blocking")
    lm.add_argument("--loss-fusion", action="store_true",
                    help="a fused cross-entropy kernel (Megatron's --cross-entropy-loss-fusion)")
    lm.add_argument("--kernels", action="store_true",
                    help="print the per-kernel list of one layer, the embedding, the output layer and the optimizer "
                         "with their times (also in --json under 'kernels')")
    add_cluster(lm, "the cluster (default: the preset for --gpu)")
    lm.add_argument("--gpus-per-node", type=count_arg, metavar="K")
    lm.add_argument("--nic-bandwidth", metavar="BW", help="per-GPU NIC bandwidth, e.g. 200Gbps")
    add_backend(lm)
    lm.add_argument("--granularity", default="bulk", choices=["bulk", "round"],
                    help="flow backend: a collective step's rounds as one set of flows (bulk, default) or every "
                         "round simulated (round: slower, exact under contention)")
    lm.add_argument("--kernel-table", metavar="CSV|measured",
                    help="time kernels by interpolating a measured kernel table (podsim kernels measure); "
                         "'measured' = the table podsim ships for --gpu (h100-80gb)")
    lm.add_argument("--json", metavar="OUT")
    lm.add_argument("--trace", metavar="OUT", help="write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev)")
    lm.add_argument("--trace-ranks", type=count_arg, default=TRACE_RANKS, metavar="N",
                    help=f"ranks to include in the trace (default {TRACE_RANKS})")
    lm.add_argument("--simai", metavar="OUT.txt", help="also write pipeline stage 0 as a SimAI/AICB workload file")
    lm.add_argument("--chakra", metavar="PREFIX",
                    help="also write Chakra ET files PREFIX.<rank>.et and PREFIX.comm_groups.json (ASTRA-sim inputs)")
    lm.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _pipeline_layers(text: str | None) -> tuple[int, ...] | None:
    """``--pipeline-layers 7,8,8,...`` as a tuple of ints (checked further by Layout.check)."""
    if text is None:
        return None
    from ..errors import InputError
    out = []
    for part in text.replace(" ", "").split(","):
        try:
            out.append(int(part))
        except ValueError:
            raise InputError(f"--pipeline-layers takes comma-separated layer counts, e.g. 1,2,2,1; got {part!r} "
                             f"in {text!r}") from None
    return tuple(out)


def _run_llm(args: argparse.Namespace) -> int:
    import json

    from ..errors import InputError
    from ..fileio import atomic_write_text
    from ..llm import from_hf_config, get_model
    from ..llm.layout import Layout
    from ..llm.run import simulate_training
    from ..report import write_trace
    from ..units import parse_bandwidth

    if args.list:
        from ..hardware.gpu import gpu_specs
        from ..llm.model import zoo
        print("models (--model):")
        for name, m in zoo().items():
            kind = f"MoE {m.experts}x, top-{m.top_k}" if m.experts else "dense"
            print(f"  {name:<20} {m.total_params() / 1e9:>8.1f} B params  {m.layers:>3} layers  hidden {m.hidden:>5}  "
                  f"{kind}")
        print("GPUs (--gpu):")
        for key, g in gpu_specs().items():
            print(f"  {key:<20} {g.name:<22} {g.memory_gib:>6g} GiB  bf16 {g.peak_tflops.get('bf16', 0):>7g} TFLOP/s")
        return 0
    if not (args.model or args.model_config):
        raise InputError("give --model NAME (see --list) or --model-config FILE")
    for flag, value in (("--gpus", args.gpus), ("--global-batch", args.global_batch)):
        if value is None:
            raise InputError(f"{flag} is required")
    model = get_model(args.model) if args.model else from_hf_config(args.model_config)
    lay = Layout(args.gpus, tp=args.tp, pp=args.pp, cp=args.cp, ep=args.ep, vpp=args.vpp,
                 global_batch=args.global_batch, micro_batch=args.micro_batch,
                 seq_len=args.seq_len or model.seq_len, sequence_parallel=args.sequence_parallel,
                 recompute=args.recompute, recompute_layers=args.recompute_num_layers,
                 recompute_modules=tuple(x.strip() for x in args.recompute_modules.split(",") if x.strip()),
                 schedule="interleaved" if args.vpp > 1 else args.schedule,
                 zero=args.zero, distributed_optimizer=args.distributed_optimizer, precision=args.precision,
                 overlap_grad_reduce=not args.no_overlap_grad_reduce,
                 first_stage_layers=args.first_stage_layers, last_stage_layers=args.last_stage_layers,
                 account_for_embedding=args.account_for_embedding_in_pipeline_split,
                 account_for_loss=args.account_for_loss_in_pipeline_split,
                 pipeline_layers=_pipeline_layers(args.pipeline_layers),
                 flash_attention=not args.no_flash_attention, tp_overlap=args.tp_overlap,
                 overlap_param_gather=not args.no_overlap_param_gather, loss_fusion=args.loss_fusion)
    nic = parse_bandwidth(args.nic_bandwidth, where="--nic-bandwidth") if args.nic_bandwidth else None
    compute = None
    if args.kernel_table:
        from ..compute.table import table_model
        compute = table_model(args.kernel_table, args.gpu, lay.compute_dtype)
    progress = progress_line()
    r = simulate_training(model, lay, args.gpu, args.cluster, args.backend, args.gpus_per_node, nic,
                          record_timeline=True, compute=compute, granularity=args.granularity, progress=progress)
    clear_progress_line(progress)
    d = r.to_dict()
    b = d["breakdown"]
    print(f"podsim llm: {model.name} on {lay.gpus} x {r.gpu.name} ({d['cluster']}, {args.backend})")
    print(f"  compute    {r.compute_model}")
    cal = r.calibration
    print(f"  calibration {cal['status']}: {cal['source']}")
    print(f"  layout     TP {lay.tp} x PP {lay.pp} x DP {lay.dp}" + (f" x CP {lay.cp}" if lay.cp > 1 else "")
          + (f", EP {lay.ep}" if lay.ep > 1 else "") + (f", VPP {lay.vpp}" if lay.vpp > 1 else "")
          + f"; batch {lay.global_batch} x {lay.seq_len} tokens, micro-batch {lay.micro_batch} "
          f"({lay.num_microbatches} per pipeline); recompute {lay.recompute}"
          + (", SP" if lay.sequence_parallel else ""))
    rows = [("iteration time", f"{d['iteration_time_s']:.4f} s"),
            ("model TFLOP/s per GPU", f"{d['model_tflops_per_gpu']:.1f}"),
            ("  causal count (NeMo's)", f"{d['model_tflops_per_gpu_causal']:.1f}"),
            ("tokens per second per GPU", f"{d['tokens_per_s'] / lay.gpus:,.0f}"),
            ("MFU", f"{100 * d['mfu']:.1f} %"),
            ("tokens per second", f"{d['tokens_per_s']:,.0f}"),
            ("memory peak per GPU", f"{d['memory_peak_gib']:.2f} GiB of {r.gpu.memory_gib:g}"),
            ("  compute", f"{b['compute_s']:.4f} s"), ("  exposed communication", f"{b['exposed_comm_s']:.4f} s"),
            ("  pipeline bubble", f"{b['bubble_s']:.4f} s"), ("  other", f"{b['other_s']:.4f} s")]
    for k, v in rows:
        print(f"  {k:<24} {v:>20}")
    for note in d["notes"]:
        print(f"  warning: {note}" if "does not fit" in note else f"  note: {note}")
    if args.kernels:
        from ..llm.kernel_report import format_kernels
        from ..llm.stack import Stack
        print()
        print(format_kernels(r.kernels, Stack.for_gpu(r.gpu.key).host_ns))
    if args.json:
        atomic_write_text(args.json, json.dumps(d, indent=1) + "\n")
        print(f"  wrote {args.json}")
    if args.trace:
        shown = write_trace(r.result, args.trace, max_ranks=args.trace_ranks, announce=announce)
        ranks = len(r.result.timelines)
        more = f", the first {shown} of {ranks} simulated ranks (--trace-ranks)" if shown < ranks else ""
        print(f"  wrote {args.trace}{more} (open it at https://ui.perfetto.dev)")
    if args.simai or args.chakra:
        from ..compute.model import ComputeModel
        from ..formats.chakra import write_workload_with_groups
        from ..llm.export import write_simai
        from ..llm.generate import generate
        cm = compute or ComputeModel.for_gpu(r.gpu, lay.compute_dtype)
        if args.simai:
            write_simai(model, lay, cm, args.simai)
            print(f"  wrote {args.simai} (SimAI workload, pipeline stage 0)")
        if args.chakra:
            paths, cg = write_workload_with_groups(generate(model, lay, cm), args.chakra)
            print(f"  wrote {len(paths)} Chakra ET files {args.chakra}.<rank>.et and {cg}")
    return 0
