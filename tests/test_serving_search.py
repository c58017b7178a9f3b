"""Search and sweeps over LLM serving (issue #16, point 3): the ways to serve a model on N GPUs,
each at its capacity under the SLOs, with cost per token."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.llm.model import get_model
from podsim.sweep.serving_search import RequestMix, ServingSpace, enumerate_serving, parse_pd, search_serving

GEN = "poisson:10,prompt=uniform:500-1500,output=64"


def test_the_space_counts_replicas_splits_and_budgets_by_hand() -> None:
    # 4 GPUs: TP 1 -> 4 replicas (mixed + splits 1:3, 2:2, 3:1), TP 2 -> 2 (mixed + 1:1), TP 4 -> 1
    # (mixed only); TP 3 does not divide 4.  vllm tries 2 budgets, orca has none: 3 schedules.
    space = ServingSpace(gpus=(4,), tp=(1, 2, 3, 4), scheduler=("vllm", "orca"), chunk=(512, 2048), pd=("off", "all"))
    points, rejected = enumerate_serving(get_model("llama3-8b"), "h100", space)
    assert len(points) == (4 + 2 + 1) * 3
    assert rejected == {"TP x PP does not divide the GPUs": 1}
    tp1 = [p for p in points if p.tp == 1 and p.scheduler == "orca"]
    assert [p.pd for p in tp1] == [None, (1, 3), (2, 2), (3, 1)] and all(p.chunk is None for p in tp1)
    # an explicit P:D only where it makes the replicas
    points, _ = enumerate_serving(
        get_model("llama3-8b"), "h100", ServingSpace(gpus=(4,), tp=(1, 2), scheduler=("orca",), pd=("1:1",))
    )
    assert [(p.tp, p.pd) for p in points] == [(2, (1, 1))]


def test_a_model_whose_weights_fill_the_gpu_is_rejected() -> None:
    # Llama 3 70B: 141 GB of bf16 weights; one H100 (80 GiB = 85.5 GB, 90% of it for vLLM) cannot
    # hold them, two hold 70.6 GB each and leave ~5 GB each for activations and the KV cache
    points, rejected = enumerate_serving(
        get_model("llama3-70b"), "h100", ServingSpace(gpus=(2,), tp=(1, 2), scheduler=("orca",))
    )
    assert [p.tp for p in points] == [2]
    assert rejected == {"the weights leave no room for a KV cache": 1}
    with pytest.raises(InputError, match="no way to serve"):
        enumerate_serving(get_model("llama3-70b"), "h100", ServingSpace(gpus=(1,), tp=(1,), scheduler=("orca",)))


def test_parse_pd_refuses_bad_splits() -> None:
    assert parse_pd("off, 1:3,ALL") == ["off", "1:3", "all"]
    for bad in ("1:0", "2", "x", ""):
        with pytest.raises(InputError, match="pd-values"):
            parse_pd(bad)


def test_rows_rank_by_capacity_per_gpu_and_cost_follows_the_formula() -> None:
    space = ServingSpace(gpus=(2,), tp=(1, 2), scheduler=("sarathi",), chunk=(512,))
    w = RequestMix(GEN, 200, slo_ttft_s=0.5, slo_tpot_s=0.02)
    res = search_serving(
        get_model("llama3-8b"), "--model llama3-8b", "h100", space, w, "capacity", gpu_hour_usd=2.0, workers=1
    )
    assert res.evaluated == 2 and all(r["error"] is None for r in res.rows)
    per_gpu = [r["capacity_qps_per_gpu"] for r in res.rows]
    assert per_gpu == sorted(per_gpu, reverse=True) and per_gpu[0] > 0
    for r in res.rows:
        assert r["capacity_qps_per_gpu"] == pytest.approx(r["capacity_qps"] / 2)
        assert r["tokens_per_s"] == pytest.approx(r["capacity_qps"] * 64)  # every output is 64 tokens
        # 2 GPUs at $2 an hour = $4/3600 a second, over tokens/s, per million tokens
        assert r["cost_per_mtok_usd"] == pytest.approx(4.0 / 3600 / r["tokens_per_s"] * 1e6)
        assert r["slo_attainment"] >= 0.99
    # by cost, the cheapest first: the same order (equal GPUs, equal output lengths)
    by_cost = search_serving(
        get_model("llama3-8b"), "--model llama3-8b", "h100", space, w, "cost", gpu_hour_usd=2.0, workers=1
    )
    assert [r["tp"] for r in by_cost.rows] == [r["tp"] for r in res.rows]


def test_the_row_command_reproduces_its_capacity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "2",
                "--tp-values",
                "2",
                "--scheduler-values",
                "orca",
                "--workload",
                GEN,
                "--requests",
                "150",
                "--slo-ttft",
                "0.5",
                "--slo-tpot",
                "0.02",
                "--workers",
                "1",
                "--json",
                "s.json",
            ]
        )
        == 0
    )
    best = json.loads((tmp_path / "s.json").read_text())["best"][0]
    assert best["command"].startswith("podsim serve-llm ") and "--find-capacity" in best["command"]
    capsys.readouterr()
    assert main(best["command"].split()[1:] + ["--json", "c.json"]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["capacity_qps"] == pytest.approx(best["capacity_qps"])


@pytest.mark.parametrize(
    "args, match",
    [
        (["--workload", GEN, "--gpus", "2"], "--slo-ttft S and/or --slo-tpot S"),
        (["--workload", GEN, "--gpus", "2", "--slo-ttft", "1", "--global-batch", "8"], "for a training search"),
        (["--gpus", "2", "--global-batch", "8", "--slo-tpot", "0.1"], "for a serving search"),
        (["--gpus", "2"], "needs --global-batch"),
        (["--gpus", "2", "--global-batch", "8", "--objective", "capacity"], "capacity ranks a serving search"),
        (["--workload", GEN, "--gpus", "2", "--slo-ttft", "1", "--objective", "mfu"], "ranks by capacity"),
    ],
)
def test_search_refuses_mixed_modes(args: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--model", "llama3-8b", "--gpu", "h100", *args]) != 0
    assert match in capsys.readouterr().err


def test_a_serve_llm_sweep_with_what_ifs_and_a_yaml_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        name: pd
        run: serve-llm
        fixed: {{model: llama3-8b, gpu: h100, replicas: 2, workload: "{GEN}", requests: 120, gpu-hour-price: 3}}
        grid: {{pd: [off, "1:1"]}}
        what-if:
          - {{name: baseline}}
          - {{name: half HBM, gpu: {{hbm_bandwidth_scale: 0.5}}}}
        """)
    )
    assert main(["sweep", str(spec), "--workers", "1", "--json", str(tmp_path / "o.json")]) == 0
    rows = json.loads((tmp_path / "o.json").read_text())["rows"]
    assert len(rows) == 4 and not any(r["error"] for r in rows)
    by = {(r["pd"], r["what_if"]): r for r in rows}
    for pd in ("off", "1:1"):
        base, slow = by[(pd, "baseline")], by[(pd, "half HBM")]
        # a decode step of an 8B model reads its 16 GB of weights: memory-bound, so half the
        # bandwidth makes it (nearly) twice as long
        assert 1.6 < slow["tpot_mean_s"] / base["tpot_mean_s"] < 2.05
        assert base["gpus"] == 2
        assert base["cost_per_mtok_usd"] == pytest.approx(2 * 3 / 3600 / base["tokens_per_s"] * 1e6)


def test_a_serve_llm_sweep_names_a_bad_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nrun: serve-llm\nfixed: {model: llama3-8b, workload: nope.csv}\n")
    assert main(["sweep", str(spec)]) != 0
    err = capsys.readouterr().err
    assert "fixed.workload" in err and "nope.csv" in err


def test_serve_llm_cost_per_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.json"
    assert (
        main(
            [
                "serve-llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--tp",
                "2",
                "--replicas",
                "2",
                "--workload",
                GEN,
                "--requests",
                "100",
                "--gpu-hour-price",
                "2.5",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert d["gpus"] == 4 and d["usd_per_gpu_hour"] == 2.5
    assert d["cost_per_mtok_usd"] == pytest.approx(4 * 2.5 / 3600 / d["tokens_per_s"] * 1e6)
    assert "per million output tokens" in capsys.readouterr().out
