"""podsim trace: profile one training step of a PyTorch model."""

from __future__ import annotations

import argparse
import os
import sys

from ..api.capture import TRACE_PARAMS, Capture, TraceJob, run_job
from ..report.traces import format_capture, format_rank_capture, rank_capture_json, write_json_doc
from .options import add_params, count_bar

EPILOG_TRACE = """examples:
  podsim trace --model torchvision:resnet50 --batch-size 8 --out traces/resnet50
  podsim trace --model mymodels:small_cnn --batch-size 32 --device cuda --out t/cnn
  podsim trace --model hf:gpt2/config.json --batch-size 4 --seq-len 256 --out t/gpt2
  podsim trace --model torchvision:resnet18 --batch-size 16 --nproc 2 --out t/ddp2   # DDP, gloo
  podsim trace --model hf:llama/config.json --batch-size 2 --world-size 64 \\
      --layout tp=4,pp=2,fsdp --fake-ranks --out t/llama64   # 8 of 64 ranks, one device
  podsim trace --model myjob:build --batch-size 8 --world-size 4 --layout tp=2,fsdp \\
      --nproc 4 --out t/real4   # the same job for real over gloo, recorded alike
  podsim simulate --workload-configuration t/cnn --cluster dgx-h100   # replay
  podsim simulate --pytorch traces/resnet50 --gpus 8 --parallel ddp   # scale out

module:callable names a function f(batch_size) returning (model, inputs, targets)
(cross-entropy loss) or (model, inputs, targets, loss_fn).  With --world-size, it is
called as f(batch_size, parallel) (parallel: rank, world_size, layout, mesh) and builds
that rank's parallel model (or returns podsim.capture.TrainingStep).  Needs torch."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"trace": "_run_trace"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.trace.TraceJob`."""
    tr = sub.add_parser(
        "trace",
        help="profile one training step of a PyTorch model (profiler + execution trace)",
        epilog=EPILOG_TRACE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(tr, TRACE_PARAMS)
    tr.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_trace(args: argparse.Namespace) -> int:
    if os.getcwd() not in sys.path:  # module:callable from the working folder, as `python -m` finds it
        sys.path.insert(0, os.getcwd())
    if not args.debug and "torch" not in sys.modules:
        # the execution-trace observer and Kineto log every start and stop (8-12 lines a capture,
        # through the progress bar): quiet unless --debug; read by torch at import, inherited by
        # the DDP processes
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # above USDT (5): Kineto prints nothing

    job = TraceJob.from_values(vars(args))

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            bar = "#" * (20 * done // total)
            sys.stderr.write(f"\r  step {done}/{total} [{bar:<20}]")
            sys.stderr.flush()

    c = run_job(job, count_bar("traced {done}/{total} ranks") if job.parallel else progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * (80 if job.parallel else 40) + "\r")
    if isinstance(c, Capture):
        print(format_capture(c, job.batch_size))
        return 0
    print(format_rank_capture(c, job.model, job.batch_size))
    if job.json:
        write_json_doc(rank_capture_json(c), job.json)
        print(f"  wrote {job.json}")
    return 0
