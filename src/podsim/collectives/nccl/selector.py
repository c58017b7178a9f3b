"""Pick an algorithm and protocol per call, as NCCL's tuner does: build every allowed
(algorithm, protocol) schedule, predict each with the closed-form (analytical) cost model and
keep the fastest.  Small messages are latency-bound (LL, trees, few steps win); large ones are
bandwidth-bound (Simple, rings, NVLS win).  The algorithms, and what each supports, come from
:data:`~podsim.collectives.registry.NCCL_ALGORITHMS`.
"""

from __future__ import annotations

from ...errors import InputError, closest
from ..registry import NCCL_ALGORITHMS, nccl_algorithms_for
from . import algorithms as alg
from .schedule import Schedule
from .timing import CollectiveTime, Timer
from .tuning import PROTOCOLS, NcclTuning


def build(comm: alg.Communicator, collective: str, size: int, algo: str, proto: str, tuning: NcclTuning) -> Schedule:
    """The schedule of one (collective, algorithm, protocol).

    Raises:
        InputError: for an algorithm no entry of the registry is named (with the closest name)."""
    return NCCL_ALGORITHMS.get(algo).build(comm, collective, size, proto, tuning)


def candidates(
    comm: alg.Communicator, collective: str, tuning: NcclTuning, algo: str | None = None, proto: str | None = None
) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs the selector may choose from: every algorithm that
    implements ``collective``, is enabled by the tuning (or needs no tuning) and runs on
    ``comm``, or ``algo`` alone when given (an NCCL name, or its ASTRA-sim counterpart's)."""
    if collective not in alg.COLLECTIVES:
        raise InputError(f"unknown collective {collective!r}; expected one of {', '.join(alg.COLLECTIVES)}")
    names = nccl_algorithms_for(collective)
    if algo is not None:
        forced = NCCL_ALGORITHMS.canonical(algo) if algo in NCCL_ALGORITHMS else algo
        if forced not in names:
            hint = closest(algo, names) if algo not in NCCL_ALGORITHMS else None
            if hint:
                raise InputError(f"{collective} has no {algo!r} algorithm; did you mean {hint!r}?")
            raise InputError(f"{collective} has no {algo!r} algorithm; expected one of {', '.join(names)}")
        algos = [forced]
    else:
        algos = [
            a
            for a in names
            if (a in tuning.algorithms or not NCCL_ALGORITHMS.get(a).tuned) and NCCL_ALGORITHMS.get(a).runs_on(comm)
        ]
    protos = list(tuning.protocols)
    if proto is not None:
        if proto not in PROTOCOLS:
            hint = closest(proto, PROTOCOLS)
            if hint:
                raise InputError(f"unknown protocol {proto!r}; did you mean {hint!r}?")
            raise InputError(f"unknown protocol {proto!r}; expected one of {', '.join(PROTOCOLS)}")
        protos = [proto]
    out: list[tuple[str, str]] = []
    for a in algos:
        allowed = NCCL_ALGORITHMS.get(a).protocols
        out += [(a, p) for p in protos if allowed is None or p in allowed]
    if not out:
        raise InputError(
            f"no algorithm/protocol allowed for {collective} on this cluster "
            f"(algorithms {list(tuning.algorithms)}, protocols {list(tuning.protocols)})"
        )
    return out


def select(
    comm: alg.Communicator,
    collective: str,
    size: int,
    tuning: NcclTuning,
    model: Timer,
    algo: str | None = None,
    proto: str | None = None,
) -> tuple[Schedule, CollectiveTime]:
    """The fastest allowed schedule by ``model`` (use an analytical :class:`Timer`), with its
    predicted time.  Ties keep the earlier candidate (ring before tree, LL before Simple)."""
    best: tuple[Schedule, CollectiveTime] | None = None
    for a, p in candidates(comm, collective, tuning, algo, proto):
        sched = build(comm, collective, size, a, p, tuning)
        t = model.time(sched)
        if best is None or t.time_ns < best[1].time_ns:
            best = (sched, t)
    assert best is not None
    return best
