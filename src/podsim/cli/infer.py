"""podsim infer: the prefill and decode step times of an LLM on one replica."""

from __future__ import annotations

import argparse

from ..api.infer import infer, write_profiles
from ..api.jobs import INFER_PARAMS, InferJob, echo
from ..report.infer import format_infer
from ..report.json_out import write_document
from .options import add_params

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
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.infer.InferJob`."""
    s = sub.add_parser(
        "infer",
        help="LLM inference step times: one prefill and the decode steps after it",
        epilog=EPILOG_INFER,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(s, INFER_PARAMS)
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_infer(args: argparse.Namespace) -> int:
    job = InferJob.from_values(vars(args))
    if job.outputs.write_profile:
        tps, files = write_profiles(job, job.outputs.write_profile)
        print(
            f"podsim infer: wrote {job.model.load().name}'s step tables (TP {', '.join(map(str, tps))}) in "
            "Vidur's layout: " + ", ".join(str(f) for f in files)
        )
    outcome = infer(job)
    print(format_infer(outcome))
    if job.outputs.json:
        write_document(
            {
                **outcome.report.to_dict(),
                "calibration": outcome.calibration,
                "stack": outcome.stack,
                "inputs": echo(job),
            },
            job.outputs.json,
        )
        print(f"  wrote {job.outputs.json}")
    return 0
