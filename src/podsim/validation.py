"""``podsim validate``: run every published measurement podsim can predict and compare.

Rows of ``data/calibration/published_measurements.csv`` handled:

* Megatron-LM SC'21 Tables 1 and 2 (``tflops_per_gpu``): the layout of the row, fp16, full
  recomputation, unfused attention, gradients reduced after the backward (Megatron of 2021),
  micro-batch from the row (1 where not given), on ``dgx-a100-superpod``; compared on
  hardware TFLOP/s per GPU (Narayanan et al.'s formula, which counts the recomputation);
* Korthikanti et al. Figure 1 (GiB per GPU) and Figure 7 (% of the no-recompute activations);
* NCCL bus-bandwidth statements for 8-GPU A100 / H100 servers.

Other rows are skipped and counted.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import InputError


@dataclass
class Check:
    """One compared row."""

    row_id: str
    config: str
    metric: str
    unit: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Relative error (predicted / measured - 1)."""
        return self.predicted / self.measured - 1 if self.measured else 0.0


def _gpt(r: dict):  # type: ignore[no-untyped-def]
    from .llm.model import ModelConfig

    if not r["hidden"]:  # Table 2 names only the size: GPT-3 175B and Megatron's 530B shapes
        from .llm.model import get_model, with_overrides
        name = {"174.6": "gpt3-175b", "529.6": "megatron-gpt-530b"}.get(r["params_B"])
        if name is None:
            raise InputError(f"row {r['row_id']}: no shape for a {r['params_B']}B model")
        return with_overrides(get_model(name), vocab=51200)
    h = int(r["hidden"])
    return ModelConfig(r["model"], int(r["layers"]), h, int(r["heads"]), int(r["ffn_hidden"] or 4 * h),
                       int(r["vocab"] or 51200), int(r["seq_len"] or 2048))


def throughput_layout(r: dict):  # type: ignore[no-untyped-def]
    """The layout of a Megatron SC'21 throughput row as podsim simulates it.

    Megatron-LM of 2021: fp16 with gradients all-reduced in fp16 after the backward (no
    overlap), unfused attention, full activation recomputation.  Table 1 gives no micro-batch
    size: pipelined rows use 1 (the paper's setting for its pipeline experiments), rows without
    pipelining 4 (no bubble to trade against, so larger micro-batches, as the paper's tuning
    section recommends, up to what memory allows)."""
    from .llm.layout import Layout

    pp = int(r["pp"] or 1)
    mb = int(r["micro_batch"]) if r["micro_batch"] else (4 if pp == 1 else 1)
    return Layout(int(r["gpus"]), tp=int(r["tp"] or 1), pp=pp, global_batch=int(r["global_batch"]),
                  micro_batch=mb, seq_len=int(r["seq_len"] or 2048), recompute="full", precision="fp16",
                  overlap_grad_reduce=False, zero=3 if "ZeRO-3" in r["row_id"] else 0, flash_attention=False,
                  grad_reduce_bytes=2, tp_overlap="none")


def throughput(r: dict, compute=None) -> float:  # type: ignore[no-untyped-def]
    """Predicted per-GPU TFLOP/s (hardware FLOPs, recomputation included, as the paper counts)."""
    from .llm.run import simulate_training

    res = simulate_training(_gpt(r), throughput_layout(r), "a100-80gb", "dgx-a100-superpod", "analytical",
                            record_timeline=False, compute=compute)
    return res.hardware_tflops_per_gpu


def _memory(r: dict) -> float:
    from .llm.layout import Layout
    from .llm.memory import GIB, bytes_per_param, stage_memory, stage_params

    m = _gpt(r)
    if r["metric"] == "activation_memory_pct_of_baseline":
        p = int(r["pp"])
        base = Layout(8 * p, tp=int(r["tp"]), pp=p, global_batch=p, seq_len=int(r["seq_len"]), flash_attention=False)
        variant = {"none": {}, "seq": {"sequence_parallel": True}, "sel": {"recompute": "selective"},
                   "seqsel": {"sequence_parallel": True, "recompute": "selective"},
                   "full": {"recompute": "full"}}[r["recompute"]]
        return 100 * stage_memory(m, replace(base, **variant), 0).activations_layers \
            / stage_memory(m, base, 0).activations_layers
    lay = Layout(int(r["gpus"]), tp=int(r["tp"]), pp=int(r["pp"]), vpp=int(r["vpp"] or 1),
                 global_batch=int(r["global_batch"]), micro_batch=int(r["micro_batch"] or 1),
                 seq_len=int(r["seq_len"]), sequence_parallel=r["seq_par"] == "yes",
                 recompute="selective" if r["recompute"] == "selective" else "none", flash_attention=False)
    if r["metric"] == "params_grads_optimizer_GiB":
        return sum(bytes_per_param(lay)) * stage_params(m, lay, 0, matrices_only=True) / GIB
    return stage_memory(m, lay, 0).activations_layers / GIB


_NCCL = {"nccl_a100_nvlink_busbw": ("dgx-a100-superpod", None), "nccl_h100_nvls_busbw": ("dgx-h100", None),
         "nccl_h100_ring_eff": ("dgx-h100", "ring"), "nccl_h100_single_node_476": ("dgx-h100", None)}


def _busbw(r: dict) -> float:
    from .collective_api import collective

    preset, algo = _NCCL[r["row_id"]]
    t = collective("all_reduce", preset, 8, min_bytes="4G", max_bytes="4G", algorithm=algo)
    return t.rows[0].busbw_gbps


def _handler(r: dict) -> Callable[[dict], float] | None:
    if r["metric"] == "tflops_per_gpu" and r["row_id"].startswith("megatron_sc21_t"):
        return throughput
    if r["row_id"].startswith("korthikanti_fig"):
        return _memory
    if r["row_id"] in _NCCL:
        return _busbw
    return None


def run_validation(data: str | Path, only: str | None = None,
                   progress: Callable[[str], None] | None = None) -> tuple[list[Check], int]:
    """Predict every row we can; returns the checks and the number of rows skipped."""
    path = Path(data) / "calibration" / "published_measurements.csv"
    if not path.exists():
        raise InputError("no calibration table here (expected calibration/published_measurements.csv)", str(data))
    checks, skipped = [], 0
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if only and not r["row_id"].startswith(only):
                continue
            h = _handler(r)
            if h is None:
                skipped += 1
                continue
            if progress is not None:
                progress(r["row_id"])
            cfg = (r["model"] or r["gpu"]) + (f", {r['gpus']} GPUs" if r["gpus"] else "") \
                + (f", tp{r['tp']} pp{r['pp']}" if r["tp"] else "") \
                + (f", {r['recompute']}" if r["row_id"].startswith("korthikanti_fig7") else "")
            checks.append(Check(r["row_id"], cfg.strip(), r["metric"], r["unit"], float(r["value"]), h(r)))
    return checks, skipped


def format_checks(checks: list[Check], skipped: int) -> str:
    """The table, then mean and max absolute error."""
    lines = [f"{'row':<46} {'configuration':<32} {'measured':>10} {'predicted':>10} {'error':>8}"]
    for c in checks:
        lines.append(f"{c.row_id:<46} {c.config[:32]:<32} {c.measured:>10.4g} {c.predicted:>10.4g} "
                     f"{100 * c.error:>+7.1f}%")
    if checks:
        errs = [abs(c.error) for c in checks]
        lines.append(f"\n{len(checks)} rows compared ({skipped} skipped): mean |error| {100 * sum(errs) / len(errs):.2f}%, "
                     f"max {100 * max(errs):.2f}%")
        for prefix, label in (("megatron_sc21_t1", "Megatron Table 1"),
                              ("megatron_sc21_t2_PTD", "Megatron Table 2, PTD-P"),
                              ("megatron_sc21_t2_ZeRO", "Megatron Table 2, ZeRO-3 (DeepSpeed; see docs/compute.md)"),
                              ("korthikanti", "Korthikanti memory"), ("nccl", "NCCL bus bandwidth")):
            sub = [abs(c.error) for c in checks if c.row_id.startswith(prefix)]
            if sub:
                lines.append(f"  {label}: mean {100 * sum(sub) / len(sub):.2f}%, max {100 * max(sub):.2f}% "
                             f"over {len(sub)} rows")
    return "\n".join(lines)
