"""Capture a training step of a PyTorch model (``podsim trace``; needs torch).

* :func:`capture` -- one process (or ``nproc`` processes of DistributedDataParallel): profiler
  and execution traces of one training step, a Chakra copy and ``capture.json``; returns a
  :class:`Capture`.
* :func:`trace_ranks` -- a parallel job of ``world_size`` ranks under a layout, its distinct
  ranks one by one on a fake process group (or every rank for real over gloo); returns a
  :class:`RankCapture`.
* :func:`run_job` -- either, as a :class:`~podsim.jobs.trace.TraceJob` says (``podsim trace``).

Simulate what they write with :func:`podsim.api.simulate` (the folder is a trace in the
``pytorch`` or ``rank-traces`` format).  Both look the capture room's functions up when called,
so a test (or a tool) may replace them there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .. import capture as _capture
from ..capture import Capture, RankCapture
from ..errors import InputError
from ..jobs.trace import TRACE_PARAMS, TraceJob
from ..params import refuse_unused

__all__ = ["TRACE_PARAMS", "Capture", "RankCapture", "TraceJob", "capture", "run_job", "trace_ranks"]


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


#: the most ranks a parallel trace job may have (the fake process group holds one int32 rank)
MAX_WORLD_SIZE = 2**20


def _check_used(job: TraceJob) -> None:
    """Refuse flags the job would ignore: ``--json`` and ``--rank-timeout`` outside a parallel
    job, ``--bucket-mb`` outside a one-step DDP capture (``--nproc`` without ``--world-size``),
    and a world size beyond :data:`MAX_WORLD_SIZE`."""
    ddp = not job.parallel and job.nproc > 1
    refuse_unused(
        TRACE_PARAMS,
        (
            ("json", job.json, job.parallel, "a parallel job (--world-size N --layout ...)"),
            ("rank-timeout", job.rank_timeout, job.parallel, "a parallel job (--world-size N --layout ...)"),
            ("bucket-mb", job.bucket_mb, ddp, "a DDP capture (--nproc N without --world-size)"),
        ),
    )
    if job.world_size is not None and job.world_size > MAX_WORLD_SIZE:
        raise InputError(
            f"at most {MAX_WORLD_SIZE:,} ranks, got {job.world_size:,}: trace a smaller job and scale it out "
            "(podsim simulate --workload-configuration DIR --gpus N)",
            where="--world-size",
        )


def run_job(job: TraceJob, progress: Callable[[int, int], None] | None = None) -> Capture | RankCapture:
    """The capture ``job`` asks for: a parallel job (:attr:`TraceJob.parallel`) rank by rank
    (:func:`trace_ranks`; ``progress(done, total)`` counts ranks), else one step in one process
    or ``nproc`` processes of DDP (:func:`capture`; ``progress`` counts steps).

    Raises:
        InputError: for a job without its model, batch size or output folder; a parallel job
            without both ``world_size`` and ``layout``, or with both or neither of ``fake_ranks``
            and ``nproc`` > 1; and whatever the capture refuses.
    """
    for flag, value in (("--model", job.model), ("--batch-size", job.batch_size), ("--out", job.out)):
        if value is None:
            raise InputError(f"a trace job needs {flag}", where=flag)
    _check_used(job)
    if not job.parallel:
        return capture(
            job.model,
            job.batch_size,
            job.out,
            job.steps,
            job.device,
            job.optimizer,
            job.seq_len,
            progress,
            job.nproc,
            job.bucket_mb,
        )
    if job.world_size is None or job.layout is None:
        raise InputError(
            "a parallel job needs both --world-size N and --layout tp=T[,pp=P][,cp=C][,fsdp]",
            where="--world-size" if job.world_size is None else "--layout",
        )
    real = job.nproc > 1
    if job.fake_ranks and real:
        raise InputError(
            "give --fake-ranks (the distinct ranks, one by one, in this process) or --nproc N (every "
            "rank for real over gloo), not both",
            where="--fake-ranks",
        )
    if job.fake_ranks == real:
        raise InputError(
            "say how to run the job: --fake-ranks (its distinct ranks, one by one, in this process) or "
            f"--nproc {job.world_size} (every rank for real over gloo)",
            where="--fake-ranks",
        )
    return trace_ranks(
        job.model,
        job.batch_size,
        job.out,
        job.world_size,
        job.layout,
        job.steps,
        job.device,
        job.optimizer,
        job.seq_len,
        job.nproc if real else 0,
        progress,
        job.rank_timeout,
    )
