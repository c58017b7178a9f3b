"""Every rank's ring collectives in closed form (issue #17, podsim.engine.ring_fast): the same
answer, rank by rank and chunk by chunk, as the per-message engine (``fast_collectives=False``)
on workloads whose ranks start their all-reduces, reduce-scatters and all-gathers at different
times."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import skewed, written_two_ways
from podsim.collectives.plan import Algo
from podsim.engine import SystemParams, simulate
from podsim.engine.ring_fast import ring_phase_ends, ring_phase_steps
from podsim.network.topology import BlockKind, Dimension, Topology
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

RING = {k: (Algo("ring"),) for k in CollectiveKind}


def _params(**kw: object) -> SystemParams:
    base = dict(
        scheduling_policy="LIFO",
        collective_optimization="localBWAware",
        active_chunks_per_dimension=1,
        preferred_dataset_splits=4,
        endpoint_delay_ns=10,
        local_mem_bw_GBps=1600.0,
        queues_per_dim=1,
        algorithms=RING,
    )
    base.update(kw)
    return SystemParams(**base)  # type: ignore[arg-type]


AR, RS, AG = CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER


_skewed = skewed


def _ring(n: int, bw: float = 50 * 2**30 / 1e9, lat: float = 500.0) -> Topology:
    return Topology((Dimension(BlockKind.RING, n, bw, lat),))


def _both(wl: Workload, topo: Topology, params: SystemParams):  # type: ignore[no-untyped-def]
    fast = simulate(wl, topo, params, record_timeline=True)
    slow = simulate(wl, topo, params, record_timeline=True, fast_collectives=False)
    return fast, slow


def _same(fast, slow) -> None:  # type: ignore[no-untyped-def]
    assert fast.info["messages_closed_form"] > 0 and fast.info["messages_simulated"] == 0
    assert slow.info["messages_closed_form"] == 0 and slow.info["messages_simulated"] > 0
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]
    assert [(r.comm_ns, r.exposed_comm_ns) for r in fast.ranks] == [(r.comm_ns, r.exposed_comm_ns) for r in slow.ranks]
    for r in range(len(fast.ranks)):  # every op and every chunk, as the trace shows them
        key = lambda s: (s.start_ns, s.end_ns, s.name, s.stream, s.category, sorted(s.args.items()))  # noqa: E731
        assert sorted(map(key, fast.timelines[r])) == sorted(map(key, slow.timelines[r]))


@pytest.mark.parametrize("kind", [AR, RS, AG])
@pytest.mark.parametrize("n", [2, 3, 8, 17, 32])
def test_skewed_ranks_match_the_per_message_engine(n: int, kind: CollectiveKind) -> None:
    for seed in range(3):
        _same(*_both(_skewed(n, 1 << 20, seed, kinds=(kind,)), _ring(n), _params()))


@pytest.mark.parametrize(
    "kw",
    [
        dict(collective_optimization="baseline"),  # the other direction round the ring
        dict(preferred_dataset_splits=7),  # 8 chunks of an uneven size (below)
        dict(preferred_dataset_splits=1, endpoint_delay_ns=1),
        dict(local_mem_bw_GBps=50.0),  # reductions of hundreds of ns
        dict(scheduling_policy="FIFO"),
    ],
)
def test_other_settings_match(kw: dict) -> None:
    size = 3 * (1 << 20) + 5 if kw.get("preferred_dataset_splits") == 7 else 1 << 20
    _same(*_both(_skewed(16, size, 7), _ring(16), _params(**kw)))


def test_what_ends_in_its_own_tick_is_sent_as_messages() -> None:
    # with no endpoint delay a ring step can end in the tick it is scheduled in, where the engine
    # orders it among that tick's events by when they were scheduled: every message is sent
    wl = _skewed(8, 1 << 20, 5)
    fast, slow = _both(wl, _ring(8), _params(endpoint_delay_ns=0))
    assert fast.info["messages_closed_form"] == 0 and fast.info["messages_simulated"] == slow.info["messages_simulated"]
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]
    # a reduce-scatter of 24-byte messages reduces in 0 ns at 50 GB/s: its last step too
    rs = _skewed(8, 8 * 24 * 4, 5, kinds=(RS,))
    fast, slow = _both(rs, _ring(8), _params(local_mem_bw_GBps=50.0))
    assert fast.info["messages_closed_form"] == 0 and fast.info["messages_simulated"] > 0
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]


def test_chained_collectives_tiny_messages_and_zero_latency_match() -> None:
    _same(*_both(_skewed(12, 1 << 18, 3, layers=3), _ring(12), _params()))
    _same(
        *_both(
            _skewed(10, 1 << 19, 6, layers=5, kinds=(RS, AG, AR)),
            _ring(10),
            _params(collective_optimization="baseline", preferred_dataset_splits=3),
        )
    )
    _same(*_both(_skewed(24, 100, 4), _ring(24), _params()))  # chunk inflated to the ranks
    _same(*_both(_skewed(8, 1 << 20, 5), _ring(8, lat=0.0), _params()))


def test_broadcasts_replayed_or_timed_as_all_gathers_match() -> None:
    # a DDP capture's start: parameter broadcasts (one with a recorded duration, replayed for it;
    # one without, timed as an all-gather of its size) before the skewed all-reduces
    n = 12
    rng = np.random.default_rng(11)
    progs = []
    for r in range(n):
        b = ProgramBuilder(f"r{r}")
        b1 = b.add(
            OpKind.COLLECTIVE,
            "bcast timed",
            collective=int(CollectiveKind.BROADCAST),
            size_bytes=4096,
            duration_ns=int(rng.integers(1_000, 9_000)),
            node_id=1,
        )
        b2 = b.add(
            OpKind.COLLECTIVE,
            "bcast",
            collective=int(CollectiveKind.BROADCAST),
            size_bytes=1 << 16,
            duration_ns=-1,
            node_id=2,
            data_deps=[b1],
        )
        c = b.add(OpKind.COMPUTE, "c", duration_ns=int(rng.integers(1, 50_000)), node_id=3, data_deps=[b2])
        b.add(OpKind.COLLECTIVE, "ar", collective=int(AR), size_bytes=1 << 20, node_id=4, data_deps=[c])
        progs.append(b.build())
    wl = Workload(progs, list(range(n)))
    _same(*_both(wl, _ring(n), _params()))
    # the duration-less broadcast is an all-gather: without a ring for it, whole collectives are
    # not computed, only the all-reduce's ring phases (the all-gather's direct phase, two
    # messages at a time, sends its messages)
    mixed = _params(algorithms={AR: (Algo("ring"),), AG: (Algo("direct", 2),)})
    res = simulate(wl, _ring(n), mixed, record_timeline=False)
    assert (
        res.info["closed_form_collectives"]
        == "ring phases of every rank (whole collectives not: the all-gather is not a ring)"
    )
    slow = simulate(wl, _ring(n), mixed, record_timeline=False, fast_collectives=False)
    assert 0 < res.info["messages_simulated"] < slow.info["messages_simulated"]
    assert res.info["messages_closed_form"] + res.info["messages_simulated"] == slow.info["messages_simulated"]
    assert [r.finish_ns for r in res.ranks] == [r.finish_ns for r in slow.ranks]


def test_the_closed_form_is_the_step_recurrence() -> None:
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 16, 64):
        for hop, e, red in ((500, 10, 3), (0, 0, 0), (7, 0, 100), (1000, 25, 0)):
            starts = rng.integers(0, 20_000, n)
            order = rng.permutation(n)
            pred = np.empty(n, dtype=np.int64)
            pred[order] = np.roll(order, 1)  # order[j] receives from order[j - 1]
            # all-reduce, reduce-scatter, all-gather; and longer phases
            for messages, reducing in ((2 * n - 2, n - 1), (n - 1, n - 1), (n - 1, 0), (3 * n, 2)):
                for chunks in (1, 3):
                    ends = ring_phase_ends(starts, order, chunks, hop, e, red, messages, reducing)[-1]
                    assert (ends == ring_phase_steps(starts, pred, chunks, hop, e, red, messages, reducing)).all()
            # a ring whose hops differ (a communicator group across dimensions), and long phases
            # that go round several times (a ring all-to-all: n (n - 1) / 2 messages)
            hops = rng.integers(0, 3_000, n)
            per_rank = np.empty(n, dtype=np.int64)
            per_rank[order] = hops  # hops[j]: the delay into order[j]
            for messages, reducing in ((2 * n - 2, n - 1), (n - 1, 0), (n * (n - 1) // 2, 0), (5 * n + 1, 3)):
                ends = ring_phase_ends(starts, order, 2, hops, 10, 7, messages, reducing)[-1]
                assert (ends == ring_phase_steps(starts, pred, 2, per_rank, 10, 7, messages, reducing)).all()


def test_the_symmetric_answer_and_the_message_count() -> None:
    # the case: odd ranks write their 10 us of compute as two 5 us ops; 4 chunks of
    # 2(n - 1) messages on each of the n ranks
    n = 64
    wl, symmetric = written_two_ways(n, [(CollectiveKind.ALL_REDUCE, 1 << 20)])
    res = simulate(wl, _ring(n), _params(), record_timeline=False)
    sym = simulate(symmetric, _ring(n), _params(), record_timeline=False)
    assert res.info["simulated_ranks"] == n and sym.info["simulated_ranks"] == 1
    assert {r.finish_ns for r in res.ranks} == {sym.finish_ns}
    assert res.info["messages_closed_form"] == n * 4 * 2 * (n - 1)


def test_only_the_collectives_a_workload_uses_need_a_ring() -> None:
    only_ar = _params(algorithms={AR: (Algo("ring"),)})
    _same(*_both(_skewed(6, 1 << 20, 2), _ring(6), only_ar))
    res = simulate(_skewed(6, 1 << 20, 2), _ring(6), _params(algorithms={AR: (Algo("direct"),)}), record_timeline=False)
    assert (
        res.info["closed_form_collectives"]
        == "ring phases of every rank (whole collectives not: the all-reduce is not a ring)"
    )
    assert res.info["messages_closed_form"] == 0  # a direct all-reduce has no ring phase


def test_other_machines_compute_ring_phases_not_whole_collectives() -> None:
    # whole collectives need a 1-D ring with one queue and one active chunk; elsewhere each ring
    # phase is computed (tests/test_closed_form_phases.py checks them against every message)
    wl = _skewed(8, 1 << 20, 1)
    two_d = Topology((Dimension(BlockKind.RING, 4, 50.0, 500.0), Dimension(BlockKind.RING, 2, 50.0, 500.0)))
    for topo, params, why in (
        (two_d, _params(), "not a one-dimensional ring"),
        (_ring(8), _params(queues_per_dim=2), "more than one queue or active chunk per dimension"),
        (_ring(8), _params(active_chunks_per_dimension=2), "more than one queue or active chunk per dimension"),
    ):
        res = simulate(wl, topo, params, record_timeline=False)
        assert res.info["closed_form_collectives"] == f"ring phases of every rank (whole collectives not: {why})"
        assert res.info["messages_closed_form"] > 0 and res.info["messages_simulated"] == 0
    # rendezvous messages and a shared memory bus: every message is sent
    for kw, params in (
        (dict(rendezvous=True), _params()),
        ({}, _params(model_shared_bus=True, loggp=(10.0, 5.0, 2.0, 0.01))),
    ):
        res = simulate(wl, _ring(8), params, record_timeline=False, **kw)
        assert res.info["messages_closed_form"] == 0 and res.info["messages_simulated"] > 0
