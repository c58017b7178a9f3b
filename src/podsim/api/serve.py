"""``podsim serve`` as a Python call: inference serving as DLSIM models it -- requests of
several models, placed on sub-meshes of a cluster, queued per GPU, a replica chosen for each
request by a scheduler.

:func:`serve` takes a :class:`ServeJob` (what the command line and the sweep's ``run: serve``
build from their flags) and returns a :class:`~podsim.serving.simulator.ServeResult`; its JSON
document, text summary, trace and plot are in :mod:`podsim.report.serving`.  Workloads are
written with :func:`generate_workload` and :func:`write_workload` (``podsim serve-workload``).

Example::

    from podsim.api.serve import ServeJob, serve
    from podsim.report.serving import summarize
    r = serve(ServeJob(placement="placement.json", workload="w.csv", scheduler="round-robin"))
    print(summarize(r)["latency_p99_s"])      # s

Units: think time in ms, durations and SLOs in s, GPU memory in GB (10^9 B).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

from ..errors import InputError
from ..serving import (
    ClosedLoop,
    Placement,
    ServeResult,
    ServeWorkload,
    generate_workload,
    load_profiles,
    read_placement,
    simulate_serving,
    write_workload,
)
from ..serving.placement import MEMORY_CHECKS, check_placement, serve_cluster
from ..serving.schedulers import DEFAULT_SCHEDULER, SCHEDULERS
from ..serving.schedulers import describe as describe_schedulers
from ..serving.simulator import parse_overhead
from ..serving.workload import read_any_workload

__all__ = ["MEMORY_CHECKS", "SCHEDULERS", "ServeJob", "describe_schedulers", "generate_workload", "numbers",
           "per_model", "serve", "whole_numbers", "write_workload"]


@dataclass(frozen=True)
class ServeJob:
    """Everything one serving run depends on.

    Attributes:
        placement: a placement file (DLSIM's JSON, or YAML) or a read :class:`Placement`.
        workload: a DLSIM workload CSV or a request trace CSV (model_id, arrival_s columns), or
            a :class:`ServeWorkload`; exactly one of it and ``closed_loop``.
        closed_loop: closed-loop clients per model, instead of ``workload``.
        think_ms: closed loop: mean think time between a response and the next request (ms).
        duration_s: closed loop: seconds the clients keep sending (required with it).
        slos_s: SLOs per model (s), or one for all; for a closed loop and request traces, or to
            override a workload's (None: the workload's; a closed loop's: none).
        seed: closed loop: the seed of the think times.
        profile: the executables' stage shapes and latencies (YAML; None: DLSIM's V100 profile).
        cluster: a cluster preset or YAML for GPUs per node and GPU memory (nodes: what the
            placement uses); None: DLSIM's 1 node of 2 GPUs of 16 GB.
        num_nodes, gpus_per_node, memory_gb: override the cluster's (GPU memory in GB = 10^9 B).
        scheduler: a name or alias of :data:`SCHEDULERS` (fifo, round-robin / rr, ...).
        dispatch_overhead: ``dlsim``, ``none`` or a number of ms added to a stage's start on a
            busy mesh.
        drop_late: drop a request whose predicted finish misses its SLO (AlpaServe).
        memory_check: weights over a GPU's memory: ``error``, ``warn`` (a note) or ``off``
            (:data:`MEMORY_CHECKS`).
        name: the workload's name for a closed loop (default ``closed-loop``).
    """

    placement: str | os.PathLike[str] | Placement
    workload: str | os.PathLike[str] | ServeWorkload | None = None
    closed_loop: tuple[int, ...] | None = None
    think_ms: float = 0.0
    duration_s: float | None = None
    slos_s: tuple[float, ...] | None = None
    seed: int = 0
    profile: str | os.PathLike[str] | None = None
    cluster: str | None = None
    num_nodes: int | None = None
    gpus_per_node: int | None = None
    memory_gb: float | None = None
    scheduler: str = DEFAULT_SCHEDULER
    dispatch_overhead: str = "dlsim"
    drop_late: bool = False
    memory_check: str = "error"
    name: str | None = None


def numbers(text: str, where: str) -> list[float]:
    """``0.25,0.5``: comma-separated finite numbers.

    Raises:
        InputError: naming ``where`` for anything else (or nothing).
    """
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or not all(math.isfinite(v) for v in vals):
        raise InputError(f"expected comma-separated finite numbers, got {text!r}", where=where)
    return vals


def whole_numbers(text: str, where: str) -> tuple[int, ...]:
    """``8,2``: comma-separated whole numbers >= 0 (closed-loop clients per model).

    Raises:
        InputError: naming ``where`` for anything else.
    """
    vals = numbers(text, where)
    if any(v != int(v) or v < 0 for v in vals):
        raise InputError(f"expected whole numbers of clients, got {text!r}", where=where)
    return tuple(int(v) for v in vals)


def per_model(values: list[float] | tuple[float, ...] | None, models: int, where: str) -> list[float] | None:
    """One value per model: a single value stands for all of them (None stays None).

    Raises:
        InputError: naming ``where`` when the count is neither 1 nor ``models``.
    """
    if values is None or len(values) == models:
        return None if values is None else list(values)
    if len(values) == 1:
        return list(values) * models
    raise InputError(f"{models} models but {len(values)} SLOs", where=where)


def _workload(job: ServeJob) -> ServeWorkload | ClosedLoop:
    """The job's requests: its workload (SLOs overridden) or its closed-loop clients."""
    if (job.workload is None) == (job.closed_loop is None):
        raise InputError("give a workload (-w FILE) or closed-loop clients (--closed-loop C0,C1,...), one of them",
                         where="-w")
    if job.closed_loop is not None:
        if job.duration_s is None:
            raise InputError("closed-loop clients need --duration S", where="--duration")
        clients = list(job.closed_loop)
        return ClosedLoop(clients, job.think_ms / 1e3, job.duration_s,
                          per_model(job.slos_s, len(clients), "--slos") or [math.inf] * len(clients),
                          job.name or "closed-loop", job.seed)
    w = job.workload if isinstance(job.workload, ServeWorkload) else \
        read_any_workload(job.workload)  # type: ignore[arg-type]
    if job.slos_s:
        w = replace(w, slos_s=per_model(job.slos_s, w.num_models, "--slos"))
    return w


def serve(job: ServeJob) -> ServeResult:
    """Serve ``job``'s requests on its placement: the placement is checked against the cluster
    (its warnings, with ``memory_check="warn"``, open the result's notes), then simulated.

    Raises:
        InputError: a missing or contradictory input, a bad file, an unknown scheduler (with the
            closest name), a placement the cluster cannot hold.
    """
    workload = _workload(job)
    placement = job.placement if isinstance(job.placement, Placement) else read_placement(job.placement)
    executables = load_profiles(job.profile)
    cluster = serve_cluster(placement, job.cluster, job.num_nodes, job.gpus_per_node, job.memory_gb)
    overhead = parse_overhead(job.dispatch_overhead)
    warnings = check_placement(placement, executables, cluster, job.memory_check)
    result = simulate_serving(workload, placement, executables, cluster, scheduler=job.scheduler,
                              overhead_ns=overhead, drop_late=job.drop_late)
    result.notes[:0] = warnings
    return result
