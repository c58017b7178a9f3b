"""podsim llm: one training iteration of an LLM under a parallel layout."""

from __future__ import annotations

import argparse

from ..api.goodput import DEFAULT_DAYS, GoodputJob, check_goodput_flags, goodput_of_training
from ..api.jobs import TRAIN_PARAMS, TrainJob, echo
from ..api.train import catalog, export_chakra, export_simai, train
from ..report import write_trace
from ..report.goodput import format_goodput, goodput_json
from ..report.json_out import write_document
from ..report.training import format_catalog, format_kernels, format_training
from .options import add_params, announce, clear_progress_line, progress_line

EPILOG_LLM = """examples:
  podsim llm --model gpt3-175b --gpu a100-80gb --gpus 1024 --tp 8 --pp 16 --global-batch 1536 \\
      --recompute selective --sequence-parallel --distributed-optimizer
  podsim llm --model llama3-70b --gpu h100-80gb --gpus 512 --tp 8 --pp 4 --vpp 5 --sequence-parallel \\
      --global-batch 512 --seq-len 8192 --json run.json --trace run.trace.json
  podsim llm --model-config config.json --gpu h100 --gpus 64 --tp 8 --global-batch 64
  podsim llm --model llama3-405b --gpu h100 --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 \\
      --last-stage-layers 7 --global-batch 2048 --seq-len 8192 --sequence-parallel \\
      --distributed-optimizer --recompute full --backend flow
  podsim llm --model llama3-405b --gpu h100 --gpus 8192 --tp 8 --pp 8 --vpp 8 --cp 2 \\
      --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \\
      --global-batch 2048 --seq-len 8192 --sequence-parallel --distributed-optimizer --backend flow
  podsim llm --model llama3-8b --gpu h100 --gpus 64 --fsdp --global-batch 64 --seq-len 8192
  podsim llm --model llama3-8b --gpu h100 --gpus 8 --fsdp --global-batch 32 --kernel-table measured
  podsim llm --model llama3-70b --gpu h100 --gpus 64 --tp 8 --pp 4 --sequence-parallel --distributed-optimizer \\
      --global-batch 64 --precision fp8 --kernels          # where a step's time goes, kernel by kernel
  podsim llm --model llama3-8b --gpu h100 --gpus 1024 --tp 8 --global-batch 1024 --goodput --train-tokens 1e12
      # and the run's goodput under failures (podsim goodput's model, from this step)
  podsim llm --model gpt3-13b --gpus 128 --tp 8 --global-batch 128 --simai w.txt --chakra et/gpt
  podsim llm --model llama3-8b --gpu h100 --gpus 64 --tp 8 --global-batch 64 --slow-gpus 3:1.1 \
      --slow-nics 12:0.5 --hiccup 10:200ms     # stragglers and slow parts (docs/faults.md)
  podsim llm --model llama3-70b --gpu h100 --gpus 4096 --tp 8 --pp 8 --global-batch 1024 --seq-len 4096 \
      --sequence-parallel --distributed-optimizer --recompute full --slow-gpus random:1.0-1.2,seed=1
  podsim llm --model llama3-70b --gpu h100 --gpus 64 --tp 8 --global-batch 64 --allow-oom
      # a layout that does not fit (an error without --allow-oom): simulated, and marked as such
DP = GPUs / (TP x PP x CP).  Model TFLOP/s and MFU use the model-FLOPs formula in docs/llm.md
(forward + backward, no recomputation); times in s, memory in GiB."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"llm": "_run_llm"}
PIPELINE_LAYERS = next(p for p in TRAIN_PARAMS if p.name == "pipeline-layers")


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.train.TrainJob`."""
    lm = sub.add_parser(
        "llm",
        help="simulate one training iteration of an LLM under a parallel layout",
        epilog=EPILOG_LLM,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(lm, TRAIN_PARAMS)
    lm.add_argument("--list", action="store_true", help="list the zoo's models and the GPUs, then exit")
    lm.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _pipeline_layers(text: str | None) -> tuple[int, ...] | None:
    """``--pipeline-layers 7,8,8,...`` as a tuple of ints (checked further by Layout.check)."""
    return None if text is None else PIPELINE_LAYERS.to_field(text)


def _run_llm(args: argparse.Namespace) -> int:
    if args.list:
        print(format_catalog(*catalog()))
        return 0
    job = TrainJob.from_values(vars(args))
    check_goodput_flags(job.reliability, job.exports.goodput)
    progress = progress_line()
    # the summary's breakdown reads a timeline; link loads are for a trace's counters alone
    r = train(job, record_timeline=True, progress=progress, record_link_load=bool(job.outputs.trace))
    clear_progress_line(progress)
    print(format_training(r, job.simulation.backend))
    if job.exports.kernels:
        print()
        print(format_kernels(r.kernels, r.host_ns))
    good = None
    if job.exports.goodput:  # from the step just simulated: no second simulation
        good = goodput_of_training(GoodputJob.from_values(vars(args)), r, default_days=DEFAULT_DAYS)
        print()
        print(format_goodput(good))
    out = job.outputs
    if out.json:
        extra = {"goodput": goodput_json(good)} if good is not None else {}
        write_document({**r.to_dict(), **extra, "inputs": echo(job)}, out.json)
        print(f"  wrote {out.json}")
    if out.trace:
        shown = write_trace(r.result, out.trace, max_ranks=out.trace_ranks, announce=announce)
        ranks = len(r.result.timelines)
        more = f", the first {shown} of {ranks} simulated ranks (--trace-ranks)" if shown < ranks else ""
        print(f"  wrote {out.trace}{more} (open it at https://ui.perfetto.dev)")
    if job.exports.simai:
        export_simai(r, job, job.exports.simai)
        print(f"  wrote {job.exports.simai} (SimAI workload, pipeline stage 0)")
    if job.exports.chakra:
        paths, groups = export_chakra(r, job, job.exports.chakra)
        print(f"  wrote {len(paths)} Chakra ET files {job.exports.chakra}.<rank>.et and {groups}")
    return 0
