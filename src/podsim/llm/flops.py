"""Model FLOPs of one training iteration (the numerator of MFU).

Per token and layer, a forward pass costs ``2 x`` the layer's active matmul parameters plus the
attention scores and weighted sum, ``4 s a d`` (full ``s x s``, as Korthikanti et al. and
Megatron's SC'21 paper count it, not halved for the causal mask); the output layer costs
``2 h V``.  Training is forward + backward = 3 forward passes:

    model FLOPs = 3 B s [ sum over layers (2 P_active + 4 s a d) + 2 h V ]

which for GPT shapes is Korthikanti's ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``.  Hardware
FLOPs add what recomputation re-runs: one more forward with full recompute (Narayanan et al.'s
``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``; only the recomputed layers with
``recompute_layers``), with selective recompute the attention scores (``core_attn``) and FC1
(``mlp``).

NeMo and Megatron-Bridge count the causal attention scores at half (``2 s a d``: their
``flops_formulas``, ``(12 s / h) x 0.5``); :func:`causal_model_flops` gives that count, to
compare with their published "model TFLOP/s per GPU".
"""

from __future__ import annotations

from .layout import Layout
from .model import ModelConfig


def layer_fwd_per_token(model: ModelConfig, i: int, seq: int) -> tuple[float, float]:
    """(matmul FLOPs, attention-score FLOPs over ``seq`` positions) of layer ``i``'s forward, per
    token (a multiply-add counts 2)."""
    h, d = model.hidden, model.dhead
    att = 2 * (h * model.heads * d + 2 * h * model.kv * d + model.heads * d * h)
    if model.is_moe_layer(i):
        mlp = 2 * (model.top_k + model.shared_experts) * model.mlp_matrices * h * model.expert_ffn
        mlp += 2 * h * model.experts
    else:
        mlp = 2 * model.mlp_matrices * h * model.ffn
    return float(att + mlp), 4.0 * seq * model.heads * d


def causal_model_flops(model: ModelConfig, layout: Layout) -> float:
    """Model FLOPs of one iteration as NeMo / Megatron-Bridge count them: the attention scores
    and weighted sum halved for the causal mask (``3 B s [sum (2 P + 2 s a d) + 2 h V]``)."""
    s = layout.seq_len
    score = sum(layer_fwd_per_token(model, i, s)[1] for i in range(model.layers))
    return iteration_flops(model, layout)[0] - 3 * layout.global_batch * s * score / 2


def iteration_flops(model: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one iteration of ``layout.global_batch`` sequences."""
    s = layout.seq_len
    tokens = layout.global_batch * s
    mat = score = 0.0
    per_layer = []
    for i in range(model.layers):
        a, b = layer_fwd_per_token(model, i, s)
        mat += a
        score += b
        per_layer.append(a + b)
    logits = 2.0 * model.hidden * model.vocab
    fwd = tokens * (mat + score + logits)
    model_flops = 3 * fwd
    hw = model_flops
    if layout.recompute == "full":
        if layout.recompute_layers is None:
            hw += tokens * (mat + score)
        else:  # the first N layers of every virtual stage
            hw += tokens * sum(
                per_layer[i]
                for st in range(layout.pp)
                for c in range(layout.vpp)
                for i in layout.chunk_layers(model, st, c)
                if layout.recomputed_layer(model, st, c, i)
            )
    elif layout.recompute == "selective":
        if layout.recomputes("core_attn"):
            hw += tokens * score
        if layout.recomputes("mlp"):  # FC1 re-run (FC2's input is the re-run activation)
            hw += tokens * sum(
                2 * model.hidden * (model.mlp_matrices - 1) * model.ffn
                for i in range(model.layers)
                if not model.is_moe_layer(i)
            )
    return model_flops, hw
