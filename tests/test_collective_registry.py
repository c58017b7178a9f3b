"""The collective-algorithm registries (podsim.collectives.registry): names and aliases of both
worlds (ASTRA-sim's system layer, NCCL), closest-name errors, what each algorithm declares, the
engine's fast paths following those declarations, and the choices the CLI and the sweep offer."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import podsim
from helpers import params, skewed, topo
from podsim.api.collective import ALGORITHMS, PROTOCOLS
from podsim.cli import collective as cli_collective
from podsim.collectives.base import ClosedForm, LogicalRing, PhaseAlgorithm
from podsim.collectives.direct import DirectPhase
from podsim.collectives.double_binary_tree import DoubleBinaryTreePhase
from podsim.collectives.halving_doubling import HalvingDoublingPhase
from podsim.collectives.nccl import COLLECTIVES, NcclTuning
from podsim.collectives.registry import (
    NCCL_ALGORITHMS,
    PHASE_ALGORITHMS,
    counterpart,
    nccl_algorithms_for,
    phase_spellings,
    tuned_nccl_algorithms,
)
from podsim.collectives.ring import RingPhase
from podsim.engine import equivalent_ranks, simulate
from podsim.engine.closed_form_phases import ClosedFormPhases
from podsim.errors import InputError
from podsim.formats.astra_sim import parse_algorithm, parse_system
from podsim.sweep.runs import COLLECTIVE
from podsim.workload import CollectiveKind, Workload

AR = CollectiveKind.ALL_REDUCE


# -- names, aliases and the mapping between the worlds -----------------------------------------


def test_astra_sim_names_find_their_phase_classes() -> None:
    assert PHASE_ALGORITHMS.get("ring") is RingPhase
    assert PHASE_ALGORITHMS.get("direct") is DirectPhase
    assert PHASE_ALGORITHMS.get("halvingDoubling") is HalvingDoublingPhase
    assert PHASE_ALGORITHMS.get("doubleBinaryTree") is DoubleBinaryTreePhase


def test_the_same_algorithm_has_one_name_in_each_world() -> None:
    # ASTRA-sim's doubleBinaryTree is NCCL's tree, ring and direct keep their names
    assert counterpart("doubleBinaryTree", "astra-sim") == "tree"
    assert counterpart("tree", "nccl") == "doubleBinaryTree"
    assert counterpart("ring", "astra-sim") == "ring"
    assert counterpart("halvingDoubling", "astra-sim") is None
    assert counterpart("nvls", "nccl") is None
    # either world takes the other's name as an alias
    assert PHASE_ALGORITHMS.get("tree") is DoubleBinaryTreePhase
    assert NCCL_ALGORITHMS.canonical("doubleBinaryTree") == "tree"


def test_the_mapping_is_declared_the_same_way_from_both_sides() -> None:
    for name, cls in PHASE_ALGORITHMS.items():
        if cls.nccl is not None:
            assert NCCL_ALGORITHMS.get(cls.nccl).astra_sim == name
    for name, algo in NCCL_ALGORITHMS.items():
        if algo.astra_sim is not None:
            assert PHASE_ALGORITHMS.get(algo.astra_sim).nccl == name


def test_system_json_names_come_from_the_registry() -> None:
    assert parse_algorithm("TREE", "s.json", "x").name == "doubleBinaryTree"
    assert parse_algorithm("onehalvingdoubling", "s.json", "x").name == "oneHalvingDoubling"
    a = parse_algorithm("oneDirect3", "s.json", "x")
    assert (a.name, a.window, a.spans_all, a.phase) == ("oneDirect", 3, True, DirectPhase)
    # a tree has no one* form: each dimension builds its own pair of trees
    assert not DoubleBinaryTreePhase.has_one_variant
    with pytest.raises(InputError, match="unknown collective algorithm 'oneDoubleBinaryTree'"):
        parse_algorithm("oneDoubleBinaryTree", "s.json", "x")
    cfg = parse_system({"all-reduce-implementation": ["ring", "tree"]}, "s.json")
    assert [a.name for a in cfg.algorithms(AR)] == ["ring", "doubleBinaryTree"]
    assert phase_spellings() == (
        "ring",
        "direct",
        "halvingDoubling",
        "doubleBinaryTree",
        "oneRing",
        "oneDirect",
        "oneHalvingDoubling",
        "directK",
    )


# -- closest-name errors -------------------------------------------------------------------------


def test_misspelt_algorithms_name_the_closest() -> None:
    with pytest.raises(InputError, match="unknown collective algorithm 'rnig'.*did you mean 'ring'"):
        PHASE_ALGORITHMS.get("rnig")
    with pytest.raises(InputError, match="unknown NCCL algorithm 'hierarchicl'.*did you mean 'hierarchical'"):
        NCCL_ALGORITHMS.get("hierarchicl")
    with pytest.raises(InputError, match="did you mean 'doubleBinaryTree'"):
        parse_algorithm("doubleBinaryTre", "s.json", "x")


def test_collective_api_names_the_closest_algorithm_and_protocol() -> None:
    with pytest.raises(InputError, match="all_reduce has no 'rign' algorithm; did you mean 'ring'\\?"):
        podsim.collective("all_reduce", "dgx-h100", 8, min_bytes="1K", max_bytes="1K", algorithm="rign")
    with pytest.raises(InputError, match="all_gather has no 'tree' algorithm; expected one of ring$"):
        podsim.collective("all_gather", "dgx-h100", 8, min_bytes="1K", max_bytes="1K", algorithm="tree")
    with pytest.raises(InputError, match="unknown protocol 'Simpel'; did you mean 'Simple'\\?"):
        podsim.collective("all_reduce", "dgx-h100", 8, min_bytes="1K", max_bytes="1K", protocol="Simpel")


# -- what each algorithm declares ----------------------------------------------------------------


def test_nccl_declarations_are_complete() -> None:
    tuning = NcclTuning()
    for name, algo in NCCL_ALGORITHMS.items():
        assert algo.collectives and set(algo.collectives) <= set(COLLECTIVES), name
    for name in tuned_nccl_algorithms():  # a tuned algorithm has NCCL's default latencies
        assert set(tuning.base_latency_ns[name]) == set(PROTOCOLS)
        assert all(set(tuning.hop_latency_ns[c][name]) == set(PROTOCOLS) for c in tuning.hop_latency_ns)
    assert set(tuning.algorithms) <= set(tuned_nccl_algorithms())
    # every collective has an algorithm; all-reduce tries them in NCCL's order
    assert all(nccl_algorithms_for(c) for c in COLLECTIVES)
    assert nccl_algorithms_for("all_reduce") == ("ring", "tree", "nvls", "hierarchical")


def test_phase_declarations_match_what_the_phases_do() -> None:
    ring = LogicalRing(0, 4, 0)
    for name, cls in PHASE_ALGORITHMS.items():
        assert cls.kinds, name
        if cls is DoubleBinaryTreePhase:
            continue  # built from a tree, not a ring
        for kind in CollectiveKind:
            if kind in cls.kinds:
                cls(kind, ring, 1 << 20)
            elif kind in (AR, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL):
                with pytest.raises(InputError, match="does not implement"):
                    cls(kind, ring, 1 << 20)


def test_a_closed_form_is_never_inherited() -> None:
    class Slower(RingPhase):  # another state machine: the ring recurrence no longer holds
        name = "slower"

    class Declared(RingPhase):
        name = "declared"
        closed_form = ClosedForm.RING

    assert RingPhase.closed_form is ClosedForm.RING and DirectPhase.closed_form is ClosedForm.DIRECT
    assert HalvingDoublingPhase.closed_form is ClosedForm.STEPS
    assert DoubleBinaryTreePhase.closed_form is None and PhaseAlgorithm.closed_form is None
    assert Slower.closed_form is None
    assert Declared.closed_form is ClosedForm.RING


# -- the engine asks the algorithm --------------------------------------------------------------


class _Started:
    """A phase with no closed form: records that the engine started it as messages."""

    closed_form = None

    def __init__(self) -> None:
        self.started = False

    def start(self, host: object) -> None:
        self.started = True


def test_a_phase_without_a_closed_form_is_started_as_messages() -> None:
    alg = _Started()
    st = argparse.Namespace(phase=argparse.Namespace(algorithm=alg))
    ClosedFormPhases(network=None).start(None, st)  # type: ignore[arg-type]
    assert alg.started


@pytest.mark.parametrize("dims", [(("Ring", 8, 50, 500),), (("Ring", 4, 50, 500), ("Switch", 2, 25, 1000))])
def test_the_fast_paths_follow_the_declaration(dims: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    wl, machine, sysp = skewed(8, 1 << 20, 1, layers=2), topo(*dims), params(ndims=len(dims), lmb=1600.0)
    fast = simulate(wl, machine, sysp)
    assert fast.info["messages_closed_form"] > 0
    monkeypatch.setattr(RingPhase, "closed_form", None)  # the ring declares no closed form
    slow = simulate(wl, machine, sysp)
    assert slow.info["messages_closed_form"] == 0
    assert not slow.info["closed_form_collectives"].startswith("ring collectives")  # nor whole collectives
    assert [r.finish_ns for r in slow.ranks] == [r.finish_ns for r in fast.ranks]


def test_roles_that_differ_rule_out_simulating_one_rank() -> None:
    wl = skewed(1, 1 << 20, 0)
    wl = Workload(wl.programs, [0] * 8)  # one program on every rank
    same = equivalent_ranks(wl, None, params())
    tree = equivalent_ranks(wl, None, params("doubleBinaryTree"))
    assert same[0] and tree == (False, DoubleBinaryTreePhase.roles_differ)


# -- the choices offered by the CLI and the sweep ------------------------------------------------


def _collective_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    cli_collective.add_parser(p.add_subparsers())
    return p


def test_every_offered_algorithm_is_registered_and_runs() -> None:
    assert COLLECTIVE.param("algo").choices == ALGORITHMS == NCCL_ALGORITHMS.names()
    assert COLLECTIVE.param("proto").choices == PROTOCOLS
    sub = next(a for a in _collective_parser()._actions if isinstance(a, argparse._SubParsersAction))
    algo_help = next(a.help for a in sub.choices["collective"]._actions if "--algo" in a.option_strings)
    for name in ALGORITHMS:
        assert name in algo_help
        collective = NCCL_ALGORITHMS.get(name).collectives[0]
        gpus = 2 if collective == "send_recv" else 8
        t = podsim.collective(collective, "dgx-h100", gpus, min_bytes="1M", max_bytes="1M", algorithm=name)
        assert t.rows[0].algorithm == name


def test_every_algorithm_is_in_the_docs_table() -> None:
    text = (Path(__file__).parent.parent / "docs" / "networks.md").read_text()
    section = text[text.index("## Collective algorithms") : text.index("## `podsim collective`")]
    for name in (*PHASE_ALGORITHMS.names(), *NCCL_ALGORITHMS.names()):
        assert f"| `{name}`" in section, name
