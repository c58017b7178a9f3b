"""A captured step re-timed on a GPU: each op's time from the kernels its execution trace says it
runs (:mod:`podsim.formats.aten_work`), timed by podsim's compute model of that GPU, instead of
the time it took where it was captured (a laptop's CPU), or, for a capture made on another GPU,
its measured times scaled by the model's ratio of each op's kernels on the two GPUs.

Precisions as PyTorch runs fp32 on a GPU by default: convolutions in TF32 (cuDNN's
``allow_tf32`` is on), matrix multiplies in full fp32 (``torch.backends.cuda.matmul.allow_tf32``
is off); bf16 and fp16 tensors on their tensor cores.  Memory-bound ops move their input and
output bytes at the GPU's fitted HBM efficiency, one launch each.

What it rests on, reported with the step (:class:`Retimed`): the compute model's GEMM fit was
made on bf16 tensor-core kernels of Megatron-sized GEMMs, so convolutions and fp32 GEMMs are an
extrapolation; ops the trace does not describe (no execution trace, or a compute op without
shapes) are listed with their share of the captured time.  Units: ns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from ..compute import cnn_kernels
from ..compute.model import ComputeModel
from ..errors import InputError
from ..formats.aten_work import Work
from ..formats.one_gpu_step import OneGpuStep
from ..hardware.gpu import GpuSpec

#: ``--retime off``: the captured times, not re-timed
AS_CAPTURED = "off"
#: the trace's element types by the precision a GPU runs them in (GEMMs; convolutions: TF32 for float)
_DTYPES = {"float": "fp32", "double": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16"}


@dataclass
class Retimed:
    """What a re-timing did: ``captured_ns`` / ``retimed_ns`` the step's op time before and after;
    ``ops`` re-timed; ``kept`` (op name -> captured ns) the ops left at their captured time (no
    kernel described); ``unknown`` (op name -> count) compute ops timed as memory for want of shapes."""

    gpu: str
    captured_ns: int
    retimed_ns: int
    ops: int
    kept: dict[str, int] = field(default_factory=dict)
    unknown: Counter[str] = field(default_factory=Counter)
    #: the measured times were scaled by the model's ratio between the GPUs (a GPU capture)
    scaled: bool = False

    def note(self, device: str | None, device_name: str | None = None) -> str:
        """One line for the summary (``device_name``: the GPU a ``cuda`` capture ran on)."""
        if self.scaled:
            line = (
                f"compute re-timed on the {self.gpu}: each op's time measured on {device_name} scaled by "
                "podsim's ratio of its kernels there and here, from the execution trace's shapes "
                f"({self.captured_ns / 1e6:,.3f} ms of ops there, {self.retimed_ns / 1e6:,.3f} ms here; "
                f"{self.ops:,} ops)"
            )
        else:
            where = {"cpu": "on the CPU", "cuda": f"on {device_name or 'a GPU'}"}.get(device or "", "elsewhere")
            line = (
                f"compute re-timed on the {self.gpu} from the execution trace's shapes (the step was captured {where}: "
                f"{self.captured_ns / 1e6:,.3f} ms of ops there, {self.retimed_ns / 1e6:,.3f} ms here; {self.ops:,} "
                "ops); podsim's own fp32 ResNet captures on the H100 and H200 re-time within 10% of their measured "
                "kernels (docs/traces.md)"
            )
        if self.kept:
            share = sum(self.kept.values()) / max(self.captured_ns, 1)
            names = ", ".join(sorted(self.kept)[:5]) + (" ..." if len(self.kept) > 5 else "")
            line += f"; {len(self.kept)} op kinds keep their captured time ({share:.1%} of it: {names})"
        if device == "cpu":
            line += (
                "; the optimizer is timed one kernel per tensor and op, as the CPU ran it (PyTorch's foreach "
                "path on a GPU launches fewer)"
            )
        if self.unknown:
            line += "; timed as memory-bound for want of shapes: " + ", ".join(
                f"{k} x{v}" for k, v in self.unknown.most_common(5)
            )
        return line


def kernel_ns(w: Work, cm: ComputeModel) -> float:
    """One kernel's time (ns) on ``cm``'s GPU: convolutions (in TF32, bf16 or fp16), batch norm
    and memory-bound kernels by the CNN kernel fit (:mod:`podsim.compute.cnn_kernels`), GEMMs and
    attention by the compute model."""
    fit = cnn_kernels.fitted()
    dtype = _DTYPES.get(w.dtype, "fp32")
    if w.kind == "conv" and w.passes:
        precision = "half" if dtype in ("bf16", "fp16") else "tf32" if "tf32" in cm.gpu.peak_tflops else ""
        if precision:
            each = w.nbytes / len(w.passes)
            return sum(fit.conv_ns(cm.gpu, precision, p, w.m, w.n, w.c_in, w.window, each, w.strided) for p in w.passes)
    if w.kind == "norm":
        return fit.norm_ns(cm.gpu, w.passes[0], w.c_in, w.m * (4 if dtype == "fp32" else 2))
    if w.kind in ("gemm", "conv"):
        dtype = _DTYPES.get(w.dtype, "fp32")
        if dtype == "fp32" and w.kind == "conv" and "tf32" in cm.gpu.peak_tflops:
            dtype = "tf32"
        return cm.with_dtype(dtype).gemm_ns(w.m, w.n, w.k, w.count)
    if w.kind == "attention":
        return cm.with_dtype(_DTYPES.get(w.dtype, "bf16")).flash_ns(w.flops, w.seq, w.head_dim)
    return fit.elementwise_ns(cm.gpu, w.nbytes)


def ratio_bounds(there: GpuSpec, here: GpuSpec) -> tuple[float, float]:
    """The least and the most an op's time may scale by from GPU ``there`` to GPU ``here``: the
    ratios of their HBM bandwidths and of their dense peaks in each precision both have, and 1
    (an op bound by its launch takes about as long anywhere).  The model's own ratio is kept
    inside them: its fitted per-kernel overheads differ between GPUs more than launches do."""
    ratios = [1.0, there.hbm_bandwidth / here.hbm_bandwidth]
    ratios += [there.peak_tflops[d] / here.peak_tflops[d] for d in there.peak_tflops if d in here.peak_tflops]
    return min(ratios), max(ratios)


def retime(step: OneGpuStep, gpu: GpuSpec, captured_on: GpuSpec | None = None) -> tuple[OneGpuStep, Retimed]:
    """``step`` with every op that has kernels timed on ``gpu`` (see the module docstring).  A
    step captured on the GPU ``captured_on`` keeps its measurements: each op's measured time is
    scaled by the model's ratio of its kernels on ``gpu`` to those on ``captured_on`` (kept
    within :func:`ratio_bounds`), so the model's bias on a kernel (the same on both GPUs to
    first order) cancels.

    Raises:
        InputError: when no op of the step has kernels (a capture without an execution trace).
    """
    cm = ComputeModel.for_gpu(gpu, "fp32")
    there = ComputeModel.for_gpu(captured_on, "fp32") if captured_on is not None else None
    lo, hi = ratio_bounds(captured_on, gpu) if captured_on is not None else (0.0, 0.0)
    report = Retimed(gpu.name, step.total_ns, 0, 0, scaled=there is not None)
    ops = []
    for o in step.ops:
        if o.work is None:
            report.kept[o.name] = report.kept.get(o.name, 0) + o.ns
            ops.append(o)
            continue
        report.ops += 1
        report.unknown.update(w.op for w in o.work if w.kind == "unknown")
        here = sum(kernel_ns(w, cm) for w in o.work)
        if there is not None:
            here = o.ns * min(max(here / max(sum(kernel_ns(w, there) for w in o.work), 1e-9), lo), hi)
        ops.append(replace(o, ns=max(1, round(here))))
    if not report.ops:
        raise InputError(
            "the capture has no execution trace to re-time its ops from (podsim trace writes one; a Kineto "
            "file needs its --execution-trace)",
            step.source,
        )
    out = replace(step, ops=ops, device="retimed")
    report.retimed_ns = out.total_ns
    return out, report
