"""The CNN kernel model that re-times captured convolution steps (podsim.compute.cnn_kernels):
its formulas against hand-derived times, and the shipped fit within physical bounds."""

from __future__ import annotations

import pytest

from podsim.compute.cnn_kernels import CONV_PRECISIONS, PASSES, fitted, from_dict
from podsim.hardware.gpu import get_gpu


def _fit(max_: float = 0.5, knee: float = 1e-9, penalty: float = 2.0, fixed: float = 1000.0):  # type: ignore[no-untyped-def]
    one = {"max": max_, "knee": knee, "stride_penalty": penalty, "fixed_ns": fixed}
    return from_dict(
        {
            "conv": {p: {s: dict(one) for s in PASSES} for p in CONV_PRECISIONS},
            "norm": {"fwd": {"max": 0.5, "knee": 64}, "bwd": {"max": 0.25, "knee": 0}},
            "elementwise": 0.8,
            "elementwise_fixed_ns": 500,
        },
        "test",
    )


def test_a_convolution_pass_is_its_implicit_gemm_at_the_fitted_share_of_the_peak() -> None:
    h100 = get_gpu("h100")
    fit = _fit()
    # 256 x 256 x (256 x 9): 2 * 256 * 256 * 2304 FLOPs at half the TF32 peak (FLOP/ns), + 1 us
    flops = 2 * 256 * 256 * 2304
    want = flops / (h100.peak_tflops["tf32"] * 1000 * 0.5) + 1000
    assert fit.conv_ns(h100, "tf32", "fwd", 256, 256, 256, 9, 0, False) == pytest.approx(want, rel=1e-6)
    # bf16 / fp16 run at the bf16 peak; a strided convolution takes the penalty (2x) before the fixed time
    want_half = flops / (h100.peak_tflops["bf16"] * 1000 * 0.5)
    assert fit.conv_ns(h100, "half", "bwd_data", 256, 256, 256, 9, 0, True) == pytest.approx(
        2 * want_half + 1000, rel=1e-6
    )


def test_three_input_channels_are_padded_to_eight() -> None:
    # ResNet's stem (3 channels, 7 x 7): tensor cores take K = 8 x 49, not 3 x 49
    h100 = get_gpu("h100")
    fit = _fit(fixed=0.0)
    m, n = 802_816, 64
    want = 2 * m * n * (8 * 49) / (h100.peak_tflops["tf32"] * 1000 * 0.5)
    assert fit.conv_ns(h100, "tf32", "fwd", m, n, 3, 49, 0, False) == pytest.approx(want, rel=1e-6)


def test_a_small_convolution_is_bound_by_its_bytes() -> None:
    # 1 x 1 x 1: no FLOPs to speak of; 80 MB at 0.8 of the H100's 3,350 GB/s = 29,850.7 ns (+ 500 floor)
    h100 = get_gpu("h100")
    assert h100.hbm_bandwidth == pytest.approx(3350.0)
    fit = _fit(fixed=0.0)
    assert fit.conv_ns(h100, "tf32", "fwd", 1, 1, 1, 1, 80e6, False) == pytest.approx(80e6 / (3350 * 0.8) + 500)


def test_batch_norm_moves_its_tensors_at_a_channel_dependent_bandwidth() -> None:
    h100 = get_gpu("h100")
    fit = _fit()
    x = 100e6  # bytes of the input
    # forward: 2 tensors at 0.5 x 64 / (64 + 64) = 0.25 of 3,350 GB/s; backward: 3 tensors at 0.25
    assert fit.norm_ns(h100, "fwd", 64, x) == pytest.approx(2 * x / (3350 * 0.25))
    assert fit.norm_ns(h100, "bwd", 64, x) == pytest.approx(3 * x / (3350 * 0.25))
    assert fit.norm_ns(h100, "fwd", 1024, x) < fit.norm_ns(h100, "fwd", 64, x)


def test_the_shipped_fit_is_physical() -> None:
    fit = fitted()
    assert "conv_kernels" in fit.source
    assert 0 < fit.elementwise <= 1 and 0 <= fit.elementwise_fixed_ns < 10_000
    for p in fit.conv.values():
        assert 0 < p.max <= 1 and p.knee >= 0 and p.stride_penalty >= 1 and 0 <= p.fixed_ns < 50_000
    for top, knee in fit.norm.values():
        assert 0 < top <= 1 and knee >= 0


def test_the_shipped_fit_is_what_the_fit_script_makes_of_the_shipped_measurements(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "fit.yaml"
    csv = "benchmarks/gpu/runs/conv_kernels/h200.csv"
    subprocess.run(
        [sys.executable, "scripts/fit_cnn_kernels.py", csv, "--gpu", "h200", "--out", str(out)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    made = yaml.safe_load(out.read_text())
    shipped = yaml.safe_load((root / "src/podsim/compute/tables/cnn_kernels.yaml").read_text())
    assert made == shipped


def test_the_kernel_benchmark_runs_on_tiny_shapes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # the GPU script's code path on the CPU (--quick): every part writes its rows, with provenance
    pytest.importorskip("torch")
    import csv
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "k.csv"
    subprocess.run(
        [sys.executable, "benchmarks/gpu/conv_kernels.py", "--quick", "--out", str(out)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    lines = out.read_text().splitlines()
    assert any(line.startswith("# torch:") for line in lines)
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    kinds = {r["kind"] for r in rows}
    assert {"conv_fwd", "conv_bwd_data", "conv_bwd_weight", "gemm", "batch_norm_fwd", "relu"} <= kinds
    assert all(r["status"] == "ok" and int(r["kernel_ns"]) > 0 for r in rows)
