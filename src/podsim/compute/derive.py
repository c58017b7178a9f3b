"""The compute efficiency of a GPU podsim has not measured itself, from a measured sibling's fit
and published kernel measurements of both (``hardware/published_kernels.csv``).

A derived GPU keeps its sibling's fitted curve shapes (the knees, the launch overhead) and scales
the ceilings by how the two GPUs compare, kernel for kernel, in the same published benchmark:

    scale(p) = geometric mean over matched pairs of  (value_gpu / peak_gpu) / (value_ref / peak_ref)

where a pair is one harness and case (same benchmark, same shape or rule) measured on both,
``peak`` the datasheet dense peak of the kernel's dtype (TFLOP/s) or the HBM bandwidth (GB/s),
and ``ref`` the sibling or a GPU that shares its fit as is (an H200 for the H100: the same GH100
chip, same peaks).  Parameters and the kernels that set them:

=================  ====================================================================
``gemm_max``       bf16 ``gemm`` rows
``fp8_gemm_max``   fp8 ``gemm`` rows
``flash_max``      ``attention_fwd`` and ``attention_bwd`` (weight 1 : 2.5, their time)
``memory_max``     ``memory`` rows (fraction of HBM bandwidth)
=================  ====================================================================

``measured_as`` lets a GPU borrow another's rows for one parameter (a B200 with no published
cuDNN runs: the GB200's, the same die).  ``gpus.yaml`` stores the factors; ``tests`` check them
against this module; ``scripts/derive_efficiency.py`` prints them.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import InputError
from ..fileio import read_text
from ..hardware.gpu import SCALABLE, GpuSpec

#: parameter -> (kernels, dtype) of the rows that set it
_ROWS_FOR = {
    "gemm_max": (("gemm",), "bf16"),
    "fp8_gemm_max": (("gemm",), "fp8"),
    "flash_max": (("attention_fwd", "attention_bwd"), "bf16"),
    "memory_max": (("memory",), "bf16"),
}
#: the largest value a published row may give (TFLOP/s or GB/s)
MAX_VALUE = 1e9
#: weight of a kernel's log ratio (the backward runs 2.5x the forward's FLOPs at about its rate)
_WEIGHT = {"attention_bwd": 2.5}


@dataclass(frozen=True)
class PublishedKernel:
    """One published kernel measurement (a row of ``published_kernels.csv``).

    ``value`` in TFLOP/s (``unit`` ``TFLOP/s``) or GB/s (``GB/s``)."""

    gpu: str
    kernel: str
    dtype: str
    harness: str
    case: str
    value: float
    unit: str
    source: str


def published_kernels(path: str | Path | None = None) -> list[PublishedKernel]:
    """The shipped rows, or those of ``path`` (same columns).

    Raises:
        InputError: a missing column or a non-positive value, naming the file and row.
    """
    if path is None:
        text = resources.files("podsim.hardware").joinpath("published_kernels.csv").read_text()
        where = "podsim/hardware/published_kernels.csv"
    else:
        where = str(path)
        text = read_text(path, "kernel file")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    out = []
    for i, r in enumerate(csv.DictReader(lines), start=2):
        try:
            v = float(r["value"])
            row = PublishedKernel(r["gpu"], r["kernel"], r["dtype"], r["harness"], r["case"], v, r["unit"], r["source"])
        except (KeyError, TypeError, ValueError):
            raise InputError(
                "expected columns gpu, kernel, dtype, harness, case, value, unit, source with a numeric value",
                where,
                f"row {i}",
            ) from None
        if not 0 < v <= MAX_VALUE or row.unit not in ("TFLOP/s", "GB/s"):  # also refuses NaN and inf
            raise InputError(
                f"expected a positive value in TFLOP/s or GB/s (at most {MAX_VALUE:.0e}), got {r['value']} {r['unit']}",
                where,
                f"row {i}",
            )
        out.append(row)
    return out


def fraction_of_peak(row: PublishedKernel, gpu: GpuSpec) -> float:
    """The measured value over ``gpu``'s datasheet peak for it (dimensionless)."""
    if row.unit == "GB/s":
        return row.value / gpu.hbm_bandwidth  # hbm_bandwidth is in GB/s (bytes per ns)
    return row.value / (gpu.peak(row.dtype) / 1000.0)  # peak() is FLOP per ns = TFLOP/s x 1000


def efficiency_scale(
    gpu: str,
    sibling: str,
    gpus: dict[str, GpuSpec],
    rows: list[PublishedKernel],
    measured_as: dict[str, str] | None = None,
) -> dict[str, tuple[float, int]]:
    """parameter -> (scale factor, matched pairs) for ``gpu`` against ``sibling``'s fit, for the
    parameters with at least one matched pair.  References: ``sibling`` and the GPUs with its
    compute (the same dense peaks) that share its fit unscaled (the H200 for the H100)."""
    base = gpus[sibling]
    refs = {sibling} | {
        k
        for k, g in gpus.items()
        if g.efficiency_from == sibling and not g.efficiency_scale and g.peak_tflops == base.peak_tflops and k != gpu
    }
    out: dict[str, tuple[float, int]] = {}
    for param in SCALABLE:
        kernels, dtype = _ROWS_FOR[param]
        who = (measured_as or {}).get(param, gpu)
        mine = {
            (r.harness, r.kernel, r.case): r for r in rows if r.gpu == who and r.kernel in kernels and r.dtype == dtype
        }
        num = den = 0.0
        n = 0
        for r in rows:
            key = (r.harness, r.kernel, r.case)
            if r.gpu in refs and r.dtype == dtype and key in mine:
                w = _WEIGHT.get(r.kernel, 1.0)
                num += w * math.log(fraction_of_peak(mine[key], gpus[who]) / fraction_of_peak(r, gpus[r.gpu]))
                den += w
                n += 1
        if n:
            out[param] = (math.exp(num / den), n)
    return out
