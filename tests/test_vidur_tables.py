"""Measured step tables in Vidur's profile layout (issue #16): podsim writes its compute model's
times as Vidur's CSVs and reads such tables back as a step timer.  Checked against the analytical
timer at the tabulated points (the round trip), against interpolation worked by hand on tables
written here, and on bad tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.llm.model import get_model
from podsim.serving.llm.step_timer import step_timer
from podsim.serving.llm.steps import infer
from podsim.serving.llm.vidur_profiles import write_vidur_profiles
from podsim.serving.llm.vidur_tables import (
    MLP_OPS,
    TableStepTimer,
    chunk_grid,
    kv_grid,
    token_grid,
)

SMALL = {"max_tokens": 1024, "max_seq_len": 1024, "max_batch": 16}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("vidur")
    write_vidur_profiles(d, get_model("llama2-70b"), "h100", (1, 4), **SMALL)
    return d


def test_the_files_columns_and_units_are_vidurs(written: Path) -> None:
    comp = written / "compute" / "h100" / "meta-llama" / "Llama-2-70b-hf"
    mlp = list(csv.DictReader((comp / "mlp.csv").open()))
    for op in MLP_OPS:
        assert f"time_stats.{op}.median" in mlp[0]
    # Vidur picks rows by the model's shape (its Llama-2 config says vocab 32768) and by TP
    assert {r["num_tensor_parallel_workers"] for r in mlp} == {"1", "4"}
    assert (
        mlp[0]["n_head"],
        mlp[0]["n_kv_head"],
        mlp[0]["n_embd"],
        mlp[0]["n_expanded_embd"],
        mlp[0]["vocab_size"],
        mlp[0]["use_gated_mlp"],
    ) == ("64", "8", "8192", "28672", "32768", "True")
    # times in ms: the QKV GEMM of 1,024 tokens at TP 1 (1024 x 8192 x 10240 x 2 FLOPs) is a fraction of a ms
    row = next(r for r in mlp if r["num_tokens"] == "1024" and r["num_tensor_parallel_workers"] == "1")
    assert 0.1 < float(row["time_stats.attn_pre_proj.median"]) < 1.0
    att = list(csv.DictReader((comp / "attention.csv").open()))
    pre = [r for r in att if r["is_prefill"] == "True"]
    dec = [r for r in att if r["is_prefill"] == "False"]
    assert all(
        r["batch_size"] == "1" and int(r["prefill_chunk_size"]) > 0 and r["time_stats.attn_decode.median"] == ""
        for r in pre
    )
    assert all(r["prefill_chunk_size"] == "0" and int(r["kv_cache_size"]) > 0 for r in dec)
    assert {int(r["batch_size"]) for r in dec} == set(range(1, 17))
    ar = list(csv.DictReader((written / "network" / "h100_dgx" / "all_reduce.csv").open()))
    assert {(r["num_workers"], r["devices_per_node"], r["collective"]) for r in ar} == {("4", "4", "all_reduce")}
    # sizes in bytes: a token's activations are 8192 x 2 bytes
    assert {int(r["size"]) for r in ar} == {t * 8192 * 2 for t in token_grid(1024)}
    sr = list(csv.DictReader((written / "network" / "h100_dgx" / "send_recv.csv").open()))
    assert {r["devices_per_node"] for r in sr} == {"1", "2"}


def test_vidurs_grids() -> None:
    assert token_grid(1100)[:4] == [1, 2, 4, 8] and token_grid(1100)[-5:] == [1024, 1040, 1056, 1072, 1088]
    assert token_grid(4096)[-2:] == [4064, 4096]
    assert kv_grid(1100)[-3:] == [992, 1024, 1088] and kv_grid(4097)[-1] == 4096
    assert chunk_grid(200)[:6] == [64, 80, 96, 112, 128, 160]


@pytest.mark.parametrize("tp, pp", [(4, 1), (1, 1), (4, 2)])
def test_the_round_trip_equals_the_compute_model_at_tabulated_points(written: Path, tp: int, pp: int) -> None:
    m = get_model("llama2-70b")
    model = step_timer(m, "h100", tp=tp, pp=pp)
    table = step_timer(m, "h100", tp=tp, pp=pp, profile=str(written))
    assert isinstance(table, TableStepTimer)
    for batch in (
        [(512, 0)],
        [(256, 512)],
        [(1, 512)] * 8,
        [(1, 96)],
        [(1, 992)] * 16,
        [(64, 128)] + [(1, 320), (1, 64)] * 4,
    ):  # 72 tokens; decode mean 192
        a, b = model.parts_ns(batch), table.parts_ns(batch)
        assert a.keys() == b.keys()
        for k in a:
            assert b[k] == pytest.approx(a[k], rel=1e-9, abs=1e-6), (batch, k)
        assert abs(table.stage_ns(batch) - model.stage_ns(batch)) <= 1
    # memory is podsim's model, as are the logits
    assert table.kv_capacity_bytes == model.kv_capacity_bytes
    assert table.kv_bytes_per_token == model.kv_bytes_per_token
    r1, r2 = infer(model, 1, 512, 3), infer(table, 1, 512, 3)  # decode contexts 512, 513: 513 interpolated
    assert r2.prefill_s == pytest.approx(r1.prefill_s, abs=2e-9)
    assert r2.decode_step_mean_s == pytest.approx(r1.decode_step_mean_s, rel=1e-6)


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _hand_tables(d: Path, tp: int = 1) -> None:
    """Two token counts, four decode points, four prefill points (TP ``tp``): every op 0 but
    those named."""
    ops = [f"time_stats.{op}.median" for op in MLP_OPS]
    mlp = [
        [1.0 if op == "attn_pre_proj" else 0.5 if op == "add" else 0.0 for op in MLP_OPS] + [8, tp],
        [3.0 if op == "attn_pre_proj" else 0.5 if op == "add" else 0.0 for op in MLP_OPS] + [16, tp],
    ]
    _write(d / "mlp.csv", ops + ["num_tokens", "num_tensor_parallel_workers"], mlp)
    att = [
        "time_stats.attn_prefill.median",
        "time_stats.attn_decode.median",
        "batch_size",
        "kv_cache_size",
        "prefill_chunk_size",
        "num_tensor_parallel_workers",
    ]
    _write(
        d / "attention.csv",
        att,
        [
            ["", 1.0, 4, 100, 0, tp],
            ["", 2.0, 4, 200, 0, tp],
            ["", 3.0, 8, 100, 0, tp],
            ["", 6.0, 8, 200, 0, tp],
            [1.0, "", 1, 0, 64, tp],
            [2.0, "", 1, 64, 64, tp],
            [5.0, "", 1, 0, 128, tp],
            [7.0, "", 1, 128, 128, tp],
        ],
    )


def test_interpolation_worked_by_hand(tmp_path: Path) -> None:
    _hand_tables(tmp_path)
    m = get_model("llama2-7b")  # 32 layers; the tables name no shape, so any model reads them
    t = step_timer(m, "a100", tp=1, profile=str(tmp_path))
    L = 32
    # 12 tokens: halfway between 8 (1 ms) and 16 (3 ms) -> 2 ms of GEMM a layer; "add" flat 0.5 ms
    assert t.tables.op_ns("attn_pre_proj", 12) == pytest.approx(2e6)
    # decode: 4 sequences of contexts 120 and 180 (mean 150) -> 1.5 ms; 6 of mean 150 -> (1.5 + 4.5) / 2
    assert t.tables.attention_ns([(1, 120), (1, 180)] * 2) == pytest.approx(1.5e6)
    assert t.tables.attention_ns([(1, 150)] * 6) == pytest.approx(3.0e6)
    # prefill: a chunk of 64 over 32 cached tokens -> 1.5 ms; of 96 over none -> (1 + 5) / 2 = 3 ms
    assert t.tables.attention_ns([(64, 32)]) == pytest.approx(1.5e6)
    assert t.tables.attention_ns([(96, 0)]) == pytest.approx(3.0e6)
    # past the last point: linear from the last two (decode batch 12 of context 100: 3 + (3 - 1) = 5 ms)
    assert t.tables.attention_ns([(1, 100)] * 12) == pytest.approx(5.0e6)
    # a whole step: 4 decodes (mean context 150) and a chunk of 64 over 32 cached: 4 + 64 = 68 tokens
    # (beyond 16: GEMM 3 + (68 - 16) x 0.25 = 16 ms), attention 1.5 + 1.5 ms, element-wise 0.5 ms a layer
    p = t.parts_ns([(1, 120), (1, 180), (1, 140), (1, 160), (64, 32)])
    assert p["gemm"] == pytest.approx(L * 16e6)
    assert p["attention"] == pytest.approx(L * 3.0e6)
    assert p["elementwise"] == pytest.approx(L * 0.5e6)
    assert p["communication"] == 0.0
    assert p["output"] == pytest.approx(step_timer(m, "a100").parts_ns([(1, 1)] * 5)["output"])


def test_a_tp_the_tables_lack_names_the_file_column_and_the_tps_they_have(written: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"mlp\.csv: column num_tensor_parallel_workers has no rows for TP 2; "
        r"the table has TP 1, 4",
    ):
        step_timer(get_model("llama2-70b"), "h100", tp=2, profile=str(written))


def test_missing_files_and_columns(tmp_path: Path) -> None:
    m = get_model("llama2-7b")
    with pytest.raises(InputError, match="no mlp.csv: expected .*compute/<device>/<model>/mlp.csv"):
        step_timer(m, "a100", profile=str(tmp_path))
    _hand_tables(tmp_path, tp=2)
    with pytest.raises(InputError, match="no all_reduce.csv"):
        step_timer(m, "a100", tp=2, profile=str(tmp_path))
    rows = list(csv.reader((tmp_path / "mlp.csv").open()))
    i = rows[0].index("time_stats.mlp_down_proj.median")
    _write(
        tmp_path / "mlp.csv",
        [c for j, c in enumerate(rows[0]) if j != i],
        [[c for j, c in enumerate(r) if j != i] for r in rows[1:]],
    )
    with pytest.raises(
        InputError,
        match=r"mlp\.csv: missing column time_stats\.mlp_down_proj\.median; mlp\.csv "
        r"needs the columns num_tokens, num_tensor_parallel_workers, .*attn_pre_proj",
    ):
        step_timer(m, "a100", tp=2, profile=str(tmp_path))


def test_a_value_that_is_not_a_number_names_file_line_and_column(tmp_path: Path) -> None:
    _hand_tables(tmp_path)
    rows = list(csv.reader((tmp_path / "attention.csv").open()))
    rows[3][1] = "fast"  # the third data row's decode time: line 4
    _write(tmp_path / "attention.csv", rows[0], rows[1:])
    with pytest.raises(
        InputError, match=r"attention\.csv:4: column time_stats\.attn_decode\.median: 'fast' is not a number"
    ):
        step_timer(get_model("llama2-7b"), "a100", profile=str(tmp_path))


def test_tables_of_another_model_are_refused(written: Path) -> None:
    with pytest.raises(InputError, match=r"no rows for llama2-7b's shape \(n_head 32.*it has rows for n_head 64"):
        step_timer(get_model("llama2-7b"), "h100", profile=str(written))


def test_podsim_infer_writes_and_reads_the_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "infer",
        "--model",
        "llama2-7b",
        "--gpu",
        "a100",
        "--tp",
        "2",
        "--batch",
        "4",
        "--prompt-tokens",
        "512",
        "--output-tokens",
        "8",
    ]
    assert main(args + ["--write-profile", str(tmp_path / "p"), "--json", str(tmp_path / "a.json")]) == 0
    assert (tmp_path / "p" / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv").is_file()
    assert main(args + ["--profile", str(tmp_path / "p"), "--json", str(tmp_path / "b.json")]) == 0
    assert "step times from the tables in" in capsys.readouterr().out
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    # the decode steps sit on tabulated points; the prefill of 4 prompts takes 4 attention kernels
    # from the batch-1 prefill rows, where podsim's model has one
    assert b["decode_step_mean_s"] == pytest.approx(a["decode_step_mean_s"], rel=1e-6)
    assert b["prefill_s"] == pytest.approx(a["prefill_s"], rel=0.01)
    assert b["kv_cache_gib"] == a["kv_cache_gib"]
    assert main(args + ["--tp", "8", "--profile", str(tmp_path / "nowhere")]) == 2
    assert "no such folder of profile tables" in capsys.readouterr().err
