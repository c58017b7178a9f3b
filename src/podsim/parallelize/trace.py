"""A one-GPU training step as parallelization needs it: ops in order with their time, stage and
the parameter gradients each backward op makes ready.

Built from any importer's output (today: TrioSim's processed traces).  Which backward op
finishes which parameters' gradients: parametrized forward ops (those reading weights) are
matched in reverse order with the backward ops of the same kinds (``ConvolutionBackward``,
``AddmmBackward``, ``MmBackward``, ``*BatchNormBackward``, ``EmbeddingBackward``, ...), as
autograd runs them; when the counts do not match, every gradient is ready at the end of the
backward pass (and a note says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
