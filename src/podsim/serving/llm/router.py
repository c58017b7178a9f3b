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
at that instant (the simulation advances them first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ...errors import InputError, closest
from .replica import Replica

#: the router names
ROUTERS = ("round-robin", "least-outstanding", "jsq", "kv-aware")


class Router(Protocol):
    """Picks a replica of a pool."""

    name: str
    #: whether it reads the replicas' state (they must be brought up to the present first)
    observes: bool

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        """The index, in ``pool``, of the replica to use at ``now`` (ns)."""


class RoundRobin:
    """Replicas in turn."""

    name = "round-robin"
    observes = False

    def __init__(self) -> None:
        self._next = 0

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        i = self._next % len(pool)
        self._next = i + 1
        return i


class LeastOutstanding:
    """The fewest outstanding requests."""

    name = "least-outstanding"
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        return min(range(len(pool)), key=lambda i: pool[i].outstanding)


class ShortestQueue:
    """The fewest tokens still to compute."""

    name = "jsq"
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        return min(range(len(pool)), key=lambda i: pool[i].pending_at(now))


class KVAware:
    """The most free KV blocks after the waiting and incoming requests' needs."""

    name = "kv-aware"
    observes = True

    def choose(self, pool: Sequence[Replica], now: int) -> int:
        def headroom(r: Replica) -> int:
            return r.free_at(now) - r.waiting_blocks - r.incoming_blocks
        return max(range(len(pool)), key=lambda i: (headroom(pool[i]), -i))


def make_router(name: str) -> Router:
    """A fresh router by name (one per pool: round-robin keeps its turn).

    Raises:
        InputError: for an unknown name, with the closest one.
    """
    key = name.strip().lower()
    table = {"round-robin": RoundRobin, "least-outstanding": LeastOutstanding, "jsq": ShortestQueue,
             "kv-aware": KVAware}
    if key in table:
        return table[key]()  # type: ignore[return-value]
    hint = closest(key, ROUTERS)
    raise InputError(f"unknown router {name!r}" + (f"; did you mean {hint!r}?" if hint else "") +
                     f" (routers: {', '.join(ROUTERS)})", where="--router")
