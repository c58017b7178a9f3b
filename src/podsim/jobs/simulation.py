"""How a run is simulated: the network backend (every subcommand that simulates a cluster
offers the same two) and, with the flow backend, the granularity of a collective's flows."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param

#: the network backends: closed form, or max-min fair sharing of every link
BACKENDS = ("analytical", "flow")


#: ``--backend``, the same in every subcommand that simulates a network
BACKEND = Param(
    "backend",
    "choice",
    "analytical",
    BACKENDS,
    help="analytical (closed form, no contention) or flow (max-min fair sharing of every link); default analytical",
)


@dataclass(frozen=True)
class Simulation:
    """Network backend and flow granularity."""

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
