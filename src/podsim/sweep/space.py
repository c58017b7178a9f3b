"""The training layouts a search considers, and why the rest are rejected.

A :class:`Space` lists the values of each dimension (TP, PP, VPP, CP, EP, expert TP, micro-batch,
recomputation, sequence parallelism, distributed optimizer); :func:`enumerate_layouts` walks
their product for each GPU count, keeps the layouts :meth:`podsim.llm.layout.Layout.check`
accepts and whose peak memory per GPU (:func:`podsim.llm.memory.memory`, the largest pipeline
stage) fits the GPU by :func:`podsim.llm.memory.fits`, the test ``podsim llm`` refuses a layout by
(so a layout kept here is one ``podsim llm`` runs, and one rejected for its memory one it
refuses), and counts the others by the rule that removed them.  DP is what the GPU
count leaves.  Nothing is simulated here.  Units: GiB (2^30 B).

A space may name the software stack its layouts run on (:attr:`Space.stack`,
``podsim search --stack``).  Each layout is then the one ``podsim llm --stack NAME`` runs with
the layout's flags: the stack's framework rules (:func:`podsim.stacks.rules.apply_rules`) fill
what the flags leave at their defaults.  A dimension the space leaves at its default values
(:meth:`Space.pinned`) that a stack's property decides (:data:`DECIDES`: ``data_parallel:
fsdp`` the sharding, ``tp_overlap: none`` the TP overlap, ``sequence_parallel: true``, ...)
takes ``podsim llm``'s default alone, for the rule to fill (the micro-batch only on the
layouts where the rule fills it: ``micro_batch: local`` with PP 1; elsewhere the space's values
are tried); a value the space is given is the user's, and a layout in which the rules would
replace it (``--zero-values 0`` under FSDP's ``zero 3``: ``podsim llm --stack fsdp`` cannot run
it) is rejected, with its reason.  So no two layouts are the same after the rules, and each is
what its ``podsim llm --stack`` command runs.  Layouts whose layers PP x VPP does not divide are
kept under a stack that splits them evenly (``pipeline_split: even``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import InputError
from ..llm.layout import Layout
from ..llm.memory import GIB, fits, memory, worst_stage
from ..llm.model import ModelConfig
from ..stacks.rules import apply_rules
from ..stacks.stack import SoftwareStack


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
    #: expert TP (MoE models; None: the layout's TP, podsim llm's default)
    etp: tuple[int | None, ...] = (None,)
    micro_batch: tuple[int, ...] = (1, 2, 4)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (True, False)
    distributed_optimizer: tuple[bool, ...] = (True, False)
    zero: tuple[int, ...] = (0,)  #: DeepSpeed ZeRO stages (0: none)
    tp_overlap: tuple[str, ...] = ("te",)  #: TP communication overlap (none | async | te)
    overlap_grad_reduce: tuple[bool, ...] = (True,)  #: reduce gradients under the backward
    overlap_param_gather: tuple[bool, ...] = (True,)  #: gather sharded weights under the forward
    base: Layout = field(default_factory=lambda: Layout(gpus=1))  #: every other setting (precision, ...)
    #: the software stack the layouts run on: its rules fill what the space leaves at its
    #: defaults (see the module docstring); None: no rules (Megatron-Core's values)
    stack: SoftwareStack | None = None

    def pinned(self) -> frozenset[str]:
        """The dimensions given values other than their defaults (a stack's rules leave them alone)."""
        return frozenset(d for d in _DIMS if set(getattr(self, d)) != set(_SPACE_DEFAULTS[d]))

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
    "etp",
    "micro_batch",
    "recompute",
    "sequence_parallel",
    "distributed_optimizer",
    "zero",
    "tp_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
)
_SPACE_DEFAULTS = {f.name: f.default for f in fields(Space)}
_LAYOUT_DEFAULTS = {f.name: f.default for f in fields(Layout)}

#: stack property -> the dimensions it decides, unless its value is one that sets nothing
#: (:data:`_SETS_NOTHING`): left at their defaults, they take ``podsim llm``'s default alone,
#: which the stack's rule then fills as ``podsim llm --stack`` does
DECIDES: dict[str, tuple[str, ...]] = {
    "tp_overlap": ("tp_overlap",),
    "overlap_grad_reduce": ("overlap_grad_reduce",),
    "overlap_param_gather": ("overlap_param_gather",),
    "sequence_parallel": ("sequence_parallel",),
    "data_parallel": ("distributed_optimizer", "zero"),
    "micro_batch": ("micro_batch",),
}
_SETS_NOTHING: dict[str, tuple[Any, ...]] = {
    "sequence_parallel": (False,),
    "data_parallel": ("ddp",),
    "micro_batch": ("one",),
}
#: the overlap options: varied per layout after its memory, where they can matter
_OVERLAP = ("tp_overlap", "overlap_grad_reduce", "overlap_param_gather")
#: decided dimensions the rule fills on some layouts only (the local batch: with PP 1): the
#: others keep the space's values
_WHERE_RULED = ("micro_batch",)


def decided(space: Space) -> frozenset[str]:
    """The dimensions ``space`` leaves at their defaults that its stack decides (:data:`DECIDES`)."""
    st = space.stack
    if st is None:
        return frozenset()
    out: set[str] = set()
    for prop, dims in DECIDES.items():
        value = st.get(prop)
        if value is not None and value not in _SETS_NOTHING.get(prop, ()):
            out.update(dims)
    return frozenset(out - space.pinned())


def under_stack(space: Space) -> Space:
    """``space`` with the dimensions its stack decides (:func:`decided`) reduced to ``podsim
    llm``'s default, which the stack's rule fills (the micro-batch: per layout, see
    :func:`enumerate_layouts`)."""
    dims = decided(space) - set(_WHERE_RULED)
    return replace(space, **{d: (_LAYOUT_DEFAULTS[d],) for d in dims}) if dims else space


def _ruled_here(lay: Layout, dim: str, model: ModelConfig, st: SoftwareStack) -> bool:
    """Whether ``lay`` holds another value of ``dim`` than ``podsim llm``'s default where the
    stack's rule would fill ``dim`` (that layout is the one with the default)."""
    default = _LAYOUT_DEFAULTS[dim]
    return getattr(lay, dim) != default and dim in apply_rules(replace(lay, **{dim: default}), model, st)[1]


def _word(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _clash(dim: str, given: Any, ruled: Any) -> str:
    """The reason a layout is rejected whose given ``dim`` the stack's rules would replace."""
    return (
        f"--{dim.replace('_', '-')}-values {_word(given)}: the stack's rules set {_word(ruled)} where "
        "podsim llm's flag is left at its default"
    )


@dataclass
class Enumerated:
    """The layouts that may run, with their peak memory per GPU (GiB), and the count of the
    rejected ones by reason."""

    layouts: list[Layout]
    memory_gib: list[float]
    rejected: Counter[str]
    #: what the stack's rules set on each layout (field -> value; empty without a stack)
    applied: list[dict[str, Any]] = field(default_factory=list)

    @property
    def considered(self) -> int:
        return len(self.layouts) + sum(self.rejected.values())


#: a rule's message -> its reason (numbers and names replaced, so that equal rules count together)
_NUMBERS = re.compile(r"(?<![A-Za-z])\d[\d,]*(\.\d+)?(?![A-Za-z])")


def _reason(message: str, model: ModelConfig) -> str:
    return _NUMBERS.sub("N", message.replace(model.name, "the model"))


def _points(space: Space, model: ModelConfig) -> Iterator[tuple[Any, ...]]:
    """The space's points (GPUs, TP, PP, VPP, CP, EP, ETP, micro-batch, recompute, sequence
    parallel, distributed optimizer, ZeRO), each ETP told apart only where it is one: an ETP equal
    to the point's TP, or of a dense model, is the default (None), tried once."""
    for gpus, tp, pp, vpp, cp, ep, *rest in itertools.product(
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
        for etp in dict.fromkeys(None if e == tp or not model.moe else e for e in space.etp):
            yield (gpus, tp, pp, vpp, cp, ep, etp, *rest)


def enumerate_layouts(model: ModelConfig, space: Space, gpu_memory_gib: float) -> Enumerated:
    """Every layout of ``space`` for ``model`` that passes the layout rules and fits in
    ``gpu_memory_gib`` per GPU, under the space's stack's rules (see the module docstring).

    Sequence parallelism is only tried with TP > 1, virtual stages only with PP > 1, ZeRO
    without the distributed optimizer (Megatron's sharding), TP overlap options with TP > 1 and
    the data-parallel overlap options with DP x CP > 1 (the other combinations are the same
    layout twice, or not one); they are not counted as rejected, nor is a layout the stack's
    rules make the same as another; but a TP 1 point of a space whose sequence parallelism is on
    only is counted as rejected (``podsim llm`` refuses ``--tp 1 --sequence-parallel``).
    Rejections count layouts before the overlap options (which change neither the rules nor the
    memory), and after them those whose given overlap option the stack's rules would replace.

    Raises:
        InputError: when nothing is left, naming the rule that rejected the most layouts.
    """
    if gpu_memory_gib <= 0:
        raise InputError(f"the GPU's memory must be positive, got {gpu_memory_gib:g} GiB", where="--gpu")
    pinned = space.pinned()
    where_ruled = [d for d in _WHERE_RULED if d in decided(space)]
    space = under_stack(space)
    st = space.stack
    kept: list[Layout] = []
    mem: list[float] = []
    applied: list[dict[str, Any]] = []
    seen: set[Layout] = set()
    none: dict[str, Any] = {}
    rejected: Counter[str] = Counter()
    for gpus, tp, pp, vpp, cp, ep, etp, mb, rc, sp, do, zero in _points(space, model):
        if (vpp > 1 and pp == 1) or (zero and do):
            continue
        if sp and tp == 1:
            if False not in space.sequence_parallel:  # no TP 1 layout is left: say so
                rejected["--sequence-parallel-values on: sequence parallelism needs TP > 1"] += 1
            continue
        lay = replace(
            space.base,
            gpus=gpus,
            tp=tp,
            pp=pp,
            vpp=vpp,
            cp=cp,
            ep=ep,
            etp=etp,
            micro_batch=mb,
            recompute=rc,
            sequence_parallel=sp,
            distributed_optimizer=do,
            zero=zero,
            global_batch=space.global_batch,
            seq_len=space.seq_len,
            schedule="interleaved" if vpp > 1 else space.base.schedule,
        )
        core, over = none, none
        if st is not None:
            if any(_ruled_here(lay, d, model, st) for d in where_ruled):
                continue  # the stack's rule sets it here: the layout with podsim llm's default holds it
            _, changes = apply_rules(lay, model, st)
            if changes:
                over = {k: v for k, v in changes.items() if k in _OVERLAP}
                core = {k: v for k, v in changes.items() if k not in _OVERLAP}
                clash = [k for k in core if k in pinned]
                if clash:
                    rejected[_reason(_clash(clash[0], getattr(lay, clash[0]), core[clash[0]]), model)] += 1
                    continue
                if core:
                    lay = replace(lay, **core)
        try:
            lay.check(model)
        except InputError as e:
            rejected[_reason(str(e), model)] += 1
            continue
        worst = worst_stage(memory(model, lay))
        if not fits(worst, gpu_memory_gib):  # podsim llm's own test (api.train.check_fits)
            rejected[f"does not fit in {gpu_memory_gib:g} GiB per GPU"] += 1
            continue
        peak = worst.total / GIB
        # the overlap options change neither the rules nor the memory; only those that can
        # matter are varied (TP overlap with TP > 1, the others with data parallelism)
        data = lay.dp * lay.cp > 1
        sharded = data and (lay.distributed_optimizer or lay.zero in (1, 2))
        matters = {"tp_overlap": tp > 1, "overlap_grad_reduce": data, "overlap_param_gather": sharded}
        for tpo, ogr, opg in itertools.product(
            space.tp_overlap if tp > 1 else space.tp_overlap[:1],
            space.overlap_grad_reduce if data else space.overlap_grad_reduce[:1],
            space.overlap_param_gather if sharded else space.overlap_param_gather[:1],
        ):
            one = replace(lay, tp_overlap=tpo, overlap_grad_reduce=ogr, overlap_param_gather=opg)
            done = core
            if st is not None:
                # a rule fills an overlap option left at podsim llm's default (as it did the base)
                fill = {k: v for k, v in over.items() if getattr(one, k) == _LAYOUT_DEFAULTS[k]}
                clash = [k for k in fill if k in pinned and matters[k]]
                if clash:
                    rejected[_reason(_clash(clash[0], getattr(one, clash[0]), fill[clash[0]]), model)] += 1
                    continue
                if fill:
                    one, done = replace(one, **fill), {**core, **fill}
                if one in seen:
                    continue
                seen.add(one)
            kept.append(one)
            mem.append(peak)
            applied.append(done)
    if not kept:
        worst = ", ".join(f"{n:,} x {r}" for r, n in rejected.most_common(3)) or "the space is empty"
        raise InputError(
            f"no layout is left of {space.size():,} for {model.name} on {', '.join(map(str, space.gpus))} "
            f"GPUs: {worst}",
            where="search space",
        )
    return Enumerated(kept, mem, rejected, applied)
