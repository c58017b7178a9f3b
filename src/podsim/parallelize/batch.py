"""Batch-size extrapolation of a one-GPU step.

A step traced at batch ``traced`` is scaled to batch ``target``: forward and backward ops'
times and the activations they write scale linearly with the batch (their work is per sample,
as TrioSim assumes); the optimizer's ops and every parameter and gradient size do not (TrioSim
scales those too, a simplification podsim does not copy).  Linear scaling ignores the lower efficiency of
kernels on small batches: extrapolate down by large factors with care.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep


def extrapolate(step: OneGpuStep, traced: int, target: int) -> OneGpuStep:
    """``step`` (traced at batch ``traced``) at batch ``target`` per GPU.

    Raises:
        InputError: for a batch size below 1.
    """
    if traced < 1 or target < 1:
        raise InputError(f"batch sizes must be at least 1, got {traced} (traced) and {target} (simulated)")
    if traced == target:
        return step
    ratio = target / traced
    ops = [
        op
        if op.stage == "optimizer"
        else replace(
            op,
            ns=max(1, round(op.ns * ratio)),
            output_bytes=round(op.output_bytes * ratio),
            result_bytes=round(op.result_bytes * ratio),
        )
        for op in step.ops
    ]
    notes = step.notes + [
        f"batch {traced} traced, {target} simulated: forward and backward times and activations "
        f"scaled by {ratio:g}, the optimizer and parameter sizes not"
    ]
    return replace(step, ops=ops, notes=notes)
