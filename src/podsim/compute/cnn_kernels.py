"""Kernel times of a CNN training step's ops on a GPU (convolutions, batch norm, elementwise),
for re-timing a captured step (:mod:`podsim.parallelize.retime`).

The fit (``tables/cnn_kernels.yaml``) was made on one GPU's kernel measurements
(``benchmarks/gpu/conv_kernels.py``: each kernel's own duration from the profiler) and is kept
as fractions of the GPU's peak and HBM bandwidth, so it applies to every GPU in proportion:

* a convolution pass (``fwd``, ``bwd_data``, ``bwd_weight``) is its implicit GEMM (M = output
  elements / O, N = O, K = C x kernel, C rounded up to a multiple of 8 as tensor cores take it)
  at ``max x M/(M+knee) x N/(N+knee) x K/(K+knee)`` of the precision's peak (TF32 for fp32
  tensors, as cuDNN runs them), or its tensors' bytes at the elementwise bandwidth if slower;
  a strided (down-sampling) convolution's pass takes ``stride_penalty`` times that, and every
  pass ``fixed_ns`` more (its kernels' set-up, whatever the size);
* batch norm (training) moves :data:`NORM_TENSORS` tensors of its input's size (forward: the
  input read, the output written; backward: the output's gradient and the input read, the
  input's gradient written) at ``max x C/(C+knee)`` of the HBM bandwidth, forward and backward
  apart (few channels of many elements reduce slowly);
* any other op moves its input and output bytes at ``elementwise`` of the HBM bandwidth, plus
  ``elementwise_fixed_ns`` (the least a kernel takes).

Units: ns, bytes, FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..fileio import load_yaml
from ..hardware.gpu import GpuSpec

FIT_FILE = Path(__file__).parent / "tables" / "cnn_kernels.yaml"
PASSES = ("fwd", "bwd_data", "bwd_weight")
#: the precision classes a convolution pass is fitted for: fp32 tensors run in TF32; bf16 and fp16 alike
CONV_PRECISIONS = ("tf32", "half")
#: tensors of its input's size a batch norm pass moves
NORM_TENSORS = {"fwd": 2, "bwd": 3}
#: tensor cores take input channels in multiples of this (fewer are padded)
CHANNEL_ALIGN = 8


@dataclass(frozen=True)
class ConvPass:
    """One convolution pass's fit: ``max`` and ``knee`` of its efficiency curve, ``stride_penalty``,
    and ``fixed_ns``, a time every kernel of the pass takes whatever its size (ns)."""

    max: float
    knee: float
    stride_penalty: float
    fixed_ns: float


@dataclass(frozen=True)
class CnnKernelFit:
    """The fitted parameters (see the module docstring) and where they come from."""

    conv: dict[tuple[str, str], ConvPass]
    norm: dict[str, tuple[float, float]]  # pass (fwd, bwd) -> (max, knee in channels)
    elementwise: float
    elementwise_fixed_ns: float
    source: str

    def conv_ns(
        self,
        gpu: GpuSpec,
        precision: str,
        step: str,
        m: float,
        n: float,
        c_in: float,
        window: float,
        nbytes: float,
        strided: bool,
    ) -> float:
        """One convolution pass ``step`` of implicit GEMM ``m x n x (c_in x window)`` (``window``:
        kernel elements) moving ``nbytes``, in ``precision`` (``tf32`` or ``half``)."""
        if m <= 0 or n <= 0 or c_in <= 0 or window <= 0:
            return 0.0
        p = self.conv[(precision, step)]
        k = math.ceil(c_in / CHANNEL_ALIGN) * CHANNEL_ALIGN * window
        eff = p.max * (m / (m + p.knee)) * (n / (n + p.knee)) * (k / (k + p.knee))
        peak = gpu.peak("tf32" if precision == "tf32" else "bf16")
        t = max(2.0 * m * n * k / (peak * eff), self.elementwise_ns(gpu, nbytes))
        return t * (p.stride_penalty if strided else 1.0) + p.fixed_ns

    def norm_ns(self, gpu: GpuSpec, step: str, channels: float, input_bytes: float) -> float:
        """Batch norm's forward or backward (``step``) over ``channels``, its input ``input_bytes``."""
        top, knee = self.norm[step]
        c = max(channels, 1.0)
        return NORM_TENSORS[step] * input_bytes / (gpu.hbm_bandwidth * top * c / (c + knee))

    def elementwise_ns(self, gpu: GpuSpec, nbytes: float) -> float:
        """A memory-bound kernel moving ``nbytes``."""
        return max(nbytes, 0.0) / (gpu.hbm_bandwidth * self.elementwise) + self.elementwise_fixed_ns


def from_dict(d: dict, source: str) -> CnnKernelFit:
    """The fit from its YAML form (``conv: {tf32: {fwd: {max, knee, stride_penalty, fixed_ns}, ...}, half:
    ...}, norm: {fwd: {max, knee}, bwd: ...}, elementwise: x``)."""
    conv = {
        (prec, step): ConvPass(float(v["max"]), float(v["knee"]), float(v["stride_penalty"]), float(v["fixed_ns"]))
        for prec in CONV_PRECISIONS
        for step, v in d["conv"][prec].items()
    }
    norm = {step: (float(v["max"]), float(v["knee"])) for step, v in d["norm"].items()}
    return CnnKernelFit(conv, norm, float(d["elementwise"]), float(d["elementwise_fixed_ns"]), source)


@cache
def fitted() -> CnnKernelFit:
    """The shipped fit (``tables/cnn_kernels.yaml``)."""
    d = load_yaml(FIT_FILE.read_text())
    assert isinstance(d, dict)
    return from_dict(d, str(d.get("source", FIT_FILE.name)))
