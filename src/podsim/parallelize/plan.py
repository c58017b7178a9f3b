"""One entry point: a one-GPU trace (any trace format with one-GPU steps: a TrioSim folder, a
``podsim trace`` folder, a Kineto file; :mod:`podsim.formats.registry`) to the workload
of a parallel mode, with batch extrapolation and micro-batching resolved and checked."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep
from ..formats.registry import ReadOptions, to_step
from ..workload import Workload
from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .memory import GIB, Footprint, footprint, plan_offload
from .pipeline_parallel import partition, pipeline_parallel
from .tensor_parallel import tensor_parallel

MODES = ("dp", "ddp", "tp", "pp")


def load_step(
    triosim: str | Path | None = None,
    pytorch: str | Path | None = None,
    whole_trace: bool = False,
    traced_batch: int | None = None,
    simulated_batch: int | None = None,
    execution_trace: str | Path | None = None,
    *,
    path: str | Path | None = None,
    trace_format: str | None = None,
) -> OneGpuStep:
    """The one-GPU step of a trace, extrapolated from ``traced_batch`` to ``simulated_batch``
    when that is given.  Name the trace exactly one way: ``triosim`` (a TrioSim trace folder),
    ``pytorch`` (a ``podsim trace`` folder, or a Kineto trace file with its
    ``execution_trace``: a capture made elsewhere), or ``path`` in ``trace_format`` (default:
    sniffed, :func:`podsim.formats.registry.trace_format`).  A trace that says its batch (a
    ``podsim trace`` folder's ``capture.json``) needs no ``traced_batch``, which must agree
    when given.

    Raises:
        InputError: for no trace or more than one, an unreadable trace, a format without one-GPU
            steps, a traced batch that is not the capture's, or a simulated batch without the
            traced one.
    """
    given = [(p, f) for p, f in ((triosim, "triosim"), (pytorch, "pytorch"), (path, trace_format)) if p is not None]
    if len(given) != 1:
        raise InputError("give one trace: a TrioSim folder or a podsim trace folder")
    source, fmt = given[0]
    step = to_step(source, fmt, ReadOptions(execution_trace=execution_trace, whole_trace=whole_trace))
    captured = step.batch
    if captured is not None:
        if traced_batch is not None and traced_batch != captured:
            raise InputError(
                f"the capture was taken at batch {captured} (capture.json), not {traced_batch}",
                str(source),
                "--batch-size",
            )
        traced_batch = captured
    step.batch = traced_batch
    if simulated_batch is not None:
        if traced_batch is None:
            raise InputError("--batch-size-sim needs --batch-size, the batch the trace was taken at")
        step = extrapolate(step, traced_batch, simulated_batch)
        step.batch = simulated_batch
    return step


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


def parallelize(
    step: OneGpuStep,
    mode: str,
    gpus: int = 1,
    *,
    batch: int | None = None,
    micro_batch: int | None = None,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    pipeline_schedule: str = "1f1b",
    pp_replicas: int = 1,
) -> Workload:
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
        raise InputError(
            f"--parallel {mode} needs to know which ops read parameters: a TrioSim trace, or a "
            "PyTorch trace with its execution trace (et.json, which podsim trace writes)"
        )
    if pp_replicas != 1 and mode != "pp":
        raise InputError(
            f"--dp {pp_replicas} is for --parallel pp (data parallelism across pipelines), not --parallel {mode}"
        )
    if mode in ("dp", "ddp") and gpus > 1 and step.gradient_bytes == 0:
        raise InputError(
            f"--parallel {mode} needs the gradients' sizes, and this step has none: give the execution "
            "trace (et.json, which podsim trace writes) with the Kineto trace"
        )
    if mode == "tp":
        return tensor_parallel(step, gpus)
    if mode == "pp":
        if pp_replicas < 1 or gpus % pp_replicas:
            raise InputError(f"--dp {pp_replicas} must divide the {gpus} GPUs into pipelines of equal stages")
        stages = gpus // pp_replicas
        return pipeline_parallel(
            step, stages, micro_batches(stages, batch, micro_batch), pipeline_schedule, pp_replicas
        )
    return data_parallel(step, gpus, mode, bucket_bytes)


def fit_memory(
    step: OneGpuStep,
    mode: str,
    gpus: int,
    capacity_bytes: int,
    *,
    offload: bool = False,
    micro_batches: int = 1,
    pipeline_schedule: str = "1f1b",
    pp_replicas: int = 1,
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
        fps = [
            footprint(
                step,
                "pp",
                stages,
                micro_batches=micro_batches,
                stage_ops=part,
                in_flight=micro_batches if pipeline_schedule == "gpipe" else min(stages - s, micro_batches),
            )
            for s, part in enumerate(f_parts)
        ]
        s, fp = max(enumerate(fps), key=lambda x: x[1].total)
        if fp.total > capacity_bytes:
            raise InputError(
                f"pipeline stage {s} needs {fp.describe()} per GPU, more than its "
                f"{capacity_bytes / GIB:.2f} GiB: use more stages, smaller micro-batches, 1f1b, or a GPU "
                "with more memory (--gpu-memory); offloading is for dp, ddp and tp"
            )
        return step, fp
    fp = footprint(step, mode, gpus)
    if fp.total <= capacity_bytes:
        return step, fp
    if not offload:
        raise InputError(
            f"the step needs {fp.describe()} per GPU, more than its {capacity_bytes / GIB:.2f} GiB: give "
            "--remote-bandwidth GB/s to offload activations to host or pooled memory (TrioSim's "
            "-bandwidth), or use tensor / pipeline parallelism, a smaller --batch-size-sim, or a GPU "
            "with more memory (--gpu-memory)"
        )
    return plan_offload(step, fp, capacity_bytes), fp


def summary(step: OneGpuStep, mode: str, gpus: int, simulated_ns: int) -> str:
    """One line: the one-GPU trace by stage against the simulated time."""
    st = step.stage_ns()
    one = step.total_ns
    return (
        f"one GPU (the trace): {one / 1e6:.3f} ms = forward {st['forward'] / 1e6:.3f} + backward "
        f"{st['backward'] / 1e6:.3f} + optimizer {st['optimizer'] / 1e6:.3f} ms; simulated on {gpus} GPUs "
        f"({mode}): {simulated_ns / 1e6:.3f} ms ({100 * (simulated_ns / one - 1):+.2f}%)"
    )
