"""What a parallel builder (``podsim trace --world-size N --layout ...``) is given and may return.
The layout itself (``--layout tp=T[,pp=P][,cp=C][,fsdp]``, ranks as a ``("pp", "dp", "cp",
"tp")`` mesh, the distinct ranks) is :mod:`podsim.workload.mesh`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..workload.mesh import DIMS, MeshLayout, layout_from_json, parse_layout

__all__ = ["DIMS", "MeshLayout", "ParallelContext", "TrainingStep", "layout_from_json", "one_f_one_b", "parse_layout"]


@dataclass
class TrainingStep:
    """What a builder returns when the step is not ``loss_fn(model, inputs, targets).backward()``
    (pipelining, for one): ``step()`` runs forward and backward of one training step;
    ``parameters`` are the ones the optimizer steps."""

    step: Callable[[], Any]
    parameters: list[Any] = field(default_factory=list)


@dataclass
class ParallelContext:
    """What a parallel builder (``module:callable`` with ``--layout``) gets besides the batch size.

    Attributes:
        rank: this rank of the job.
        world_size: the job's ranks (torch.distributed is initialised with them).
        layout: the parallel layout.
        mesh: torch's ``DeviceMesh`` of dimensions ``("pp", "dp", "cp", "tp")``.
        device: ``"cpu"`` or ``"cuda"``.
        seq_len: tokens per sequence (HuggingFace models).
    """

    rank: int
    world_size: int
    layout: MeshLayout
    mesh: Any
    device: str = "cpu"
    seq_len: int = 128

    @property
    def coords(self) -> dict[str, int]:
        """This rank's ``{"pp", "dp", "cp", "tp"}``."""
        return self.layout.coords(self.rank)


def one_f_one_b(
    module: Any,
    parallel: ParallelContext,
    micro_batches: int,
    inputs: Any,
    target: Any,
    input_example: Any,
    output_example: Any,
    activation: Any,
    loss_fn: Callable[[Any, Any], Any],
    parameters: list[Any],
) -> TrainingStep:
    """This rank's stage (``module``) of a ``torch.distributed.pipelining`` 1F1B schedule over
    ``micro_batches`` micro-batches, with static shapes so that no stage needs another's data to
    start (a rank traced alone cannot receive them): ``input_example`` / ``output_example`` are one
    micro-batch of the stage's input and output, ``activation`` one of what crosses a stage
    boundary (and its gradient).  The first stage feeds ``inputs``, the last computes
    ``loss_fn(output, target)``."""
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    pp, stages = parallel.coords["pp"], parallel.layout.pp
    first, last = pp == 0, pp == stages - 1
    stage = PipelineStage(
        module,
        pp,
        stages,
        torch.device(parallel.device),
        input_args=input_example,
        output_args=output_example,
        input_grads=None if first else activation,
        output_grads=None if last else activation,
        group=parallel.mesh["pp"].get_group(),
    )
    schedule = Schedule1F1B(stage, n_microbatches=micro_batches, loss_fn=loss_fn)

    def step() -> None:
        if first:
            schedule.step(inputs)
        elif last:
            schedule.step(target=target, losses=[])
        else:
            schedule.step()

    return TrainingStep(step, parameters)
