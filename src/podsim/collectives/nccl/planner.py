"""A collective's NCCL schedule and closed-form time on a fabric, and point-to-point delays
without contention: what the cluster engine, the closed-form layout estimate and the LLM
serving step times share.  Units: bytes, ns.
"""

from __future__ import annotations

import math

from ...errors import SimulationError
from ...network.fabric import Fabric
from ...workload import CollectiveKind
from .algorithms import communicator
from .schedule import Schedule
from .selector import select
from .timing import Timer
from .tuning import NcclTuning

#: the collectives NCCL's selector plans, by their names there
COLLECTIVE_NAMES = {
    CollectiveKind.ALL_REDUCE: "all_reduce",
    CollectiveKind.ALL_GATHER: "all_gather",
    CollectiveKind.REDUCE_SCATTER: "reduce_scatter",
    CollectiveKind.ALL_TO_ALL: "all_to_all",
}


class FabricDelay:
    """Congestion-free point-to-point delay on a fabric: route latency + bytes / bottleneck."""

    def __init__(self, fabric: Fabric, timer: Timer) -> None:
        self.fabric = fabric
        self.router = timer.router
        self._cache: dict[tuple[int, int], tuple[float, float]] = {}

    def delay_ns(self, src: int, dst: int, size: int) -> int:
        key = (src, dst)
        v = self._cache.get(key)
        if v is None:
            path = self.router.gpu_route(src, dst)
            lat = float(sum(self.fabric.link_lat[list(path)]))
            bw = float(min(self.fabric.link_bw[list(path)])) if path else math.inf
            v = self._cache[key] = (lat, bw)
        return int(math.ceil(v[0] + size / v[1] - 1e-9))


class CollectivePlanner:
    """Chooses a collective's schedule (NCCL's selector) and its closed-form time, cached per
    (ranks, kind, size)."""

    def __init__(self, fabric: Fabric, tuning: NcclTuning, timer: Timer | None = None) -> None:
        self.fabric = fabric
        self.tuning = tuning
        self.timer = timer or Timer(fabric, tuning, "analytical")
        self._comms: dict[tuple[int, ...], object] = {}
        self._plans: dict[tuple[tuple[int, ...], CollectiveKind, int], tuple[Schedule, int]] = {}

    @classmethod
    def shared(cls, fabric: Fabric, tuning: NcclTuning) -> CollectivePlanner:
        """The fabric's planner for ``tuning``, made once and kept with the fabric (in its
        ``derived`` tables): every simulation on the fabric shares its plans, timer and routes,
        which depend on nothing else."""
        key = ("collective_planner", repr(tuning))
        got = fabric.derived.get(key)
        if got is None:
            got = fabric.derived[key] = cls(fabric, tuning)
        return got

    def plan(self, ranks: tuple[int, ...], kind: CollectiveKind, size: int) -> tuple[Schedule, int]:
        """The chosen schedule and its closed-form time (ns)."""
        key = (ranks, kind, size)
        hit = self._plans.get(key)
        if hit is None:
            if kind not in COLLECTIVE_NAMES:
                raise SimulationError(f"collective {kind.name} is not supported on a cluster")
            comm = self._comms.get(ranks)
            if comm is None:
                comm = self._comms[ranks] = communicator(self.fabric, list(ranks))
            sched, t = select(comm, COLLECTIVE_NAMES[kind], size, self.tuning, self.timer)  # type: ignore[arg-type]
            hit = self._plans[key] = (sched, int(t.time_ns))
        return hit
