"""``podsim trace``: profile one training step of a model with PyTorch's profiler and execution-
trace observer, then write both raw files and podsim's workload.

Warm-up steps run under a profiler schedule (``wait=0, warmup=K, active=1``) and
``prof.step()`` after every step, so the profiled step carries a ``ProfilerStep#K``
annotation in both files (what the importer and Chakra's linker look for).  Files written to the
output folder: ``kineto.json`` (the chrome trace), ``et.json`` (the execution trace),
``workload.<rank>.et`` (podsim's workload as Chakra) and ``capture.json`` (what ran and the
measured step time).

Distributed capture (``nproc`` > 1): ``nproc`` processes (``torch.multiprocessing``) join one
process group (gloo on the CPU, NCCL on GPUs, one GPU per process), wrap the model in
``DistributedDataParallel`` and each profile the same step of its own batch; rank ``r`` writes
``kineto.<r>.json`` and ``et.<r>.json``, so the gradient all-reduces are in the traces.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from ..fileio import atomic_write_text
from ..formats.chakra import write_workload_with_groups
from ..formats.pytorch_trace import capture_to_workload, read_kineto
from .models import resolve, torch_module


@dataclass
class Capture:
    """What a capture wrote and measured."""

    folder: Path
    kineto: Path  #: rank 0's Kineto trace
    execution_trace: Path  #: rank 0's execution trace
    workload_prefix: Path
    step_ms: float  #: the profiled step's wall time (ms), from rank 0's ProfilerStep annotation
    model: str
    device: str
    nproc: int = 1


def _trace_names(rank: int, nproc: int) -> tuple[str, str]:
    return ("kineto.json", "et.json") if nproc == 1 else (f"kineto.{rank}.json", f"et.{rank}.json")


def _profile(
    rank: int,
    nproc: int,
    model: str,
    batch_size: int,
    folder: str,
    steps: int,
    device: str,
    optimizer: str,
    seq_len: int,
    bucket_mb: float,
    show_progress: bool,
) -> None:
    """Build the model and run ``steps`` warm-up steps and one profiled step on this process,
    writing its two trace files (atomically)."""
    torch = torch_module()
    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        schedule,
    )

    dev = f"cuda:{rank}" if device == "cuda" and nproc > 1 else device
    if nproc > 1:
        import torch.distributed as dist

        if device == "cuda":
            torch.cuda.set_device(rank)
        dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=nproc)
    try:
        torch.manual_seed(rank)
        setup = resolve(model, batch_size, seq_len)
        net = setup.model.to(dev).train()
        if nproc > 1:
            net = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=bucket_mb)
        x = setup.inputs.to(dev)
        y = setup.targets.to(dev)
        opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(net.parameters(), lr=1e-3)
        out = Path(folder)
        kname, ename = _trace_names(rank, nproc)
        tmp_kineto, tmp_et = out / f"{kname}.tmp", out / f"{ename}.tmp"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        observer = ExecutionTraceObserver().register_callback(str(tmp_et))
        total = steps + 1
        try:

            def export(p: Any) -> None:
                p.export_chrome_trace(str(tmp_kineto))

            with (
                warnings.catch_warnings(),
                profile(
                    activities=activities,
                    record_shapes=True,
                    execution_trace_observer=observer,
                    schedule=schedule(wait=0, warmup=steps, active=1),
                    on_trace_ready=export,
                ) as prof,
            ):
                warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
                for i in range(total):
                    opt.zero_grad(set_to_none=True)
                    try:
                        loss = setup.loss_fn(net, x, y)
                        loss.backward()
                    except Exception as e:  # noqa: BLE001 - the model's code: say what failed, cleanly
                        raise InputError(
                            f"a training step of {model} failed: {type(e).__name__}: {e}", where="--model"
                        ) from e
                    opt.step()
                    if device == "cuda":
                        torch.cuda.synchronize()
                    prof.step()
                    if show_progress and rank == 0:
                        bar = "#" * (20 * (i + 1) // total)
                        sys.stderr.write(
                            f"\r  step {i + 1}/{total} [{bar:<20}] on {nproc} process{'es' if nproc > 1 else ''}"
                        )
                        sys.stderr.flush()
        finally:
            observer.unregister_callback()
        tmp_et.replace(out / ename)
        tmp_kineto.replace(out / kname)
    except BaseException:
        for tmp in (Path(folder) / f"{n}.tmp" for n in _trace_names(rank, nproc)):
            tmp.unlink(missing_ok=True)  # no half-written traces left behind
        raise
    finally:
        if nproc > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def job_process(
    rank: int, nproc: int, port: int, target: Callable[..., Any], args: tuple[Any, ...], path: list[str]
) -> None:
    """A spawned process of a real job: the parent's import path and the rendezvous address,
    then ``target(rank, nproc, *args)``."""
    sys.path[:0] = [p for p in path if p not in sys.path]
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    target(rank, nproc, *args)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_OURS = re.compile(r"^(kineto|et)(\.\d+)?\.json(\.gz|\.tmp)?$|^workload\.(\d+\.et|comm_groups\.json)$")


def _remove_stale(folder: Path, nproc: int) -> None:
    """Remove what an earlier capture into ``folder`` wrote and this one will not (the other
    layout's traces, more ranks' files), so the folder holds one capture."""
    mine = {n for r in range(nproc) for n in _trace_names(r, nproc)} | {f"workload.{r}.et" for r in range(nproc)}
    mine.add("workload.comm_groups.json")  # rewritten or removed with the workload
    for f in folder.iterdir():
        if f.is_file() and _OURS.match(f.name) and f.name not in mine:
            f.unlink()


@contextlib.contextmanager
def spawn_errors() -> Iterator[None]:
    """Turn a spawned process's failure into an :class:`InputError` (its own clear error, as it
    would be in one process, or the last line of what it raised)."""
    import torch.multiprocessing as mp

    try:
        yield
    except mp.ProcessRaisedException as e:
        last = str(e).strip().splitlines()[-1]
        prefix = "podsim.errors.InputError: "
        if last.startswith(prefix):  # the child's own clear error, as it would be in one process
            raise InputError(last[len(prefix) :]) from None
        raise InputError(f"a capture process failed: {last}", where="--nproc") from None
    except mp.ProcessExitedException as e:
        raise InputError(f"a capture process died: {e}", where="--nproc") from None


def _run_processes(nproc: int, args: tuple[Any, ...]) -> None:
    """Profile in this process, or in ``nproc`` spawned ones (errors as :class:`InputError`)."""
    if nproc == 1:
        _profile(0, 1, *args)
        return
    import torch.multiprocessing as mp

    with spawn_errors():
        mp.spawn(job_process, args=(nproc, _free_port(), _profile, args, list(sys.path)), nprocs=nproc, join=True)


def capture(
    model: str,
    batch_size: int,
    out: str | Path,
    steps: int = 3,
    device: str = "cpu",
    optimizer: str = "adam",
    seq_len: int = 128,
    progress: Callable[[int, int], None] | None = None,
    nproc: int = 1,
    bucket_mb: float = 25.0,
) -> Capture:
    """Run ``steps`` warm-up steps then one profiled training step; write the traces to ``out``.

    ``nproc`` > 1 runs DistributedDataParallel on that many processes (batch ``batch_size``
    each; DDP buckets of ``bucket_mb`` MiB), each writing its own traces.

    Raises:
        InputError: for an unknown device or optimizer, no CUDA device (or fewer GPUs than
            processes) when asked, or a model that cannot be built (see
            :func:`podsim.capture.models.resolve`).
    """
    torch = torch_module()
    if device not in ("cpu", "cuda"):
        raise InputError(f"device must be cpu or cuda, not {device!r}", where="--device")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("no CUDA device visible to PyTorch", where="--device")
    if optimizer not in ("adam", "sgd"):
        raise InputError(f"optimizer must be adam or sgd, not {optimizer!r}", where="--optimizer")
    if steps < 1:
        raise InputError(f"at least one warm-up step is needed, got {steps}", where="--steps")
    if nproc < 1:
        raise InputError(f"at least one process is needed, got {nproc}", where="--nproc")
    if device == "cuda" and nproc > torch.cuda.device_count():
        raise InputError(
            f"{nproc} processes need {nproc} GPUs (NCCL runs one rank per GPU); {torch.cuda.device_count()} visible",
            where="--nproc",
        )
    if bucket_mb <= 0:
        raise InputError(f"the DDP bucket must hold some bytes, got {bucket_mb:g} MiB", where="--bucket-mb")
    folder = Path(out)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    args = (
        model,
        batch_size,
        str(folder),
        steps,
        device,
        optimizer,
        seq_len,
        bucket_mb,
        progress is not None and sys.stderr.isatty(),
    )
    try:
        _run_processes(nproc, args)
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()  # a failed capture leaves no empty folder behind
        raise
    _remove_stale(folder, nproc)  # an earlier capture's files, before they are read as this one's
    if progress is not None:
        progress(steps + 1, steps + 1)
    kineto, et = (folder / n for n in _trace_names(0, nproc))
    steps_ms = []
    for r in range(nproc):
        k = read_kineto(folder / _trace_names(r, nproc)[0])
        step = max((a for a in k.annotations if a.name.startswith("ProfilerStep#")), key=lambda a: a.ts)
        steps_ms.append(round(step.dur / 1000, 6))
    w = capture_to_workload(folder)
    prefix = folder / "workload"
    _ets, groups_file = write_workload_with_groups(w, prefix)
    kname, ename = _trace_names(0, nproc)
    info = {
        "model": model,
        "batch_size": batch_size,
        "device": device,
        "optimizer": optimizer,
        "warmup_steps": steps,
        "nproc": nproc,
        "step_ms": steps_ms[0],
        "step_ms_per_rank": steps_ms,
        "torch": torch.__version__,
        "captured": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "files": {
            "kineto": kname if nproc == 1 else "kineto.<rank>.json",
            "execution_trace": ename if nproc == 1 else "et.<rank>.json",
            "workload": f"{prefix.name}.<rank>.et",
        },
    }
    if nproc > 1:
        info["ddp_bucket_mb"] = bucket_mb
    atomic_write_text(folder / "capture.json", json.dumps(info, indent=1) + "\n")
    if groups_file is None:
        (folder / "workload.comm_groups.json").unlink(missing_ok=True)
    return Capture(folder, kineto, et, prefix, steps_ms[0], model, device, nproc)
