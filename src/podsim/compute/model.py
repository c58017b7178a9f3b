"""Compute-op time from FLOPs and bytes with size-dependent efficiency (a calibrated roofline).

Three kinds of kernels:

* **GEMM** ``(m x k) @ (k x n)``, ``count`` of them (batched): its time is the larger of
  ``2 m n k / (peak x eff)`` and its memory traffic over HBM bandwidth, plus a launch overhead.
  ``eff = gemm_max x s(m) s(n) s(k)`` with ``s(d) = d / (d + gemm_knee)``: large GEMMs reach
  ``gemm_max`` of peak; a small dimension (a 128-wide head, a short sequence) costs
  efficiency, as tile quantisation and poor occupancy do on real GPUs.
* **memory-bound** kernels (norms, activations, dropout, softmax, optimizer): bytes over
  ``memory_max x`` HBM bandwidth, plus the launch overhead.
* **flash attention**: its FLOPs at ``flash_max x f(seq) f(head_dim)`` of peak, with
  ``f(d) = d / (d + flash_knee)``.

The efficiency parameters are data (``hardware/gpus.yaml``, key ``efficiency``) fitted once per
GPU type; a GPU without its own inherits A100's fit.  Units: FLOPs, bytes, ns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..hardware.gpu import GpuSpec, get_gpu

#: A100 fit (docs/compute.md); the defaults for every GPU without its own
DEFAULT_EFFICIENCY = {
    "gemm_max": 0.82,
    "gemm_knee": 150.0,
    "memory_max": 0.80,
    "flash_max": 0.55,
    "flash_knee": 48.0,
    "launch_ns": 200.0,
}


class KernelTimer(Protocol):
    """What times kernels: the roofline :class:`ComputeModel` or a measured
    :class:`~podsim.compute.table.TableComputeModel`.  All methods return ns."""

    gpu: GpuSpec
    dtype: str

    @property
    def elem_bytes(self) -> float: ...

    def gemm_ns(self, m: float, n: float, k: float, count: float = 1.0) -> float: ...

    def memory_ns(self, nbytes: float, kernels: int = 1) -> float: ...

    def attention_ns(self, bh: float, sq: float, skv: float, d: float, backward: bool = False) -> float: ...

    def describe(self) -> str: ...

    def with_dtype(self, dtype: str) -> "KernelTimer": ...


@dataclass(frozen=True)
class ComputeModel:
    """Times compute kernels on one GPU in one precision."""

    gpu: GpuSpec
    dtype: str = "bf16"
    gemm_max: float = DEFAULT_EFFICIENCY["gemm_max"]
    gemm_knee: float = DEFAULT_EFFICIENCY["gemm_knee"]
    memory_max: float = DEFAULT_EFFICIENCY["memory_max"]
    flash_max: float = DEFAULT_EFFICIENCY["flash_max"]
    flash_knee: float = DEFAULT_EFFICIENCY["flash_knee"]
    launch_ns: float = DEFAULT_EFFICIENCY["launch_ns"]
    #: fp8 GEMMs' own ``gemm_max`` / ``gemm_knee`` where they were fitted (None: the bf16 ones)
    fp8_gemm_max: float | None = None
    fp8_gemm_knee: float | None = None

    @classmethod
    def for_gpu(cls, gpu: GpuSpec, dtype: str = "bf16", **override: float) -> "ComputeModel":
        """The model with ``gpu``'s fitted efficiency (A100's if it has none)."""
        eff = dict(DEFAULT_EFFICIENCY)
        eff.update(gpu.efficiency or get_gpu("a100-80gb").efficiency)  # the registry's: gpus.yaml read once
        eff.update(override)
        return cls(gpu, dtype, **eff)

    def with_dtype(self, dtype: str) -> "ComputeModel":
        """The same GPU and fit timing ``dtype`` (an fp8 step's bf16 GEMMs: the output layer)."""
        return self if dtype == self.dtype else replace(self, dtype=dtype)

    @property
    def elem_bytes(self) -> float:
        """Bytes per activation element: fp8 training (Transformer Engine style) keeps
        activations, attention and communication in bf16 and runs only the GEMMs in fp8."""
        return {"fp32": 4.0, "tf32": 4.0}.get(self.dtype, 2.0)

    @property
    def gemm_bytes(self) -> float:
        """Bytes per GEMM operand element."""
        return {"fp8": 1.0, "fp4": 0.5}.get(self.dtype, self.elem_bytes)

    @property
    def attention_dtype(self) -> str:
        """Fused attention runs in bf16 under fp8 / fp4 training."""
        return "bf16" if self.dtype in ("fp8", "fp4") else self.dtype

    def describe(self) -> str:
        """One line for reports: the model and its parameters."""
        fp8 = (
            f"fp8 gemm_max {self.fp8_gemm_max:g}, fp8 gemm_knee {self.fp8_gemm_knee:g}, "
            if self.dtype in ("fp8", "fp4") and self.fp8_gemm_max is not None and self.fp8_gemm_knee is not None
            else ""
        )
        return (
            f"roofline ({self.gpu.key}, {self.dtype}): gemm_max {self.gemm_max:g}, gemm_knee {self.gemm_knee:g}, {fp8}"
            f"memory_max {self.memory_max:g}, flash_max {self.flash_max:g}, flash_knee {self.flash_knee:g}, "
            f"launch {self.launch_ns:g} ns"
        )

    def gemm_ns(self, m: float, n: float, k: float, count: float = 1.0) -> float:
        """``count`` GEMMs of ``(m x k) @ (k x n)``."""
        if m <= 0 or n <= 0 or k <= 0 or count <= 0:
            return 0.0
        flops = 2.0 * m * n * k * count
        # fp4 GEMMs (no fit of their own) take the fp8 efficiency curve at the fp4 peak
        fp8 = self.dtype in ("fp8", "fp4") and self.fp8_gemm_max is not None
        top = self.fp8_gemm_max if fp8 else self.gemm_max
        knee = (self.fp8_gemm_knee or self.gemm_knee) if fp8 else self.gemm_knee
        eff = top * (m / (m + knee)) * (n / (n + knee)) * (k / (k + knee))  # type: ignore[operator]
        t_flops = flops / (self.gpu.peak(self.dtype) * eff)
        t_mem = (m * k + k * n + m * n) * count * self.gemm_bytes / (self.gpu.hbm_bandwidth * self.memory_max)
        return max(t_flops, t_mem) + self.launch_ns

    def memory_ns(self, nbytes: float, kernels: int = 1) -> float:
        """Memory-bound kernels moving ``nbytes`` in total."""
        if nbytes <= 0:
            return 0.0
        return nbytes / (self.gpu.hbm_bandwidth * self.memory_max) + kernels * self.launch_ns

    def attention_ns(self, bh: float, sq: float, skv: float, d: float, backward: bool = False) -> float:
        """Causal fused attention over ``bh`` (sequences x heads) of ``sq`` queries and ``skv``
        keys of size ``d``; the backward pass alone (2.5x the forward's FLOPs) when ``backward``."""
        flops = 4.0 * bh * sq * skv * d * 0.5 * (2.5 if backward else 1.0)
        return self.flash_ns(flops, sq, d)

    def flash_ns(self, flops: float, seq: float, head_dim: float) -> float:
        """A flash-attention kernel of ``flops``."""
        if flops <= 0:
            return 0.0
        eff = self.flash_max * seq / (seq + self.flash_knee) * head_dim / (head_dim + self.flash_knee)
        return flops / (self.gpu.peak(self.attention_dtype) * eff) + self.launch_ns
