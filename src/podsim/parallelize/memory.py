"""GPU memory of a parallelized training step, and offloading what does not fit.

Per GPU (bytes):

* **weights**: the parameters the GPU holds (``StepOp.param_bytes``): all of them in data
  parallelism; in tensor parallelism 1/N of the split ops' and all of the others'; in pipeline
  parallelism its stage's;
* **gradients**: as many bytes as the weights (the trace's precision);
* **optimizer**: ``optimizer_states`` x the weights (Adam keeps 2 moments, plain SGD none);
* **activations**: the forward ops' outputs, kept for the backward (``StepOp.output_bytes``:
  from a PyTorch capture only outputs in storages the op made; from a TrioSim trace every
  output, in-place ones again, so an upper bound);
  in pipeline parallelism a stage's share per micro-batch times the micro-batches in flight
  (GPipe: all of them; 1F1B: stage s of P holds min(P - s, M)).

When this exceeds the GPU's capacity and a remote (host or pooled) memory is given, the
earliest forward ops' outputs (used last in the backward) are offloaded until it fits, as
TrioSim keeps tensors that do not fit in its remote memory: each is stored after the op that
made it, overlapping the forward ops after it, and loaded again before its layer's backward
ops; loads run one layer ahead (the first offloaded layer's is issued when the backward
starts, the next one's when a layer's backward starts).  Stores and loads share one first-come,
first-served channel per GPU of ``bandwidth`` bytes per ns (:class:`podsim.hardware.remote_memory.RemoteMemory`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InputError
from ..formats.one_gpu_step import OneGpuStep, StepOp
from ..workload import OpKind, ProgramBuilder

GIB = 1 << 30


@dataclass(frozen=True)
class Footprint:
    """Bytes per GPU."""

    weights: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def static(self) -> int:
        """What stays for the whole step: weights, gradients and optimizer state."""
        return self.weights + self.gradients + self.optimizer

    def describe(self) -> str:
        return (
            f"weights {self.weights / GIB:.2f} + gradients {self.gradients / GIB:.2f} + optimizer "
            f"{self.optimizer / GIB:.2f} + activations {self.activations / GIB:.2f} = {self.total / GIB:.2f} GiB"
        )


def footprint(
    step: OneGpuStep,
    mode: str,
    gpus: int,
    *,
    micro_batches: int = 1,
    stage_ops: list[StepOp] | None = None,
    in_flight: int = 1,
) -> Footprint:
    """The memory one GPU needs for ``step`` in ``mode`` (dp, ddp, tp, pp) on ``gpus`` GPUs.

    For pp give the stage's forward ops (``stage_ops``) and the micro-batches it holds at once
    (``in_flight``) of ``micro_batches``.
    """
    if mode == "pp":
        ops = stage_ops or []
        weights = sum(o.param_bytes for o in ops)
        acts = sum(o.output_bytes for o in ops) * in_flight // max(micro_batches, 1)
    else:
        fwd = [o for o in step.ops if o.stage == "forward"]
        weights = sum(o.param_bytes // gpus if mode == "tp" and o.tp_split else o.param_bytes for o in fwd)
        acts = sum(o.output_bytes for o in fwd)
    return Footprint(weights, weights, step.optimizer_states * weights, acts)


def plan_offload(step: OneGpuStep, fp: Footprint, capacity: int) -> OneGpuStep:
    """``step`` with ``offload_bytes`` set on the earliest forward ops so that ``fp`` fits in
    ``capacity`` bytes.

    Raises:
        InputError: when weights, gradients and optimizer state alone exceed the capacity.
    """
    excess = fp.total - capacity
    if excess <= 0:
        return step
    if fp.static >= capacity:
        raise InputError(
            f"weights, gradients and optimizer state need {fp.static / GIB:.2f} GiB per GPU, more than "
            f"its {capacity / GIB:.2f} GiB even with every activation offloaded: use more GPUs with "
            "--parallel tp or pp, or a GPU with more memory (--gpu-memory)"
        )
    ops = []
    for o in step.ops:
        take = min(o.output_bytes, excess) if o.stage == "forward" and excess > 0 else 0
        excess -= take
        ops.append(replace(o, offload_bytes=take) if take else o)
    notes = step.notes + [
        f"{(fp.total - capacity) / GIB:.2f} GiB of activations per GPU do not fit in "
        f"{capacity / GIB:.2f} GiB: offloaded to remote memory after the forward op that makes "
        "them and loaded again before their layer's backward"
    ]
    return replace(step, ops=ops, notes=notes)


class Offload:
    """Emits the stores and loads of a step's offloaded activations into a program (one
    ``offload`` stream; loads wait for their stores)."""

    def __init__(self, step: OneGpuStep) -> None:
        self.by_layer: dict[str, int] = {}
        for o in step.ops:
            if o.offload_bytes:
                self.by_layer[o.layer] = self.by_layer.get(o.layer, 0) + o.offload_bytes
        order: list[str] = []
        for o in step.ops:
            if o.stage == "backward" and o.layer in self.by_layer and o.layer not in order:
                order.append(o.layer)
        self.order = order
        self.stores: dict[str, list[int]] = {}
        self.loads: dict[str, int] = {}

    def store(self, b: ProgramBuilder, op: StepOp, after: int, node_id: int) -> None:
        """After forward op ``op`` (program index ``after``), store its offloaded output."""
        if op.offload_bytes:
            self.stores.setdefault(op.layer, []).append(
                b.add(
                    OpKind.MEM_STORE,
                    f"offload {op.name} output",
                    data_deps=[after],
                    node_id=node_id,
                    size_bytes=op.offload_bytes,
                    stream="offload",
                    extra={"stage": op.stage, "layer": op.layer},
                )
            )

    def _load(self, b: ProgramBuilder, layer: str, deps: list[int], node_id: int) -> None:
        self.loads[layer] = b.add(
            OpKind.MEM_LOAD,
            f"load {layer} activations",
            node_id=node_id,
            data_deps=deps + self.stores.get(layer, []),
            size_bytes=self.by_layer[layer],
            stream="offload",
            extra={"stage": "backward", "layer": layer},
        )

    def before_backward(self, b: ProgramBuilder, op: StepOp, deps: list[int], next_id: int) -> tuple[list[int], int]:
        """Dependencies of ``op``: ``deps``, plus its layer's load for a backward op of an
        offloaded layer.  Loads are issued one layer ahead: the first offloaded layer's when the
        backward starts, the next one's when a layer's backward starts.  Returns the
        dependencies and the next free node id."""
        if op.stage != "backward" or not self.order:
            return deps, next_id
        if not self.loads:  # the backward starts: prefetch the first offloaded layer
            self._load(b, self.order[0], deps, next_id)
            next_id += 1
        if op.layer not in self.by_layer:
            return deps, next_id
        if op.layer not in self.loads:
            self._load(b, op.layer, deps, next_id)
            next_id += 1
        k = self.order.index(op.layer)
        if k + 1 < len(self.order) and self.order[k + 1] not in self.loads:
            self._load(b, self.order[k + 1], deps, next_id)
            next_id += 1
        return deps + [self.loads[op.layer]], next_id
