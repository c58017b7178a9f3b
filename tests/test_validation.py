"""podsim validate: the rows it ships (fitted and reported sets), their transcription, the
Megatron SC'21 rows it was fitted on, and the report."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.validation import Check, format_checks, read_rows, run_validation, shipped_rows
from podsim.validation.predict import layout_of, model_of


def test_shipped_rows_carry_citations_and_sets() -> None:
    rows = shipped_rows()
    fitted = [r for r in rows if r["set"] == "fitted"]
    assert len(fitted) >= 70
    assert all(r["source"] for r in rows), "every row cites its source"
    ids = [r["row_id"] for r in rows]
    assert len(ids) == len(set(ids)), "row ids are unique across both sets"
    assert {r["row_id"] for r in fitted} >= {
        "megatron_sc21_t1_1.7B_tflops",
        "mcore_h100_weak_462B_tflops",
        "llama3_405b_16384gpu_cp1_tflops",
    }


@pytest.mark.conformance
def test_fitted_rows_are_the_calibration_tables_values(refdata) -> None:  # type: ignore[no-untyped-def]
    # the shipped transcription has the same numbers as the project's calibration table
    ref = {}
    for name in ("published_measurements.csv", "stack_anchor_rows.csv"):  # the stacks' rows: the second
        with open(Path(refdata) / "calibration" / name, newline="") as f:
            ref.update({r["row_id"]: r for r in csv.DictReader(f)})
    # podsim's own GPU measurements (measured steps, sourced "podsim benchmarks/gpu/...") are
    # fitted rows too, but not the published table's
    mine = [r for r in shipped_rows(("fitted",)) if not r["source"].startswith("podsim ")]
    assert len(mine) >= 70
    for r in mine:
        assert r["row_id"] in ref, r["row_id"]
        assert float(r["value"]) == float(ref[r["row_id"]]["value"]), r["row_id"]
        for k in ("gpus", "tp", "pp"):
            if ref[r["row_id"]][k]:
                assert r[k] == ref[r["row_id"]][k], (r["row_id"], k)


def test_layouts_of_rows() -> None:
    rows = {r["row_id"]: r for r in shipped_rows(("fitted",))}
    r = rows["megatron_sc21_t1_1.7B_tflops"]
    lay = layout_of(r, model_of(r))
    # Megatron-LM of 2021: fp16, full recompute, blocking TP, no pipeline -> micro-batch 4
    assert (lay.precision, lay.recompute, lay.tp_overlap, lay.micro_batch, lay.flash_attention) == (
        "fp16",
        "full",
        "none",
        4,
        False,
    )
    r = rows["llama3_405b_8192gpu_cp1_tflops"]
    m = model_of(r)
    lay = layout_of(r, m)
    # 126 layers on PP 16 x VPP 2: the embedding and the loss count as layers (128 = 32 x 4)
    assert (m.layers, lay.pp, lay.vpp, lay.dp, lay.global_batch) == (126, 16, 2, 64, 2048)
    assert lay.account_for_embedding and lay.account_for_loss
    # no recompute given: 8 layers of 8k tokens do not fit in 80 GB without some: the least
    # recomputation that fits is taken
    from dataclasses import replace

    from podsim.llm.memory import memory

    cap = 79.6 * 2**30
    assert max(s.total for s in memory(m, replace(lay, recompute="none"))) > cap
    assert lay.recompute != "none" and max(s.total for s in memory(m, lay)) <= cap
    r = rows["mcore_h100_weak_1.7B_tflops"]
    lay = layout_of(r, model_of(r))
    assert (lay.precision, lay.distributed_optimizer, lay.recompute, lay.tp_overlap) == ("bf16", True, "none", "te")


def test_megatron_table1_within_5_percent() -> None:
    checks, _ = run_validation(only="megatron_sc21_t1")
    assert len(checks) == 10 and {c.set for c in checks} == {"fitted"}
    for c in checks:
        assert abs(c.error) < 0.05, (c.row_id, c.measured, c.predicted)
    assert sum(abs(c.error) for c in checks) / 10 < 0.03


def test_megatron_table2_ptd_trend() -> None:
    checks, _ = run_validation(only="megatron_sc21_t2_PTD")
    assert len(checks) == 6
    assert all(abs(c.error) < 0.08 for c in checks)
    # more GPUs at the same batch: fewer micro-batches per pipeline, a bigger bubble -- the
    # published trend, which the simulation must reproduce
    for size in ("174.6B", "529.6B"):
        rows = [c for c in checks if size in c.row_id]
        assert [c.predicted for c in rows] == sorted((c.predicted for c in rows), reverse=True)


def test_memory_and_nccl_rows_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    checks, skipped = run_validation(only="korthikanti_fig1")
    assert checks and all(abs(c.error) < 1e-3 for c in checks)
    assert main(["validate", "--only", "nccl"]) == 0
    out = capsys.readouterr().out
    assert "FITTED set" in out and "NCCL bus bandwidth" in out and "mean |error|" in out
    text = format_checks(checks, skipped)
    assert "Korthikanti memory: mean 0.00%" in text


def test_report_separates_sets_and_gpus() -> None:
    checks = [
        Check("a", "x", "model_tflops_per_gpu", "TFLOP/s", 100, 110, "fitted", "h100-80gb"),
        Check("b", "x", "model_tflops_per_gpu", "TFLOP/s", 100, 95, "fitted", "a100-80gb"),
        Check("c", "x", "model_tflops_per_gpu", "TFLOP/s", 200, 180, "reported", "b200"),
    ]
    text = format_checks(checks, 0)
    assert text.index("FITTED set") < text.index("REPORTED set")
    # per set: fitted mean (10 + 5) / 2 = 7.5%, reported 10%; per GPU inside each
    assert "fitted: mean 7.50%, max 10.00% over 2 rows" in text
    assert "reported: mean 10.00%, max 10.00% over 1 rows" in text
    assert "h100-80gb: mean 10.00%" in text and "a100-80gb: mean 5.00%" in text and "b200: mean 10.00%" in text
    # a row outside the model is listed, not averaged
    checks.append(
        Check("d", "x", "model_tflops_per_gpu", "TFLOP/s", 100, 300, "fitted", "a100-80gb", outside="a 2021 stack")
    )
    text = format_checks(checks, 0)
    assert "fitted: mean 7.50%, max 10.00% over 2 rows" in text and "(outside the model)" in text
    assert "1 rows shown above but not averaged, outside podsim's model: a 2021 stack" in text


def test_user_rows_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "mine.csv"
    p.write_text(
        "# my runs\nrow_id,source,model,layers,hidden,heads,ffn_hidden,vocab,seq_len,gpu,gpus,tp,pp,"
        "global_batch,precision,framework,metric,value,unit\n"
        "r1,me,toy,2,256,4,1024,1000,512,h100-80gb,8,1,1,8,bf16,megatron-core,iteration_time_s,1.0,s\n"
    )
    checks, _ = run_validation(p)
    assert len(checks) == 1 and checks[0].set == "user" and checks[0].predicted > 0
    assert main(["validate", "--rows", str(p), "--json", str(tmp_path / "v.json")]) == 0
    assert "your rows" in capsys.readouterr().out
    # a row podsim cannot run (8 GPUs, TP 3) is skipped and said, not a crash
    two = tmp_path / "two.csv"
    two.write_text(
        p.read_text() + "r2,me,toy,2,256,4,1024,1000,512,h100-80gb,8,3,1,8,bf16,megatron-core,iteration_time_s,1.0,s\n"
    )
    said: list[str] = []
    checks, skipped = run_validation(two, progress=said.append)
    assert len(checks) == 1 and skipped == 1
    assert any(x.startswith("not runnable: r2: 8 GPUs are not divisible by TP") for x in said)
    bad = tmp_path / "bad.csv"
    bad.write_text("row_id,metric\nx,y\n")
    with pytest.raises(InputError, match="missing column 'value'"):
        read_rows(bad, "user")
    bad.write_text("row_id,metric,value\nx,y,fast\n")
    with pytest.raises(InputError, match="value must be a finite number > 0"):
        read_rows(bad, "user")
    assert main(["validate", "--rows", str(tmp_path / "none.csv")]) == 2


_ROWS_HEAD = (
    "row_id,model,layers,hidden,heads,ffn_hidden,vocab,seq_len,gpu,gpus,gpus_per_node,system,tp,pp,global_batch,"
    "framework,metric,value,unit\n"
)


def _tp8_row(row_id: str, gpu: str, per_node: str, system: str = "") -> str:
    """A 2-layer toy on 16 GPUs, TP 8 (its all-reduces cross nodes of fewer than 8 GPUs)."""
    return (
        f"{row_id},toy,2,512,8,2048,1000,512,{gpu},16,{per_node},{system},8,1,16,megatron-core,iteration_time_s,1.0,s"
    )


def test_a_rows_gpus_per_node_is_its_clusters(tmp_path: Path) -> None:
    from podsim.api.validate import validate

    p = tmp_path / "rows.csv"
    rows = [
        _tp8_row("empty", "h100-80gb", ""),
        _tp8_row("n8", "h100-80gb", "8"),  # a DGX H100's own 8: the preset as it is
        _tp8_row("n4", "h100-80gb", "4"),  # TP 8 over two nodes of 4: half its ranks across the NICs
        _tp8_row("n2", "h100-80gb", "2"),  # over four nodes of 2
        _tp8_row("nvl72", "b200", "", "gb200-nvl72"),
        _tp8_row("tray4", "b200", "4", "gb200-nvl72"),  # the rack's 4-GPU trays: still one NVLink domain
    ]
    p.write_text(_ROWS_HEAD + "\n".join(rows) + "\n")
    t = {c.row_id: c.predicted for c in validate(rows=p, jobs=1).checks}
    assert t["n8"] == t["empty"] and t["tray4"] == t["nvl72"]
    # an NVLink all-reduce (450 GB/s a GPU) becomes one over the NICs (50 GB/s) for part of the
    # way: the step takes longer, and longer still with 2 GPUs a node
    assert t["empty"] < t["n4"] < t["n2"]
    # 16 GPUs do not fill nodes of 6: refused, naming the count, not run on 8-GPU nodes
    p.write_text(_ROWS_HEAD + _tp8_row("n6", "h100-80gb", "6") + "\n")
    said = r"rows.csv: --rows: 1 of your rows cannot run as written; the first: n6: gpus_per_node 6: 16 GPUs do not"
    with pytest.raises(InputError, match=said):
        validate(rows=p, jobs=1)


def test_validate_reads_a_rows_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from podsim.api.validate import validate
    from podsim.validation import rows as rows_module

    p = tmp_path / "rows.csv"
    p.write_text(_ROWS_HEAD + _tp8_row("r", "h100-80gb", "") + "\n")
    reads: list[str] = []
    real = rows_module.read_text

    def counted(path, what="file"):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return real(path, what)

    monkeypatch.setattr(rows_module, "read_text", counted)
    assert len(validate(rows=p, jobs=1).checks) == 1
    assert reads == [str(p)]


def test_reported_rows_are_consistent_with_nemos_flop_count() -> None:
    # every reported NeMo row pair: TFLOP/s per GPU = tokens/s per GPU x model FLOPs per token as
    # the table counts them: s l h^2 (12 + 12 g/a + 6 m f/h + c s/h) + 6 s h V per sequence of s,
    # m = 3 matrices (SwiGLU) or 2, c = 6 (causal, Megatron-Bridge 25.11) or 12 (full, NeMo
    # 24.07) -- a check of the transcription that does not use podsim's own FLOP code
    rows = {r["row_id"]: r for r in shipped_rows(("reported",))}
    pairs = [(rows[k], rows[k[:-4] + "_tflops"]) for k in rows if k.endswith("_tok") and k[:-4] + "_tflops" in rows]
    assert len(pairs) >= 25
    for tok, tfl in pairs:
        s, l, h = float(tok["seq_len"]), float(tok["layers"]), float(tok["hidden"])
        g, a, f, V = float(tok["kv_heads"]), float(tok["heads"]), float(tok["ffn_hidden"]), float(tok["vocab"])
        m = 3 if tok["activation"] == "swiglu" else 2
        c = 6 if tok["flops_count"] == "causal" else 12
        per_token = l * h * h * (12 + 12 * g / a + 6 * m * f / h + c * s / h) + 6 * h * V
        assert float(tok["value"]) * per_token / 1e12 == pytest.approx(float(tfl["value"]), rel=0.02), tok["row_id"]


def test_reported_rows_spot_values() -> None:
    # read off the Megatron-Bridge 25.11 performance summary tables
    rows = {r["row_id"]: r for r in shipped_rows(("reported",))}
    r = rows["mb2511_llama3_8b_gb200_8gpu_fp8cs_tok"]
    assert (r["gpu"], r["gpus"], r["global_batch"], r["micro_batch"], r["value"]) == ("gb200", "8", "128", "2", "31508")
    r = rows["mb2511_llama31_405b_h100_1024gpu_fp8cs_tflops"]
    assert (r["tp"], r["pp"], r["cp"], r["vpp"], r["value"]) == ("8", "8", "2", "8", "737")
    r = rows["mb260401_pretrain_llama3_70b_gb300_64gpu_nvfp4_tok"]  # 26.04.01 archive
    assert (r["precision"], r["pp"], r["vpp"], r["value"]) == ("nvfp4", "4", "5", "7296")
    r = rows["nemo2407_llama2_70b_h100_64gpu_fp8_tok"]  # NeMo 24.07 table
    assert (r["tp"], r["pp"], r["vpp"], r["global_batch"], r["value"]) == ("4", "4", "20", "128", "1707")
    assert all(r["set"] == "reported" for r in rows.values())
    assert all(
        r["framework"] in ("megatron-bridge", "nemo")
        for r in rows.values()
        if not r["row_id"].startswith("infer_") and not r.get("stack") and r.get("kind") != "goodput"
    )
    # LLM inference rows (reported_inference.csv): NVIDIA NIM 1.8.0's Llama 3.3 70B on 2 H100s in fp8, one
    # request of 5,000 + 500 tokens: 18.58 ms between tokens
    r = next(
        r
        for r in rows.values()
        if r["row_id"].startswith("infer_")
        and r["engine"].startswith("NVIDIA NIM")
        and r["metric"] == "tpot_s"
        and r["prompt_tokens"] == "5000"
    )
    assert (r["gpu"], r["tp"], r["precision"], r["batch"], r["value"]) == ("h100-80gb", "2", "fp8", "1", "0.01858")


def test_optional_shape_columns_express_qwen3_moe() -> None:
    # Qwen3-30B-A3B (its model card: 30.5B parameters in all): 48 layers, hidden 2048, 32 query
    # heads of 128 (not 2048 / 32), 4 KV heads, 128 experts of width 768, top 8, vocab 151,936
    row = {
        "row_id": "q",
        "model": "Qwen3 30B A3B",
        "layers": "48",
        "hidden": "2048",
        "heads": "32",
        "kv_heads": "4",
        "head_dim": "128",
        "ffn_hidden": "6144",
        "moe_ffn_hidden": "768",
        "experts": "128",
        "top_k": "8",
        "vocab": "151936",
        "seq_len": "4096",
        "activation": "swiglu",
    }
    m = model_of(row)
    assert m.dhead == 128 and m.moe_ffn == 768 and m.experts == 128
    assert m.total_params() / 1e9 == pytest.approx(30.5, rel=0.01)


def test_parallel_rows_give_the_serial_results() -> None:
    from podsim.validation import run_validation

    serial, s0 = run_validation(only="nccl_", jobs=1)
    parallel, s1 = run_validation(only="nccl_", jobs=2)
    assert s0 == s1 == 0 and len(serial) == 4
    assert [(c.row_id, c.predicted) for c in serial] == [(c.row_id, c.predicted) for c in parallel]


def test_count_tells_each_row_done() -> None:
    for jobs in (1, 2):
        seen: list[tuple[int, int]] = []
        checks, _ = run_validation(only="nccl_", jobs=jobs, count=lambda d, t: seen.append((d, t)))
        assert len(checks) == 4
        assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]


def _alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` started at ``start`` (its /proc stat field 22) still runs."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"


def _children(pid: int) -> dict[int, str]:
    """The child processes of ``pid``: their pids and start times."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out[int(d.name)] = fields[19]
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_stops_validate_and_its_workers() -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during `podsim validate
    --jobs 2` ends it with 130 and one line, and its two workers with it -- not after the
    queued rows.  Times are generous: what is asserted is that everything ends."""
    import os
    import pty
    import re
    import select
    import signal
    import subprocess
    import sys
    import time

    import podsim

    env = {**os.environ, "PYTHONPATH": str(Path(podsim.__file__).resolve().parents[1])}
    term, tty = pty.openpty()  # stderr a terminal: the progress bar shows
    proc = subprocess.Popen(
        [sys.executable, "-m", "podsim", "validate", "--jobs", "2"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=tty,
        env=env,
        start_new_session=True,
    )
    os.close(tty)
    said = b""

    def read(seconds: float) -> None:
        nonlocal said
        if select.select([term], [], [], seconds)[0]:
            try:
                said += os.read(term, 65536)
            except OSError:  # the other end closed
                time.sleep(seconds)

    try:
        deadline = time.monotonic() + 300
        while not re.search(rb"validated [1-9]\d*/\d+ rows", said):
            assert proc.poll() is None, said.decode(errors="replace")
            assert time.monotonic() < deadline, "no row done in 300 s"
            read(0.5)
        workers = _children(proc.pid)
        assert len(workers) >= 2, workers  # the two workers (and perhaps a resource tracker)
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=60)
        for _ in range(20):
            read(0.05)
        deadline = time.monotonic() + 30
        while any(_alive(p, s) for p, s in workers.items()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p, s in workers.items() if _alive(p, s)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(term)
    text = said.decode(errors="replace")
    assert rc == 130, text
    assert not left, f"workers {left} still run"
    assert "podsim: interrupted" in text and "Traceback" not in text, text
    assert proc.stdout is not None and proc.stdout.read() == b""
