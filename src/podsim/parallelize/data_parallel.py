"""Data parallelism from a one-GPU step: every GPU runs the step on its share of the batch and
the gradients are all-reduced.

* ``dp`` (TrioSim's standard data parallel): one all-reduce of every gradient after the
  backward pass; the optimizer waits for it.
* ``ddp`` (PyTorch DistributedDataParallel): gradients are gathered into buckets of
  ``bucket_bytes`` in the order the backward pass makes them ready; a full bucket's all-reduce
  starts at once on its own stream, overlapping the rest of the backward; the optimizer waits
  for the last one.

The step's op times are the one-GPU times (the trace's batch per GPU); batch-size
extrapolation comes first if the per-GPU batch differs.  Gradient bytes are the parameters'
bytes as traced (fp32 for an fp32 trace).
"""

from __future__ import annotations

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep
from ..workload import CollectiveKind, Group, OpKind, ProgramBuilder, Workload
from .memory import Offload

DDP_BUCKET_BYTES = 25 * 2**20  #: PyTorch DDP's default bucket_cap_mb


def data_parallel(step: OneGpuStep, gpus: int, mode: str = "ddp", bucket_bytes: int = DDP_BUCKET_BYTES) -> Workload:
    """The ``gpus``-GPU data-parallel workload of ``step`` (every GPU runs the same program).

    Raises:
        InputError: for fewer than 1 GPU, an unknown mode or a bucket of no bytes.
    """
    if gpus < 1:
        raise InputError(f"GPUs must be at least 1, got {gpus}")
    if mode not in ("dp", "ddp"):
        raise InputError(f"data-parallel mode must be 'dp' or 'ddp', not {mode!r}")
    if bucket_bytes <= 0:
        raise InputError(f"the DDP bucket must hold some bytes, got {bucket_bytes}")
    b = ProgramBuilder(f"{mode} x{gpus}")
    prev: list[int] = []
    reduces: list[int] = []
    bucket = 0
    nid = 0

    bucket_layers: list[str] = []

    def all_reduce(nbytes: int, after: list[int]) -> None:
        nonlocal nid
        nid += 1
        if mode == "dp":
            label = "dp all-reduce (all gradients)"
        else:
            span = (
                f" ({bucket_layers[0]})"
                if len(bucket_layers) == 1
                else f" ({bucket_layers[0]} .. {bucket_layers[-1]})"
                if bucket_layers
                else ""
            )
            label = f"ddp bucket {len(reduces)}{span}"
        bucket_layers.clear()
        reduces.append(
            b.add(
                OpKind.COLLECTIVE,
                f"{mode} gradient all-reduce ({nbytes:,} B)",
                data_deps=after,
                node_id=nid,
                collective=int(CollectiveKind.ALL_REDUCE),
                size_bytes=nbytes,
                group="dp",
                stream="dp",
                extra={"layer": label, "stage": "backward"},
            )
        )

    optimizer_started = False
    offload = Offload(step)
    for op in step.ops:
        if op.stage == "optimizer" and not optimizer_started:
            optimizer_started = True
            if gpus > 1 and bucket:
                all_reduce(bucket, prev)
                bucket = 0
            prev = prev + reduces
        nid += 1
        deps, nid = offload.before_backward(b, op, prev, nid)
        prev = [
            b.add(
                OpKind.COMPUTE,
                op.name,
                data_deps=deps,
                node_id=nid,
                duration_ns=max(op.ns, 1),
                extra={"stage": op.stage, "layer": op.layer},
            )
        ]
        if op.offload_bytes:
            nid += 1
            offload.store(b, op, prev[0], nid)
        if gpus > 1 and op.grad_bytes:
            bucket += op.grad_bytes
            if op.layer and op.layer not in bucket_layers:
                bucket_layers.append(op.layer)
            if mode == "ddp" and bucket >= bucket_bytes:
                all_reduce(bucket, prev)
                bucket = 0
    if gpus > 1 and bucket:
        all_reduce(bucket, prev)
    prog = b.build()
    prog.notes.extend(step.notes)
    return Workload([prog], [0] * gpus, [Group("dp", tuple(range(gpus)))], f"{step.source} ({mode}, {gpus} GPUs)")
