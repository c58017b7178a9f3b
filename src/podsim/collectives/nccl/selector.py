"""Pick an algorithm and protocol per call, as NCCL's tuner does: build every allowed
(algorithm, protocol) schedule, predict each with the closed-form (analytical) cost model and
keep the fastest.  Small messages are latency-bound (LL, trees, few steps win); large ones are
bandwidth-bound (Simple, rings, NVLS win).
"""

from __future__ import annotations

from ...errors import InputError
from . import algorithms as alg
from .schedule import Schedule
from .timing import CollectiveTime, Timer
from .tuning import NcclTuning

_ALGOS_FOR = {
    "all_reduce": ("ring", "tree", "nvls", "hierarchical"),
    "all_gather": ("ring",),
    "reduce_scatter": ("ring",),
    "broadcast": ("ring",),
    "all_to_all": ("direct",),
    "send_recv": ("p2p",),
}


def build(comm: alg.Communicator, collective: str, size: int, algo: str, proto: str,
          tuning: NcclTuning) -> Schedule:
    """The schedule of one (collective, algorithm, protocol)."""
    ch, pxn = tuning.channels, tuning.pxn
    if algo == "ring":
        if collective == "broadcast":
            return alg.broadcast(comm, size, ch, proto)
        return alg.ring(comm, collective, size, ch, pxn, proto)
    if algo == "tree":
        return alg.tree(comm, collective, size, ch, proto)
    if algo == "nvls":
        return alg.nvls(comm, collective, size, proto)
    if algo == "hierarchical":
        return alg.hierarchical(comm, collective, size, ch, pxn, proto)
    if algo == "direct":
        return alg.all_to_all(comm, size, proto)
    if algo == "p2p":
        return alg.send_recv(comm, size, proto)
    raise InputError(f"unknown algorithm {algo!r}")


def candidates(comm: alg.Communicator, collective: str, tuning: NcclTuning,
               algo: str | None = None, proto: str | None = None) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs the selector may choose from."""
    if collective not in _ALGOS_FOR:
        raise InputError(f"unknown collective {collective!r}; expected one of {', '.join(alg.COLLECTIVES)}")
    algos = [a for a in _ALGOS_FOR[collective] if a in tuning.algorithms or a in ("direct", "p2p")]
    if collective == "all_reduce":
        one_server = len(comm.servers) == 1
        algos = [a for a in algos if a != "nvls" or (one_server and alg.nvswitches_of(comm.fabric, comm.ranks[0]))]
        if len({len(s) for s in comm.servers}) != 1:
            algos = [a for a in algos if a != "hierarchical"]
    if algo is not None:
        if algo not in _ALGOS_FOR[collective]:
            raise InputError(f"{collective} has no {algo!r} algorithm; expected one of "
                             f"{', '.join(_ALGOS_FOR[collective])}")
        algos = [algo]
    protos = list(tuning.protocols)
    if proto is not None:
        protos = [proto]
    out = [(a, p) for a in algos for p in protos if not (a == "nvls" and p != "Simple")]
    if not out:
        raise InputError(f"no algorithm/protocol allowed for {collective} on this cluster "
                         f"(algorithms {list(tuning.algorithms)}, protocols {list(tuning.protocols)})")
    return out


def select(comm: alg.Communicator, collective: str, size: int, tuning: NcclTuning, model: Timer,
           algo: str | None = None, proto: str | None = None) -> tuple[Schedule, CollectiveTime]:
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
