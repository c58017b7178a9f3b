"""Measured-table compute mode: kernel times read from a CSV and interpolated.

A kernel table is a CSV (``#`` lines are comments) with the columns
``kernel,dtype,m,n,k,batch,time_us,note``:

=================  =================================================================  ==========
kernel             m, n, k, batch                                                      time_us
=================  =================================================================  ==========
``gemm``           ``batch`` products of ``(m x k) @ (k x n)``                          all of them
``attention_fwd``  causal fused attention: query length ``m``, key length ``n``,        forward
                   head size ``k``, ``batch`` = sequences x heads
``attention_bwd``  the same, backward only                                             backward
``memory``         a memory-bound kernel moving ``m`` bytes (read + written)           one kernel
``launch``         (any) the GPU time of a tiny kernel                                 one kernel
``layer_fwd/bwd``  whole transformer layers, kept for validation (not interpolated)
=================  =================================================================  ==========

``podsim kernels measure`` writes such a table on a CUDA machine; podsim ships one measured on
an H100 (``compute/tables/h100-80gb.csv``).

Interpolation: GEMMs and attention interpolate **achieved FLOP/s** multilinearly in the logs
of their sizes over the grid the table's points span (a grid point the table lacks takes the
best neighbour below it, since efficiency grows with size); outside the grid the edge's
FLOP/s hold, so time scales with the work.  Memory-bound kernels interpolate time piecewise
linearly in log bytes (the median over the kinds measured at a size) and keep the largest
size's bandwidth beyond it.  Units: ns out, bytes and FLOPs in.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..fileio import check_columns, read_text
from ..hardware.gpu import GpuSpec, get_gpu

REQUIRED = ("kernel", "dtype", "m", "n", "k", "batch", "time_us")
#: the largest size, count or time (us) a row may give: products of four stay finite
MAX_VALUE = 1e15
KERNELS = ("gemm", "attention_fwd", "attention_bwd", "memory", "launch", "layer_fwd", "layer_bwd")


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel."""

    kernel: str
    dtype: str
    m: int
    n: int
    k: int
    batch: int
    time_us: float
    note: str = ""


def read_table(path: str | Path) -> list[KernelRow]:
    """Read a kernel table.

    Raises:
        InputError: naming the file, line and column of a missing column, an unknown kernel or
            a value that is not a positive number.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such kernel table")
    lines = [ln for ln in read_text(p, "kernel table").splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{p}: empty kernel table (expected a header {','.join(REQUIRED)},note)")
    reader = csv.DictReader(lines)
    check_columns(reader.fieldnames, str(p))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{p}: missing column(s) {', '.join(missing)}; expected {','.join(REQUIRED)},note")
    out = []
    for i, r in enumerate(reader, start=2):
        kernel = (r["kernel"] or "").strip()
        if kernel not in KERNELS:
            raise InputError(f"{p}: row {i}: kernel {kernel!r} is not one of {', '.join(KERNELS)}")
        vals = {}
        for c in ("m", "n", "k", "batch", "time_us"):
            try:
                v = float(r[c])
            except (TypeError, ValueError):
                raise InputError(f"{p}: row {i}: column {c} is {r[c]!r}, expected a positive number") from None
            if not 0 < v <= MAX_VALUE:  # also refuses NaN and inf
                raise InputError(
                    f"{p}: row {i}: column {c} is {r[c]!r}, expected a positive number (at most {MAX_VALUE:.0e})"
                )
            vals[c] = v
        out.append(
            KernelRow(
                kernel,
                (r["dtype"] or "").strip(),
                int(vals["m"]),
                int(vals["n"]),
                int(vals["k"]),
                int(vals["batch"]),
                vals["time_us"],
                (r.get("note") or "").strip(),
            )
        )
    return out


class _GridRate:
    """Achieved FLOP/ns over a log-spaced grid, interpolated multilinearly in log space."""

    def __init__(self, points: dict[tuple[int, ...], float]) -> None:
        dims = len(next(iter(points)))
        self.axes = [np.log(np.array(sorted({p[d] for p in points}), dtype=float)) for d in range(dims)]
        shape = tuple(len(a) for a in self.axes)
        grid = np.full(shape, np.nan)
        index = [{v: i for i, v in enumerate(sorted({p[d] for p in points}))} for d in range(dims)]
        for p, rate in points.items():
            idx = tuple(index[d][p[d]] for d in range(dims))
            grid[idx] = rate if np.isnan(grid[idx]) else max(grid[idx], rate)
        # fill holes with the best neighbour below (efficiency grows with size), then above
        for order in (1, -1):
            for idx in np.ndindex(shape) if order == 1 else reversed(list(np.ndindex(shape))):
                if not np.isnan(grid[idx]):
                    continue
                near = []
                for d in range(dims):
                    j = idx[d] - order
                    if 0 <= j < shape[d]:
                        v = grid[idx[:d] + (j,) + idx[d + 1 :]]
                        if not np.isnan(v):
                            near.append(v)
                if near:
                    grid[idx] = max(near)
        self.log_rate = np.log(grid)

    def __call__(self, *coords: float) -> float:
        lo_idx, weights = [], []
        for axis, x in zip(self.axes, coords):
            lx = math.log(max(x, 1e-9))
            if len(axis) == 1 or lx <= axis[0]:
                lo_idx.append(0), weights.append(0.0)
                continue
            if lx >= axis[-1]:
                lo_idx.append(len(axis) - 2), weights.append(1.0)
                continue
            i = int(np.searchsorted(axis, lx)) - 1
            lo_idx.append(i), weights.append((lx - axis[i]) / (axis[i + 1] - axis[i]))
        total = 0.0
        for corner in range(1 << len(coords)):
            w = 1.0
            idx = []
            for d in range(len(coords)):
                up = (corner >> d) & 1
                if len(self.axes[d]) == 1:
                    if up:
                        w = 0.0
                    idx.append(0)
                    continue
                w *= weights[d] if up else 1.0 - weights[d]
                idx.append(lo_idx[d] + up)
            if w:
                total += w * self.log_rate[tuple(idx)]
        return math.exp(total)


@dataclass
class TableComputeModel:
    """Times kernels by interpolating a measured kernel table (the :class:`ComputeModel` API).

    Raises:
        InputError: when the table has no GEMM or no memory rows for ``dtype``.
    """

    gpu: GpuSpec
    rows: list[KernelRow]
    dtype: str = "bf16"
    source: str = ""
    _gemm: _GridRate = field(init=False, repr=False)
    _attn: dict = field(init=False, repr=False)
    _mem: tuple = field(init=False, repr=False)

    def __post_init__(self) -> None:
        mine = [r for r in self.rows if r.dtype == self.dtype]
        where = self.source or "the kernel table"
        gemm = {
            (r.batch, r.m, r.n, r.k): 2.0 * r.m * r.n * r.k * r.batch / (r.time_us * 1e3)
            for r in mine
            if r.kernel == "gemm"
        }
        if not gemm:
            have = sorted({r.dtype for r in self.rows if r.kernel == "gemm"})
            raise InputError(f"{where}: no gemm rows for {self.dtype} (it has {', '.join(have) or 'none'})")
        self._gemm = _GridRate(gemm)
        self._attn = {}
        # fp8 training keeps attention and the memory-bound kernels in bf16
        side = [r for r in self.rows if r.dtype == ("bf16" if self.dtype == "fp8" else self.dtype)]
        for kind in ("attention_fwd", "attention_bwd"):
            pts = {
                (r.batch, r.m, r.k): self._attn_flops(r.batch, r.m, r.n, r.k, kind == "attention_bwd")
                / (r.time_us * 1e3)
                for r in side
                if r.kernel == kind
            }
            if pts:
                self._attn[kind] = _GridRate(pts)
        mem: dict[int, list[float]] = {}
        for r in side:
            if r.kernel == "memory":
                mem.setdefault(r.m, []).append(r.time_us * 1e3)
        if not mem:
            mem = {r.m: [r.time_us * 1e3] for r in self.rows if r.kernel == "memory"}
        if not mem:
            raise InputError(f"{where}: no memory rows (memory-bound kernels)")
        sizes = np.array(sorted(mem), dtype=float)
        times = np.array([float(np.median(mem[int(s)])) for s in sizes])
        self._mem = (np.log(sizes), np.log(times), sizes[-1] / times[-1])

    @classmethod
    def from_csv(cls, path: str | Path, gpu: GpuSpec, dtype: str = "bf16") -> "TableComputeModel":
        return cls(gpu, read_table(path), dtype, str(path))

    def with_dtype(self, dtype: str) -> "TableComputeModel":
        """The same table timing ``dtype`` (an fp8 step's bf16 GEMMs: the output layer)."""
        return self if dtype == self.dtype else TableComputeModel(self.gpu, self.rows, dtype, self.source)

    @property
    def elem_bytes(self) -> float:
        """Bytes per activation element (bf16 under fp8 training; see ComputeModel)."""
        return {"fp32": 4.0, "tf32": 4.0}.get(self.dtype, 2.0)

    def describe(self) -> str:
        """One line for reports."""
        return f"kernel table {self.source or '(in memory)'} ({self.dtype}, {len(self.rows)} rows)"

    @staticmethod
    def _attn_flops(bh: float, sq: float, skv: float, d: float, backward: bool) -> float:
        return 4.0 * bh * sq * skv * d * 0.5 * (2.5 if backward else 1.0)

    def gemm_ns(self, m: float, n: float, k: float, count: float = 1.0) -> float:
        """``count`` GEMMs of ``(m x k) @ (k x n)``."""
        if m <= 0 or n <= 0 or k <= 0 or count <= 0:
            return 0.0
        return 2.0 * m * n * k * count / self._gemm(count, m, n, k)

    def memory_ns(self, nbytes: float, kernels: int = 1) -> float:
        """``kernels`` memory-bound kernels moving ``nbytes`` in total."""
        if nbytes <= 0:
            return 0.0
        kernels = max(kernels, 1)
        each = nbytes / kernels
        lsz, ltm, bw = self._mem
        if each >= math.exp(lsz[-1]):
            return kernels * each / bw
        return kernels * math.exp(float(np.interp(math.log(each), lsz, ltm)))

    def attention_ns(self, bh: float, sq: float, skv: float, d: float, backward: bool = False) -> float:
        """Causal fused attention over ``bh`` (sequences x heads) of ``sq`` queries and ``skv``
        keys of size ``d``; the backward pass alone when ``backward``."""
        if bh <= 0 or sq <= 0:
            return 0.0
        flops = self._attn_flops(bh, sq, skv, d, backward)
        grid = self._attn.get("attention_bwd" if backward else "attention_fwd")
        if grid is None:
            kind = "attention_bwd" if backward else "attention_fwd"
            raise InputError(f"{self.source or 'the kernel table'}: no {kind} rows for {self.dtype}")
        return flops / grid(bh, math.sqrt(sq * skv), d)


def shipped_table(gpu_key: str) -> Path | None:
    """The kernel table podsim ships for ``gpu_key`` (``h100-80gb``), or None."""
    p = resources.files("podsim.compute") / "tables" / f"{gpu_key}.csv"
    return Path(str(p)) if p.is_file() else None


def table_model(table: str | Path, gpu: str | GpuSpec, dtype: str = "bf16") -> TableComputeModel:
    """A :class:`TableComputeModel` from a CSV path, or from ``"measured"``: the table podsim
    ships for ``gpu``.

    Raises:
        InputError: for ``measured`` on a GPU without a shipped table, or a bad table.
    """
    spec = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
    if str(table) == "measured":
        path = shipped_table(spec.key)
        if path is None:
            have = sorted(p.stem for p in Path(str(resources.files("podsim.compute") / "tables")).glob("*.csv"))
            raise InputError(
                f"no measured kernel table ships for {spec.key} (podsim has: {', '.join(have)}); "
                "measure one with 'podsim kernels measure' on that GPU"
            )
        table = path
    return TableComputeModel.from_csv(table, spec, dtype)
