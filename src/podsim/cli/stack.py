"""podsim stack and podsim calibrate: software stacks as data, and fitting one to measured runs."""

from __future__ import annotations

import argparse

from ..api.calibrate import (
    CALIBRATE_PARAMS,
    STACK_PARAMS,
    CalibrateJob,
    StackJob,
    calibrate,
    load_stack,
    presets,
    write_stack,
)
from ..errors import InputError
from ..report.json_out import write_document
from ..report.stack import format_calibration, format_stack, format_stack_list
from .options import add_params

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"stack": "_run_stack", "calibrate": "_run_calibrate"}

EPILOG_STACK = """examples:
  podsim stack --list
  podsim stack show torchtitan
  podsim stack show my-stack.yaml --json stack.json
  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 16 --seq-len 8192 --stack torchtitan

A stack is a YAML of named properties with their sources (docs/stacks.md): framework rules that
fill the layout flags you leave at their defaults, and physical parameters of its kernels."""

EPILOG_CALIBRATE = """examples:
  podsim calibrate training my_runs.csv --base torchtitan --out my-stack.yaml
  podsim calibrate training shipped:torchtitan_l31_8b_8g_fsdp_tok --base torchtitan --out tt.yaml
  podsim calibrate training my_runs.csv --base megatron-lm --free gemm_efficiency,host_ns --out mine.yaml
  podsim llm --model llama3-70b --gpu h100 --gpus 512 --tp 8 --pp 4 --global-batch 512 --stack mine.yaml
  podsim calibrate trace shipped:h200 --base torchtitan --out traced.yaml \\
      --model llama3-8b --gpu h200 --seq-len 2048 --layers 4
  podsim calibrate inference my_steps.csv --base vllm --out my-serving.yaml
  podsim calibrate inference shipped:infer_17,infer_18,infer_19 --base vllm-v0-eager --out eager-a100.yaml
  podsim infer --model llama2-70b --gpu a100 --tp 2 --prompt-tokens 512 --output-tokens 128 --stack eager-a100.yaml
  podsim calibrate inference my_run.measured.csv --base vllm --out my-serving.yaml \\
      --model llama3-8b --gpu rtx-pro-6000 --max-num-seqs 128 --max-batched-tokens 2048

ROWS.csv holds your measured runs: for training (model shape, GPU, layout, metric, value) the
columns of docs/calibration.md; for inference model, gpu, tp, pp, batch, prompt_tokens,
output_tokens, prefill_ms, decode_ms (docs/stacks.md), or a serving run, one row per request
(arrived_at, num_prefill_tokens, num_decode_tokens, ttft_ms, e2e_ms), replayed request by request
by podsim serve-llm with the flags it ran with (--model, --gpu, --tp, --replicas, --max-num-seqs,
...; their defaults, vLLM's limits among them, are serve-llm's: podsim serve-llm --help): its mean
TTFT, mean end-to-end latency and median time per output token are fitted.  trace reads
gemm_efficiency, attention_efficiency and elementwise_traffic off PyTorch profiler traces of one
GPU's training step (a folder of *.json / *.json.gz, or shipped:h200, podsim's own) described
with --model, --gpu, --seq-len, --micro-batch, --recompute and --layers (docs/stacks.md).  The
fit is refused (exit 1, nothing written) when a parameter lands on its bound or a run stays more
than 10% off, or, for a trace, a value falls outside its range."""


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add ``stack`` and ``calibrate`` to ``sub`` (argparse's subparsers)."""
    st = sub.add_parser(
        "stack",
        help="list and show software stacks (--stack presets)",
        epilog=EPILOG_STACK,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(st, STACK_PARAMS)
    st.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    ca = sub.add_parser(
        "calibrate",
        help="fit a software stack's free parameters to your measured runs",
        epilog=EPILOG_CALIBRATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(ca, CALIBRATE_PARAMS)
    ca.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_stack(args: argparse.Namespace) -> int:
    job = StackJob.from_values(vars(args))
    if job.list or job.action in (None, "list"):
        if job.name:
            raise InputError(f"podsim stack list takes no name (did you mean: podsim stack show {job.name})")
        stacks = presets()
        print(format_stack_list(stacks))
        if job.json:
            write_document({"stacks": [s.echo() | {"title": s.title} for s in stacks]}, job.json)
        return 0
    if not job.name:
        raise InputError("podsim stack show needs a stack: a preset (podsim stack --list) or a stack YAML")
    st = load_stack(job.name)
    print(format_stack(st))
    if job.json:
        write_document(st.echo() | {"title": st.title, "sources": st.sources, "free": st.free}, job.json)
    return 0


def _run_calibrate(args: argparse.Namespace) -> int:
    job = CalibrateJob.from_values(vars(args))
    cal = calibrate(job)
    assert job.out
    print(format_calibration(cal, job.out if cal.ok else None))
    if job.json:
        write_document(cal.to_dict(), job.json)
    if not cal.ok:
        return 1
    write_stack(cal, job.out)
    return 0
