"""podsim serve-llm: LLM inference serving on replicas (continuous batching, a paged KV cache,
schedulers, routers, prefill/decode disaggregation)."""

from __future__ import annotations

import argparse
import sys

from ..api.jobs import SERVE_LLM_PARAMS, ServeLLMJob, echo
from ..api.serve_llm import check_flags, serve_llm, write_plot, write_trace
from ..report.json_out import write_document
from ..report.serving_llm import format_serve_llm, serve_llm_document
from .options import add_params, announce, clear_progress_line, count_bar

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
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.serve_llm.ServeLLMJob`."""
    s = sub.add_parser(
        "serve-llm",
        help="simulate LLM serving: requests on replicas with continuous batching, a "
        "paged KV cache, schedulers (vLLM, Sarathi, Orca, ...), routers and P/D disaggregation",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(s, SERVE_LLM_PARAMS)
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _progress(what: str):  # type: ignore[no-untyped-def]
    """A run's progress bar on stderr, and what ends its line."""
    bar = count_bar(what)
    return bar, lambda: clear_progress_line(bar if sys.stderr.isatty() else None)


def _run_serve_llm(args: argparse.Namespace) -> int:
    job = ServeLLMJob.from_values(vars(args))
    out = job.outputs
    check_flags(job)
    outcome = serve_llm(job, record_steps=bool(out.trace), progress=_progress)
    price = job.service.gpu_hour_price
    print(format_serve_llm(outcome, price))
    if out.json:
        write_document({**serve_llm_document(outcome, price), "inputs": echo(job)}, out.json)
        print(f"{'' if outcome.capacity is not None else chr(10)}  wrote {out.json}")
    if outcome.result is None:
        return 0
    if out.trace:
        n = write_trace(outcome, out.trace, announce)
        print(f"  wrote {out.trace} ({n:,} steps; open it at https://ui.perfetto.dev)")
    if out.plot:
        write_plot(outcome, out.plot)
        print(f"  wrote {out.plot}")
    return 0
