"""A parallel layout: how a model is split over GPUs and how one iteration is batched.

``gpus = tp * pp * cp * dp``.  Mixture-of-experts layers are parallelized on their own
(Megatron-Core's *MoE parallel folding*): inside a pipeline stage the ``tp * cp * dp`` ranks of
the dense layers are regrouped as ``etp * ep * edp`` -- expert tensor parallelism (``etp``,
default ``tp``) fastest, then expert parallelism (``ep``: the experts are split over ``ep``
ranks), then the expert data-parallel ranks (``edp``) that reduce the experts' gradients --
so an EP group may span TP, CP and DP ranks.  Batches are in sequences; ``global_batch`` is
split into ``dp`` shards of ``micro_batch``-sized micro-batches, ``num_microbatches`` per
iteration (gradient accumulation).

**Pipeline split.**  The transformer layers are cut into ``pp * vpp`` *virtual stages*, numbered
in the order a micro-batch passes them: virtual stage ``g = chunk * pp + stage`` is chunk
``chunk`` of pipeline rank ``stage``; each holds a contiguous run of layers, virtual stage 0
also the input embedding and the last one (``pp * vpp - 1``, chunk ``vpp - 1`` of the last
rank) the output layer and the loss.  Layers per virtual stage, as Megatron-Core sets them:

* even (default): ``layers / (pp * vpp)`` each;
* ``first_stage_layers`` / ``last_stage_layers`` (Megatron's ``--decoder-first/last-pipeline-
  num-layers``): the layers of the whole first / last *pipeline rank*, split evenly over its
  ``vpp`` chunks (so they must be multiples of ``vpp``); the other ranks share the rest
  evenly, again ``vpp`` equal chunks each;
* ``account_for_embedding`` / ``account_for_loss`` (``--account-for-embedding/loss-in-pipeline-
  split``): the embedding / the loss counts as one layer, ``layers + e + l`` is divided evenly
  over the ``pp * vpp`` virtual stages, and the first / last virtual stage builds one
  transformer layer fewer (Llama 3.1 405B: 126 + 2 = 128 = 8 ranks x 8 chunks x 2 layers);
* ``pipeline_layers``: an explicit count per virtual stage, in virtual-stage order (chunk 0 of
  ranks ``0 .. pp-1``, then chunk 1, ...).  Counts are >= 0 and sum to the layers; only the
  first and the last virtual stage may be empty (they still run the embedding / the loss).

The three uneven forms exclude each other (as in Megatron-Core).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..params import Param, param
from .model import ModelConfig

SCHEDULES = ("1f1b", "gpipe", "interleaved")
RECOMPUTE = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp16", "fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp32")
#: the layer GEMMs' tensor-core dtype of each quantized training recipe
_GEMM_DTYPE = {"fp8-rowwise": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}
#: bytes per quantized GEMM operand element, block scales included: fp8 with a per-tensor scale
#: (Transformer Engine's delayed / current scaling) 1; fp8 with a 4-byte scale per row of
#: >= 1,024 elements (torchao's rowwise recipe) 1 (the scales are under 0.4%); MXFP8, an 8-bit
#: E8M0 scale per 32 elements; NVFP4, 4 bits and an 8-bit E4M3 scale per 16 elements
QUANT_BYTES = {"fp8": 1.0, "fp8-rowwise": 1.0, "mxfp8": 1.0 + 1 / 32, "nvfp4": 0.5 + 1 / 16}
TP_OVERLAP = ("te", "async", "none")
#: the most micro-batches a step may have on a data-parallel rank (every one is scheduled;
#: real runs have a few thousand at most)
MAX_MICROBATCHES = 2**16
RECOMPUTE_MODULES = ("core_attn", "act", "mlp", "layernorm")


@dataclass(frozen=True)
class Layout:
    """Parallelism and batching of one training run, and the training options that change its
    time (precision, recompute, overlap).  Every field a user sets declares its flag
    (:mod:`podsim.params`)."""

    gpus: int = param(Param("gpus", "count", help="GPUs in the job (required)", metavar="N"), required=True)
    tp: int = param(Param("tp", "count", 1, help="tensor-parallel size", metavar="T"))
    pp: int = param(Param("pp", "count", 1, help="pipeline-parallel size", metavar="P"))
    cp: int = param(Param("cp", "count", 1, help="context-parallel size", metavar="C"))
    ep: int = param(
        Param(
            "ep",
            "count",
            1,
            help="expert-parallel size: the experts split over E ranks, folded with --etp over TP x CP x DP",
            metavar="E",
            aliases=("expert-model-parallel-size",),
        )
    )
    #: expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size); None: TP
    etp: int | None = param(
        Param(
            "etp",
            "count",
            help="expert tensor-parallel size (default: TP): each expert's matrices split over T ranks",
            metavar="T",
            aliases=("expert-tensor-parallel-size",),
        )
    )
    vpp: int = param(Param("vpp", "count", 1, help="virtual stages per pipeline rank (interleaved 1F1B)", metavar="V"))
    global_batch: int = param(Param("global-batch", "count", help="sequences per iteration (required)", metavar="B"), 1)
    micro_batch: int = param(
        Param("micro-batch", "count", 1, help="sequences per micro-batch", metavar="M", aliases=("micro-batch-size",))
    )
    seq_len: int = param(
        Param("seq-len", "count", help="tokens per sequence (default: the model's)", metavar="S"), 2048
    )
    sequence_parallel: bool = param(
        Param("sequence-parallel", "bool", False, help="Megatron's sequence parallelism (needs --tp > 1)")
    )
    recompute: str = param(
        Param("recompute", "choice", "none", RECOMPUTE, help="activation recomputation: none, selective or full")
    )
    #: selective recompute's modules (Megatron-Core's --recompute-modules): core_attn (the
    #: attention core), act (the MLP activation), mlp (the whole MLP), layernorm (the norms)
    recompute_modules: tuple[str, ...] = param(
        Param(
            "recompute-modules",
            "list",
            "core_attn",
            metavar="M,M,...",
            help="selective recompute's modules: core_attn (default), act, mlp, layernorm",
        )
    )
    #: full recompute of only the first N layers of each virtual stage (Megatron's
    #: --recompute-method block --recompute-num-layers N); None: every layer
    recompute_layers: int | None = param(
        Param(
            "recompute-num-layers",
            "count",
            field="recompute_layers",
            metavar="N",
            help="full recompute of only the first N layers of each virtual stage (Megatron's block method)",
        )
    )
    schedule: str = param(
        Param(
            "schedule",
            "choice",
            "1f1b",
            SCHEDULES,
            aliases=("pipeline-schedule",),
            help="pipeline schedule (--vpp > 1 implies interleaved)",
        )
    )
    zero: int = param(
        Param("zero", "natural", 0, (0, 1, 2, 3), help="DeepSpeed ZeRO stage 0-3", exclusive="optimizer"),
        also=(
            Param(
                "fsdp",
                "bool",
                False,
                help="fully sharded data parallelism (= --zero 3)",
                field="zero",
                const=3,
                exclusive="optimizer",
            ),
        ),
    )
    distributed_optimizer: bool = param(
        Param(
            "distributed-optimizer",
            "bool",
            False,
            exclusive="optimizer",
            help="Megatron's distributed optimizer (ZeRO-1 style sharding, fp32 gradients)",
        )
    )
    precision: str = param(
        Param(
            "precision",
            "choice",
            "bf16",
            PRECISIONS,
            help="fp8: Transformer Engine's per-tensor scaling (delayed or current); fp8-rowwise: a scale per "
            "row (torchao's rowwise recipe: every GEMM operand cast twice, once through a transpose); mxfp8, "
            "nvfp4: Blackwell's block-scaled formats (layer GEMMs at the fp8 / fp4 peak)",
        )
    )
    #: reduce gradients while the backward runs (Megatron-core's --overlap-grad-reduce); off,
    #: they are reduced after the whole backward (Megatron-LM of 2021)
    overlap_grad_reduce: bool = param(
        Param(
            "no-overlap-grad-reduce",
            "bool",
            False,
            negate=True,
            field="overlap_grad_reduce",
            help="reduce gradients after the backward",
        )
    )
    #: bytes per gradient element in the data-parallel reduction (4: fp32, Megatron's default
    #: for bf16; 2: reduced in the training precision)
    grad_reduce_bytes: int = 4
    #: fused (flash) attention: no s x s scores are stored or materialised
    flash_attention: bool = param(
        Param(
            "no-flash-attention",
            "bool",
            False,
            negate=True,
            field="flash_attention",
            help="unfused attention (Megatron of 2021)",
        )
    )
    #: uneven pipeline split (Megatron's --decoder-first/last-pipeline-num-layers): layers on the
    #: first / last pipeline rank; the others share the rest evenly
    first_stage_layers: int | None = param(
        Param(
            "first-stage-layers",
            "natural",
            aliases=("decoder-first-pipeline-num-layers",),
            metavar="L",
            help="uneven pipeline split: layers on the first pipeline rank (with --vpp V, a multiple of V, split "
            "evenly over its virtual stages)",
        )
    )
    last_stage_layers: int | None = param(
        Param(
            "last-stage-layers",
            "natural",
            aliases=("decoder-last-pipeline-num-layers",),
            metavar="L",
            help="uneven pipeline split: layers on the last pipeline rank (likewise)",
        )
    )
    #: Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-
    #: split: the embedding / the loss counts as one layer of the first / last virtual stage
    account_for_embedding: bool = param(
        Param(
            "account-for-embedding-in-pipeline-split",
            "bool",
            False,
            field="account_for_embedding",
            help="count the embedding as one layer of the split: the first virtual stage gets one transformer layer "
            "fewer",
        )
    )
    account_for_loss: bool = param(
        Param(
            "account-for-loss-in-pipeline-split",
            "bool",
            False,
            field="account_for_loss",
            help="count the loss (output layer) as one layer of the split: the last virtual stage gets one "
            "transformer layer fewer",
        )
    )
    #: explicit layers per virtual stage (pp * vpp counts, virtual-stage order)
    pipeline_layers: tuple[int, ...] | None = param(
        Param(
            "pipeline-layers",
            "list",
            item=int,
            items="layer counts",
            metavar="N,N,...",
            help="explicit split: layers per virtual stage, PP x VPP numbers (chunk 0 of ranks 0..PP-1, then chunk 1, "
            "...)",
        )
    )
    #: TP communication overlap: ``te`` (Transformer Engine's --tp-comm-overlap: every
    #: sequence-parallel collective pipelined with its GEMM), ``async`` (Megatron-Core's
    #: default: the backward's input re-gather and dgrad reduction run under dgrad / wgrad
    #: GEMMs), ``none`` (Megatron-LM of 2021: every TP collective blocks)
    tp_overlap: str = param(
        Param(
            "tp-overlap",
            "choice",
            "te",
            TP_OVERLAP,
            help="TP communication overlap: te = Transformer Engine's --tp-comm-overlap (default; needs "
            "--sequence-parallel), async = Megatron-Core's default (backward only), none = blocking",
        )
    )
    #: the distributed optimizer's parameter all-gather runs under the next forward
    #: (Megatron-Core's --overlap-param-gather); off, it follows the optimizer step
    overlap_param_gather: bool = param(
        Param(
            "no-overlap-param-gather",
            "bool",
            False,
            negate=True,
            field="overlap_param_gather",
            help="the distributed optimizer's parameter all-gather follows the optimizer step instead of running "
            "under the next forward",
        )
    )
    #: a fused cross-entropy kernel (Megatron's --cross-entropy-loss-fusion); off, the
    #: vocabulary-parallel cross entropy runs in fp32 as separate kernels
    loss_fusion: bool = param(
        Param(
            "loss-fusion", "bool", False, help="a fused cross-entropy kernel (Megatron's --cross-entropy-loss-fusion)"
        )
    )

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel size (``etp``, or ``tp`` when not given)."""
        return self.tp if self.etp is None else self.etp

    @property
    def edp(self) -> int:
        """Expert data-parallel size: ``tp * cp * dp / (etp * ep)``, the ranks that reduce one
        expert's gradients."""
        return max(1, self.tp * self.cp * self.dp // (self.expert_tp * self.ep))

    @property
    def expert_grads_apart(self) -> bool:
        """Whether the routed experts' gradients are reduced over groups of their own (``edp``):
        with expert parallelism or an expert TP other than TP; otherwise the expert data-parallel
        group is the DP x CP group and they share its buckets."""
        return self.ep > 1 or self.expert_tp != self.tp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per data-parallel rank per iteration."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def quantized(self) -> bool:
        """The layer GEMMs run in a quantized format (fp8, fp8-rowwise, mxfp8 or nvfp4); attention, the
        output layer, the loss and communication stay in bf16 (Transformer Engine's recipes)."""
        return self.precision in QUANT_BYTES

    @property
    def rowwise_scaled(self) -> bool:
        """fp8 with a scale per row (torchao's rowwise recipe), which casts its own way (llm/kernels.py)."""
        return self.precision == "fp8-rowwise"

    @property
    def compute_dtype(self) -> str:
        """The tensor-core dtype of the layer GEMMs: ``fp8`` for fp8, fp8-rowwise and mxfp8, ``fp4`` for nvfp4."""
        return _GEMM_DTYPE.get(self.precision, self.precision)

    @property
    def interleaved(self) -> bool:
        return self.vpp > 1 or self.schedule == "interleaved"

    def __post_init__(self) -> None:
        if self.pipeline_layers is not None and not isinstance(self.pipeline_layers, tuple):
            object.__setattr__(self, "pipeline_layers", tuple(self.pipeline_layers))
        if not isinstance(self.recompute_modules, tuple):
            object.__setattr__(self, "recompute_modules", tuple(self.recompute_modules))

    def recomputes(self, module: str) -> bool:
        """Whether selective recomputation re-runs ``module`` in the backward."""
        return self.recompute == "selective" and module in self.recompute_modules

    def recomputed_layer(self, model: ModelConfig, stage: int, chunk: int, layer: int) -> bool:
        """Whether full recomputation re-runs ``layer`` (of ``stage``'s ``chunk``): every layer,
        or the first ``recompute_layers`` of each virtual stage."""
        if self.recompute != "full":
            return False
        if self.recompute_layers is None:
            return True
        return layer - self.chunk_layers(model, stage, chunk).start < self.recompute_layers

    def virtual_stage_layer_counts(self, model: ModelConfig) -> list[int]:
        """Transformer layers of every virtual stage, in virtual-stage order
        (``g = chunk * pp + stage``).  Meaningful once :meth:`check` passes."""
        p, v = self.pp, self.vpp
        n = p * v
        if self.pipeline_layers is not None:
            return list(self.pipeline_layers)
        first, last = self.first_stage_layers, self.last_stage_layers
        if first is not None or last is not None:
            if p == 1:
                return [model.layers // v] * v
            inner = p - (first is not None) - (last is not None)
            rest = model.layers - (first or 0) - (last or 0)
            per_rank = [rest // inner if inner else 0] * p
            if first is not None:
                per_rank[0] = first
            if last is not None:
                per_rank[-1] = last
            return [per_rank[g % p] // v for g in range(n)]
        e, lo = int(self.account_for_embedding), int(self.account_for_loss)
        counts = [(model.layers + e + lo) // n] * n
        counts[0] -= e
        counts[-1] -= lo
        return counts

    def chunk_layers(self, model: ModelConfig, stage: int, chunk: int = 0) -> range:
        """The global layer indices of virtual chunk ``chunk`` of pipeline rank ``stage``."""
        counts = self.virtual_stage_layer_counts(model)
        g = chunk * self.pp + stage
        start = sum(counts[:g])
        return range(start, start + counts[g])

    def stage_layer_counts(self, model: ModelConfig) -> list[int]:
        """Layers per pipeline rank (all its virtual stages together)."""
        counts = self.virtual_stage_layer_counts(model)
        return [sum(counts[c * self.pp + s] for c in range(self.vpp)) for s in range(self.pp)]

    def check(self, model: ModelConfig) -> None:
        """Raise :class:`InputError` naming the first rule the layout breaks for ``model``."""
        for name in ("gpus", "tp", "pp", "cp", "ep", "vpp", "global_batch", "micro_batch", "seq_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.recompute not in RECOMPUTE:
            raise InputError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        bad = [x for x in self.recompute_modules if x not in RECOMPUTE_MODULES]
        if bad or not self.recompute_modules:
            raise InputError(
                f"--recompute-modules must name some of {', '.join(RECOMPUTE_MODULES)}, got "
                f"{','.join(self.recompute_modules) or 'none'}"
            )
        if self.recompute_layers is not None:
            if self.recompute != "full":
                raise InputError("--recompute-num-layers needs --recompute full")
            if not isinstance(self.recompute_layers, int) or self.recompute_layers < 0:
                raise InputError(
                    f"--recompute-num-layers must be a non-negative integer, got {self.recompute_layers!r}"
                )
        if self.schedule not in SCHEDULES:
            raise InputError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.precision not in PRECISIONS:
            raise InputError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.tp_overlap not in TP_OVERLAP:
            raise InputError(f"--tp-overlap must be one of {', '.join(TP_OVERLAP)}, got {self.tp_overlap!r}")
        if self.zero not in (0, 1, 2, 3):
            raise InputError(f"--zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.zero and self.distributed_optimizer:
            raise InputError("choose --zero or --distributed-optimizer, not both")
        mp = self.tp * self.pp * self.cp
        if self.gpus % mp:
            raise InputError(
                f"{self.gpus} GPUs are not divisible by TP x PP x CP = {self.tp} x {self.pp} x {self.cp} = {mp}"
            )
        if model.heads % self.tp:
            raise InputError(f"TP {self.tp} does not divide the {model.heads} attention heads of {model.name}")
        if model.kv % self.tp and self.tp % model.kv:
            raise InputError(f"TP {self.tp} and the {model.kv} KV heads of {model.name} do not divide each other")
        if self.vpp > 1 and self.pp == 1:
            raise InputError(
                f"--vpp {self.vpp} needs --pp > 1: virtual stages interleave the ranks of a pipeline, and PP 1 has none"
                " (Megatron refuses it too)"
            )
        self._check_split(model)
        if self.vpp > 1 and self.schedule == "gpipe":
            raise InputError("virtual stages (--vpp) need the interleaved 1F1B schedule")
        if self.seq_len % self.cp:
            raise InputError(f"CP {self.cp} does not divide the sequence length {self.seq_len}")
        if self.sequence_parallel and self.seq_len % (self.tp * self.cp):
            raise InputError(
                f"sequence parallelism needs TP x CP = {self.tp * self.cp} to divide the sequence length {self.seq_len}"
            )
        per_rank = self.global_batch % (self.dp * self.micro_batch)
        if per_rank:
            raise InputError(
                f"the global batch {self.global_batch} is not a multiple of DP x micro-batch = "
                f"{self.dp} x {self.micro_batch}"
            )
        if self.num_microbatches > MAX_MICROBATCHES:
            raise InputError(
                f"the global batch {self.global_batch} makes {self.num_microbatches:,} micro-batches a step on each "
                f"data-parallel rank; podsim simulates at most {MAX_MICROBATCHES:,} (a larger --micro-batch or more "
                "GPUs make fewer)",
                where="--global-batch",
            )
        self._check_experts(model)
        if self.interleaved and self.pp > 1 and self.num_microbatches % self.pp:
            raise InputError(
                f"interleaved 1F1B needs the micro-batches per rank ({self.num_microbatches}) "
                f"to be a multiple of PP {self.pp}"
            )

    def _check_experts(self, model: ModelConfig) -> None:
        """MoE parallel folding's rules (Megatron-Core's ``initialize_model_parallel`` and
        ``MoELayer``), one clear error each."""
        if self.etp is not None and (not isinstance(self.etp, int) or isinstance(self.etp, bool) or self.etp < 1):
            raise InputError(f"--etp must be a positive integer, got {self.etp!r}")
        if not model.moe:
            if self.ep > 1:
                raise InputError(f"--ep {self.ep} needs a mixture-of-experts model; {model.name} is dense")
            if self.etp is not None and self.etp != self.tp:
                raise InputError(f"--etp {self.etp} needs a mixture-of-experts model; {model.name} is dense")
            return
        etp, ep, dense = self.expert_tp, self.ep, self.tp * self.cp * self.dp
        if model.experts % ep:
            raise InputError(f"EP {ep} does not divide the {model.experts} experts of {model.name}")
        if dense % (etp * ep):
            raise InputError(
                f"ETP x EP = {etp} x {ep} = {etp * ep} must divide the {dense} ranks of a pipeline stage "
                f"(TP x CP x DP = {self.tp} x {self.cp} x {self.dp}): Megatron-Core folds the experts' "
                "ranks over the dense layers' ranks"
            )
        if model.expert_ffn % etp:
            raise InputError(f"ETP {etp} does not divide the expert FFN width {model.expert_ffn} of {model.name}")
        if self.tp > 1 and not self.sequence_parallel:
            raise InputError(
                f"MoE layers under TP {self.tp} need --sequence-parallel: Megatron-Core refuses to train "
                "them without it (the router and the token dispatch run on each rank's sequence shard)"
            )

    def _check_split(self, model: ModelConfig) -> None:
        """The pipeline split's rules (see the module docstring), one clear error each."""
        L, p, v, name = model.layers, self.pp, self.vpp, model.name
        n = p * v
        given = [
            f
            for f, on in (
                ("--pipeline-layers", self.pipeline_layers is not None),
                (
                    "--first-stage-layers / --last-stage-layers",
                    self.first_stage_layers is not None or self.last_stage_layers is not None,
                ),
                ("--account-for-embedding/loss-in-pipeline-split", self.account_for_embedding or self.account_for_loss),
            )
            if on
        ]
        if len(given) > 1:
            raise InputError(f"choose one uneven pipeline split, not {' and '.join(given)}")
        if self.pipeline_layers is not None:
            counts = self.pipeline_layers
            if len(counts) != n:
                raise InputError(
                    f"--pipeline-layers needs PP x VPP = {p} x {v} = {n} numbers (layers per virtual "
                    f"stage: chunk 0 of ranks 0..{p - 1}, then chunk 1, ...), got {len(counts)}"
                )
            for g, c in enumerate(counts):
                if not isinstance(c, int) or isinstance(c, bool) or c < 0:
                    raise InputError(f"--pipeline-layers: virtual stage {g} has {c!r} layers; expected an integer >= 0")
            if sum(counts) != L:
                raise InputError(f"--pipeline-layers sums to {sum(counts)} layers; {name} has {L}")
            empty = [g for g, c in enumerate(counts) if c == 0 and 0 < g < n - 1]
            if empty:
                raise InputError(
                    f"--pipeline-layers: virtual stage {empty[0]} (rank {empty[0] % p}, chunk "
                    f"{empty[0] // p}) has no layers; only the first (embedding) and the last "
                    "(loss) virtual stage may be empty"
                )
            return
        first, last = self.first_stage_layers, self.last_stage_layers
        if first is not None or last is not None:
            for flag, val in (("--first-stage-layers", first), ("--last-stage-layers", last)):
                if val is None:
                    continue
                if not isinstance(val, int) or isinstance(val, bool) or val < 1:
                    raise InputError(f"{flag} must be a positive integer, got {val!r}")
                if val % v:
                    raise InputError(
                        f"{flag} {val} must be a multiple of VPP {v}: Megatron splits the "
                        f"{'first' if 'first' in flag else 'last'} pipeline rank's layers evenly "
                        f"over its {v} virtual stages (for an uneven first / last virtual stage use "
                        "--account-for-embedding/loss-in-pipeline-split or --pipeline-layers)"
                    )
            if p < 2:
                raise InputError(f"{given[0]} needs PP >= 2, got PP {p}")
            inner = p - (first is not None) - (last is not None)
            rest = L - (first or 0) - (last or 0)
            if (inner and (rest < inner or rest % inner)) or (not inner and rest):
                want = f"a multiple of {inner} (at least {inner})" if inner else "none"
                split = ", ".join(f"{f} {x}" for f, x in (("first", first), ("last", last)) if x)
                left = f"leaves {rest} for" if rest >= 0 else f"takes {-rest} more than there are, leaving none for"
                raise InputError(
                    f"an uneven split ({split}) of the {L} layers of {name} {left} the other {inner} "
                    f"pipeline ranks; expected {want}",
                    where=given[0],
                )
            if inner and (rest // inner) % v:
                raise InputError(
                    f"the uneven split (first {first}, last {last}) leaves {rest // inner} layers on "
                    f"each other pipeline rank, not a multiple of VPP {v}"
                )
            return
        e, lo = int(self.account_for_embedding), int(self.account_for_loss)
        if e or lo:
            total = L + e + lo
            what = " + ".join(["the embedding"] * e + ["the loss"] * lo)
            if total % n:
                raise InputError(
                    f"with {what} counted as layers, PP x VPP = {n} does not divide the {total} "
                    f"(= {L} + {e + lo}) layers of {name}"
                )
            return
        if L % n:
            hints = []
            for ee, ll in ((1, 1), (1, 0), (0, 1)):
                if (L + ee + ll) % n == 0:
                    flags = " ".join(
                        f
                        for f, on in (
                            ("--account-for-embedding-in-pipeline-split", ee),
                            ("--account-for-loss-in-pipeline-split", ll),
                        )
                        if on
                    )
                    hints.append(
                        f"{flags} ({L} + {ee + ll} = {L + ee + ll} layers, {(L + ee + ll) // n} per virtual stage)"
                    )
                    break
            if p > 2:
                for edge in range(v, L // p + 1, v):
                    rest = L - 2 * edge
                    if rest > 0 and rest % (p - 2) == 0 and (rest // (p - 2)) % v == 0:
                        hints.append(f"--first-stage-layers {edge} --last-stage-layers {edge}")
                        break
            hints.append(f"--pipeline-layers with {n} numbers")
            raise InputError(
                f"PP x VPP = {n} does not divide the {L} layers of {name} (give an uneven split: "
                + "; or ".join(hints)
                + ")"
            )
