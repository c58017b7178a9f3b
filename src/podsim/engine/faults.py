"""Injected faults: what they are (pure data) and how a cluster simulation applies them.

Four kinds, one vocabulary across ``podsim simulate``, ``llm``, ``collective`` and ``sweep``:

* :class:`SlowGpus`: GPUs whose compute takes ``factor`` times as long (chosen ranks, a seeded
  random fraction of the GPUs, or every GPU a seeded random factor in a range);
* :class:`SlowNics`: GPUs whose scale-out NIC links (both directions) carry ``fraction`` of their
  bandwidth;
* :class:`SlowLinks`: named links of the fabric (``gpu0->seg0.rail0``, or ``a<->b`` for both
  directions) at ``fraction`` of their bandwidth;
* :class:`HostHiccup`: a host (a server's GPUs) stalls ``delay_ns`` before its step, every
  ``every`` steps.

:func:`resolve_faults` checks a :class:`FaultSpec` against a fabric (a rank, host or link that
does not exist is an :class:`~podsim.errors.InputError` naming it) and gives a
:class:`FaultPlan`: per-rank compute factors, per-link bandwidth factors and per-rank start
delays, which :func:`podsim.engine.cluster.simulate_cluster` applies:
:func:`degraded_fabric` (bandwidths), :class:`ComputeScaler` (a slow rank's compute ops, the
compute parts of fused ops included) and :class:`WaitLog` (who waits on whom at collectives).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InputError, closest
from ..network.fabric import Fabric, LinkTier, NodeKind
from ..workload import SEGMENTS, OpKind, Program


@dataclass(frozen=True)
class SlowGpus:
    """GPUs that compute slower.  Exactly one of ``ranks``, ``fraction`` and ``spread`` says which.

    Attributes:
        text: the spec as the user wrote it (``3,7:1.5``), for reports.
        factor: compute time multiplier of the chosen ranks (> 0; 1.1 = 10% slower).
        ranks: the chosen ranks.
        fraction: a random fraction of the GPUs (0 < f <= 1), drawn with ``seed``.
        spread: every GPU a factor drawn uniformly in ``[lo, hi]`` with ``seed``.
        seed: the random draw's seed.
    """

    text: str
    factor: float = 1.0
    ranks: tuple[int, ...] = ()
    fraction: float | None = None
    spread: tuple[float, float] | None = None
    seed: int = 0

    def factors(self, gpus: int, where: str = "--slow-gpus") -> dict[int, float]:
        """Rank -> compute factor, for a job of ``gpus`` GPUs (ranks at factor 1 left out).

        Raises:
            InputError: a rank that does not exist, naming it."""
        if self.spread is not None:
            lo, hi = self.spread
            draw = np.random.default_rng(self.seed).uniform(lo, hi, gpus)
            return {r: float(f) for r, f in enumerate(draw.tolist()) if f != 1.0}
        if self.fraction is not None:
            count = max(1, int(round(self.fraction * gpus)))
            chosen = np.random.default_rng(self.seed).choice(gpus, size=count, replace=False)
            ranks = sorted(int(r) for r in chosen)
        else:
            ranks = list(self.ranks)
            _check_ranks(ranks, gpus, where)
        return {r: self.factor for r in ranks} if self.factor != 1.0 else {}

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class SlowNics:
    """GPUs whose NIC links (both directions) run at ``fraction`` of their bandwidth.

    Attributes:
        text: the spec as written (``5:0.5``).
        ranks: the GPUs.
        fraction: bandwidth multiplier (0 < f <= 1; 0.5 = a halved NIC).
    """

    text: str
    ranks: tuple[int, ...]
    fraction: float

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class SlowLinks:
    """Named links of the fabric at ``fraction`` of their bandwidth.

    Attributes:
        text: the spec as written (``gpu0->seg0.rail0:0.5``).
        links: link names: ``a->b`` (one direction) or ``a<->b`` (both), node names as
            ``podsim fabric`` prints them.
        fraction: bandwidth multiplier (0 < f <= 1).
    """

    text: str
    links: tuple[str, ...]
    fraction: float

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class HostHiccup:
    """A host stalls before its step every ``every`` steps.

    Attributes:
        text: the spec as written (``10:200ms``).
        every: steps between hiccups (>= 1).
        delay_ns: how long the host stalls (ns).
        host: the server whose GPUs stall (0-based).
    """

    text: str
    every: int
    delay_ns: int
    host: int = 0

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class FaultSpec:
    """The faults a job injects (each None when not injected)."""

    slow_gpus: SlowGpus | None = None
    slow_nics: SlowNics | None = None
    slow_links: SlowLinks | None = None
    hiccup: HostHiccup | None = None

    def __bool__(self) -> bool:
        return any(x is not None for x in (self.slow_gpus, self.slow_nics, self.slow_links, self.hiccup))

    def items(self) -> list[tuple[str, object]]:
        """(flag name, fault) of each injected fault, in flag order."""
        pairs = (
            ("slow-gpus", self.slow_gpus),
            ("slow-nics", self.slow_nics),
            ("slow-links", self.slow_links),
            ("hiccup", self.hiccup),
        )
        return [(k, v) for k, v in pairs if v is not None]

    def only(self, name: str) -> FaultSpec:
        """This spec with the fault of flag ``name`` alone."""
        return FaultSpec(**{k: (getattr(self, k) if k.replace("_", "-") == name else None) for k in _FIELDS})

    def without(self, name: str) -> FaultSpec:
        """This spec without the fault of flag ``name``."""
        return replace(self, **{name.replace("-", "_"): None})

    @property
    def network(self) -> bool:
        """Whether a fault changes the fabric's bandwidths."""
        return self.slow_nics is not None or self.slow_links is not None


_FIELDS = ("slow_gpus", "slow_nics", "slow_links", "hiccup")


@dataclass
class FaultPlan:
    """Faults resolved on a fabric of ``gpus`` GPUs.

    Attributes:
        compute: rank -> compute time multiplier (ranks at 1.0 left out).
        links: link id -> bandwidth multiplier (links at 1.0 left out).
        delay_ns: rank -> ns its step starts late (a host hiccup).
        described: flag name -> what it does, in words (``rank 3 computes 1.10x slower``).
    """

    gpus: int
    compute: dict[int, float] = field(default_factory=dict)
    links: dict[int, float] = field(default_factory=dict)
    delay_ns: dict[int, int] = field(default_factory=dict)
    described: dict[str, str] = field(default_factory=dict)

    @property
    def every_rank(self) -> bool:
        """Whether ranks differ (the symmetry reductions must be off)."""
        return bool(self.compute or self.links or self.delay_ns)


def _check_ranks(ranks: list[int], gpus: int, where: str) -> None:
    for r in ranks:
        if not 0 <= r < gpus:
            raise InputError(f"rank {r} does not exist: the job has {gpus} GPUs (ranks 0..{gpus - 1})", where=where)


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8]) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")
    return ("rank " if len(ranks) == 1 else "ranks ") + shown


def nic_links(fabric: Fabric, rank: int) -> list[int]:
    """The NIC-tier links (both directions) of GPU ``rank``: those touching the GPU, or the NIC
    node it is linked to.

    Raises:
        InputError: the GPU has no NIC link in this fabric (naming it)."""
    g = int(fabric.gpus[rank])
    nic = fabric.link_tier == LinkTier.NIC
    ends = {g}
    near = np.flatnonzero((fabric.link_src == g) & (fabric.node_kind[fabric.link_dst] == NodeKind.NIC))
    ends.update(int(fabric.link_dst[i]) for i in near)
    touch = np.isin(fabric.link_src, list(ends)) | np.isin(fabric.link_dst, list(ends))
    links = np.flatnonzero(nic & touch).tolist()
    if not links:
        raise InputError(
            f"GPU {rank} ({fabric.node_name[g]}) has no NIC link in fabric {fabric.name} "
            "(one server: nothing leaves it through a NIC)",
            where="--slow-nics",
        )
    return links


def named_links(fabric: Fabric, name: str) -> list[int]:
    """The link ids of ``name``: ``a->b`` one direction, ``a<->b`` both.

    Raises:
        InputError: no such link (with the closest link name)."""
    both = "<->" in name
    a, sep, b = name.partition("<->" if both else "->")
    ids = {n: i for i, n in enumerate(fabric.node_name)}
    out: list[int] = []
    if sep and a in ids and b in ids:
        pairs = [(ids[a], ids[b])] + ([(ids[b], ids[a])] if both else [])
        for s, d in pairs:
            out += np.flatnonzero((fabric.link_src == s) & (fabric.link_dst == d)).tolist()
    if not out:
        names = [fabric.link_name(i) for i in range(fabric.num_links)]
        hint = closest(name.replace("<->", "->"), names)
        raise InputError(
            f"no link {name!r} in fabric {fabric.name} (links are named a->b, or a<->b for both directions"
            + (f"; closest: {hint!r}" if hint else "")
            + ")",
            where="--slow-links",
        )
    return out


def resolve_faults(spec: FaultSpec, gpus: int, fabric: Fabric | None = None) -> FaultPlan:
    """``spec`` on a job of ``gpus`` GPUs (on ``fabric``, for NIC, link and host faults).

    Raises:
        InputError: a rank, host or link that does not exist (naming it), or a network fault
            without a fabric."""
    plan = FaultPlan(gpus)
    if spec.slow_gpus is not None:
        s = spec.slow_gpus
        plan.compute = s.factors(gpus)
        ranks = sorted(plan.compute)
        if s.spread is not None:
            lo, hi = s.spread
            plan.described["slow-gpus"] = f"every GPU computes a random {lo:g}x-{hi:g}x slower (seed {s.seed})"
        elif s.fraction is not None:
            plan.described["slow-gpus"] = (
                f"{len(ranks)} random GPU{'s' if len(ranks) > 1 else ''} ({100 * s.fraction:g}%, seed {s.seed}: "
                f"{_ranks_text(ranks)}) compute{'s' if len(ranks) == 1 else ''} {s.factor:g}x slower"
            )
        else:
            plan.described["slow-gpus"] = f"{_ranks_text(ranks)} compute{'s' if len(ranks) == 1 else ''} {s.factor:g}x"
    for name, what in (("slow-nics", spec.slow_nics), ("slow-links", spec.slow_links)):
        if what is None:
            continue
        if fabric is None:
            raise InputError("a NIC or link fault needs a cluster fabric (give --cluster)", where=f"--{name}")
        if isinstance(what, SlowNics):
            _check_ranks(list(what.ranks), gpus, "--slow-nics")
            ids = [i for r in what.ranks for i in nic_links(fabric, r)]
            text = f"the NIC of {_ranks_text(list(what.ranks))} at {what.fraction:g} of its bandwidth"
        else:
            ids = [i for n in what.links for i in named_links(fabric, n)]
            text = f"{', '.join(what.links)} at {what.fraction:g} of {'its' if len(ids) == 1 else 'their'} bandwidth"
        for i in ids:
            plan.links[i] = plan.links.get(i, 1.0) * what.fraction
        plan.described[name] = text
    if spec.hiccup is not None:
        h = spec.hiccup
        per = fabric.gpus_per_node if fabric is not None else 1
        hosts = (gpus + per - 1) // per
        if not 0 <= h.host < hosts:
            raise InputError(
                f"host {h.host} does not exist: the job has {hosts} hosts (0..{hosts - 1})", where="--hiccup"
            )
        for r in range(h.host * per, min(gpus, (h.host + 1) * per)):
            plan.delay_ns[r] = h.delay_ns
        plan.described["hiccup"] = (
            f"host {h.host} (GPUs {h.host * per}..{min(gpus, (h.host + 1) * per) - 1}) stalls {h.delay_ns / 1e6:g} ms "
            f"before its step, every {h.every} steps"
        )
    return plan


def degraded_fabric(fabric: Fabric, links: dict[int, float]) -> Fabric:
    """A copy of ``fabric`` whose links ``links`` run at their factor of the bandwidth (the
    original is shared and left as it is)."""
    if not links:
        return fabric
    bw = fabric.link_bw.copy()
    for i, f in links.items():
        bw[i] *= f
    return replace(fabric, name=f"{fabric.name} (degraded)", link_bw=bw, derived={})


def _scaled(ns: int, factor: float) -> int:
    """``ns`` times ``factor``, rounded to the ns (at least 1)."""
    return max(1, int(math.floor(ns * factor + 0.5)))


class ComputeScaler:
    """A slow rank's op durations: every GPU compute op ``factor`` times as long (rounded to the
    ns); a fused op (compute parts and closed-form collectives laid end to end, an overlapped
    collective beside a compute part) re-laid with its compute parts scaled.  One per program,
    shared by its ranks; each factor's durations are computed once (numpy over the segments)."""

    def __init__(self, program: Program) -> None:
        self.p = program
        fused = sorted(i for i, e in program.extras.items() if e.get(SEGMENTS))
        segs = [program.extras[i][SEGMENTS] for i in fused]
        self.fused = fused
        self.seg_op = np.repeat(np.arange(len(fused), dtype=np.int64), [len(s) for s in segs])
        flat = [s for ss in segs for s in ss]
        self.seg_off = np.array([s[0] for s in flat], dtype=np.int64)
        self.seg_dur = np.array([s[1] for s in flat], dtype=np.int64)
        self.seg_comp = np.array([s[3] == "compute" for s in flat], dtype=bool)
        if len(flat):  # a run of segments sharing one offset (a compute part and what overlaps it)
            new = np.ones(len(flat), dtype=bool)
            new[1:] = (self.seg_op[1:] != self.seg_op[:-1]) | (self.seg_off[1:] != self.seg_off[:-1])
            self.starts = np.flatnonzero(new)
        else:
            self.starts = np.zeros(0, dtype=np.int64)
        self._by_factor: dict[float, tuple[dict[int, int], dict[int, int], np.ndarray, np.ndarray]] = {}
        gpu_compute = (program.kind == OpKind.COMPUTE) & ~program.is_cpu
        self.scalable = gpu_compute.tolist()

    def fused_times(self, factor: float) -> tuple[dict[int, int], dict[int, int], np.ndarray, np.ndarray]:
        """(op -> its scaled duration, op -> its communication part (ns outside compute), every
        segment's scaled offset, every segment's scaled duration) for fused ops at ``factor``."""
        got = self._by_factor.get(factor)
        if got is not None:
            return got
        if not self.fused:
            got = ({}, {}, self.seg_off, self.seg_dur)
        else:
            comp = self.seg_comp
            dur = self.seg_dur.copy()
            dur[comp] = np.maximum(1, np.floor(self.seg_dur[comp] * factor + 0.5)).astype(np.int64)
            glen = np.maximum.reduceat(dur, self.starts)
            gop = self.seg_op[self.starts]
            total = np.bincount(gop, weights=glen, minlength=len(self.fused)).astype(np.int64)
            ends = np.cumsum(glen)
            first = np.searchsorted(gop, np.arange(len(self.fused)))  # each op's first group
            base = np.concatenate(([0], ends))[first]  # the groups' ends before each op's first
            goff = ends - glen - base[gop]
            off = np.repeat(goff, np.diff(np.concatenate((self.starts, [len(dur)]))))
            compute = np.bincount(self.seg_op[comp], weights=dur[comp], minlength=len(self.fused)).astype(np.int64)
            t = dict(zip(self.fused, total.tolist()))
            c = dict(zip(self.fused, (total - compute).tolist()))
            got = (t, c, off, dur)
        self._by_factor[factor] = got
        return got

    def op_ns(self, base, factor: float):  # type: ignore[no-untyped-def]
        """The ``op_ns(program, i)`` of a rank computing ``factor`` times slower, from the
        engine's ``base``."""
        fused, _, _, _ = self.fused_times(factor)
        scalable = self.scalable

        def op_ns(p: Program, i: int) -> int:
            ns = base(p, i)
            if ns < 0 or not scalable[i]:
                return ns
            got = fused.get(i)
            return got if got is not None else _scaled(ns, factor)

        return op_ns


class WaitLog:
    """Who waits on whom at collectives: when the last rank of a group issues a collective,
    every rank that issued it earlier has waited for it since.

    Attributes:
        waited_ns: per rank, the ns it spent waiting for others at collectives.
        caused_ns: per rank, the ns others spent waiting for it (it came last).
        calls: per collective with a wait: (name, group size, last rank, start ns, ranks that
            waited, their summed wait ns, the longest wait ns).
        slices: per waiting rank, (rank, from ns, to ns, the rank waited for), when ``record``.
    """

    def __init__(self, gpus: int, record: bool) -> None:
        self.waited_ns = np.zeros(gpus, dtype=np.int64)
        self.caused_ns = np.zeros(gpus, dtype=np.int64)
        self.calls: list[tuple[str, int, int, int, int, int, int]] = []
        self.record = record
        self.slices: list[tuple[int, int, int, int]] = []

    def started(self, name: str, arrivals: list[tuple[int, int]], now: int) -> None:
        """A collective starts at ``now``; ``arrivals``: (rank, ns it issued), in issue order."""
        last = arrivals[-1][0]
        total = longest = count = 0
        for r, t in arrivals:
            w = now - t
            if w <= 0:
                continue
            self.waited_ns[r] += w
            total += w
            count += 1
            longest = max(longest, w)
            if self.record:
                self.slices.append((r, t, now, last))
        if total:
            self.caused_ns[last] += total
            self.calls.append((name, len(arrivals), last, now, count, total, longest))

    def summary(self, top: int = 10) -> dict[str, object]:
        """Who waited on whom, for the result's ``faults`` section: the ``top`` collectives by
        summed wait, the ranks others waited for most, the ranks that waited most (ns)."""
        calls = sorted(self.calls, key=lambda c: (-c[5], c[3]))[:top]
        caused = np.argsort(-self.caused_ns, kind="stable")[:top]
        waited = np.argsort(-self.waited_ns, kind="stable")[:top]
        return {
            "collectives_with_waits": len(self.calls),
            "wait_ns": int(self.waited_ns.sum()),
            "top_waits": [
                {
                    "collective": name,
                    "group_size": size,
                    "last_rank": last,
                    "started_ns": at,
                    "waiting_ranks": count,
                    "wait_ns": total,
                    "max_wait_ns": longest,
                }
                for name, size, last, at, count, total, longest in calls
            ],
            "waited_for": [
                {"rank": int(r), "others_waited_ns": int(self.caused_ns[r])} for r in caused if self.caused_ns[r] > 0
            ],
            "waiting": [{"rank": int(r), "waited_ns": int(self.waited_ns[r])} for r in waited if self.waited_ns[r] > 0],
        }
