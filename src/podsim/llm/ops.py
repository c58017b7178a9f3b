"""The kernels of one transformer layer on one GPU, timed by a compute model.

For a micro-batch of ``b`` sequences of ``s`` tokens (``s / cp`` per GPU with context
parallelism) on TP rank of ``t``: each pass of a layer is a short list of steps, compute
(summed kernel times, ns) and collectives (kind, bytes, group), in Megatron's order:

* forward: [all-gather (SP)] attention [all-reduce | reduce-scatter (SP)]
  [all-gather (SP)] MLP (MoE: all-to-all, experts, all-to-all) [all-reduce | reduce-scatter];
* backward: the same in reverse with two GEMMs (input and weight gradient) per forward GEMM;
* full recompute re-runs the forward (with its collectives) before the backward; selective
  recompute re-runs the attention core inside the backward;
* context parallelism (ring attention): the K/V exchange with the other CP ranks (an
  all-gather forward, a reduce-scatter of their gradients backward, the same bytes as the
  ring's point-to-point steps) runs alongside the attention core (``Step.overlap``).

Collective sizes follow nccl-tests conventions (the whole tensor: ``b s h`` elements).
FLOPs are what the kernels execute (causal attention does half of ``s^2``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compute.model import KernelTimer
from ..workload import CollectiveKind
from .layout import Layout
from .model import ModelConfig


@dataclass(frozen=True)
class Step:
    """One step of a layer pass: compute (``ns``) or a collective on ``group``."""

    name: str
    ns: float = 0.0
    flops: float = 0.0
    collective: CollectiveKind | None = None
    nbytes: int = 0
    group: str = ""
    #: a collective that runs alongside the next (compute) step, which does not wait for it;
    #: the step after that waits for both (ring attention's KV exchange under the core)
    overlap: bool = False


class LayerCosts:
    """Per-pass steps of every layer kind of a model under a layout, cached."""

    def __init__(self, model: ModelConfig, layout: Layout, cm: KernelTimer, flash: bool = True) -> None:
        self.m = model
        self.lay = layout
        self.cm = cm
        self.flash = flash
        self.tokens = layout.micro_batch * layout.seq_len // layout.cp   # tokens per GPU
        self.act_bytes = int(self.tokens * model.hidden * cm.elem_bytes)
        #: passes over the block's b s h activations outside GEMMs: norm 2, residual add 3,
        #: dropout 2 more (Megatron's fused bias-dropout-add also writes the mask)
        self.block_passes = 7 if model.dropout > 0 else 5
        self._cache: dict[tuple[bool, str], list[Step]] = {}

    # -- kernel groups ------------------------------------------------------------------------

    def _attention(self, backward: bool) -> tuple[float, float]:
        """(ns, flops) of LN + QKV + core + output projection + dropout/residual."""
        a_ns, a_fl, c_ns, c_fl = self._attention_parts(backward)
        return a_ns + c_ns, a_fl + c_fl

    def _attention_parts(self, backward: bool) -> tuple[float, float, float, float]:
        """(ns, flops) of the attention block without its core, then of the core (with
        selective recomputation's re-run)."""
        m, lay, cm = self.m, self.lay, self.cm
        t, T, h, d = lay.tp, self.tokens, m.hidden, m.dhead
        heads = m.heads / t
        kv = max(m.kv / t, 1.0)
        mult = 2.0 if backward else 1.0
        ns = flops = core_ns = core_flops_done = 0.0
        # QKV and output projections
        for (rows, n, k) in ((T, (heads + 2 * kv) * d, h), (T, h, heads * d)):
            ns += mult * cm.gemm_ns(rows, n, k)
            flops += mult * 2 * rows * n * k
        # attention core, causal
        sq, skv = lay.seq_len / lay.cp, float(lay.seq_len)
        b = lay.micro_batch
        core_flops = 4 * b * heads * sq * skv * d * 0.5
        if self.flash:
            core_ns += cm.attention_ns(b * heads, sq, skv, d, backward)
            core_flops_done += (2.5 if backward else 1.0) * core_flops
        else:
            count = b * heads
            core_ns += mult * (cm.gemm_ns(sq, skv, d, count) + cm.gemm_ns(sq, d, skv, count))
            # fused scale-mask-softmax (read, write: 4 B an element), dropout (read, write, a
            # 1-byte mask: 5 B); backward: dropout (5 B) and softmax (6 B) gradients
            core_ns += cm.memory_ns(count * sq * skv * (11 if backward else 9), 3)
            core_flops_done += mult * 2 * core_flops
        # norm (read, write), residual add (2 reads, a write), dropout (2 more passes)
        elems = T * h / (t if lay.sequence_parallel else 1)
        ns += mult * cm.memory_ns(elems * cm.elem_bytes * self.block_passes, 3)
        if backward and lay.recompute == "selective":
            core_ns += cm.attention_ns(b * heads, sq, skv, d) if self.flash else \
                cm.gemm_ns(sq, skv, d, b * heads) + cm.gemm_ns(sq, d, skv, b * heads) + \
                cm.memory_ns(b * heads * sq * skv * 9, 3)
        return ns, flops, core_ns, core_flops_done

    def _mlp(self, moe: bool, backward: bool) -> tuple[float, float]:
        m, lay, cm = self.m, self.lay, self.cm
        t, T, h = lay.tp, self.tokens, m.hidden
        mult = 2.0 if backward else 1.0
        up = m.mlp_matrices - 1
        ns = flops = 0.0
        if moe:
            f = m.expert_ffn / t
            routed = T * m.top_k
            local = max(m.experts // lay.ep, 1)
            rows = routed / local  # tokens per local expert (balanced routing)
            ns += mult * cm.gemm_ns(T, m.experts, h)  # router
            for _ in range(local):
                ns += mult * (cm.gemm_ns(rows, up * f, h) + cm.gemm_ns(rows, h, f))
            flops += mult * 2 * routed * (up * f * h + h * f)
            if m.shared_experts:
                ns += mult * m.shared_experts * (cm.gemm_ns(T, up * f, h) + cm.gemm_ns(T, h, f))
                flops += mult * 2 * T * m.shared_experts * (up * f * h + h * f)
            act_elems = (routed + T * m.shared_experts) * f
        else:
            f = m.ffn / t
            ns += mult * (cm.gemm_ns(T, up * f, h) + cm.gemm_ns(T, h, f))
            flops += mult * 2 * T * (up * f * h + h * f)
            act_elems = T * f
        elems = T * h / (t if lay.sequence_parallel else 1)
        ns += mult * cm.memory_ns((act_elems * (up + 1) + elems * self.block_passes) * cm.elem_bytes, 4)
        return ns, flops

    # -- passes -------------------------------------------------------------------------------

    def _tp(self, name: str, after: bool) -> list[Step]:
        """TP collectives around a block: SP gathers before and reduce-scatters after; without
        SP, one all-reduce after."""
        lay = self.lay
        if lay.tp == 1:
            return []
        if lay.sequence_parallel:
            kind = CollectiveKind.REDUCE_SCATTER if after else CollectiveKind.ALL_GATHER
            return [Step(f"{name} {'reduce-scatter' if after else 'all-gather'}", collective=kind,
                         nbytes=self.act_bytes, group="tp")]
        if after:
            return [Step(f"{name} all-reduce", collective=CollectiveKind.ALL_REDUCE, nbytes=self.act_bytes,
                         group="tp")]
        return []

    def _ep(self, name: str) -> list[Step]:
        if self.lay.ep == 1:
            return []
        nbytes = int(self.tokens * self.m.top_k * self.m.hidden * self.cm.elem_bytes)
        return [Step(f"{name} all-to-all", collective=CollectiveKind.ALL_TO_ALL, nbytes=nbytes, group="ep")]

    def _cp(self, name: str, backward: bool) -> list[Step]:
        lay, m = self.lay, self.m
        if lay.cp == 1:
            return []
        kv_bytes = int(2 * self.tokens * max(m.kv / lay.tp, 1) * m.dhead * self.cm.elem_bytes * lay.cp)
        kind = CollectiveKind.REDUCE_SCATTER if backward else CollectiveKind.ALL_GATHER
        return [Step(f"{name} kv {'reduce-scatter' if backward else 'all-gather'}", collective=kind,
                     nbytes=kv_bytes, group="cp", overlap=True)]

    def _attention_steps(self, backward: bool) -> list[Step]:
        """The attention block; with CP, ring attention: the KV exchange runs under the core."""
        if self.lay.cp == 1:
            a_ns, a_fl = self._attention(backward)
            return [Step("attention grad" if backward else "attention", a_ns, a_fl)]
        a_ns, a_fl, c_ns, c_fl = self._attention_parts(backward)
        g = " grad" if backward else ""
        return [Step(f"attention{g} projections", a_ns, a_fl)] + self._cp(f"attn{g}", backward) + \
            [Step(f"attention{g} core", c_ns, c_fl)]

    def forward(self, moe: bool) -> list[Step]:
        key = (moe, "fwd")
        if key not in self._cache:
            m_ns, m_fl = self._mlp(moe, False)
            steps = self._tp("attn", False) + self._attention_steps(False)
            steps += self._tp("attn", True) + self._tp("mlp", False)
            if moe:
                steps += self._ep("dispatch") + [Step("experts", m_ns, m_fl)] + self._ep("combine")
            else:
                steps += [Step("mlp", m_ns, m_fl)]
            steps += self._tp("mlp", True)
            self._cache[key] = steps
        return self._cache[key]

    def backward(self, moe: bool) -> list[Step]:
        key = (moe, "bwd")
        if key not in self._cache:
            m_ns, m_fl = self._mlp(moe, True)
            steps = self._tp("mlp grad", False)
            if moe:
                steps += self._ep("combine grad") + [Step("experts grad", m_ns, m_fl)] + self._ep("dispatch grad")
            else:
                steps += [Step("mlp grad", m_ns, m_fl)]
            steps += self._tp("mlp grad", True) + self._tp("attn grad", False)
            steps += self._attention_steps(True) + self._tp("attn grad", True)
            self._cache[key] = steps
        return self._cache[key]

    # -- the rest of the model ----------------------------------------------------------------

    def embedding(self, backward: bool) -> Step:
        nbytes = self.tokens * self.m.hidden * self.cm.elem_bytes * (3 if backward else 2)
        return Step("embedding grad" if backward else "embedding", self.cm.memory_ns(nbytes, 2))

    def output(self, backward: bool) -> Step:
        m, lay, cm = self.m, self.lay, self.cm
        v = m.vocab / lay.tp
        mult = 2.0 if backward else 1.0
        ns = mult * cm.gemm_ns(self.tokens, v, m.hidden) + cm.memory_ns(self.tokens * v * 4 * 3, 3)
        return Step("output grad" if backward else "output + loss", ns, mult * 2 * self.tokens * v * m.hidden)

    def optimizer(self, params: float) -> Step:
        """Adam over this GPU's shard of ``params`` (fp32 master, m, v read and written, the
        gradient read, the bf16 weights written: 30 B per parameter)."""
        return Step("optimizer step", self.cm.memory_ns(params * 30, 4))
