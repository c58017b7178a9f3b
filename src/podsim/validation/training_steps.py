"""podsim's prediction of a measured single-GPU training step, and the in-step kernel
efficiencies the measurements give (``podsim/compute/steps.py`` reads the rows).

A row (:class:`~podsim.compute.steps.StepRow`) is simulated as ``podsim llm`` would on one GPU:
the row's Llama shape (SwiGLU, grouped-query attention, rotary positions, untied output layer,
no bias or dropout), ``global_batch = micro_batch`` (one micro-batch), bf16, activation
recomputation ``full`` where the row checkpointed, unfused attention for SDPA's math backend,
no fused cross entropy.

:func:`predicted_categories` splits podsim's kernel list into the measured categories of
:mod:`podsim.capture.breakdown`, so that each category's measured and predicted device time
can be read side by side.  :func:`in_step_efficiency` is the ratio of the compute model's
isolated GEMM (attention) time to the GEMM (attention) time measured inside the whole step, the
median over the GPU's rows: ``gemm_efficiency`` / ``attention_efficiency`` of ``llm/stack.yaml``
measured instead of fitted (a value ``measured`` there reads it from the GPU's shipped rows).
"""

from __future__ import annotations

import statistics

from ..api.train import simulate_training
from ..compute.steps import CATEGORIES, StepRow
from ..errors import InputError
from ..llm.layout import Layout
from ..llm.model import ModelConfig
from ..llm.stack import Stack
from ..llm.training import TrainingResult


def model_of(row: StepRow) -> ModelConfig:
    """The row's decoder as podsim's model config."""
    return ModelConfig(
        row.model or row.row_id,
        row.layers,
        row.hidden,
        row.heads,
        row.ffn_hidden,
        row.vocab,
        row.seq_len,
        kv_heads=row.kv_heads,
        activation="swiglu",
        bias=False,
        learned_positions=False,
        tied_embeddings=False,
        dropout=0.0,
    )


def layout_of(row: StepRow) -> Layout:
    """One GPU, one micro-batch of the row's size, as the row ran."""
    return Layout(
        1,
        global_batch=row.micro_batch,
        micro_batch=row.micro_batch,
        seq_len=row.seq_len,
        recompute="full" if row.checkpoint == "full" else "none",
        precision="bf16",
        flash_attention=row.attention != "math",
        loss_fusion=False,
    )


def _gpu(row: StepRow) -> str:
    if not row.gpu:
        raise InputError(
            f"row {row.row_id} was measured on {row.device_name or 'a device'!r}, not a GPU podsim "
            "knows (gpu column empty; a CPU run checks the tool, it measures no GPU)",
            row.source,
        )
    return row.gpu


def predict(row: StepRow, stack: Stack | None = None) -> TrainingResult:
    """podsim's simulation of the row's step (``stack``: default the GPU's ``llm/stack.yaml``).

    Raises:
        InputError: a row without a GPU key, or a shape podsim's model refuses.
    """
    return simulate_training(
        model_of(row), layout_of(row), _gpu(row), None, "analytical", record_timeline=False, stack=stack, allow_oom=True
    )


def predict_step_s(row: StepRow, stack: Stack | None = None) -> float:
    """The predicted step time (s)."""
    return predict(row, stack).iteration_time_s


def category_of(k: dict, section: str) -> str:
    """The measured category (``podsim.capture.breakdown``) a kernel row of ``podsim llm
    --kernels`` belongs to."""
    name, module, kind = k["name"], k["module"], k["kind"]
    backward = section.endswith("backward")
    if kind == "gemm":
        return "gemm"
    if kind.startswith("attention"):
        return "attention_bwd" if backward else "attention_fwd"
    if section == "optimizer":
        return "optimizer"
    if module == "norm" and "residual" not in name:
        return "norm"
    if "rotary" in name:
        return "rope"
    if module == "mlp" and "residual" not in name:
        return "swiglu"
    if module == "loss":
        return "cross_entropy"
    if module == "embedding":
        return "embedding"
    if module == "fp8":
        return "cast"
    return "elementwise"


def step_categories(res: TrainingResult, layers: int, full_recompute: bool) -> dict[str, float]:
    """podsim's device ms of a one-micro-batch step by measured category: each layer section
    times ``layers`` (the forward twice with full recomputation), the embedding, output and
    optimizer sections once."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    times = {"layer_forward": layers * (2 if full_recompute else 1), "layer_backward": layers}
    for section, rows in res.kernels.items():
        n = times.get(section, 1)
        for k in rows:
            out[category_of(k, section)] += n * k["step_us"] / 1000.0
    return out


def predicted_categories(res: TrainingResult, row: StepRow) -> dict[str, float]:
    """podsim's device ms of the row's step by measured category (:func:`step_categories`)."""
    return step_categories(res, row.layers, row.checkpoint == "full")


def in_step_efficiency(rows: list[StepRow], gpu: str) -> dict[str, float]:
    """``gemm_efficiency`` and ``attention_efficiency`` measured on ``gpu``: the compute model's
    isolated kernel time over the time measured in the step, the median over the GPU's ``ok``
    rows (attention: its cuDNN rows, Transformer Engine's backend, else its flash rows).

    Raises:
        InputError: no ``ok`` row of ``gpu`` with a GEMM (attention) breakdown.
    """
    mine = [r for r in rows if r.ok and r.gpu == gpu and r.category_ms.get("gemm", 0) > 0]
    if not mine:
        raise InputError(f"no measured training step of {gpu} with a kernel breakdown", "podsim/compute/tables")
    isolated = Stack.for_gpu(gpu, gemm_efficiency=1.0, attention_efficiency=1.0)
    gemm, attn = [], {"cudnn": [], "flash": []}
    for r in mine:
        pred = predicted_categories(predict(r, isolated), r)
        gemm.append(pred["gemm"] / r.category_ms["gemm"])
        measured_attn = r.category_ms.get("attention_fwd", 0.0) + r.category_ms.get("attention_bwd", 0.0)
        if r.attention in attn and measured_attn > 0:
            attn[r.attention].append((pred["attention_fwd"] + pred["attention_bwd"]) / measured_attn)
    ratios = attn["cudnn"] or attn["flash"]
    if not ratios:
        raise InputError(
            f"no measured training step of {gpu} with fused attention in its breakdown", "podsim/compute/tables"
        )
    return {
        "gemm_efficiency": round(statistics.median(gemm), 4),
        "attention_efficiency": round(statistics.median(ratios), 4),
    }


def compare(rows: list[StepRow], efficiency: dict[str, float] | None = None) -> list[dict]:
    """Each ``ok`` GPU row measured against podsim: the step (ms) as the GPU's stack predicts it
    and, with ``efficiency`` (``gemm_efficiency`` / ``attention_efficiency``, e.g.
    :func:`in_step_efficiency` of these rows), as it predicts it with those; and the device ms by
    category, measured and predicted.  Fields: docs/compute.md, "Measured training steps"."""
    out = []
    for r in rows:
        if not r.ok or not r.gpu:
            continue
        res = predict(r)
        entry = {
            "row_id": r.row_id,
            "gpu": r.gpu,
            "model": r.model,
            "layers": r.layers,
            "seq_len": r.seq_len,
            "micro_batch": r.micro_batch,
            "mode": r.mode,
            "attention": r.attention,
            "optimizer": r.optimizer,
            "checkpoint": r.checkpoint,
            "measured_ms": r.step_ms,
            "predicted_ms": round(res.iteration_time_s * 1e3, 4),
            "idle_ms": None if r.idle_ms != r.idle_ms else r.idle_ms,
            "categories": {
                c: {"measured_ms": r.category_ms.get(c), "predicted_ms": round(v, 4)}
                for c, v in predicted_categories(res, r).items()
            },
        }
        entry["error"] = entry["predicted_ms"] / r.step_ms - 1
        host = float(r.values.get("host_ms") or "nan")
        listed = sum(
            len(ks)
            * {"layer_forward": r.layers * (2 if r.checkpoint == "full" else 1), "layer_backward": r.layers}.get(sec, 1)
            for sec, ks in res.kernels.items()
        )
        entry["host_ms"] = None if host != host else host
        entry["listed_kernels"] = listed
        #: the host's issue time per kernel podsim lists (llm/stack.yaml's host_ns, for this stack)
        entry["host_us_per_listed_kernel"] = None if host != host else round(host * 1e3 / listed, 3)
        if efficiency:
            fitted = predict_step_s(r, Stack.for_gpu(r.gpu, **efficiency)) * 1e3
            entry["predicted_fitted_ms"] = round(fitted, 4)
            entry["error_fitted"] = fitted / r.step_ms - 1
        out.append(entry)
    return out
