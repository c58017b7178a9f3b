"""podsim trace: profile one training step of a PyTorch model."""

from __future__ import annotations

import argparse
import sys

from .options import (
    count_arg,
    positive_arg,
)


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"trace": "_run_trace"}

def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    tr = sub.add_parser("trace", help="profile one training step of a PyTorch model (profiler + execution trace)",
                        epilog="examples:\n  podsim trace --model torchvision:resnet50 --batch-size 8 --out traces/resnet50\n"
                               "  podsim trace --model mymodels:small_cnn --batch-size 32 --device cuda --out t/cnn\n"
                               "  podsim trace --model hf:gpt2/config.json --batch-size 4 --seq-len 256 --out t/gpt2\n"
                               "  podsim trace --model torchvision:resnet18 --batch-size 16 --nproc 2 --out t/ddp2   # DDP, gloo\n"
                               "  podsim trace --model hf:llama/config.json --batch-size 2 --world-size 64 \\\n"
                               "      --layout tp=4,pp=2,fsdp --fake-ranks --out t/llama64   # 8 of 64 ranks, one device\n"
                               "  podsim trace --model myjob:build --batch-size 8 --world-size 4 --layout tp=2,fsdp \\\n"
                               "      --nproc 4 --out t/real4   # the same job for real over gloo, recorded alike\n"
                               "  podsim simulate --workload-configuration t/cnn --cluster dgx-h100   # replay\n"
                               "  podsim simulate --pytorch traces/resnet50 --gpus 8 --parallel ddp   # scale out\n\n"
                               "module:callable names a function f(batch_size) returning (model, inputs, targets)\n"
                               "(cross-entropy loss) or (model, inputs, targets, loss_fn).  With --world-size, it is\n"
                               "called as f(batch_size, parallel) (parallel: rank, world_size, layout, mesh) and builds\n"
                               "that rank's parallel model (or returns podsim.capture.TrainingStep).  Needs torch.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    tr.add_argument("--model", required=True, metavar="MODEL",
                    help="torchvision:NAME, hf:CONFIG.json, module:callable; with --world-size also "
                         "megatron:CONFIG.json (Megatron-Core's GPT)")
    tr.add_argument("--batch-size", type=count_arg, required=True, metavar="B")
    tr.add_argument("--steps", type=count_arg, default=3, metavar="K", help="warm-up steps before the profiled one (default 3)")
    tr.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    tr.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    tr.add_argument("--nproc", type=count_arg, default=1, metavar="N",
                    help="distributed capture: N processes of DistributedDataParallel (gloo on the CPU, NCCL on "
                         "GPUs), each writing kineto.<rank>.json and et.<rank>.json with the collectives")
    tr.add_argument("--bucket-mb", type=positive_arg, default=25.0, metavar="MB",
                    help="with --nproc: DDP's bucket_cap_mb (default 25)")
    tr.add_argument("--world-size", type=count_arg, default=None, metavar="N",
                    help="trace a parallel job of N ranks (with --layout; --fake-ranks or --nproc N)")
    tr.add_argument("--layout", default=None, metavar="tp=T[,pp=P][,cp=C][,fsdp]",
                    help="the job's parallel layout; data parallel takes the ranks left over")
    tr.add_argument("--fake-ranks", action="store_true",
                    help="run each distinct rank's step in this process on a fake process group (calls return at "
                         "once and are recorded); ranks that differ only in their data-parallel peers are traced once")
    tr.add_argument("--json", metavar="OUT", help="with --world-size: what was traced, as JSON")
    tr.add_argument("--rank-timeout", type=positive_arg, default=1800.0, metavar="S",
                    help="with --world-size: stop a rank (or the real job) that runs longer than S seconds "
                         "(default 1800)")
    tr.add_argument("--seq-len", type=count_arg, default=128, metavar="S", help="hf models: tokens per sequence")
    tr.add_argument("--out", required=True, metavar="DIR")
    tr.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_trace(args: argparse.Namespace) -> int:
    import os

    from ..capture import capture

    if os.getcwd() not in sys.path:  # module:callable from the working folder, as `python -m` finds it
        sys.path.insert(0, os.getcwd())
    if not args.debug and "torch" not in sys.modules:
        # the execution-trace observer and Kineto log every start and stop (8-12 lines a capture,
        # through the progress bar): quiet unless --debug; read by torch at import, inherited by
        # the DDP processes
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # above USDT (5): Kineto prints nothing

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            bar = "#" * (20 * done // total)
            sys.stderr.write(f"\r  step {done}/{total} [{bar:<20}]")
            sys.stderr.flush()

    if args.world_size is not None or args.layout is not None or args.fake_ranks:
        return _run_parallel(args)
    c = capture(args.model, args.batch_size, args.out, args.steps, args.device, args.optimizer, args.seq_len,
                progress, args.nproc, args.bucket_mb)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 40 + "\r")
    procs = f" x {c.nproc} processes (DDP)" if c.nproc > 1 else ""
    print(f"podsim trace: {c.model} on {c.device}{procs}, batch {args.batch_size}: profiled step {c.step_ms:.3f} ms")
    if c.nproc > 1:
        print(f"  wrote {c.folder}/kineto.<rank>.json, et.<rank>.json, {c.workload_prefix}.<rank>.et, capture.json "
              f"for ranks 0-{c.nproc - 1}")
    else:
        print(f"  wrote {c.kineto}, {c.execution_trace}, {c.workload_prefix}.0.et, {c.folder / 'capture.json'}")
    print(f"  replay it:   podsim simulate --workload-configuration {c.folder} --cluster dgx-h100")
    print(f"  scale it:    podsim simulate --pytorch {c.folder} --gpus 4 --parallel ddp|tp|pp")
    return 0


def _run_parallel(args: argparse.Namespace) -> int:
    """A parallel job: its distinct ranks on a fake process group, or every rank for real."""
    import json

    from ..capture import trace_ranks
    from ..errors import InputError
    from ..fileio import atomic_write_text

    if args.world_size is None or args.layout is None:
        raise InputError("a parallel job needs both --world-size N and --layout tp=T[,pp=P][,cp=C][,fsdp]",
                         where="--world-size" if args.world_size is None else "--layout")
    real = args.nproc > 1
    if args.fake_ranks and real:
        raise InputError("give --fake-ranks (the distinct ranks, one by one, in this process) or --nproc N (every "
                         "rank for real over gloo), not both", where="--fake-ranks")
    if args.fake_ranks == real:
        raise InputError("say how to run the job: --fake-ranks (its distinct ranks, one by one, in this process) or "
                         f"--nproc {args.world_size} (every rank for real over gloo)", where="--fake-ranks")
    from .options import count_bar
    ranks_done = count_bar("traced {done}/{total} ranks")
    c = trace_ranks(args.model, args.batch_size, args.out, args.world_size, args.layout, args.steps, args.device,
                    args.optimizer, args.seq_len, args.nproc if real else 0, ranks_done, args.rank_timeout)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 80 + "\r")
    how = "on the fake process group" if c.fake else f"for real in {c.world_size} processes (gloo)"
    print(f"podsim trace: {args.model}, {c.world_size} ranks ({c.layout.spec()}, dp={c.layout.dp}), batch "
          f"{args.batch_size} a rank: traced {len(c.ranks_traced)} of {c.world_size} ranks {how} in {c.trace_s:.1f} s")
    for r in c.ranks_traced[:8]:
        coords = ", ".join(f"{d}={v}" for d, v in c.layout.coords(r).items())
        print(f"  rank {r:>5} ({coords}): profiled step {c.step_ms[r]:.3f} ms")
    if len(c.ranks_traced) > 8:
        print(f"  ... and {len(c.ranks_traced) - 8} more")
    print(f"  wrote {c.folder}/kineto.<rank>.json, comms.<rank>.json, capture.json")
    print(f"  simulate it: podsim simulate --workload-configuration {c.folder} --cluster dgx-h100")
    if c.fake:
        print(f"  rescale it:  podsim simulate --workload-configuration {c.folder} --cluster dgx-h100 --gpus "
              f"{c.world_size * 2}   # dp={c.layout.dp * 2}")
    if args.json:
        info = {"world_size": c.world_size, "layout": c.layout.to_json(), "ranks_traced": c.ranks_traced,
                "ranks_traced_count": len(c.ranks_traced), "fake_ranks": c.fake, "trace_s": round(c.trace_s, 3),
                "step_ms_per_rank": {str(r): v for r, v in c.step_ms.items()}, "folder": str(c.folder)}
        atomic_write_text(args.json, json.dumps(info, indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0
