"""Model shapes, layouts and the memory model against published figures.

Korthikanti et al. (2022) Figure 1 (per-GPU weights+gradients+optimizer and activations of
GPT 22B-1T on A100s) is reproduced exactly from the calibration CSV; Figure 7 (activations
relative to no recompute) is a transcription rounded to 0.01 % of bar labels and matches
within 0.15 points.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest

from podsim.errors import InputError
from podsim.llm import from_hf_config, get_model
from podsim.llm.layout import Layout
from podsim.llm.memory import (
    GIB,
    bytes_per_param,
    inflight,
    memory,
    stage_memory,
    stage_params,
)
from podsim.llm.model import ModelConfig


def rows(refdata, prefix: str) -> list[dict]:
    with open(refdata / "calibration" / "published_measurements.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["row_id"].startswith(prefix)]


def gpt(r: dict) -> ModelConfig:
    return ModelConfig(
        r["model"], int(r["layers"]), int(r["hidden"]), int(r["heads"]), 4 * int(r["hidden"]), 51200, int(r["seq_len"])
    )


@pytest.mark.conformance
def test_korthikanti_figure1_exact(refdata) -> None:
    cases = rows(refdata, "korthikanti_fig1")
    assert len(cases) == 12
    for r in cases:
        m = gpt(r)
        lay = Layout(
            int(r["gpus"]),
            tp=int(r["tp"]),
            pp=int(r["pp"]),
            vpp=int(r["vpp"]),
            global_batch=int(r["global_batch"]),
            micro_batch=int(r["micro_batch"]),
            seq_len=int(r["seq_len"]),
            sequence_parallel=r["seq_par"] == "yes",
            recompute="selective" if r["recompute"] == "selective" else "none",
            flash_attention=False,
        )
        lay.check(m)
        if r["metric"] == "params_grads_optimizer_GiB":
            got = sum(bytes_per_param(lay)) * stage_params(m, lay, 0, matrices_only=True) / GIB
        else:
            got = stage_memory(m, lay, 0).activations_layers / GIB
        assert got == float(r["value"]), r["row_id"]


@pytest.mark.conformance
def test_korthikanti_figure7(refdata) -> None:
    variants = {
        "none": {},
        "seq": {"sequence_parallel": True},
        "sel": {"recompute": "selective"},
        "seqsel": {"sequence_parallel": True, "recompute": "selective"},
        "full": {"recompute": "full"},
    }
    cases = rows(refdata, "korthikanti_fig7")
    assert len(cases) == 20
    for r in cases:
        m = gpt(r)
        p = int(r["pp"])
        base = Layout(8 * p, tp=8, pp=p, global_batch=p, seq_len=2048, flash_attention=False)
        pct = (
            100
            * stage_memory(m, replace(base, **variants[r["recompute"]]), 0).activations_layers
            / stage_memory(m, base, 0).activations_layers
        )
        assert pct == pytest.approx(float(r["value"]), abs=0.15), r["row_id"]


def test_parameter_counts_match_published_sizes() -> None:
    # released parameter counts: Llama 2 7B 6,738,415,616; Llama 3 8B 8.03 B; 70B 70.6 B;
    # 405B 405.9 B; Mixtral 46.7 B total / 12.9 B active; GPT-3 175B; Megatron Table 1 sizes
    assert get_model("llama2-7b").total_params() == 6_738_415_616
    assert get_model("llama3-8b").total_params() == pytest.approx(8.03e9, rel=0.002)
    assert get_model("llama3-70b").total_params() == pytest.approx(70.6e9, rel=0.002)
    assert get_model("llama3-405b").total_params() == pytest.approx(405.9e9, rel=0.002)
    mix = get_model("mixtral-8x7b")
    assert mix.total_params() == pytest.approx(46.7e9, rel=0.002)
    assert mix.active_params() == pytest.approx(12.9e9, rel=0.005)
    assert get_model("gpt3-175b").total_params() == pytest.approx(175e9, rel=0.003)
    # Table 1 prints billions with one decimal
    for name, size in (("megatron-gpt-18b", 18.4e9), ("megatron-gpt-145b", 145.6e9), ("megatron-gpt-1t", 1008e9)):
        assert abs(get_model(name).total_params() - size) <= 0.05e9


def test_bytes_per_param() -> None:
    # Megatron README: 18 B/param, 6 + 12/d with the distributed optimizer; DeepSpeed ZeRO:
    # 2 + 2 + 12/d (stage 1), 2 + 2/d + 12/d (2), (2 + 2 + 12)/d (3)
    lay = Layout(64, tp=8, global_batch=8)  # d = 8
    assert bytes_per_param(lay) == (2, 4, 12)
    assert sum(bytes_per_param(replace(lay, distributed_optimizer=True))) == 6 + 12 / 8
    assert bytes_per_param(replace(lay, zero=1)) == (2, 2, 1.5)
    assert bytes_per_param(replace(lay, zero=2)) == (2, 0.25, 1.5)
    assert bytes_per_param(replace(lay, zero=3)) == (0.25, 0.25, 1.5)


def test_pipeline_stages() -> None:
    # 1F1B: stage k holds pp - k micro-batches; GPipe: all of them; the first stage holds the
    # embedding, the last the output layer; 8 stages of a 96-layer model hold 12 layers each
    m = get_model("gpt3-175b")
    lay = Layout(1024, tp=8, pp=8, global_batch=512, seq_len=2048)
    assert [inflight(lay, s) for s in range(8)] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert inflight(replace(lay, schedule="gpipe"), 3) == lay.num_microbatches == 32
    stages = memory(m, lay)
    mid = stage_params(m, lay, 3)
    assert mid == pytest.approx(12 * m.layer_params(0) / 8)
    assert stage_params(m, lay, 0) == pytest.approx(mid + m.embedding_params() / 8)
    assert stages[0].activations_layers == pytest.approx(8 * stages[7].activations_layers)
    # a 405B model on 8 GPUs cannot fit 80 GiB
    big = memory(get_model("llama3-405b"), Layout(8, tp=8, global_batch=1, seq_len=8192))
    assert big[0].total / GIB > 80


def test_layout_errors() -> None:
    m = get_model("llama3-70b")
    with pytest.raises(InputError, match="TP 3 does not divide the 64 attention heads"):
        Layout(24, tp=3, global_batch=8).check(m)
    with pytest.raises(InputError, match="PP x VPP = 3 does not divide the 80 layers"):
        Layout(24, tp=8, pp=3, global_batch=8).check(m)
    with pytest.raises(InputError, match="100 GPUs are not divisible by TP x PP x CP = 8 x 4 x 1 = 32"):
        Layout(100, tp=8, pp=4, global_batch=8).check(m)
    with pytest.raises(InputError, match="global batch 10 is not a multiple of DP x micro-batch = 4 x 1"):
        Layout(128, tp=8, pp=4, global_batch=10).check(m)
    with pytest.raises(InputError, match="needs a mixture-of-experts model"):
        Layout(128, tp=8, pp=4, ep=2, global_batch=8).check(m)
    with pytest.raises(InputError, match="unknown model 'llama3-7b'; did you mean"):
        get_model("llama3-7b")


def test_hf_config(tmp_path) -> None:
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = from_hf_config(p)
    assert m.total_params() == get_model("llama3-8b").total_params()
    moe = dict(cfg, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=4096)
    p.write_text(json.dumps(moe))
    assert from_hf_config(p).total_params() == get_model("mixtral-8x7b").total_params()
    del cfg["vocab_size"]
    p.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="config.json: vocab_size: missing key 'vocab_size'"):
        from_hf_config(p)
    p.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        from_hf_config(p)


def test_temporary_buffers() -> None:
    from podsim.llm import get_model

    m = get_model("gpt3-175b")
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    lay = Layout(64, tp=t, pp=8, global_batch=64, seq_len=s, recompute="full", flash_attention=False)
    # the layer being recomputed holds Korthikanti's full-activation set: s b h (10 + 24/t + 5 a s / (h t))
    want = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert stage_memory(m, lay, 1).buffers == pytest.approx(want)
    # no recomputation: nothing temporary beyond the kept activations
    assert stage_memory(m, replace(lay, recompute="none"), 1).buffers == 0
    # ZeRO-3 (DP 8): two layers' gathered bf16 weights; CP 2: the whole sequence's K and V of a layer
    z = Layout(64, tp=8, global_batch=64, seq_len=s, zero=3)
    assert stage_memory(m, z, 0).buffers == pytest.approx(2 * 2 * m.layer_params(0) / 8)
    c = Layout(16, tp=8, cp=2, global_batch=8, seq_len=4096)
    assert stage_memory(m, c, 0).buffers == pytest.approx(2 * 1 * 4096 * (96 / 8) * 128 * 2)
