"""Predict one published row (see :mod:`podsim.validation.rows`).

* **training throughput** (``metric``: ``hardware_tflops_per_gpu``, ``model_tflops_per_gpu``,
  ``tokens_per_s_per_gpu``, ``iteration_time_s`` / ``step_time_s``, ``mfu_pct``): the row's
  model and layout simulated with ``podsim llm`` on the row's ``system`` (a cluster preset;
  by default the preset of its GPU).  The ``framework`` column picks the software of the time:

  - ``megatron-lm-2021`` / ``deepspeed-2021`` (Narayanan et al. SC'21): fp16, gradients
    all-reduced in fp16 after the backward, unfused attention, full recomputation, every TP
    collective blocking; micro-batch 1 for pipelined rows, 4 otherwise where not given;
  - anything else (Megatron-Core, NeMo, Meta's 4D stack, torchtitan): the row's precision,
    sequence parallelism with TP, the distributed optimizer (or the row's ZeRO / FSDP),
    fused attention, Transformer Engine's TP overlap and Megatron-Core's DP overlap, the row's
    recompute (where not given: the least recomputation that fits in the GPU's memory, see
    :func:`least_recompute`), micro-batch 1 where not given; NeMo and Megatron-Bridge also
    their fused cross entropy (``cross_entropy_loss_fusion``, on in their GPT configs); a layer
    count that PP x VPP does not divide is split as Megatron-Core does with the embedding and
    the loss counted as layers.
* **memory** (Korthikanti et al. Figures 1 and 7): podsim's memory model;
* **NCCL bus bandwidth** of 8-GPU servers: ``podsim collective``;
* **measured single-GPU training steps** (``kind`` = ``training_step``): the row's Llama shape
  and configuration on one GPU (:mod:`podsim.validation.training_steps`);
* **whole runs under failures** (``kind`` = ``goodput``: interruptions, effective training
  time): :mod:`podsim.validation.goodput`, the shipped failure rates;
* **measured serving steps** (``kind`` = ``serving_step``): ``podsim infer``'s step model over
  the row's prefill, decode or mixed batch on one GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..api.collective import collective
from ..api.train import simulate_training
from ..compute.steps import step_row
from ..errors import InputError
from ..hardware.cluster import ClusterSpec, shared_fabric
from ..hardware.gpu import get_gpu
from ..llm.layout import Layout
from ..llm.memory import GIB, bytes_per_param, fits, stage_memory, stage_params, worst_stage
from ..llm.memory import memory as layout_memory
from ..llm.model import ModelConfig
from ..llm.training import default_cluster
from ..serving.llm.measured_steps import serving_step_row
from ..serving.llm.step_timer import step_timer
from ..serving.llm.steps import infer
from ..stacks.rules import apply_rules
from ..stacks.stack import load_stack
from .goodput import GOODPUT_METRICS, predict_goodput
from .row_values import row_float
from .training_steps import predict_step_s

THROUGHPUT = (
    "hardware_tflops_per_gpu",
    "model_tflops_per_gpu",
    "tokens_per_s_per_gpu",
    "iteration_time_s",
    "step_time_s",
    "mfu_pct",
)


def _int(r: dict, key: str, default: int | None = None) -> int:
    if r.get(key, "") in ("", None) and default is not None:
        return default
    f = row_float(r, key)
    if not (f.is_integer() and 0 <= f <= 2**31):
        raise InputError(
            f"row {r['row_id']}: {key} must be an integer from 0 to 2^31, got {r.get(key)!r}", "podsim validate"
        )
    return int(f)


def row_cluster(r: dict) -> str | ClusterSpec | None:
    """The cluster a row runs on: its ``system`` (a preset or cluster file; empty: the preset of
    its GPU, as ``podsim llm`` picks it), with the row's ``gpus_per_node`` where that cluster's
    servers hold another number of GPUs: then the cluster ``podsim llm --gpus-per-node`` builds
    (the preset's fabric in nodes of that many GPUs).  A count equal to the cluster's GPUs per
    node, or per tray (the 4-GPU trays of a GB200 NVL72 rack), is the cluster as it is.

    Raises:
        InputError: a GPU or cluster podsim does not know, or the row's GPUs that do not fill
            whole nodes of ``gpus_per_node`` (naming the column)."""
    system = r.get("system") or None
    if r.get("gpus_per_node", "") in ("", None):
        return system
    gpn = _int(r, "gpus_per_node")
    gpu = get_gpu(r.get("gpu") or "h100-80gb")
    spec = default_cluster(gpu, None, None, system)
    if gpn in (spec.gpus_per_node, spec.gpus_per_tray):
        return system
    custom = default_cluster(gpu, gpn, None, spec)
    if r.get("gpus"):
        try:
            shared_fabric(custom, _int(r, "gpus"))  # built now to name the column; the run reuses it
        except InputError as e:
            raise InputError(f"gpus_per_node {gpn}: {e.message}", "podsim validate") from None
    return custom


def model_of(r: dict):  # type: ignore[no-untyped-def]
    """The row's transformer."""

    h = _int(r, "hidden")
    act = r.get("activation") or "gelu"
    swiglu = act == "swiglu"
    old = r.get("framework", "").endswith("2021")
    experts = _int(r, "experts", 0)
    moe = experts > 0
    return ModelConfig(
        r.get("model") or r["row_id"],
        _int(r, "layers"),
        h,
        _int(r, "heads"),
        _int(r, "ffn_hidden", 4 * h),
        _int(r, "vocab", 51200),
        _int(r, "seq_len", 2048),
        kv_heads=_int(r, "kv_heads", 0) or None,
        head_dim=_int(r, "head_dim", 0) or None,
        activation="swiglu" if swiglu else "gelu",
        bias=not swiglu,
        learned_positions=old,
        tied_embeddings=((r["tied_embeddings"] == "yes") if r.get("tied_embeddings") else not swiglu and old),
        dropout=0.1 if old else 0.0,
        experts=experts,
        top_k=_int(r, "top_k", 0) if moe else 0,
        moe_ffn=(_int(r, "moe_ffn_hidden", 0) or None) if moe else None,
        shared_experts=_int(r, "shared_experts", 0) if moe else 0,
        dense_layers=_int(r, "dense_layers", 0) if moe else 0,
    )


def layout_of(r: dict, model):  # type: ignore[no-untyped-def]
    """The row's layout under its framework's defaults (see the module docstring)."""

    gpus, tp, pp = _int(r, "gpus"), _int(r, "tp", 1), _int(r, "pp", 1)
    cp, ep, vpp = _int(r, "cp", 1), _int(r, "ep", 1), _int(r, "vpp", 1)
    seq = _int(r, "seq_len", model.seq_len)
    if r.get("framework", "").endswith("2021"):
        mb = _int(r, "micro_batch", 4 if pp == 1 else 1)
        return Layout(
            gpus,
            tp=tp,
            pp=pp,
            global_batch=_int(r, "global_batch"),
            micro_batch=mb,
            seq_len=seq,
            recompute="full",
            precision="fp16",
            overlap_grad_reduce=False,
            zero=3 if r.get("sharding") == "zero3" else 0,
            flash_attention=False,
            grad_reduce_bytes=2,
            tp_overlap="none",
        )
    stacked = bool(r.get("stack"))  # the stack's rules fill in what the row leaves open
    software = load_stack(r["stack"], "training") if stacked else None
    sharding = r.get("sharding") or ("" if stacked else "distopt")
    if software is not None and sharding == "fsdp" and software.get("data_parallel") == "fsdp":
        sharding = ""  # the stack's own FSDP: its rules say what podsim runs (fsdp_reshard_after_forward)
    zero = {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}.get(sharding, 0)
    rec = r.get("recompute") or "none"
    rec = rec if rec in ("none", "selective", "full") else "selective"
    sp = r.get("sequence_parallel", "")
    kw: dict = {}
    if model.layers % (pp * vpp):
        if (model.layers + 2) % (pp * vpp) == 0:
            kw = {"account_for_embedding": True, "account_for_loss": True}
        elif (model.layers + 1) % (pp * vpp) == 0:
            kw = {"account_for_loss": True}
        else:
            kw = {"pipeline_layers": balanced_split(model.layers, pp * vpp)}
    prec = r.get("precision") or "bf16"
    lay = Layout(
        gpus,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        etp=_int(r, "etp", 0) or None,
        vpp=vpp,
        global_batch=_int(r, "global_batch"),
        micro_batch=_int(r, "micro_batch", 1),
        seq_len=seq,
        sequence_parallel=(sp == "yes") if sp in ("yes", "no") else (tp > 1 and not stacked),
        recompute=rec,
        precision=precision_of(prec),
        distributed_optimizer=zero == 0 and sharding not in ("none", ""),
        zero=zero,
        schedule="interleaved" if vpp > 1 else "1f1b",
        loss_fusion=nemo_stack(r),
        **kw,
    )
    if r.get("tp_overlap"):  # the TP overlap the run names (else podsim llm's, or its stack's rule)
        lay = replace(lay, tp_overlap=r["tp_overlap"])
    if not r.get("recompute"):  # chosen on the layout the stack's rules make (its sharding decides the memory)
        ruled = apply_rules(lay, model, software)[0] if software is not None else lay
        fit = least_recompute(model, ruled, r.get("gpu") or "h100-80gb")
        lay = replace(
            lay, recompute=fit.recompute, recompute_modules=fit.recompute_modules, recompute_layers=fit.recompute_layers
        )
    return lay


#: NeMo's frameworks: their published model TFLOP/s count the causal attention scores at
#: half, and their GPT configs fuse the cross entropy
CAUSAL_COUNT = ("nemo", "megatron-bridge", "nemo-automodel", "automodel")


def nemo_stack(r: dict) -> bool:
    """The row ran on NeMo or Megatron-Bridge (their GPT configs fuse the cross entropy)."""
    fw = (r.get("framework") or "").lower()
    return any(fw.startswith(f) for f in CAUSAL_COUNT)


def counts_causal(r: dict) -> bool:
    """The row's source counts model FLOPs with causal attention halved, not full ``s x s``:
    its ``flops_count`` column (``causal`` | ``full``) where given, else by framework -- NeMo's
    ``flops_formulas`` halve it (Megatron-Bridge, NeMo 2 of 2025), Megatron-LM, Korthikanti et
    al. and Meta do not (nor did NeMo 24.07's tables: give ``full`` for those)."""
    count = (r.get("flops_count") or "").lower()
    if count in ("causal", "full"):
        return count == "causal"
    return nemo_stack(r)


def balanced_split(layers: int, stages: int) -> tuple[int, ...]:
    """Layers per virtual stage when no rule of Megatron's divides them evenly: the embedding
    and the loss each counted as one layer (Megatron-Core's pipeline layouts do so), the
    remainder given to the middle stages, e.g. DeepSeek-V3's 61 layers over 4 stages:
    15, 16, 16, 14."""
    total = layers + 2
    base, extra = divmod(total, stages)
    counts = [base] * stages
    lo = (stages - extra) // 2
    for i in range(lo, lo + extra):
        counts[i] += 1
    counts[0] -= 1
    counts[-1] -= 1
    if min(counts) < 0:
        raise InputError(f"{layers} layers cannot fill {stages} pipeline stages")
    return tuple(counts)


def precision_of(label: str) -> str:
    """podsim's --precision for a published label: FP8 with per-tensor scaling (delayed,
    current: ``fp8``, ``fp8-cs``, ``fp8-ds``) is fp8; with a scale per row (torchao's rowwise:
    ``fp8-rowwise``) fp8-rowwise; MXFP8 (``mxfp8``, NVIDIA's ``fp8-mx``)
    mxfp8; NVFP4 / FP4 nvfp4."""
    p = label.strip().lower()
    if p in ("fp8-rowwise", "fp8_rowwise", "fp8rw", "float8 rowwise"):
        return "fp8-rowwise"
    if p.startswith("mxfp8") or p in ("fp8-mx", "fp8_mx", "fp8mx"):
        return "mxfp8"
    if p in ("nvfp4", "fp4", "mxfp4"):
        return "nvfp4"
    return "fp8" if p.startswith("fp8") else p


def least_recompute(model, lay, gpu: str):  # type: ignore[no-untyped-def]
    """A row that does not say how activations were recomputed ran with the least
    recomputation that fits in the GPU's memory (what a practitioner does), tried from the
    cheapest: none; selective recompute of the attention core, then also the norms, the MLP
    activation, the whole MLP; then full recompute of 1, 2, ... layers per virtual stage; all."""

    cap = get_gpu(gpu).memory_gib
    per_stage = max(len(lay.chunk_layers(model, st, c)) for st in range(lay.pp) for c in range(lay.vpp))
    trials = (
        [{"recompute": "none"}]
        + [
            {"recompute": "selective", "recompute_modules": mods}
            for mods in (
                ("core_attn",),
                ("core_attn", "layernorm"),
                ("core_attn", "layernorm", "act"),
                ("core_attn", "layernorm", "mlp"),
            )
        ]
        + [{"recompute": "full", "recompute_layers": n} for n in range(1, per_stage)]
        + [{"recompute": "full"}]
    )
    for kw in trials:
        trial = replace(lay, **kw)
        if fits(worst_stage(layout_memory(model, trial)), cap):  # podsim llm's test
            return trial
    return replace(lay, recompute="full")


def throughput(r: dict, backend: str = "analytical", compute=None, stack=None, software=None):  # type: ignore[no-untyped-def]
    """The row's metric, predicted (``stack``: the step parameters to use, default the GPU's;
    ``software``: the software stack, default the row's ``stack`` column, if any)."""

    model = model_of(r)
    lay = layout_of(r, model)
    gpu = r.get("gpu") or "h100-80gb"
    system = row_cluster(r)
    if software is None and r.get("stack"):
        software = load_stack(r["stack"], "training")
    res = simulate_training(
        model,
        lay,
        gpu,
        system,
        backend,
        record_timeline=False,
        compute=compute,
        stack=stack,
        software=software,
        allow_oom=True,
    )
    metric = r["metric"]
    if metric == "hardware_tflops_per_gpu":
        return res.hardware_tflops_per_gpu
    if metric == "model_tflops_per_gpu":
        return res.model_tflops_per_gpu_causal if counts_causal(r) else res.model_tflops_per_gpu
    if metric == "tokens_per_s_per_gpu":
        return lay.global_batch * lay.seq_len / res.iteration_time_s / lay.gpus
    if metric in ("iteration_time_s", "step_time_s"):
        return res.iteration_time_s
    return 100 * res.mfu


def memory(r: dict) -> float:
    """Korthikanti et al.'s memory figures from podsim's memory model."""

    h = _int(r, "hidden")
    m = ModelConfig(
        r.get("model") or r["row_id"],
        _int(r, "layers"),
        h,
        _int(r, "heads"),
        4 * h,
        _int(r, "vocab", 51200),
        _int(r, "seq_len", 2048),
    )
    if r["metric"] == "activation_memory_pct_of_baseline":
        p = _int(r, "pp")
        base = Layout(8 * p, tp=_int(r, "tp"), pp=p, global_batch=p, seq_len=_int(r, "seq_len"), flash_attention=False)
        variants = {
            "none": {},
            "seq": {"sequence_parallel": True},
            "sel": {"recompute": "selective"},
            "seqsel": {"sequence_parallel": True, "recompute": "selective"},
            "full": {"recompute": "full"},
        }
        variant = variants.get(r.get("recompute", ""))
        if variant is None:
            raise InputError(
                f"row {r['row_id']}: recompute must be one of {', '.join(variants)}, got {r.get('recompute')!r}",
                "podsim validate",
            )
        return (
            100
            * stage_memory(m, replace(base, **variant), 0).activations_layers
            / stage_memory(m, base, 0).activations_layers
        )
    lay = Layout(
        _int(r, "gpus"),
        tp=_int(r, "tp"),
        pp=_int(r, "pp"),
        vpp=_int(r, "vpp", 1),
        global_batch=_int(r, "global_batch"),
        micro_batch=_int(r, "micro_batch", 1),
        seq_len=_int(r, "seq_len"),
        sequence_parallel=r.get("sequence_parallel") == "yes",
        recompute="selective" if r.get("recompute") == "selective" else "none",
        flash_attention=False,
    )
    if r["metric"] == "params_grads_optimizer_GiB":
        return sum(bytes_per_param(lay)) * stage_params(m, lay, 0, matrices_only=True) / GIB
    return stage_memory(m, lay, 0).activations_layers / GIB


def busbw(r: dict) -> float:
    """An 8-GPU all-reduce's bus bandwidth at 4 GiB (GB/s)."""

    algo = "ring" if "algorithm: ring" in r.get("notes", "") else None
    if not r.get("system"):
        raise InputError(f"row {r['row_id']}: system is needed", "podsim validate")
    t = collective("all_reduce", row_cluster(r), _int(r, "gpus"), min_bytes="4G", max_bytes="4G", algorithm=algo)
    return t.rows[0].busbw_gbps


INFERENCE = ("prefill_s", "ttft_s", "decode_step_s", "tpot_s", "e2e_s")
#: the metrics a user's row may compare (the memory rows are Korthikanti et al.'s figures only)
METRICS = THROUGHPUT + INFERENCE + ("allreduce_busbw_GBps",) + GOODPUT_METRICS


def inference(r: dict) -> float:
    """An LLM inference row (``podsim infer``): one prefill over ``batch`` prompts of
    ``prompt_tokens`` and ``output_tokens - 1`` decode steps; the row's metric in s."""

    model = model_of(r)
    timer = step_timer(
        model,
        r.get("gpu") or "h100-80gb",
        _int(r, "tp", 1),
        _int(r, "pp", 1),
        1,
        r.get("precision") or "bf16",
        row_cluster(r),
        kv_cache_dtype=r.get("kv_cache_dtype") or None,
    )
    res = infer(timer, _int(r, "batch"), _int(r, "prompt_tokens"), _int(r, "output_tokens"))
    return {
        "prefill_s": res.prefill_s,
        "ttft_s": res.prefill_s,
        "decode_step_s": res.decode_step_mean_s,
        "tpot_s": res.decode_step_mean_s,
        "e2e_s": res.e2e_s,
    }[r["metric"]]


def training_step(r: dict) -> float:
    """A measured single-GPU training step (``benchmarks/gpu/training_steps.py``), in s."""

    return predict_step_s(step_row(r, r.get("source_loc") or "training steps"))


def serving_step(r: dict) -> float:
    """A measured serving step on one GPU (``benchmarks/gpu/inference_steps.py``), in s: the
    row's Llama shape, ``podsim infer``'s step model over its chunks, no host overhead (what
    the measurement says of the host is ``--host-overhead-ms eager|cuda-graphs``)."""

    row = serving_step_row({**r, "kind": r.get("step_kind", "")}, r.get("source_loc") or "serving steps")
    if not row.gpu:
        raise InputError(
            f"row {row.row_id} was measured on {r.get('device_name') or 'a device'!r}, not a GPU podsim "
            "knows (gpu column empty; a CPU run checks the tool, it measures no GPU)",
            row.source,
        )
    model = ModelConfig(
        row.model or row.row_id,
        row.layers,
        row.hidden,
        row.heads,
        row.ffn_hidden,
        row.vocab,
        max(row.prompt_tokens, row.context + 1),
        kv_heads=row.kv_heads,
        activation="swiglu",
        bias=False,
        learned_positions=False,
        tied_embeddings=False,
        dropout=0.0,
    )
    timer = step_timer(
        model,
        row.gpu,
        max_batched_tokens=max(8192, sum(n for n, _ in row.chunks)),
        max_num_seqs=max(256, len(row.chunks)),
    )
    return timer.stage_ns(row.chunks) / 1e9


def goodput_run(r: dict) -> float:
    """A whole run under failures (``kind`` = ``goodput``): :mod:`podsim.validation.goodput` on
    the row's model and layout."""
    model = model_of(r)
    return predict_goodput(r, model, layout_of(r, model))


def handler(r: dict) -> Callable[..., float] | None:
    """What predicts row ``r`` (None: a row podsim cannot run)."""
    if r.get("kind") == "training_step":
        return training_step
    if r.get("kind") == "serving_step":
        return serving_step
    if r.get("kind") == "goodput" and r["metric"] in GOODPUT_METRICS:
        return goodput_run
    if r["metric"] in INFERENCE and r.get("batch") and r.get("hidden"):
        return inference
    if r["metric"] in THROUGHPUT and r.get("hidden") and r.get("gpus"):
        return throughput
    if r["row_id"].startswith("korthikanti_fig"):
        return memory
    if r["metric"] == "allreduce_busbw_GBps" and r.get("system"):
        return busbw
    return None
