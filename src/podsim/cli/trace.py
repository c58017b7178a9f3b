"""podsim trace: profile one training step of a PyTorch model."""

from __future__ import annotations

import argparse
import os
import sys

from ..api.capture import capture, trace_ranks
from ..errors import InputError
from ..report.traces import format_capture, format_rank_capture, rank_capture_json, write_json_doc
from .options import (
    count_arg,
    count_bar,
    positive_arg,
)

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
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    tr = sub.add_parser(
        "trace",
        help="profile one training step of a PyTorch model (profiler + execution trace)",
        epilog=EPILOG_TRACE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tr.add_argument(
        "--model",
        required=True,
        metavar="MODEL",
        help="torchvision:NAME, hf:CONFIG.json, module:callable; with --world-size also "
        "megatron:CONFIG.json (Megatron-Core's GPT)",
    )
    tr.add_argument("--batch-size", type=count_arg, required=True, metavar="B")
    tr.add_argument(
        "--steps", type=count_arg, default=3, metavar="K", help="warm-up steps before the profiled one (default 3)"
    )
    tr.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    tr.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    tr.add_argument(
        "--nproc",
        type=count_arg,
        default=1,
        metavar="N",
        help="distributed capture: N processes of DistributedDataParallel (gloo on the CPU, NCCL on "
        "GPUs), each writing kineto.<rank>.json and et.<rank>.json with the collectives",
    )
    tr.add_argument(
        "--bucket-mb",
        type=positive_arg,
        default=25.0,
        metavar="MB",
        help="with --nproc: DDP's bucket_cap_mb (default 25)",
    )
    tr.add_argument(
        "--world-size",
        type=count_arg,
        default=None,
        metavar="N",
        help="trace a parallel job of N ranks (with --layout; --fake-ranks or --nproc N)",
    )
    tr.add_argument(
        "--layout",
        default=None,
        metavar="tp=T[,pp=P][,cp=C][,fsdp]",
        help="the job's parallel layout; data parallel takes the ranks left over",
    )
    tr.add_argument(
        "--fake-ranks",
        action="store_true",
        help="run each distinct rank's step in this process on a fake process group (calls return at "
        "once and are recorded); ranks that differ only in their data-parallel peers are traced once",
    )
    tr.add_argument("--json", metavar="OUT", help="with --world-size: what was traced, as JSON")
    tr.add_argument(
        "--rank-timeout",
        type=positive_arg,
        default=1800.0,
        metavar="S",
        help="with --world-size: stop a rank (or the real job) that runs longer than S seconds (default 1800)",
    )
    tr.add_argument("--seq-len", type=count_arg, default=128, metavar="S", help="hf models: tokens per sequence")
    tr.add_argument("--out", required=True, metavar="DIR")
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

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            bar = "#" * (20 * done // total)
            sys.stderr.write(f"\r  step {done}/{total} [{bar:<20}]")
            sys.stderr.flush()

    if args.world_size is not None or args.layout is not None or args.fake_ranks:
        return _run_parallel(args)
    c = capture(
        args.model,
        args.batch_size,
        args.out,
        args.steps,
        args.device,
        args.optimizer,
        args.seq_len,
        progress,
        args.nproc,
        args.bucket_mb,
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 40 + "\r")
    print(format_capture(c, args.batch_size))
    return 0


def _run_parallel(args: argparse.Namespace) -> int:
    """A parallel job: its distinct ranks on a fake process group, or every rank for real."""
    if args.world_size is None or args.layout is None:
        raise InputError(
            "a parallel job needs both --world-size N and --layout tp=T[,pp=P][,cp=C][,fsdp]",
            where="--world-size" if args.world_size is None else "--layout",
        )
    real = args.nproc > 1
    if args.fake_ranks and real:
        raise InputError(
            "give --fake-ranks (the distinct ranks, one by one, in this process) or --nproc N (every "
            "rank for real over gloo), not both",
            where="--fake-ranks",
        )
    if args.fake_ranks == real:
        raise InputError(
            "say how to run the job: --fake-ranks (its distinct ranks, one by one, in this process) or "
            f"--nproc {args.world_size} (every rank for real over gloo)",
            where="--fake-ranks",
        )
    ranks_done = count_bar("traced {done}/{total} ranks")
    c = trace_ranks(
        args.model,
        args.batch_size,
        args.out,
        args.world_size,
        args.layout,
        args.steps,
        args.device,
        args.optimizer,
        args.seq_len,
        args.nproc if real else 0,
        ranks_done,
        args.rank_timeout,
    )
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    print(format_rank_capture(c, args.model, args.batch_size))
    if args.json:
        write_json_doc(rank_capture_json(c), args.json)
        print(f"  wrote {args.json}")
    return 0
