"""How a run is simulated: the network backend (every subcommand that simulates a cluster
offers the same two) and, with the flow backend, the granularity of a collective's flows."""

from __future__ import annotations

from dataclasses import dataclass

from ..collectives.nccl.timing import BACKENDS
from ..params import Param, param

#: ``--backend``, the same in every subcommand that simulates a network
BACKEND = Param(
    "backend",
    "choice",
    "analytical",
    BACKENDS,
    help="analytical (closed form, no contention) or flow (max-min fair sharing of every link); default analytical",
)


#: ``--workers`` / ``--ray``: where the runs of a search or a sweep go, the same in both
WORKERS = Param(
    "workers",
    "count",
    metavar="W",
    exclusive="where",
    sweep=False,
    help="worker processes on this machine (default: the CPUs, at most 8; 1: this process)",
)
RAY = Param(
    "ray",
    "text",
    const="local",
    metavar="ADDRESS",
    exclusive="where",
    sweep=False,
    help="run on a Ray cluster (pip install podsim[ray]): ADDRESS as `ray start --head` prints it (host:6379), "
    "or none to start Ray on this machine",
)


@dataclass(frozen=True)
class Simulation:
    """Network backend, flow granularity, and whether a layout that does not fit is simulated."""

    backend: str = param(BACKEND)
    granularity: str = param(
        Param(
            "granularity",
            "choice",
            "bulk",
            ("bulk", "round"),
            help="flow backend: a collective step's rounds as one set of flows (bulk, "
            "default) or every round simulated (round: slower, exact under contention)",
        )
    )
    allow_oom: bool = param(
        Param(
            "allow-oom",
            "bool",
            False,
            help="simulate a layout that does not fit in the GPU's memory (an error otherwise; the result "
            "then says it does not fit)",
        )
    )
