"""Time a :class:`~.schedule.Schedule` on a fabric.

Two backends:

* ``analytical``: a round takes its busiest link's load over that link's effective capacity,
  plus the longest route latency.  Flows never slow each other down beyond sharing that
  bottleneck: no dynamics, a closed form.
* ``flow``: a round's flows run on the max-min :class:`~podsim.network.flow.FlowNetwork`; the
  round ends when its last flow arrives.

A step repeated ``k`` times is timed once and counted ``k`` times (its rounds are identical
and run back to back), which is exact for both backends.  Each round also pays its per-step
latencies (``Step.hops``).  Effective capacity = line rate x link efficiency (per tier) x protocol efficiency.

Units: ns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...network.fabric import Fabric, LinkTier
from ...network.flow.network import run_batch
from ...network.flow.routes import paths_latency, place_in_order, route_batch
from ...network.routing import Router
from .schedule import Schedule, Step
from .tuning import NcclTuning

BACKENDS = ("analytical", "flow")
_TIER_NAMES = {
    LinkTier.NVLINK: "nvlink",
    LinkTier.PCIE: "pcie",
    LinkTier.NIC: "nic",
    LinkTier.FABRIC: "fabric",
    LinkTier.OPTICAL: "optical",
}


@dataclass
class StepTime:
    """How long one step of a schedule takes."""

    name: str
    repeat: int
    round_ns: float  #: transfer time of one round (ns)
    latency_ns: float  #: per-step latency of one round (ns)
    flows: int

    @property
    def total_ns(self) -> float:
        return self.repeat * (self.round_ns + self.latency_ns)


@dataclass
class CollectiveTime:
    """A timed schedule."""

    schedule: Schedule
    base_ns: float
    steps: list[StepTime] = field(default_factory=list)
    flows_solved: int = 0

    @property
    def time_ns(self) -> int:
        """Total time, rounded up to whole ns."""
        return int(math.ceil(self.base_ns + sum(s.total_ns for s in self.steps) - 1e-6))


def link_capacity(fabric: Fabric, tuning: NcclTuning) -> np.ndarray:
    """Per-link capacity (bytes per ns) after link efficiency, before protocol overhead."""
    eff = np.ones(fabric.num_links)
    for tier, name in _TIER_NAMES.items():
        eff[fabric.link_tier == tier] = float(tuning.link_efficiency[name])
    return fabric.link_bw * eff


def effective_capacity(fabric: Fabric, tuning: NcclTuning, proto: str) -> np.ndarray:
    """Per-link payload capacity (bytes per ns) a protocol achieves: a protocol of efficiency
    ``e`` puts ``1/e`` wire bytes on the link per payload byte."""
    return link_capacity(fabric, tuning) * float(tuning.protocol_efficiency[proto])


@dataclass(frozen=True)
class _RoundLinks:
    """A round's routes: every flow's links in flow order, each flow's route length, the
    longest route's latency (ns) and the flows on each link."""

    links: np.ndarray
    lengths: np.ndarray
    longest: float
    count: np.ndarray


class Timer:
    """Times schedules on one fabric with one backend; routes and capacities are cached."""

    def __init__(
        self, fabric: Fabric, tuning: NcclTuning, backend: str = "analytical", router: Router | None = None
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        self.fabric = fabric
        self.tuning = tuning
        self.backend = backend
        self.router = router or Router(fabric)
        self._cap: dict[str, np.ndarray] = {}
        self._links: dict[tuple[bytes, bytes, bytes], _RoundLinks | None] = {}
        self._by_id: dict[tuple[int, int, int], tuple] = {}
        self._latency: dict[tuple[int, ...], int] = {}

    def capacity(self, proto: str) -> np.ndarray:
        cap = self._cap.get(proto)
        if cap is None:
            cap = self._cap[proto] = effective_capacity(self.fabric, self.tuning, proto)
        return cap

    def time(self, sched: Schedule) -> CollectiveTime:
        """Time ``sched``; an empty schedule (one GPU, zero bytes) costs nothing."""
        t = self.tuning
        key = sched.algorithm if sched.algorithm in t.base_latency_ns else "ring"  # direct, p2p
        out = CollectiveTime(sched, t.base_ns(key, sched.protocol) if sched.steps else 0.0)
        for step in sched.steps:
            lat = sum(count * t.hop_ns(cls, key, sched.protocol) for cls, count in step.hops.items())
            cap = t.channel_cap(key)
            if self.backend == "analytical":
                rnd = self.analytical_round(step, sched.protocol, cap)
            else:
                rnd = self.flow_round(step, sched.protocol, cap)
            out.flows_solved += step.num_flows
            out.steps.append(StepTime(step.name, step.repeat, rnd, lat, step.num_flows))
        return out

    def _round_links(self, step: Step) -> _RoundLinks | None:
        """A round's routes, cached by its flows' ends and labels: a collective's rounds at any
        size take the same routes (the shapes of :mod:`.algorithms` share their arrays, which
        are looked up by identity first).  With adaptive routing the flows are placed one by
        one, in order, on the least-loaded equal-cost links."""
        ident = (id(step.src), id(step.dst), id(step.label))
        got = self._by_id.get(ident)
        if got is not None and got[0] is step.src and got[1] is step.dst and got[2] is step.label:
            return got[3]
        key = (step.src.tobytes(), step.dst.tobytes(), step.label.tobytes())
        hit = self._links.get(key, False)
        if hit is False:
            hit = self._links[key] = self._route_round(step)
        self._by_id[ident] = (step.src, step.dst, step.label, hit)
        return hit  # type: ignore[return-value]

    def _route_round(self, step: Step) -> _RoundLinks | None:
        if not step.num_flows:
            return None
        rb = route_batch(self.router, step.src, step.dst, step.label, self._latency)
        paths, lengths = rb.paths, rb.lengths
        if len(rb.in_order):  # only the flows a choice can see, from an empty fabric
            paths, _, _ = place_in_order(
                self.router,
                rb,
                step.src.tolist(),
                step.dst.tolist(),
                step.label.tolist(),
                [0] * (self.fabric.num_links + 1),
                [True] * step.num_flows,
                self._latency,
            )
            lengths = (paths != rb.pad).sum(axis=1)
        links = paths[paths != rb.pad]
        longest = float(paths_latency(self.router, paths).max())
        return _RoundLinks(links, lengths, longest, np.bincount(links, minlength=self.fabric.num_links))

    def analytical_round(self, step: Step, proto: str, flow_cap: float = math.inf) -> float:
        """Busiest link's load over its capacity (or the largest flow over its rate cap, if
        slower), plus the longest route latency (ns)."""
        hit = self._round_links(step)
        if hit is None:
            return 0.0
        x = step.nbytes
        if x[0] == x[-1] and bool((x == x[0]).all()):
            # every flow of the same size: a link's load is that size added once per flow on
            # it, in the same order of additions as the weighted count below
            sums = np.concatenate(([0.0], np.cumsum(np.full(int(hit.count.max()), float(x[0])))))
            load = sums[hit.count]
        else:
            load = np.bincount(hit.links, weights=np.repeat(x, hit.lengths), minlength=self.fabric.num_links)
        cap = self.capacity(proto)
        busiest = max(float((load / cap).max()), float(x.max()) / flow_cap)
        return busiest + hit.longest

    def flow_round(self, step: Step, proto: str, flow_cap: float = math.inf) -> float:
        """Run one round's flows on a max-min flow network; the time the last one arrives."""
        arrivals, _ = run_batch(
            self.fabric,
            step.src.tolist(),
            step.dst.tolist(),
            [int(math.ceil(x)) for x in step.nbytes.tolist()],
            step.label.tolist(),
            router=self.router,
            capacity=self.capacity(proto),
            max_rate=flow_cap,
        )
        return float(max(arrivals, default=0))
