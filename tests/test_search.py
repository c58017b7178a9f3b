"""podsim search: its best layout is the best of running every layout one by one with podsim llm,
and each row's command reproduces the row (issue #15)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.llm.model import get_model


def test_search_best_is_the_best_of_every_layout_run_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "2048",
                "--tp-values",
                "1,8",
                "--pp-values",
                "1,2",
                "--vpp-values",
                "1",
                "--micro-batch-values",
                "1",
                "--top",
                "100",
                "--workers",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    found = json.loads(out.read_text())
    capsys.readouterr()
    assert found["evaluated"] == len(found["best"]) > 4
    # every layout the search kept, run alone with the command it prints
    alone = []
    for i, row in enumerate(found["best"]):
        argv = shlex.split(row["command"])
        assert argv[:2] == ["podsim", "llm"]
        js = tmp_path / f"{i}.json"
        assert main(argv[1:] + ["--json", str(js)]) == 0
        r = json.loads(js.read_text())
        assert r["tokens_per_s"] == row["tokens_per_s"] and r["memory_peak_gib"] == row["memory_peak_gib"]
        alone.append(r["tokens_per_s"])
    capsys.readouterr()
    assert found["best"][0]["tokens_per_s"] == max(alone)
    assert [r["tokens_per_s"] for r in found["best"]] == sorted(alone, reverse=True)


def test_search_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpus",
                "8",
                "--global-batch",
                "8",
                "--tp-values",
                "64",
                "--pp-values",
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no layout is left" in err and "Traceback" not in err
    assert main(["search", "--model", "llama3-8b", "--gpus", "8,x", "--global-batch", "8"]) == 2
    assert "expected whole numbers separated by commas" in capsys.readouterr().err


def test_progress_says_the_rate_and_the_time_left() -> None:
    from podsim.cli.options import count_status

    assert (
        count_status("evaluated {done}/{total} layouts", 120, 600, 10.0)
        == "evaluated 120/600 layouts [####                ] 12.0/s, 40 s left"
    )
    assert count_status("traced {done}/{total} ranks", 8, 8, 4.0) == "traced 8/8 ranks [####################] 2.0/s"


def test_an_interrupted_search_resumes_from_its_store(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    from podsim.llm.model import get_model
    from podsim.sweep.search import search
    from podsim.sweep.space import Space

    model = get_model("llama3-8b")
    space = Space(
        gpus=(8,),
        global_batch=16,
        seq_len=2048,
        tp=(1, 8),
        pp=(1, 2),
        vpp=(1,),
        micro_batch=(1,),
        recompute=("none", "full"),
        distributed_optimizer=(True,),
    )
    store = str(tmp_path / "results.duckdb")
    # simulate_top=3: the screen (estimates), then the best 3 simulated: both passes resume
    whole = search(model, "--model llama3-8b", space, "h100", 80, workers=1, simulate_top=3)
    assert whole.evaluated == 8 and whole.simulated == 3

    def stop_after_1(phase: str, done: int, total: int) -> None:
        if phase == "simulate" and done == 1:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C (or the machine went away) here

    with pytest.raises(KeyboardInterrupt):
        search(
            model, "--model llama3-8b", space, "h100", 80, workers=1, progress=stop_after_1, store=store, simulate_top=3
        )
    again = search(model, "--model llama3-8b", space, "h100", 80, workers=2, store=store, simulate_top=3)
    assert again.reused == 8 + 1  # the screen's 8 estimates and the first simulated layout
    assert again.rows == whole.rows  # the same final table
    import duckdb

    with duckdb.connect(store) as db:
        n, distinct = db.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchone()
        methods = dict(db.execute("SELECT backend, count(*) FROM results GROUP BY backend").fetchall())
    assert n == distinct == 8 + 3  # every layout estimated once, the best 3 simulated once: no point twice
    assert methods == {"estimate": 8, "analytical": 3}
    third = search(model, "--model llama3-8b", space, "h100", 80, workers=1, store=store, simulate_top=3)
    assert third.reused == 11 and third.rows == whole.rows


def test_a_store_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("duckdb")
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n")
    for store in (bad, tmp_path):
        assert (
            main(
                [
                    "search",
                    "--model",
                    "llama3-8b",
                    "--gpus",
                    "8",
                    "--global-batch",
                    "8",
                    "--tp-values",
                    "8",
                    "--pp-values",
                    "1",
                    "--store",
                    str(store),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert f"{store}" in err and "--store" in err and "Traceback" not in err, err


def test_cost_per_million_tokens_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.sweep.search import cost_per_mtok

    # $2.50 a GPU-hour x 8 GPUs x 0.75 s = $0.0041667 an iteration of 32 x 2048 tokens: $0.0636 a million
    row = {"layout": {"gpus": 8, "global_batch": 32, "seq_len": 2048}, "iteration_time_s": 0.75}
    assert (
        cost_per_mtok(row, 2.5)
        == pytest.approx(2.5 * 8 * 0.75 / 3600 / 65536 * 1e6)
        == pytest.approx(0.06358, rel=1e-3)
    )
    out = tmp_path / "c.json"
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8,16",
                "--global-batch",
                "32",
                "--seq-len",
                "2048",
                "--tp-values",
                "8",
                "--pp-values",
                "1",
                "--objective",
                "cost",
                "--gpu-hour-price",
                "2.5",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    best = json.loads(out.read_text())["best"]
    costs = [r["cost_per_mtok_usd"] for r in best]
    assert costs == sorted(costs) and {r["layout"]["gpus"] for r in best} == {8, 16}
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "b200",
                "--gpus",
                "8",
                "--global-batch",
                "8",
                "--objective",
                "cost",
            ]
        )
        == 2
    )  # podsim's prices have none for it
    assert "no price for the b200" in capsys.readouterr().err
    from podsim.sweep.search import search
    from podsim.sweep.space import Space

    with pytest.raises(InputError, match="needs the price of a GPU-hour: --gpu-hour-price USD"):
        search(
            get_model("llama3-8b"),
            "--model llama3-8b",
            Space(gpus=(8,), global_batch=8, seq_len=2048),
            "h100",
            80,
            objective="cost",
        )


def test_the_cost_objective_takes_the_gpu_hour_price_from_editable_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from podsim.sweep.search import gpu_hour_price

    shipped = yaml.safe_load(open(Path(__file__).parents[1] / "src/podsim/hardware/prices.yaml"))
    assert gpu_hour_price("h100") == shipped["h100-80gb"]["usd_per_gpu_hour"]
    lo, hi = shipped["h100-80gb"]["range"]
    assert lo <= gpu_hour_price("h100") <= hi  # the middle of the published range
    mine = tmp_path / "prices.yaml"
    mine.write_text("h100-80gb: {usd_per_gpu_hour: 4.0}\n")
    out = tmp_path / "c.json"
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8",
                "--global-batch",
                "32",
                "--seq-len",
                "2048",
                "--tp-values",
                "8",
                "--pp-values",
                "1",
                "--objective",
                "cost",
                "--gpu-prices",
                str(mine),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    best = json.loads(out.read_text())["best"][0]
    assert "at $4 (" in capsys.readouterr().out
    # $4 x 8 GPUs x the iteration time / 3600 per 32 x 2048 tokens, per million tokens
    assert best["cost_per_mtok_usd"] == pytest.approx(4 * 8 * best["iteration_time_s"] / 3600 / 65536 * 1e6, abs=1e-6)
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "b200",
                "--gpus",
                "8",
                "--global-batch",
                "32",
                "--objective",
                "cost",
                "--gpu-prices",
                str(mine),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no price for the b200" in err and str(mine) in err and "--gpu-hour-price" in err


def test_time_to_train_a_number_of_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "search",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8",
                "--global-batch",
                "32",
                "--seq-len",
                "2048",
                "--tp-values",
                "2,8",
                "--pp-values",
                "1",
                "--objective",
                "time",
                "--train-tokens",
                "2e9",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    best = json.loads(out.read_text())["best"]
    # 2 x 10^9 tokens at the row's tokens/s, in hours; the fastest iteration trains them first
    for r in best:
        assert r["time_to_train_h"] == pytest.approx(2e9 / r["tokens_per_s"] / 3600, abs=1e-6)
    assert [r["time_to_train_h"] for r in best] == sorted(r["time_to_train_h"] for r in best)
    assert main(["search", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--train-tokens", "0"]) == 2
    assert "--train-tokens" in capsys.readouterr().err


def test_a_memory_reserve_rejects_what_no_longer_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.hardware.gpu import get_gpu

    argv = [
        "search",
        "--model",
        "llama3-8b",
        "--gpu",
        "h100",
        "--gpus",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "2048",
        "--tp-values",
        "1,2,8",
        "--pp-values",
        "1,2",
        "--vpp-values",
        "1",
        "--micro-batch-values",
        "1,4",
        "--top",
        "100",
        "--simulate-top",
        "100",
    ]
    assert main(argv + ["--json", str(tmp_path / "all.json")]) == 0
    rows = json.loads((tmp_path / "all.json").read_text())["best"]
    cap = get_gpu("h100").memory_gib
    peaks = sorted(r["memory_peak_gib"] for r in rows)
    distinct = sorted(set(peaks))
    k = len(distinct) // 2
    reserve = cap - (distinct[k] + distinct[k + 1]) / 2  # room for the layouts up to the middle peak only
    assert main(argv + ["--memory-reserve", f"{reserve:.4f}", "--json", str(tmp_path / "some.json")]) == 0
    kept = json.loads((tmp_path / "some.json").read_text())
    assert sorted(r["memory_peak_gib"] for r in kept["best"]) == [p for p in peaks if p <= cap - reserve]
    assert sum(n for why, n in kept["rejected"].items() if "does not fit" in why) >= 1
    assert main(argv + ["--memory-reserve", "100"]) == 2
    assert "leaves nothing" in capsys.readouterr().err


def test_a_search_over_expert_tp_at_fp8_reproduces_each_folded_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--etp-values`` and ``--precision`` (issue #28): the folded layouts a search ranks carry
    their expert TP and precision into the command that reproduces them."""
    out = tmp_path / "moe.json"
    argv = ["search", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "16", "--global-batch", "64"]
    argv += ["--tp-values", "2", "--pp-values", "1", "--ep-values", "8", "--etp-values", "1,2"]
    argv += ["--micro-batch-values", "1", "--recompute-values", "full", "--sequence-parallel-values", "on"]
    argv += ["--distributed-optimizer-values", "on", "--precision", "fp8", "--top", "10", "--workers", "1"]
    assert main([*argv, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["best"]
    # TP 2 with ETP 2 (TP's: the default) and with ETP 1 (folded: EP 8 x ETP 1 over TP 2 x DP 8)
    assert sorted(r["layout"]["etp"] for r in rows) == [1, 2]
    for i, row in enumerate(rows):
        assert row["layout"]["precision"] == "fp8"
        cmd = shlex.split(row["command"])
        assert ("--etp" in cmd) == (row["layout"]["etp"] != row["layout"]["tp"])
        assert cmd[cmd.index("--precision") + 1] == "fp8"
        js = tmp_path / f"{i}.json"
        assert main(cmd[1:] + ["--json", str(js)]) == 0
        alone = json.loads(js.read_text())
        assert alone["layout"]["etp"] == row["layout"]["etp"] and alone["layout"]["edp"] == row["layout"]["edp"]
        assert alone["tokens_per_s"] == row["tokens_per_s"]
    assert "etp 1" in capsys.readouterr().out


def test_fp8_training_needs_fp8_tensor_cores(capsys: pytest.CaptureFixture[str]) -> None:
    """An A100 has no fp8 tensor cores (its datasheet peaks: fp32, tf32, fp16, bf16): an fp8 run
    there is refused, by podsim llm and podsim search alike, not timed at the bf16 peak."""
    llm = ["llm", "--model", "llama3-8b", "--gpu", "a100", "--gpus", "8", "--global-batch", "8"]
    search = ["search", "--model", "llama3-8b", "--gpu", "a100", "--gpus", "8", "--global-batch", "8"]
    for argv in (llm, search):
        for precision in ("fp8", "fp8-rowwise"):
            assert main([*argv, "--precision", precision]) == 2
            err = capsys.readouterr().err
            assert f"--precision {precision} needs fp8 tensor cores, which the A100-SXM4-80GB lacks" in err
            assert "Traceback" not in err
    assert main([*llm, "--precision", "mxfp8"]) == 2
    assert "needs block-scaled (microscaling) tensor cores" in capsys.readouterr().err


def test_a_store_of_an_older_podsim_gains_the_new_columns(tmp_path: Path) -> None:
    """A store written before ``etp`` and ``precision`` were columns still resumes: the columns
    are added (null in its old rows) and new rows fill them."""
    duckdb = pytest.importorskip("duckdb")
    from podsim.sweep.store import _SCHEMA, Store

    path = tmp_path / "old.duckdb"
    old = _SCHEMA.replace("etp INTEGER, ", "").replace("precision VARCHAR, ", "")
    assert old.count(",") == _SCHEMA.count(",") - 2
    with duckdb.connect(str(path)) as db:  # the first stores' table: no etp, no precision
        db.execute(f"CREATE TABLE results ({old})")
        db.execute("INSERT INTO results (key, model, tp, row) VALUES ('old', 'llama3-8b', 8, '{}')")
    layout = {
        "gpus": 16, "tp": 2, "pp": 1, "vpp": 1, "cp": 1, "ep": 8, "etp": 1, "dp": 8, "micro_batch": 1,
        "global_batch": 64, "seq_len": 2048, "recompute": "full", "sequence_parallel": True,
        "distributed_optimizer": True, "zero": 0, "tp_overlap": "te", "overlap_grad_reduce": True,
        "overlap_param_gather": True, "precision": "fp8",
    }  # fmt: skip
    row = {"layout": layout, "tokens_per_s": 1.0, "mfu": 0.1, "iteration_time_s": 2.0, "memory_peak_gib": 3.0}
    store = Store(path)
    store.add("new", "qwen3-30b-a3b", "h100", None, "estimate", {**row, "command": "podsim llm --etp 1"})
    assert store.keys() == {"old", "new"} and store.row("new")["layout"]["etp"] == 1
    store.close()
    with duckdb.connect(str(path)) as db:
        got = db.execute("SELECT key, tp, etp, precision FROM results ORDER BY key").fetchall()
    assert got == [("new", 2, 1, "fp8"), ("old", 8, None, None)]
