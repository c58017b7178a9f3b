"""``podsim trace``: profile one training step of a model with PyTorch's profiler and execution-
trace observer, then write both raw files and podsim's workload.

Warm-up steps run under a profiler schedule (``wait=0, warmup=K, active=1``) and
``prof.step()`` after every step, so the profiled step carries a ``ProfilerStep#K``
annotation in both files (what the importer and Chakra's linker look for).  Files written to the
output folder: ``kineto.json`` (the chrome trace), ``et.json`` (the execution trace),
``workload.<rank>.et`` (podsim's workload as Chakra, one rank) and ``capture.json`` (what ran
and the measured step time).
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..fileio import atomic_write_text
from .models import resolve, torch_module


@dataclass
class Capture:
    """What a capture wrote and measured."""

    folder: Path
    kineto: Path
    execution_trace: Path
    workload_prefix: Path
    step_ms: float          #: the profiled step's wall time (ms), from its ProfilerStep annotation
    model: str
    device: str


def capture(model: str, batch_size: int, out: str | Path, steps: int = 3, device: str = "cpu",
            optimizer: str = "adam", seq_len: int = 128, progress: Callable[[int, int], None] | None = None
            ) -> Capture:
    """Run ``steps`` warm-up steps then one profiled training step; write the traces to ``out``.

    Raises:
        InputError: for an unknown device or optimizer, no CUDA device when asked, or a model
            that cannot be built (see :func:`podsim.capture.models.resolve`).
    """
    torch = torch_module()
    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        schedule,
    )

    if device not in ("cpu", "cuda"):
        raise InputError(f"device must be cpu or cuda, not {device!r}", where="--device")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("no CUDA device visible to PyTorch", where="--device")
    if optimizer not in ("adam", "sgd"):
        raise InputError(f"optimizer must be adam or sgd, not {optimizer!r}", where="--optimizer")
    if steps < 1:
        raise InputError(f"at least one warm-up step is needed, got {steps}", where="--steps")
    setup = resolve(model, batch_size, seq_len)
    net = setup.model.to(device).train()
    x = setup.inputs.to(device)
    y = setup.targets.to(device)
    opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(net.parameters(), lr=1e-3)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    kineto, et = folder / "kineto.json", folder / "et.json"
    tmp_kineto = folder / "kineto.json.tmp"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    observer = ExecutionTraceObserver().register_callback(str(folder / "et.json.tmp"))
    total = steps + 1
    with warnings.catch_warnings(), profile(activities=activities, record_shapes=True,
                                            execution_trace_observer=observer,
                                            schedule=schedule(wait=0, warmup=steps, active=1),
                                            on_trace_ready=lambda p: p.export_chrome_trace(str(tmp_kineto))) as prof:
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        for i in range(total):
            opt.zero_grad(set_to_none=True)
            loss = setup.loss_fn(net, x, y)
            loss.backward()
            opt.step()
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
            if progress is not None:
                progress(i + 1, total)
    observer.unregister_callback()
    (folder / "et.json.tmp").replace(et)
    tmp_kineto.replace(kineto)
    from ..formats.chakra import write_workload_with_groups
    from ..formats.pytorch_trace import pytorch_to_workload, read_kineto
    step = max((a for a in read_kineto(kineto).annotations if a.name.startswith("ProfilerStep#")),
               key=lambda a: a.ts)
    w = pytorch_to_workload(kineto, et)
    prefix = folder / "workload"
    write_workload_with_groups(w, prefix)
    info = {"model": model, "batch_size": batch_size, "device": device, "optimizer": optimizer,
            "warmup_steps": steps, "step_ms": round(step.dur / 1000, 6), "torch": torch.__version__,
            "captured": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": {"kineto": kineto.name, "execution_trace": et.name, "workload": f"{prefix.name}.<rank>.et"}}
    atomic_write_text(folder / "capture.json", json.dumps(info, indent=1) + "\n")
    return Capture(folder, kineto, et, prefix, step.dur / 1000, model, device)
