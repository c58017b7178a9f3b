"""Measured serving steps: the serving step of the example model against its own full forward, the
benchmark script's CPU path, the CSV's reader, the measured host overhead in podsim infer, and
podsim validate on the rows."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.serving.llm import measured_steps as ms
from podsim.serving.llm.measured_steps import (
    COLUMNS,
    HostOverhead,
    host_overhead_from,
    read_serving_steps,
    write_serving_steps,
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "inference_steps.py"


def test_cached_prefill_decode_and_mixed_steps_match_the_full_forward() -> None:
    torch = pytest.importorskip("torch")
    from podsim.examples.llama import SHAPES, ServingStep, build

    sh = SHAPES["tiny"]
    model = build(sh).eval()  # fp32: the same tokens whichever way they are computed
    toks = torch.randint(0, sh.vocab, (3, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(toks).argmax(-1)  # no cache: every position recomputed
    # prefill 9 tokens of 3 sequences, then one decode step of all three at context 9
    pre = ServingStep(model, [("prefill", 3, 9, 0)], 16)
    pre.tokens.copy_(toks[:, :9].reshape(-1))
    assert pre.forward().tolist() == full[:, 8].tolist()
    dec = ServingStep(model, [("decode", 3, 1, 9)], 16)
    dec.cache = pre.cache
    dec.tokens.copy_(toks[:, 9])
    assert dec.forward().tolist() == full[:, 9].tolist()
    # a mixed step: sequence 0's prefill chunk and sequences 1-2 decoding, in one batch
    mixed = ServingStep(model, [("prefill", 1, 10, 0), ("decode", 2, 1, 9)], 16)
    for li, (k, v) in enumerate(pre.cache):
        mixed.cache[li][0][1:3].copy_(k[1:3])
        mixed.cache[li][1][1:3].copy_(v[1:3])
    mixed.tokens.copy_(torch.cat([toks[0], toks[1:, 9]]))
    assert mixed.forward().tolist() == full[:, 9].tolist()


def test_host_overhead_interpolates_in_log_sequences() -> None:
    h = HostOverhead((1, 16), (2.0, 4.0))
    assert h.at(1) == 2.0 and h.at(16) == 4.0
    assert h.at(4) == pytest.approx(3.0)  # halfway between 1 and 16 in log
    assert h.at(0) == 2.0 and h.at(256) == 4.0  # the edges hold


def _row(**kw: object) -> dict:
    base = {
        "gpu": "h100-80gb",
        "device_name": "NVIDIA H100 80GB HBM3",
        "model": "llama3-8b",
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "ffn_hidden": 14336,
        "vocab": 128256,
        "precision": "bf16",
        "kind": "decode",
        "batch": 8,
        "context": 2048,
        "mode": "eager",
        "attention": "flash",
        "status": "ok",
        "step_ms": 10.0,
        "busy_ms": 8.0,
    }
    base.update(kw)
    return base


def test_host_overhead_is_the_step_less_the_busy_device(tmp_path: Path) -> None:
    rows = [
        _row(batch=1, step_ms=9.0, busy_ms=6.0),
        _row(batch=1, context=512, step_ms=8.0, busy_ms=6.0),
        _row(batch=1, context=8192, step_ms=12.0, busy_ms=10.0),
        _row(batch=32, step_ms=20.0, busy_ms=19.5),
        _row(batch=32, mode="graph", step_ms=15.0, busy_ms=14.9),
        _row(kind="prefill", prompt_tokens=512, batch=1, step_ms=50.0, busy_ms=1.0),
    ]
    p = tmp_path / "h100-80gb.csv"
    write_serving_steps(p, rows, {"device": "NVIDIA H100 80GB HBM3"})
    got = host_overhead_from(read_serving_steps(p).rows, "h100-80gb", "eager")
    # batch 1: the median of 3, 2 and 2 ms; batch 32: 0.5 ms; prefills and graph replays aside
    assert got.sequences == (1, 32) and got.ms == pytest.approx((2.0, 0.5))
    assert host_overhead_from(read_serving_steps(p).rows, "h100-80gb", "graph").ms == pytest.approx((0.1,))
    with pytest.raises(InputError, match="no measured eager decode steps of h200"):
        host_overhead_from(read_serving_steps(p).rows, "h200", "eager")


def test_infer_takes_the_measured_host_overhead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from podsim.llm import get_model
    from podsim.serving.llm.step_timer import step_timer

    p = tmp_path / "h100-80gb.csv"
    write_serving_steps(
        p,
        [_row(batch=1, step_ms=9.0, busy_ms=6.0), _row(batch=64, step_ms=21.0, busy_ms=20.0)],
        {"device": "NVIDIA H100 80GB HBM3"},
    )
    m = get_model("llama3-8b")
    plain = step_timer(m, "h100")
    # no measurements shipped: a clear error, not a silent 0
    monkeypatch.setattr(ms, "shipped_path", lambda gpu: None)
    with pytest.raises(InputError, match="ships no measured serving steps of h100-80gb"):
        step_timer(m, "h100", host_overhead_ms="eager")
    assert (
        main(
            [
                "infer",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--prompt-tokens",
                "128",
                "--output-tokens",
                "4",
                "--host-overhead-ms",
                "eager",
            ]
        )
        == 2
    )
    assert "ships no measured serving steps" in capsys.readouterr().err
    monkeypatch.setattr(ms, "shipped_path", lambda gpu: p if gpu == "h100-80gb" else None)
    eager = step_timer(m, "h100", host_overhead_ms="eager")
    for seqs, host_ms in ((1, 3.0), (8, 3.0 - 2.0 * 3 / 6), (64, 1.0)):  # 3 ms at 1, 1 ms at 64, log between
        batch = [(1, 1000)] * seqs
        assert eager.stage_ns(batch) - plain.stage_ns(batch) == pytest.approx(host_ms * 1e6, abs=1.0)
    assert (
        main(
            [
                "infer",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--prompt-tokens",
                "128",
                "--output-tokens",
                "4",
                "--host-overhead-ms",
                "eager",
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kind": "verify"}, "kind must be one of prefill, decode, mixed, got 'verify'"),
        ({"kind": "prefill"}, "prompt_tokens must be an integer from 1"),
        ({"context": ""}, "context must be an integer from 1"),
        ({"mode": "compiled"}, "mode must be one of eager, graph"),
        ({"step_ms": "soon"}, "step_ms must be a number >= 0"),
        ({"step_ms": ""}, "an 'ok' row needs its step_ms"),
    ],
)
def test_a_bad_serving_steps_csv_is_a_clear_error(
    tmp_path: Path, change: dict, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow({**_row(), **change})
    with pytest.raises(InputError, match=message) as e:
        read_serving_steps(p)
    assert str(p) in str(e.value) and "row 2" in str(e.value)
    assert main(["validate", "--rows", str(p)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_validate_predicts_measured_serving_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "steps.csv"
    write_serving_steps(
        p,
        [
            _row(batch=1, context=512),
            _row(kind="prefill", batch=1, prompt_tokens=2048, context=""),
            _row(kind="mixed", batch=33, prompt_tokens=2016, decodes=32),
            _row(status="oom", step_ms=""),
        ],
        {"device": "NVIDIA H100 80GB HBM3"},
    )
    from podsim.validation import run_validation

    checks, skipped = run_validation(rows=p)
    assert [c.metric for c in checks] == ["step_s"] * 3 and skipped == 0
    decode, prefill, mixed = (c.predicted for c in checks)
    # a batch-1 decode reads every weight once: at least 16 GB at the H100's 3.35 TB/s, and not twice that
    assert 16.06e9 / 3.35e12 < decode < 2 * 16.06e9 / 3.35e12
    # a 2,048-token prefill computes 2 x 8 B x 2,048 FLOPs (and attention): at least that at the 989 TFLOP/s peak
    assert prefill > 2 * 8.03e9 * 2048 / 989e12
    assert mixed > prefill  # the same chunk and 32 decodes besides
    assert main(["validate", "--rows", str(p)]) == 0
    assert "llama3-8b 32L mixed 2016 + 32 dec ctx 2048" in capsys.readouterr().out


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("serve") / "quick.csv"
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


def test_quick_run_measures_prefill_decode_and_mixed_steps(quick_run: Path) -> None:
    s = read_serving_steps(quick_run)
    assert s.provenance["device"] == "cpu" and s.provenance["date"].startswith("20")
    by = {(r.kind, r.mode, r.attention): r for r in s.rows}
    assert by[("decode", "graph", "flash")].status == "skipped: graphs need CUDA"
    assert by[("prefill", "eager", "cudnn")].status == "skipped: cudnn attention needs CUDA"
    for kind in ("prefill", "decode", "mixed"):
        r = by[(kind, "eager", "flash")]
        assert r.ok and r.step_ms > 0 and r.gpu == ""
        for c in ("gemm", "attention_fwd", "kv_cache", "sampling", "norm", "rope", "swiglu"):
            assert r.category_ms[c] > 0, (kind, c)
    mixed = by[("mixed", "eager", "flash")]
    assert mixed.chunks == [(32, 0)] + [(1, 48)] * 3 and mixed.batch == 4
