"""Measured LLM serving steps on one GPU: the CSV ``benchmarks/gpu/inference_steps.py`` writes.

A row is one step shape of a Llama-shaped decoder (``podsim.examples.llama.ServingStep``) on one
GPU: a ``prefill`` of ``batch`` prompts of ``prompt_tokens``, a ``decode`` of ``batch``
sequences at ``context`` cached tokens, or a ``mixed`` step (one prefill chunk of
``prompt_tokens`` and ``decodes`` decode sequences at ``context``, as chunked-prefill schedulers
build them), run ``eager`` or replayed from a CUDA ``graph``, with SDPA's ``flash`` or ``cudnn``
backend.  Measured: the median step with its synchronisation (``step_ms``: what an engine's
scheduler waits for each step), the GPU's own time (``gpu_ms``, CUDA events), the profiled
step's busy and idle device time and the host's time to issue it, the peak memory, and the
device time by kernel category (:data:`podsim.compute.steps.CATEGORIES`).  ``#`` lines
are the provenance.  Columns: docs/serving-llm.md, "Measured serving steps".

Shipped measurements live in ``podsim/serving/profiles/steps/<gpu>.csv``.  They give:

* ``podsim infer`` / ``serve-llm --host-overhead-ms eager|cuda-graphs``: the host time a step
  costs beyond its GPU work (``step_ms - busy_ms``), by the step's sequences, measured on that
  GPU for an eager engine or one replaying CUDA graphs (:func:`host_overhead`);
* ``podsim validate``'s fitted set: each ``ok`` row predicted by ``podsim infer``'s step model.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from pathlib import Path

from ...compute.steps import CATEGORIES
from ...errors import InputError
from ...fileio import package_files, read_measured_csv, write_measured_csv

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
    "precision",
    "kind",
    "batch",
    "prompt_tokens",
    "context",
    "decodes",
    "step_tokens",
    "mode",
    "attention",
    "status",
)
MEASURED_COLUMNS = (
    "step_ms",
    "step_ms_min",
    "step_ms_max",
    "steps",
    "gpu_ms",
    "host_ms",
    "busy_ms",
    "idle_ms",
    "kernels",
    "peak_mem_gib",
    "kv_cache_gib",
    *(f"{c}_ms" for c in CATEGORIES),
)
COLUMNS = (*CONFIG_COLUMNS, *MEASURED_COLUMNS, "notes")
COUNT_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "batch")
CHOICES = {
    "kind": ("prefill", "decode", "mixed"),
    "mode": ("eager", "graph"),
    "attention": ("flash", "cudnn"),
    "precision": ("bf16",),
}
#: ``--host-overhead-ms`` words and the rows they read
MODES = {"eager": "eager", "cuda-graphs": "graph"}


@dataclass(frozen=True)
class ServingStepRow:
    """One measured step shape (see the module docstring); times in ms."""

    gpu: str
    model: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    kind: str
    batch: int  #: sequences in the step (prefill prompts, decodes; mixed: 1 + decodes)
    prompt_tokens: int  #: prefill: tokens a prompt; mixed: the prefill chunk's tokens
    context: int  #: decode and mixed: cached tokens of each decoding sequence
    decodes: int  #: mixed: decoding sequences
    mode: str
    attention: str
    status: str
    step_ms: float = math.nan
    busy_ms: float = math.nan
    category_ms: dict[str, float] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def chunks(self) -> list[tuple[int, int]]:
        """The step as podsim's serving model takes it: ``(new tokens, context)`` per sequence."""
        if self.kind == "prefill":
            return [(self.prompt_tokens, 0)] * self.batch
        if self.kind == "decode":
            return [(1, self.context)] * self.batch
        return [(self.prompt_tokens, 0)] + [(1, self.context)] * self.decodes

    @property
    def label(self) -> str:
        """The step in words (``llama3-8b 32L decode b32 ctx 2048 graph flash``)."""
        shape = {
            "prefill": f"b{self.batch} x {self.prompt_tokens} tok",
            "decode": f"b{self.batch} ctx {self.context}",
            "mixed": f"{self.prompt_tokens} + {self.decodes} dec ctx {self.context}",
        }[self.kind]
        return f"{self.model} {self.layers}L {self.kind} {shape} {self.mode} {self.attention}"

    @property
    def row_id(self) -> str:
        shape = {
            "prefill": f"b{self.batch}_p{self.prompt_tokens}",
            "decode": f"b{self.batch}_c{self.context}",
            "mixed": f"p{self.prompt_tokens}_d{self.decodes}_c{self.context}",
        }[self.kind]
        return f"serve_{self.gpu or 'cpu'}_{self.model}_{self.layers}L_{self.kind}_{shape}_{self.mode}_{self.attention}"


@dataclass
class ServingStepSet:
    path: str
    provenance: dict[str, str]
    rows: list[ServingStepRow]


def write_serving_steps(path: str | Path, rows: list[dict], provenance: dict[str, str]) -> None:
    """Write ``rows`` (dicts keyed by :data:`COLUMNS`) under the provenance lines, atomically."""
    write_measured_csv(
        path,
        "podsim measured serving steps v1 (benchmarks/gpu/inference_steps.py; columns: docs/serving-llm.md)",
        provenance,
        COLUMNS,
        rows,
    )


def _count(r: dict[str, str], col: str, src: str, where: str, lo: int = 1) -> int:
    v = r.get(col, "")
    if not (v.isdecimal() and lo <= int(v) <= 2**31):
        raise InputError(f"{col} must be an integer from {lo} to 2^31, got {v!r}", src, where)
    return int(v)


def serving_step_row(values: dict[str, str | None], src: str = "serving steps", where: str = "") -> ServingStepRow:
    """One row from its columns.

    Raises:
        InputError: naming ``src`` and ``where``: a count that is not an integer, a choice
            outside :data:`CHOICES`, a negative or non-numeric time, a step shape its kind does
            not take (a prefill without prompt tokens, a decode without context), or an ``ok``
            row without ``step_ms``.
    """
    r = {k: (v or "").strip() for k, v in values.items() if k is not None}
    for col, allowed in CHOICES.items():
        v = r.get(col, "") or allowed[0]
        if v not in allowed:
            raise InputError(f"{col} must be one of {', '.join(allowed)}, got {v!r}", src, where)
        r[col] = v
    counts = {c: _count(r, c, src, where) for c in COUNT_COLUMNS}
    kind = r["kind"]
    prompt = _count(r, "prompt_tokens", src, where) if kind != "decode" else 0
    context = _count(r, "context", src, where) if kind != "prefill" else 0
    decodes = _count(r, "decodes", src, where) if kind == "mixed" else 0
    meas = {}
    for c in MEASURED_COLUMNS:
        v = r.get(c, "")
        try:
            x = float(v) if v != "" else math.nan
        except ValueError:
            x = -1.0
        if v != "" and not (math.isfinite(x) and x >= 0):
            raise InputError(f"{c} must be a number >= 0 (or empty), got {v!r}", src, where)
        meas[c] = x
    status = r.get("status", "")
    if status == "ok" and not meas["step_ms"] > 0:
        raise InputError("an 'ok' row needs its step_ms (> 0)", src, where)
    return ServingStepRow(
        r.get("gpu", ""),
        r.get("model", ""),
        counts["layers"],
        counts["hidden"],
        counts["heads"],
        counts["kv_heads"],
        counts["ffn_hidden"],
        counts["vocab"],
        kind,
        counts["batch"],
        prompt,
        context,
        decodes,
        r["mode"],
        r["attention"],
        status,
        meas["step_ms"],
        meas["busy_ms"],
        {c: meas[f"{c}_ms"] for c in CATEGORIES if not math.isnan(meas[f"{c}_ms"])},
        r,
        f"{src}:{where}" if where else src,
    )


def read_serving_steps(path: str | Path) -> ServingStepSet:
    """The rows and provenance of a serving-steps CSV.

    Raises:
        InputError: a missing column, or a bad row (:func:`serving_step_row`).
    """
    src = str(path)
    prov, table = read_measured_csv(
        path,
        "serving-steps CSV",
        ("model", "layers", "hidden", "heads", "kind", "batch", "mode", "status", "step_ms"),
        "docs/serving-llm.md, 'Measured serving steps'",
    )
    return ServingStepSet(src, prov, [serving_step_row(r, src, f"row {n}") for n, r in table])


def shipped_path(gpu: str) -> Path | None:
    """The shipped measured serving steps of podsim GPU ``gpu`` (``serving/profiles/steps/<gpu>.csv``), or None."""
    return next((p for p in package_files("podsim.serving", "profiles/steps") if p.stem == gpu), None)


def shipped_serving_steps() -> list[ServingStepSet]:
    """Every shipped serving-steps file (one per measured GPU)."""
    return [read_serving_steps(p) for p in package_files("podsim.serving", "profiles/steps")]


@dataclass(frozen=True)
class HostOverhead:
    """Host time a step costs beyond its GPU work (ms), by the step's sequences: measured points,
    interpolated linearly in log sequences, the edges held beyond them."""

    sequences: tuple[int, ...]
    ms: tuple[float, ...]
    source: str = ""

    def at(self, sequences: int) -> float:
        """ms for a step of ``sequences`` sequences."""
        xs, ys = self.sequences, self.ms
        n = max(sequences, 1)
        if n <= xs[0]:
            return ys[0]
        if n >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, n)
        x0, x1 = math.log(xs[i - 1]), math.log(xs[i])
        f = (math.log(n) - x0) / (x1 - x0)
        return ys[i - 1] + f * (ys[i] - ys[i - 1])


def host_overhead_from(rows: list[ServingStepRow], gpu: str, mode: str, source: str = "") -> HostOverhead:
    """The host overhead of ``mode`` (``eager`` | ``graph``) on ``gpu`` from its ``ok`` decode rows
    with a profiled step: ``step_ms - busy_ms`` (the synchronous step less the device's busy time),
    the median over the rows of each batch size.

    Raises:
        InputError: no such rows.
    """
    by: dict[int, list[float]] = {}
    for r in rows:
        if r.ok and r.gpu == gpu and r.mode == mode and r.kind == "decode" and r.busy_ms == r.busy_ms:
            by.setdefault(r.batch, []).append(max(r.step_ms - r.busy_ms, 0.0))
    if not by:
        raise InputError(f"no measured {mode} decode steps of {gpu} with a profiled step", source or "serving steps")
    xs = tuple(sorted(by))
    med = tuple(
        sorted(by[x])[len(by[x]) // 2]
        if len(by[x]) % 2
        else sum(sorted(by[x])[len(by[x]) // 2 - 1 : len(by[x]) // 2 + 1]) / 2
        for x in xs
    )
    return HostOverhead(xs, med, source)


def host_overhead(gpu: str, word: str) -> HostOverhead:
    """``--host-overhead-ms eager`` / ``cuda-graphs``: the host overhead measured on ``gpu``.

    Raises:
        InputError: an unknown word, or no shipped measurements of ``gpu``.
    """
    if word not in MODES:
        raise InputError(
            f"--host-overhead-ms takes a number of ms or one of {', '.join(MODES)}, got {word!r}",
            where="--host-overhead-ms",
        )
    path = shipped_path(gpu)
    if path is None:
        raise InputError(
            f"{word!r}: podsim ships no measured serving steps of {gpu} "
            "(benchmarks/gpu/inference_steps.py measures them; give a number of ms meanwhile)",
            where="--host-overhead-ms",
        )
    return host_overhead_from(read_serving_steps(path).rows, gpu, MODES[word], str(path))
