"""MoE parallel folding (Megatron-Core's): the experts' ETP x EP x EDP ranks folded over the
dense layers' TP x CP x DP ranks, the all-to-all dispatcher's kernels and collectives, the
experts' gradients over the expert data-parallel group.

Expectations are derived by hand from Megatron-Core's rank generator (order tp-ep-dp-pp for
the experts, ETP fastest) and from the layer shapes, not from podsim's output."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from podsim.api.train import simulate_training
from podsim.compute.model import ComputeModel
from podsim.errors import InputError
from podsim.hardware.gpu import gpu_specs
from podsim.llm.generate import build_groups, generate
from podsim.llm.kernels import moe_kernels
from podsim.llm.layout import Layout
from podsim.llm.memory import stage_memory
from podsim.llm.model import get_model
from podsim.llm.training import group_ranks
from podsim.workload import CollectiveKind, OpKind


def _groups(layout: Layout, name: str) -> list[tuple[int, ...]]:
    return sorted(g.ranks for g in build_groups(layout) if g.name == name)


def test_ep_folded_over_tp_and_dp_as_megatron_numbers_it() -> None:
    # TP 2, DP 8 on 16 GPUs; experts ETP 1 x EP 4 x EDP 4: expert rank = ep + 4 edp, so the EP
    # groups are runs of 4 consecutive ranks (spanning both TP ranks) and EDP strides by 4
    lay = Layout(16, tp=2, ep=4, etp=1, sequence_parallel=True, global_batch=8)
    assert _groups(lay, "ep") == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
    assert _groups(lay, "edp") == [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]
    assert _groups(lay, "etp") == []  # ETP 1
    assert lay.edp == 4
    assert group_ranks(lay, "ep") == (0, 1, 2, 3) and group_ranks(lay, "edp") == (0, 4, 8, 12)


def test_etp_equal_to_tp_keeps_expert_parallelism_over_data_parallel_ranks() -> None:
    # ETP = TP = 2 (the default): expert rank = etp + 2 (ep + 4 edp) -- EP strides by TP over
    # the DP ranks, as expert parallelism did before folding
    lay = Layout(16, tp=2, ep=4, sequence_parallel=True, global_batch=8)
    assert _groups(lay, "ep")[:2] == [(0, 2, 4, 6), (1, 3, 5, 7)]
    assert _groups(lay, "etp") == []  # the ETP group is the TP group
    assert lay.edp == 2 and _groups(lay, "edp")[0] == (0, 8)


def test_etp_group_apart_from_tp() -> None:
    # TP 4, ETP 2, EP 2 on 8 GPUs (DP 2): expert rank = etp + 2 (ep + 2 edp)
    lay = Layout(8, tp=4, ep=2, etp=2, sequence_parallel=True, global_batch=2)
    assert _groups(lay, "etp") == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert _groups(lay, "ep") == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert _groups(lay, "edp") == [(0, 4), (1, 5), (2, 6), (3, 7)]


@pytest.mark.parametrize(
    "model,lay",
    [
        # DeepSeek-V3 on 512 H100 (TP 2, PP 8, EP 64): EP 64 > DP 32, folded over TP x DP
        (
            "deepseek-v3",
            dict(gpus=512, tp=2, pp=8, ep=64, etp=1, global_batch=512, pipeline_layers=(7, 8, 8, 8, 8, 8, 8, 6)),
        ),
        # Qwen3-235B with TP 4, CP 8, EP 8 on 256 GPUs: EP over CP and DP ranks
        ("qwen3-235b-a22b", dict(gpus=256, tp=4, cp=8, ep=8, global_batch=16, seq_len=32768)),
    ],
)
def test_published_moe_layouts_are_expressible(model: str, lay: dict) -> None:
    m = get_model(model)
    layout = Layout(sequence_parallel=True, distributed_optimizer=True, **lay)
    layout.check(m)
    groups = build_groups(layout)
    for name in ("tp", "cp", "dp", "ep", "etp", "edp"):
        seen = Counter(r for g in groups if g.name == name for r in g.ranks)
        if seen:  # every rank in exactly one group of each name
            assert set(seen.values()) == {1} and len(seen) == layout.gpus, name
    assert layout.tp * layout.cp * layout.dp == layout.expert_tp * layout.ep * layout.edp


def test_expert_work_and_traffic_per_rank() -> None:
    # Mixtral 8x7B (8 experts of 14336, top-2, SwiGLU), TP 2 with SP, 1 x 4096 tokens:
    # each rank routes its 2048-token shard; the dispatch all-to-all carries its 2048 x 2 routed
    # copies of 4096 bf16 values; after the ETP all-gather the local experts see ETP x that
    m = get_model("mixtral-8x7b")
    h, f, k = 4096, 14336, 2
    rows = 4096 // 2 * k  # routed copies per rank
    flops = {}
    for etp, ep in ((1, 8), (2, 4)):
        lay = Layout(16, tp=2, ep=ep, etp=etp, sequence_parallel=True, global_batch=8, seq_len=4096)
        ks = moe_kernels(m, lay, False)
        by = {x.name: x for x in ks}
        assert by["ep all-to-all dispatch"].nbytes == rows * h * 2
        assert by["etp all-gather"].nbytes == rows * etp * h * 2
        assert by["router fprop"].m == 2048  # the rank's own sequence shard
        local = 8 // ep
        assert by["expert fc1 fprop"].count == local and by["expert fc1 fprop"].n == 2 * f / etp
        flops[etp] = sum(x.flops for x in ks if x.name.startswith("expert fc"))
    # a rank's expert FLOPs do not depend on how ETP x EP splits them: 2 rows (3 h f) per copy
    assert flops[1] == pytest.approx(2 * rows * 3 * h * f)
    assert flops[2] == pytest.approx(flops[1])


def test_expert_gradients_reduced_over_the_expert_data_parallel_group() -> None:
    # Mixtral on 16 GPUs, TP 2, DP 8, EP 4, ETP 1 (EDP 4), 1 stage: the routed experts' fp32
    # gradients (8 x 3 x 4096 x 14336 x 32 layers / 4 per GPU) are reduced over EDP, the rest
    # over DP
    m = get_model("mixtral-8x7b")
    lay = Layout(16, tp=2, ep=4, etp=1, sequence_parallel=True, global_batch=8, seq_len=1024)
    w = generate(m, lay, ComputeModel.for_gpu(gpu_specs()["h100-80gb"], "bf16"))
    prog = w.programs[0]
    grads = [
        (prog.group_keys[prog.group[i]], int(prog.size_bytes[i]), int(prog.collective[i]))
        for i in range(len(prog))
        if prog.kind[i] == int(OpKind.COLLECTIVE) and "dp grad" in prog.names[i]
    ]
    expert = sum(b for g, b, _ in grads if g == "edp")
    dense = sum(b for g, b, _ in grads if g == "dp")
    experts_per_gpu = 8 * 3 * 4096 * 14336 * 32 / 4
    assert expert == pytest.approx(experts_per_gpu * 4, rel=1e-6)
    total = m.total_params()
    per_gpu_dense = (total - 8 * 3 * 4096 * 14336 * 32) / 2  # the rest, TP-sharded
    assert dense == pytest.approx(per_gpu_dense * 4, rel=1e-3)
    assert {c for _, _, c in grads} == {int(CollectiveKind.ALL_REDUCE)}


def test_distributed_optimizer_shards_experts_over_edp() -> None:
    # Qwen3-30B-A3B on 16 GPUs, EP 8, ETP 1 (EDP 2): the experts' 12 B/param optimizer states
    # are split over 2 ranks, the dense parameters' over DP 16
    m = get_model("qwen3-30b-a3b")
    lay = Layout(16, ep=8, global_batch=16, seq_len=4096, distributed_optimizer=True)
    mem = stage_memory(m, lay, 0)
    experts = 128 * 3 * 2048 * 768 * 48 / 8
    dense = m.total_params() - 128 * 3 * 2048 * 768 * 48
    assert mem.optimizer == pytest.approx(experts * 12 / 2 + dense * 12 / 16, rel=1e-6)
    assert mem.weights == pytest.approx((experts + dense) * 2, rel=1e-6)


@pytest.mark.parametrize(
    "lay,needle",
    [
        (dict(gpus=16, tp=2, ep=4, etp=8, sequence_parallel=True), "ETP x EP = 8 x 4 = 32 must divide the 16"),
        (dict(gpus=16, tp=2, ep=16, etp=2, sequence_parallel=True), "EP 16 does not divide the 8 experts"),
        (dict(gpus=16, tp=2, ep=4), "need --sequence-parallel"),
        (dict(gpus=16, ep=4, etp=0), "--etp must be a positive integer"),
    ],
)
def test_folding_errors_name_the_rule(lay: dict, needle: str) -> None:
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        Layout(global_batch=16, **lay).check(get_model("mixtral-8x7b"))


def test_etp_on_a_dense_model_is_an_error() -> None:
    with pytest.raises(InputError, match="--etp 2 needs a mixture-of-experts model"):
        Layout(8, tp=1, etp=2, global_batch=8).check(get_model("llama3-8b"))


def test_cli_echoes_etp_and_edp(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    cmd = [
        sys.executable,
        "-m",
        "podsim",
        "llm",
        "--model",
        "mixtral-8x7b",
        "--gpu",
        "h100",
        "--gpus",
        "16",
        "--tp",
        "2",
        "--ep",
        "8",
        "--etp",
        "1",
        "--sequence-parallel",
        "--distributed-optimizer",
        "--global-batch",
        "8",
        "--seq-len",
        "1024",
        "--json",
        str(out),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lay = json.loads(out.read_text())["layout"]
    assert (lay["ep"], lay["etp"], lay["edp"]) == (8, 1, 2)
    assert "EP 8 x ETP 1 x EDP 2" in p.stdout


def test_folded_layout_simulates() -> None:
    # end to end on the analytical backend: finishes, and its memory fits an H100
    m = get_model("mixtral-8x7b")
    lay = Layout(32, tp=2, pp=2, ep=8, etp=1, sequence_parallel=True, global_batch=16, seq_len=2048)
    res = simulate_training(m, lay, "h100-80gb", record_timeline=False)
    assert res.iteration_time_s > 0
    assert res.memory_peak_gib < 80


def test_zero3_gathers_the_experts_over_the_ranks_that_hold_them() -> None:
    # Qwen3-30B-A3B under ZeRO-3 (FSDP) on 16 GPUs, EP 4 (DP 16, EDP 4): a layer's 32 local
    # experts (128 / 4, each 3 x 2048 x 768) are sharded over the 4 ranks that hold the same
    # experts and gathered there, the rest of the layer over all 16
    m = get_model("qwen3-30b-a3b")
    lay = Layout(16, ep=4, zero=3, global_batch=16, seq_len=1024)
    w = generate(m, lay, ComputeModel.for_gpu(gpu_specs()["h100-80gb"], "bf16"))
    prog = w.programs[0]
    ops = [
        (prog.names[i], prog.group_keys[prog.group[i]], int(prog.size_bytes[i]), int(prog.collective[i]))
        for i in range(len(prog))
        if prog.kind[i] == int(OpKind.COLLECTIVE) and "zero-3" in prog.names[i]
    ]
    layer0 = [o for o in ops if " L0 " in o[0] and o[0].startswith("F mb0")]
    experts_bytes = 32 * 3 * 2048 * 768 * 2  # bf16
    # attention (q 2048 x 4096, k and v 2048 x 512 each, o 4096 x 2048), router 2048 x 128,
    # two RMSNorms of 2048 (podsim leaves out Qwen3's q/k norms, 256 parameters of 19 million)
    dense_bytes = (2 * 2048 * 4096 + 2 * 2048 * 512 + 2048 * 128 + 2 * 2048) * 2
    gather = int(CollectiveKind.ALL_GATHER)
    assert sorted((g, b, c) for _, g, b, c in layer0) == sorted(
        [("dp", dense_bytes, gather), ("edp", experts_bytes, gather)]
    )
    scatters = {(g, b) for n, g, b, c in ops if " L0 " in n and c == int(CollectiveKind.REDUCE_SCATTER)}
    assert scatters == {("dp", dense_bytes), ("edp", experts_bytes)}
    # EP 16 leaves one rank per expert set (EDP 1): its experts are never gathered
    solo = generate(
        m,
        Layout(16, ep=16, zero=3, global_batch=16, seq_len=1024),
        ComputeModel.for_gpu(gpu_specs()["h100-80gb"], "bf16"),
    )
    p16 = solo.programs[0]
    groups = {p16.group_keys[p16.group[i]] for i in range(len(p16)) if "zero-3" in p16.names[i]}
    assert groups == {"dp"}
