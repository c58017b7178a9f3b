"""podsim trace: profile a training step on the CPU, then simulate what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import importable_module
from podsim.api import simulate
from podsim.cli import main

MODULE = """
import torch

def small_cnn(batch_size):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 30 * 30, 10))
    return m, torch.randn(batch_size, 3, 32, 32), torch.randint(0, 10, (batch_size,))

def tiny_gpt(batch_size):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(1000, 128)
            self.layers = torch.nn.TransformerEncoder(
                torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True), 2)
            self.head = torch.nn.Linear(128, 1000)
        def forward(self, x):
            return self.head(self.layers(self.emb(x))).flatten(0, 1)
    x = torch.randint(0, 1000, (batch_size, 64))
    return Block(), x, x.flatten()

def not_a_setup(batch_size):
    return 3

def broken(batch_size):
    raise ValueError("no such layer")

def fails_in_forward(batch_size):
    m = torch.nn.Linear(4, 2)
    return m, torch.randn(batch_size, 5), torch.randint(0, 2, (batch_size,))
"""


def test_ci_runs_the_capture_tests() -> None:
    # .ci/run sets PODSIM_REQUIRE_TORCH: there, the capture tests must not skip for want of torch
    import importlib.util
    import os

    if os.environ.get("PODSIM_REQUIRE_TORCH") != "1":
        pytest.skip("PODSIM_REQUIRE_TORCH is not set (only CI requires torch and torchvision)")
    for mod in ("torch", "torchvision"):
        assert importlib.util.find_spec(mod) is not None, (
            f"CI needs {mod}: pip install torch==2.13.0 torchvision==0.28.0"
        )
    from podsim.capture.models import torchvision_models

    assert hasattr(torchvision_models(), "resnet50")


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    pytest.importorskip("torch")
    return importable_module(tmp_path, monkeypatch, "capture_models", MODULE)


@pytest.mark.parametrize("fn", ["small_cnn", "tiny_gpt"])
def test_capture_and_simulate_on_one_gpu(
    tmp_path: Path, models: str, fn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / fn
    assert main(["trace", "--model", f"{models}:{fn}", "--batch-size", "4", "--steps", "2", "--out", str(out)]) == 0
    assert "profiled step" in capsys.readouterr().out
    info = json.loads((out / "capture.json").read_text())
    assert info["device"] == "cpu" and info["warmup_steps"] == 2 and info["step_ms"] > 0
    res = simulate(str(out / "kineto.json"), cluster="dgx-h100", execution_trace=str(out / "et.json"))
    # the profiled step's host ops back to back reproduce its measured time (5% is the bar)
    assert res.ranks[0].finish_ns == pytest.approx(info["step_ms"] * 1e6, rel=0.05)
    chakra = simulate(str(out / "workload"), cluster="dgx-h100")
    assert chakra.ranks[0].finish_ns == pytest.approx(res.ranks[0].finish_ns, rel=0.01)


def test_capture_errors(tmp_path: Path, models: str, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--model", "resnet50"], "expected torchvision:NAME, hf:CONFIG.json or module:callable"),
        (["--model", "no_such_module_xyz:f"], "cannot import module 'no_such_module_xyz'"),
        (["--model", f"{models}:missing"], "has no callable 'missing'"),
        (["--model", f"{models}:not_a_setup"], "must return (model, inputs, targets[, loss_fn])"),
        (["--model", f"{models}:small_cnn", "--batch-size", "0"], "--batch-size: expected a positive integer"),
        (["--model", f"{models}:broken"], "building capture_models:broken failed: ValueError: no such layer"),
        (["--model", f"{models}:fails_in_forward"], "a training step of capture_models:fails_in_forward failed"),
        (["--model", f"{models}:small_cnn", "--nproc", "0"], "--nproc: expected a positive integer"),
        (["--model", f"{models}:missing", "--nproc", "2"], "has no callable 'missing'"),  # from a child
        (["--model", "hf:/nonexistent/config.json"], "no such config file"),
    ]
    import torch

    if not torch.cuda.is_available():
        cases.append((["--model", f"{models}:small_cnn", "--device", "cuda"], "no CUDA device"))
    for extra, message in cases:
        argv = ["trace", "--batch-size", "2", "--out", str(tmp_path / "x")] + extra
        assert main(argv) == 2, extra
        assert message in capsys.readouterr().err, extra
        assert not (tmp_path / "x").exists(), extra  # no half-written traces, not even an empty folder


def test_torchvision_resnet50_capture_and_ddp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the "done means": podsim trace + podsim simulate on a torchvision ResNet-50 on the CPU
    pytest.importorskip("torch")
    from podsim.capture.models import torchvision_models

    try:
        torchvision_models()
    except Exception as e:  # noqa: BLE001 - the message says what is missing
        pytest.skip(f"torchvision: {e}")
    out = tmp_path / "r50"
    assert (
        main(["trace", "--model", "torchvision:resnet50", "--batch-size", "2", "--steps", "1", "--out", str(out)]) == 0
    )
    capsys.readouterr()
    from podsim.parallelize import load_step

    step = load_step(pytorch=out)
    # every parameter of torchvision's ResNet-50 (25,557,032 fp32 values) is read by a layer and
    # reduced as a gradient
    assert step.gradient_bytes == sum(o.param_bytes for o in step.ops) == 4 * 25_557_032
    assert sum(o.tp_split for o in step.ops) == 108
    one = step.total_ns
    finish = {}
    for gpus, mode in ((2, "ddp"), (4, "ddp"), (4, "tp")):
        layers = tmp_path / f"{mode}{gpus}.csv"
        assert (
            main(
                ["simulate", "--pytorch", str(out), "--gpus", str(gpus), "--parallel", mode, "--layers", str(layers)]
                + ["--retime", "off"]  # the CPU's times, against the CPU step (re-timing: test_newcomer_two)
            )
            == 0
        )
        text = capsys.readouterr().out
        assert "per layer, rank 0" in text and layers.is_file()
        finish[(gpus, mode)] = float(text.split("simulated on")[1].split("):")[1].split("ms")[0])
    # data parallel: at least the one-GPU time; tensor parallel on 4 GPUs splits the
    # convolutions, the CPU step's bulk
    assert finish[(2, "ddp")] >= one / 1e6 - 1e-3 and finish[(4, "ddp")] >= one / 1e6 - 1e-3
    assert finish[(4, "tp")] < finish[(4, "ddp")]


def test_huggingface_config_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a 2-layer GPT-2 built from a local config (no download); its tied LM head reads the token
    # embedding, so every parameter is counted once
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    cfg = tmp_path / "gpt2" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "n_layer": 2,
                "n_head": 4,
                "n_embd": 64,
                "vocab_size": 500,
                "n_positions": 64,
                "bos_token_id": 0,
                "eos_token_id": 0,
            }
        )
    )
    out = tmp_path / "cap"
    assert (
        main(
            ["trace", "--model", f"hf:{cfg}", "--batch-size", "2", "--seq-len", "32", "--steps", "1", "--out", str(out)]
        )
        == 0
    )
    capsys.readouterr()
    from podsim.capture.models import resolve
    from podsim.parallelize import load_step

    model = resolve(f"hf:{cfg}", 2).model
    params = 4 * sum(p.numel() for p in model.parameters())
    step = load_step(pytorch=out)
    assert step.gradient_bytes == sum(o.param_bytes for o in step.ops) == params
    # tensor parallelism splits two blocks of 4 projections (attention qkv and out, MLP up and
    # down) and the token and position embeddings
    assert sum(1 for o in step.ops if o.tp_split and o.stage == "forward") == 2 * 4 + 2
    info = json.loads((out / "capture.json").read_text())
    res = simulate(str(out), cluster="dgx-h100")
    assert res.ranks[0].finish_ns == pytest.approx(info["step_ms"] * 1e6, rel=0.05)
