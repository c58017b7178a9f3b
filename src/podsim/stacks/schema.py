"""The named properties a software stack file may set, each declared once: its section
(``training`` or ``serving``), kind, unit, allowed range and meaning.

A stack file (``stacks/presets/<name>.yaml`` or a user's own) sets some of them; the rest keep
the values of its ``base`` stack, and at the root ``megatron-core``'s, which are podsim's
per-GPU step parameters (``llm/stack.yaml``).  Two kinds of property:

* **framework rules** (``attention``, ``loss_fusion``, ``tp_overlap``, ...): what the framework
  does by default; a layout flag the user gives wins over them (``stacks/rules.py``);
* **physical parameters** (``host_ns``, ``gemm_efficiency``, ...): how the stack's kernels and
  host code cost time; efficiencies are relative to Megatron-Core / Transformer Engine's on the
  same GPU (1 = as fast), so one stack file holds on every GPU.  ``gemm_efficiency`` and
  ``attention_efficiency`` may instead map GPU architectures to values
  (``{default: 0.73, ampere: 1.0}``): what a stack lacks on Hopper (FlashAttention 3, Transformer
  Engine's Hopper kernels) it does not lack on Ampere, where podsim's baseline is itself a PyTorch
  step (``llm/stack.yaml``); ``attention_efficiency`` may also be a table by sequence length
  (``{512: 0.67, 8192: 0.56}``: FlashAttention 2 falls further behind FlashAttention 3 on longer
  sequences).

A serving stack (``vllm``, ``sglang``, ...) has physical parameters only: the host time per
engine step the GPU waits for (``host_overhead_ms``) and its GEMMs' efficiency relative to
podsim's fit of the GPU (``engine_gemm_efficiency``).

``podsim stack show NAME`` prints a stack with these meanings; ``podsim calibrate training`` and
``podsim calibrate inference`` fit the physical parameters a stack lists under ``free``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a stack file's top-level keys besides the two sections
TOP_KEYS = ("name", "title", "kind", "base", "description", "sources", "free", "training", "serving")
#: what a stack describes: the software of a training job or of a serving engine
KINDS = ("training", "serving")


@dataclass(frozen=True)
class Prop:
    """One property of a stack.

    Attributes:
        name: its key in the stack file.
        section: ``training`` or ``serving``.
        kind: ``number`` (a float in ``[lo, hi]``), ``choice`` (one of ``choices``), ``bool``,
            or ``number|word`` (a number in range or one of ``choices``).
        unit: the unit of a number (``ns``, ``ms``, ``us``, ``x`` for a ratio).
        lo, hi: the range of a number (inclusive).
        choices: the words a ``choice`` or ``number|word`` takes.
        rule: a framework rule that sets a layout default (else a physical parameter).
        help: what it means.
        by_architecture: a number that may also be given per GPU architecture, as a mapping
            ``{default: x, ampere: y, ...}`` (:data:`ARCH_DEFAULT` for the architectures not listed).
        by_seq: a number that may also be a table by the kernel's sequence length (tokens):
            ``{512: 0.67, 2048: 0.58, 8192: 0.56}``, interpolated in log(length), the end values
            held beyond the ends (also as an architecture's entry).
    """

    name: str
    section: str
    kind: str
    help: str
    unit: str = ""
    lo: float = 0.0
    hi: float = float("inf")
    choices: tuple[str, ...] = ()
    rule: bool = False
    by_architecture: bool = False
    by_seq: bool = False


#: the key of a per-architecture mapping that holds the value of the architectures it does not list
ARCH_DEFAULT = "default"


PROPS: tuple[Prop, ...] = (
    # -- training: framework rules -------------------------------------------------------------
    Prop(
        "attention",
        "training",
        "choice",
        "the attention kernel: fused (FlashAttention 2/3, cuDNN, FlexAttention) or unfused "
        "(scores materialised: Megatron-LM of 2021, eager PyTorch without SDPA)",
        choices=("fused", "unfused"),
        rule=True,
    ),
    Prop("loss_fusion", "training", "bool", "a fused cross-entropy kernel (no fp32 logits round trips)", rule=True),
    Prop(
        "tp_overlap",
        "training",
        "choice",
        "TP communication overlap: te (Transformer Engine's userbuffers), async (backward only), none",
        choices=("te", "async", "none"),
        rule=True,
    ),
    Prop(
        "overlap_grad_reduce", "training", "bool", "gradients reduced under the backward, bucket by bucket", rule=True
    ),
    Prop(
        "overlap_param_gather",
        "training",
        "bool",
        "sharded parameters gathered under the previous compute (prefetch) instead of after the optimizer",
        rule=True,
    ),
    Prop(
        "grad_reduce_dtype",
        "training",
        "choice",
        "the element type gradients are reduced in",
        choices=("fp32", "bf16", "fp16"),
        rule=True,
    ),
    Prop(
        "sequence_parallel",
        "training",
        "bool",
        "with TP, the norms' and dropouts' activations sharded along the sequence (Megatron's "
        "--sequence-parallel; torchtitan's TP plan always does)",
        rule=True,
    ),
    Prop(
        "data_parallel",
        "training",
        "choice",
        "what data parallelism does when no sharding flag is given: ddp (replicated), distopt "
        "(optimizer state sharded, Megatron's distributed optimizer), fsdp (parameters, gradients "
        "and optimizer state sharded: FSDP / FSDP2 / ZeRO-3)",
        choices=("ddp", "distopt", "fsdp"),
        rule=True,
    ),
    Prop(
        "fsdp_reshard_after_forward",
        "training",
        "choice",
        "with data_parallel fsdp, whether a layer's gathered weights are freed after its forward: always "
        "(ZeRO-3: gathered again in every micro-batch's forward and backward, gradients reduce-scattered "
        "every micro-batch) or default (torchtitan's: always without PP; under PP the weights stay "
        "gathered through the step's micro-batches and the gradients are reduce-scattered once, after "
        "the last: the bytes and states of Megatron's distributed optimizer)",
        choices=("default", "always"),
        rule=True,
    ),
    Prop(
        "pipeline_split",
        "training",
        "choice",
        "layers that PP x VPP does not divide: megatron (an explicit split is needed: "
        "--first/--last-stage-layers, --account-for-*-in-pipeline-split or --pipeline-layers) or "
        "even (torchtitan's: layers // stages each, the remainder one each to the stages after the first)",
        choices=("megatron", "even"),
        rule=True,
    ),
    Prop(
        "micro_batch",
        "training",
        "choice",
        "what one step of a data-parallel rank takes when --micro-batch is not given and PP is 1: one "
        "(Megatron's --micro-batch-size 1, the rest of the rank's share by gradient accumulation) or "
        "local (torchtitan's and FSDP's local batch: the rank's whole share of --global-batch at once)",
        choices=("one", "local"),
        rule=True,
    ),
    # -- training: physical parameters ---------------------------------------------------------
    Prop(
        "host_ns",
        "training",
        "number",
        "CPU time to issue one listed kernel (dispatch and framework Python around it); a layer pass "
        "lasts at least its kernels x host_ns",
        unit="ns",
        lo=0.0,
        hi=5e6,
    ),
    Prop(
        "gemm_efficiency",
        "training",
        "number",
        "GEMM throughput relative to Transformer Engine's in a Megatron-Core step on the same GPU",
        unit="x",
        lo=0.2,
        hi=1.5,
        by_architecture=True,
    ),
    Prop(
        "attention_efficiency",
        "training",
        "number",
        "fused-attention throughput relative to Megatron-Core's (cuDNN / FlashAttention 3 on Hopper) on the same GPU",
        unit="x",
        lo=0.2,
        hi=1.5,
        by_architecture=True,
        by_seq=True,
    ),
    Prop(
        "elementwise_traffic",
        "training",
        "number",
        "time of the memory-bound kernels (norms, RoPE, activation, residuals, dropout, loss) relative "
        "to Transformer Engine's fused ones: above 1 where eager PyTorch runs each as several kernels",
        unit="x",
        lo=0.5,
        hi=10.0,
    ),
    Prop(
        "fp8_overhead",
        "training",
        "number",
        "time of the fp8 casts, transposes and amax reductions relative to Transformer Engine's fused "
        "cast-transpose kernels",
        unit="x",
        lo=0.5,
        hi=10.0,
    ),
    Prop(
        "fp8_rowwise_overhead",
        "training",
        "number",
        "time of a rowwise-scaled fp8 recipe's casts and transposes (--precision fp8-rowwise: each GEMM "
        "operand cast along both dimensions) relative to the memory roofline of the bytes they move",
        unit="x",
        lo=0.5,
        hi=10.0,
    ),
    # -- serving -------------------------------------------------------------------------------
    Prop(
        "host_overhead_ms",
        "serving",
        "number|word",
        "CPU time per engine step the GPU waits for (scheduling, input preparation, sampling), or "
        "eager / cuda-graphs: the host time measured on the GPU for such an engine",
        unit="ms",
        lo=0.0,
        hi=1000.0,
        choices=("eager", "cuda-graphs"),
    ),
    Prop(
        "engine_gemm_efficiency",
        "serving",
        "number",
        "the engine's GEMM throughput where a GEMM is FLOP-bound (prefill, large batches) relative to "
        "podsim's fit of the GPU (1 = as fast; decode GEMMs bound by reading the weights do not change); "
        "not applied with --profile, whose measured tables are the engine's own kernels",
        unit="x",
        lo=0.2,
        hi=1.2,
    ),
)

#: every property by its key
BY_NAME: dict[str, Prop] = {p.name: p for p in PROPS}


def section_props(section: str) -> tuple[Prop, ...]:
    """The properties of ``section`` (``training`` or ``serving``), in declaration order."""
    return tuple(p for p in PROPS if p.section == section)


def fittable(section: str) -> tuple[Prop, ...]:
    """The physical parameters of ``section`` that ``podsim calibrate`` may fit: the numbers (a
    ``number|word`` property is fitted as a number)."""
    return tuple(p for p in section_props(section) if p.kind in ("number", "number|word"))
