"""Inference serving as DLSIM models it (``podsim serve``, the sweep's ``run: serve``):
requests of several models on a placement's sub-meshes, queued per GPU, a replica chosen by a
scheduler.  :class:`ServeJob` is the API's input and declares every flag on its fields.

Units: think time in ms, durations and SLOs in s, GPU memory in GB (10^9 B).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ..errors import InputError
from ..params import JobSpec, Param, nested, param, params_of
from ..serving import Placement, ServeWorkload
from ..serving.placement import MEMORY_CHECKS
from ..serving.schedulers import DEFAULT_SCHEDULER, SCHEDULERS
from ..serving.schedulers import describe as describe_schedulers


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


def scheduler_name(name: str, where: str) -> str:
    """``name`` as given (outputs echo the spelling asked for), once :data:`SCHEDULERS` holds it:
    checked when the job is built, before any input is read.

    Raises:
        InputError: for a name it does not hold, with the closest one (at ``--scheduler``).
    """
    SCHEDULERS.canonical(name)
    return name


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

    placement: str | os.PathLike[str] | Placement = param(
        Param("placement", "path", aliases=("p",), help="a placement (DLSIM's JSON, or YAML; required)"), required=True
    )
    workload: str | os.PathLike[str] | ServeWorkload | None = param(
        Param(
            "workload",
            "path",
            aliases=("w",),
            help="a DLSIM workload CSV, or a request trace CSV with a header naming model_id and arrival_s columns "
            "(replayed as recorded)",
        )
    )
    closed_loop: tuple[int, ...] | None = param(
        Param(
            "closed-loop",
            "list",
            metavar="C0,C1,...",
            parse=whole_numbers,
            help="instead of -w: closed-loop clients per model (each sends, waits, thinks, sends again)",
        )
    )
    think_ms: float = param(
        Param(
            "think-ms",
            "nonneg",
            0.0,
            metavar="MS",
            unit="ms",
            help="with --closed-loop: mean think time between a response and the next request (default 0)",
        )
    )
    duration_s: float | None = param(
        Param(
            "duration",
            "number",
            metavar="S",
            unit="s",
            field="duration_s",
            help="with --closed-loop: seconds clients keep sending (required)",
        )
    )
    slos_s: tuple[float, ...] | None = param(
        Param(
            "slos",
            "list",
            metavar="S0,S1,...",
            unit="s",
            field="slos_s",
            parse=lambda v, w: tuple(numbers(v, w)),
            help="SLOs in seconds per model (or one for all): for --closed-loop and request traces, or to override a "
            "workload's",
        )
    )
    seed: int = param(Param("seed", "natural", 0, help="with --closed-loop: seed of the think times"))
    profile: str | os.PathLike[str] | None = param(
        Param(
            "profile",
            "path",
            metavar="FILE",
            help="executables' stage shapes and latencies (YAML; default: DLSIM's V100 profile)",
        )
    )
    cluster: str | None = param(
        Param(
            "cluster",
            "name",
            metavar="PRESET_OR_YAML",
            help="GPUs per node and memory from a cluster preset or YAML (nodes: -n, default what the placement uses) "
            "(presets: podsim collective --list)",
        )
    )
    num_nodes: int | None = param(
        Param(
            "num-nodes",
            "count",
            aliases=("n", "num_nodes"),
            metavar="N",
            help="nodes (default 1, or what the placement uses with --cluster)",
        )
    )
    gpus_per_node: int | None = param(
        Param(
            "num-devices-per-node",
            "count",
            aliases=("d", "num_devices_per_node"),
            metavar="N",
            field="gpus_per_node",
            help="GPUs per node (default 2)",
        )
    )
    memory_gb: float | None = param(
        Param(
            "memory-capacity",
            "number",
            aliases=("c", "memory_capacity"),
            metavar="GB",
            unit="GB",
            field="memory_gb",
            help="GPU memory in GB (default 16)",
        )
    )
    scheduler: str = param(
        Param(
            "scheduler",
            "name",
            DEFAULT_SCHEDULER,
            SCHEDULERS.spellings(),
            metavar="NAME",
            parse=scheduler_name,
            help=f"replica choice (serve-llm's --router): {describe_schedulers()}",
        )
    )
    dispatch_overhead: str = param(
        Param(
            "dispatch-overhead",
            "name",
            "dlsim",
            metavar="dlsim|none|MS",
            help="added to a stage's start when its mesh is busy: dlsim (3 ms multi-stage, 4 ms single-stage), none, "
            "or a number of ms",
        )
    )
    drop_late: bool = param(
        Param("drop-late", "bool", False, help="drop a request whose predicted finish misses its SLO (AlpaServe)")
    )
    memory_check: str = param(
        Param(
            "memory-check",
            "choice",
            "error",
            MEMORY_CHECKS,
            help="placements whose weights exceed a GPU's memory: refuse (default), warn, or skip the check",
        )
    )
    name: str | None = param(
        Param("name", "name", sweep=False, help="run name (default: the workload's); names the Chrome trace")
    )


@dataclass(frozen=True)
class DlsimOutputs:
    """What ``podsim serve`` writes (not sweep parameters)."""

    trace: str | None = param(
        Param(
            "trace",
            "path",
            aliases=("chrome-trace", "chrome_trace"),
            const="",
            metavar="OUT",
            sweep=False,
            help="write a Chrome/Perfetto trace (default chrome_trace/<name>.json; --chrome_trace is DLSIM's spelling)",
        )
    )
    json: str | None = param(
        Param("json", "path", metavar="OUT", sweep=False, help="write the statistics and every request as JSON")
    )
    cdf: str | None = param(
        Param("cdf", "path", metavar="OUT.png", sweep=False, help="plot the latency CDF (needs matplotlib)")
    )


@dataclass(frozen=True)
class ServeCommand(JobSpec):
    """``podsim serve``'s job and its outputs."""

    job: ServeJob = field(metadata={"nested": ServeJob})
    outputs: DlsimOutputs = nested(DlsimOutputs)


#: every parameter of ``podsim serve``, in --help order
SERVE_PARAMS: tuple[Param, ...] = params_of(ServeCommand)
