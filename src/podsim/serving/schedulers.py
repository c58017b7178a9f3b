"""Replica choice of ``podsim serve`` (``--scheduler``): which replica of a model's service a
request goes to when it arrives.  What ``podsim serve-llm`` calls a router.

* ``fifo`` -- DLSIM's: the replica whose first-stage mesh is idle soonest.
* ``round-robin`` (alias ``rr``) -- the service's replicas in turn, each model its own turn.
* ``least-outstanding`` -- the replica with the fewest requests in flight (routed to it, not done).

Ties go to the replica listed first in the placement.  Each scheduler is a class registered in
:data:`SCHEDULERS` under its ``name`` and ``aliases``; adding one is a class here (or in any
module imported before a run) with the :func:`scheduler` decorator.  A fresh instance serves
one run (round-robin keeps its turns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ..registry import Registry


@dataclass(frozen=True)
class QueueView:
    """What a scheduler may look at when a request arrives.

    Attributes:
        mesh_idle: ``mesh_idle(k, stage)``: when (ns) the mesh of stage ``stage`` of placement
            entry ``k`` is idle: the latest idle time of its GPUs (0 with empty queues).
        outstanding: requests routed to each placement entry and not done yet.
    """

    mesh_idle: Callable[[int, int], int]
    outstanding: Sequence[int]


class ReplicaScheduler(Protocol):
    """Picks the placement entry that serves a request."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]]
    help: ClassVar[str]

    def choose(self, model: int, replicas: Sequence[int], view: QueueView) -> int:
        """The placement entry, of ``replicas`` (the entries of model ``model``'s service, in
        placement order), that serves the request arriving now."""


#: the schedulers of ``podsim serve``, by name
SCHEDULERS: Registry[type[ReplicaScheduler]] = Registry("scheduler", flag="--scheduler")

#: the scheduler a run uses when it names none
DEFAULT_SCHEDULER = "fifo"


def scheduler(cls: type) -> type:
    """Register ``cls`` in :data:`SCHEDULERS` under its ``name`` and ``aliases``."""
    SCHEDULERS.register(cls.name, cls, aliases=cls.aliases)
    return cls


def make_scheduler(name: str) -> ReplicaScheduler:
    """A fresh scheduler by name or alias.

    Raises:
        InputError: for an unknown name, with the closest one.
    """
    return SCHEDULERS.get(name)()


def describe() -> str:
    """The schedulers for ``--help``: ``fifo (DLSIM: ...), round-robin (rr), ...``."""
    parts = []
    for name, cls in SCHEDULERS.items():
        notes = [*SCHEDULERS.aliases(name), *([cls.help] if cls.help else [])]
        parts.append(f"{name} ({'; '.join(notes)})" if notes else name)
    return ", ".join(parts)


@scheduler
class FirstIdleReplica:
    """DLSIM's choice: the replica whose first-stage mesh is idle soonest."""

    name = "fifo"
    aliases = ()
    help = "DLSIM: first stage idle soonest"

    def choose(self, model: int, replicas: Sequence[int], view: QueueView) -> int:
        return min(replicas, key=lambda k: (view.mesh_idle(k, 0), replicas.index(k)))


@scheduler
class RoundRobinReplica:
    """The replicas of a service in turn (a turn per model)."""

    name = "round-robin"
    aliases = ("rr",)
    help = ""

    def __init__(self) -> None:
        self._next: dict[int, int] = {}

    def choose(self, model: int, replicas: Sequence[int], view: QueueView) -> int:
        i = self._next.get(model, 0)
        self._next[model] = i + 1
        return replicas[i % len(replicas)]


@scheduler
class LeastOutstandingReplica:
    """The replica with the fewest requests in flight."""

    name = "least-outstanding"
    aliases = ()
    help = ""

    def choose(self, model: int, replicas: Sequence[int], view: QueueView) -> int:
        return min(replicas, key=lambda k: (view.outstanding[k], replicas.index(k)))
