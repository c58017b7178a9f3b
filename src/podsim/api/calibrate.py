"""``podsim calibrate training`` as a Python call: fit a training stack's free parameters to the
user's measured runs and write the fitted stack as a YAML file.

Runs are rows in the columns of ``podsim validate`` (docs/calibration.md) or of the published
measurements table (``params_B, ..., dp, seq_par, zero_or_distopt, framework, metric, value``);
each is predicted as ``podsim validate`` predicts it (:func:`podsim.validation.predict.throughput`)
under the base stack with the free values being fitted.

Example::

    from podsim.api.calibrate import calibrate_training, read_training_runs
    cal = calibrate_training(read_training_runs("my_runs.csv"), base="torchtitan")
    print(cal.fit.fitted, cal.fit.after)
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..fileio import atomic_write_text
from ..hardware.gpu import get_gpu
from ..jobs.stacks import CALIBRATE_PARAMS, STACK_PARAMS, CalibrateJob, StackJob
from ..llm.stack import Stack
from ..stacks.calibrate import MAX_RESIDUAL, Fit, fit
from ..stacks.schema import BY_NAME
from ..stacks.stack import SoftwareStack, load_stack, presets
from ..validation.predict import THROUGHPUT, throughput
from ..validation.rows import read_rows, shipped_rows

__all__ = [
    "CALIBRATE_PARAMS",
    "STACK_PARAMS",
    "CalibrateJob",
    "StackJob",
    "calibrate",
    "calibrate_training",
    "load_stack",
    "presets",
    "read_training_runs",
    "write_stack",
]

#: ``ROWS.csv`` as ``shipped:PREFIX``: podsim's own published rows whose id starts with PREFIX
SHIPPED = "shipped:"
#: the published-measurements table's columns podsim reads besides its own
PUBLISHED = ("seq_par", "zero_or_distopt", "dp")
_NEUTRAL = {"gemm_efficiency": 1.0, "attention_efficiency": 1.0, "elementwise_traffic": 1.0, "fp8_overhead": 1.0}


def _gpu_key(text: str, where: str, src: str) -> str:
    """A GPU key from a published ``gpu`` cell (``H100-80GB (h100_80gb; ...)``)."""
    head = text.split("(")[0].strip().lower().replace(" ", "-").replace("_", "-")
    for cand in (head, head.split("-")[0]):
        try:
            return get_gpu(cand).key
        except InputError:
            continue
    raise InputError(f"gpu {text!r} is not a GPU podsim knows (podsim llm --list)", src, where)


def _published_row(r: dict[str, str], src: str) -> dict[str, str]:
    """A row of the published-measurements table in podsim's columns."""
    where = f"row {r['row_id']}"
    out = dict(r)
    out["gpu"] = _gpu_key(r.get("gpu", ""), where, src)
    prec = (r.get("precision") or "bf16").lower()
    m = re.search(r"mxfp8|fp8|bf16|fp16|fp32", prec)
    out["precision"] = m.group(0) if m else "bf16"
    rec = (r.get("recompute") or "").lower().split()
    out["recompute"] = rec[0] if rec and rec[0] in ("none", "selective", "full") else ""
    shard = (r.get("zero_or_distopt") or "").lower()
    out["sharding"] = (
        "fsdp"
        if "fsdp" in shard or "zero-3" in shard or "zero3" in shard
        else "distopt"
        if "distributed optimizer" in shard
        else ""
    )
    sp = (r.get("seq_par") or "").lower()
    out["sequence_parallel"] = (
        "yes" if sp.startswith(("yes", "true")) else "no" if sp.startswith(("no", "false")) else ""
    )
    if not r.get("activation"):
        h, f = int(r.get("hidden") or 0), int(r.get("ffn_hidden") or 0)
        out["activation"] = "gelu" if f == 4 * h else "swiglu"
    return out


def read_training_runs(path: str | Path) -> list[dict[str, str]]:
    """The measured training runs of ``path`` (either column set, see the module docstring), or
    with ``shipped:PREFIX`` the shipped rows whose id starts with PREFIX.

    Raises:
        InputError: an unreadable file, a row that is not a training-throughput measurement.
    """
    src = str(path)
    if src.startswith(SHIPPED):
        prefix = src[len(SHIPPED) :]
        rows = [r for r in shipped_rows() if r["row_id"].startswith(prefix) and r.get("metric") in THROUGHPUT]
        if not rows:
            raise InputError(f"no shipped training row's id starts with {prefix!r} (podsim validate lists them)", src)
    else:
        rows = read_rows(path, "calibration")
    out = []
    for r in rows:
        if any(c in r for c in PUBLISHED):
            r = _published_row(r, src)
        if r.get("metric") not in THROUGHPUT:
            raise InputError(
                f"metric must be one of {', '.join(THROUGHPUT)} (a training throughput), got {r.get('metric')!r}",
                src,
                f"row {r['row_id']}",
            )
        for col in ("hidden", "layers", "heads", "gpus", "global_batch"):
            if not r.get(col):
                raise InputError(f"{col} is needed to simulate the run", src, f"row {r['row_id']}")
        out.append(r)
    if not out:
        raise InputError("no runs to calibrate to", src)
    return out


@dataclass
class TrainingCalibration:
    """What ``podsim calibrate training`` found: the base stack, the runs, the fit."""

    base: SoftwareStack
    name: str
    runs: list[dict[str, str]]
    measured: list[float]
    fit: Fit
    source: str = ""

    @property
    def ok(self) -> bool:
        return not self.fit.refusal

    def citation(self) -> str:
        ids = ", ".join(r["row_id"] for r in self.runs)
        return f"fitted by podsim calibrate training {self.source} (runs: {ids}) on {datetime.date.today()}"

    def to_yaml(self) -> str:
        """The fitted stack as a stack file (base + the fitted values with their citation)."""
        cite = self.citation()
        data: dict[str, Any] = {
            "name": self.name,
            "title": f"{self.base.title}, calibrated to {len(self.runs)} measured run(s)",
            "kind": "training",
            "base": self.base.name if self.base.origin == "preset" else None,
            "description": f"{self.base.name} with {', '.join(self.fit.fitted)} fitted by podsim calibrate "
            f"training to {self.source}; held at the base's values: {', '.join(self.fit.held) or 'none'}.",
            "training": {k: round(v, 6) for k, v in self.fit.fitted.items()},
            "sources": dict.fromkeys(self.fit.fitted, cite),
        }
        if data["base"] is None:  # a user's file as the base: its values are written out in full
            data["training"] = {**self.base.values, **data["training"]}
            data["sources"] = {**self.base.sources, **data["sources"]}
            del data["base"]
        return yaml.safe_dump(data, sort_keys=False, width=100)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.name,
            "name": self.name,
            "fitted": self.fit.fitted,
            "held": self.fit.held,
            "flat": self.fit.flat,
            "refusal": self.fit.refusal or None,
            "evaluations": self.fit.evaluations,
            "runs": [
                {
                    "row_id": r["row_id"],
                    "metric": r["metric"],
                    "measured": m,
                    "error_before": round(b, 5),
                    "error_after": round(a, 5),
                }
                for r, m, b, a in zip(self.runs, self.measured, self.fit.before, self.fit.after)
            ],
        }


def base_values(base: SoftwareStack, gpu: str, names: list[str]) -> dict[str, float]:
    """Where each free parameter starts: the base stack's value, else Megatron-Core's on ``gpu``
    (relative efficiencies 1, the GPU's host_ns)."""
    out = {}
    for k in names:
        v = base.get(k)
        if v is None:
            v = Stack.for_gpu(gpu).host_ns if k == "host_ns" else _NEUTRAL[k]
        out[k] = float(v)
    return out


def calibrate_training(
    runs: list[dict[str, str]],
    base: str,
    name: str | None = None,
    free: list[str] | None = None,
    source: str = "",
    max_residual: float = MAX_RESIDUAL,
) -> TrainingCalibration:
    """Fit ``base``'s free parameters (or ``free``, each with its bounds from the base's ``free``
    or the property's range) to ``runs``.

    Raises:
        InputError: an unknown base or parameter, a base with nothing free, a run podsim cannot simulate.
    """
    st = load_stack(base, "training")
    bounds = dict(st.free)
    if free:
        bounds = {}
        for k in free:
            prop = BY_NAME.get(k)
            if prop is None or prop.section != "training" or prop.kind != "number":
                numbers = [p.name for p in BY_NAME.values() if p.section == "training" and p.kind == "number"]
                raise InputError(f"--free: {k!r} is not a physical training parameter ({', '.join(numbers)})")
            bounds[k] = st.free.get(k, (prop.lo if prop.lo > 0 else 1.0, prop.hi))
    if not bounds:
        raise InputError(f"stack {base!r} lists no free parameters: give --free NAME,NAME", where="--free")
    measured = [float(r["value"]) for r in runs]
    start = base_values(st, runs[0].get("gpu") or "h100-80gb", list(bounds))

    def predict(values: dict[str, float]) -> list[float]:
        trial = replace(st, values={**st.values, **values})
        return [throughput(r, software=trial) for r in runs]

    result = fit(predict, measured, bounds, start, max_residual)
    return TrainingCalibration(st, name or f"{st.name}-calibrated", runs, measured, result, source)


def write_stack(cal: TrainingCalibration, path: str | Path) -> None:
    """Write the fitted stack file (whole or not at all)."""
    atomic_write_text(path, cal.to_yaml())


def calibrate(job: CalibrateJob) -> TrainingCalibration:
    """``podsim calibrate`` as one call: read the job's runs and fit its base stack (nothing
    written: :func:`write_stack` writes a fit that is :attr:`TrainingCalibration.ok`).

    Raises:
        InputError: a missing ROWS.csv, --base or --out; bad runs; an unknown stack or parameter.
    """
    for flag, value in (("ROWS.csv", job.rows), ("--base", job.base), ("--out", job.out)):
        if not value:
            raise InputError(f"podsim calibrate {job.kind} needs {flag}")
    assert job.rows and job.base and job.out
    runs = read_training_runs(job.rows)
    free = list(job.free) if job.free else None
    return calibrate_training(runs, job.base, job.name or Path(job.out).stem, free, source=job.rows)
