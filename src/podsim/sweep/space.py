"""The training layouts a search considers, and why the rest are rejected (issue #15, first part).

A :class:`Space` lists the values of each dimension (TP, PP, VPP, CP, EP, micro-batch,
recomputation, sequence parallelism, distributed optimizer); :func:`enumerate_layouts` walks
their product for each GPU count, keeps the layouts :meth:`podsim.llm.layout.Layout.check`
accepts and whose peak memory per GPU (:func:`podsim.llm.memory.memory`, the largest pipeline
stage) fits the GPU, and counts the others by the rule that removed them.  DP is what the GPU
count leaves.  Nothing is simulated here.  Units: GiB (2^30 B).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..llm.layout import Layout
from ..llm.memory import GIB, memory
from ..llm.model import ModelConfig


@dataclass(frozen=True)
class Space:
    """The values each dimension of a training layout may take."""

    gpus: tuple[int, ...]
    global_batch: int
    seq_len: int
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2, 4, 8, 16)
    vpp: tuple[int, ...] = (1, 2)
    cp: tuple[int, ...] = (1,)
    ep: tuple[int, ...] = (1,)
    micro_batch: tuple[int, ...] = (1, 2, 4)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (True, False)
    distributed_optimizer: tuple[bool, ...] = (True, False)
    base: Layout = field(default_factory=lambda: Layout(gpus=1))   #: every other setting (precision, ...)

    def size(self) -> int:
        """Points in the space (before any is rejected)."""
        n = len(self.gpus)
        for d in ("tp", "pp", "vpp", "cp", "ep", "micro_batch", "recompute", "sequence_parallel",
                  "distributed_optimizer"):
            n *= len(getattr(self, d))
        return n


@dataclass
class Enumerated:
    """The layouts that may run, with their peak memory per GPU (GiB), and the count of the
    rejected ones by reason."""

    layouts: list[Layout]
    memory_gib: list[float]
    rejected: Counter[str]

    @property
    def considered(self) -> int:
        return len(self.layouts) + sum(self.rejected.values())


#: a rule's message -> its reason (numbers and names replaced, so that equal rules count together)
_NUMBERS = re.compile(r"(?<![A-Za-z])\d+(\.\d+)?(?![A-Za-z])")


def _reason(message: str, model: ModelConfig) -> str:
    return _NUMBERS.sub("N", message.replace(model.name, "the model"))


def enumerate_layouts(model: ModelConfig, space: Space, gpu_memory_gib: float) -> Enumerated:
    """Every layout of ``space`` for ``model`` that passes the layout rules and fits in
    ``gpu_memory_gib`` per GPU.

    Sequence parallelism is only tried with TP > 1 and virtual stages only with PP > 1 (the
    other combinations are the same layout twice); they are not counted as rejected.

    Raises:
        InputError: when nothing is left, naming the rule that rejected the most layouts.
    """
    if gpu_memory_gib <= 0:
        raise InputError(f"the GPU's memory must be positive, got {gpu_memory_gib:g} GiB", where="--gpu")
    kept: list[Layout] = []
    mem: list[float] = []
    rejected: Counter[str] = Counter()
    for gpus, tp, pp, vpp, cp, ep, mb, rc, sp, do in itertools.product(
            space.gpus, space.tp, space.pp, space.vpp, space.cp, space.ep, space.micro_batch, space.recompute,
            space.sequence_parallel, space.distributed_optimizer):
        if (sp and tp == 1) or (vpp > 1 and pp == 1):
            continue
        lay = replace(space.base, gpus=gpus, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, micro_batch=mb, recompute=rc,
                      sequence_parallel=sp, distributed_optimizer=do, global_batch=space.global_batch,
                      seq_len=space.seq_len, schedule="interleaved" if vpp > 1 else space.base.schedule)
        try:
            lay.check(model)
        except InputError as e:
            rejected[_reason(str(e), model)] += 1
            continue
        peak = max(s.total for s in memory(model, lay)) / GIB
        if peak > gpu_memory_gib:
            rejected[f"does not fit in {gpu_memory_gib:g} GiB per GPU"] += 1
            continue
        kept.append(lay)
        mem.append(peak)
    if not kept:
        worst = ", ".join(f"{n:,} x {r}" for r, n in rejected.most_common(3)) or "the space is empty"
        raise InputError(f"no layout is left of {space.size():,} for {model.name} on {', '.join(map(str, space.gpus))} "
                         f"GPUs: {worst}", where="search space")
    return Enumerated(kept, mem, rejected)
