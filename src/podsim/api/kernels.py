"""``podsim kernels`` as Python calls: measure kernel times on a real GPU into a kernel table,
fit the roofline model's efficiencies to a table, and compare measured training steps with
podsim's prediction.

* :func:`measure_kernels` -- time GEMMs, attention, memory-bound kernels and whole layers with
  PyTorch (the optional ``torch``) into a kernel table CSV (columns: docs/compute.md).
* :func:`fit_kernels` -- the roofline's efficiencies fitted to a table: a :class:`KernelFit`.
* :func:`compare_steps` -- measured single-GPU training steps against podsim: a
  :class:`StepComparison` (its printed form: :func:`podsim.report.kernels.format_steps`).
* :class:`KernelsJob` -- the parameters of ``podsim kernels`` (its flags: :data:`KERNELS_PARAMS`).

Example::

    from podsim.api.kernels import compare_steps
    cmp = compare_steps("measured", gpu="h100")
    for e in cmp.entries:
        print(e["measured_ms"], e["predicted_ms"])      # ms

Units: kernel and step times in ms; efficiencies are fractions of the GPU's peak (0-1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compute.fit import fit_to_table
from ..compute.measure import measure
from ..compute.steps import read_steps, shipped_path
from ..compute.table import table_model
from ..errors import InputError
from ..hardware.gpu import get_gpu
from ..jobs.kernels import DTYPES, KERNELS_PARAMS, KernelsJob
from ..llm.stack import Stack
from ..validation.training_steps import compare, in_step_efficiency

__all__ = [
    "DTYPES",
    "KERNELS_PARAMS",
    "KernelFit",
    "KernelsJob",
    "StepComparison",
    "compare_steps",
    "fit_kernels",
    "measure_kernels",
]


#: the flags each action of ``podsim kernels`` reads (the others would be ignored)
ACTION_FLAGS = {
    "measure": ("out", "dtype", "quick", "device"),
    "fit": ("table", "gpu", "dtype"),
    "steps": ("steps", "gpu", "json"),
}


def check_flags(job: KernelsJob) -> None:
    """Refuse a flag the job's action does not read (``kernels fit --out``).

    Raises:
        InputError: naming the flag and the actions that read it."""
    if job.action not in ACTION_FLAGS:
        return
    values = {"out": job.out, "table": job.table, "gpu": job.gpu, "steps": job.steps, "json": job.json}
    values.update(dtype=job.dtypes, quick=job.quick, device=job.device)
    for p in KERNELS_PARAMS:
        if p.name in values and p.name not in ACTION_FLAGS[job.action] and values[p.name] != p.default:
            users = [a for a, flags in ACTION_FLAGS.items() if p.name in flags]
            raise InputError(
                f"podsim kernels {job.action} does not read --{p.name} (podsim kernels {' and '.join(users)} does)",
                where=f"--{p.name}",
            )


def measure_kernels(
    out: str | Path,
    dtypes: tuple[str, ...] = ("bf16",),
    quick: bool = False,
    device: str = "cuda",
    progress: Callable[[str], None] | None = None,
) -> int:
    """Measure kernel times with PyTorch on ``device`` (``cpu`` only tests the tool) in each of
    ``dtypes`` and write the table to ``out`` (atomically); ``quick``: a few shapes only.
    ``progress(what)`` names each family of kernels as its measurement starts.  Returns the rows
    written.

    Raises:
        InputError: PyTorch is not installed, or no CUDA GPU is visible for ``cuda``."""
    return measure(out, dtypes, quick, device, progress)


@dataclass(frozen=True)
class KernelFit:
    """The roofline model's efficiencies fitted to a kernel table.

    Attributes:
        table: the table, as one line (source, precision, rows).
        gpu: the GPU's name.
        efficiency: the fitted parameters (fractions of peak, or their shape parameters).
        errors: per kernel family, the mean |time error| of the fitted model (a fraction,
            weighted by the square root of the time).
    """

    table: str
    gpu: str
    efficiency: dict[str, float]
    errors: dict[str, float]


def fit_kernels(table: str | Path, gpu: str = "h100-80gb", dtype: str = "bf16") -> KernelFit:
    """Fit the roofline model's efficiencies to the ``dtype`` rows of the kernel table
    ``table`` (a CSV, or ``measured``: the table podsim ships for ``gpu``) measured on ``gpu``.

    Raises:
        InputError: an unknown GPU, ``measured`` for a GPU without a shipped table, or a bad table."""
    tm = table_model(table, gpu, dtype)
    params, errs = fit_to_table(tm.rows, tm.gpu, dtype)
    return KernelFit(tm.describe(), tm.gpu.name, params, errs)


@dataclass(frozen=True)
class StepComparison:
    """Measured training steps against podsim's prediction.

    Attributes:
        path: the steps CSV compared.
        provenance: where and how it was measured (device, date, torch, ...).
        gpus: the GPU keys of its measured rows.
        entries: one per measured step (fields: :func:`podsim.validation.training_steps.compare`;
            times in ms, errors as fractions).
        efficiency: the GEMM and attention efficiencies read off the measured kernels (one
            GPU only; None otherwise).
        stack_values: the stack's own values of those efficiencies, to compare.
    """

    path: str
    provenance: dict[str, str]
    gpus: list[str]
    entries: list[dict[str, Any]]
    efficiency: dict[str, float] | None = None
    stack_values: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (fields: docs/compute.md)."""
        return {
            "file": self.path,
            "provenance": self.provenance,
            "in_step_efficiency": self.efficiency,
            "rows": self.entries,
        }


def compare_steps(steps: str | Path, gpu: str = "h100-80gb") -> StepComparison:
    """Compare the measured training steps in ``steps`` (a training-steps CSV of
    benchmarks/gpu/training_steps.py, or ``measured``: the steps podsim ships of ``gpu``) with
    podsim's prediction, by kernel category.

    Raises:
        InputError: an unknown GPU, ``measured`` for a GPU podsim ships no steps of, or a bad file."""
    path = str(steps)
    if path == "measured":
        key = get_gpu(gpu).key
        found = shipped_path(key)
        if found is None:
            raise InputError(
                f"podsim ships no measured training steps of {key} (run benchmarks/gpu/training_steps.py "
                "on one and pass its CSV)",
                where="--gpu",
            )
        path = str(found)
    measured = read_steps(path)
    gpus = sorted({r.gpu for r in measured.rows if r.ok and r.gpu})
    if not gpus:
        raise InputError(
            f"nothing to compare: of its {len(measured.rows)} rows none is a step measured on a GPU with status ok "
            "(a CPU run's rows only test the script)",
            path,
        )
    efficiency = None
    stack_values: dict[str, float] = {}
    if len(gpus) == 1 and any(r.category_ms.get("gemm") for r in measured.rows if r.ok and r.gpu):
        efficiency = in_step_efficiency(measured.rows, gpus[0])
        st = Stack.for_gpu(gpus[0])
        stack_values = {"gemm_efficiency": st.gemm_efficiency, "attention_efficiency": st.attention_efficiency}
    entries = compare(measured.rows, efficiency)
    return StepComparison(path, dict(measured.provenance), gpus, entries, efficiency, stack_values)
