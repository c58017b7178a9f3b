"""The training layouts a search considers, and why the rest are rejected.

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
    zero: tuple[int, ...] = (0,)  #: DeepSpeed ZeRO stages (0: none)
    tp_overlap: tuple[str, ...] = ("te",)  #: TP communication overlap (none | async | te)
    overlap_grad_reduce: tuple[bool, ...] = (True,)  #: reduce gradients under the backward
    overlap_param_gather: tuple[bool, ...] = (True,)  #: gather sharded weights under the forward
    base: Layout = field(default_factory=lambda: Layout(gpus=1))  #: every other setting (precision, ...)

    def size(self) -> int:
        """Points in the space (before any is rejected)."""
        n = len(self.gpus)
        for d in _DIMS:
            n *= len(getattr(self, d))
        return n


_DIMS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "micro_batch",
    "recompute",
    "sequence_parallel",
    "distributed_optimizer",
    "zero",
    "tp_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
)


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

    Sequence parallelism is only tried with TP > 1, virtual stages only with PP > 1, ZeRO
    without the distributed optimizer (Megatron's sharding), TP overlap options with TP > 1 and
    the data-parallel overlap options with DP x CP > 1 (the other combinations are the same
    layout twice, or not one); they are not counted as rejected.  Rejections count layouts
    before the overlap options (which change neither the rules nor the memory).

    Raises:
        InputError: when nothing is left, naming the rule that rejected the most layouts.
    """
    if gpu_memory_gib <= 0:
        raise InputError(f"the GPU's memory must be positive, got {gpu_memory_gib:g} GiB", where="--gpu")
    kept: list[Layout] = []
    mem: list[float] = []
    rejected: Counter[str] = Counter()
    for gpus, tp, pp, vpp, cp, ep, mb, rc, sp, do, zero in itertools.product(
        space.gpus,
        space.tp,
        space.pp,
        space.vpp,
        space.cp,
        space.ep,
        space.micro_batch,
        space.recompute,
        space.sequence_parallel,
        space.distributed_optimizer,
        space.zero,
    ):
        if (sp and tp == 1) or (vpp > 1 and pp == 1) or (zero and do):
            continue
        lay = replace(
            space.base,
            gpus=gpus,
            tp=tp,
            pp=pp,
            vpp=vpp,
            cp=cp,
            ep=ep,
            micro_batch=mb,
            recompute=rc,
            sequence_parallel=sp,
            distributed_optimizer=do,
            zero=zero,
            global_batch=space.global_batch,
            seq_len=space.seq_len,
            schedule="interleaved" if vpp > 1 else space.base.schedule,
        )
        try:
            lay.check(model)
        except InputError as e:
            rejected[_reason(str(e), model)] += 1
            continue
        peak = max(s.total for s in memory(model, lay)) / GIB
        if peak > gpu_memory_gib:
            rejected[f"does not fit in {gpu_memory_gib:g} GiB per GPU"] += 1
            continue
        # the overlap options change neither the rules nor the memory; only those that can
        # matter are varied (TP overlap with TP > 1, the others with data parallelism)
        data = lay.dp * lay.cp > 1
        sharded = data and (do or zero in (1, 2))
        for tpo, ogr, opg in itertools.product(
            space.tp_overlap if tp > 1 else space.tp_overlap[:1],
            space.overlap_grad_reduce if data else space.overlap_grad_reduce[:1],
            space.overlap_param_gather if sharded else space.overlap_param_gather[:1],
        ):
            kept.append(replace(lay, tp_overlap=tpo, overlap_grad_reduce=ogr, overlap_param_gather=opg))
            mem.append(peak)
    if not kept:
        worst = ", ".join(f"{n:,} x {r}" for r, n in rejected.most_common(3)) or "the space is empty"
        raise InputError(
            f"no layout is left of {space.size():,} for {model.name} on {', '.join(map(str, space.gpus))} "
            f"GPUs: {worst}",
            where="search space",
        )
    return Enumerated(kept, mem, rejected)
