"""A parallel layout: how a model is split over GPUs and how one iteration is batched.

``gpus = tp * pp * cp * dp``; EP splits the experts inside ``dp * cp`` (Megatron's expert
parallelism over the data-parallel ranks).  Batches are in sequences; ``global_batch`` is
split into ``dp`` shards of ``micro_batch``-sized micro-batches, ``num_microbatches`` per
iteration (gradient accumulation).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .model import ModelConfig

SCHEDULES = ("1f1b", "gpipe", "interleaved")
RECOMPUTE = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp16", "fp8", "fp32")
TP_OVERLAP = ("te", "async", "none")


@dataclass(frozen=True)
class Layout:
    """Parallelism and batching of one training run."""

    gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1                      #: virtual stages per pipeline rank (interleaved 1F1B)
    global_batch: int = 1             #: sequences per iteration
    micro_batch: int = 1              #: sequences per micro-batch
    seq_len: int = 2048
    sequence_parallel: bool = False
    recompute: str = "none"           #: none | selective | full
    schedule: str = "1f1b"            #: gpipe | 1f1b | interleaved (vpp > 1 implies interleaved)
    zero: int = 0                     #: DeepSpeed ZeRO stage 0-3
    distributed_optimizer: bool = False  #: Megatron's (= ZeRO-1 style sharding, fp32 grads)
    precision: str = "bf16"
    #: reduce gradients while the backward runs (Megatron-core's --overlap-grad-reduce); off,
    #: they are reduced after the whole backward (Megatron-LM of 2021)
    overlap_grad_reduce: bool = True
    #: bytes per gradient element in the data-parallel reduction (4: fp32, Megatron's default
    #: for bf16; 2: reduced in the training precision)
    grad_reduce_bytes: int = 4
    #: fused (flash) attention: no s x s scores are stored or materialised
    flash_attention: bool = True
    #: uneven pipeline split (Megatron's --decoder-first/last-pipeline-num-layers): layers on the
    #: first / last pipeline rank; the others share the rest evenly
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    #: TP communication overlap: ``te`` (Transformer Engine's --tp-comm-overlap: every
    #: sequence-parallel collective pipelined with its GEMM), ``async`` (Megatron-Core's
    #: default: the backward's input re-gather and dgrad reduction run under dgrad / wgrad
    #: GEMMs), ``none`` (Megatron-LM of 2021: every TP collective blocks)
    tp_overlap: str = "te"
    #: the distributed optimizer's parameter all-gather runs under the next forward
    #: (Megatron-Core's --overlap-param-gather); off, it follows the optimizer step
    overlap_param_gather: bool = True
    #: a fused cross-entropy kernel (Megatron's --cross-entropy-loss-fusion); off, the
    #: vocabulary-parallel cross entropy runs in fp32 as separate kernels
    loss_fusion: bool = False

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per data-parallel rank per iteration."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def interleaved(self) -> bool:
        return self.vpp > 1 or self.schedule == "interleaved"

    def chunk_layers(self, model: ModelConfig, stage: int, chunk: int = 0) -> range:
        """The layers of virtual chunk ``chunk`` of pipeline rank ``stage``."""
        if self.first_stage_layers is None and self.last_stage_layers is None:
            per = model.layers // (self.pp * self.vpp)
            first = (chunk * self.pp + stage) * per
            return range(first, first + per)
        counts = self.stage_layer_counts(model)
        start = sum(counts[:stage])
        return range(start, start + counts[stage])

    def stage_layer_counts(self, model: ModelConfig) -> list[int]:
        """Layers per pipeline rank (uneven when first/last are given)."""
        p = self.pp
        first = self.first_stage_layers
        last = self.last_stage_layers
        if first is None and last is None:
            return [model.layers // p] * p
        if p == 1:
            return [model.layers]
        inner = p - (first is not None) - (last is not None)
        rest = model.layers - (first or 0) - (last or 0)
        each = rest // inner if inner else 0
        counts = [each] * p
        if first is not None:
            counts[0] = first
        if last is not None:
            counts[-1] = last
        return counts

    def check(self, model: ModelConfig) -> None:
        """Raise :class:`InputError` naming the first rule the layout breaks for ``model``."""
        for name in ("gpus", "tp", "pp", "cp", "ep", "vpp", "global_batch", "micro_batch", "seq_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
        if self.recompute not in RECOMPUTE:
            raise InputError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
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
            raise InputError(f"{self.gpus} GPUs are not divisible by TP x PP x CP = {self.tp} x {self.pp} x "
                             f"{self.cp} = {mp}")
        if model.heads % self.tp:
            raise InputError(f"TP {self.tp} does not divide the {model.heads} attention heads of {model.name}")
        if model.kv % self.tp and self.tp % model.kv:
            raise InputError(f"TP {self.tp} and the {model.kv} KV heads of {model.name} do not divide each other")
        stages = self.pp * self.vpp
        uneven = self.first_stage_layers is not None or self.last_stage_layers is not None
        if uneven:
            if self.vpp > 1:
                raise InputError("an uneven pipeline split (--first-stage-layers / --last-stage-layers) cannot be "
                                 "combined with virtual stages")
            counts = self.stage_layer_counts(model)
            inner = self.pp - (self.first_stage_layers is not None) - (self.last_stage_layers is not None)
            rest = model.layers - (self.first_stage_layers or 0) - (self.last_stage_layers or 0)
            if self.pp < 2 or min(counts) < 1 or (inner and rest % inner) or (not inner and rest):
                raise InputError(f"the uneven split (first {self.first_stage_layers}, last "
                                 f"{self.last_stage_layers}) does not leave the other {inner} pipeline ranks an "
                                 f"equal share of the {model.layers} layers of {model.name}")
        elif model.layers % stages:
            raise InputError(f"PP x VPP = {stages} does not divide the {model.layers} layers of {model.name} "
                             "(give --first-stage-layers / --last-stage-layers for an uneven split)")
        if self.vpp > 1 and self.schedule == "gpipe":
            raise InputError("virtual stages (--vpp) need the interleaved 1F1B schedule")
        if self.seq_len % self.cp:
            raise InputError(f"CP {self.cp} does not divide the sequence length {self.seq_len}")
        if self.sequence_parallel and self.seq_len % (self.tp * self.cp):
            raise InputError(f"sequence parallelism needs TP x CP = {self.tp * self.cp} to divide the "
                             f"sequence length {self.seq_len}")
        per_rank = self.global_batch % (self.dp * self.micro_batch)
        if per_rank:
            raise InputError(f"the global batch {self.global_batch} is not a multiple of DP x micro-batch = "
                             f"{self.dp} x {self.micro_batch}")
        if self.ep > 1:
            if not model.moe:
                raise InputError(f"--ep {self.ep} needs a mixture-of-experts model; {model.name} is dense")
            if model.experts % self.ep:
                raise InputError(f"EP {self.ep} does not divide the {model.experts} experts of {model.name}")
            if (self.dp * self.cp) % self.ep:
                raise InputError(f"EP {self.ep} must divide DP x CP = {self.dp * self.cp}")
        if self.interleaved and self.pp > 1 and self.num_microbatches % self.pp:
            raise InputError(f"interleaved 1F1B needs the micro-batches per rank ({self.num_microbatches}) "
                             f"to be a multiple of PP {self.pp}")
