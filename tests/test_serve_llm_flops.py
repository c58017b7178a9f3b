"""Model FLOPs of LLM inference and a serving run's MFU (podsim.serving.llm.flops).  Every
expected number is written out by hand below from the models' shapes, not from podsim's code:
a GEMM of a ``k x m`` weight costs ``2 k m`` FLOPs a token, attention ``2 x 2 x heads x head_dim``
a layer per attended position (token ``i`` of a chunk attends ``context + i + 1``), the LM head
``2 x hidden x vocab`` once a pass (the sampled, last position)."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.errors import InputError
from podsim.llm.model import ModelConfig, get_model
from podsim.serving.llm.flops import forward_flops, request_flops, serving_mfu

#: 2 layers, hidden 8, 2 heads of 8 / 2 = 4, GELU MLP of width 16, vocabulary 10
TINY = ModelConfig(name="tiny", layers=2, hidden=8, heads=2, ffn=16, vocab=10)
# Per layer, weight parameters a token multiplies:
#   Q, K, V: 3 x (8 x 8) = 192; attention output 8 x 8 = 64; MLP (2 matrices) 2 x 8 x 16 = 256
#   -> 512 a layer, 1024 for both -> GEMMs 2 x 1024 = 2048 FLOPs a token (biases not counted)
# attention: 2 x 2 x 2 heads x 4 = 32 a layer per attended position -> 64 for both layers
# LM head: 2 x 8 x 10 = 160 FLOPs for the one sampled position of a pass
TINY_GEMM, TINY_ATTN, TINY_HEAD = 2048, 64, 160


def test_a_forward_pass_of_the_tiny_model_by_hand() -> None:
    # one decode token with nothing cached attends 1 position: 2048 + 64 + 160
    assert forward_flops(TINY, 1, 0) == 2272
    # 3 new tokens over 5 cached: they attend 6, 7 and 8 positions = 21
    #   3 x 2048 + 21 x 64 + 160 = 6144 + 1344 + 160 = 7648
    assert forward_flops(TINY, 3, 5) == 7648
    # a decode token over 9 cached attends 10: 2048 + 640 + 160
    assert forward_flops(TINY, 1, 9) == 2848
    # the LM head counts once a pass, not once a token: 3 tokens cost 2 x 2048 more than 1
    # token plus the attention of the extra positions (2 + 3 over a context of 0 = 5 x 64)
    assert forward_flops(TINY, 3, 0) - forward_flops(TINY, 1, 0) == 2 * 2048 + 5 * 64


def test_a_request_of_the_tiny_model_by_hand() -> None:
    # prompt 3, output 4: the prompt's pass (3 tokens over 0: positions 1 + 2 + 3 = 6)
    #   3 x 2048 + 6 x 64 + 160 = 6688, yielding the first token
    # then 3 decode passes over contexts 3, 4, 5 (positions 4, 5, 6):
    #   2208 + 256 = 2464, 2208 + 320 = 2528, 2208 + 384 = 2592   (2208 = 2048 + 160)
    # total 6688 + 2464 + 2528 + 2592 = 14272
    assert request_flops(TINY, 3, 4) == 14272
    # a one-token output is the prompt's pass alone
    assert request_flops(TINY, 3, 1) == 6688
    assert request_flops(TINY, 1, 1) == 2272


@pytest.mark.parametrize(
    "model", [TINY, get_model("llama2-7b"), get_model("mixtral-8x7b"), get_model("deepseek-v3")], ids=lambda m: m.name
)
@pytest.mark.parametrize("prompt,output", [(1, 1), (7, 1), (1, 9), (37, 23), (512, 130)])
def test_the_closed_form_is_the_sum_of_the_passes(model: ModelConfig, prompt: int, output: int) -> None:
    brute = forward_flops(model, prompt, 0) + sum(forward_flops(model, 1, prompt + j) for j in range(output - 1))
    assert request_flops(model, prompt, output) == pytest.approx(brute, rel=1e-12)


def test_a_llama2_7b_decode_token_is_about_2n() -> None:
    m = get_model("llama2-7b")
    # Llama-2-7B: 32 layers, hidden 4096, 32 heads of 128, SwiGLU MLP of 11008, vocab 32000.
    #   attention 4 x 4096^2 = 67,108,864; MLP 3 x 4096 x 11008 = 135,266,304
    #   -> 202,375,168 a layer, x 32 = 6,476,005,376; LM head 4096 x 32000 = 131,072,000
    # one decode token with nothing cached (1 position): 2 x 6,476,005,376 + 2 x 131,072,000
    #   + 4 x 32 x 128 x 32 layers = 12,952,010,752 + 262,144,000 + 524,288 = 13,214,679,040
    assert forward_flops(m, 1, 0) == 13_214_679_040
    # the rule of thumb: 2 N FLOPs a token for N = 6.74e9 parameters (Touvron et al. 2023)
    assert forward_flops(m, 1, 0) == pytest.approx(2 * 6.74e9, rel=0.03)
    # a context of 100 adds 4 x 32 x 128 x 32 = 524,288 a position: 0.4 %
    assert forward_flops(m, 1, 99) - forward_flops(m, 1, 0) == 99 * 524_288


def test_mixtral_counts_only_the_top_2_experts() -> None:
    m = get_model("mixtral-8x7b")
    # Mixtral 8x7B: 32 layers, hidden 4096, 32 heads of 128, 8 KV heads, 8 SwiGLU experts of
    # 14336, top 2, vocab 32000.  A layer: Q 4096^2 = 16,777,216, K and V 2 x 4096 x 1024 =
    # 8,388,608, output 16,777,216 -> 41,943,040; 2 experts x 3 x 4096 x 14336 = 352,321,536;
    # router 4096 x 8 = 32,768 -> 394,297,344, x 32 = 12,617,515,008; + LM head 131,072,000
    # = 12,748,587,008 active (Mistral: "12.9B active" with the 131M input embedding)
    # decode token, nothing cached: 2 x 12,748,587,008 + 4 x 32 x 128 x 32 = 25,497,698,304
    assert forward_flops(m, 1, 0) == 25_497_698_304
    assert forward_flops(m, 1, 0) == pytest.approx(2 * 12.9e9, rel=0.03)
    # all 8 experts would be 6 more x 176,160,768 x 32 layers x 2 FLOPs = 67.6e9 more
    assert forward_flops(m, 1, 0) < 2 * 30e9


def test_moe_with_shared_experts_and_dense_layers_by_hand() -> None:
    m = ModelConfig(
        name="tiny-moe",
        layers=2,
        hidden=8,
        heads=2,
        kv_heads=1,
        ffn=16,
        vocab=10,
        activation="swiglu",
        bias=False,
        experts=4,
        top_k=2,
        moe_ffn=4,
        shared_experts=1,
        dense_layers=1,
    )
    # attention: Q 8 x 8 = 64, K and V 2 x 8 x 4 = 64 (1 KV head of 4), output 64 -> 192
    # layer 0 (dense): SwiGLU 3 x 8 x 16 = 384 -> 576
    # layer 1 (MoE): (2 routed + 1 shared) x 3 x 8 x 4 = 288, router 8 x 4 = 32 -> 192 + 320 = 512
    # GEMMs 2 x (576 + 512) = 2176; attention (query heads count) 2 x 2 x 2 x 4 x 2 layers = 64 a
    # position; LM head 160 -> a token over nothing cached: 2176 + 64 + 160 = 2400
    assert forward_flops(m, 1, 0) == 2400
    # 2 tokens over 1 cached: 2 x 2176 + (2 + 3) x 64 + 160 = 4352 + 320 + 160 = 4832
    assert forward_flops(m, 2, 1) == 4832


def test_serving_mfu_by_hand() -> None:
    # two requests of TINY: (3 prompt, 4 output) = 14272 and (1, 1) = 2272 -> 16544 FLOPs
    # over 1 s on 4 GPUs of 1e-8 TFLOP/s = 4 x 1e4 FLOP/s = 40,000 FLOPs -> 0.4136
    assert serving_mfu(TINY, [3, 1], [4, 1], 1.0, 4, 1e-8) == pytest.approx(16544 / 40000, rel=1e-12)
    # twice the span, half the MFU; numpy lengths are taken
    assert serving_mfu(TINY, np.array([3, 1]), np.array([4, 1]), 2.0, 4, 1e-8) == pytest.approx(0.2068)
    assert serving_mfu(TINY, [3], [4], 0.0, 1, 1.0) is None
    assert serving_mfu(TINY, [], [], 1.0, 1, 1.0) == 0.0


def test_serving_mfu_of_a_large_run_is_quick_and_exact() -> None:
    m = get_model("llama3-70b")
    prompts, outputs = [1000 + i % 3000 for i in range(100_000)], [1 + i % 700 for i in range(100_000)]
    mfu = serving_mfu(m, prompts, outputs, 3600.0, 64, 989.0)
    total = sum(request_flops(m, p, o) for p, o in zip(prompts[:1000], outputs[:1000]))
    assert total > 0 and mfu is not None and 0 < mfu < 1
    part = serving_mfu(m, prompts[:1000], outputs[:1000], 3600.0, 64, 989.0)
    assert part == pytest.approx(total / (3600.0 * 64 * 989.0e12), rel=1e-12)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InputError, match="new_tokens must be a whole number >= 1, got 0"):
        forward_flops(TINY, 0, 0)
    with pytest.raises(InputError, match="context must be a whole number >= 0, got -1"):
        forward_flops(TINY, 1, -1)
    with pytest.raises(InputError, match="output_tokens must be a whole number >= 1, got 0"):
        request_flops(TINY, 5, 0)
    with pytest.raises(InputError, match="2 prompt lengths but 1 output lengths"):
        serving_mfu(TINY, [1, 2], [1], 1.0, 1, 1.0)
    with pytest.raises(InputError, match="peak must be a finite number"):
        serving_mfu(TINY, [1], [1], 1.0, 1, 0.0)
    with pytest.raises(InputError, match="gpus must be a whole number >= 1"):
        serving_mfu(TINY, [1], [1], 1.0, 0, 1.0)
