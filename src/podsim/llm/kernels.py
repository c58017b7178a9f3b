"""The kernels a Megatron-Core / Transformer Engine training step launches, as data.

Every kernel of one transformer layer pass (and of the embedding, the output layer and loss,
and the optimizer step) on one GPU, with the work that sets its time: a GEMM's ``m x n x k``,
a fused attention's shape, or the bytes a memory-bound kernel reads and writes.  Nothing here
is timed: :mod:`podsim.llm.ops` times the lists with a compute model, and ``podsim llm
--kernels`` prints them.

Shapes, for a micro-batch of ``b`` sequences of ``s`` tokens on one GPU of a TP group of ``t``
(``T = b s / cp`` tokens; ``R = T / t`` rows in sequence-parallel regions, else ``T``), ``h``
hidden, ``a`` heads and ``g`` KV heads of size ``d`` (``a / t`` and ``max(g / t, 1)`` per GPU),
MLP width ``f`` (``/ t``), vocabulary ``V`` (``/ t``):

forward
    norm (reads ``R h``, writes the GEMM input) -- QKV GEMM ``(T, (a + 2g) d, h)`` (bias in the
    epilogue) -- rotary embedding on q and k (models without learned positions) -- fused
    attention -- [fp8: cast + transpose of its output] -- output projection ``(T, h, a d)`` --
    bias-dropout-add (residual) -- norm -- FC1 ``(T, u f, h)`` (``u`` = 2 for SwiGLU) --
    activation (GELU / SwiGLU, bias fused; fp8: the cast fused) -- FC2 ``(T, h, f)`` --
    bias-dropout-add.
backward
    each GEMM's dgrad and wgrad (``(T, k, n)`` and ``(n, k, T)``; wgrad accumulates into the
    fp32 ``main_grad``: Megatron's gradient-accumulation fusion), the activation's, norm's,
    dropout's and rotary embedding's gradients, the residual gradient adds, fused attention
    backward; fp8: a cast + transpose of each incoming gradient.
fp8 (Transformer Engine's recipe)
    the layer GEMMs run in fp8 (E4M3 forward, E5M2 gradients); norms and the activation write
    fp8 directly (fused casts), the attention output and every gradient into a GEMM get a
    cast-transpose kernel (read 2 B, write 2 x 1 B an element); weights are cast (and
    transposed) once per iteration; attention, the output layer and the loss stay in bf16.
    mxfp8 / nvfp4 (Blackwell's block-scaled recipes): the same kernels, the GEMMs at the fp8 /
    fp4 peak, every quantized element carrying its share of the block scales (1.031 B / 0.5625 B).
fp8-rowwise (torchao's rowwise recipe)
    the layer GEMMs in fp8 with a scale per row of each operand along the contracted dimension,
    so each GEMM's three operands (input, weight, incoming gradient) are cast twice, once per
    dimension, the second time through a bf16 transpose (:func:`rowwise_casts`): nothing is
    fused into the norms or the activation, which write bf16; the weights are cast at every
    use, not once per iteration.
embedding / output layer
    vocabulary-parallel lookup (and position embedding add), its dense gradient
    (``V / t x h``) accumulated into ``main_grad``; the output layer's GEMMs and Megatron's
    vocabulary-parallel cross entropy in fp32 (``logits.float()``, max, subtract, exp, sum,
    divide; backward: scale, cast back: 52 B per logit) unless fused (``loss_fusion``: 8 B).
per iteration
    zeroing the fp32 gradient buffer, scaling it by ``1 / DP``, the gradient norm, Adam on the
    optimizer shard and the copy of updated weights to bf16 (46 B per shard parameter), fp8
    weight casts.

Units: FLOPs, bytes; ``elements`` are counted per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import QUANT_BYTES, Layout
from .model import ModelConfig


@dataclass(frozen=True)
class Kernel:
    """One kernel launch (or ``count`` identical ones).

    ``kind``: ``gemm`` (``m x k`` times ``k x n``, ``batch`` of them), ``attention`` (causal
    fused attention: ``batch`` = sequences x heads, ``m`` queries, ``n`` keys, ``k`` head size;
    ``backward``), ``attention_unfused`` (scores GEMMs + softmax, Megatron 2021), ``memory``
    (``nbytes`` read + written), or ``comm``: not a kernel but the place of a collective the
    layer issues there (``name``: ``tp all-gather``, ``tp reduce-scatter``, ``ep all-to-all``,
    ``cp kv exchange``; ``nbytes``).  ``dtype`` is the GEMM's input precision."""

    name: str
    module: str  #: attention | mlp | norm | embedding | output | loss | optimizer | fp8 | moe
    kind: str
    m: float = 0.0
    n: float = 0.0
    k: float = 0.0
    batch: float = 1.0
    nbytes: float = 0.0
    dtype: str = "bf16"
    backward: bool = False
    count: int = 1  #: identical launches (MoE experts)
    #: the TP collective this GEMM can hide with sequence parallelism ("ag": an all-gather,
    #: "rs": a reduce-scatter; see :func:`_linear`)
    overlap: str = ""

    @property
    def flops(self) -> float:
        """Floating-point operations of all ``count`` launches."""
        if self.kind == "gemm":
            return 2.0 * self.m * self.n * self.k * self.batch * self.count
        if self.kind == "attention":
            return 4.0 * self.batch * self.m * self.n * self.k * 0.5 * (2.5 if self.backward else 1.0) * self.count
        if self.kind == "attention_unfused":
            return 2.0 * 4.0 * self.batch * self.m * self.n * self.k * 0.5 * (2.0 if self.backward else 1.0)
        return 0.0


@dataclass(frozen=True)
class Shapes:
    """Per-GPU sizes of one micro-batch under a layout (elements)."""

    tokens: float  #: T: tokens per GPU (b s / cp)
    rows: float  #: R: rows in sequence-parallel regions (T / t with SP)
    heads: float  #: a / t
    kv: float  #: max(g / t, 1)
    dhead: float
    hidden: float
    ffn: float  #: f / t (dense)
    vocab: float  #: V / t
    act_bytes: float  #: bytes per activation element (2; 4 in fp32)
    gemm_dtype: str  #: the layer GEMMs' precision
    quant_bytes: float  #: bytes per GEMM input element a cast writes (act_bytes when not quantized)
    rowwise: bool = False  #: fp8 with a scale per row (torchao's rowwise recipe)

    @property
    def fused_cast_bytes(self) -> float:
        """Bytes per element a norm or activation writes for the GEMM after it: the quantized
        element where the recipe fuses its cast there (Transformer Engine's), else bf16."""
        return self.act_bytes if self.rowwise else self.quant_bytes


def shapes(model: ModelConfig, layout: Layout) -> Shapes:
    """The per-GPU sizes of ``model`` under ``layout``."""
    t = layout.tp
    T = layout.micro_batch * layout.seq_len / layout.cp
    return Shapes(
        T,
        T / t if layout.sequence_parallel else T,
        model.heads / t,
        max(model.kv / t, 1.0),
        float(model.dhead),
        float(model.hidden),
        model.ffn / t,
        model.vocab / t,
        4.0 if layout.precision == "fp32" else 2.0,
        layout.compute_dtype,
        QUANT_BYTES.get(layout.precision, 4.0 if layout.precision == "fp32" else 2.0),
        layout.rowwise_scaled,
    )


def _gemm(
    name: str,
    module: str,
    m: float,
    n: float,
    k: float,
    dtype: str,
    backward: bool = False,
    overlap: str = "",
    batch: float = 1.0,
    count: int = 1,
) -> Kernel:
    return Kernel(name, module, "gemm", m, n, k, batch, dtype=dtype, backward=backward, overlap=overlap, count=count)


def _mem(name: str, module: str, nbytes: float, backward: bool = False, count: int = 1) -> Kernel:
    return Kernel(name, module, "memory", nbytes=nbytes, backward=backward, count=count)


def _residual_add(module: str, rows: float, sh: Shapes, dropout: bool) -> Kernel:
    """The block's output added to the residual stream (with Megatron's fused bias-dropout:
    a 1-byte mask more)."""
    return _mem(
        "bias-dropout-add" if dropout else "residual add",
        module,
        rows * sh.hidden * sh.act_bytes * 3 + (rows * sh.hidden if dropout else 0),
    )


def _block_backward_ends(
    module: str,
    rows: float,
    sh: Shapes,
    dropout: bool,
    recompute_norm: bool,
    gin: float,
    rerun: list[Kernel] | None = None,
) -> tuple[list[Kernel], list[Kernel]]:
    """The kernels that open a block's backward (the norm and ``rerun`` re-run under selective
    recompute, dropout's gradient) and close it (the norm's gradient, the residual gradient
    add)."""
    head = []
    if recompute_norm:
        head.append(_mem("norm fwd (recompute)", "norm", rows * sh.hidden * (sh.act_bytes + gin), True))
    head += rerun or []
    if dropout:
        head.append(_mem("dropout bwd", module, rows * sh.hidden * (2 * sh.act_bytes + 1), True))
    tail = [
        _mem("norm bwd", "norm", rows * sh.hidden * sh.act_bytes * 3, True),
        _mem("residual grad add", "norm", rows * sh.hidden * sh.act_bytes * 3, True),
    ]
    return head, tail


def _comm(name: str, nbytes: float, backward: bool = False) -> Kernel:
    return Kernel(name, "comm", "comm", nbytes=nbytes, backward=backward)


def rowwise_casts(name: str, rows: float, n: float, k: float, E: float, q: float, backward: bool) -> list[Kernel]:
    """The casts of a rowwise-scaled fp8 linear ``rows x k -> rows x n`` (bytes: ``E`` bf16,
    ``q`` fp8 per element).  Each operand is needed scaled along both of its dimensions: the
    first cast reads it and writes the row-scaled fp8 copy (and, for the input and the
    gradient, a bf16 transpose for later), the second reads the transpose and writes the
    column-scaled copy.

    forward: the input (``rows x k``: read ``E``, write ``q`` + ``E``) and the weight
    (``k x n``: read ``E``, write ``q``); backward: the input's second cast (``E + q``), the
    weight's transpose and second cast (``2E`` + ``E + q``), the incoming gradient's two casts
    (``rows x n``: ``2E + q``, ``E + q``).  In all ``3E + 2q`` per input, ``4E + 2q`` per weight
    and ``3E + 2q`` per gradient element: 8, 10 and 8 B for bf16 into fp8.
    """
    if not backward:
        return [
            _mem(f"{name} input rowwise cast", "fp8", rows * k * (2 * E + q)),
            _mem(f"{name} weight rowwise cast", "fp8", k * n * (E + q)),
        ]
    return [
        _mem(f"{name} grad rowwise cast", "fp8", rows * n * (2 * E + q), True),
        _mem(f"{name} grad column-wise cast", "fp8", rows * n * (E + q), True),
        _mem(f"{name} weight transpose + column-wise cast", "fp8", k * n * (3 * E + q), True, count=2),
        _mem(f"{name} input column-wise cast", "fp8", rows * k * (E + q), True),
    ]


def _linear(
    name: str, module: str, rows: float, n: float, k: float, sh: Shapes, fp8: bool, backward: bool, column: bool
) -> list[Kernel]:
    """A linear layer ``rows x k -> rows x n``: fprop, or dgrad + wgrad (with fp8, the incoming
    gradient's cast + transpose first; with fp8-rowwise, :func:`rowwise_casts`).

    ``overlap`` marks the TP collective each GEMM hides with sequence parallelism: a
    column-parallel layer (QKV, FC1) all-gathers its input before fprop ("ag"); in backward it
    re-gathers that input for wgrad under dgrad ("ag") and reduce-scatters dgrad under wgrad
    ("rs"); a row-parallel layer (projection, FC2) reduce-scatters its output after fprop
    ("rs") and all-gathers the incoming gradient before dgrad ("ag")."""
    dt = sh.gemm_dtype
    casts = rowwise_casts(name, rows, n, k, sh.act_bytes, sh.quant_bytes, backward) if sh.rowwise else []
    if not backward:
        return casts + [_gemm(f"{name} fprop", module, rows, n, k, dt, overlap="ag" if column else "rs")]
    out = casts
    if fp8 and not sh.rowwise:
        out.append(_mem(f"{name} grad cast-transpose", "fp8", rows * n * (sh.act_bytes + 2 * sh.quant_bytes), True))
    out.append(_gemm(f"{name} dgrad", module, rows, k, n, dt, True, overlap="ag"))
    out.append(_gemm(f"{name} wgrad", module, n, k, rows, dt, True, overlap="rs" if column else ""))
    return out


def attention_kernels(model: ModelConfig, layout: Layout, backward: bool, flash: bool = True) -> list[Kernel]:
    """The attention block of one layer pass: norm, QKV, rotary, core, projection, residual."""
    sh = shapes(model, layout)
    fp8 = layout.quantized
    E, T, R, h, d = sh.act_bytes, sh.tokens, sh.rows, sh.hidden, sh.dhead
    qkv_n = (sh.heads + 2 * sh.kv) * d
    ctx = sh.heads * d
    gin = sh.fused_cast_bytes  # bytes of a GEMM input element written by its producer
    dropout = model.dropout > 0
    b, sq, skv = layout.micro_batch, layout.seq_len / layout.cp, float(layout.seq_len)
    bh = b * sh.heads
    core: list[Kernel]
    if flash:
        core = [
            Kernel(
                "flash attention " + ("bwd" if backward else "fwd"),
                "attention",
                "attention",
                sq,
                skv,
                d,
                bh,
                backward=backward,
            )
        ]
        if backward and layout.recomputes("core_attn"):
            core.insert(0, Kernel("flash attention fwd (recompute)", "attention", "attention", sq, skv, d, bh))
    else:
        core = [
            Kernel(
                "attention scores " + ("bwd" if backward else "fwd"),
                "attention",
                "attention_unfused",
                sq,
                skv,
                d,
                bh,
                backward=backward,
            ),
            _mem(
                "scale-mask-softmax-dropout " + ("bwd" if backward else "fwd"),
                "attention",
                bh * sq * skv * (11 if backward else 9),
                backward,
            ),
        ]
        if backward and layout.recomputes("core_attn"):
            core = [
                Kernel("attention scores fwd (recompute)", "attention", "attention_unfused", sq, skv, d, bh),
                _mem("scale-mask-softmax-dropout fwd (recompute)", "attention", bh * sq * skv * 9),
            ] + core
    if layout.cp > 1:  # ring attention: the K/V exchange with the other CP ranks runs under the core
        kv_bytes = 2 * T * sh.kv * d * E * layout.cp
        core = [_comm("cp kv exchange", kv_bytes, backward)] + core
    rope = (
        []
        if model.learned_positions
        else [
            _mem(
                "rotary embedding q, k" + (" bwd" if backward else ""),
                "attention",
                T * (sh.heads + sh.kv) * d * E * 2,
                backward,
                count=2,
            )
        ]
    )
    if not backward:
        ks = [_mem("norm fwd", "norm", R * h * (E + gin))]
        ks += _linear("qkv", "attention", T, qkv_n, h, sh, fp8, False, True)
        ks += rope + core
        if fp8 and not sh.rowwise:
            ks.append(_mem("attention output cast-transpose", "fp8", T * ctx * (E + 2 * sh.quant_bytes)))
        ks += _linear("attention proj", "attention", T, h, ctx, sh, fp8, False, False)
        ks.append(_residual_add("attention", R, sh, dropout))
        return ks
    head, tail = _block_backward_ends("attention", R, sh, dropout, layout.recomputes("layernorm"), gin)
    ks = head + _linear("attention proj", "attention", T, h, ctx, sh, fp8, True, False)
    ks += core + rope
    ks += _linear("qkv", "attention", T, qkv_n, h, sh, fp8, True, True)
    return ks + tail


def mlp_kernels(model: ModelConfig, layout: Layout, backward: bool) -> list[Kernel]:
    """The dense MLP block of one layer pass: norm, FC1, activation, FC2, residual."""
    sh = shapes(model, layout)
    fp8 = layout.quantized
    E, T, R, h, f = sh.act_bytes, sh.tokens, sh.rows, sh.hidden, sh.ffn
    u = model.mlp_matrices - 1
    gin = sh.fused_cast_bytes
    dropout = model.dropout > 0
    act = "swiglu" if u == 2 else "gelu"
    act_name = f"bias-{act}" if model.bias else act
    if not backward:
        ks = [_mem("norm fwd", "norm", R * h * (E + gin))]
        ks += _linear("fc1", "mlp", T, u * f, h, sh, fp8, False, True)
        ks.append(_mem(act_name, "mlp", T * f * (u * E + gin)))
        ks += _linear("fc2", "mlp", T, h, f, sh, fp8, False, False)
        ks.append(_residual_add("mlp", R, sh, dropout))
        return ks
    rerun = []
    if layout.recomputes("mlp"):  # the MLP re-run from its input: FC1, activation, FC2's input
        rerun.append(_gemm("fc1 fprop (recompute)", "mlp", T, u * f, h, sh.gemm_dtype, True))
    if layout.recomputes("mlp") or layout.recomputes("act"):
        rerun.append(_mem(f"{act_name} (recompute)", "mlp", T * f * (u * E + gin), True))
    head, tail = _block_backward_ends("mlp", R, sh, dropout, layout.recomputes("layernorm"), gin, rerun)
    ks = head + _linear("fc2", "mlp", T, h, f, sh, fp8, True, False)
    # reads the incoming gradient and the saved FC1 output, writes FC1's output gradient (fp8:
    # with its transpose, the cast fused)
    ks.append(_mem(f"{act} bwd", "mlp", T * f * (E + u * E + u * (2 * gin if fp8 and not sh.rowwise else E)), True))
    ks += _linear("fc1", "mlp", T, u * f, h, sh, fp8, True, True)
    return ks + tail


def moe_kernels(model: ModelConfig, layout: Layout, backward: bool) -> list[Kernel]:
    """A mixture-of-experts MLP block as Megatron-Core's all-to-all token dispatcher runs it
    under MoE parallel folding (balanced, dropless routing): norm; the router on this rank's
    ``R`` tokens (its sequence shard under TP, which needs sequence parallelism); the ``R k``
    routed copies permuted and sent to their experts' ranks (EP all-to-all), gathered over the
    expert tensor-parallel group (ETP all-gather: ``R k etp`` rows per rank); the local experts'
    GEMMs (``E / ep`` experts, each ``f / etp`` wide); the way back (ETP reduce-scatter, EP
    all-to-all); un-permutation; the shared experts as a TP-parallel dense MLP on the whole
    sequence (TP all-gather, reduce-scatter); residual.  With ``etp = tp`` and CP 1 this is
    expert parallelism over the data-parallel ranks, as before folding."""
    sh = shapes(model, layout)
    E, T, R, h = sh.act_bytes, sh.tokens, sh.rows, sh.hidden
    etp = layout.expert_tp
    f = model.expert_ffn / etp  # a routed expert's width on one GPU
    fs = model.expert_ffn / layout.tp  # a shared expert's (dense, TP-parallel)
    u = model.mlp_matrices - 1
    routed = R * model.top_k  # routed copies of this rank's tokens
    rows_all = routed * etp  # rows the local experts take, after the ETP all-gather
    local = max(model.experts // layout.ep, 1)
    rows = rows_all / local
    dt = sh.gemm_dtype
    n = model.shared_experts
    ks: list[Kernel] = []
    if not backward:
        ks.append(_mem("norm fwd", "norm", R * h * 2 * E))
        ks.append(_gemm("router fprop", "moe", R, model.experts, h, sh.gemm_dtype))
        ks.append(_mem("router softmax + top-k", "moe", R * model.experts * 4 * 3))
        ks.append(_mem("token permute", "moe", routed * h * E * 2))
        ks.append(_comm("ep all-to-all dispatch", routed * h * E))
        ks.append(_comm("etp all-gather", rows_all * h * E))
        ks.append(_gemm("expert fc1 fprop", "moe", rows, u * f, h, dt, count=local))
        ks.append(_mem("expert activation", "moe", rows_all * f * (u + 1) * E))
        ks.append(_gemm("expert fc2 fprop", "moe", rows, h, f, dt, count=local))
        ks.append(_comm("etp reduce-scatter", rows_all * h * E))
        ks.append(_comm("ep all-to-all combine", routed * h * E))
        ks.append(_mem("token unpermute + combine", "moe", routed * h * E * 2 + R * h * E))
        if n:
            ks.append(_comm("tp all-gather", T * h * E))
            ks.append(_gemm("shared expert fc1 fprop", "moe", T, u * fs, h, dt, count=n))
            ks.append(_mem("shared expert activation", "moe", T * fs * (u + 1) * E, count=n))
            ks.append(_gemm("shared expert fc2 fprop", "moe", T, h, fs, dt, count=n))
            ks.append(_comm("tp reduce-scatter", T * h * E))
        ks.append(_residual_add("moe", R, sh, False))
        return ks
    ks.append(_mem("token unpermute bwd", "moe", routed * h * E * 2 + R * h * E, True))
    ks.append(_comm("ep all-to-all combine grad", routed * h * E, True))
    ks.append(_comm("etp all-gather", rows_all * h * E, True))
    ks.append(_gemm("expert fc2 dgrad", "moe", rows, f, h, dt, True, count=local))
    ks.append(_gemm("expert fc2 wgrad", "moe", f, h, rows, dt, True, count=local))
    ks.append(_mem("expert activation bwd", "moe", rows_all * f * (2 * u + 1) * E, True))
    ks.append(_gemm("expert fc1 dgrad", "moe", rows, h, u * f, dt, True, count=local))
    ks.append(_gemm("expert fc1 wgrad", "moe", u * f, h, rows, dt, True, count=local))
    ks.append(_comm("etp reduce-scatter", rows_all * h * E, True))
    if n:
        ks += [
            _comm("tp all-gather", T * h * E, True),
            _gemm("shared expert fc2 dgrad", "moe", T, fs, h, dt, True, count=n),
            _gemm("shared expert fc2 wgrad", "moe", fs, h, T, dt, True, count=n),
            _mem("shared expert activation bwd", "moe", T * fs * (2 * u + 1) * E, True, count=n),
            _gemm("shared expert fc1 dgrad", "moe", T, h, u * fs, dt, True, count=n),
            _gemm("shared expert fc1 wgrad", "moe", u * fs, h, T, dt, True, count=n),
            _comm("tp reduce-scatter", T * h * E, True),
        ]
    ks.append(_comm("ep all-to-all dispatch grad", routed * h * E, True))
    ks.append(_mem("token permute bwd", "moe", routed * h * E * 2, True))
    ks.append(_gemm("router dgrad", "moe", R, h, model.experts, sh.gemm_dtype, True))
    ks.append(_gemm("router wgrad", "moe", model.experts, h, R, sh.gemm_dtype, True))
    return ks + _block_backward_ends("moe", R, sh, False, False, E)[1]


def embedding_kernels(model: ModelConfig, layout: Layout, backward: bool) -> list[Kernel]:
    """The input embedding: a vocabulary-parallel lookup (+ learned positions, dropout); its
    gradient is dense over the GPU's ``V / t`` rows and is added into ``main_grad`` (fp32)."""
    sh = shapes(model, layout)
    E, T, R, h, V = sh.act_bytes, sh.tokens, sh.rows, sh.hidden, sh.vocab
    if not backward:
        ks = [_mem("embedding lookup", "embedding", T * h * E * 2)]
        if model.learned_positions:
            ks.append(_mem("position embedding add", "embedding", T * h * E * 3))
        if model.dropout > 0:
            ks.append(_mem("embedding dropout", "embedding", R * h * (2 * E + 1)))
        return ks
    ks = []
    if model.dropout > 0:
        ks.append(_mem("embedding dropout bwd", "embedding", R * h * (2 * E + 1), True))
    ks += [
        _mem("embedding grad zero", "embedding", V * h * E, True),
        _mem("embedding grad scatter-add", "embedding", T * h * (2 * E + 8), True),
        _mem("embedding grad into main_grad", "embedding", V * h * (E + 8), True),
    ]
    if model.learned_positions:
        ks.append(_mem("position embedding grad", "embedding", layout.seq_len * h * (E + 8) + T * h * E, True))
    return ks


def output_kernels(model: ModelConfig, layout: Layout, backward: bool, loss_fusion: bool = False) -> list[Kernel]:
    """The final norm, the output layer (bf16 even under fp8) and the vocabulary-parallel cross
    entropy (fp32 unless fused)."""
    sh = shapes(model, layout)
    E, T, R, h, V = sh.act_bytes, sh.tokens, sh.rows, sh.hidden, sh.vocab
    dt = "bf16" if layout.quantized else sh.gemm_dtype
    logits = T * V
    if not backward:
        ks = [_mem("final norm fwd", "norm", R * h * 2 * E), _gemm("output layer fprop", "output", T, V, h, dt)]
        if loss_fusion:
            ks.append(_mem("fused cross entropy fwd", "loss", logits * E * 2))
        else:
            ks += [
                _mem("logits to fp32", "loss", logits * (E + 4)),
                _mem("cross entropy max", "loss", logits * 4),
                _mem("cross entropy subtract max", "loss", logits * 8),
                _mem("cross entropy exp", "loss", logits * 8),
                _mem("cross entropy sum", "loss", logits * 4),
                _mem("softmax divide", "loss", logits * 8),
            ]
        return ks
    if loss_fusion:
        ks = [_mem("fused cross entropy bwd", "loss", logits * E * 2, True)]
    else:
        ks = [
            _mem("cross entropy grad scale", "loss", logits * 8, True),
            _mem("logits grad to bf16", "loss", logits * (4 + E), True),
        ]
    ks += [
        _gemm("output layer dgrad", "output", T, h, V, dt, True),
        _gemm("output layer wgrad", "output", V, h, T, dt, True),
        _mem("final norm bwd", "norm", R * h * E * 3, True),
    ]
    return ks


def optimizer_kernels(params_local: float, shard: float, layout: Layout, grad_bytes: float = 4.0) -> list[Kernel]:
    """Once per iteration on one GPU: zeroing its gradient buffer (``params_local`` elements of
    ``grad_bytes``), scaling it by 1/DP before the reduction, the gradient norm and Adam on the
    ``shard`` it updates (fp32 master, m, v), the updated weights cast to bf16 (46 B per shard
    parameter in all); fp8: each weight cast and transposed (4 B per parameter; fp8-rowwise casts
    them at every use instead, :func:`rowwise_casts`)."""
    ks = [_mem("zero gradient buffer", "optimizer", params_local * grad_bytes)]
    if layout.dp * layout.cp > 1:
        ks.append(_mem("scale gradients by 1/DP", "optimizer", params_local * grad_bytes * 2))
    ks += [
        _mem("gradient norm", "optimizer", shard * 4),
        _mem("clip gradients", "optimizer", shard * 8),
        _mem("adam", "optimizer", shard * 28),
        _mem("master weights to bf16", "optimizer", shard * 6),
    ]
    if layout.quantized and not layout.rowwise_scaled:  # read bf16, write both quantized copies
        ks.append(
            _mem(
                f"{layout.precision} weight cast-transpose",
                "fp8",
                params_local * (2 + 2 * QUANT_BYTES[layout.precision]),
            )
        )
    return ks
