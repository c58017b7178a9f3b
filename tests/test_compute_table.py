"""Measured-table compute mode: reading, interpolation, and the shipped H100 table against whole
layers measured on the same GPU (rows the interpolation never uses)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.compute.measure import write_rows
from podsim.compute.model import ComputeModel
from podsim.compute.table import (
    TableComputeModel,
    read_table,
    shipped_table,
    table_model,
)
from podsim.errors import InputError
from podsim.hardware.gpu import get_gpu
from podsim.llm import get_model
from podsim.llm.layout import Layout
from podsim.llm.model import with_overrides
from podsim.llm.ops import LayerCosts
from podsim.llm.stack import Stack

H100 = get_gpu("h100-80gb")


def _table(tmp_path: Path, rows: list[tuple]) -> Path:
    p = tmp_path / "t.csv"
    write_rows(p, rows)
    return p


def _small(tmp_path: Path) -> TableComputeModel:
    # GEMM rate 100 FLOP/ns at 1024^3 and 400 FLOP/ns at 4096^3 (m, n, k all grow together)
    t1 = 2 * 1024**3 / 100 / 1e3
    t4 = 2 * 4096**3 / 400 / 1e3
    rows = [
        ("gemm", "bf16", 1024, 1024, 1024, 1, t1, ""),
        ("gemm", "bf16", 4096, 4096, 4096, 1, t4, ""),
        ("memory", "bf16", 1 << 20, 1, 1, 1, 2.0, "copy"),
        ("memory", "bf16", 1 << 30, 1, 1, 1, 500.0, "copy"),
        ("attention_fwd", "bf16", 2048, 2048, 128, 8, 100.0, "causal"),
    ]
    return TableComputeModel.from_csv(_table(tmp_path, rows), H100)


def test_interpolation_hand_derived(tmp_path: Path) -> None:
    tm = _small(tmp_path)
    # exact at the measured points
    assert tm.gemm_ns(1024, 1024, 1024) == pytest.approx(2 * 1024**3 / 100)
    assert tm.gemm_ns(4096, 4096, 4096) == pytest.approx(2 * 4096**3 / 400)
    # 2048^3 lies halfway in log space on every axis: the grid's other six corners take the best
    # neighbour below (100), so log-rate = 1/8 log 400 + 7/8 log 100
    rate = math.exp(math.log(400) / 8 + 7 * math.log(100) / 8)
    assert tm.gemm_ns(2048, 2048, 2048) == pytest.approx(2 * 2048**3 / rate)
    # beyond the grid the edge's rate holds: time grows with the work
    assert tm.gemm_ns(8192, 8192, 8192) == pytest.approx(8 * tm.gemm_ns(4096, 4096, 4096))
    # memory: log-log interpolation between 1 MiB (2 us) and 1 GiB (500 us); beyond, 1 GiB's bandwidth
    mid = 1 << 25
    want = math.exp(math.log(2000) + (math.log(500_000) - math.log(2000)) * (25 - 20) / 10)
    assert tm.memory_ns(mid) == pytest.approx(want)
    assert tm.memory_ns(2 * mid, kernels=2) == pytest.approx(2 * want)
    assert tm.memory_ns(1 << 31) == pytest.approx(1_000_000)
    # attention: the measured point, then the same FLOP rate for twice the heads
    assert tm.attention_ns(8, 2048, 2048, 128) == pytest.approx(100_000)
    assert tm.attention_ns(16, 2048, 2048, 128) == pytest.approx(200_000)
    with pytest.raises(InputError, match="no attention_bwd rows"):
        tm.attention_ns(8, 2048, 2048, 128, backward=True)


def test_bad_tables(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("kernel,dtype,m,n,k,batch\ngemm,bf16,1,1,1,1\n")
    with pytest.raises(InputError, match="missing column.*time_us"):
        read_table(p)
    p.write_text("kernel,dtype,m,n,k,batch,time_us\ngemm,bf16,1,1,1,1,-3\n")
    with pytest.raises(InputError, match="row 2: column time_us is '-3', expected a positive number"):
        read_table(p)
    p.write_text("kernel,dtype,m,n,k,batch,time_us\nconv,bf16,1,1,1,1,3\n")
    with pytest.raises(InputError, match="kernel 'conv' is not one of"):
        read_table(p)
    with pytest.raises(InputError, match="no such kernel table"):
        read_table(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="no gemm rows for fp16 .it has bf16"):
        TableComputeModel.from_csv(
            _table(tmp_path, [("gemm", "bf16", 8, 8, 8, 1, 1.0, ""), ("memory", "bf16", 8, 1, 1, 1, 1.0, "")]),
            H100,
            "fp16",
        )
    with pytest.raises(InputError, match="no measured kernel table ships for a100-80gb"):
        table_model("measured", "a100-80gb")


def _layer_predictions(cm) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    """(measured, predicted) us for every whole layer timed on the H100 (eager PyTorch: no
    dropout, no biases, cuDNN flash attention)."""
    out = []
    for r in read_table(shipped_table("h100-80gb")):
        if not r.kernel.startswith("layer_"):
            continue
        name, _, tp = r.note.split()[0].partition("/tp")
        tp = int(tp or 1)
        m = with_overrides(get_model(name), dropout=0.0, bias=False)
        assert m.hidden == r.n and m.ffn // tp == r.k
        lay = Layout(tp, tp=tp, global_batch=r.batch, micro_batch=r.batch, seq_len=r.m)
        lc = LayerCosts(m, lay, cm, True, stack=Stack(host_ns=0))  # the kernels alone, as measured
        steps = lc.forward(False) if r.kernel == "layer_fwd" else lc.backward(False)
        out.append((r.time_us, sum(s.ns for s in steps if s.collective is None) / 1e3))
    return out


def test_shipped_h100_table_predicts_measured_layers() -> None:
    pairs = _layer_predictions(table_model("measured", "h100-80gb"))
    assert len(pairs) == 32
    errs = [abs(p / m - 1) for m, p in pairs]
    assert sum(errs) / len(errs) < 0.07
    assert max(errs) < 0.20


@pytest.mark.parametrize("fit", ["a100-80gb", "h100-80gb"])
def test_roofline_predicts_h100_layers_it_was_not_fitted_on(fit: str) -> None:
    # neither fit saw a whole layer: the A100 fit came from Megatron's Table 1 rows on A100s,
    # the H100 fit from single kernels; both must land within a few percent of the layers
    pairs = _layer_predictions(ComputeModel.for_gpu(H100, **get_gpu(fit).efficiency))
    errs = [abs(p / m - 1) for m, p in pairs]
    assert sum(errs) / len(errs) < 0.07
    assert max(errs) < 0.20


def test_cli_kernel_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "4096",
                "--recompute",
                "full",
                "--fsdp",
                "--kernel-table",
                "measured",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    import json

    d = json.loads(out.read_text())
    assert d["compute_model"].startswith("kernel table") and d["iteration_time_s"] > 0
    assert (
        main(
            [
                "llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "a100",
                "--gpus",
                "8",
                "--global-batch",
                "16",
                "--kernel-table",
                "measured",
            ]
        )
        == 2
    )
    assert "no measured kernel table ships for a100-80gb" in capsys.readouterr().err


def test_measure_on_cpu_writes_a_readable_table(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    from podsim.compute import measure as meas

    rows = list(meas.measure_gemm(torch, "cpu", "fp32", (16, 32), batched=False))
    rows += list(meas.measure_memory(torch, "cpu", "fp32", True))
    p = _table(tmp_path, rows)
    tm = TableComputeModel.from_csv(p, H100, "fp32")
    assert len(read_table(p)) == len(rows) and tm.gemm_ns(16, 16, 16) > 0


def test_fit_recovers_a_known_roofline(tmp_path: Path) -> None:
    from podsim.compute.fit import fit_to_table

    truth = ComputeModel(
        H100, "bf16", gemm_max=0.7, gemm_knee=120, memory_max=0.9, flash_max=0.6, flash_knee=60, launch_ns=2000
    )
    rows = [
        ("gemm", "bf16", m, n, k, 1, truth.gemm_ns(m, n, k) / 1e3, "")
        for m in (256, 1024, 4096, 16384)
        for n in (128, 1024, 8192)
        for k in (128, 2048, 8192)
    ]
    rows += [("memory", "bf16", b, 1, 1, 1, truth.memory_ns(b) / 1e3, "") for b in (1 << 16, 1 << 22, 1 << 28, 1 << 32)]
    rows += [
        (kind, "bf16", s, s, d, 16, truth.attention_ns(16, s, s, d, kind == "attention_bwd") / 1e3, "")
        for kind in ("attention_fwd", "attention_bwd")
        for s in (1024, 8192)
        for d in (64, 128)
    ]
    params, errs = fit_to_table(read_table(_table(tmp_path, rows)), H100)
    assert all(e < 0.02 for e in errs.values()), errs
    fitted = ComputeModel(H100, "bf16", **params)
    assert fitted.gemm_ns(8192, 8192, 8192) == pytest.approx(truth.gemm_ns(8192, 8192, 8192), rel=0.02)


def test_fp8_runs_only_gemms_in_fp8() -> None:
    # Transformer Engine's fp8 recipe: GEMMs in fp8, attention, activations and communication in bf16
    bf, f8 = ComputeModel.for_gpu(H100, "bf16"), ComputeModel.for_gpu(H100, "fp8")
    assert f8.attention_ns(32, 4096, 4096, 128) == bf.attention_ns(32, 4096, 4096, 128)
    assert f8.elem_bytes == 2 and f8.memory_ns(1e9) == bf.memory_ns(1e9)
    # fp8 GEMMs have their own fit (fp8_gemm_max 0.731, knee 151 vs bf16 0.793, knee 91): at
    # 8192^3 the speed-up is 2 x (0.731 / 0.793) x ((8192 / 8343) / (8192 / 8283))^3 = 1.80
    expect = 2 * (0.731 / 0.793) * ((8192 / (8192 + 151)) / (8192 / (8192 + 91))) ** 3
    assert bf.gemm_ns(8192, 8192, 8192) / f8.gemm_ns(8192, 8192, 8192) == pytest.approx(expect, rel=0.01)
    t8 = table_model("measured", "h100-80gb", "fp8")
    tb = table_model("measured", "h100-80gb", "bf16")
    assert t8.attention_ns(32, 4096, 4096, 128) == tb.attention_ns(32, 4096, 4096, 128)
    assert 1.4 < tb.gemm_ns(8192, 8192, 8192) / t8.gemm_ns(8192, 8192, 8192) < 2.0


def test_coordinate_descent_finds_a_separable_minimum() -> None:
    # (log a - log 3)^2 + (b - 0.5)^2, b starting at 0 and bounded to [0, 2]: the minimum is
    # a = 3, b = 0.5, reached to within the final step's resolution
    import math
    from dataclasses import dataclass

    from podsim.compute.fit import coordinate_descent

    @dataclass(frozen=True)
    class Pt:
        a: float
        b: float

    def loss(p: Pt) -> float:
        return (math.log(p.a) - math.log(3)) ** 2 + (p.b - 0.5) ** 2

    seen: list[str] = []
    p, best = coordinate_descent(
        Pt(1.0, 0.0),
        loss,
        {"a": (0.1, 10.0), "b": (0.0, 2.0)},
        rounds=8,
        from_zero=0.1,
        tol=0.0,
        on_better=lambda r, n, v, s: seen.append(n),
    )
    assert p.a == pytest.approx(3.0, rel=0.02) and p.b == pytest.approx(0.5, rel=0.02)
    assert best == pytest.approx(loss(p)) and {"a", "b"} <= set(seen)
