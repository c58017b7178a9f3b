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

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from ...network.fabric import Fabric, LinkTier
from ...network.flow.network import run_batch
from ...network.flow.routes import RouteBatch, paths_latency, place_in_order, route_batch
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


def _flows_key(step: Step) -> tuple[int, bytes]:
    """A round's flows (ends and labels) as a dictionary key: their count and a SHA-256 digest
    of the three arrays (not the arrays' bytes: a million GPUs' rounds hold hundreds of MB)."""
    h = hashlib.sha256()
    for a in (step.src, step.dst, step.label):
        h.update(np.ascontiguousarray(a, dtype=np.int64).data)
    return step.num_flows, h.digest()


@dataclass(frozen=True)
class _RoundLinks:
    """A round's routes: every flow's links in flow order, each flow's route length, the
    longest route's latency (ns) and the flows on each link."""

    links: np.ndarray | None  #: None: routed by counts only (:meth:`Timer._route_counts`)
    lengths: np.ndarray | None
    longest: float
    count: np.ndarray
    #: the links some flow crosses (a round of a million GPUs crosses a few percent of them)
    used: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "used", np.flatnonzero(self.count))


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
        self._cap_positive: dict[str, bool] = {}
        self._links: dict[tuple[int, bytes], _RoundLinks | None] = {}
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

    def _round_links(self, step: Step, per_flow: bool = False) -> _RoundLinks | None:
        """A round's routes, cached by its flows' ends and labels: a collective's rounds at any
        size take the same routes (the shapes of :mod:`.algorithms` share their arrays, which
        are looked up by identity first).  With adaptive routing the flows are placed one by
        one, in order, on the least-loaded equal-cost links.  ``per_flow``: with every flow's
        links (for flows of different sizes), not only the flows per link."""
        ident = (id(step.src), id(step.dst), id(step.label))
        got = self._by_id.get(ident)
        if got is not None and got[0] is step.src and got[1] is step.dst and got[2] is step.label:
            hit = got[3]
        else:
            key = _flows_key(step)
            hit = self._links.get(key, False)
            if hit is False:
                hit = self._links[key] = self._route_round(step, per_flow)
            self._by_id[ident] = (step.src, step.dst, step.label, hit)
        if hit is not None and per_flow and hit.links is None:  # routed by counts before
            hit = self._route_round(step, True)
            self._links[_flows_key(step)] = hit
            self._by_id[ident] = (step.src, step.dst, step.label, hit)
        return hit

    def _route_round(self, step: Step, per_flow: bool) -> _RoundLinks | None:
        if not step.num_flows:
            return None
        if not per_flow:
            return self._route_counts(step)
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

    def _route_counts(self, step: Step) -> _RoundLinks:
        """The flows on each link and the longest route of a round, from its routes per (source,
        destination) pair, without a row of links per flow (a million GPUs' rounds have tens of
        millions of flows): the same routes, placements and counts as :meth:`_route_round`'s."""
        r = self.router
        pr = r.route_pairs(step.src, step.dst, step.label)
        nl, pad = self.fabric.num_links, pr.pad
        flows = step.num_flows
        by_label = np.zeros(flows, dtype=bool)
        by_label[pr.by_label] = True
        choose = pr.chooses[pr.inv]
        in_order = np.zeros(0, dtype=np.int64)
        if len(pr.reads):  # flows that choose, or cross a link a choice reads: placed in order
            mark = np.zeros(nl + 1, dtype=bool)
            mark[pr.reads] = True
            cross = mark[pr.table].any(axis=1)[pr.inv]
            cross[pr.by_label] = mark[pr.rows].any(axis=1)
            in_order = np.flatnonzero(choose | cross)
        loose = np.ones(flows, dtype=bool)
        loose[in_order] = False
        per_pair = np.bincount(pr.inv[loose & ~by_label], minlength=len(pr.table)).astype(np.float64)
        count = np.bincount(pr.table.ravel(), weights=np.repeat(per_pair, pr.table.shape[1]), minlength=nl + 1)
        count = count.astype(np.int64) + np.bincount(pr.rows[loose[pr.by_label]].ravel(), minlength=nl + 1)
        longest = max(0.0, float(paths_latency(r, pr.table).max()), float(paths_latency(r, pr.rows).max(initial=0.0)))
        if len(in_order):
            width = max(pr.table.shape[1], pr.rows.shape[1])
            fixed = np.full((len(in_order), width), pad, dtype=np.int64)
            fixed[:, : pr.table.shape[1]] = pr.table[pr.inv[in_order]]
            mine = np.flatnonzero(by_label[in_order])
            if len(mine):
                row_of = np.full(flows, -1, dtype=np.int64)
                row_of[pr.by_label] = np.arange(len(pr.by_label))
                fixed[mine] = pad
                fixed[mine, : pr.rows.shape[1]] = pr.rows[row_of[in_order[mine]]]
            k = len(in_order)
            lengths = (fixed != pad).sum(axis=1)
            rb = RouteBatch(fixed, lengths, np.zeros(k, dtype=np.int64), np.arange(k), choose[in_order], pr.reads, pad)
            placed, _, _ = place_in_order(
                r,
                rb,
                step.src[in_order].tolist(),
                step.dst[in_order].tolist(),
                step.label[in_order].tolist(),
                [0] * (nl + 1),
                [True] * k,
                self._latency,
            )
            count += np.bincount(placed.ravel(), minlength=nl + 1)
            longest = max(longest, float(paths_latency(r, placed).max()))
        return _RoundLinks(None, None, longest, count[:nl])

    def analytical_round(self, step: Step, proto: str, flow_cap: float = math.inf) -> float:
        """Busiest link's load over its capacity (or the largest flow over its rate cap, if
        slower), plus the longest route latency (ns)."""
        if not step.num_flows:
            return 0.0
        x = step.nbytes
        same = x.strides == (0,) or (x[0] == x[-1] and bool((x == x[0]).all()))
        hit = self._round_links(step, per_flow=not same)
        if hit is None:
            return 0.0
        if same:
            # every flow of the same size: a link's load is that size added once per flow on
            # it, in the same order of additions as the weighted count below
            sums = np.concatenate(([0.0], np.cumsum(np.full(int(hit.count.max()), float(x[0])))))
            load = sums[hit.count[hit.used]]
        else:
            load = np.bincount(hit.links, weights=np.repeat(x, hit.lengths), minlength=self.fabric.num_links)
        cap = self.capacity(proto)
        if self._positive(proto):  # links without flows add 0 / capacity = 0 to the max: skipped
            u = hit.used
            top = float(((load if same else load[u]) / cap[u]).max(initial=0.0))
        else:
            top = float(((sums[hit.count] if same else load) / cap).max())
        busiest = max(top, (float(x[0]) if same else float(x.max())) / flow_cap)
        return busiest + hit.longest

    def _positive(self, proto: str) -> bool:
        """Whether every link's capacity under ``proto`` is above 0 (and a number)."""
        ok = self._cap_positive.get(proto)
        if ok is None:
            ok = self._cap_positive[proto] = bool((self.capacity(proto) > 0).all())
        return ok

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
