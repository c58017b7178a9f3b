"""Small parallel training jobs for ``podsim trace --world-size N --layout ...`` (builders called as
``builder(batch_size, parallel)``; see :class:`podsim.capture.ParallelContext`).

* ``podsim.examples.jobs:mlp``: residual MLP blocks (width 256, 4 blocks, 64 tokens a sample)
  under the layout: tensor parallel (column- then row-parallel linear of each block), FSDP2
  over ``dp`` with ``fsdp`` (else gradients all-reduced over ``dp`` after the backward pass),
  and a 1F1B pipeline over ``batch_size`` micro-batches with ``pp``.
* ``podsim.examples.jobs:fixed_time_mlp``: the same with 5 ms forward and 10 ms backward of
  fixed time (sleeps) in every block, so processes sharing a few cores do not slow its compute.
* ``podsim.examples.jobs:fixed_time_pipeline``: a pipeline whose stages take fixed times, 20 ms
  forward and 40 ms backward a micro-batch (sleeps), so its 1F1B schedule can be checked by
  hand: ``(M + P - 1) * (20 + 40)`` ms for M micro-batches on P stages.

torch is imported when a builder runs.
"""

from __future__ import annotations

import time
from typing import Any

from ..capture.parallel import ParallelContext, TrainingStep, one_f_one_b

WIDTH = 256
TOKENS = 64
BLOCKS = 4
#: the fixed-time pipeline's forward and backward time of one micro-batch on one stage (s)
FORWARD_S = 0.020
BACKWARD_S = 0.040


def _fixed(torch: Any, forward_s: float, backward_s: float) -> Any:
    """An autograd function that takes fixed times (sleeps) forward and backward."""

    class Fixed(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:  # type: ignore[override]
            time.sleep(forward_s)
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # type: ignore[override]
            time.sleep(backward_s)
            return g * 1.0

    return Fixed


def _block(torch: Any, fixed: Any = None, width: int = WIDTH) -> Any:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(width, 4 * width)
            self.down = torch.nn.Linear(4 * width, width)

        def forward(self, x: Any) -> Any:
            h = torch.relu(self.up(x))
            if fixed is not None:
                h = fixed.apply(h)
            return x + self.down(h)

    return Block()


def _pipeline(
    stage: Any,
    batch_size: int,
    parallel: ParallelContext,
    torch: Any,
    params: list[Any],
    width: int = WIDTH,
    tokens: int = TOKENS,
) -> TrainingStep:
    """A 1F1B schedule over ``batch_size`` micro-batches of one sample."""
    act = torch.zeros(1, tokens, width)
    x = torch.randn(batch_size, tokens, width)
    return one_f_one_b(stage, parallel, batch_size, x, x, act, act, act, lambda out, y: (out - y).pow(2).mean(), params)


def mlp(batch_size: int, parallel: ParallelContext) -> Any:
    """Residual MLP blocks in ``parallel``'s layout (see the module docstring)."""
    return _mlp(batch_size, parallel, None, WIDTH, TOKENS)


def fixed_time_mlp(batch_size: int, parallel: ParallelContext) -> Any:
    """:func:`mlp` at width 64 and 16 tokens a sample whose every block also takes 5 ms forward
    and 10 ms backward (sleeps): compute that several processes sharing a few cores hardly slow
    down (the check against a real job on a small machine)."""
    import torch

    return _mlp(batch_size, parallel, _fixed(torch, 0.005, 0.010), 64, 16)


def _mlp(batch_size: int, parallel: ParallelContext, fixed: Any, width: int, tokens: int) -> Any:
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    lay, mesh = parallel.layout, parallel.mesh
    torch.manual_seed(0)
    n = BLOCKS // lay.pp if BLOCKS % lay.pp == 0 else BLOCKS
    model = torch.nn.Sequential(*[_block(torch, fixed, width) for _ in range(n)])
    for blk in model:
        if lay.tp > 1:
            parallelize_module(blk, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        if lay.fsdp:
            fully_shard(blk, mesh=mesh["dp"])
    if lay.fsdp:
        fully_shard(model, mesh=mesh["dp"])
    params = list(model.parameters())
    if lay.pp > 1:
        return _pipeline(model, batch_size, parallel, torch, params, width, tokens)
    x = torch.randn(batch_size, tokens, width)
    if lay.fsdp or lay.dp == 1:
        return model, x, x, lambda m, a, b: (m(a) - b).pow(2).mean()
    group = mesh["dp"].get_group()

    def step() -> None:  # plain data parallel: average the gradients over dp
        (model(x) - x).pow(2).mean().backward()
        for p in params:
            g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            dist.all_reduce(g, group=group)
            g /= lay.dp

    return TrainingStep(step, params)


def fixed_time_pipeline(batch_size: int, parallel: ParallelContext) -> TrainingStep:
    """A pipeline of ``parallel.layout.pp`` stages, each taking FORWARD_S and BACKWARD_S a
    micro-batch (``batch_size`` micro-batches of one sample)."""
    import torch

    Fixed = _fixed(torch, FORWARD_S, BACKWARD_S)

    class Stage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(WIDTH))

        def forward(self, x: Any) -> Any:
            return Fixed.apply(x * self.w)

    torch.manual_seed(0)
    stage = Stage()
    return _pipeline(stage, batch_size, parallel, torch, list(stage.parameters()))
