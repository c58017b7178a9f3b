"""podsim infer: LLM prefill and decode step times from the compute model (issue #16), checked
against figures derived by hand from the model's shapes and the GPU's datasheet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.hardware.gpu import get_gpu
from podsim.llm.model import get_model
from podsim.serving.llm.step_timer import step_timer
from podsim.serving.llm.steps import infer


def test_kv_cache_and_weights_per_gpu_by_hand() -> None:
    m = get_model("llama2-70b")  # 80 layers, 8 KV heads of 128, 68.98 B parameters
    t = step_timer(m, "h100", tp=4)
    # K and V x 80 layers x 8 KV heads / 4 GPUs x 128 x 2 bytes
    assert t.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2 == 81_920
    # every parameter once, TP-sharded, 2 bytes each (the embedding and output layer included)
    assert t.weights_bytes_per_gpu == pytest.approx(m.total_params() * 2 / 4, rel=0.002)
    fp8 = step_timer(m, "h100", tp=4, precision="fp8", kv_cache_dtype="fp8")
    assert fp8.weights_bytes_per_gpu == pytest.approx(t.weights_bytes_per_gpu / 2)
    assert fp8.kv_bytes_per_token == t.kv_bytes_per_token / 2
    # TP 16 exceeds the 8 KV heads: each GPU keeps one (replicated), as vLLM does
    assert step_timer(m, "h100", tp=16).kv_bytes_per_token == 2 * 80 * 1 * 128 * 2


def test_a_decode_step_of_one_sequence_reads_the_weights_once() -> None:
    """Batch 1: every GEMM is memory-bound, so a step lasts about the weights' read time at the
    HBM bandwidth the compute model sustains (memory_max of the datasheet's), plus the small rest."""
    m, gpu = get_model("llama3-8b"), get_gpu("h100")
    t = step_timer(m, gpu, tp=1)
    r = infer(t, batch=1, prompt_tokens=512, output_tokens=2)
    layer_weights = m.layers * (m.layer_params(0) - m.norm_params())  # the GEMMs' matrices
    output = m.vocab * m.hidden
    read_s = (layer_weights + output) * 2 / (gpu.hbm_bandwidth * 1e9 * t.cm.memory_max)
    # the rest: kernel launches (the H100 fit's 2.9 us x about 11 kernels x 32 layers = 1.0 ms),
    # element-wise passes, attention over 512 tokens
    assert read_s < r.decode_step_mean_s < 1.2 * read_s


def test_a_long_context_adds_its_kv_read() -> None:
    """Decode steps of 64 sequences at 1,000 and 3,000 tokens of context differ by the extra KV
    read: 64 x 2,000 tokens x 327,680 B (all 80 layers on one GPU's share at TP 1)."""
    m, gpu = get_model("llama2-70b"), get_gpu("a100-80gb")
    t = step_timer(m, gpu, tp=8)
    short = t.stage_ns([(1, 1000)] * 64)
    long = t.stage_ns([(1, 3000)] * 64)
    extra_bytes = 64 * 2000 * t.kv_bytes_per_token
    assert (long - short) / 1e9 == pytest.approx(extra_bytes / (gpu.hbm_bandwidth * 1e9 * t.cm.memory_max), rel=0.02)


def test_prefill_is_compute_bound_and_more_tp_lowers_tpot_with_diminishing_returns() -> None:
    m, gpu = get_model("llama2-70b"), get_gpu("h100")
    tpot = {}
    for tp in (2, 4, 8):
        r = infer(step_timer(m, gpu, tp=tp), batch=8, prompt_tokens=2048, output_tokens=64)
        # prefill: 2 FLOPs per parameter per token at most at the GPUs' dense peak
        flops = 2 * m.total_params() * 8 * 2048 / tp
        assert r.prefill_s > flops / (gpu.peak("bf16") * 1e9)  # peak in GFLOP/s
        assert r.prefill_s < 2.5 * flops / (gpu.peak("bf16") * 1e9)  # above 40% of peak
        tpot[tp] = r.decode_step_mean_s
    assert tpot[2] > tpot[4] > tpot[8]
    assert tpot[2] / tpot[4] > tpot[4] / tpot[8]  # diminishing returns (collectives, launches)


def test_infer_cli_json_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "i.json"
    assert (
        main(
            [
                "infer",
                "--model",
                "bloom-176b",
                "--gpu",
                "a100",
                "--tp",
                "8",
                "--batch",
                "4",
                "--prompt-tokens",
                "512",
                "--output-tokens",
                "32",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    for k in ("prefill_s", "decode_step_mean_s", "e2e_s", "kv_cache_gib", "weights_gib_per_gpu"):
        assert d[k] > 0, k
    # one prefill, then 31 decode steps
    assert d["e2e_s"] == pytest.approx(d["prefill_s"] + 31 * d["decode_step_mean_s"], rel=1e-6)
    assert d["weights_gib_per_gpu"] == pytest.approx(176.25e9 * 2 / 8 / 2**30, rel=0.01)  # BLOOM's 176 B
    capsys.readouterr()
    for argv, msg in (
        (["--tp", "3"], "TP 3 does not divide the 112 attention heads"),
        (["--prompt-tokens", "2000", "--output-tokens", "100"], "exceed the 2048-token context"),
        (["--ep", "2"], "needs a mixture-of-experts model"),
    ):
        base = ["infer", "--model", "bloom-176b", "--gpu", "a100", "--prompt-tokens", "16", "--output-tokens", "4"]
        assert main(base + argv) == 2
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, err
