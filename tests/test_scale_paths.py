"""The shortcuts that make long runs cheap give what the plain ways give: interval unions in
numpy, a fused op's compute time, layer passes copied instead of stepped, timelines built when
read, and flow runs without link-load counters."""

from __future__ import annotations

import importlib
import pickle
import random

import numpy as np
import pytest

from podsim.engine.rank import _compute_length
from podsim.hardware.gpu import get_gpu
from podsim.intervals import union_length, union_length_of
from podsim.llm import get_model
from podsim.llm.generate import StageProgram, generate
from podsim.llm.layout import Layout
from podsim.report.result import Slice, Timelines


def _covered(spans: list[tuple[int, int]]) -> int:
    """Brute force: the integer instants any span covers."""
    return len({t for a, b in spans for t in range(a, b)})


def test_union_length_of_counts_every_covered_instant() -> None:
    rng = random.Random(7)
    assert union_length_of(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0
    for _ in range(300):
        spans = []
        for _ in range(rng.randint(1, 12)):
            a = rng.randint(0, 60)
            spans.append((a, a + rng.randint(-3, 15)))  # some empty or reversed
        a = np.array([s for s, _ in spans], dtype=np.int64)
        b = np.array([e for _, e in spans], dtype=np.int64)
        assert union_length_of(a, b) == _covered(spans) == union_length(spans)


def test_compute_length_of_fused_parts() -> None:
    # parts one after another: their sum; a collective beside them does not count
    parts = [(0, 5, "a", "compute"), (0, 7, "ar", "tp"), (7, 3, "b", "compute"), (10, 4, "c", "compute")]
    assert _compute_length(parts) == 5 + 3 + 4
    rng = random.Random(3)
    for _ in range(300):  # overlapping, out of order or empty parts: their union, by brute force
        parts = []
        for _ in range(rng.randint(1, 8)):
            a = rng.randint(0, 40)
            parts.append((a, rng.randint(0, 12), "x", rng.choice(["compute", "compute", "tp"])))
        assert _compute_length(parts) == _covered([(a, a + d) for a, d, _, c in parts if c == "compute"])


class _Stepped(StageProgram):
    """The reference: every step of every pass taken one by one, none copied."""

    def steps(self, steps, label):  # type: ignore[no-untyped-def]
        for st in steps:
            self.step(st, label)


LAYOUTS = [
    ("gpt3-1.3b", dict(gpus=64, tp=4, pp=4, global_batch=32, sequence_parallel=True, recompute="selective"), "flow"),
    ("gpt3-1.3b", dict(gpus=64, tp=4, pp=4, vpp=2, global_batch=32, distributed_optimizer=True), "analytical"),
    ("llama3-8b", dict(gpus=32, tp=2, cp=2, pp=2, global_batch=16, seq_len=8192), "flow"),  # overlapped K/V exchange
    (
        "mixtral-8x7b",
        dict(gpus=32, tp=4, pp=2, ep=4, etp=2, global_batch=16, seq_len=2048, sequence_parallel=True),
        "flow",
    ),
    ("gpt3-1.3b", dict(gpus=16, tp=2, global_batch=16, zero=3), "analytical"),
]


@pytest.mark.parametrize("name,lay,backend", LAYOUTS)
def test_copied_passes_build_the_stepped_programs(name: str, lay: dict, backend: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    run = importlib.import_module("podsim.api.train")
    gen = importlib.import_module("podsim.llm.generate")
    m, layout = get_model(name), Layout(**lay)
    built = []

    def capture(*a, **k):  # type: ignore[no-untyped-def]
        built.append(generate(*a, **k))
        return built[-1]

    stepped = []
    step = StageProgram.step

    def counted(self, st, label):  # type: ignore[no-untyped-def]
        stepped[-1] += 1
        step(self, st, label)

    monkeypatch.setattr(run, "generate", capture)
    monkeypatch.setattr(StageProgram, "step", counted)
    stepped.append(0)
    fast = run.simulate_training(m, layout, "h100-80gb", None, backend, record_timeline=False)
    monkeypatch.setattr(gen, "StageProgram", _Stepped)
    stepped.append(0)
    slow = run.simulate_training(m, layout, "h100-80gb", None, backend, record_timeline=False)
    assert fast.result.finish_ns == slow.result.finish_ns
    assert stepped[0] < stepped[1] / 2  # most passes were copied
    a, b = built
    assert len(a.programs) == len(b.programs)
    for p, q in zip(a.programs, b.programs):
        assert p.names == q.names
        assert p.extras == q.extras
        for key in p.columns:
            assert np.array_equal(p.columns[key], q.columns[key]), key
        assert np.array_equal(p.data_idx, q.data_idx) and np.array_equal(p.data_ptr, q.data_ptr)


def test_timelines_are_built_once_per_simulated_rank_when_read() -> None:
    made: list[int] = []

    def build(q: int) -> list[Slice]:
        made.append(q)
        return [Slice(f"op of {q}", "compute", q, q + 1)]

    t = Timelines({0: 0, 1: 0, 2: 2, 3: 2}, build)
    t.more.append(lambda q, slices: slices.append(Slice("coll", "collective", 9, 10, "chunk")))
    assert len(t) == 4 and sorted(t) == [0, 1, 2, 3] and 3 in t and 4 not in t and made == []
    assert t[1] is t[0] and [s.name for s in t[1]] == ["op of 0", "coll"]
    assert made == [0]  # rank 2's are not made until read
    assert t.get(7) is None and t.rank_of(3) == 2
    plain = pickle.loads(pickle.dumps(t))
    assert type(plain) is dict and plain == t and made == [0, 2]
    t[5] = []
    del t[0]
    assert sorted(t) == [1, 2, 3, 5] and t[5] == []
    t.clear()
    assert len(t) == 0 and not t


def test_a_trace_reads_the_same_timeline_as_every_rank_built() -> None:
    # GPT 1.3B over 4 stages: the lazily built timelines equal the slices the engine made before
    # (one list per stage, shared by its ranks, the TP collectives' parts included)
    run = importlib.import_module("podsim.api.train")
    m, layout = get_model("gpt3-1.3b"), Layout(64, tp=4, pp=4, global_batch=16)
    r = run.simulate_training(m, layout, "h100-80gb", None, "flow").result
    assert isinstance(r.timelines, Timelines) and len(r.timelines) == 64
    stage = [r.timelines[16 * s] for s in range(4)]
    assert all(r.timelines[16 * s + 5] is stage[s] for s in range(4))
    for s, slices in enumerate(stage):
        ends = max(x.end_ns for x in slices)
        assert ends <= r.finish_ns and ends == r.ranks[16 * s].finish_ns
        assert any(x.category == "comm" and x.args.get("group") == "tp" for x in slices)


def test_link_loads_are_for_counters_alone() -> None:
    run = importlib.import_module("podsim.api.train")
    m, layout = get_model("gpt3-1.3b"), Layout(64, tp=4, pp=2, global_batch=16, distributed_optimizer=True)
    both = run.simulate_training(m, layout, "a100-80gb", None, "flow")
    bare = run.simulate_training(m, layout, "a100-80gb", None, "flow", record_link_load=False)
    assert both.result.counters and not bare.result.counters
    assert bare.result.finish_ns == both.result.finish_ns and bare.breakdown == both.breakdown
    assert [x.as_dict() for x in bare.result.links] == [x.as_dict() for x in both.result.links]
    assert [x.finish_ns for x in bare.result.ranks] == [x.finish_ns for x in both.result.ranks]


def test_the_fold_answers_are_kept_and_right() -> None:
    run = importlib.import_module("podsim.api.train")
    layout = Layout(64, tp=8, pp=2, global_batch=16)
    from podsim.hardware.cluster import build_fabric

    spec = run.default_cluster(get_gpu("a100-80gb"), None, None, None)
    fabric = build_fabric(spec, 64)
    fold, estimate = run._folder(layout, fabric, spec, "flow")
    from podsim.collectives.nccl.planner import CollectivePlanner
    from podsim.workload import CollectiveKind

    planner = CollectivePlanner(fabric, spec.nccl)
    want = planner.plan(tuple(range(8)), CollectiveKind.ALL_REDUCE, 1 << 20)[1]
    assert fold(CollectiveKind.ALL_REDUCE, 1 << 20, "tp") == want == fold(CollectiveKind.ALL_REDUCE, 1 << 20, "tp")
    assert fold(CollectiveKind.ALL_REDUCE, 1 << 20, "dp") is None  # DP is never fused
    dp = tuple(range(0, 32, 8))
    assert estimate(CollectiveKind.ALL_REDUCE, 1 << 20, "dp") == planner.plan(dp, CollectiveKind.ALL_REDUCE, 1 << 20)[1]
    assert estimate(CollectiveKind.ALL_REDUCE, 0, "dp") is None
