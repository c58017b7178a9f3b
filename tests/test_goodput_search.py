"""``podsim search --goodput`` (issue 30): each simulated row's goodput is podsim goodput's for
that layout and GPU count, from the step the search simulated, and with ``--train-tokens`` the
rows rank by their time to train with failures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from podsim.api.goodput import goodput
from podsim.api.search import search
from podsim.cli import main
from podsim.jobs.goodput import GoodputJob
from podsim.jobs.search import SearchJob
from podsim.report.goodput import goodput_row_json

#: one layout per GPU count: Llama 3 8B, TP 8, no pipeline, micro-batch 1 (two simulations)
ONE_LAYOUT = dict(
    model="llama3-8b",
    gpu="h100",
    global_batch=16,
    seq_len=4096,
    tp_values=(8,),
    pp_values=(1,),
    vpp_values=(1,),
    micro_batch_values=(1,),
    recompute_values=("none",),
    sequence_parallel_values=(True,),
    distributed_optimizer_values=(True,),
    workers=1,
)


def _layout_flags(row: dict) -> dict:
    lay = row["layout"]
    return {
        "model": "llama3-8b",
        "gpu": "h100",
        "gpus": lay["gpus"],
        "tp": lay["tp"],
        "pp": lay["pp"],
        "global-batch": lay["global_batch"],
        "micro-batch": lay["micro_batch"],
        "seq-len": lay["seq_len"],
        "recompute": lay["recompute"],
        "sequence-parallel": lay["sequence_parallel"],
        "distributed-optimizer": lay["distributed_optimizer"],
    }


def test_a_rows_goodput_is_podsim_goodputs_at_its_own_gpu_count() -> None:
    res = search(SearchJob(gpus=(8, 16), goodput=True, train_tokens=2e12, samples=200, seed=3, **ONE_LAYOUT))
    assert res.result.ranked_by_goodput  # --train-tokens with --goodput: the time objective, with failures
    assert {r["layout"]["gpus"] for r in res.rows} == {8, 16}
    for row in res.rows:
        g = row["goodput"]
        job = GoodputJob.from_values({**_layout_flags(row), "train-tokens": 2e12, "samples": 200, "seed": 3})
        ref = goodput(job)  # simulated again here; the search's row reused its own step
        assert g == goodput_row_json(ref)  # every field, the Monte Carlo's percentiles included
        # hand-derived: the shipped GPU rate, 1.683e-5 failures per GPU-hour, x the row's GPUs x the run's hours
        hours = g["expected_time_to_train_h"]
        assert g["interruptions_by_kind"]["gpu"] == pytest.approx(1.683e-5 * row["layout"]["gpus"] * hours, rel=1e-3)
    assert "reliability" not in res.rows[0]["goodput"]  # once, at the top of the document
    doc = res.to_dict()
    assert doc["goodput"]["reliability"]["kinds"]["gpu"]["rate_per_component_h"] == 1.683e-5
    assert doc["ranked_by"].startswith("expected time to train with failures")


def _segment_s(lam: float, work_s: float, c: float, r: float) -> float:
    """Daly's expected wall time of ``work_s`` of training and a checkpoint (docs/goodput.md)."""
    return math.exp(lam * r) * math.expm1(lam * (work_s + c)) / lam


def test_ranking_by_time_to_train_puts_fewer_gpus_first_when_failures_outweigh_the_speed(tmp_path: Path) -> None:
    # only GPUs fail, 0.375 an hour each, no part swapped; a failure costs the 600 s detection
    # (no warm-up, a near-instant restore) and the work since a checkpoint every 600 s.  By hand
    # (C ~ 0): 8 GPUs fail every 1,200 s, goodput = 0.5 e^-0.5 / (e^0.5 - 1) = 0.467; 16 GPUs
    # every 600 s, goodput = e^-1 / (e - 1) = 0.214 -- less than half, so the 16-GPU layout,
    # about twice as fast a step, trains slower with failures.
    rates = tmp_path / "rates.yaml"
    rates.write_text(
        "kinds:\n  gpu: {rate: 0.375, replace: false}\n  hbm: {rate: 0}\n  host: {rate: 0}\n"
        "  nic: {rate: 0}\n  switch: {rate: 0}\n  software: {rate: 0}\n"
    )
    tokens = 2e10
    job = SearchJob(
        gpus=(8, 16),
        goodput=True,
        train_tokens=tokens,
        reliability=str(rates),
        checkpoint_interval=600.0,
        storage_bandwidth=1e6,
        detect=600.0,
        warmup=0.0,
        samples=50,
        **ONE_LAYOUT,
    )
    rows = search(job).rows
    fast, slow = sorted(rows, key=lambda r: r["iteration_time_s"])
    assert fast["layout"]["gpus"] == 16 and fast["time_to_train_h"] < slow["time_to_train_h"]
    expected = {}
    for r in rows:
        n = r["layout"]["gpus"]
        lam = 0.375 * n / 3600
        c = 112e9 * 14 / 8 / 1e15  # llama3-8b's ~8.0e9 parameters x 14 B at 10^15 B/s: ~0
        step = r["iteration_time_s"]
        work = math.ceil(tokens / (16 * 4096)) * step
        full = int(work // 600)
        wall = full * _segment_s(lam, 600, c, 600 + c) + _segment_s(lam, work - full * 600, c, 600 + c)
        expected[n] = wall / 3600
        assert r["goodput"]["expected_time_to_train_h"] == pytest.approx(wall / 3600, rel=1e-3)
    assert expected[8] < expected[16]  # the arithmetic says: fewer GPUs first
    assert [r["layout"]["gpus"] for r in rows] == [8, 16]
    # the default objective then is time; asking for tokens/s ranks by speed again
    again = search(SearchJob(**{**job.__dict__, "objective": "tokens"}))
    assert [r["layout"]["gpus"] for r in again.rows] == [16, 8] and not again.result.ranked_by_goodput


def test_cli_search_goodput_columns_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    argv = ["search", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--global-batch", "16"]
    argv += ["--seq-len", "4096", "--tp-values", "8", "--pp-values", "1", "--vpp-values", "1"]
    argv += ["--micro-batch-values", "1", "--recompute-values", "none", "--sequence-parallel-values", "on"]
    argv += ["--distributed-optimizer-values", "on", "--workers", "1", "--goodput", "--days", "10"]
    argv += ["--samples", "100", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "goodput" in text and "a run of 10 days of wall clock" in text
    assert "ranked by" not in text  # --days alone: the objective's order (tokens/s)
    doc = json.loads(out.read_text())
    g = doc["best"][0]["goodput"]
    for key in ("interruptions_expected", "interruptions_by_kind", "goodput", "checkpoint_interval_s"):
        assert key in g
    assert set(g["time_to_train_h"]) == {"p10", "p50", "p90"} and g["days"] == 10
    assert doc["goodput"]["options"]["days"] == 10


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--checkpoint-interval", "600"], "--checkpoint-interval: only used with --goodput"),
        (["--reliability", "x.yaml"], "--reliability: only used with --goodput"),
        (["--days", "3"], "--days: only used with --goodput"),
        (["--goodput", "--days", "3", "--train-tokens", "1e9"], "give one of --days and --train-tokens, not both"),
        (["--goodput", "--workload", "poisson:1,prompt=100,output=10"], "--goodput is for a training search"),
    ],
)
def test_goodput_flags_are_refused_where_nothing_reads_them(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--tp-values", "8"]
    argv += [] if "--workload" in extra else ["--global-batch", "16"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
