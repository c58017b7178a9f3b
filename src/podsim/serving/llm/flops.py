"""Model FLOPs of LLM inference: one forward pass, one request served once, and a serving
run's model FLOPs utilization (MFU).

Units: FLOPs (floating-point operations; a multiply-add counts 2), tokens, seconds, TFLOP/s
(10^12 FLOP/s).  What counts, per forward pass of one sequence over ``n`` new tokens on top of
``c`` tokens already in its KV cache:

* **GEMMs**: for each new token and layer, 2 x the weight-matrix parameters it multiplies: Q,
  K, V (``heads x head_dim`` and ``2 x kv_heads x head_dim`` outputs), the attention output,
  the MLP (2 matrices for GELU, 3 for SwiGLU); in a mixture-of-experts layer the router, the
  ``top_k`` routed experts and the shared experts only (not every expert).  This is training's
  count (:mod:`podsim.llm.flops`), reused.  Biases, norms, activations, rotary embeddings and
  the softmax are not counted; the input embedding is a lookup (0 FLOPs).
* **attention**: ``QK^T`` and ``AV``, ``2 x 2 x heads x head_dim`` per attended position per
  layer, causal: token ``i`` (0-based) of the chunk attends ``c + i + 1`` positions (the cached
  ones, the chunk's earlier tokens and itself), ``n c + n (n + 1) / 2`` positions in all.
  (Training's count, :mod:`podsim.llm.flops`, takes the full ``s x s`` as Megatron does; a
  serving chunk over a cache is not square, so the causal count is exact here.)
* **LM head** (logits, ``2 x hidden x vocab``): for **one** position per forward pass, the last
  one, whose token is sampled -- vLLM computes logits only at each sequence's last scheduled
  position, and podsim's step timer (:mod:`.steps`) times the output layer that way.  A
  request of ``O`` output tokens thus pays for ``O`` logit rows (the prompt's pass yields the
  first token), not one per prompt token.

:func:`request_flops` serves a request once: its prompt in one pass, then ``O - 1`` decode
passes of one token each (the last token sampled is never fed back).  Counted in closed form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from numbers import Integral

from ...errors import InputError
from ...llm.flops import layer_fwd_per_token
from ...llm.model import ModelConfig


@lru_cache(maxsize=64)
def _per_token(model: ModelConfig) -> tuple[int, int, int]:
    """(GEMM FLOPs per new token, attention FLOPs per attended position, LM-head FLOPs per
    sampled position), every layer summed."""
    gemm = sum(int(layer_fwd_per_token(model, i, 0)[0]) for i in range(model.layers))
    attention = 4 * model.heads * model.dhead * model.layers
    logits = 2 * model.hidden * model.vocab
    return gemm, attention, logits


def _count(value: int, name: str, low: int) -> int:
    """``value`` as an int (numpy integers taken), else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise InputError(f"{name} must be a whole number >= {low}, got {value!r}", where=name)
    return int(value)


def _request_counts(prompt_tokens: int, output_tokens: int) -> tuple[int, int, int]:
    """(tokens through the GEMMs, attended positions, sampled positions) of one request served
    once: the prompt's pass (``P`` tokens, ``P (P + 1) / 2`` positions, 1 sample) and ``O - 1``
    decode passes, the ``j``-th (1-based) over a context of ``P + j - 1`` (so ``P + j``
    positions): ``sum_{j=1}^{O-1} (P + j) = (O - 1) P + (O - 1) O / 2``."""
    p, o = prompt_tokens, output_tokens
    tokens = p + o - 1
    positions = p * (p + 1) // 2 + (o - 1) * p + (o - 1) * o // 2
    return tokens, positions, o


def forward_flops(model: ModelConfig, new_tokens: int, context: int) -> float:
    """Model FLOPs of one forward pass of one sequence computing ``new_tokens`` tokens on top of
    ``context`` cached tokens (the module docstring says what counts): ``new_tokens x GEMMs +
    (new_tokens x context + new_tokens (new_tokens + 1) / 2) x 4 heads head_dim layers + 2 hidden
    vocab`` (logits of the last position only).

    Raises:
        InputError: for ``new_tokens`` < 1 or ``context`` < 0.
    """
    new_tokens = _count(new_tokens, "new_tokens", 1)
    context = _count(context, "context", 0)
    gemm, attention, logits = _per_token(model)
    positions = new_tokens * context + new_tokens * (new_tokens + 1) // 2
    return float(new_tokens * gemm + positions * attention + logits)


def request_flops(model: ModelConfig, prompt_tokens: int, output_tokens: int) -> float:
    """Model FLOPs to serve one request once (FLOPs): the prompt in one pass (which samples the
    first output token), then ``output_tokens - 1`` decode passes of one token over a context
    growing from ``prompt_tokens`` by one a pass.  Closed form: equal to
    ``forward_flops(model, P, 0) + sum(forward_flops(model, 1, P + j) for j in range(O - 1))``.

    Raises:
        InputError: for a prompt or output of fewer than 1 token.
    """
    gemm, attention, logits = _per_token(model)
    tokens, positions, samples = _request_counts(
        _count(prompt_tokens, "prompt_tokens", 1), _count(output_tokens, "output_tokens", 1)
    )
    return float(tokens * gemm + positions * attention + samples * logits)


def serving_mfu(
    model: ModelConfig,
    prompt_tokens: Sequence[int],
    output_tokens: Sequence[int],
    span_s: float,
    gpus: int,
    peak_tflops_per_gpu: float,
) -> float | None:
    """Model FLOPs utilization of a serving run: the :func:`request_flops` of every request
    summed, over ``span_s x gpus x peak_tflops_per_gpu x 1e12``.

    Args:
        prompt_tokens, output_tokens: each request's prompt and output lengths (tokens), in the
            same order.
        span_s: the run's length (s), e.g. from the first arrival to the last finish.
        gpus: every GPU serving (replicas x TP x PP).
        peak_tflops_per_gpu: one GPU's dense peak (TFLOP/s) in the precision served
            (``GpuSpec.peak_tflops[dtype]``; ``GpuSpec.peak`` is in FLOP/ns = TFLOP/s x 1000).

    Returns:
        The fraction of peak (0.4 = 40 %), or None when ``span_s`` <= 0 (nothing to divide by).

    Only the model FLOPs of the useful work count, as MFU's definition (Chowdhery et al.,
    PaLM, 2022) asks: each request served exactly once, from its lengths alone.  What an
    engine does beyond or instead of that is **not** counted either way: the prompt recomputed
    after a preemption and the draft tokens speculative decoding verifies and rejects add
    nothing, and prefix-cache hits take nothing away (the whole prompt counts, as if computed).
    So one workload's model FLOPs are the same under every scheduler, cache and speculation
    setting, and its MFU compares them by their span alone (with prefix caching it can exceed
    what the GPUs computed).

    Raises:
        InputError: for lists of different lengths, a length < 1, ``gpus`` < 1 or a peak that is
            not a finite number > 0.
    """
    if len(prompt_tokens) != len(output_tokens):
        raise InputError(
            f"{len(prompt_tokens)} prompt lengths but {len(output_tokens)} output lengths", where="serving_mfu"
        )
    gpus = _count(gpus, "gpus", 1)
    if (
        isinstance(peak_tflops_per_gpu, bool)
        or not isinstance(peak_tflops_per_gpu, (int, float))
        or not (math.isfinite(peak_tflops_per_gpu) and peak_tflops_per_gpu > 0)
    ):
        raise InputError(
            f"the peak must be a finite number of TFLOP/s > 0, got {peak_tflops_per_gpu!r}", where="peak_tflops_per_gpu"
        )
    if not span_s > 0:
        return None
    gemm, attention, logits = _per_token(model)
    tokens = positions = samples = 0
    for p, o in zip(prompt_tokens, output_tokens):
        t, a, s = _request_counts(_count(p, "prompt_tokens", 1), _count(o, "output_tokens", 1))
        tokens += t
        positions += a
        samples += s
    total = tokens * gemm + positions * attention + samples * logits
    return float(total) / (span_s * gpus * peak_tflops_per_gpu * 1e12)
