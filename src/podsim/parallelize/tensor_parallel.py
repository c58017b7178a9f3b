"""Tensor parallelism from a one-GPU step, as TrioSim's ``-case 3`` models it.

Ops that tensor parallelism splits (convolutions, linear layers, embeddings and their backward
ops: ``StepOp.tp_split``) run for 1/N of their time on each of the N GPUs; the others run
whole on every GPU.  After each split op, its output is all-reduced over the N GPUs (the bytes
it writes) and the next op waits for it.  Gradients need no data-parallel reduction (every GPU
holds its own shard of the split weights, whole copies of the rest).
"""

from __future__ import annotations

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep
from ..workload import CollectiveKind, Group, OpKind, ProgramBuilder, Workload
from .memory import Offload


def tensor_parallel(step: OneGpuStep, gpus: int) -> Workload:
    """The ``gpus``-way tensor-parallel workload of ``step``.

    Raises:
        InputError: for fewer than 1 GPU.
    """
    if gpus < 1:
        raise InputError(f"GPUs must be at least 1, got {gpus}")
    b = ProgramBuilder(f"tp x{gpus}")
    prev: list[int] = []
    nid = 0
    offload = Offload(step)
    for op in step.ops:
        nid += 1
        ns = max(1, round(op.ns / gpus)) if op.tp_split else max(op.ns, 1)
        deps, nid = offload.before_backward(b, op, prev, nid)
        prev = [
            b.add(
                OpKind.COMPUTE,
                op.name,
                data_deps=deps,
                node_id=nid,
                duration_ns=ns,
                extra={"stage": op.stage, "layer": op.layer},
            )
        ]
        if op.offload_bytes:
            nid += 1
            offload.store(b, op, prev[0], nid)
        if op.tp_split and gpus > 1 and op.result_bytes > 0:
            nid += 1
            prev = [
                b.add(
                    OpKind.COLLECTIVE,
                    f"{op.name} output all-reduce",
                    data_deps=prev,
                    node_id=nid,
                    collective=int(CollectiveKind.ALL_REDUCE),
                    size_bytes=op.result_bytes,
                    group="tp",
                    stream="tp",
                    extra={"stage": op.stage, "layer": op.layer},
                )
            ]
    prog = b.build()
    prog.notes.extend(step.notes)
    return Workload([prog], [0] * gpus, [Group("tp", tuple(range(gpus)))], f"{step.source} (tp, {gpus} GPUs)")
