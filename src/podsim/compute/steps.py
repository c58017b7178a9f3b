"""Measured whole training steps on one GPU: the CSV ``benchmarks/gpu/training_steps.py`` writes.

A row is one configuration of a Llama-shaped decoder (``podsim.examples.llama``) trained on one
GPU: its shape, sequence length and micro-batch, how it ran (``mode``: eager | compile;
``attention``: the SDPA backend, flash | cudnn | math; ``optimizer``: AdamW fused | foreach;
``checkpoint``: none | full), the median step time and one profiled step's device time by
category (``<category>_ms``, :data:`CATEGORIES`), the device's busy and
idle time in that step, the peak memory, and for the traced configuration the ``podsim trace``
capture's step and its replay.  ``#`` lines above the header are the provenance
(``# key: value``: device, clocks, power limit, driver, CUDA, torch, date).

Shipped measurements live in ``podsim/compute/tables/steps/<gpu>.csv`` (``<gpu>`` a podsim GPU
key): the compute model's in-step efficiencies and ``podsim validate``'s fitted set read them.
Columns and units: docs/compute.md, "Measured training steps".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..fileio import package_files, read_measured_csv, write_measured_csv

#: the categories of a profiled step's device time (``podsim/capture/breakdown.py`` puts each
#: kernel in one), in the order reports list them
CATEGORIES = (
    "gemm",
    "attention_fwd",
    "attention_bwd",
    "attention_other",
    "norm",
    "rope",
    "swiglu",
    "cross_entropy",
    "embedding",
    "optimizer",
    "kv_cache",
    "sampling",
    "cast",
    "grad_accumulate",
    "elementwise",
    "memcpy",
    "other",
)
#: what a row says of its configuration (strings and counts)
CONFIG_COLUMNS = (
    "gpu",
    "device_name",
    "model",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn_hidden",
    "vocab",
    "seq_len",
    "micro_batch",
    "precision",
    "mode",
    "compile_backend",
    "attention",
    "optimizer",
    "checkpoint",
    "status",
)
#: what it measured (ms, GiB, s, counts; empty where not measured)
MEASURED_COLUMNS = (
    "step_ms",
    "step_ms_min",
    "step_ms_max",
    "steps",
    "wall_step_ms",
    "tokens_per_s",
    "peak_mem_gib",
    "reserved_gib",
    "compile_s",
    "profiled_step_ms",
    "busy_ms",
    "idle_ms",
    "host_ms",
    "kernels",
    *(f"{c}_ms" for c in CATEGORIES),
    "trace_step_ms",
    "replay_ms",
)
COLUMNS = (*CONFIG_COLUMNS, *MEASURED_COLUMNS, "notes")
COUNT_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "micro_batch")
#: the allowed values of the choice columns
CHOICES = {
    "mode": ("eager", "compile"),
    "attention": ("flash", "cudnn", "math", "default"),
    "optimizer": ("fused", "foreach"),
    "checkpoint": ("none", "full"),
    "precision": ("bf16",),
}


@dataclass(frozen=True)
class StepRow:
    """One measured configuration (see the module docstring); times in ms."""

    gpu: str  #: podsim GPU key ("" for a device podsim does not know, e.g. a CPU)
    device_name: str
    model: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    micro_batch: int
    mode: str
    attention: str
    optimizer: str
    checkpoint: str
    status: str
    step_ms: float = math.nan
    idle_ms: float = math.nan
    busy_ms: float = math.nan
    peak_mem_gib: float = math.nan
    #: device ms of the profiled step by category (``podsim.capture.breakdown.CATEGORIES``)
    category_ms: dict[str, float] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)  #: every column as written
    source: str = ""  #: file and line

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def row_id(self) -> str:
        return (
            f"steps_{self.gpu or 'cpu'}_{self.model}_{self.layers}L_s{self.seq_len}_b{self.micro_batch}_"
            f"{self.mode}_{self.attention}_{self.optimizer}"
            + ("_ckpt" if self.checkpoint != "none" else "")
            + ("_traced" if (self.values.get("trace_step_ms") or "").strip() else "")
        )


@dataclass
class StepSet:
    """The rows of one file and its provenance."""

    path: str
    provenance: dict[str, str]
    rows: list[StepRow]


def gpu_key_for_device(name: str) -> str | None:
    """podsim's GPU key for a CUDA device name (``torch.cuda.get_device_name``), or None.

    ``NVIDIA H100 80GB HBM3`` -> ``h100-80gb``; ``NVIDIA H200`` -> ``h200``; the PCIe and NVL
    H100s (other clocks and power) have no key."""
    n = name.upper()
    rules = (
        (r"GB300", "gb300"),
        (r"GB200", "gb200"),
        (r"B300", "b300"),
        (r"B200", "b200"),
        (r"H200", "h200"),
        (r"H100.*(PCIE|NVL)", None),
        (r"H100", "h100-80gb"),
        (r"A100.*40GB", "a100-40gb"),
        (r"A100", "a100-80gb"),
        (r"V100", "v100-32gb"),
        (r"MI300X", "mi300x"),
    )
    for pattern, key in rules:
        if re.search(pattern, n):
            return key
    return None


def write_steps(path: str | Path, rows: list[dict], provenance: dict[str, str]) -> None:
    """Write ``rows`` (dicts keyed by :data:`COLUMNS`; missing keys are empty) under the
    provenance lines, atomically."""
    write_measured_csv(
        path,
        "podsim measured training steps v1 (benchmarks/gpu/training_steps.py; columns: docs/compute.md)",
        provenance,
        COLUMNS,
        rows,
    )


def _number(v: str, src: str, where: str, col: str) -> float:
    if v == "":
        return math.nan
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or x < 0:
        raise InputError(f"{col} must be a number >= 0 (or empty), got {v!r}", src, where)
    return x


def read_steps(path: str | Path) -> StepSet:
    """The rows and provenance of a training-steps CSV.

    Raises:
        InputError: naming the file, the row and the column, for a missing column, a count
            that is not a positive integer, a choice outside :data:`CHOICES`, a negative or
            non-numeric measurement, or an ``ok`` row without its step time.
    """
    src = str(path)
    prov, table = read_measured_csv(
        path,
        "training-steps CSV",
        ("model", "layers", "hidden", "heads", "seq_len", "micro_batch", "mode", "status", "step_ms"),
        "docs/compute.md, 'Measured training steps'",
    )
    rows = [step_row(r, src, f"row {n}") for n, r in table]
    return StepSet(src, prov, rows)


def step_row(values: dict[str, str | None], src: str = "training steps", where: str = "") -> StepRow:
    """One row from its columns (as :func:`read_steps` reads them; errors name ``src`` and ``where``).

    Raises:
        InputError: see :func:`read_steps`.
    """
    r = {k: (v or "").strip() for k, v in values.items() if k is not None}
    counts = {}
    for col in COUNT_COLUMNS:
        v = r.get(col, "")
        if col in ("kv_heads", "ffn_hidden", "vocab") and v == "":
            counts[col] = 0
            continue
        if not (v.isdecimal() and 1 <= int(v) <= 2**31):
            raise InputError(f"{col} must be an integer from 1 to 2^31, got {v!r}", src, where)
        counts[col] = int(v)
    for col, allowed in CHOICES.items():
        v = r.get(col, "") or allowed[0]
        if v not in allowed:
            raise InputError(f"{col} must be one of {', '.join(allowed)}, got {v!r}", src, where)
        r[col] = v
    meas = {c: _number(r.get(c, ""), src, where, c) for c in MEASURED_COLUMNS}
    status = r.get("status", "")
    if status == "ok" and not meas["step_ms"] > 0:
        raise InputError("an 'ok' row needs its step_ms (> 0)", src, where)
    return StepRow(
        r.get("gpu", ""),
        r.get("device_name", ""),
        r.get("model", ""),
        counts["layers"],
        counts["hidden"],
        counts["heads"],
        counts["kv_heads"] or counts["heads"],
        counts["ffn_hidden"] or 4 * counts["hidden"],
        counts["vocab"] or 32000,
        counts["seq_len"],
        counts["micro_batch"],
        r["mode"],
        r["attention"],
        r["optimizer"],
        r["checkpoint"],
        status,
        meas["step_ms"],
        meas["idle_ms"],
        meas["busy_ms"],
        meas["peak_mem_gib"],
        {c: meas[f"{c}_ms"] for c in CATEGORIES if not math.isnan(meas[f"{c}_ms"])},
        r,
        f"{src}:{where}" if where else src,
    )


def shipped_path(gpu: str) -> Path | None:
    """The shipped measured steps of podsim GPU ``gpu`` (``compute/tables/steps/<gpu>.csv``), or None."""
    return next((p for p in package_files("podsim.compute", "tables/steps") if p.stem == gpu), None)


#: the suffix of a shipped profiled step: ``tables/steps/<gpu>.profile.json.gz``, the PyTorch profiler
#: trace of the first configuration of ``<gpu>.csv`` (``podsim calibrate trace shipped:<gpu>``)
PROFILE_SUFFIX = ".profile.json.gz"


def shipped_profiles() -> dict[str, Path]:
    """GPU key -> its shipped profiled step (:data:`PROFILE_SUFFIX`)."""
    files = package_files("podsim.compute", "tables/steps", PROFILE_SUFFIX)
    return {p.name[: -len(PROFILE_SUFFIX)]: p for p in files}


def shipped_steps() -> list[StepSet]:
    """Every shipped training-steps file (one per measured GPU)."""
    return [read_steps(p) for p in package_files("podsim.compute", "tables/steps")]
