"""One entry point: a one-GPU trace (TrioSim folder or ``podsim trace`` folder) to the workload
of a parallel mode, with batch extrapolation and micro-batching resolved and checked."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..workload import Workload
from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .memory import GIB, Footprint, footprint, plan_offload
from .pipeline_parallel import partition, pipeline_parallel
from .tensor_parallel import tensor_parallel
from .trace import OneGpuStep, from_pytorch, from_triosim

MODES = ("dp", "ddp", "tp", "pp")


def load_step(triosim: str | Path | None = None, pytorch: str | Path | None = None,
              whole_trace: bool = False, traced_batch: int | None = None,
              simulated_batch: int | None = None, execution_trace: str | Path | None = None) -> OneGpuStep:
    """The one-GPU step of a TrioSim trace folder or a ``podsim trace`` folder (exactly one),
    extrapolated from ``traced_batch`` to ``simulated_batch`` when that is given.  A ``podsim
    trace`` folder says its batch (``capture.json``): ``traced_batch`` may be left out, and
    must agree when given.  ``pytorch`` may also be a Kineto trace file, with its
    ``execution_trace`` (a capture made elsewhere).

    Raises:
        InputError: for neither folder or both, an unreadable folder, a traced batch that is not
            the capture's, or a simulated batch without the traced one.
    """
    if (triosim is None) == (pytorch is None):
        raise InputError("give one trace: a TrioSim folder or a podsim trace folder")
    if triosim is not None:
        from ..formats.triosim import read_triosim
        step = from_triosim(read_triosim(triosim))   # TrioSim's traces step Adam
    else:
        from ..formats.pytorch_trace import capture_files
        if not Path(pytorch).exists():  # type: ignore[arg-type]
            raise InputError(f"{pytorch}: no such folder or file; expected a `podsim trace --out` folder or a "
                             "Kineto trace JSON", where="--pytorch")
        if Path(pytorch).is_file():  # type: ignore[arg-type]
            kineto, et = Path(pytorch), (Path(execution_trace) if execution_trace else None)  # type: ignore[arg-type]
        else:
            kineto, et = capture_files(pytorch)[0]  # type: ignore[arg-type]   # rank 0 of a distributed capture
        step = from_pytorch(kineto, et, whole_trace)
        step.source = str(pytorch)   # the capture folder names the run
        info = _capture_info(kineto.parent)
        if info.get("optimizer") == "sgd":   # podsim trace's SGD has no momentum
            step.optimizer_states = 0
        captured = info.get("batch_size")
        if isinstance(captured, int):
            if traced_batch is not None and traced_batch != captured:
                raise InputError(f"the capture was taken at batch {captured} (capture.json), not {traced_batch}",
                                 str(pytorch), "--batch-size")
            traced_batch = captured
    step.batch = traced_batch
    if simulated_batch is not None:
        if traced_batch is None:
            raise InputError("--batch-size-sim needs --batch-size, the batch the trace was taken at")
        step = extrapolate(step, traced_batch, simulated_batch)
        step.batch = simulated_batch
    return step


def _capture_info(folder: Path) -> dict:
    """``capture.json`` of a ``podsim trace`` folder, or {} when it has none (a trace from
    elsewhere).

    Raises:
        InputError: for a capture.json that is not a JSON object.
    """
    import json
    p = folder / "capture.json"
    if not p.is_file():
        return {}
    try:
        info = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read: {e}", str(p)) from None
    if not isinstance(info, dict):
        raise InputError("expected a JSON object", str(p))
    return info


def micro_batches(stages: int, batch: int | None, micro_batch: int | None) -> int:
    """Micro-batches per pipeline: ``batch / micro_batch``, or one per stage by default.

    Raises:
        InputError: for a micro-batch without the batch, or one that does not divide it.
    """
    if micro_batch is None:
        return stages
    if batch is None:
        raise InputError("--micro-batch-size needs the batch: give --batch-size (and --batch-size-sim)")
    if micro_batch < 1 or batch % micro_batch:
        raise InputError(f"--micro-batch-size {micro_batch} does not divide the batch {batch}")
    return batch // micro_batch


def parallelize(step: OneGpuStep, mode: str, gpus: int = 1, *, batch: int | None = None,
                micro_batch: int | None = None, bucket_bytes: int = DDP_BUCKET_BYTES,
                pipeline_schedule: str = "1f1b", pp_replicas: int = 1) -> Workload:
    """The ``gpus``-GPU workload of ``step`` (of ``batch`` samples) in ``mode`` (dp, ddp, tp or
    pp); for pp, ``micro_batch`` splits the batch (default: one micro-batch per stage) and
    ``pp_replicas`` pipelines of ``gpus / pp_replicas`` stages run data parallel.

    Raises:
        InputError: for an unknown mode, tp / pp on a step that does not say which ops read
            parameters, or a micro-batch without the batch or not dividing it.
    """
    if mode not in MODES:
        raise InputError(f"parallel mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode in ("tp", "pp") and not any(o.tp_split or o.param_bytes for o in step.ops):
        raise InputError(f"--parallel {mode} needs to know which ops read parameters: a TrioSim trace, or a "
                         "PyTorch trace with its execution trace (et.json, which podsim trace writes)")
    if pp_replicas != 1 and mode != "pp":
        raise InputError(f"--dp {pp_replicas} is for --parallel pp (data parallelism across pipelines), not "
                         f"--parallel {mode}")
    if mode in ("dp", "ddp") and gpus > 1 and step.gradient_bytes == 0:
        raise InputError(f"--parallel {mode} needs the gradients' sizes, and this step has none: give the execution "
                         "trace (et.json, which podsim trace writes) with the Kineto trace")
    if mode == "tp":
        return tensor_parallel(step, gpus)
    if mode == "pp":
        if pp_replicas < 1 or gpus % pp_replicas:
            raise InputError(f"--dp {pp_replicas} must divide the {gpus} GPUs into pipelines of equal stages")
        stages = gpus // pp_replicas
        return pipeline_parallel(step, stages, micro_batches(stages, batch, micro_batch), pipeline_schedule,
                                 pp_replicas)
    return data_parallel(step, gpus, mode, bucket_bytes)


def fit_memory(step: OneGpuStep, mode: str, gpus: int, capacity_bytes: int, *, offload: bool = False,
               micro_batches: int = 1, pipeline_schedule: str = "1f1b", pp_replicas: int = 1
               ) -> tuple[OneGpuStep, Footprint]:
    """Check that ``step`` in ``mode`` fits in ``capacity_bytes`` per GPU; with ``offload``,
    mark the activations that do not fit to live in remote memory (dp, ddp, tp).  Returns the
    step (offloads marked) and the footprint of the fullest GPU.

    Raises:
        InputError: when it does not fit and cannot be offloaded, naming what takes the memory.
    """
    if mode == "pp":
        stages = max(gpus // max(pp_replicas, 1), 1)
        f_parts, _ = partition(step, stages)
        fps = [footprint(step, "pp", stages, micro_batches=micro_batches, stage_ops=part,
                         in_flight=micro_batches if pipeline_schedule == "gpipe" else min(stages - s, micro_batches))
               for s, part in enumerate(f_parts)]
        s, fp = max(enumerate(fps), key=lambda x: x[1].total)
        if fp.total > capacity_bytes:
            raise InputError(f"pipeline stage {s} needs {fp.describe()} per GPU, more than its "
                             f"{capacity_bytes / GIB:.2f} GiB: use more stages, smaller micro-batches, 1f1b, or a GPU "
                             "with more memory (--gpu-memory); offloading is for dp, ddp and tp")
        return step, fp
    fp = footprint(step, mode, gpus)
    if fp.total <= capacity_bytes:
        return step, fp
    if not offload:
        raise InputError(f"the step needs {fp.describe()} per GPU, more than its {capacity_bytes / GIB:.2f} GiB: give "
                         "--remote-bandwidth GB/s to offload activations to host or pooled memory (TrioSim's "
                         "-bandwidth), or use tensor / pipeline parallelism, a smaller --batch-size-sim, or a GPU "
                         "with more memory (--gpu-memory)")
    return plan_offload(step, fp, capacity_bytes), fp


def summary(step: OneGpuStep, mode: str, gpus: int, simulated_ns: int) -> str:
    """One line: the one-GPU trace by stage against the simulated time."""
    st = step.stage_ns()
    one = step.total_ns
    return (f"one GPU (the trace): {one / 1e6:.3f} ms = forward {st['forward'] / 1e6:.3f} + backward "
            f"{st['backward'] / 1e6:.3f} + optimizer {st['optimizer'] / 1e6:.3f} ms; simulated on {gpus} GPUs "
            f"({mode}): {simulated_ns / 1e6:.3f} ms ({100 * (simulated_ns / one - 1):+.2f}%)")
