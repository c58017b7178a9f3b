"""Model FLOPs, the compute model and ``podsim llm`` end to end."""

from __future__ import annotations

import json

import pytest

from podsim.cli import main
from podsim.compute.model import ComputeModel
from podsim.hardware.gpu import get_gpu
from podsim.llm import get_model
from podsim.llm.flops import iteration_flops
from podsim.llm.layout import Layout


def test_flops_match_korthikanti_and_narayanan() -> None:
    # GPT shapes: model FLOPs = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) (Korthikanti et al.);
    # with full recompute, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (Narayanan et al.)
    m = get_model("megatron-gpt-145b")
    B, s, l, h, V = 2304, 2048, 80, 12288, 51200
    lay = Layout(1536, tp=8, pp=8, global_batch=B, seq_len=s, recompute="full")
    mf, hf = iteration_flops(m, lay)
    assert mf == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)
    assert hf == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), rel=1e-12)


def test_compute_model_shape() -> None:
    cm = ComputeModel.for_gpu(get_gpu("a100-80gb"))
    big = cm.gemm_ns(8192, 8192, 8192)
    # a large GEMM runs at gemm_max x s(8192)^3 of the 312 TFLOP/s peak, s(d) = d / (d + knee);
    # a 128-wide one far below
    s8 = 8192 / (8192 + cm.gemm_knee)
    assert 2 * 8192**3 / big / 312e3 == pytest.approx(cm.gemm_max * s8**3, rel=1e-3)
    thin = cm.gemm_ns(8192, 8192, 128)
    assert 2 * 8192 * 8192 * 128 / thin / 312e3 < 0.75 * cm.gemm_max
    # memory-bound: 1 GB at 2039 GB/s x memory_max
    assert cm.memory_ns(1e9) == pytest.approx(1e9 / (2039 * cm.memory_max) + cm.launch_ns)
    # with the same efficiencies, the H100 is faster on a big GEMM by its peak ratio
    a = {k: getattr(cm, k) for k in ("gemm_max", "gemm_knee", "memory_max", "flash_max", "flash_knee", "launch_ns")}
    h = ComputeModel.for_gpu(get_gpu("h100-80gb"), **a)
    assert big / h.gemm_ns(8192, 8192, 8192) == pytest.approx(989.4 / 312, rel=0.02)
    # the H100's own fit (its measured kernels), shared by the H200
    assert (
        ComputeModel.for_gpu(get_gpu("h200")).gemm_max
        == ComputeModel.for_gpu(get_gpu("h100-80gb")).gemm_max
        != cm.gemm_max
    )


def test_cli_llm(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    rc = main(
        [
            "llm",
            "--model",
            "gpt3-1.3b",
            "--gpu",
            "a100-80gb",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--pp",
            "2",
            "--global-batch",
            "16",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "iteration time" in text and "MFU" in text
    d = json.loads(out.read_text())
    b = d["breakdown"]
    assert d["layout"]["dp"] == 4
    assert sum(b.values()) == pytest.approx(d["iteration_time_s"], rel=1e-6)
    assert 0 < d["mfu"] < 1 and d["memory_fits"]
    assert d["model_tflops_per_gpu"] == pytest.approx(d["mfu"] * 312, rel=1e-3)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama3-7b"], "unknown model 'llama3-7b'"),
        (["--model", "llama3-8b", "--tp", "3"], "TP 3 does not divide the 32 attention heads"),
        (["--model", "llama3-8b", "--gpu", "h10"], "unknown GPU 'h10'; did you mean 'h100-80gb'"),
    ],
)
def test_cli_llm_errors(capsys, args, message) -> None:
    rc = main(["llm", "--gpus", "24", "--global-batch", "24"] + args)
    assert rc == 2
    assert message in capsys.readouterr().err


def test_validate_memory_and_nccl_rows(capsys) -> None:
    # the rows ship with podsim: no reference data needed
    rc = main(["validate", "--only", "korthikanti"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "32 rows compared" in out and "korthikanti_fig1_22B_act_none" in out
    rc = main(["validate", "--only", "nccl_h100"])
    out = capsys.readouterr().out
    assert "nccl_h100_nvls_busbw" in out and "max 0.9" in out


def test_cli_llm_list_and_missing_arguments(capsys) -> None:
    assert main(["llm", "--list"]) == 0
    out = capsys.readouterr().out
    assert "llama3-405b" in out and "405.9 B params" in out and "h100-80gb" in out and "989.4 TFLOP/s" in out
    assert main(["llm", "--model", "gpt3-1.3b", "--global-batch", "8"]) == 2
    assert "--gpus is required" in capsys.readouterr().err
    assert main(["llm", "--gpus", "8", "--global-batch", "8"]) == 2
    assert "give --model NAME (see --list) or --model-config FILE" in capsys.readouterr().err
