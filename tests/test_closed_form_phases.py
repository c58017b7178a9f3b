"""Every rank's ring phases in closed form inside the system layer's queues (issue #17,
podsim.engine.closed_form_phases): on multi-dimensional networks, with several queues or active chunks,
both scheduling policies, rings on communicator groups (hops that differ), ring all-to-alls and
other algorithms on some dimensions, the same answer, rank by rank and chunk by chunk, as the
per-message engine (``fast_collectives=False``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from helpers import skewed, written_two_ways
from podsim.collectives.plan import Algo
from podsim.engine import SystemParams, simulate
from podsim.network.topology import BlockKind, Dimension, Topology
from podsim.workload import CollectiveKind, Group, Workload

AR, RS, AG, A2A = (
    CollectiveKind.ALL_REDUCE,
    CollectiveKind.REDUCE_SCATTER,
    CollectiveKind.ALL_GATHER,
    CollectiveKind.ALL_TO_ALL,
)
RING, SW, FC = BlockKind.RING, BlockKind.SWITCH, BlockKind.FULLY_CONNECTED


def _params(dims: int, algo: str | tuple[str, ...] = "ring", **kw: object) -> SystemParams:
    names = (algo,) * dims if isinstance(algo, str) else algo
    base = dict(
        scheduling_policy="LIFO",
        collective_optimization="localBWAware",
        active_chunks_per_dimension=1,
        preferred_dataset_splits=4,
        endpoint_delay_ns=10,
        local_mem_bw_GBps=1600.0,
        queues_per_dim=1,
        algorithms={k: tuple(Algo(a) for a in names) for k in CollectiveKind},
    )
    base.update(kw)
    return SystemParams(**base)  # type: ignore[arg-type]


def _topo(*dims: tuple[BlockKind, int]) -> Topology:
    bws = (200.0, 50.0, 25.0)
    lats = (500.0, 1000.0, 2000.0)
    return Topology(tuple(Dimension(kind, n, bws[d], lats[d]) for d, (kind, n) in enumerate(dims)))


def _skewed(n: int, size: int, seed: int, layers: int = 2, **kw: object) -> Workload:
    """:func:`helpers.skewed`, two layers unless told."""
    return skewed(n, size, seed, layers=layers, **kw)  # type: ignore[arg-type]


def _same(wl: Workload, topo: Topology, params: SystemParams, closed_form: bool | None = True) -> str:
    """Compare with every message; ``closed_form`` None: the run may have met a tie and run
    again with every message.  Returns the run's ``closed_form_collectives``."""
    fast = simulate(wl, topo, params, record_timeline=True)
    slow = simulate(wl, topo, params, record_timeline=True, fast_collectives=False)
    how = fast.info["closed_form_collectives"]
    if closed_form is None and how.startswith("none: "):
        assert "beside other events in" in how and fast.info["messages_closed_form"] == 0
    else:
        assert how.startswith(("ring phases of every rank", "ring collectives of every rank"))
    if closed_form:
        assert fast.info["messages_closed_form"] > 0
    # every message is either sent or stood for by the closed form
    assert fast.info["messages_closed_form"] + fast.info["messages_simulated"] == slow.info["messages_simulated"]
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]
    assert [(r.comm_ns, r.exposed_comm_ns) for r in fast.ranks] == [(r.comm_ns, r.exposed_comm_ns) for r in slow.ranks]
    for r in range(len(fast.ranks)):  # every op and every chunk's phases, as the trace shows them
        key = lambda s: (s.start_ns, s.end_ns, s.name, s.stream, s.category, sorted(s.args.items()))  # noqa: E731
        assert sorted(map(key, fast.timelines[r])) == sorted(map(key, slow.timelines[r]))
    return how


@pytest.mark.parametrize(
    "dims", [((RING, 4), (SW, 4)), ((RING, 2), (RING, 3), (SW, 2)), ((SW, 8), (FC, 2)), ((RING, 3), (RING, 5))]
)
@pytest.mark.parametrize("kind", [AR, RS, AG])
def test_multi_dimensional_networks_match_every_message(dims: tuple, kind: CollectiveKind) -> None:
    n = int(np.prod([d[1] for d in dims]))
    for seed in range(2):
        for opt in ("localBWAware", "baseline"):
            _same(
                _skewed(n, 1 << 20, seed, kinds=(kind,)), _topo(*dims), _params(len(dims), collective_optimization=opt)
            )


@pytest.mark.parametrize(
    "kw",
    [
        dict(queues_per_dim=2),  # chunks alternate queues and directions
        dict(active_chunks_per_dimension=2),  # twin chunks end in the same tick
        dict(active_chunks_per_dimension=4, queues_per_dim=2),
        dict(scheduling_policy="FIFO", active_chunks_per_dimension=2),
        dict(preferred_dataset_splits=7, local_mem_bw_GBps=50.0),  # uneven chunks, slow reductions
    ],
)
def test_queues_active_chunks_and_policies_match(kw: dict) -> None:
    # Two chunks that run one ring's phase at once can end in the same tick on a rank (on two
    # queues they go round in opposite directions; with several active chunks they may start
    # apart on some ranks and together on others), in an order the closed form does not know:
    # such runs are run again with every message.  Same answer either way.
    hows = [
        _same(
            _skewed(12, 3 * (1 << 20) + 5, seed, kinds=(AR, RS, AG), layers=3),
            _topo((RING, 4), (SW, 3)),
            _params(2, **kw),
            None,
        )
        for seed in range(3)
    ]
    hows += [_same(_skewed(6, 1 << 20, 4, layers=3), _topo((RING, 6)), _params(1, **kw), None)]
    hows += [_same(_skewed(12, 1 << 20, 5, layers=3), _topo((RING, 4), (SW, 3)), _params(2, **kw), None)]
    print(hows)


def test_other_algorithms_on_some_dimensions_send_their_messages() -> None:
    # direct all-reduce phases (the baseline optimization runs an all-reduce on each dimension)
    # are sent beside computed ring phases
    wl = _skewed(16, 1 << 20, 5, kinds=(AR, RS, AG), layers=3)
    for algos in (("ring", "direct"), ("direct", "ring")):
        params = _params(2, algos, collective_optimization="baseline")
        fast = simulate(wl, _topo((SW, 4), (RING, 4)), params, record_timeline=False)
        assert 0 < fast.info["messages_simulated"] and 0 < fast.info["messages_closed_form"]
        _same(wl, _topo((SW, 4), (RING, 4)), params)
    # double binary trees (all-reduces only): here their ends meet the ring phases' ends in
    # ticks the closed form cannot order, once in the first all-reduce, once in the second: after
    # the second, every all-reduce like them (group, kind, bytes) is sent as messages
    how = _same(
        _skewed(16, 1 << 20, 5, kinds=(AR,), layers=3),
        _topo((SW, 4), (RING, 4)),
        _params(2, ("doubleBinaryTree", "ring")),
        False,
    )
    assert re.fullmatch(
        r"ring phases of every rank \(.*\); 1 collective, 1 kind of collective \(group, kind, bytes\) "
        r"sent as messages, closed-form ends falling in ticks beside other events \(first: rank \d+ "
        r"at \d+ ns\)",
        how,
    )
    # halving-doubling phases are computed by their step recurrence, beside ring phases
    fast = simulate(wl, _topo((SW, 4), (RING, 4)), _params(2, ("halvingDoubling", "ring")), record_timeline=False)
    assert fast.info["messages_simulated"] == 0 and fast.info["messages_closed_form"] > 0


@pytest.mark.parametrize("dims", [((FC, 8),), ((SW, 4), (FC, 4)), ((RING, 4), (FC, 8))])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(collective_optimization="baseline"),
        dict(active_chunks_per_dimension=2),
        dict(queues_per_dim=2, local_mem_bw_GBps=50.0),
    ],
)
def test_direct_phases_match_every_message(dims: tuple, kw: dict) -> None:
    # a direct all-gather, reduce-scatter or all-to-all sends to every peer at once: computed;
    # a direct all-reduce (a reduce-scatter then an all-gather inside one phase) is still sent
    n = int(np.prod([d[1] for d in dims]))
    algos = tuple("direct" if k is FC else "ring" for k, _ in dims)
    either = None if kw.get("queues_per_dim", 1) > 1 else True
    for seed, kinds in ((0, (AG,)), (1, (RS, A2A)), (2, (RS, AG, AR))):
        _same(
            _skewed(n, (1 << 20) + 3 * 64, seed, kinds=kinds, layers=3),
            _topo(*dims),
            _params(len(dims), algos, **kw),
            either,
        )
    one_dim = _params(1, "direct")
    fast = simulate(_skewed(8, 1 << 20, 3, kinds=(AG, A2A)), _topo((FC, 8)), one_dim, record_timeline=False)
    assert fast.info["messages_simulated"] == 0 and fast.info["messages_closed_form"] == 2 * 4 * 8 * 7
    # a window narrower than the peers sends its messages a few at a time: sent
    windowed = SystemParams(**{**one_dim.__dict__, "algorithms": {k: (Algo("direct", 2),) for k in CollectiveKind}})
    fast = simulate(_skewed(8, 1 << 20, 3, kinds=(AG,)), _topo((FC, 8)), windowed, record_timeline=False)
    assert fast.info["messages_closed_form"] == 0 and fast.info["messages_simulated"] > 0


@pytest.mark.parametrize("dims", [((SW, 8),), ((SW, 4), (SW, 8)), ((RING, 2), (SW, 16)), ((FC, 4), (RING, 3))])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(collective_optimization="baseline"),
        dict(active_chunks_per_dimension=2),
        dict(queues_per_dim=2, local_mem_bw_GBps=50.0),
        dict(preferred_dataset_splits=3),
    ],
)
def test_halving_doubling_phases_match_every_message(dims: tuple, kw: dict) -> None:
    n = int(np.prod([d[1] for d in dims]))
    algos = tuple("halvingDoubling" if k is not RING else "ring" for k, _ in dims)
    for seed, kinds in ((0, (AR,)), (1, (RS, AG, AR))):
        _same(
            _skewed(n, (1 << 20) + 3 * 64, seed, kinds=kinds, layers=3),
            _topo(*dims),
            _params(len(dims), algos, **kw),
            None if kw.get("queues_per_dim", 1) > 1 else True,
        )


def test_ring_all_to_alls_match() -> None:
    _same(_skewed(8, 1 << 20, 6, kinds=(A2A,)), _topo((RING, 4), (SW, 2)), _params(2))
    _same(_skewed(5, 1 << 20, 7, kinds=(A2A, AR)), _topo((RING, 5)), _params(1, queues_per_dim=2))


def test_rings_on_communicator_groups_and_some_dimensions_match() -> None:
    # two groups of 6 ranks that cross both dimensions of a 4 x 3 network: ring hops differ
    n = 12
    progs = _skewed(n, 1 << 20, 8, kinds=(AR, AG), layers=3, group="dp").programs
    groups = [Group("dp", (0, 5, 2, 7, 4, 9)), Group("dp", (1, 6, 3, 8, 10, 11))]
    wl = Workload(progs, list(range(n)), groups)
    _same(wl, _topo((RING, 4), (SW, 3)), _params(2))
    # a collective on the first dimension only
    _same(_skewed(n, 1 << 20, 9, involved=[True, False]), _topo((RING, 4), (SW, 3)), _params(2))


def test_collectives_whose_ends_the_closed_form_cannot_order_are_sent_as_messages(monkeypatch) -> None:
    # With two active chunks a dimension, one reduce-scatter's two chunks start the second
    # dimension's phase apart on some ranks and together on others, and end in the same tick on
    # rank 11: the per-message engine orders them by when it scheduled them, which the closed form
    # does not know.  A second run sends that collective's messages; the answer is the same, and
    # the other collectives stay in closed form.
    wl = _skewed(12, 3 * (1 << 20) + 5, 3, kinds=(AR, RS, AG), layers=3)
    topo, params = _topo((RING, 4), (SW, 3)), _params(2, active_chunks_per_dimension=2)
    how = _same(wl, topo, params)
    assert re.fullmatch(
        r"ring phases of every rank \(.*\); 1 collective sent as messages, closed-form ends falling "
        r"in ticks beside other events \(first: rank \d+ at \d+ ns\)",
        how,
    )
    res = simulate(wl, topo, params, record_timeline=False)
    slow = simulate(wl, topo, params, record_timeline=False, fast_collectives=False)
    assert 0 < res.info["messages_simulated"] < slow.info["messages_simulated"]
    # with a single run allowed, every message is sent
    import podsim.engine.simulator as simulator

    monkeypatch.setattr(simulator, "TIE_RUNS", 1)
    res = simulate(wl, topo, params, record_timeline=False)
    assert res.info["messages_closed_form"] == 0
    assert re.fullmatch(
        r"none: closed-form ends fell in ticks beside other events in 1 runs \(first: rank \d+ at "
        r"\d+ ns\)",
        res.info["closed_form_collectives"],
    )


def test_every_rank_of_a_symmetric_workload_gives_the_symmetric_answer() -> None:
    # the check on a 2-D network: ranks that differ only in how their programs are
    # written end when the symmetric run (one rank simulated) ends
    wl, symmetric = written_two_ways(64, [(AR, 1 << 20), (RS, 1 << 22)])
    topo = _topo((RING, 8), (SW, 8))
    res = simulate(wl, topo, _params(2), record_timeline=False)
    sym = simulate(symmetric, topo, _params(2), record_timeline=False)
    assert res.info["simulated_ranks"] == 64 and sym.info["simulated_ranks"] == 1
    assert res.info["messages_simulated"] == 0 and res.info["messages_closed_form"] > 0
    assert {r.finish_ns for r in res.ranks} == {sym.finish_ns}
