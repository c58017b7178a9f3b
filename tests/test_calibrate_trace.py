"""``podsim calibrate trace DIR``: a stack's GEMM and attention efficiencies and elementwise
traffic read off a profiled training step (PyTorch profiler / Kineto traces).

The traces are built here, kernel by kernel, in the Chrome-trace form torch.profiler exports: a
planted stack's kernel times per category (podsim's step at relative efficiency 1, divided by
the planted efficiency), so the read values must come back as planted."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from podsim.api.calibrate_trace import GROUPS, TraceStep, calibrate_trace, predicted_categories
from podsim.cli import main
from podsim.compute.steps import read_steps, shipped_path
from podsim.errors import InputError
from podsim.llm.model import get_model
from podsim.stacks.stack import load_stack

STEP = TraceStep(get_model("llama3-8b"), "h100-80gb", seq_len=2048, micro_batch=1, layers=2)
FLAGS = ["--model", "llama3-8b", "--gpu", "h100", "--seq-len", "2048", "--layers", "2"]
PLANTED = {"gemm_efficiency": 0.6, "attention_efficiency": 0.5, "elementwise_traffic": 2.5}


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": dict(args)}


def _trace(ms: dict[str, float], scale: float = 1.0) -> dict:
    """One profiled step whose kernels take ``ms`` per group (GEMM, attention forward and
    backward, memory-bound), each kernel launched by the host with the operator around it that
    the breakdown reads (times in us, as Kineto writes them)."""
    ev = []
    kernels = [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "aten::mm", 1, ms["gemm"]),
        ("flash_fwd_kernel", "aten::_scaled_dot_product_flash_attention", 1, ms["attention_fwd"]),
        (
            "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
            "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
            2,
            ms["attention_bwd"],
        ),
        ("at::native::vectorized_elementwise_kernel<mul>", "aten::mul", 1, ms["memory"]),
    ]
    t = 10.0
    for corr, (kernel, op, tid, dur_ms) in enumerate(kernels, start=1):
        ev.append(_x(op, "cpu_op", t, 4, tid))
        ev.append(_x("cudaLaunchKernel", "cuda_runtime", t + 1, 2, tid, correlation=corr))
        dur = dur_ms * 1e3 * scale
        ev.append({"ph": "X", "name": kernel, "cat": "kernel", "ts": t + 5, "dur": dur, "pid": 0, "tid": 7,
                   "args": {"correlation": corr}})  # fmt: skip
        t += 10 + dur
    return {"traceEvents": [_x("ProfilerStep#3", "user_annotation", 0, t), *ev]}


def _planted_ms() -> dict[str, float]:
    """The planted stack's kernel ms: podsim's at relative efficiency 1 over the planted values."""
    neutral = load_stack("torchtitan").with_values({k: 1.0 for k in GROUPS})
    ideal = predicted_categories(STEP, neutral)

    def group(key: str) -> float:
        return sum(ideal.get(c, 0.0) for c in GROUPS[key])

    attn = {c: ideal.get(c, 0.0) / PLANTED["attention_efficiency"] for c in ("attention_fwd", "attention_bwd")}
    return {
        "gemm": group("gemm_efficiency") / PLANTED["gemm_efficiency"],
        **attn,
        "memory": group("elementwise_traffic") * PLANTED["elementwise_traffic"],
    }


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """Two ranks' traces, one plain and one gzipped, 10% apart (their mean is read)."""
    d = tmp_path / "traces"
    d.mkdir()
    ms = _planted_ms()
    (d / "rank0.pt.trace.json").write_text(json.dumps(_trace(ms, 0.95)))
    with gzip.open(d / "rank1.pt.trace.json.gz", "wt") as f:
        f.write(json.dumps(_trace(ms, 1.05)))
    (d / "notes.txt").write_text("not a trace")
    return d


def test_the_planted_values_come_back(traces: Path) -> None:
    cal = calibrate_trace(traces, STEP, "torchtitan")
    assert cal.ok, cal.fit.refusal
    for key, want in PLANTED.items():
        assert cal.fit.fitted[key] == pytest.approx(want, rel=1e-6), key
    assert all(abs(e) < 1e-6 for e in cal.fit.after)
    assert "host_ns" not in cal.fit.fitted and "fp8_overhead" not in cal.fit.fitted
    assert "read off 2 profiled step(s)" in cal.note


def test_cli_writes_a_stack_that_predicts_the_traced_step(traces: Path, tmp_path: Path, capsys) -> None:
    """Measure (here: plant), calibrate from the trace, predict: the written stack keeps the
    base's Ampere entries and, on the H100, times the traced step's groups as measured."""
    out = tmp_path / "ours.yaml"
    rc = main(["calibrate", "trace", str(traces), "--base", "torchtitan", "--out", str(out), *FLAGS])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "fitted gemm_efficiency" in text and "a trace does not measure it" in text and "GEMMs ms" in text
    data = yaml.safe_load(out.read_text())
    assert data["base"] == "torchtitan"
    assert data["training"]["gemm_efficiency"] == {"default": pytest.approx(0.6), "ampere": 1.0}
    assert data["sources"]["gemm_efficiency"].startswith("fitted by podsim calibrate trace")
    ours = load_stack(str(out))
    ms, got = _planted_ms(), predicted_categories(STEP, ours)
    assert got["gemm"] == pytest.approx(ms["gemm"], rel=1e-4)
    assert got["attention_fwd"] + got["attention_bwd"] == pytest.approx(ms["attention_fwd"] + ms["attention_bwd"])


def test_podsims_own_h200_trace_is_read_as_its_steps_file_describes_it() -> None:
    """The shipped trace is the profiled step of the first configuration of the shipped H200
    steps (llama3-8b, 4 layers, 2048 tokens, batch 1): its GEMM and attention ms are that row's."""
    row = next(r for r in read_steps(shipped_path("h200")).rows if r.ok)
    assert (row.model, row.layers, row.seq_len, row.micro_batch) == ("llama3-8b", 4, 2048, 1)
    step = TraceStep(get_model("llama3-8b"), "h200", seq_len=2048, layers=4)
    cal = calibrate_trace("shipped:h200", step, "megatron-core")
    assert cal.ok and set(cal.fit.fitted) == set(GROUPS)
    got = dict(zip([r["metric"] for r in cal.runs], cal.measured))
    assert got["GEMMs ms"] == pytest.approx(row.category_ms["gemm"], abs=0.01)
    attn = row.category_ms["attention_fwd"] + row.category_ms["attention_bwd"]
    assert got["attention ms"] == pytest.approx(attn, abs=0.01)


def test_free_reads_only_the_groups_named(traces: Path) -> None:
    cal = calibrate_trace(traces, STEP, "torchtitan", free=["gemm_efficiency"])
    assert list(cal.fit.fitted) == ["gemm_efficiency"] and len(cal.measured) == 1
    with pytest.raises(InputError, match="'host_ns' is not read off a trace"):
        calibrate_trace(traces, STEP, "torchtitan", free=["host_ns"])


def test_out_of_range_is_refused_and_nothing_is_written(tmp_path: Path, capsys) -> None:
    """GEMMs 10x slower than podsim's ideal: an efficiency of 0.1, below the range: refused, with
    the hint that the flags may not describe the traced step."""
    ms = _planted_ms()
    ms["gemm"] *= 6.0
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_trace(ms)))
    out = tmp_path / "ours.yaml"
    rc = main(["calibrate", "trace", str(p), "--base", "torchtitan", "--out", str(out), *FLAGS])
    text = capsys.readouterr().out
    assert rc == 1 and "refused: gemm_efficiency read off the traces is 0.1" in text and "--layers" in text
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--model", "llama3-8b", "--gpu", "h100"], "a trace needs --seq-len"),
        (["--gpu", "h100", "--seq-len", "2048"], "a trace needs --model"),
        (["--model", "llama3-8b", "--seq-len", "2048"], "a trace needs --gpu"),
        ([*FLAGS, "--max-num-seqs", "64"], "--max-num-seqs is a flag of a serving run's replay"),
    ],
)
def test_missing_or_foreign_flags_are_clear_errors(traces: Path, tmp_path: Path, capsys, argv, words) -> None:
    rc = main(["calibrate", "trace", str(traces), "--base", "torchtitan", "--out", str(tmp_path / "o.yaml"), *argv])
    err = capsys.readouterr().err
    assert rc != 0 and words in err and "Traceback" not in err


def test_a_cpu_capture_and_an_empty_folder_are_refused(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu.json"
    ev = [_x("ProfilerStep#1", "user_annotation", 0, 100), _x("aten::mm", "cpu_op", 10, 50)]
    cpu.write_text(json.dumps({"traceEvents": ev}))
    with pytest.raises(InputError, match="a CPU capture"):
        calibrate_trace(cpu, STEP, "torchtitan")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no PyTorch profiler traces"):
        calibrate_trace(empty, STEP, "torchtitan")


def test_trace_flags_are_refused_for_a_training_calibration(tmp_path: Path, capsys) -> None:
    rows = tmp_path / "runs.csv"
    rows.write_text("row_id\n")
    rc = main(["calibrate", "training", str(rows), "--base", "torchtitan", "--out", str(tmp_path / "o.yaml"),
               "--seq-len", "2048"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc != 0 and "--seq-len describes a traced step" in err
