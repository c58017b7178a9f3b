"""``podsim sweep`` with goodput (issue 30): ``run: goodput`` points, ``run: llm`` points given a
run's length, and the shipped ``--example goodput``."""

from __future__ import annotations

import pytest

from podsim.api.goodput import goodput
from podsim.api.sweep import example_spec, sweep
from podsim.jobs.goodput import GoodputJob
from podsim.sweep.runs import GOODPUT_METRICS, evaluate

POINT = {
    "model": "llama3-8b",
    "gpu": "h100",
    "gpus": 64,
    "tp": 8,
    "global-batch": 64,
    "seq-len": 4096,
    "sequence-parallel": True,
    "train-tokens": 1e11,
    "samples": 100,
}
BASELINE = {"name": "baseline"}


def test_a_goodput_point_is_podsim_goodputs() -> None:
    m = evaluate(("goodput", POINT, BASELINE, None))
    assert "error" not in m
    ref = goodput(GoodputJob.from_values(POINT))
    assert m["goodput"] == pytest.approx(ref.estimate.goodput, abs=1e-6)
    assert m["time_to_train_p50_h"] == pytest.approx(ref.time_to_train_h["p50"], abs=1e-4)
    assert m["step_time_s"] == pytest.approx(ref.step_time_s, rel=1e-9)
    # by hand: interruptions = the run's hours / the job's mean time between failures
    assert m["interruptions_expected"] == pytest.approx(m["expected_time_to_train_h"] / m["mtbf_h"], rel=2e-3)
    assert m["time_to_train_p10_h"] <= m["time_to_train_p50_h"] <= m["time_to_train_p90_h"]


def test_an_llm_point_with_a_length_has_the_same_goodput_metrics() -> None:
    llm = evaluate(("llm", POINT, BASELINE, None))
    good = evaluate(("goodput", POINT, BASELINE, None))
    assert llm["iteration_time_s"] == pytest.approx(good["step_time_s"], rel=1e-9)
    for k in GOODPUT_METRICS:
        assert llm[k] == good[k], k
    plain = {k: v for k, v in POINT.items() if k not in ("train-tokens", "samples")}
    assert not set(GOODPUT_METRICS) & set(evaluate(("llm", plain, BASELINE, None)))
    refused = evaluate(("llm", {**plain, "checkpoint-interval": 600.0}, BASELINE, None))
    assert "checkpoint-interval" in refused["error"] and "days or train-tokens" in refused["error"]


def test_the_goodput_example() -> None:
    res = sweep(example_spec("goodput"), workers=1)
    assert res.failed == 0 and len(res.rows) == 12
    by = {(r["gpus"], r["storage_bandwidth"], r["what_if"]): r for r in res.rows}
    for wi in ("baseline", "2x peak"):
        for bw in (20.0, 200.0):
            # more GPUs fail more often: goodput falls with the job's size
            assert by[(1024, bw, wi)]["goodput"] > by[(4096, bw, wi)]["goodput"] > by[(16384, bw, wi)]["goodput"]
        for n in (1024, 4096, 16384):
            # faster storage: shorter checkpoints and restores, a higher goodput
            assert by[(n, 200.0, wi)]["goodput"] > by[(n, 20.0, wi)]["goodput"]
    for n in (1024, 16384):
        # twice the peak: a faster step and a shorter time to train under the same failures
        base, fast = by[(n, 200.0, "baseline")], by[(n, 200.0, "2x peak")]
        assert fast["step_time_s"] < base["step_time_s"]
        assert fast["time_to_train_p50_h"] < base["time_to_train_p50_h"]
        assert fast["mtbf_h"] == base["mtbf_h"]
