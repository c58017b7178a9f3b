"""The search's screen: the closed-form estimate (podsim.llm.estimate) against the simulation it
stands in for, and the search's best against running every layout alone (issue #15)."""

from __future__ import annotations

from podsim.api.train import simulate_training
from podsim.hardware.gpu import get_gpu
from podsim.llm.estimate import LayoutEstimator
from podsim.llm.model import get_model
from podsim.llm.training import default_cluster
from podsim.sweep.search import search
from podsim.sweep.space import Space, enumerate_layouts


def test_the_estimate_is_within_a_few_percent_and_the_screen_keeps_the_best() -> None:
    model, gpu = get_model("llama3-8b"), get_gpu("h100")
    space = Space(
        gpus=(16,),
        global_batch=32,
        seq_len=2048,
        tp=(1, 2, 8),
        pp=(1, 2, 4),
        vpp=(1, 2),
        micro_batch=(1, 2),
        recompute=("none", "full"),
        sequence_parallel=(True,),
        distributed_optimizer=(True, False),
        overlap_grad_reduce=(True, False),
    )
    e = enumerate_layouts(model, space, gpu.memory_gib)
    assert len(e.layouts) > 60
    est = LayoutEstimator(model, gpu, default_cluster(gpu, None, None, None))
    alone = []
    for lay in e.layouts:
        sim = simulate_training(model, lay, gpu=gpu, record_timeline=False).result.finish_ns
        assert abs(est.iteration_ns(lay) / sim - 1) < 0.05, lay
        alone.append(lay.global_batch * lay.seq_len / (sim / 1e9))
    res = search(model, "--model llama3-8b", space, "h100", gpu.memory_gib, workers=1, simulate_top=8)
    assert res.simulated == 8 and res.evaluated == len(e.layouts)
    assert [r["method"] for r in res.rows[:8]] == ["simulated"] * 8
    assert res.rows[0]["tokens_per_s"] == round(max(alone), 3)  # the best of every layout run alone


def test_collective_times_do_not_depend_on_what_was_timed_before() -> None:
    """The ring schedules and routes kept per communicator give the times a fresh planner gives."""
    from podsim.collectives.nccl.planner import CollectivePlanner
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.workload import CollectiveKind

    spec = load_cluster("dgx-h100")
    fabric = build_fabric(spec, 64)
    ranks = tuple(range(0, 64, 8))
    warm = CollectivePlanner(fabric, spec.nccl)
    for size in (1 << 20, 3 << 22, 1 << 28):
        warm.plan(ranks, CollectiveKind.ALL_REDUCE, size)
    for kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER):
        for size in (5 << 20, 1 << 30):
            fresh = CollectivePlanner(build_fabric(spec, 64), spec.nccl)
            assert warm.plan(ranks, kind, size)[1] == fresh.plan(ranks, kind, size)[1]
