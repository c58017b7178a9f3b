"""LLM serving on replicas (``podsim serve-llm``, the sweep's ``run: serve-llm``): the model,
the hardware, one replica (its parallel layout, numerics and engine overheads), the engine
that batches requests on the replicas (scheduler, router, KV cache, disaggregation,
speculative decoding), the requests, the SLOs and what the command line writes."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import JobSpec, Param, nested, param, params_of
from ..serving.llm.router import DEFAULT_ROUTER, ROUTERS
from ..serving.llm.router import describe as describe_routers
from ..serving.llm.schedulers import DEFAULT_SCHEDULER, SCHEDULERS
from ..serving.llm.schedulers import describe as describe_schedulers
from .hardware import Hardware
from .model import ModelChoice
from .replica import ReplicaOptions
from .software import ServingSoftware


@dataclass(frozen=True)
class EngineOptions:
    """How the serving engine batches requests on the replicas."""

    replicas: int | None = param(Param("replicas", "count", metavar="R", help="model replicas (default 1)"))
    scheduler: str = param(
        Param(
            "scheduler", "name", DEFAULT_SCHEDULER, SCHEDULERS.spellings(), metavar="NAME", help=describe_schedulers()
        )
    )
    max_num_seqs: int | None = param(
        Param(
            "max-num-seqs",
            "count",
            metavar="N",
            help="most requests running on a replica (vllm default: see below; others 256)",
        )
    )
    max_batched_tokens: int | None = param(
        Param(
            "max-batched-tokens",
            "count",
            metavar="N",
            help="token budget of a step (vllm default: see below; orca, static, lightllm: none)",
        )
    )
    chunk_size: int | None = param(
        Param("chunk-size", "count", metavar="N", help="sarathi's token budget of a step (default 512)")
    )
    router: str = param(
        Param("router", "name", DEFAULT_ROUTER, ROUTERS.spellings(), metavar="NAME", help=describe_routers())
    )
    pd: str | None = param(
        Param(
            "pd",
            "name",
            metavar="P:D",
            help="prefill/decode disaggregation: P prefill and D decode replicas (instead of --replicas), or off",
        )
    )
    pd_backend: str = param(
        Param(
            "pd-backend",
            "choice",
            "flow",
            ("flow", "analytical", "link"),
            help="P/D KV transfers on the cluster's fabric: flow (they share links, default) "
            "or analytical (no contention); link: a fixed link of --pd-bandwidth and "
            "--pd-latency",
        )
    )
    pd_bandwidth: float = param(
        Param(
            "pd-bandwidth",
            "number",
            50.0,
            metavar="GB/s",
            unit="GB/s",
            help="--pd-backend link: each GPU's bandwidth (10^9 B/s, default 50)",
        )
    )
    pd_latency: float = param(
        Param(
            "pd-latency",
            "nonneg",
            10.0,
            metavar="US",
            unit="us",
            help="--pd-backend link: latency in microseconds (default 10)",
        )
    )
    prefix_hit_rate: float = param(
        Param(
            "prefix-hit-rate",
            "nonneg",
            0.0,
            metavar="H",
            help="share of each prompt found in the prefix cache (0 to below 1; "
            "default 0: the trace's prefix_id column, if any)",
        )
    )
    spec_decode: str | None = param(
        Param(
            "spec-decode",
            "name",
            metavar="K:A",
            help="speculative decoding: draft length K, acceptance rate A (e.g. 4:0.7)",
        )
    )
    preemption: str = param(
        Param(
            "preemption",
            "choice",
            "recompute",
            ("recompute", "swap"),
            help="how a request gives up its KV blocks when the cache is full: recompute "
            "(vLLM V1; default) or swap (to host memory and back, vLLM V0's swap mode)",
        )
    )
    swap_space: float = param(
        Param(
            "swap-space",
            "nonneg",
            4.0,
            metavar="GIB",
            unit="GiB",
            help="--preemption swap: host memory for swapped blocks, GiB per GPU (vLLM's default 4)",
        )
    )
    swap_bandwidth: float = param(
        Param(
            "swap-bandwidth",
            "number",
            25.0,
            metavar="GB/s",
            unit="GB/s",
            help="--preemption swap: GPU-host copies, GB/s per GPU (default 25, PCIe 4.0 x16; ~50 on PCIe 5.0)",
        )
    )
    kv_blocks: int | None = param(
        Param(
            "kv-blocks",
            "count",
            metavar="N",
            help="KV blocks per replica (default: what GPU memory holds after weights and activations)",
        )
    )
    block_size: int = param(Param("block-size", "count", 16, metavar="TOKENS", help="KV block size (default 16)"))
    max_context: int | None = param(
        Param(
            "max-context",
            "count",
            metavar="TOKENS",
            help="the model's context: longer prompt + output is refused (default: the model's)",
        )
    )
    draft_model: str | None = param(
        Param(
            "draft-model",
            "name",
            metavar="NAME|FILE",
            help="--spec-decode: the draft model (a zoo name or a HuggingFace config.json), run on the replica's GPUs "
            "at its TP: its passes add to each step and its weights and KV cache take memory (default: drafts "
            "cost nothing)",
        )
    )


@dataclass(frozen=True)
class RequestsSpec:
    """The requests served."""

    workload: str | None = param(
        Param(
            "workload",
            "name",
            metavar="TRACE.csv|poisson:QPS[,...]",
            help="a request trace CSV or a generator (see below; required)",
        )
    )
    requests: int | None = param(
        Param(
            "requests",
            "count",
            metavar="N",
            help="the first N requests of a trace (default all), or N generated ones (default 1000)",
        )
    )


@dataclass(frozen=True)
class ServiceLevel:
    """The latency targets, the capacity search against them, and the price of a GPU-hour."""

    slo_ttft: float | None = param(
        Param("slo-ttft", "number", metavar="S", unit="s", help="time-to-first-token SLO (s)")
    )
    slo_tpot: float | None = param(
        Param("slo-tpot", "number", metavar="S", unit="s", help="time-per-output-token SLO (s)")
    )
    find_capacity: bool = param(
        Param(
            "find-capacity",
            "bool",
            False,
            help="binary-search the highest request rate meeting the SLOs (the workload's "
            "requests re-timed as Poisson arrivals, a generator's own process)",
        )
    )
    capacity_target: float = param(
        Param(
            "capacity-target",
            "number",
            0.99,
            metavar="SHARE",
            help="--find-capacity: the share of requests that must meet the SLOs (default 0.99)",
        )
    )
    gpu_hour_price: float | None = param(
        Param(
            "gpu-hour-price",
            "number",
            metavar="USD",
            unit="USD",
            help="the price of one GPU-hour in US dollars: the summary and JSON then say the cost per million output "
            "tokens (a sweep falls back to podsim's price for the GPU)",
        )
    )


@dataclass(frozen=True)
class ServeLLMOutputs:
    """What ``podsim serve-llm`` writes (not sweep parameters)."""

    json: str | None = param(
        Param("json", "path", metavar="OUT", sweep=False, help="write the result as JSON (fields: docs/serving-llm.md)")
    )
    trace: str | None = param(
        Param(
            "trace",
            "path",
            metavar="OUT",
            sweep=False,
            aliases=("chrome-trace",),
            help="write a Perfetto/Chrome trace JSON: a track per replica, a slice per step",
        )
    )
    plot: str | None = param(
        Param(
            "plot",
            "path",
            metavar="OUT.png",
            sweep=False,
            help="draw latency CDFs and KV use as a PNG (needs matplotlib)",
        )
    )


@dataclass(frozen=True)
class ServeLLMJob(JobSpec):
    """Everything one ``podsim serve-llm`` run depends on."""

    model: ModelChoice = nested(ModelChoice)
    hardware: Hardware = nested(Hardware)
    replica: ReplicaOptions = nested(ReplicaOptions)
    software: ServingSoftware = nested(ServingSoftware)
    engine: EngineOptions = nested(EngineOptions)
    requests: RequestsSpec = nested(RequestsSpec)
    service: ServiceLevel = nested(ServiceLevel)
    outputs: ServeLLMOutputs = nested(ServeLLMOutputs)


#: every parameter of ``podsim serve-llm``, in --help order
SERVE_LLM_PARAMS: tuple[Param, ...] = params_of(ServeLLMJob)
