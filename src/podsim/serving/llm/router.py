"""Global routers: which replica of a pool a request goes to, when it arrives (or, under P/D,
which decode replica takes it when its prompt is done).

* ``round-robin`` -- replicas in turn (Vidur's default); looks at nothing.
* ``least-outstanding`` -- the replica with the fewest requests routed to it and not yet done
  there (waiting, running, in a KV transfer towards it).
* ``jsq`` -- join the shortest queue, measured in tokens: the fewest tokens still to compute for
  its outstanding requests (waiting prompts, prompts being prefilled, outputs still to decode).
* ``kv-aware`` -- the most free KV blocks once its waiting requests and those on their way to it
  have the blocks their contexts need.

Ties go to the lowest replica index.  Routers other than round-robin see each replica as it is
at that instant.  Each states its measure as a ``key`` (the least wins) and a ``bound`` on it, and
:meth:`choose` scans the pool (the reference); the simulation finds the same replica through an
index (:mod:`.router_index`) that brings up to date only the replicas with events before that
instant and looks only at those whose bound may beat the best.  ``podsim serve`` calls its
replica choice a scheduler (``--scheduler round-robin | least-outstanding``,
:mod:`podsim.serving.schedulers`).

Each router is a class registered in :data:`ROUTERS` (the :func:`router` decorator) that
declares its ``name``, ``aliases`` and a ``help`` line; adding one is a class here with its test
and a line in docs/serving-llm.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol

from ...registry import Registry
from .replica import INF, Replica


class RequestRouter(Protocol):
    """Picks a replica of a pool."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    help: ClassVar[str]
    #: whether it reads the replicas' state (they must be brought up to the present first)
    observes: bool

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        """The index, in ``pool``, of the replica to use at ``now`` (ns); a router that observes
        scans every replica, each advanced to ``now``: the least :meth:`key`, ties to the lowest
        index."""


class ObservingRouter(RequestRouter, Protocol):
    """A router that reads the replicas: its measure of a replica advanced to ``now``."""

    def key(self, rep: Replica, now: int) -> int:
        """The replica's measure at ``now`` (ns), the least wins (a count of requests, tokens or
        blocks; negated where the most wins)."""

    def bound(self, rep: Replica, now: int, level: int) -> tuple[int, int]:
        """A lower bound of :meth:`key` at every instant from ``now`` up to the time returned
        with it (ns; INF: until the replica is :meth:`~.replica.Replica.due`), while nothing else
        changes the replica (a pending decode run's steps end one by one meanwhile).  ``level``:
        the least key found last; a bound above it may hold longer and still be passed over."""


def _least(router: ObservingRouter, pool: Sequence[Replica], now: int) -> int:
    """The index of the least key in ``pool`` at ``now``, the lowest of equal ones."""
    return min(range(len(pool)), key=lambda i: router.key(pool[i], now))


#: the routers, by name
ROUTERS: Registry[type[RequestRouter]] = Registry("router", flag="--router")
#: the router a run uses when it names none
DEFAULT_ROUTER = "round-robin"


def router(cls: type) -> type:
    """Register ``cls`` in :data:`ROUTERS` under its ``name`` and ``aliases``."""
    ROUTERS.register(cls.name, cls, aliases=cls.aliases)
    return cls


@router
class RoundRobin:
    """Replicas in turn."""

    name = "round-robin"
    aliases = ("rr",)
    help = ""
    observes = False

    def __init__(self) -> None:
        self._next = 0

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        i = self._next % len(pool)
        self._next = i + 1
        return i


@router
class LeastOutstanding:
    """The fewest outstanding requests."""

    name = "least-outstanding"
    aliases = ()
    help = ""
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        return _least(self, pool, now)

    def key(self, rep: Replica, now: int) -> int:
        return rep.outstanding

    def bound(self, rep: Replica, now: int, level: int) -> tuple[int, int]:
        return rep.outstanding, INF  # changes only when requests join or leave (never in a run)


@router
class ShortestQueue:
    """The fewest tokens still to compute."""

    name = "jsq"
    aliases = ()
    help = "fewest tokens to compute"
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        return _least(self, pool, now)

    def key(self, rep: Replica, now: int) -> int:
        return rep.pending_at(now)

    def bound(self, rep: Replica, now: int, level: int) -> tuple[int, int]:
        return rep.pending_bound(now, level)  # a run's steps only take tokens off


@router
class KVAware:
    """The most free KV blocks after the waiting and incoming requests' needs."""

    name = "kv-aware"
    aliases = ()
    help = "most free KV blocks"
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        return _least(self, pool, now)

    def key(self, rep: Replica, now: int) -> int:
        return rep.waiting_blocks + rep.incoming_blocks - rep.free_at(now)  # the headroom, negated

    def bound(self, rep: Replica, now: int, level: int) -> tuple[int, int]:
        return self.key(rep, now), INF  # a run's steps only take blocks


def make_router(name: str) -> RequestRouter:
    """A fresh router by name or alias, in any case (one per pool: round-robin keeps its turn).

    Raises:
        InputError: for an unknown name, with the closest one.
    """
    return ROUTERS.get(name.strip().lower())()


def describe(default: str = DEFAULT_ROUTER) -> str:
    """The routers for ``--help``: ``round-robin (rr; default), least-outstanding, jsq (...)``."""
    parts = []
    for name, cls in ROUTERS.items():
        notes = [*ROUTERS.aliases(name), *([cls.help] if cls.help else []), *(["default"] if name == default else [])]
        parts.append(f"{name} ({'; '.join(notes)})" if notes else name)
    return ", ".join(parts)
