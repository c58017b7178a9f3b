"""The step timer of one LLM serving replica: podsim's compute model on the replica's GPUs and
fabric (:class:`~.steps.LLMStepTimer`), or, given a folder of Vidur-layout tables, their
measured times (:class:`~.vidur_tables.TableStepTimer`).  Every ``podsim infer``,
``serve-llm`` and serving search builds its timer here."""

from __future__ import annotations

from dataclasses import replace

from ...collectives.nccl.planner import CollectivePlanner, FabricDelay
from ...compute.model import ComputeModel
from ...errors import InputError
from ...hardware.cluster import ClusterSpec, build_fabric
from ...hardware.gpu import GpuSpec, check_precision, get_gpu
from ...llm.model import ModelConfig
from ...llm.training import default_cluster
from .measured_steps import host_overhead
from .steps import MEMORY_UTILIZATION, PRECISIONS, LLMStepTimer
from .vidur_tables import table_step_timer


def step_timer(
    model: ModelConfig,
    gpu: str | GpuSpec,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    precision: str = "bf16",
    cluster: str | ClusterSpec | None = None,
    host_overhead_ms: float | str = 0.0,
    max_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    kv_cache_dtype: str | None = None,
    memory_utilization: float = MEMORY_UTILIZATION,
    profile: str | None = None,
    engine_gemm_efficiency: float = 1.0,
) -> LLMStepTimer:
    """The step timer of one replica of ``model`` on TP x PP GPUs of ``gpu`` (``cluster``:
    default the GPU's preset, as ``podsim llm`` picks it).  ``profile``: a folder of measured
    tables in Vidur's layout, whose times replace the compute model's GEMMs, attention,
    element-wise kernels and collectives (:class:`~.vidur_tables.TableStepTimer`).
    ``host_overhead_ms``: the host time of every step (ms), or ``eager`` / ``cuda-graphs``: the
    host time measured on the GPU for such an engine, by the step's sequences
    (:func:`~.measured_steps.host_overhead`).  ``engine_gemm_efficiency``: the serving engine's
    FLOP-bound GEMM peak relative to podsim's fit of the GPU (a serving stack's property; not
    applied to a ``profile``'s measured tables, which are the engine's own kernels).

    Raises:
        InputError: for a layout the model cannot take (TP not dividing the heads, PP more than
            the layers, EP not dividing the experts), an unknown precision, a replica larger
            than the cluster, or tables that cannot be read (``profile``).
    """
    spec_gpu = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
    if precision not in PRECISIONS:
        raise InputError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}", where="--precision")
    check_precision(precision, spec_gpu)
    for name, v in (("--tp", tp), ("--pp", pp), ("--ep", ep)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, got {v}", where=name)
    if model.heads % tp:
        raise InputError(f"TP {tp} does not divide the {model.heads} attention heads of {model.name}", where="--tp")
    if pp > model.layers:
        raise InputError(f"PP {pp} is more than the {model.layers} layers of {model.name}", where="--pp")
    if ep > 1 and (not model.moe or model.experts % ep):
        raise InputError(
            f"EP {ep} needs a mixture-of-experts model whose experts it divides; {model.name} has "
            f"{model.experts} experts",
            where="--ep",
        )
    if tp % ep:
        raise InputError(
            f"EP {ep} must divide TP {tp}: the routed experts are spread over the replica's TP "
            "GPUs (vLLM's expert parallelism with one data-parallel rank)",
            where="--ep",
        )
    if not 0 < memory_utilization <= 1:
        raise InputError(
            f"the memory share must be in (0, 1], got {memory_utilization:g}", where="--memory-utilization"
        )
    spec = default_cluster(spec_gpu, None, None, cluster)
    fabric = build_fabric(spec, tp * pp)
    planner = CollectivePlanner(fabric, spec.nccl)
    dtype = "fp8" if precision == "fp8" else precision
    cm = ComputeModel.for_gpu(spec_gpu, dtype)
    if engine_gemm_efficiency != 1.0 and profile is None:
        eff = engine_gemm_efficiency
        fp8 = None if cm.fp8_gemm_max is None else cm.fp8_gemm_max * eff
        cm = replace(cm, gemm_max=cm.gemm_max * eff, fp8_gemm_max=fp8)
    kv_bytes = {"fp8": 1.0, None: 2.0, "bf16": 2.0, "fp16": 2.0}.get(kv_cache_dtype)
    if kv_bytes is None:
        raise InputError(
            f"--kv-cache-dtype must be bf16, fp16 or fp8, got {kv_cache_dtype!r}", where="--kv-cache-dtype"
        )
    table = host_overhead(spec_gpu.key, host_overhead_ms) if isinstance(host_overhead_ms, str) else None
    timer = LLMStepTimer(
        model,
        spec_gpu,
        tp,
        pp,
        ep,
        precision,
        cm,
        planner,
        FabricDelay(fabric, planner.timer),
        0 if table is not None else int(round(host_overhead_ms * 1e6)),
        max_batched_tokens,
        max_num_seqs,
        memory_utilization,
        kv_bytes,
        table,
    )
    if profile is None:
        return timer
    return table_step_timer(timer, profile, spec.gpus_per_node)
