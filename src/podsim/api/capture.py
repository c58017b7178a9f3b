"""Capture a training step of a PyTorch model (``podsim trace``; needs torch).

* :func:`capture` -- one process (or ``nproc`` processes of DistributedDataParallel): profiler
  and execution traces of one training step, a Chakra copy and ``capture.json``; returns a
  :class:`Capture`.
* :func:`trace_ranks` -- a parallel job of ``world_size`` ranks under a layout, its distinct
  ranks one by one on a fake process group (or every rank for real over gloo); returns a
  :class:`RankCapture`.

Simulate what they write with :func:`podsim.api.simulate` (the folder is a trace in the
``pytorch`` or ``rank-traces`` format).  Both look the capture room's functions up when called,
so a test (or a tool) may replace them there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .. import capture as _capture
from ..capture import Capture, RankCapture

__all__ = ["Capture", "RankCapture", "capture", "trace_ranks"]


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
    """``steps`` warm-up steps then one profiled training step of ``model`` at ``batch_size``,
    traces written to ``out`` (:func:`podsim.capture.capture`; ``bucket_mb`` in MiB)."""
    return _capture.capture(model, batch_size, out, steps, device, optimizer, seq_len, progress, nproc, bucket_mb)


def trace_ranks(
    model: str,
    batch_size: int,
    out: str | Path,
    world_size: int,
    layout_spec: str,
    steps: int = 2,
    device: str = "cpu",
    optimizer: str = "adam",
    seq_len: int = 128,
    nproc: int = 0,
    progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 1800.0,
) -> RankCapture:
    """A parallel job of ``world_size`` ranks under ``layout_spec``, rank by rank
    (:func:`podsim.capture.trace_ranks`; ``timeout_s`` in seconds)."""
    return _capture.trace_ranks(
        model, batch_size, out, world_size, layout_spec, steps, device, optimizer, seq_len, nproc, progress, timeout_s
    )
