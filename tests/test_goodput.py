"""podsim goodput: the reliability model's closed forms against hand-derived values, the Monte
Carlo against the closed form, bad input, and the command line's JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from podsim.api.validate import validate
from podsim.cli import main
from podsim.errors import InputError
from podsim.reliability.checkpoint import CheckpointState
from podsim.reliability.estimate import RunModel, estimate
from podsim.reliability.goodput import (
    daly_interval_s,
    first_order_goodput,
    goodput,
    optimal_interval_s,
    segment_time_s,
    young_interval_s,
)
from podsim.reliability.montecarlo import simulate_run
from podsim.reliability.rates import KINDS, default_reliability, load_reliability, parse_reliability
from podsim.reliability.restart import RestartTimes
from podsim.validation.rows import shipped_rows

# --- closed forms ---------------------------------------------------------------------------


def test_without_failures_goodput_is_one_minus_the_checkpoint_overhead() -> None:
    # an hour of training, then 36 s of checkpoint: 3600 / 3636
    assert goodput(0.0, 3600.0, 36.0, 999.0) == pytest.approx(3600 / 3636, rel=1e-12)
    assert math.isinf(optimal_interval_s(0.0, 36.0))


def test_goodput_by_hand() -> None:
    # lam = 1e-4 /s, tau = 1000 s, C = 10 s, R = 100 s
    # exact (Daly): lam tau e^(-lam R) / (e^(lam (tau + C)) - 1) = 0.1 x 0.9900498 / 0.1062766
    assert goodput(1e-4, 1000.0, 10.0, 100.0) == pytest.approx(0.1 * 0.99004983 / 0.10627661, rel=1e-6)
    # first order: 1000/1010 x (1 - 1e-4 x (505 + 100)) = 0.990099 x 0.9395
    assert first_order_goodput(1e-4, 1000.0, 10.0, 100.0) == pytest.approx(0.9301980, rel=1e-6)
    # a segment of 1000 s + 10 s: e^0.01 x (e^0.101 - 1) / 1e-4 s
    assert segment_time_s(1e-4, 1000.0, 10.0, 100.0) == pytest.approx(1.01005017 * 0.10627661 / 1e-4, rel=1e-6)


def test_young_and_daly_intervals_by_hand() -> None:
    # C = 10 s, M = 10,000 s: Young sqrt(2 C M) = sqrt(200,000) = 447.2136 s
    assert young_interval_s(1e-4, 10.0) == pytest.approx(447.2136, rel=1e-6)
    # Daly: 447.2136 x (1 + sqrt(5e-4)/3 + 5e-4/9) - 10 = 447.2136 x 1.0075092 - 10
    assert daly_interval_s(1e-4, 10.0) == pytest.approx(447.2136 * 1.0075092 - 10, rel=1e-6)
    # C >= 2M: Daly says M
    assert daly_interval_s(1e-4, 30_000.0) == pytest.approx(10_000.0)


def test_the_optimum_maximises_the_exact_goodput() -> None:
    lam, c, r = 1e-4, 10.0, 100.0
    tau = optimal_interval_s(lam, c)
    # the stationary point: 1 - exp(-lam (tau + C)) = lam tau
    assert 1 - math.exp(-lam * (tau + c)) == pytest.approx(lam * tau, rel=1e-9)
    best = goodput(lam, tau, c, r)
    assert best > goodput(lam, tau * 0.9, c, r) and best > goodput(lam, tau * 1.1, c, r)
    # small lam C: close to Young's (within 2%), not equal
    assert tau == pytest.approx(447.2136, rel=0.02)


# --- the reliability model --------------------------------------------------------------------


def _only_gpu(rate: float) -> dict:
    return {"kinds": {k: {"rate": rate if k == "gpu" else 0} for k in KINDS}}


def _model(reliability, gpus=1000, interval=None, mode="sync", state=(10**12, 10**9)) -> RunModel:
    return RunModel(
        reliability,
        gpus,
        8,
        CheckpointState(*state),
        mode,
        100e9,
        200e9,
        25e9,
        50e9,
        RestartTimes(60.0, 600.0, 120.0),
        interval,
        1.0,
    )


def test_interruptions_are_rate_times_gpus_times_hours() -> None:
    rel = parse_reliability(_only_gpu(1e-5), "test", default_reliability())
    e = estimate(_model(rel), days=10)
    # 1e-5 per GPU-hour x 1,000 GPUs x 240 h
    assert e.interruptions == pytest.approx(2.4, rel=1e-9)
    assert e.interruptions_by_kind["gpu"] == pytest.approx(2.4, rel=1e-9)
    assert e.interruptions_by_kind["hbm"] == 0


def test_components_per_node_and_switch() -> None:
    rel = default_reliability()
    # 100 GPUs, 8 a node: 13 nodes; 32 a switch: 4 switches
    assert rel.components("node", 100, 8) == 13
    assert rel.components("switch", 100, 8) == 4
    rates = rel.job_rates_per_s(100, 8)
    assert rates["host"] == pytest.approx(rel.kinds["host"].rate * 13 / 3600)
    assert rates["switch"] == pytest.approx(rel.kinds["switch"].rate * 4 / 3600)


def test_checkpoint_costs_and_restart() -> None:
    rel = parse_reliability(_only_gpu(1e-5), "test", default_reliability())
    # sync: 1e12 B at 100 GB/s blocks 10 s; restore at 200 GB/s 5 s
    e = estimate(_model(rel, interval=3600.0), days=1)
    assert e.checkpoint.blocking_s == pytest.approx(10.0)
    assert e.checkpoint.restore_s == pytest.approx(5.0)
    # a GPU failure: detect 60 + reschedule 600 + warm-up 120 + restore 5
    assert e.restart_by_kind_s["gpu"] == pytest.approx(785.0)
    assert e.restart_by_kind_s["software"] == pytest.approx(185.0)  # no part to swap
    # async: a 1e9 B snapshot at 25 GB/s blocks 0.04 s, the 10 s write adds its lag to a restart
    a = estimate(_model(rel, interval=3600.0, mode="async"), days=1)
    assert a.checkpoint.blocking_s == pytest.approx(0.04)
    assert a.restart_by_kind_s["gpu"] == pytest.approx(795.0)
    # in memory: 1e9 B over a 50 GB/s NIC, each way
    m = estimate(_model(rel, interval=3600.0, mode="memory"), days=1)
    assert m.checkpoint.blocking_s == pytest.approx(0.02) and m.checkpoint.restore_s == pytest.approx(0.02)


def test_no_failures_in_the_model_means_goodput_of_the_checkpoints_alone() -> None:
    rel = parse_reliability(_only_gpu(0), "test", default_reliability())
    e = estimate(_model(rel, interval=990.0), work_s=99_000.0)
    assert e.goodput == pytest.approx(990 / 1000)  # 10 s checkpoints every 990 s
    assert e.wall_s == pytest.approx(100 * 1000.0)
    assert e.interruptions == 0 and e.optimal_interval_s is None


def test_a_checkpoint_longer_than_the_interval_is_said_not_a_negative_goodput() -> None:
    rel = default_reliability()
    with pytest.raises(InputError, match="longer than the interval") as err:
        estimate(_model(rel, interval=5.0), days=1)  # a 10 s checkpoint every 5 s
    assert err.value.where == "--checkpoint-interval"
    with pytest.raises(InputError, match="writes would queue"):
        estimate(_model(rel, interval=5.0, mode="async"), days=1)  # a 10 s background write


# --- Monte Carlo ------------------------------------------------------------------------------


def test_monte_carlo_mean_matches_the_closed_form() -> None:
    rates = {"gpu": 2e-4, "host": 1e-4}  # a failure every 3,333 s
    work, tau, c, r = 200_000.0, 1000.0, 20.0, 300.0
    s = simulate_run(work, tau, c, r, rates, samples=4000, seed=7)
    expected = 200 * segment_time_s(3e-4, tau, c, r)
    sd = s.wall_s.std()
    assert abs(s.wall_s.mean() - expected) < 4 * sd / math.sqrt(4000)
    # failures are Poisson in wall-clock time: mean count = lam x mean wall time
    assert s.failures.sum(axis=1).mean() == pytest.approx(3e-4 * expected, rel=0.03)
    # kinds in proportion to their rates, 2:1
    by_kind = s.failures.sum(axis=0)
    assert by_kind[0] / by_kind.sum() == pytest.approx(2 / 3, abs=0.02)


def test_monte_carlo_same_seed_same_samples() -> None:
    rates = {"gpu": 1e-4}
    a = simulate_run(50_000.0, 900.0, 10.0, 100.0, rates, samples=200, seed=3)
    b = simulate_run(50_000.0, 900.0, 10.0, 100.0, rates, samples=200, seed=3)
    c = simulate_run(50_000.0, 900.0, 10.0, 100.0, rates, samples=200, seed=4)
    assert (a.wall_s == b.wall_s).all() and (a.failures == b.failures).all()
    assert not (a.wall_s == c.wall_s).all()
    p = a.percentiles_h()
    assert p["p10"] <= p["p50"] <= p["p90"]


def test_monte_carlo_without_failures_is_exact() -> None:
    s = simulate_run(10_000.0, 3000.0, 10.0, 100.0, {"gpu": 0.0}, samples=5)
    # 3 segments of 3000 + 10, then 1000 + 10
    assert s.wall_s.tolist() == [4 * 10 + 10_000.0] * 5


def test_100000_gpus_for_months_runs() -> None:
    rel = default_reliability()
    e = estimate(_model(rel, gpus=100_000, state=(10**13, 2 * 10**9)), work_s=90 * 86400.0)
    s = simulate_run(e.work_s, e.interval_s, e.checkpoint.blocking_s, e.restart_s, e.rates_per_s, samples=1000)
    assert s.wall_s.min() > e.work_s
    assert s.failures.sum(axis=1).mean() == pytest.approx(e.interruptions, rel=0.05)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("kinds: {gpu: {rate: -1e-5}}", "finite number of failures"),
        ("kinds: {gpu: {rate: .nan}}", "finite number of failures"),
        ("kinds: {gpu: {rate: .inf}}", "finite number of failures"),
        ("kinds: {gpu: {rate: fast}}", "rate must be a number"),
        ("kinds: {gpus: {rate: 1e-5}}", "unknown failure kind 'gpus'; did you mean 'gpu'"),
        ("kinds: {gpu: {rate: 1e-5, per: rack}}", "per must be one of"),
        ("kinds: {gpu: {rat: 1e-5}}", "unknown key 'rat'"),
        ("kinds: []", "expected `kinds:`"),
        ("gpus_per_switch: 0\nkinds: {gpu: {rate: 0}}", "gpus_per_switch"),
        ("kinds: {gpu: {rate: 1e-5}\n", "not valid YAML"),
    ],
)
def test_bad_reliability_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "rates.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=match) as err:
        load_reliability(f)
    assert str(f) in str(err.value)


def test_a_zero_rate_is_allowed_and_means_none(tmp_path: Path) -> None:
    f = tmp_path / "rates.yaml"
    f.write_text("kinds:\n  software: {rate: 0}\n")
    rel = load_reliability(f)
    assert rel.kinds["software"].rate == 0
    assert rel.kinds["gpu"].rate == default_reliability().kinds["gpu"].rate  # the others kept


def test_every_default_rate_cites_a_source() -> None:
    rel = default_reliability()
    assert set(rel.kinds) == set(KINDS)
    for k in rel.kinds.values():
        assert k.rate > 0 and k.source and k.derivation


# --- the command line -------------------------------------------------------------------------

SMALL = ["goodput", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--tp", "8", "--global-batch", "8"]


def test_cli_json_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.json"
    assert main([*SMALL, "--train-tokens", "1e9", "--seed", "1", "--samples", "200", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert isinstance(d["interruptions_expected"], float)
    assert set(d["interruptions_by_kind"]) == set(KINDS)
    assert 0 < d["goodput"] <= 1
    assert d["checkpoint_interval_s"] > 0 and d["optimal_checkpoint_interval_s"] > 0
    assert set(d["time_to_train_h"]) == {"p10", "p50", "p90"}
    assert d["time_to_train_h"]["p10"] <= d["time_to_train_h"]["p90"]
    assert d["step_time_s"] > 0
    # 1e9 tokens at 8 x 8,192 tokens a step (llama3-8b's sequence): ceil(15,258.8) steps
    assert d["steps"] == 15259
    assert d["checkpoint_interval_s"] == d["optimal_checkpoint_interval_s"]  # none given: the optimum
    assert d["inputs"]["train-tokens"] == 1e9 and d["inputs"]["seed"] == 1
    assert "goodput" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--days", "1", "--train-tokens", "1e9"], "give one of --days and --train-tokens, not both"),
        (["--days", "1", "--storage-bandwidth", "0"], "finite number > 0"),
        (["--days", "1", "--storage-bandwidth", "nan"], "finite number > 0"),
        (["--days", "-1"], "finite number > 0"),
        (["--days", "1", "--checkpoint-interval", "inf"], "finite number > 0"),
        (["--days", "1", "--checkpoint-interval", "0.5", "--storage-bandwidth", "1"], "longer than the interval"),
        (["--days", "1", "--reliability", "missing.yaml"], "no such reliability file"),
        ([], "give the run's length"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*SMALL, *extra]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


# --- published whole runs: reported, never fitted -----------------------------------------


def test_llama3_outcomes_are_reported_rows_whose_kinds_add_up() -> None:
    rows = {r["row_id"]: r for r in shipped_rows(("reported",)) if r.get("kind") == "goodput"}
    assert rows and all(r["set"] == "reported" for r in rows.values())
    assert not [r for r in shipped_rows(("fitted",)) if r.get("kind") == "goodput"]
    total = rows["goodput_llama3_405b_54d_interruptions"]
    assert (total["gpus"], total["days"], total["value"]) == ("16384", "54", "419")
    # Table 5's 419 unexpected interruptions, grouped by podsim's kinds
    kinds = sum(int(rows[f"goodput_llama3_405b_54d_interruptions_{k}"]["value"]) for k in KINDS)
    assert kinds == 419


def test_validate_predicts_the_llama3_run_with_the_shipped_rates() -> None:
    v = validate(only="goodput_llama3_405b_54d_interruptions", jobs=1)
    by_id = {c.row_id: c for c in v.checks}
    rel = default_reliability()
    # 2,048 nodes, 16,384 GPUs and NICs, 512 switches, over 54 x 24 = 1,296 h
    per_h = (
        16384 * (rel.kinds["gpu"].rate + rel.kinds["hbm"].rate + rel.kinds["nic"].rate + rel.kinds["software"].rate)
        + 2048 * rel.kinds["host"].rate
        + 512 * rel.kinds["switch"].rate
    )
    assert by_id["goodput_llama3_405b_54d_interruptions"].predicted == pytest.approx(per_h * 1296, rel=1e-6)
    assert by_id["goodput_llama3_405b_54d_interruptions"].set == "reported"


def test_llm_goodput_uses_the_simulated_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "l.json"
    argv = ["llm", *SMALL[1:], "--goodput", "--train-tokens", "1e9", "--samples", "100", "--json", str(out)]
    assert main(argv) == 0
    d = json.loads(out.read_text())
    # the goodput's step is the iteration the same JSON reports
    assert d["goodput"]["step_time_s"] == pytest.approx(d["iteration_time_s"], rel=1e-5)
    assert 0 < d["goodput"]["goodput"] <= 1
    capsys.readouterr()
    # a reliability flag without --goodput would be ignored: refused
    assert main(["llm", *SMALL[1:], "--days", "3"]) == 2
    assert "--days: only used with --goodput" in capsys.readouterr().err
