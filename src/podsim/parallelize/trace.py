"""A one-GPU training step as parallelization needs it: ops in order with their time, stage and
the parameter gradients each backward op makes ready.

Built from TrioSim's processed traces (:func:`from_triosim`) or a PyTorch profiler trace with
its execution trace (:func:`from_pytorch`).  Which backward op
finishes which parameters' gradients: parametrized forward ops (those reading weights) are
matched in reverse order with the backward ops of the same kinds (``ConvolutionBackward``,
``AddmmBackward``, ``MmBackward``, ``*BatchNormBackward``, ``EmbeddingBackward``, ...), as
autograd runs them; when the counts do not match, every gradient is ready at the end of the
backward pass (and a note says so).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from ..formats.triosim import TriosimTrace

_GRAD_OPS = ("ConvolutionBackward", "AddmmBackward", "MmBackward", "BatchNormBackward", "EmbeddingBackward",
             "LinearBackward", "LayerNormBackward", "BmmBackward")


@dataclass(frozen=True)
class StepOp:
    """One op of the step: ``ns`` of GPU time; ``grad_bytes`` of parameter gradients ready when
    it ends (backward ops); ``param_bytes`` it reads (forward ops); ``output_bytes`` it writes;
    ``tp_split``: tensor parallelism can split it."""

    name: str
    ns: int
    stage: str
    grad_bytes: int = 0
    param_bytes: int = 0
    tp_split: bool = False
    output_bytes: int = 0


@dataclass
class OneGpuStep:
    """A one-GPU training step."""

    source: str
    ops: list[StepOp]
    notes: list[str] = field(default_factory=list)

    @property
    def total_ns(self) -> int:
        return sum(o.ns for o in self.ops)

    @property
    def gradient_bytes(self) -> int:
        return sum(o.grad_bytes for o in self.ops)

    def stage_ns(self) -> dict[str, int]:
        """Time per stage (forward, backward, optimizer), ns."""
        out = {"forward": 0, "backward": 0, "optimizer": 0}
        for o in self.ops:
            out[o.stage] = out.get(o.stage, 0) + o.ns
        return out


def _is_grad_op(name: str) -> bool:
    return any(k in name for k in _GRAD_OPS)


def from_triosim(trace: TriosimTrace, time: str = "kernel") -> OneGpuStep:
    """The step of a TrioSim trace (``kernel``: summed kernel time, ``span``: first to last kernel)."""
    params = [trace.parameter_bytes(o) if o.stage == "forward" else 0 for o in trace.ops]
    fwd_params = [p for p, o in zip(params, trace.ops) if p > 0]
    grad_idx = [i for i, o in enumerate(trace.ops) if o.stage == "backward" and _is_grad_op(o.name)]
    grads = [0] * len(trace.ops)
    notes = []
    if len(grad_idx) == len(fwd_params):
        for i, p in zip(grad_idx, reversed(fwd_params)):
            grads[i] = p
    else:
        last_bwd = max((i for i, o in enumerate(trace.ops) if o.stage == "backward"), default=len(trace.ops) - 1)
        grads[last_bwd] = sum(fwd_params)
        notes.append(f"{len(fwd_params)} parametrized forward ops but {len(grad_idx)} weight-gradient backward ops: "
                     "all gradients are taken as ready at the end of the backward pass")
    def out_bytes(o) -> int:  # type: ignore[no-untyped-def]
        known = [trace.tensors[t].bytes for t in o.outputs if t in trace.tensors]
        return sum(known) if known else 4 * sum(o.output_sizes)   # fp32 when tensor.csv lacks them

    ops = [StepOp(o.name, (o.kernel_us if time == "kernel" else o.span_us) * 1000, o.stage, g, p, o.tp_split,
                  out_bytes(o)) for o, g, p in zip(trace.ops, grads, params)]
    return OneGpuStep(trace.source, ops, notes)


def from_pytorch(kineto: str | Path, execution_trace: str | Path | None = None,
                 whole_trace: bool = False) -> OneGpuStep:
    """The step of a PyTorch profiler trace: its top-level host ops (every thread: autograd
    runs the backward on its own) in time order, each lasting the GPU time of the kernels it
    launched (its host time on a CPU-only trace), staged forward / backward (inside an
    ``autograd::engine`` op) / optimizer (inside ``Optimizer.step``).  With the execution
    trace, each ``AccumulateGrad`` makes its parameter's gradient (its input bytes) ready.

    Raises:
        InputError: as :func:`podsim.formats.pytorch_trace.pytorch_to_workload`.
    """
    from ..formats.pytorch_trace import (
        read_execution_trace,
        read_kineto,
        step_window,
        top_level_ops,
    )

    k = read_kineto(kineto)
    lo, hi, _step = step_window(k, whole_trace)
    host = [o for o in k.host_ops if lo <= o.ts < hi and not o.name.startswith("ProfilerStep#")]
    top = sorted(top_level_ops(host), key=lambda o: o.ts)
    opt = [a for a in k.annotations if a.name.startswith("Optimizer.step") and lo <= a.ts < hi]

    by_tid: dict[int, tuple[list[float], list[int]]] = {}   # tid -> (starts, op indices), in order
    for i, o in enumerate(top):
        starts, idx = by_tid.setdefault(o.tid, ([], []))
        starts.append(o.ts)
        idx.append(i)

    def owner(ts: float, tid: int) -> int | None:
        """The top-level op of thread ``tid`` running at ``ts`` (they do not overlap)."""
        starts, idx = by_tid.get(tid, ((), ()))
        j = bisect.bisect_right(starts, ts) - 1
        if j < 0:
            return None
        o = top[idx[j]]
        return idx[j] if ts < o.ts + o.dur else None

    gpu_ns = [0.0] * len(top)
    for g in k.gpu:
        launch = k.launches.get(g.correlation) if g.correlation is not None else None
        if launch is not None and lo <= launch[0] < hi:
            i = owner(*launch)
            if i is not None:
                gpu_ns[i] += g.dur * 1000
    grads = [0] * len(top)
    notes = []
    if execution_trace is not None:
        nodes = read_execution_trace(execution_trace).by_rf_id()
        for o in host:
            if o.name == "torch::autograd::AccumulateGrad" and o.rf_id in nodes:
                i = owner(o.ts, o.tid)
                if i is not None:
                    grads[i] += nodes[o.rf_id].tensor_bytes_in
    else:
        notes.append("no execution trace: gradient sizes unknown, so no data-parallel reduction is sized")
    use_gpu = any(gpu_ns)
    ops = []
    for i, o in enumerate(top):
        if any(a.ts <= o.ts < a.ts + a.dur for a in opt):
            stage = "optimizer"
        elif o.name.startswith("autograd::engine"):
            stage = "backward"
        else:
            stage = "forward"
        ns = round(gpu_ns[i]) if use_gpu else round(o.dur * 1000)
        if ns > 0 or grads[i]:
            ops.append(StepOp(o.name, max(ns, 1), stage, grads[i]))
    return OneGpuStep(str(kineto), ops, notes)
