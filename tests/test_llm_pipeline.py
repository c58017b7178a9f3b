"""Pipeline schedules and generated workloads against hand-derived orders and bubbles."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import yaml

import podsim
from podsim.compute.model import ComputeModel
from podsim.hardware.gpu import get_gpu
from podsim.llm import get_model
from podsim.llm.generate import build_groups, generate, rank_of
from podsim.llm.layout import Layout
from podsim.llm.model import ModelConfig
from podsim.llm.ops import LayerCosts, PassStep
from podsim.workload.pipeline_schedules import interleaved, one_f_one_b, schedule


def test_1f1b_order() -> None:
    # 4 stages, 8 micro-batches: stage 0 warms up with 3 forwards; the last stage alternates
    assert one_f_one_b(4, 0, 8) == (
        [(True, 0, 0), (True, 1, 0), (True, 2, 0)]
        + [x for i in range(5) for x in ((True, 3 + i, 0), (False, i, 0))]
        + [(False, 5, 0), (False, 6, 0), (False, 7, 0)]
    )
    assert one_f_one_b(4, 3, 2) == [(True, 0, 0), (False, 0, 0), (True, 1, 0), (False, 1, 0)]


def test_interleaved_order() -> None:
    # Megatron's interleaved schedule, 2 ranks x 2 chunks, 4 micro-batches, rank 0:
    # warm-up 2 (p - 1) + (v - 1) p = 4 forwards, then 1F1B, then drain
    F, B = (lambda mb, c: (True, mb, c)), (lambda mb, c: (False, mb, c))
    assert interleaved(2, 0, 4, 2) == [
        F(0, 0),
        F(1, 0),
        F(0, 1),
        F(1, 1),
        F(2, 0),
        B(0, 1),
        F(3, 0),
        B(1, 1),
        F(2, 1),
        B(0, 0),
        F(3, 1),
        B(1, 0),
        B(2, 1),
        B(3, 1),
        B(2, 0),
        B(3, 0),
    ]


@pytest.mark.parametrize(
    "kind, p, m, v", [("1f1b", 4, 8, 1), ("gpipe", 3, 5, 1), ("interleaved", 4, 8, 2), ("interleaved", 2, 6, 3)]
)
def test_every_pass_once_forward_first(kind, p, m, v) -> None:
    for s in range(p):
        order = schedule(kind, p, s, m, v)
        fwd = [(mb, c) for f, mb, c in order if f]
        bwd = [(mb, c) for f, mb, c in order if not f]
        assert sorted(fwd) == sorted(bwd) == [(mb, c) for mb in range(m) for c in range(v)]
        for mb, c in fwd:
            assert order.index((True, mb, c)) < order.index((False, mb, c))


class FixedCosts(LayerCosts):
    """Every layer's forward takes 100 ns, its backward 200 ns; nothing else costs time."""

    def forward(self, moe: bool) -> list[PassStep]:
        return [PassStep("f", 100.0)]

    def backward(self, moe: bool) -> list[PassStep]:
        return [PassStep("b", 200.0)]

    def embedding_steps(self, backward: bool) -> list[PassStep]:
        return [PassStep("e", 0.0)]

    def output_steps(self, backward: bool) -> list[PassStep]:
        return [PassStep("o", 0.0)]

    def optimizer(self, params: float, params_local: float | None = None) -> PassStep:
        return PassStep("opt", 0.0)


def one_server(tmp_path, gpus: int) -> str:
    doc = {
        "name": "t",
        "gpus_per_node": gpus,
        "intra_node": {"kind": "nvswitch", "bandwidth": "1000000 GB/s", "latency": "0 ns"},
    }
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


@pytest.mark.parametrize(
    "kind, vpp, expected",
    [
        # p = 4 stages of one layer, m = 8: (m + p - 1) (F + B) = 11 x 300
        ("1f1b", 1, 3300),
        ("gpipe", 1, 3300),
        # 2 chunks of one layer per rank: per-chunk passes 100 / 200; (m v + p - 1) x 300 = 19 x 300
        ("interleaved", 2, 5700),
    ],
)
def test_pipeline_bubble(tmp_path, kind, vpp, expected) -> None:
    m = ModelConfig("tiny", 4 * vpp, 64, 4, 256, 128, 16)
    lay = Layout(4, pp=4, vpp=vpp, global_batch=8, seq_len=16, schedule=kind)
    cm = ComputeModel.for_gpu(get_gpu("a100-80gb"))
    w = generate(m, lay, cm, costs=FixedCosts(m, lay, cm))
    res = podsim.simulate(w, cluster=one_server(tmp_path, 4), backend="analytical")
    # the only other costs are activation transfers of 2 KiB at 1e6 GB/s: 1 ns each
    assert expected <= res.finish_ns <= expected + 2 * (8 * vpp + 4)


def test_groups_and_representatives() -> None:
    lay = Layout(64, tp=2, pp=4, global_batch=16)  # dp = 8
    groups = build_groups(lay)
    names = {g.name for g in groups}
    assert names == {"tp", "dp", "pp"}
    assert sum(1 for g in groups if g.name == "tp") == 32 and sum(1 for g in groups if g.name == "dp") == 8
    assert rank_of(lay, 1, 0, 3, 2) == 1 + 2 * (3 + 8 * 2)
    w = generate(get_model("gpt3-1.3b"), lay, ComputeModel.for_gpu(get_gpu("a100-80gb")))
    assert len(w.programs) == 4 and sorted(set(w.representatives.tolist())) == [0, 16, 32, 48]


def test_uneven_pipeline_split() -> None:
    # Llama 3 405B: 126 layers on 16 pipeline ranks, 7 on the first and last, 8 on the others
    m = get_model("llama3-405b")
    lay = Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192, first_stage_layers=7, last_stage_layers=7)
    lay.check(m)
    assert lay.stage_layer_counts(m) == [7] + [8] * 14 + [7]
    assert list(lay.chunk_layers(m, 0)) == list(range(7))
    assert list(lay.chunk_layers(m, 1)) == list(range(7, 15))
    assert list(lay.chunk_layers(m, 15)) == list(range(119, 126))
    from podsim.errors import InputError

    with pytest.raises(InputError, match="does not divide the 126 layers"):
        Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192).check(m)
    with pytest.raises(InputError, match="leaves 113 for the other 14 pipeline ranks; expected a multiple of 14"):
        Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192, first_stage_layers=6, last_stage_layers=7).check(m)


@pytest.mark.parametrize(
    "name,lay,backend",
    [
        (
            "gpt3-1.3b",
            dict(gpus=64, tp=4, pp=4, global_batch=32, sequence_parallel=True, recompute="selective"),
            "flow",
        ),
        ("gpt3-1.3b", dict(gpus=64, tp=4, pp=4, vpp=2, global_batch=32), "analytical"),
        (
            "mixtral-8x7b",
            dict(gpus=32, tp=2, pp=2, ep=4, global_batch=16, seq_len=2048, recompute="full", sequence_parallel=True),
            "flow",
        ),
        (  # MoE parallel folding: EP over TP x DP, the ETP group apart from TP, experts reduced over EDP
            "mixtral-8x7b",
            dict(gpus=32, tp=4, pp=2, ep=4, etp=2, global_batch=16, seq_len=2048, sequence_parallel=True),
            "flow",
        ),
    ],
)
def test_fused_ops_give_the_same_timeline(name: str, lay: dict, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # fusing compute with closed-form TP / EP collectives must not change a single ns
    run = importlib.import_module("podsim.api.train")
    m = get_model(name)
    layout = Layout(**lay)
    fused = run.simulate_training(m, layout, "h100-80gb", None, backend)
    folder = run._folder
    monkeypatch.setattr(run, "_folder", lambda *a: (None, folder(*a)[1]))  # the same estimates, no fusing
    plain = run.simulate_training(m, layout, "h100-80gb", None, backend)
    assert fused.result.finish_ns == plain.result.finish_ns
    assert fused.breakdown == pytest.approx(plain.breakdown, abs=1e-9)
    assert fused.result.ranks[0].compute_ns == plain.result.ranks[0].compute_ns
    n_fused = sum(
        len(p)
        for p in run.generate(m, layout, run.ComputeModel.for_gpu(get_gpu("h100-80gb")), fold=lambda *a: 1000).programs
    )
    n_plain = sum(len(p) for p in run.generate(m, layout, run.ComputeModel.for_gpu(get_gpu("h100-80gb"))).programs)
    assert n_fused < n_plain / 3


def test_ring_attention_exchange_runs_under_the_core() -> None:
    # CP: the K/V exchange overlaps the attention core; a pass takes max(core, exchange), not
    # their sum -- in fused ops and in separate ones alike
    m = get_model("llama3-8b")
    lay = Layout(16, tp=2, cp=2, global_batch=4, seq_len=8192)
    cm = ComputeModel.for_gpu(get_gpu("h100-80gb"))
    costs = LayerCosts(m, lay, cm)
    core = int(
        np.ceil(next(costs.kernel_ns(k) for k in costs.layer_kernels(False, False) if k.name == "flash attention fwd"))
    )

    def total(cp_ns: int) -> int:
        w = generate(m, lay, cm, fold=lambda kind, nbytes, group: cp_ns if group == "cp" else 1000)
        p = w.programs[0]
        return int(p.duration_ns[p.kind == 0].sum())

    short, long_ = total(1), total(core + 100_000)
    # forward: an exchange 0.1 ms longer than the core adds 0.1 ms a pass, not the exchange's
    # length; backward: the core (2.5x the forward's work) still hides it
    assert long_ - short == m.layers * lay.num_microbatches * 100_000
    w = generate(m, lay, cm)
    p = w.programs[0]
    names = p.names
    ex = next(i for i, n in enumerate(names) if "kv exchange all-gather" in n)
    core_i = next(i for i, n in enumerate(names) if n.endswith("flash attention fwd") and i > ex)
    assert list(p.data_deps(ex)) == list(p.data_deps(core_i))  # both start after the projections
    after = core_i + 1
    assert set(p.data_deps(after)) >= {core_i, ex}  # the next op waits for both


def test_data_parallel_group_spans_context_parallel_ranks() -> None:
    # TP 2, CP 2, DP 2 on 8 GPUs: ranks tp + 2 (cp + 2 dp); every CP rank holds a slice of the
    # sequence, so gradients are reduced (and optimizer states sharded) over the 4 ranks of
    # the same TP index: {0, 2, 4, 6} and {1, 3, 5, 7}
    lay = Layout(8, tp=2, cp=2, global_batch=4, seq_len=64)
    dp = sorted(sorted(g.ranks) for g in build_groups(lay) if g.name == "dp")
    assert dp == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_fsdp_over_context_parallel_ranks_gathers_parameters() -> None:
    # CP 8 and DP 1: the parameters are still sharded over the 8 CP ranks (FSDP over DP x CP),
    # so the step gathers them and reduce-scatters their gradients
    from podsim.llm.model import ModelConfig

    m = ModelConfig("m2", 2, 64, 4, 256, 1000, 64)
    lay = Layout(8, cp=8, zero=3, global_batch=1, seq_len=64)
    names = generate(m, lay, ComputeModel.for_gpu(get_gpu("h100-80gb"))).programs[0].names
    assert any("zero-3 param all-gather" in n for n in names)
    assert any("zero-3 grad reduce-scatter" in n for n in names)
    lay = Layout(8, cp=8, distributed_optimizer=True, global_batch=1, seq_len=64)
    names = generate(m, lay, ComputeModel.for_gpu(get_gpu("h100-80gb"))).programs[0].names
    assert any("dp grad reduce-scatter" in n for n in names)
