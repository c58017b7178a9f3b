"""Measured training steps: the benchmark script's CPU path, the profiled step's breakdown, the CSV's
reader, podsim's single-GPU prediction, the in-step efficiency and ``podsim validate`` on them."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podsim.capture.breakdown import CATEGORIES, classify, step_breakdown
from podsim.cli import main
from podsim.compute.steps import COLUMNS, gpu_key_for_device, read_steps, shipped_path, step_row, write_steps
from podsim.compute.table import read_table, shipped_table
from podsim.errors import InputError
from podsim.llm.stack import Stack, measured_values
from podsim.validation import training_steps as sgs

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "training_steps.py"

# -- the profiled step's breakdown, on a hand-built CUDA trace ---------------------------------


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": dict(args)}


def _launch(ts: float, corr: int, tid: int = 1, cat: str = "cuda_runtime") -> dict:
    return _x("cudaLaunchKernel", cat, ts, 2, tid, correlation=corr)


def _kernel(name: str, ts: float, dur: float, corr: int, cat: str = "kernel", stream: int = 7) -> dict:
    return {
        "ph": "X",
        "name": name,
        "cat": cat,
        "ts": ts,
        "dur": dur,
        "pid": 0,
        "tid": stream,
        "args": {"correlation": corr},
    }


def cuda_trace() -> dict:
    """One step: forward regions on thread 1, the backward on thread 2 (linked to the forward by
    sequence numbers), the optimizer, a Triton kernel launched from Python, a copy, and a kernel
    launched before the step.  The expected breakdown is worked out by hand in the test."""
    ev = [
        _x("ProfilerStep#5", "user_annotation", 0, 1000),
        _x("podsim::norm", "user_annotation", 10, 20),
        _x("aten::rms_norm", "cpu_op", 12, 15, **{"Sequence number": 1}),
        _launch(14, 101),
        _x("podsim::qkv", "user_annotation", 40, 30),
        _x("aten::linear", "cpu_op", 41, 28),
        _x("aten::mm", "cpu_op", 42, 20, **{"Sequence number": 2}),
        _launch(45, 102),
        _x("aten::_to_copy", "cpu_op", 63, 5),
        _launch(64, 103),
        _x("podsim::attention", "user_annotation", 80, 40),
        _x("aten::scaled_dot_product_attention", "cpu_op", 81, 30),
        _x("aten::_scaled_dot_product_flash_attention", "cpu_op", 82, 25, **{"Sequence number": 3}),
        _launch(85, 104),
        _x("aten::reshape", "cpu_op", 112, 6),
        _launch(114, 105),
        _x("podsim::swiglu", "user_annotation", 130, 10),
        _x("aten::mul", "cpu_op", 131, 8, **{"Sequence number": 4}),
        _launch(132, 106),
        # the backward, on the autograd thread
        _x("autograd::engine::evaluate_function: MulBackward0", "cpu_op", 300, 20, 2, **{"Sequence number": 4}),
        _x("aten::mul", "cpu_op", 302, 10, 2),
        _launch(305, 107, 2),
        _x(
            "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
            "cpu_op",
            330,
            30,
            2,
            **{"Sequence number": 3},
        ),
        _launch(335, 108, 2),
        _x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 370, 20, 2, **{"Sequence number": 2}),
        _x("aten::mm", "cpu_op", 372, 10, 2),
        _launch(375, 109, 2),
        _x("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "cpu_op", 400, 10, 2),
        _x("aten::add_", "cpu_op", 401, 5, 2),
        _launch(402, 110, 2),
        # the optimizer, a Triton kernel launched from Python, a copy
        _x("Optimizer.step#AdamW.step", "user_annotation", 500, 50),
        _x("aten::_fused_adamw_", "cpu_op", 502, 40),
        _launch(505, 111),
        _launch(600, 112, cat="cuda_driver"),
        _launch(610, 113),
        # before the step: not counted
        _launch(-50, 99),
        _kernel("at::native::rms_norm_kernel", 100, 10, 101),
        _kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 110, 100, 102),
        _kernel("at::native::unrolled_elementwise_kernel<copy>", 210, 20, 103),
        _kernel("flash_fwd_kernel", 230, 50, 104),
        _kernel("at::native::elementwise_kernel<copy>", 280, 10, 105),
        _kernel("at::native::vectorized_elementwise_kernel<mul>", 290, 5, 106),
        _kernel("at::native::vectorized_elementwise_kernel<mul>", 400, 6, 107),
        _kernel("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", 410, 120, 108),
        _kernel("nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_NNT", 530, 200, 109),
        _kernel("at::native::vectorized_elementwise_kernel<add>", 735, 15, 110),
        _kernel("multi_tensor_apply_kernel<FusedAdamMathFunctor>", 750, 100, 111),
        _kernel("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", 840, 30, 112, stream=8),
        _kernel("Memcpy DtoD (Device -> Device)", 900, 5, 113, cat="gpu_memcpy"),
        _kernel("at::native::vectorized_elementwise_kernel<add>", -40, 30, 99),
    ]
    return {"traceEvents": ev}


def test_breakdown_of_a_hand_built_cuda_step() -> None:
    b = step_breakdown(cuda_trace())
    assert b.device == "cuda"
    assert b.kernels == 13  # the kernel launched before the step is not the step's
    want = {
        "gemm": 0.1 + 0.2,
        "attention_fwd": 0.05,
        "attention_bwd": 0.12,
        "attention_other": 0.01,
        "norm": 0.01 + 0.03,
        "swiglu": 0.005 + 0.006,
        "cast": 0.02,
        "grad_accumulate": 0.015,
        "optimizer": 0.1,
        "memcpy": 0.005,
    }
    for c in CATEGORIES:
        assert b.ms[c] == pytest.approx(want.get(c, 0.0), abs=1e-9), c
    # busy: the union of 100-295, 400-406, 410-730, 735-870 (two streams overlap 840-850), 900-905 us
    assert b.busy_ms == pytest.approx((195 + 6 + 320 + 135 + 5) / 1000)
    assert b.step_ms == pytest.approx(1.0)
    assert b.idle_ms == pytest.approx(1.0 - 0.661)
    assert b.host_ms == pytest.approx(0.612)  # the step's last launch (the copy's, at 610 us) ends at 612 us
    assert sum(b.ms.values()) == pytest.approx(b.busy_ms + 0.010)  # the overlap counted in both kernels


def test_breakdown_ignores_the_gpu_copy_of_the_step_and_an_empty_last_step() -> None:
    """On a GPU the profiler also writes the step annotation on the device's timeline
    (``gpu_user_annotation``, later than the host's) and may open an empty ``ProfilerStep#6`` at
    its last ``prof.step()``: neither is the step, whose breakdown stays the hand-built one."""
    doc = cuda_trace()
    doc["traceEvents"] += [
        _x("ProfilerStep#5", "gpu_user_annotation", 100, 805, tid=7),
        _x("ProfilerStep#6", "user_annotation", 1200, 0.8),
    ]
    b = step_breakdown(doc)
    assert b.kernels == 13
    assert b.step_ms == pytest.approx(1.0)
    assert b.ms["gemm"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    "kernel, context, backward, want",
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", [], False, "gemm"),
        ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", [], True, "gemm"),
        (
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1",
            [],
            False,
            "attention_fwd",
        ),
        (
            "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_6_64x128x128_4x2x1",
            [],
            True,
            "attention_bwd",
        ),
        ("triton_poi_fused_mul_silu_2", [], False, "swiglu"),
        ("triton_red_fused__log_softmax_nll_loss_forward_5", [], False, "cross_entropy"),
        (
            "multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 2>>",
            ["Optimizer.step#AdamW.step"],
            False,
            "optimizer",
        ),
        ("void at::native::elementwise_kernel<128, 2>", ["podsim::rope", "aten::mul"], False, "rope"),
        (
            "void at::native::elementwise_kernel<128, 2>",
            ["podsim::qkv", "aten::linear", "aten::_to_copy"],
            False,
            "cast",
        ),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", [], False, "other"),
    ],
)
def test_kernel_names_of_real_stacks_are_classified(kernel: str, context: list[str], backward: bool, want: str) -> None:
    assert classify(kernel, context, [], backward) == want


def test_breakdown_needs_a_profiled_step(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [_x("aten::mm", "cpu_op", 0, 5)]}))
    with pytest.raises(InputError, match="ProfilerStep"):
        step_breakdown(p)
    p.write_text("{not json")
    with pytest.raises(InputError, match="not a readable Chrome trace"):
        step_breakdown(p)


# -- the device name, the CSV and its errors ---------------------------------------------------


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "h100-80gb"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("cpu", None),
    ],
)
def test_device_names_map_to_podsim_gpus(name: str, key: str | None) -> None:
    assert gpu_key_for_device(name) == key


def _row(**kw: object) -> dict:
    base = {
        "gpu": "h100-80gb",
        "device_name": "NVIDIA H100 80GB HBM3",
        "model": "llama3-8b",
        "layers": 4,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "ffn_hidden": 14336,
        "vocab": 128256,
        "seq_len": 2048,
        "micro_batch": 1,
        "precision": "bf16",
        "mode": "eager",
        "attention": "flash",
        "optimizer": "fused",
        "checkpoint": "none",
        "status": "ok",
        "step_ms": 100.0,
    }
    base.update(kw)
    return base


def test_steps_csv_round_trip_keeps_provenance(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    write_steps(
        p,
        [_row(gemm_ms=60.0, idle_ms=1.5), _row(status="oom", step_ms=None)],
        {"device": "NVIDIA H100 80GB HBM3", "power_limit": "700.00 W", "date": "2026-11-26T00:00:00Z"},
    )
    s = read_steps(p)
    assert s.provenance["power_limit"] == "700.00 W" and s.provenance["device"] == "NVIDIA H100 80GB HBM3"
    assert [r.status for r in s.rows] == ["ok", "oom"]
    assert s.rows[0].category_ms["gemm"] == 60.0 and s.rows[0].idle_ms == 1.5
    assert math.isnan(s.rows[1].step_ms)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"layers": "four"}, "layers must be an integer from 1"),
        ({"mode": "jit"}, "mode must be one of eager, compile, got 'jit'"),
        ({"attention": "flex"}, "attention must be one of flash, cudnn, math, default"),
        ({"step_ms": "-3"}, "step_ms must be a number >= 0"),
        ({"step_ms": ""}, "an 'ok' row needs its step_ms"),
        ({"gemm_ms": "fast"}, "gemm_ms must be a number"),
    ],
)
def test_a_bad_steps_csv_is_a_clear_error(
    tmp_path: Path, change: dict, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow({k: v for k, v in {**_row(), **change}.items()})
    with pytest.raises(InputError, match=message) as e:
        read_steps(p)
    assert str(p) in str(e.value) and "row 2" in str(e.value)
    assert main(["kernels", "steps", "--steps", str(p)]) == 2
    err = capsys.readouterr().err
    assert message.split(" got")[0] in err and "Traceback" not in err


def test_a_steps_csv_without_its_columns_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("model,layers\nllama3-8b,4\n")
    with pytest.raises(InputError, match="missing column 'hidden'"):
        read_steps(p)


# -- podsim's prediction of a measured step ----------------------------------------------------


def test_the_predicted_layer_agrees_with_whole_layers_measured_on_an_h100() -> None:
    # podsim's step of 4 layers minus its step of 2 layers, optimizers aside, is two layers' forward
    # and backward;
    # the shipped H100 kernel table holds eager Llama 3 8B layers measured whole (rows no fit uses)
    measured = {
        (r.kernel, r.m, r.batch): r.time_us
        for r in read_table(shipped_table("h100-80gb"))
        if r.kernel.startswith("layer_") and r.note.startswith("llama3-8b ")
    }

    def step(**kw: object) -> tuple[float, float]:  # the step and its optimizer (us)
        res = sgs.predict(step_row({k: str(v) for k, v in _row(**kw).items()}))
        return res.iteration_time_s * 1e6, sum(k["step_us"] for k in res.kernels["optimizer"])

    for seq, mb in ((2048, 1), (4096, 1), (8192, 1), (2048, 4)):
        (four, opt4), (two, opt2) = step(seq_len=seq, micro_batch=mb), step(seq_len=seq, micro_batch=mb, layers=2)
        layer_us = ((four - opt4) - (two - opt2)) / 2  # the optimizer's work grows with the parameters
        want = measured[("layer_fwd", seq, mb)] + measured[("layer_bwd", seq, mb)]
        assert layer_us == pytest.approx(want, rel=0.1), (seq, mb)  # within 3% on 2026-11-26


def test_checkpointing_and_the_math_backend_cost_what_they_should() -> None:
    plain = sgs.predict(step_row({k: str(v) for k, v in _row(seq_len=4096).items()}))
    ckpt_row = step_row({k: str(v) for k, v in _row(seq_len=4096, checkpoint="full").items()})
    ckpt = sgs.predict(ckpt_row)
    # full recomputation re-runs each layer's forward once: the step grows by the layers' forward
    fwd_us = sum(k["step_us"] for k in plain.kernels["layer_forward"])
    assert (ckpt.iteration_time_s - plain.iteration_time_s) * 1e6 == pytest.approx(4 * fwd_us, rel=0.05)
    cats = sgs.predicted_categories(ckpt, ckpt_row)
    assert cats["gemm"] > 0 and cats["attention_fwd"] > 0 and cats["optimizer"] > 0
    math_row = step_row({k: str(v) for k, v in _row(seq_len=4096, attention="math").items()})
    assert sgs.predict_step_s(math_row) > plain.iteration_time_s  # s x s scores written and read


def test_a_cpu_row_is_not_predicted(tmp_path: Path) -> None:
    row = step_row({k: str(v) for k, v in _row(gpu="", device_name="cpu").items()})
    with pytest.raises(InputError, match="not a GPU podsim knows"):
        sgs.predict(row)


def _synthetic_rows(gemm_eff: float, attn_eff: float) -> list[dict]:
    """H100 rows whose measured GEMM and attention times are podsim's isolated kernel times
    divided by the given in-step efficiencies."""
    isolated = Stack.for_gpu("h100-80gb", gemm_efficiency=1.0, attention_efficiency=1.0)
    out = []
    for seq, attention in ((2048, "cudnn"), (4096, "cudnn"), (8192, "flash")):
        r = _row(seq_len=seq, attention=attention)
        pred = sgs.predicted_categories(
            sgs.predict(step_row({k: str(v) for k, v in r.items()}), isolated),
            step_row({k: str(v) for k, v in r.items()}),
        )
        r.update(
            gemm_ms=pred["gemm"] / gemm_eff,
            attention_fwd_ms=pred["attention_fwd"] / attn_eff,
            attention_bwd_ms=pred["attention_bwd"] / attn_eff,
        )
        out.append(r)
    return out


def test_in_step_efficiency_is_read_off_the_measured_kernels(tmp_path: Path) -> None:
    p = tmp_path / "h100-80gb.csv"
    write_steps(p, _synthetic_rows(0.8, 0.7), {"device": "NVIDIA H100 80GB HBM3"})
    got = sgs.in_step_efficiency(read_steps(p).rows, "h100-80gb")
    assert got == {
        "gemm_efficiency": pytest.approx(0.8, abs=1e-3),
        "attention_efficiency": pytest.approx(0.7, abs=1e-3),
    }


def test_measured_in_step_efficiency_is_the_shipped_rows_own() -> None:
    """A stack.yaml value 'measured' reads compute/tables/steps/in_step_efficiency.yaml, which must
    be what the shipped rows give now (python scripts/in_step_efficiency.py rewrites it)."""
    rows = read_steps(shipped_path("h200")).rows
    want = sgs.in_step_efficiency(rows, "h200")
    assert measured_values("h200", ["gemm_efficiency", "attention_efficiency"]) == want
    # measured on the H200 (docs/compute.md): GEMMs a little faster in the step than the compute
    # model's isolated kernels, fused attention slower
    assert 0.95 < want["gemm_efficiency"] < 1.15 and 0.7 < want["attention_efficiency"] < 0.95
    with pytest.raises(InputError, match="ships no measured training steps of b200"):
        measured_values("b200", ["attention_efficiency"])
    with pytest.raises(InputError, match="host_ns cannot be 'measured'"):
        measured_values("h200", ["host_ns"])


def test_podsim_validate_and_kernels_steps_read_a_steps_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "steps.csv"
    rows = _synthetic_rows(0.9, 0.85)
    rows.append(_row(status="skipped: budget (3 s left)", step_ms=None))
    write_steps(p, rows, {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-26T00:00:00Z", "torch": "2.13.0"})
    out = tmp_path / "v.json"
    assert main(["validate", "--rows", str(p), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    checks = doc["rows"] if "rows" in doc else doc["checks"]
    assert len(checks) == 3 and all(c["metric"] == "step_time_s" for c in checks)
    assert all(c["measured"] == pytest.approx(0.1) for c in checks)
    text = capsys.readouterr().out
    assert "llama3-8b 4L s2048 b1 eager cudnn fused" in text
    j = tmp_path / "k.json"
    assert main(["kernels", "steps", "--steps", str(p), "--json", str(j)]) == 0
    text = capsys.readouterr().out
    assert "in-step efficiency measured: gemm_efficiency 0.9" in text and "attention_efficiency 0.85" in text
    got = json.loads(j.read_text())
    assert got["in_step_efficiency"] == {
        "gemm_efficiency": pytest.approx(0.9, abs=1e-3),
        "attention_efficiency": pytest.approx(0.85, abs=1e-3),
    }
    assert len(got["rows"]) == 3 and set(got["rows"][0]["categories"]) == set(CATEGORIES)


# -- the benchmark script, --quick on the CPU ---------------------------------------------------


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("steps") / "quick.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--quiet", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_quick_run_writes_every_configuration_with_provenance(quick_run: Path) -> None:
    s = read_steps(quick_run)
    assert s.provenance["device"] == "cpu" and s.provenance["torch"] and s.provenance["date"].startswith("20")
    by = {(r.mode, r.attention, r.optimizer, r.checkpoint, r.seq_len, r.micro_batch): r for r in s.rows}
    assert len(s.rows) == 8
    assert by[("eager", "cudnn", "fused", "none", 64, 1)].status == "skipped: cudnn attention needs CUDA"
    ok = [r for r in s.rows if r.ok]
    assert len(ok) == 7 and all(r.step_ms > 0 and r.gpu == "" for r in ok)
    for r in ok:  # every part of the model is found in the profiled step
        for c in ("gemm", "attention_fwd", "attention_bwd", "cross_entropy", "optimizer"):
            assert r.category_ms[c] > 0, (r.row_id, c)
        if r.mode == "eager":  # compiled code drops the model's regions: names only there
            for c in ("norm", "rope", "swiglu", "embedding", "attention_other"):
                assert r.category_ms[c] > 0, (r.row_id, c)
    compiled = by[("compile", "flash", "fused", "none", 64, 1)]
    assert compiled.values["compile_backend"] == "aot_eager" and float(compiled.values["compile_s"]) > 0
    # checkpointing re-runs each block's forward: more operators in the same step
    plain, ckpt = by[("eager", "flash", "fused", "none", 64, 1)], by[("eager", "flash", "fused", "full", 64, 1)]
    assert int(ckpt.values["kernels"]) > int(plain.values["kernels"])
    foreach = by[("eager", "flash", "foreach", "none", 64, 1)]
    assert int(foreach.values["kernels"]) > int(plain.values["kernels"])  # AdamW op by op, not one fused op
    side = json.loads(quick_run.with_suffix(".json").read_text())
    assert side["provenance"]["device"] == "cpu" and side["configs"]


def test_quick_run_traces_and_replays_the_first_configuration(quick_run: Path) -> None:
    row = next(r for r in read_steps(quick_run).rows if r.values.get("trace_step_ms"))
    traced, replayed = float(row.values["trace_step_ms"]), float(row.values["replay_ms"])
    # the replay of a one-device capture reproduces the captured step
    assert replayed == pytest.approx(traced, rel=0.05)


def test_quick_rows_measured_on_a_cpu_are_not_validated(quick_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a CPU run checks the tool, it measures no GPU: nothing to compare, which is an error that says why
    assert main(["validate", "--rows", str(quick_run)]) == 2
    err = capsys.readouterr().err
    assert "7 of your rows cannot run as written" in err and "not a GPU podsim knows" in err


def test_shipped_steps_join_the_fitted_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from podsim.validation import rows as vrows
    from podsim.validation import run_validation

    p = tmp_path / "h100-80gb.csv"
    write_steps(p, _synthetic_rows(0.9, 0.85)[:1], {"device": "NVIDIA H100 80GB HBM3"})
    monkeypatch.setattr(vrows, "shipped_steps", lambda: [read_steps(p)])
    checks, _skipped = run_validation(sets=("fitted",), only="steps_")
    assert [(c.set, c.metric, c.gpu) for c in checks] == [("fitted", "step_time_s", "h100-80gb")]


def test_the_example_shapes_are_llama_3s() -> None:
    from podsim.examples.llama import SHAPES

    # Meta's model cards: Llama 3 8B has 8.03 B parameters, Llama 3 70B 70.6 B
    assert SHAPES["llama3-8b"].params() / 1e9 == pytest.approx(8.03, abs=0.005)
    assert SHAPES["llama3-70b"].params() / 1e9 == pytest.approx(70.55, abs=0.05)
    assert SHAPES["llama3-8b"].head_dim == SHAPES["llama3-70b"].head_dim == 128


@pytest.mark.parametrize("script", ["training_steps.py", "inference_steps.py"])
def test_a_gpu_run_without_a_gpu_says_so(script: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    torch = __import__("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT.parent / script), "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "no CUDA device visible to PyTorch" in done.stderr
    assert "Traceback" not in done.stderr and not list(tmp_path.iterdir())


def test_merge_runs_prefers_the_first_measured_row_and_drops_a_wrong_breakdown(tmp_path: Path) -> None:
    """benchmarks/gpu/merge_runs.py on two hand-written runs: the first run's measured rows win,
    a row only the second measured comes from it (without its breakdown when so told), a
    configuration measured twice in one run (the traced repeat) stays two rows."""
    head = "gpu,mode,status,step_ms,busy_ms,kernels,gemm_ms,notes\n"
    run1 = tmp_path / "run1.csv"
    run2 = tmp_path / "run2.csv"
    run1.write_text(
        "# date: D1\n# command: c1\n"
        + head
        + "h200,eager,ok,10,9,5,4,\nh200,eager,ok,11,9,5,4,\nh200,compile,skipped: budget (3 s left),,,,,\n"
    )
    run2.write_text(
        "# date: D2\n# command: c2\n"
        + head
        + "h200,eager,ok,12,0,0,0,\nh200,eager,ok,12,0,0,0,\nh200,compile,ok,8,7,3,2,\n"
    )
    out = tmp_path / "merged.csv"
    script = ROOT / "benchmarks" / "gpu" / "merge_runs.py"
    cmd = [sys.executable, str(script), str(run1), str(run2), "--no-breakdown", str(run2), "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    text = out.read_text()
    assert "# run_1: D1, c1, 2 rows\n" in text
    assert "# run_2: D2, c2, 1 rows, profiled breakdown left out\n" in text
    rows = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
    assert [(r["mode"], r["step_ms"], r["busy_ms"], r["gemm_ms"]) for r in rows] == [
        ("eager", "10", "9", "4"),
        ("eager", "11", "9", "4"),
        ("compile", "8", "", ""),  # the step time stands, the breakdown does not
    ]
    assert rows[2]["notes"] == "from the run of D2 (its profiled breakdown left out)"
