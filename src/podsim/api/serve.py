"""``podsim serve`` as a Python call: inference serving as DLSIM models it -- requests of
several models, placed on sub-meshes of a cluster, queued per GPU, a replica chosen for each
request by a scheduler.

:func:`serve` takes a :class:`ServeJob` (what the command line and the sweep's ``run: serve``
build from their flags) and returns a :class:`~podsim.serving.simulator.ServeResult`; its JSON
document, text summary, trace and plot are in :mod:`podsim.report.serving`.  Workloads are
generated with :func:`generate` from a :class:`ServeWorkloadJob` (``podsim serve-workload
generate``; or :func:`generate_workload` with its arguments) and written with
:func:`write_workload`.

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
from dataclasses import replace

from ..errors import InputError
from ..jobs.serve import ServeJob, numbers, whole_numbers
from ..jobs.serve_workload import SERVE_WORKLOAD_PARAMS, ServeWorkloadJob
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
from ..serving.schedulers import SCHEDULERS
from ..serving.schedulers import describe as describe_schedulers
from ..serving.simulator import parse_overhead
from ..serving.workload import read_any_workload

__all__ = [
    "MEMORY_CHECKS",
    "SCHEDULERS",
    "SERVE_WORKLOAD_PARAMS",
    "ServeJob",
    "ServeWorkloadJob",
    "describe_schedulers",
    "generate",
    "generate_workload",
    "numbers",
    "per_model",
    "serve",
    "whole_numbers",
    "write_workload",
]


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


def generate(job: ServeWorkloadJob) -> ServeWorkload:
    """The open-loop arrivals ``job`` asks for (seeded: the same job, the same arrivals), named
    ``job.name`` or else after the file it is to be written to.

    Raises:
        InputError: SLOs neither one nor one per model (at ``--slos``), both or neither of a
            total rate and per-model rates (at ``--rate``), and what :func:`generate_workload`
            refuses (proportions that do not sum to 1, counts that do not match the models).
    """
    slos = per_model(job.slos_s, job.models, "--slos")
    if (job.rates is None) == (job.rate is None):
        raise InputError("give --rate (with optional --proportions) or --rates, one of them", where="--rate")
    return generate_workload(
        job.models,
        job.rate or 0.0,
        job.duration_s,
        proportions=None if job.proportions is None else list(job.proportions),
        rates=None if job.rates is None else list(job.rates),
        cv=job.cv,
        slos_s=slos,
        seed=job.seed,
        name=job.name or os.path.basename(job.out),
    )


def _workload(job: ServeJob) -> ServeWorkload | ClosedLoop:
    """The job's requests: its workload (SLOs overridden) or its closed-loop clients."""
    if (job.workload is None) == (job.closed_loop is None):
        raise InputError(
            "give a workload (-w FILE) or closed-loop clients (--closed-loop C0,C1,...), one of them", where="-w"
        )
    if job.closed_loop is not None:
        if job.duration_s is None:
            raise InputError("closed-loop clients need --duration S", where="--duration")
        clients = list(job.closed_loop)
        return ClosedLoop(
            clients,
            job.think_ms / 1e3,
            job.duration_s,
            per_model(job.slos_s, len(clients), "--slos") or [math.inf] * len(clients),
            job.name or "closed-loop",
            job.seed,
        )
    w = job.workload if isinstance(job.workload, ServeWorkload) else read_any_workload(job.workload)  # type: ignore[arg-type]
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
    result = simulate_serving(
        workload,
        placement,
        executables,
        cluster,
        scheduler=job.scheduler,
        overhead_ns=overhead,
        drop_late=job.drop_late,
    )
    result.notes[:0] = warnings
    return result
