"""Measured vLLM serving runs replayed request by request (conformance).

The runs (``$PODSIM_REFERENCE_DATA/calibration/serving``): vLLM 0.19, 300 ShareGPT requests at
10 req/s Poisson each, one row per request with its measured TTFT and end-to-end latency --
Llama-3.1-8B on an RTX 4090 and on an RTX PRO 6000, Qwen3-32B at TP 2 and Qwen3-30B-A3B on two
data-parallel ranks with expert parallelism, both on RTX PRO 6000s.

``vllm`` is calibrated (``podsim calibrate inference RUN.measured.csv``) to one run, the RTX PRO
6000 Llama-3.1-8B one: one GPU, one replica, a dense model at TP 1 and a KV cache that never fills,
so its latencies are the engine's step times and the queue they build -- what a serving stack's
host time per step and GEMM efficiency describe.  Each other run adds something a stack does not:
a 24 GB GPU whose KV cache bounds the batch (RTX 4090), a TP all-reduce over PCIe (Qwen3-32B),
attention data-parallel with the experts split over the ranks (Qwen3-30B-A3B).

What is asserted, and why:

* the per-request files give the runs' own summary (mean TTFT and E2E, median TPOT, computed by
  the source's validation script): the measured targets, and TPOT's definition, are the source's;
* the calibrated run within 10% on its three targets (the criterion of a calibration), and
  ``podsim serve-llm --stack FITTED.yaml`` predicting exactly what the calibration's replay did;
* every other run replays all its requests in the same regime: each target within a factor of 2
  (a replica that saturates where vLLM's did not, or the reverse, is off by far more: queueing
  turns a throughput shortfall into unbounded waits);
* within 10% on the other runs, the target for replayed runs: not met today, so a strict xfail
  that records each run's reason and fails once the run is met (then drop the mark).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from podsim.api.calibrate import RUN_METRICS, read_serving_run
from podsim.cli import main

pytestmark = pytest.mark.conformance

REPO = Path(__file__).resolve().parents[1]
FIT = "llmservingsim_RTXPRO6000_Llama-3.1-8B"
#: how each run was served (vllm_anchor_runs.csv: tp, dp_replicas, max_num_seqs,
#: max_num_batched_tokens; the RTX 4090's notes: num_gpu_blocks=2588) as serve-llm's flags; the
#: longest request is 5,445 tokens, and vLLM's max_model_len was 32768 or the model's longer own
ENGINE = {
    FIT: ["--model", "llama3-8b", "--gpu", "rtx-pro-6000", "--max-num-seqs", "128"],
    "llmservingsim_RTX4090_Llama-3.1-8B": [
        "--model",
        "llama3-8b",
        "--gpu",
        "rtx-4090",
        "--max-num-seqs",
        "256",
        "--kv-blocks",
        "2588",
    ],
    "llmservingsim_RTXPRO6000_Qwen3-32B": [
        "--model",
        "qwen3-32b",
        "--gpu",
        "rtx-pro-6000",
        "--tp",
        "2",
        "--max-num-seqs",
        "128",
    ],
    # vLLM: 2 data-parallel ranks, the experts split over both (EP 2); serve-llm's EP lives in a
    # replica's TP group, so: 2 replicas, each holding every expert
    "llmservingsim_RTXPRO6000_Qwen3-30B-A3B-Instruct-2507": [
        "--model",
        "qwen3-30b-a3b",
        "--gpu",
        "rtx-pro-6000",
        "--replicas",
        "2",
        "--max-num-seqs",
        "128",
    ],
}
COMMON = ["--max-batched-tokens", "2048", "--max-context", "32768"]
#: serve-llm's defaults the runs share (its max-num-seqs default is vLLM's, by GPU: always given)
DEFAULTS = {"--tp": "1", "--replicas": "1"}
#: the summary's column of each target (ms)
SUMMARY = {"ttft_mean_ms": "ttft_mean_ms", "e2e_mean_ms": "e2e_mean_ms", "tpot_median_ms": "tpot_p50_ms"}
#: serve-llm's JSON field of each target (s)
SERVED = {"ttft_mean_ms": "ttft_mean_s", "e2e_mean_ms": "e2e_mean_s", "tpot_median_ms": "tpot_p50_s"}
#: why a run is not within 10% yet (podsim's errors with the stack fitted to FIT, as measured when
#: this test was written: TTFT / E2E / TPOT)
NOT_YET = {
    "llmservingsim_RTX4090_Llama-3.1-8B": "+43% / +41% / +36%: podsim is 23% slower per output token than vLLM on "
    "the RTX 4090 already with no host time (its step times are derived: the A100 fit on the 4090's datasheet "
    "peaks; a KV-bound run where podsim preempts ~230 times), and the fitted host time adds to that",
    "llmservingsim_RTXPRO6000_Qwen3-32B": "-38% / -31% / -27%: podsim is too fast at TP 2 over PCIe (about 30 us "
    "per decode-sized all-reduce, 11% of a decode step): the all-reduce latency of a PCIe pair is not a stack "
    "parameter",
    "llmservingsim_RTXPRO6000_Qwen3-30B-A3B-Instruct-2507": "+31% / +17% / +16%: within 8% with no host time; the "
    "fitted host time adds to each step, and podsim cannot run vLLM's layout (DP 2 attention, experts over EP 2)",
}


def _data() -> Path:
    """The serving calibration folder; skip (fail under ``PODSIM_REQUIRE_REFERENCE=1``) without it."""
    root = Path(os.environ.get("PODSIM_REFERENCE_DATA", REPO.parent / "shared" / "data"))
    folder = root / "calibration" / "serving"
    if not (folder / "vllm_anchor_runs.csv").is_file():
        if os.environ.get("PODSIM_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"reference data required but {folder / 'vllm_anchor_runs.csv'} is missing")
        pytest.skip(f"the vLLM anchor runs are not at {folder} (set PODSIM_REFERENCE_DATA to shared/data)")
    return folder


def _measured(folder: Path, run: str) -> Path:
    return folder / "workloads" / f"{run}.measured.csv"


@pytest.fixture(scope="module")
def summary() -> dict[str, dict[str, str]]:
    with open(_data() / "vllm_anchor_runs.csv", newline="") as f:
        return {r["experiment_id"]: r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """``podsim calibrate inference`` on FIT: the fit's JSON and the stack file it wrote."""
    folder = _data()
    tmp = tmp_path_factory.mktemp("anchors")
    out, js = tmp / "vllm-fitted.yaml", tmp / "fit.json"
    argv = ["calibrate", "inference", str(_measured(folder, FIT)), "--base", "vllm", "--out", str(out)]
    assert main([*argv, "--json", str(js), *ENGINE[FIT], *COMMON]) == 0
    return json.loads(js.read_text()), out


@pytest.fixture(scope="module")
def replays(fitted: tuple[dict, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every run replayed by ``podsim serve-llm --workload RUN.measured.csv --stack FITTED.yaml``."""
    folder, out = _data(), fitted[1]
    tmp = tmp_path_factory.mktemp("replays")
    docs = {}
    for run, flags in ENGINE.items():
        js = tmp / f"{run}.json"
        argv = ["serve-llm", "--workload", str(_measured(folder, run)), "--stack", str(out), "--json", str(js)]
        assert main([*argv, *flags, *COMMON]) == 0, run
        docs[run] = json.loads(js.read_text())
    return docs


def _errors(doc: dict, run: str) -> dict[str, float]:
    """Each target's relative error of serve-llm's replay (predicted / measured - 1)."""
    measured = dict(zip(RUN_METRICS, read_serving_run(_measured(_data(), run)).targets))
    return {m: 1e3 * doc[SERVED[m]] / measured[m] - 1 for m in RUN_METRICS}


def test_the_replays_are_served_as_the_runs_were(summary):
    for run, flags in ENGINE.items():
        given = dict(zip(flags[::2], flags[1::2]))
        r = summary[run]
        assert given.get("--tp", DEFAULTS["--tp"]) == r["tp"] and r["pp"] == "1", run
        assert given.get("--replicas", DEFAULTS["--replicas"]) == r["dp_replicas"], run
        assert given["--max-num-seqs"] == r["max_num_seqs"], run
        assert COMMON[1] == r["max_num_batched_tokens"], run
        assert ("--kv-blocks" in given) == ("num_gpu_blocks=" in r["notes"]), run


def test_the_request_files_give_the_runs_own_summary(summary):
    folder = _data()
    for run in ENGINE:
        got = read_serving_run(_measured(folder, run))
        assert len(got.ttft_ms) == int(summary[run]["num_requests"]) == 300 and all(got.ok)
        for metric, value in zip(RUN_METRICS, got.targets):
            assert value == pytest.approx(float(summary[run][SUMMARY[metric]]), rel=1e-3), (run, metric)


def test_the_calibrated_run_is_within_10_percent(fitted, replays):
    fit, out = fitted
    assert fit["refusal"] is None and set(fit["fitted"]) == {"host_overhead_ms", "engine_gemm_efficiency"}
    assert [(r["row_id"], r["metric"]) for r in fit["runs"]] == [(FIT, m) for m in RUN_METRICS]
    for r in fit["runs"]:
        assert abs(r["error_after"]) <= 0.10, r
    # serve-llm with the written stack is the calibration's own replay
    after = {r["metric"]: r["error_after"] for r in fit["runs"]}
    for metric, err in _errors(replays[FIT], FIT).items():
        assert err == pytest.approx(after[metric], abs=1e-4), metric
    assert replays[FIT]["stack"]["name"] == out.stem


@pytest.mark.parametrize("run", sorted(NOT_YET))
def test_the_other_runs_replay_in_the_same_regime(replays, run):
    assert len(replays[run]["requests"]) == 300
    for metric, err in _errors(replays[run], run).items():
        assert 0.5 < 1 + err < 2.0, f"{run} {metric}: {100 * err:+.1f}%"


@pytest.mark.parametrize(
    "run", [pytest.param(run, marks=pytest.mark.xfail(strict=True, reason=why)) for run, why in sorted(NOT_YET.items())]
)
def test_the_other_runs_within_10_percent(replays, run):
    errors = _errors(replays[run], run)
    assert all(abs(e) <= 0.10 for e in errors.values()), {m: f"{100 * e:+.1f}%" for m, e in errors.items()}
