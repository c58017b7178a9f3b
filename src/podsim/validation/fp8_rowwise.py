"""torchao's measured rowwise-fp8 linear speedups against podsim's model of them.

The measurements (``compute/tables/fp8_rowwise_h100.csv``): for a LayerNorm -> Linear -> Sigmoid
block, forward and backward, compiled, the time in bfloat16 over the time with torchao's dynamic
rowwise fp8 scaling, on an H100, by the linear's forward ``M x K -> M x N``.

podsim's model of one such block: the same memory-bound kernels in both (the norm reads and
writes ``M x K``, its backward ``3 M K`` elements; the sigmoid ``2 M N``, its backward ``3 M N``)
and the linear's three GEMMs (forward, input gradient, weight gradient), bf16 or fp8 on the
compute model of the GPU; the fp8 block adds :func:`podsim.llm.kernels.rowwise_casts`, timed on
the memory roofline times ``overhead``.  :func:`fit_overhead` is how ``fp8_rowwise_overhead``
in ``llm/stack.yaml`` was set (``python scripts/fit_fp8_rowwise.py``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources

from ..compute.model import ComputeModel
from ..hardware.gpu import GpuSpec, get_gpu
from ..llm.kernels import rowwise_casts
from ..llm.stack import FP8_ROWWISE_GPU

#: the shipped measurements and the GPU they were measured on
TABLE = "fp8_rowwise_h100.csv"
TABLE_GPU = FP8_ROWWISE_GPU
#: bytes per element: bf16 activations and weights, fp8 casts
_E, _Q = 2.0, 1.0


@dataclass(frozen=True)
class Cell:
    """One measured block: the linear's forward ``m x k -> m x n`` and the speedup of fp8 over bf16."""

    m: int
    k: int
    n: int
    speedup: float


def read_cells() -> list[Cell]:
    """torchao's measured speedups (the shipped transcription)."""
    text = (resources.files("podsim.compute") / "tables" / TABLE).read_text()
    rows = csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#"))
    return [Cell(int(r["m"]), int(r["k"]), int(r["n"]), float(r["speedup"])) for r in rows]


def _block_ns(cm: ComputeModel, m: int, k: int, n: int) -> tuple[float, float, float]:
    """(memory-bound kernels, bf16 GEMMs, fp8 GEMMs) of one block, forward and backward, ns."""
    mem = cm.memory_ns(m * k * 2 * _E) + cm.memory_ns(m * n * 2 * _E)  # norm, sigmoid forward
    mem += cm.memory_ns(m * n * 3 * _E) + cm.memory_ns(m * k * 3 * _E)  # their backward
    shapes = ((m, n, k), (m, k, n), (n, k, m))  # forward, input gradient, weight gradient
    fp8 = cm.with_dtype("fp8")
    return (
        mem,
        sum(cm.with_dtype("bf16").gemm_ns(*s) for s in shapes),
        sum(fp8.gemm_ns(*s) for s in shapes),
    )


def casts_ns(cm: ComputeModel, m: int, k: int, n: int) -> float:
    """The rowwise casts of one block on the memory roofline (overhead 1), ns."""
    ks = rowwise_casts("fc", m, n, k, _E, _Q, False) + rowwise_casts("fc", m, n, k, _E, _Q, True)
    return sum(cm.memory_ns(x.nbytes, x.count) for x in ks)


def _parts(cell: Cell, cm: ComputeModel) -> tuple[float, float, float]:
    """(bf16 block, fp8 block without its casts, the casts at overhead 1) of ``cell``, ns."""
    mem, bf16, fp8 = _block_ns(cm, cell.m, cell.k, cell.n)
    return mem + bf16, mem + fp8, casts_ns(cm, cell.m, cell.k, cell.n)


def modelled_speedup(cell: Cell, overhead: float, gpu: GpuSpec | None = None) -> float:
    """podsim's bf16 time of ``cell``'s block over its rowwise-fp8 time with the casts at ``overhead``."""
    bf16, fp8, casts = _parts(cell, ComputeModel.for_gpu(gpu or get_gpu(TABLE_GPU), "bf16"))
    return bf16 / (fp8 + overhead * casts)


def errors_pct(overhead: float, cells: list[Cell] | None = None) -> list[float]:
    """podsim's error on each measured speedup (%, positive = podsim's fp8 block too fast)."""
    return [(modelled_speedup(c, overhead) / c.speedup - 1) * 100 for c in cells or read_cells()]


def fit_overhead(cells: list[Cell] | None = None, lo: float = 0.5, hi: float = 10.0) -> float:
    """The overhead that minimises the squared log error over ``cells`` (golden-section search)."""
    cells = cells or read_cells()
    cm = ComputeModel.for_gpu(get_gpu(TABLE_GPU), "bf16")
    parts = [(_parts(c, cm), c.speedup) for c in cells]  # the block times do not depend on the overhead

    def loss(x: float) -> float:
        return sum(math.log(bf16 / (fp8 + x * casts) / measured) ** 2 for (bf16, fp8, casts), measured in parts)

    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - g * (b - a), a + g * (b - a)
        if loss(math.exp(c)) < loss(math.exp(d)):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2)
