"""One transformer layer pass on one GPU as steps: timed kernels and the collectives between.

:mod:`podsim.llm.kernels` lists every kernel a Megatron-Core / Transformer Engine step launches;
here each is timed by a compute model (:class:`~podsim.compute.model.KernelTimer`) and the
list is cut into steps for the workload: compute (summed kernel times, ns) and collectives
(kind, bytes, group), in Megatron's order:

* forward: [all-gather (SP)] attention [all-reduce | reduce-scatter (SP)]
  [all-gather (SP)] MLP [all-reduce | reduce-scatter]; a MoE block instead: router, EP
  all-to-all, [ETP all-gather] experts [ETP reduce-scatter], EP all-to-all, and the shared
  experts between TP all-gather and reduce-scatter (:func:`~podsim.llm.kernels.moe_kernels`);
* backward: the same in reverse, each GEMM's dgrad and wgrad; with sequence parallelism each
  column-parallel layer also re-gathers its input for wgrad and reduce-scatters dgrad;
* full recompute re-runs the forward before the backward; selective recompute re-runs the
  attention core inside the backward;
* context parallelism (ring attention): the K/V exchange with the other CP ranks runs
  alongside the attention core.

**Overlap** (``Layout.tp_overlap``): a TP collective that a GEMM hides is a collective step
marked ``overlap`` (it runs beside the next step, which does not wait for it) followed by that
GEMM alone; the GEMM's time includes the interference of :class:`~podsim.llm.stack.Stack`
(slower while both run, plus the unhidden chunk of Transformer Engine's pipelining) when the
collective's closed-form time is known (``comm_ns``).  ``te`` overlaps every SP collective,
``async`` only the backward's re-gather and dgrad reduction (Megatron's default), ``none``
none.

**Host overhead**: a layer pass (and the embedding, output and optimizer work) lasts at least
its kernel launches x ``Stack.host_ns``: the CPU's time to issue them (PyTorch dispatch and the
Python of Megatron-Core / Transformer Engine around each listed kernel).

Collective sizes follow nccl-tests conventions (the whole tensor: ``b s h`` elements).
FLOPs are what the kernels execute (causal attention does half of ``s^2``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..compute.model import KernelTimer
from ..workload import CollectiveKind
from .kernels import (
    Kernel,
    attention_kernels,
    embedding_kernels,
    mlp_kernels,
    moe_kernels,
    optimizer_kernels,
    output_kernels,
)
from .layout import Layout
from .model import ModelConfig
from .stack import Stack

#: ``comm_ns(kind, bytes, group)``: a collective's closed-form time in ns, or None
CommTimer = Callable[[CollectiveKind, int, str], "int | None"]


@dataclass(frozen=True)
class PassStep:
    """One step of a layer pass: compute (``ns``) or a collective on ``group``."""

    name: str
    ns: float = 0.0
    flops: float = 0.0
    collective: CollectiveKind | None = None
    nbytes: int = 0
    group: str = ""
    #: a collective that runs alongside the next (compute) step, which does not wait for it;
    #: the step after that waits for both
    overlap: bool = False


@dataclass(frozen=True)
class TimedKernel:
    """A kernel with its time (``ns``: alone on the GPU; ``step_ns``: as it runs in the step,
    with an overlapped collective's interference)."""

    kernel: Kernel
    ns: float
    step_ns: float
    collective: str = ""  #: the TP collective beside it, if any


class LayerCosts:
    """Per-pass steps of every layer kind of a model under a layout, cached.

    ``comm_ns`` times TP collectives in closed form (for the interference of overlapped
    ones); ``stack`` the host overhead and interference parameters (the GPU's defaults)."""

    def __init__(
        self,
        model: ModelConfig,
        layout: Layout,
        cm: KernelTimer,
        flash: bool = True,
        comm_ns: CommTimer | None = None,
        stack: Stack | None = None,
    ) -> None:
        self.m = model
        self.lay = layout
        self.cm = cm
        self.flash = flash
        self.comm_ns = comm_ns
        self.stack = stack or Stack.for_gpu(cm.gpu.key)
        self.tokens = layout.micro_batch * layout.seq_len // layout.cp  # tokens per GPU
        self.act_bytes = int(self.tokens * model.hidden * cm.elem_bytes)
        self.rowwise = layout.rowwise_scaled
        self._timers: dict[str, KernelTimer] = {cm.dtype: cm}
        self._cache: dict[tuple, list[PassStep]] = {}

    # -- timing -------------------------------------------------------------------------------

    def _timer(self, dtype: str) -> KernelTimer:
        if dtype not in self._timers:
            self._timers[dtype] = self.cm.with_dtype(dtype)
        return self._timers[dtype]

    def kernel_ns(self, k: Kernel) -> float:
        """GPU time of ``k`` alone (all ``count`` launches), ns."""
        if k.kind == "gemm":
            return self._timer(k.dtype).gemm_ns(k.m, k.n, k.k, k.batch) * k.count / self.stack.gemm_efficiency
        if k.kind == "attention":
            eff = self.stack.attention_efficiency_at(k.n)
            return self.cm.attention_ns(k.batch, k.m, k.n, k.k, k.backward) * k.count / eff
        if k.kind == "attention_unfused":
            cm = self.cm
            one = cm.gemm_ns(k.m, k.n, k.k, k.batch) + cm.gemm_ns(k.m, k.k, k.n, k.batch)
            return one * (2.0 if k.backward else 1.0)
        if k.kind == "memory":
            return self.cm.memory_ns(k.nbytes, k.count) * self.stack.kernel_scale(k.module, self.rowwise)
        return 0.0

    def _launches(self, k: Kernel) -> int:
        if k.kind == "comm":
            return 0
        if k.kind == "gemm" or k.kind == "attention":
            # a grouped expert GEMM counts once per local expert: Transformer Engine's
            # GroupedLinear issues its GEMMs from one C++ call but prepares (quantizes, wraps)
            # each expert's weights and inputs in Python.  Unmeasured: counting it as one op
            # instead moves the reported Qwen3 rows from -46%..+68% to +2%..+169%
            # (docs/calibration.md, "MoE")
            return k.count
        if k.kind == "attention_unfused":
            return 6 if k.backward else 3
        return k.count

    # -- TP collectives -----------------------------------------------------------------------

    def _tp_collective(self, k: Kernel) -> tuple[CollectiveKind, str] | None:
        """The TP collective a GEMM's ``overlap`` tag stands for under this layout."""
        lay = self.lay
        if lay.tp == 1 or not k.overlap:
            return None
        if lay.sequence_parallel:
            return (
                (CollectiveKind.ALL_GATHER, "all-gather")
                if k.overlap == "ag"
                else (CollectiveKind.REDUCE_SCATTER, "reduce-scatter")
            )
        # without SP: a row-parallel output and a column-parallel dgrad are all-reduced
        if k.overlap == "rs" and (not k.backward or k.name.endswith("wgrad")):
            return CollectiveKind.ALL_REDUCE, "all-reduce"
        return None

    def _overlapped(self, k: Kernel) -> str:
        """``te``/``nccl`` when the collective of ``k``'s tag runs under ``k``; else ''."""
        mode = self.lay.tp_overlap
        if mode == "te" and self.lay.sequence_parallel:
            return "te"
        bulk = k.backward and (k.name.endswith("wgrad") or (k.name.endswith("dgrad") and self._column(k)))
        if mode in ("te", "async") and bulk:
            return "nccl"
        return ""

    @staticmethod
    def _column(k: Kernel) -> bool:
        return k.name.startswith(("qkv", "fc1"))

    # -- steps --------------------------------------------------------------------------------

    def steps(self, kernels: Sequence[Kernel], label: str = "") -> list[PassStep]:
        """Cut a kernel list into compute and collective steps (see the module docstring)."""
        out: list[PassStep] = []
        run: list[Kernel] = []

        def flush() -> None:
            if run:
                out.append(self._compute_step(label, run))
                run.clear()

        solo = False  # the kernel after an overlapped collective forms a step of its own
        for k in kernels:
            if k.kind == "comm":
                coll = self._marker(k)
                if coll is not None:
                    flush()
                    out.append(coll)
                    solo = coll.overlap
                continue
            if solo:
                run.append(k)
                flush()
                solo = False
                continue
            tp = self._tp_collective(k)
            if tp is None:
                run.append(k)
                continue
            kind, cname = tp
            engine = self._overlapped(k)
            coll = PassStep(
                f"{label}tp {cname}".strip(), collective=kind, nbytes=self.act_bytes, group="tp", overlap=bool(engine)
            )
            if engine:
                flush()
                out.append(coll)
                out.append(self._compute_step(label, [k], kind, engine))
            elif k.overlap == "ag":
                flush()
                out.append(coll)
                run.append(k)
            else:
                run.append(k)
                flush()
                out.append(coll)
        flush()
        return self._host_bound(out, kernels)

    def _host_bound(self, steps: list[PassStep], kernels: Sequence[Kernel]) -> list[PassStep]:
        """A pass lasts at least its kernel launches x ``host_ns`` (the CPU issues kernels
        ahead of the GPU while they are long, and the GPU waits for it when they are short):
        the shortfall is added to the pass's last compute step."""
        host = sum(self._launches(k) for k in kernels) * self.stack.host_ns
        gpu = 0.0
        for st in steps:
            if st.collective is None:
                gpu += st.ns
            elif not st.overlap and self.comm_ns is not None:
                gpu += float(self.comm_ns(st.collective, st.nbytes, st.group) or 0)
        last = max((i for i, st in enumerate(steps) if st.collective is None), default=None)
        if host <= gpu or last is None:
            return steps
        st = steps[last]
        steps[last] = replace(st, ns=st.ns + host - gpu)
        return steps

    def _marker(self, k: Kernel) -> PassStep | None:
        """The collective a ``comm`` marker stands for (None when this layout has none)."""
        lay = self.lay
        nb = int(k.nbytes)
        if k.name.startswith("tp "):
            if lay.tp == 1:
                return None
            if lay.sequence_parallel:
                kind = CollectiveKind.ALL_GATHER if "gather" in k.name else CollectiveKind.REDUCE_SCATTER
                return PassStep(k.name, collective=kind, nbytes=self.act_bytes, group="tp")
            if "reduce" in k.name:
                return PassStep(
                    "tp all-reduce", collective=CollectiveKind.ALL_REDUCE, nbytes=self.act_bytes, group="tp"
                )
            return None
        if k.name.startswith("ep "):
            return (
                None if lay.ep == 1 else PassStep(k.name, collective=CollectiveKind.ALL_TO_ALL, nbytes=nb, group="ep")
            )
        if k.name.startswith("etp "):
            if lay.expert_tp == 1:
                return None
            kind = CollectiveKind.ALL_GATHER if "gather" in k.name else CollectiveKind.REDUCE_SCATTER
            return PassStep(k.name, collective=kind, nbytes=nb, group="tp" if lay.expert_tp == lay.tp else "etp")
        if k.name.startswith("cp "):
            kind = CollectiveKind.REDUCE_SCATTER if k.backward else CollectiveKind.ALL_GATHER
            return PassStep(
                f"{k.name} {'reduce-scatter' if k.backward else 'all-gather'}",
                collective=kind,
                nbytes=nb,
                group="cp",
                overlap=True,
            )
        return None

    def _in_step_ns(self, gpu: float, beside: CollectiveKind | None, engine: str) -> float:
        """``gpu`` ns of compute as it runs with the TP collective ``beside`` it overlapped by
        ``engine`` (te / nccl), when that collective's closed-form time is known."""
        if beside is None or not engine or self.comm_ns is None:
            return gpu
        c = self.comm_ns(beside, self.act_bytes, "tp")
        if c is None:
            return gpu
        return self.stack.overlapped_ns(gpu, float(c), engine, self.lay.tp if engine == "te" else 1)

    def _compute_step(
        self, label: str, ks: Sequence[Kernel], beside: CollectiveKind | None = None, engine: str = ""
    ) -> PassStep:
        gpu = self._in_step_ns(sum(self.kernel_ns(k) for k in ks), beside, engine)
        name = ks[0].name if len(ks) == 1 else f"{ks[0].module} {ks[0].name} .. {ks[-1].name}"
        return PassStep(f"{label}{name}".strip(), gpu, sum(k.flops for k in ks))

    def timed(self, kernels: Sequence[Kernel]) -> list[TimedKernel]:
        """Each kernel with its time alone and in its step (for ``podsim llm --kernels``)."""
        out = []
        for k in kernels:
            if k.kind == "comm":
                continue
            ns = self.kernel_ns(k)
            tp = self._tp_collective(k)
            engine = self._overlapped(k) if tp else ""
            step = self._in_step_ns(ns, tp[0] if tp else None, engine)
            out.append(
                TimedKernel(k, ns, step, f"tp {tp[1]}" + (f" ({engine} overlap)" if engine else "") if tp else "")
            )
        return out

    # -- kernel lists -------------------------------------------------------------------------

    def layer_kernels(self, moe: bool, backward: bool) -> list[Kernel]:
        """The kernels of one layer pass (attention block, then MLP; reversed for backward)."""
        att = attention_kernels(self.m, self.lay, backward, self.flash)
        mlp = moe_kernels(self.m, self.lay, backward) if moe else mlp_kernels(self.m, self.lay, backward)
        return mlp + att if backward else att + mlp

    # -- passes -------------------------------------------------------------------------------

    def forward(self, moe: bool) -> list[PassStep]:
        key = (moe, "fwd")
        if key not in self._cache:
            self._cache[key] = self.steps(self.layer_kernels(moe, False))
        return self._cache[key]

    def backward(self, moe: bool) -> list[PassStep]:
        key = (moe, "bwd")
        if key not in self._cache:
            self._cache[key] = self.steps(self.layer_kernels(moe, True))
        return self._cache[key]

    # -- the rest of the model ----------------------------------------------------------------

    def embedding_steps(self, backward: bool) -> list[PassStep]:
        """The input embedding; with TP, its vocabulary-parallel partial sums are all-reduced
        (reduce-scattered with SP) and, backward, the gradient all-gathered (SP)."""
        key = ("emb", backward)
        if key not in self._cache:
            ks = embedding_kernels(self.m, self.lay, backward)
            steps = self.steps(ks, "")
            lay = self.lay
            if lay.tp > 1:
                if lay.sequence_parallel:
                    kind = CollectiveKind.ALL_GATHER if backward else CollectiveKind.REDUCE_SCATTER
                else:
                    kind = None if backward else CollectiveKind.ALL_REDUCE
                if kind is not None:
                    coll = PassStep(
                        f"embedding tp {kind.name.lower().replace('_', '-')}",
                        collective=kind,
                        nbytes=self.act_bytes,
                        group="tp",
                    )
                    steps = [coll] + steps if backward else steps + [coll]
            self._cache[key] = steps
        return self._cache[key]

    def output_steps(self, backward: bool) -> list[PassStep]:
        """The final norm, output layer and loss; with TP (SP) the norm's output is gathered
        first, the loss all-reduces its max and sums (three tiny all-reduces), and backward
        the gradient into the final norm is reduce-scattered (all-reduced without SP)."""
        key = ("out", backward)
        if key not in self._cache:
            ks = output_kernels(self.m, self.lay, backward, self.lay.loss_fusion)
            lay = self.lay
            steps: list[PassStep]
            if lay.tp == 1:
                steps = self.steps(ks)
            elif not backward:
                steps = [self._compute_step("", ks[:1])]
                if lay.sequence_parallel:
                    steps.append(
                        PassStep(
                            "output tp all-gather",
                            collective=CollectiveKind.ALL_GATHER,
                            nbytes=self.act_bytes,
                            group="tp",
                        )
                    )
                steps += [self._compute_step("", ks[1:])]
                small = int(self.tokens * 4)
                steps += [
                    PassStep(
                        f"cross entropy tp all-reduce {w}",
                        collective=CollectiveKind.ALL_REDUCE,
                        nbytes=small,
                        group="tp",
                    )
                    for w in ("max", "sum", "target")
                ]
            else:
                kind = CollectiveKind.REDUCE_SCATTER if lay.sequence_parallel else CollectiveKind.ALL_REDUCE
                steps = [
                    self._compute_step("", ks[:-1]),
                    PassStep(
                        f"output grad tp {'reduce-scatter' if lay.sequence_parallel else 'all-reduce'}",
                        collective=kind,
                        nbytes=self.act_bytes,
                        group="tp",
                    ),
                    self._compute_step("", ks[-1:]),
                ]
            self._cache[key] = steps
        return self._cache[key]

    def embedding(self, backward: bool) -> PassStep:
        """The embedding's compute as one step (its collectives left out)."""
        return _merge("embedding grad" if backward else "embedding", self.embedding_steps(backward))

    def optimizer_kernels(self, params_local: float, shard: float) -> list[Kernel]:
        """The per-iteration kernels of a GPU holding ``params_local`` parameters and updating
        ``shard`` of them."""
        return optimizer_kernels(params_local, shard, self.lay, float(self.lay.grad_reduce_bytes))

    def optimizer(self, params: float, params_local: float | None = None) -> PassStep:
        """The per-iteration work of a GPU updating ``params`` (its optimizer shard) and holding
        ``params_local`` (default: the same): gradient-buffer zeroing and scaling, the gradient
        norm, Adam, the bf16 copy of the weights (and fp8 weight casts)."""
        ks = self.optimizer_kernels(params if params_local is None else params_local, params)
        st = self._compute_step("", ks)
        return replace(st, ns=max(st.ns, len(ks) * self.stack.host_ns))


def _merge(name: str, steps: list[PassStep]) -> PassStep:
    comp = [s for s in steps if s.collective is None]
    return PassStep(name, sum(s.ns for s in comp), sum(s.flops for s in comp))
