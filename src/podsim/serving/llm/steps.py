"""Step times of LLM inference on one replica: a prefill or decode (or mixed) forward pass over a
batch, from podsim's compute model (``podsim infer``).

A replica is TP x PP GPUs; EP (dividing TP) spreads the routed experts of an MoE model over
that many of its TP GPUs, as vLLM's expert parallelism does with one data-parallel rank.  A step over a batch of chunks
``(new_tokens, context)`` (:mod:`.timing`) costs,
per pipeline stage, for each of its layers:

* **GEMMs** (TP-sharded): QKV, attention output, the MLP (MoE: the router, the experts that
  receive tokens -- each reads its weights once --, the shared experts), timed by the roofline
  compute model (:class:`~podsim.compute.model.ComputeModel`): FLOP-bound for large token
  counts, weight-read-bound (memory) for the few tokens of a decode step;
* **attention**: a prefill chunk's causal attention of its new tokens over its context and
  itself (the flash-attention efficiency curve), a decode step's read of every cached K and V
  (memory-bound; FLOPs if larger);
* **element-wise kernels** (norms, residuals, activation, rotary): memory-bound passes over the
  tokens' activations;
* **collectives**: two TP all-reduces of the tokens' activations, two EP all-to-alls for MoE
  layers, in closed form on the cluster's fabric (NCCL-like selection, as training uses);

plus the output layer (logits of one token per sequence) on the last stage, the activations'
send to the next stage, and a fixed host overhead per step (scheduling, input preparation,
sampling).  Memory per GPU: weights (bf16, or fp8), the KV cache (2 x layers x KV heads per GPU
x head size per token) and activations of the largest batch.  Units: ns inside, s and GiB in
:class:`InferenceReport`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...collectives.nccl.planner import CollectivePlanner, FabricDelay
from ...compute.model import ComputeModel
from ...errors import InputError
from ...hardware.gpu import GpuSpec
from ...llm.model import ModelConfig
from ...workload import CollectiveKind
from .measured_steps import HostOverhead
from .timing import Chunk, split_batch

GIB = 2**30
PRECISIONS = ("bf16", "fp16", "fp8")
#: the largest ``podsim infer`` batch (sequences); a batch this large overflows any GPU's memory
MAX_BATCH = 2**20
#: the share of GPU memory the engine may use (vLLM's --gpu-memory-utilization default)
MEMORY_UTILIZATION = 0.9
#: element-wise passes over a token's hidden vector per layer (2 norms, 2 residual adds, rotary
#: on Q and K, the activation's read and write of the MLP width counted separately)
_ELEMENTWISE_PASSES = 10
_ELEMENTWISE_KERNELS = 6
#: the parts of a step's time, in the order they add up (:meth:`LLMStepTimer.parts_ns`)
PARTS = ("gemm", "attention", "elementwise", "communication", "output", "host")


@dataclass
class LLMStepTimer:
    """Step times and memory of one replica (a :class:`~.timing.StepTimer`)."""

    model: ModelConfig
    gpu: GpuSpec
    tp: int
    pp: int
    ep: int
    precision: str
    cm: ComputeModel
    planner: CollectivePlanner
    delay: FabricDelay
    host_ns: int
    max_batched_tokens: int
    max_num_seqs: int
    memory_utilization: float = MEMORY_UTILIZATION
    kv_dtype_bytes: float = 2.0
    #: the host time of a step by its sequences, measured (``--host-overhead-ms eager|cuda-graphs``);
    #: None: ``host_ns`` for every step
    host_table: HostOverhead | None = None
    _per_tokens: dict[int, tuple[float, float, float]] = field(default_factory=dict, repr=False)
    _seq_costs: dict[int, tuple[float, float]] = field(default_factory=dict, repr=False, init=False, compare=False)
    _att: tuple[float, float, float, float, float, int, bool] | None = field(
        default=None, repr=False, init=False, compare=False
    )

    def step_host_ns(self, sequences: int) -> float:
        """The host's time of a step over ``sequences`` sequences (ns)."""
        return self.host_table.at(sequences) * 1e6 if self.host_table is not None else float(self.host_ns)

    # -- shapes -------------------------------------------------------------------------------

    @property
    def layers_per_stage(self) -> int:
        """Layers of the largest pipeline stage."""
        return -(-self.model.layers // self.pp)

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads one GPU holds (replicated when TP exceeds the KV heads, as vLLM does)."""
        return max(1, self.model.kv // self.tp)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes of one token on one GPU (its stage's layers)."""
        return 2.0 * self.layers_per_stage * self.kv_heads_per_gpu * self.model.dhead * self.kv_dtype_bytes

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight: 1 in fp8, 2 otherwise."""
        return 1.0 if self.precision == "fp8" else 2.0

    @property
    def weights_bytes_per_gpu(self) -> float:
        """Weights on one GPU of the largest stage (the first: it also holds the embedding, or
        the last with the output layer), TP-sharded (routed experts: over the EP groups, and
        within a group by TP / EP)."""
        m = self.model
        per_layer = []
        for i in range(m.layers):
            dense = m.attention_params() + m.norm_params()
            if m.is_moe_layer(i):
                experts = m.experts * m.mlp_params(m.expert_ffn)
                shared = m.shared_experts * m.mlp_params(m.expert_ffn) + m.hidden * m.experts
                # routed experts: EP groups of TP / EP GPUs, each group its experts TP-sharded
                per_layer.append((dense + shared + experts) / self.tp)
            else:
                per_layer.append((dense + m.mlp_params()) / self.tp)
        n = self.layers_per_stage
        stages = [sum(per_layer[s * n : (s + 1) * n]) for s in range(self.pp)]
        stages[0] += m.embedding_params() / self.tp
        # the output layer: its own matrix, or the input embedding's when tied (a copy on the
        # last stage when that is another GPU)
        stages[-1] += (m.output_params() + (m.vocab * m.hidden if m.tied_embeddings and self.pp > 1 else 0)) / self.tp
        return max(stages) * self.weight_bytes

    @property
    def activation_bytes(self) -> float:
        """Working activations of the largest step (``max_batched_tokens`` tokens through one
        layer, the logits of ``max_num_seqs`` sequences in fp32)."""
        m = self.model
        width = m.hidden * 4 + (m.expert_ffn if m.moe else m.ffn) * m.mlp_matrices / self.tp
        return self.max_batched_tokens * width * 2.0 + self.max_num_seqs * m.vocab / self.tp * 4.0

    @property
    def kv_capacity_bytes(self) -> float:
        """KV-cache bytes one GPU can hold: ``memory_utilization`` of its memory minus weights
        and activations (<= 0: the model does not fit)."""
        return self.gpu.memory_bytes * self.memory_utilization - self.weights_bytes_per_gpu - self.activation_bytes

    # -- time ---------------------------------------------------------------------------------

    def _collective_ns(self, kind: CollectiveKind, ranks: tuple[int, ...], nbytes: int) -> float:
        if len(ranks) < 2 or nbytes <= 0:
            return 0.0
        return float(self.planner.plan(ranks, kind, nbytes)[1])

    def _token_costs(self, tokens: int) -> tuple[float, float, float]:
        """(GEMMs, element-wise, collectives) of one layer over ``tokens`` new tokens (ns),
        memoized: a serving run asks for the same token counts many times."""
        hit = self._per_tokens.get(tokens)
        if hit is not None:
            return hit
        m, cm, tp = self.model, self.cm, self.tp
        d, h = m.dhead, m.hidden
        t = float(tokens)
        gemm = cm.gemm_ns(t, (m.heads // tp + 2 * self.kv_heads_per_gpu) * d, h)  # QKV
        gemm += cm.gemm_ns(t, h, m.heads // tp * d)  # attention output
        if m.moe:
            # every MoE layer of the model alike (a dense first layer, if any, is not told apart)
            gemm += cm.gemm_ns(t, m.experts, h)  # router
            local = m.experts / self.ep
            active = local * (1.0 - (1.0 - m.top_k / m.experts) ** t)  # experts that get tokens
            per = t * m.top_k / self.ep / max(active, 1e-9)
            f = m.expert_ffn * self.ep / tp  # a local expert's width on one GPU of its EP group
            gemm += cm.gemm_ns(per, f * (m.mlp_matrices - 1), h, active) + cm.gemm_ns(per, h, f, active)
            if m.shared_experts:
                fs = m.expert_ffn / tp
                gemm += cm.gemm_ns(t, fs * (m.mlp_matrices - 1) * m.shared_experts, h)
                gemm += cm.gemm_ns(t, h, fs * m.shared_experts)
        else:
            f = m.ffn / tp
            gemm += cm.gemm_ns(t, f * (m.mlp_matrices - 1), h) + cm.gemm_ns(t, h, f)
        width = m.expert_ffn if m.moe else m.ffn
        elem = cm.memory_ns(
            t * (_ELEMENTWISE_PASSES * h + 2 * width * (m.top_k if m.moe else 1) / tp) * cm.elem_bytes,
            _ELEMENTWISE_KERNELS,
        )
        act = int(t * h * cm.elem_bytes)
        comm = 2 * self._collective_ns(CollectiveKind.ALL_REDUCE, tuple(range(tp)), act)
        if m.moe and self.ep > 1:
            ranks = tuple(range(self.ep))  # the experts' GPUs: EP of the replica's TP ranks
            comm += 2 * self._collective_ns(CollectiveKind.ALL_TO_ALL, ranks, int(act * m.top_k))
        out = self._per_tokens[tokens] = (gemm, elem, comm)
        return out

    def _attention_ns(self, batch: Sequence[Chunk]) -> float:
        """One layer's attention over the batch: decode chunks read their whole KV cache
        (memory-bound), prefill chunks attend causally over context + themselves."""
        return self._attention_split_ns(*split_batch(batch))

    def _attention_split_ns(self, decodes: int, context: int, prefill: Sequence[Chunk]) -> float:
        """:meth:`_attention_ns` of a batch of ``decodes`` one-token chunks of ``context`` cached
        tokens in all and the ``prefill`` chunks (none of one token)."""
        k4, kv_token, den, peak, launch, d, roofline = self._att or self._attention_constants()
        decode_ctx = context + decodes
        t = 0.0
        if decode_ctx:  # the whole KV read (ComputeModel.memory_ns inline), or its FLOPs if longer
            read = decode_ctx * kv_token / den + 1 * launch if roofline else self.cm.memory_ns(decode_ctx * kv_token)
            t += max(read, k4 * decode_ctx / peak + launch)
        if prefill:
            pre_flops = 0.0
            pre_tokens = 0
            pre_ctx = 0
            for n, c in prefill:
                pre_flops += k4 * n * (c + (n + 1) / 2.0)
                pre_tokens += n
                pre_ctx += c + n
            if pre_flops:
                cm = self.cm
                t += max(cm.flash_ns(pre_flops, pre_tokens / len(prefill), d), cm.memory_ns(pre_ctx * kv_token))
        return t

    def _attention_constants(self) -> tuple[float, float, float, float, float, int, bool]:
        """(4 x heads x head size, a token's KV bytes, the memory's bytes per ns, the attention
        peak in FLOPs per ns, a kernel launch in ns, head size, whether memory-bound kernels take
        ComputeModel's roofline) on one GPU, kept."""
        m, cm = self.model, self.cm
        d = m.dhead
        roofline = type(cm).memory_ns is ComputeModel.memory_ns
        self._att = (
            4.0 * (m.heads // self.tp) * d,
            2.0 * self.kv_heads_per_gpu * d * self.kv_dtype_bytes,
            cm.gpu.hbm_bandwidth * cm.memory_max if roofline else 0.0,
            cm.gpu.peak(cm.attention_dtype),
            cm.launch_ns,
            d,
            roofline,
        )
        return self._att

    def stage_ns(self, batch: Sequence[Chunk]) -> int:
        """One pipeline stage's time for a step over ``batch`` (ns): its layers, the output
        layer (the last stage, the largest), the activations' send, the host overhead."""
        return int(math.ceil(sum(self._parts(*split_batch(batch)))))

    def stage_ns_decodes(self, decodes: int, context: int, chunks: Sequence[Chunk]) -> int:
        """``stage_ns`` of ``decodes`` one-token chunks of ``context`` tokens in all, then
        ``chunks`` (:mod:`.timing`)."""
        for n, _ in chunks:
            if n == 1:
                d, c, chunks = split_batch(chunks)
                decodes, context = decodes + d, context + c
                break
        return int(math.ceil(sum(self._parts(decodes, context, chunks))))

    def stage_ns_decode_run(self, decodes: int, context: int, steps: int) -> list[int]:
        """``stage_ns_decodes(decodes, context + decodes x j, ())`` for ``j`` in ``range(steps)``:
        the steps of a run of decodes (:mod:`.timing`), at once -- numpy doing the same IEEE
        operations in the same order, so bit for bit (a subclass that times steps otherwise
        gets them one by one)."""
        k4, kv_token, den, peak, launch, _, roofline = self._att or self._attention_constants()
        if type(self)._parts is not LLMStepTimer._parts or decodes < 1 or not roofline:
            return [self.stage_ns_decodes(decodes, context + decodes * j, ()) for j in range(steps)]
        gemm, elem, comm = self._token_costs(decodes)
        layers = self.layers_per_stage
        out, host = self._per_seqs(decodes)
        m, cm = self.model, self.cm
        send = float(self.delay.delay_ns(0, self.tp, int(decodes * m.hidden * cm.elem_bytes))) if self.pp > 1 else 0.0
        # as _attention_split_ns with decodes only (a product or sum of two numbers taken in
        # either order is the same number)
        ctx = np.arange(context + decodes, context + decodes + decodes * steps, decodes, dtype=np.int64)
        t = ctx * kv_token
        t /= den
        t += 1 * launch
        f = ctx * k4
        f /= peak
        f += launch
        np.maximum(t, f, out=t)
        t *= layers
        t += layers * gemm
        t += layers * elem
        t += layers * comm + send
        t += out
        t += host
        np.ceil(t, out=t)
        return t.astype(np.int64).tolist()

    def parts_ns(self, batch: Sequence[Chunk]) -> dict[str, float]:
        """``stage_ns`` by part (ns): ``gemm``, ``attention``, ``elementwise``, ``communication``
        (TP / EP collectives, the pipeline send), ``output`` (the logits), ``host``."""
        if not batch:
            return {"host": self.step_host_ns(0)}
        return dict(zip(PARTS, self._parts(*split_batch(batch))))

    def _per_seqs(self, seqs: int) -> tuple[float, float]:
        """(the output layer, the host) of a step over ``seqs`` sequences (ns), memoized."""
        hit = self._seq_costs.get(seqs)
        if hit is None:
            m, cm = self.model, self.cm
            out = cm.gemm_ns(seqs, m.vocab / self.tp, m.hidden) + cm.memory_ns(seqs * m.vocab / self.tp * 4.0)
            hit = self._seq_costs[seqs] = (out, self.step_host_ns(seqs))
        return hit

    def _parts(self, decodes: int, context: int, prefill: Sequence[Chunk]) -> tuple[float, ...]:
        """The parts of :data:`PARTS` (ns) of a step over ``decodes`` one-token chunks of
        ``context`` tokens in all and the ``prefill`` chunks (none of one token); the host's alone
        for an empty step."""
        seqs = decodes + len(prefill)
        if not seqs:
            return (self.step_host_ns(0),)
        tokens = decodes + sum(n for n, _ in prefill)
        gemm, elem, comm = self._token_costs(tokens)
        layers = self.layers_per_stage
        out, host = self._per_seqs(seqs)
        send = (
            float(self.delay.delay_ns(0, self.tp, int(tokens * self.model.hidden * self.cm.elem_bytes)))
            if self.pp > 1
            else 0.0
        )
        return (
            layers * gemm,
            layers * self._attention_split_ns(decodes, context, prefill),
            layers * elem,
            layers * comm + send,
            out,
            host,
        )


@dataclass
class InferenceReport:
    """``podsim infer``: one prefill pass over ``batch`` prompts and the decode steps after it."""

    model: str
    gpu: str
    tp: int
    pp: int
    ep: int
    precision: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    prefill_s: float
    decode_step_mean_s: float
    e2e_s: float
    kv_cache_gib: float
    weights_gib_per_gpu: float
    memory_gib_per_gpu: float
    memory_fits: bool
    prefill_parts_s: dict[str, float]
    decode_parts_s: dict[str, float]

    def to_dict(self) -> dict:
        """The JSON document (times in s, memory in GiB per GPU, throughput in tokens/s)."""
        return {
            "model": self.model,
            "gpu": self.gpu,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "precision": self.precision,
            "batch": self.batch,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "prefill_s": round(self.prefill_s, 9),
            "decode_step_mean_s": round(self.decode_step_mean_s, 9),
            "e2e_s": round(self.e2e_s, 9),
            "ttft_s": round(self.prefill_s, 9),
            "tpot_s": round(self.decode_step_mean_s, 9),
            "output_tokens_per_s": round(self.batch / self.decode_step_mean_s, 3) if self.decode_step_mean_s else None,
            "kv_cache_gib": round(self.kv_cache_gib, 4),
            "weights_gib_per_gpu": round(self.weights_gib_per_gpu, 4),
            "memory_gib_per_gpu": round(self.memory_gib_per_gpu, 4),
            "memory_fits": self.memory_fits,
            "prefill_parts_s": {k: round(v, 9) for k, v in self.prefill_parts_s.items()},
            "decode_parts_s": {k: round(v, 9) for k, v in self.decode_parts_s.items()},
        }


def infer(timer: LLMStepTimer, batch: int, prompt_tokens: int, output_tokens: int) -> InferenceReport:
    """Time one prefill of ``batch`` prompts of ``prompt_tokens`` and the ``output_tokens - 1``
    decode steps after it (the prefill yields the first token).  A step's latency is ``pp``
    stage times (the batch passes every stage).

    Raises:
        InputError: for lengths < 1, or a sequence longer than the model's context.
    """
    m = timer.model
    if batch > MAX_BATCH:
        raise InputError(
            f"at most {MAX_BATCH:,} sequences a batch (a step's batch is timed sequence by sequence), got {batch:,}",
            where="--batch",
        )
    for name, v in (("--batch", batch), ("--prompt-tokens", prompt_tokens), ("--output-tokens", output_tokens)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, got {v}", where=name)
    if prompt_tokens + output_tokens > m.seq_len:
        raise InputError(
            f"a prompt of {prompt_tokens} tokens and {output_tokens} output tokens exceed the "
            f"{m.seq_len}-token context of {m.name}",
            where="--prompt-tokens",
        )
    pre = [(prompt_tokens, 0)] * batch
    prefill_ns = timer.pp * timer.stage_ns(pre)
    steps = [timer.pp * timer.stage_ns([(1, prompt_tokens + i)] * batch) for i in range(output_tokens - 1)]
    decode_mean = sum(steps) / len(steps) if steps else 0.0
    mid = [(1, prompt_tokens + (output_tokens - 1) // 2)] * batch
    kv = timer.kv_bytes_per_token * batch * (prompt_tokens + output_tokens)
    weights = timer.weights_bytes_per_gpu
    used = weights + timer.activation_bytes + kv
    return InferenceReport(
        m.name,
        timer.gpu.name,
        timer.tp,
        timer.pp,
        timer.ep,
        timer.precision,
        batch,
        prompt_tokens,
        output_tokens,
        prefill_ns / 1e9,
        decode_mean / 1e9,
        (prefill_ns + sum(steps)) / 1e9,
        kv / GIB,
        weights / GIB,
        used / GIB,
        used <= timer.gpu.memory_bytes * timer.memory_utilization,
        {k: timer.pp * v / 1e9 for k, v in timer.parts_ns(pre).items()},
        {k: timer.pp * v / 1e9 for k, v in timer.parts_ns(mid).items()},
    )
