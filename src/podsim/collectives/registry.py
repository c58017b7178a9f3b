"""The collective algorithms podsim knows, in both of its worlds, and the mapping between them.

podsim times collectives in two worlds, each naming its algorithms as its users do:

* **ASTRA-sim's system layer** (a trace on an ASTRA-sim machine, :mod:`podsim.engine`): an
  algorithm is a per-rank state machine for one network dimension
  (:class:`~podsim.collectives.base.PhaseAlgorithm`), named as in a system JSON's
  ``*-implementation`` lists: ``ring``, ``direct``, ``halvingDoubling``, ``doubleBinaryTree``,
  plus the ``one*`` forms (one ring over every NPU: ``oneRing``) and ``directK`` windows;
  :data:`PHASE_ALGORITHMS` holds the classes.
* **NCCL** (cluster presets: ``podsim collective``, the cluster engine, layouts): an algorithm
  builds a schedule of flows for a communicator (:class:`NcclAlgorithm`), named as NCCL names
  it: ``ring``, ``tree``, ``nvls``, ``hierarchical``, with ``direct`` for all-to-all and
  ``p2p`` for send/recv; :data:`NCCL_ALGORITHMS` holds them.

The mapping (each entry's ``nccl`` / ``astra_sim`` declaration; docs/networks.md has the table):

=====================  ==============  ==================================================
ASTRA-sim              NCCL            the same idea
=====================  ==============  ==================================================
``ring``               ``ring``        neighbours on a ring, ``2(n-1)`` steps (all-reduce)
``direct``             ``direct``      every rank to every other at once (all-to-all)
``doubleBinaryTree``   ``tree``        two complementary binary trees, chunks alternating
``halvingDoubling``    --              partners at distance 1, 2, 4, ...
--                     ``nvls``        NVLink SHARP: the NVSwitch reduces
--                     ``hierarchical``  reduce-scatter in servers, all-reduce per rail
--                     ``p2p``         one transfer (send/recv)
=====================  ==============  ==================================================

Each world accepts the other's name for the same algorithm as an alias (``tree`` in a system
JSON is ``doubleBinaryTree``; ``--algo doubleBinaryTree`` is NCCL's ``tree``).

Adding an algorithm is one module that defines it and registers it here (a
``@PHASE_ALGORITHMS.register`` class decorator, or an ``NCCL_ALGORITHMS.register`` call), the
import of that module in ``podsim/collectives/__init__.py``, a test and a line of docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..registry import Registry
from .base import PhaseAlgorithm

if TYPE_CHECKING:
    from .nccl.algorithms import Communicator
    from .nccl.schedule import Schedule
    from .nccl.tuning import NcclTuning


@dataclass(frozen=True)
class NcclAlgorithm:
    """One NCCL algorithm: what it supports and how it builds a schedule.

    Attributes:
        name: NCCL's name (``--algo``, the ``algorithm`` column of results).
        collectives: the collectives it implements, by NCCL's names (``all_reduce`` ...).
        build: ``build(comm, collective, size, proto, tuning)`` -> the schedule of one call of
            ``size`` bytes (nccl-tests' size convention, see :mod:`.nccl.algorithms`).
        tuned: whether a cluster's ``nccl.algorithms`` enables it and ``nccl:`` holds its
            latencies (:mod:`.nccl.tuning`); an untuned one is always allowed (the only way to
            run its collectives).
        fits: whether it can run on a communicator (one NVSwitch server, equal servers...);
            None: everywhere.
        protocols: the protocols it runs with; None: every protocol the tuning allows.
        astra_sim: the ASTRA-sim algorithm it corresponds to, if any.
        closed_form: whether the analytical backend times it in closed form (every NCCL
            schedule is a list of rounds, so all do).
    """

    name: str
    collectives: tuple[str, ...]
    build: Callable[[Communicator, str, int, str, NcclTuning], Schedule]
    tuned: bool = True
    fits: Callable[[Communicator], bool] | None = None
    protocols: tuple[str, ...] | None = None
    astra_sim: str | None = None
    closed_form: bool = True

    def runs_on(self, comm: Communicator) -> bool:
        """Whether it can run on ``comm``."""
        return self.fits is None or bool(self.fits(comm))


#: ASTRA-sim's algorithms (the system layer's phases), by their system-JSON names
PHASE_ALGORITHMS: Registry[type[PhaseAlgorithm]] = Registry("collective algorithm")

#: NCCL's algorithms (schedules of flows on a cluster), by NCCL's names
NCCL_ALGORITHMS: Registry[NcclAlgorithm] = Registry("NCCL algorithm", flag="--algo")


def register_phase(cls: type[PhaseAlgorithm]) -> type[PhaseAlgorithm]:
    """Class decorator: register an ASTRA-sim algorithm under its ``name`` (and its NCCL
    counterpart's name, when that is not an ASTRA-sim name itself, as an alias)."""
    aliases = (cls.nccl,) if cls.nccl and cls.nccl != cls.name else ()
    PHASE_ALGORITHMS.register(cls.name, cls, aliases=aliases)
    return cls


def register_nccl(algo: NcclAlgorithm) -> NcclAlgorithm:
    """Register an NCCL algorithm under its ``name`` (and its ASTRA-sim counterpart's name,
    when that differs, as an alias)."""
    aliases = (algo.astra_sim,) if algo.astra_sim and algo.astra_sim != algo.name else ()
    NCCL_ALGORITHMS.register(algo.name, algo, aliases=aliases)
    return algo


def nccl_algorithms_for(collective: str) -> tuple[str, ...]:
    """The NCCL algorithms that implement ``collective``, in registration order (the order the
    selector tries them: an earlier one wins a tie)."""
    return tuple(n for n, a in NCCL_ALGORITHMS.items() if collective in a.collectives)


def tuned_nccl_algorithms() -> tuple[str, ...]:
    """The NCCL algorithms a cluster's ``nccl:`` section tunes and may enable."""
    return tuple(n for n, a in NCCL_ALGORITHMS.items() if a.tuned)


def phase_spellings() -> tuple[str, ...]:
    """Every algorithm name a system JSON may give (``directK`` standing for the windowed
    forms), in the order of :data:`PHASE_ALGORITHMS`, the ``one*`` forms after the plain ones."""
    names = PHASE_ALGORITHMS.names()
    ones = tuple(one_name(n) for n in names if PHASE_ALGORITHMS.get(n).has_one_variant)
    windows = tuple(f"{n}K" for n in names if PHASE_ALGORITHMS.get(n).windowed)
    return names + ones + windows


def one_name(name: str) -> str:
    """The ``one*`` form of an ASTRA-sim algorithm name (``halvingDoubling`` -> ``oneHalvingDoubling``)."""
    return "one" + name[0].upper() + name[1:]


def counterpart(name: str, world: str) -> str | None:
    """The name of algorithm ``name`` in the other world: ``world`` is the world ``name`` comes
    from, ``"astra-sim"`` or ``"nccl"``; None when the other world has no such algorithm.

    Raises:
        InputError: for a name the world does not know (with the closest name).
    """
    if world == "astra-sim":
        return PHASE_ALGORITHMS.get(name).nccl
    if world == "nccl":
        return NCCL_ALGORITHMS.get(name).astra_sim
    raise ValueError(f"unknown world {world!r}; expected 'astra-sim' or 'nccl'")
