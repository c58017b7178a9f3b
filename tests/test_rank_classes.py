"""Structures proportional to the simulated ranks, not the GPUs (issue 29): per-rank results read
through a rank -> simulated-rank array (RankResults), timelines mapped by an array, process groups
kept as blocks of rank rows (GroupTable), and the (source, destination) index of a round's flows.
Each against a plain list / dict / np.unique built here by hand."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest

from podsim.errors import InputError
from podsim.llm import get_model
from podsim.llm.layout import Layout
from podsim.network.routing import pair_index
from podsim.report.result import RankResult, RankResults, Result, Slice, Timelines
from podsim.report.summary import format_summary
from podsim.workload import Group, GroupTable, Workload

FIELDS = ("rank", "finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "cpu_ns", "mem_ns", "overlap_ns")


def _figures(r: RankResult) -> tuple[int, ...]:
    return tuple(getattr(r, f) for f in FIELDS)


def test_rank_results_read_as_the_explicit_list() -> None:
    # ranks 0-3 copy rank 0, ranks 4-7 rank 4; rank 4 finishes last (at 150 ns)
    a = RankResult(0, 100, 60, 30, 40, 1, 2, 5)
    b = RankResult(4, 150, 70, 50, 80, 0, 0, 9)
    rr = RankResults({0: a, 4: b}, np.array([0, 0, 0, 0, 4, 4, 4, 4]))
    want = [RankResult(r, 100, 60, 30, 40, 1, 2, 5) for r in range(4)]
    want += [RankResult(r, 150, 70, 50, 80, 0, 0, 9) for r in range(4, 8)]
    assert len(rr) == 8 and list(rr) == want and rr == want
    assert _figures(rr[6]) == (6, 150, 70, 50, 80, 0, 0, 9) and rr[-1].rank == 7
    assert rr[2:5] == want[2:5] and rr[::3] == want[::3]
    with pytest.raises(IndexError):
        rr[8]
    res = Result(rr)
    assert res.finish_ns == 150 and res.num_ranks == 8
    assert res.last_rank() == RankResult(4, 150, 70, 50, 80, 0, 0, 9)  # the first of ranks 4-7
    assert res.to_dict()["ranks"] == Result(want).to_dict()["ranks"]
    assert [c[0] for c in rr.classes()] == [a, b] and [c[1].tolist() for c in rr.classes()] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]


def test_the_last_rank_is_the_first_of_those_finishing_last() -> None:
    # ranks 0, 2 and 5 copy rank 2 (finishing at 90 ns), the others rank 1 (at 70 ns)
    fast, slow = RankResult(1, 70), RankResult(2, 90)
    rr = RankResults({1: fast, 2: slow}, np.array([2, 1, 2, 1, 1, 2]))
    explicit = [RankResult(r, 90 if r in (0, 2, 5) else 70) for r in range(6)]
    assert Result(rr).last_rank() == Result(explicit).last_rank() == RankResult(0, 90)
    assert Result(rr).finish_ns == 90
    # a simulated rank that no rank reads does not count
    unread = RankResults({1: fast, 2: RankResult(2, 500)}, np.array([1, 1]))
    assert Result(unread).finish_ns == 70 and Result(unread).last_rank().rank == 0


def test_the_summary_groups_copied_ranks_as_it_groups_a_list() -> None:
    a, b = RankResult(0, 100, 60, 30, 40), RankResult(3, 100, 60, 30, 40)  # alike: one row
    c = RankResult(6, 120, 60, 30, 60)
    of = np.array([0, 0, 0, 3, 3, 3, 6, 6, 6])
    rr = RankResults({0: a, 3: b, 6: c}, of)
    explicit = [RankResult(r, *(_figures(c if r >= 6 else a)[1:])) for r in range(9)]
    text = format_summary(Result(rr))
    assert text == format_summary(Result(explicit))
    assert "0-5 " in text and "6-8 " in text


def test_array_timelines_map_ranks_like_the_dict() -> None:
    made: list[int] = []

    def build(q: int) -> list[Slice]:
        made.append(q)
        return [Slice(f"op of {q}", "compute", q, q + 1)]

    t = Timelines(np.array([0, 0, 2, 2]), build)
    assert len(t) == 4 and list(t) == [0, 1, 2, 3] and 3 in t and 4 not in t and -1 not in t and made == []
    assert t[1] is t[0] and t.rank_of(3) == 2 and t.get(9) is None and made == [0]
    assert t.simulated_for((1, 3, 7)) == {0, 2} and t.simulated_for(()) == set()
    plain = pickle.loads(pickle.dumps(t))
    assert plain == {0: t[0], 1: t[0], 2: t[2], 3: t[2]}
    t[5] = []
    del t[0]
    assert sorted(t) == [1, 2, 3, 5] and t[5] == [] and t.rank_of(5) == 5 and t.simulated_for((0, 5)) == {5}


def _explicit_groups(layout: Layout) -> list[Group]:
    return list(importlib.import_module("podsim.llm.generate").build_groups(layout))


def test_a_group_table_answers_group_of_as_a_list_does() -> None:
    lay = Layout(48, tp=4, pp=2, cp=2, global_batch=48, seq_len=128)  # dp 3
    table = importlib.import_module("podsim.llm.generate").build_groups(lay)
    assert isinstance(table, GroupTable)
    listed = Workload([], np.zeros(48), _explicit_groups(lay))
    tabled = Workload([], np.zeros(48), table)
    for name in ("tp", "cp", "dp", "pp", "ep"):
        for r in range(-1, 49):
            assert tabled.group_of(name, r) == listed.group_of(name, r), (name, r)
    # by hand: rank 13 = tp 1 + 4 (cp 1 + 2 (dp 1 + 3 pp 0))
    assert tabled.group_of("tp", 13).ranks == (12, 13, 14, 15)
    assert tabled.group_of("cp", 13).ranks == (9, 13)
    assert tabled.group_of("dp", 13).ranks == (1, 5, 9, 13, 17, 21)
    assert tabled.group_of("pp", 13).ranks == (13, 37)
    assert table[-1] == Group("pp", (23, 47)) and table[0:2] == list(table)[0:2]


def test_a_group_table_is_checked_like_a_list() -> None:
    twice = GroupTable()
    twice.add("dp", np.array([[0, 1], [2, 3]]))
    twice.add("tp", np.array([[0, 2]]))
    twice.add("dp", np.array([[1, 4]]))  # rank 1 in two dp groups
    with pytest.raises(InputError, match="rank 1 is in two groups named 'dp'"):
        Workload([], np.zeros(5), twice)
    beyond = GroupTable()
    beyond.add("dp", np.array([[0, 7]]))  # a rank past the workload's: looked up all the same
    w = Workload([], np.zeros(2), beyond)
    assert w.group_of("dp", 7) == Group("dp", (0, 7)) and w.group_of("dp", 1) is None


def test_generated_ranks_copy_their_stage_representative() -> None:
    # 16 GPUs, TP 2 x DP 4 x PP 2: ranks 0-7 are stage 0 (simulated as rank 0), 8-15 stage 1 (rank 8)
    run = importlib.import_module("podsim.api.train")
    lay = Layout(16, tp=2, pp=2, global_batch=16, distributed_optimizer=True)
    r = run.simulate_training(get_model("gpt3-1.3b"), lay, "h100-80gb", None, "analytical").result
    assert isinstance(r.ranks, RankResults) and r.info["simulated_ranks"] == 2
    for rank in range(16):
        rep = r.ranks[0 if rank < 8 else 8]
        assert _figures(r.ranks[rank]) == (rank,) + _figures(rep)[1:]
    assert r.finish_ns == max(x.finish_ns for x in list(r.ranks)) == r.last_rank().finish_ns


@pytest.mark.parametrize("periodic", [True, False])
def test_pair_index_is_numpys_unique(periodic: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        head = rng.integers(0, 9, int(rng.integers(1, 30)))
        copies = int(rng.integers(1, 5))
        key = np.tile(head, copies) if periodic else rng.integers(0, 9, len(head) * copies)
        labels = np.repeat(np.arange(copies), len(head))  # a channel per copy
        want = np.unique(key, return_index=True, return_inverse=True)
        got = pair_index(key, labels)
        for g, w in zip(got, want):
            assert np.array_equal(g, w.reshape(-1))
    empty = pair_index(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert [len(x) for x in empty] == [0, 0, 0]
