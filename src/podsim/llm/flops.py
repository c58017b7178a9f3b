"""Model FLOPs of one training iteration (the numerator of MFU).

Per token and layer, a forward pass costs ``2 x`` the layer's active matmul parameters plus the
attention scores and weighted sum, ``4 s a d`` (full ``s x s``, as Korthikanti et al. and
Megatron's SC'21 paper count it, not halved for the causal mask); the output layer costs
``2 h V``.  Training is forward + backward = 3 forward passes:

    model FLOPs = 3 B s [ sum over layers (2 P_active + 4 s a d) + 2 h V ]

which for GPT shapes is Korthikanti's ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``.  Hardware
FLOPs add what recomputation re-runs: one more forward with full recompute (Narayanan et al.'s
``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``), the attention scores with selective recompute.
"""

from __future__ import annotations

from .layout import Layout
from .model import ModelConfig


def _layer_fwd_per_token(model: ModelConfig, i: int, seq: int) -> tuple[float, float]:
    """(matmul FLOPs, attention-score FLOPs) of layer ``i``'s forward, per token."""
    h, d = model.hidden, model.dhead
    att = 2 * (h * model.heads * d + 2 * h * model.kv * d + model.heads * d * h)
    if model.is_moe_layer(i):
        mlp = 2 * (model.top_k + model.shared_experts) * model.mlp_matrices * h * model.expert_ffn
        mlp += 2 * h * model.experts
    else:
        mlp = 2 * model.mlp_matrices * h * model.ffn
    return float(att + mlp), 4.0 * seq * model.heads * d


def iteration_flops(model: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one iteration of ``layout.global_batch`` sequences."""
    s = layout.seq_len
    tokens = layout.global_batch * s
    mat = score = 0.0
    for i in range(model.layers):
        a, b = _layer_fwd_per_token(model, i, s)
        mat += a
        score += b
    logits = 2.0 * model.hidden * model.vocab
    fwd = tokens * (mat + score + logits)
    model_flops = 3 * fwd
    if layout.recompute == "full":
        hw = model_flops + tokens * (mat + score)
    elif layout.recompute == "selective":
        hw = model_flops + tokens * score
    else:
        hw = model_flops
    return model_flops, hw
