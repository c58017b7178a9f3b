"""A deployment of LLM serving: a model on replicas of TP x PP GPUs, served under a scheduler
and a router, at a workload's rate or at the highest rate meeting the SLOs.

This is what ``podsim serve-llm``, the ``serve-llm`` runs of ``podsim sweep`` and the serving
search of ``podsim search`` share: :func:`prepare` turns the settings into a :class:`Serving`
(the replica's step timer, the scheduler's limits with ``vllm serve``'s defaults filled in, the
P/D transfers), whose :meth:`Serving.run` serves a list of requests and whose
:meth:`Serving.capacity` binary-searches the rate (:mod:`.capacity`).

Cost: ``usd_per_mtok(gpus, usd_per_gpu_hour, tokens_per_s)`` = ``gpus x price / 3600 /
tokens_per_s x 10^6``, US dollars per million output tokens.  Units: s, tokens, requests/s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ...errors import InputError
from ...hardware.cluster import ClusterSpec
from ...hardware.gpu import GpuSpec, get_gpu
from ...llm.model import ModelConfig
from ...llm.training import default_cluster
from .capacity import Capacity, find_capacity
from .drafting import DraftedTimer
from .flops import serving_mfu
from .metrics import LLMServeResult
from .requests import GeneratorSpec, Request, generate, with_poisson_arrivals
from .router import make_router
from .schedulers import scheduler_class
from .simulate import ServeConfig, link_transfer, simulate
from .step_timer import step_timer
from .timing import StepTimer
from .transfer import KVTransfers

#: how P/D's KV caches move: over the cluster's fabric (flows that share links, or each alone), or
#: a fixed link per GPU
PD_BACKENDS = ("flow", "analytical", "link")


@dataclass(frozen=True)
class ReplicaSpec:
    """What one replica is: the model on TP x PP GPUs (EP of them holding the routed experts).

    Attributes:
        model: the model.
        gpu: the GPU (a key, alias or spec).
        tp, pp, ep: tensor-parallel GPUs, pipeline stages, expert-parallel degree.
        precision: weights and GEMMs: bf16, fp16 or fp8.
        kv_cache_dtype: the KV cache's element type (None: bf16).
        host_overhead_ms: CPU time per step the GPU waits for (ms), or eager / cuda-graphs (measured).
        cluster: the cluster whose fabric carries the collectives and P/D transfers (None: the
            GPU's preset).
        profile: a folder of measured tables in Vidur's layout (None: podsim's compute model).
        draft_model: speculative decoding's draft model, run on the replica's GPUs at its TP
            (:mod:`.drafting`; None: the drafts cost nothing).
        engine_gemm_efficiency: the serving engine's FLOP-bound GEMM peak relative to podsim's
            fit of the GPU (a serving stack's property; 1: podsim's fit).
    """

    model: ModelConfig
    gpu: str | GpuSpec
    tp: int = 1
    pp: int = 1
    ep: int = 1
    precision: str = "bf16"
    kv_cache_dtype: str | None = None
    host_overhead_ms: float | str = 0.0
    cluster: str | ClusterSpec | None = None
    profile: str | None = None
    draft_model: ModelConfig | None = None
    engine_gemm_efficiency: float = 1.0

    @property
    def gpus(self) -> int:
        """GPUs of one replica."""
        return self.tp * self.pp


@dataclass(frozen=True)
class PDLink:
    """How P/D transfers move: ``backend`` flow | analytical (the cluster's fabric) or link (each
    GPU on its own link of ``bandwidth_gbps`` GB/s = 10^9 B/s and ``latency_us`` us)."""

    backend: str = "flow"
    bandwidth_gbps: float = 50.0
    latency_us: float = 10.0


@dataclass
class Serving:
    """A prepared deployment (see :func:`prepare`)."""

    replica: ReplicaSpec
    config: ServeConfig
    timer: StepTimer
    pd_link: PDLink
    gpu: GpuSpec

    @property
    def gpus(self) -> int:
        """GPUs of the whole deployment (every replica's)."""
        return self.config.num_replicas * self.replica.gpus

    def describe(self) -> str:
        """``4 replicas of Llama-3-70B, each on 4 x H100 (tp 4, pp 1)``."""
        n = self.config.num_replicas
        r = self.replica
        return (
            f"{n} replica{'s' if n > 1 else ''} of {r.model.name}, each on {r.gpus} x {self.gpu.name} "
            f"(tp {r.tp}, pp {r.pp})"
        )

    def run(
        self,
        requests: Sequence[Request],
        record_steps: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> LLMServeResult:
        """Serve ``requests`` (arrival order); ``record_steps`` keeps each step for a trace."""
        cfg = self.config
        transfer_ns = transfers = None
        if cfg.pd is not None:
            link = self.pd_link
            if link.backend == "link":
                transfer_ns = link_transfer(link.bandwidth_gbps, round(link.latency_us * 1e3))
            else:
                cluster = default_cluster(self.gpu, None, None, self.replica.cluster)
                replicas, per = cfg.num_replicas, self.replica.gpus

                def transfers(clock):  # type: ignore[no-untyped-def]
                    return KVTransfers(cluster, replicas, per, clock, link.backend)

        result = simulate(
            requests,
            self.timer,
            cfg,
            transfer_ns=transfer_ns,
            transfers=transfers,
            record_steps=record_steps,
            progress=progress,
        )
        result.mfu = serving_mfu(
            self.replica.model,
            result.prompt_tokens,
            result.output_tokens,
            result.span_s,
            self.gpus,
            self.gpu.peak(self.replica.precision) / 1e3,
        )
        return result

    def capacity(
        self,
        requests: Sequence[Request],
        generator: GeneratorSpec | None = None,
        target: float = 0.99,
        run_at: Callable[[float, list[Request]], LLMServeResult] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Capacity:
        """The highest request rate whose run meets the SLOs for ``target`` of the requests: the
        generator's requests at each rate (``generator``), else ``requests`` re-timed as Poisson
        arrivals.  ``run_at(qps, requests)`` serves one probe (default :meth:`run`).  A capacity whose
        run ended before its queues filled (:func:`transient_note`) is marked an upper bound.

        Raises:
            InputError: no requests, or so few that every rate tried met the SLOs."""
        if not requests:
            raise InputError("no requests to serve", where="--workload")
        serve = run_at or (lambda q, reqs: self.run(reqs))
        start = (
            generator.qps
            if generator is not None
            else max(len(requests) / max(requests[-1].arrival_ns / 1e9, 1e-9), 0.01)
        )
        cap = find_capacity(
            lambda q: serve(q, requests_at(requests, generator, q)), target, start_qps=start, progress=progress
        )
        if cap.upper_qps is None:
            raise InputError(
                f"every rate tried, up to {cap.qps:.4g} req/s, met the SLOs: {len(requests):,} requests are too few "
                "to load the deployment (they all arrive at once and are served before a queue builds); give more "
                "requests (--requests, or a longer trace)",
                where="--find-capacity",
            )
        if cap.result is not None and transient_note(cap.result) is not None:
            cap.bound = "upper"
        return cap


def requests_at(requests: Sequence[Request], generator: GeneratorSpec | None, qps: float) -> list[Request]:
    """The workload at ``qps`` requests/s, as a capacity search runs it: the generator's own
    process at that rate (as many requests), else ``requests`` re-timed as Poisson arrivals."""
    if generator is not None:
        return generate(generator.with_qps(qps), len(requests))
    return with_poisson_arrivals(list(requests), qps)


def parse_pair(text: str | None, where: str, whole: bool = False) -> tuple[int, float] | None:
    """``A:B`` (``--pd P:D``, ``--spec-decode K:A``) as a whole number and a number (both whole
    with ``whole``); None for none, ``off`` or ``none``.

    Raises:
        InputError: naming ``where``.
    """
    if text is None or str(text).strip().lower() in ("off", "none", ""):
        return None
    a, _, b = str(text).partition(":")
    try:
        return int(a), (int(b) if whole else float(b))
    except ValueError:
        what = "two whole numbers" if whole else "two numbers"
        raise InputError(f"expected {what} as A:B, got {text!r}", where=where) from None


def prepare(replica: ReplicaSpec, config: ServeConfig, pd_link: PDLink = PDLink()) -> Serving:
    """Check the settings and build the replica's step timer.  Limits the run leaves unset take
    the scheduler's defaults for the GPU and the model's context
    (:meth:`~.schedulers._Base.default_limits`: the ``vllm`` scheduler's as ``vllm serve`` sets
    them, ``vllm-v0``'s as vLLM V0 set them); the timer sizes activations for the step's token
    budget.

    Raises:
        InputError: for an unknown scheduler, router or P/D backend, settings
            :meth:`ServeConfig.check` refuses, or a replica the model cannot take.
    """
    gpu = replica.gpu if isinstance(replica.gpu, GpuSpec) else get_gpu(replica.gpu)
    sched = scheduler_class(config.scheduler)  # unknown names fail here, before any work
    make_router(config.router)
    if pd_link.backend not in PD_BACKENDS:
        raise InputError(
            f"the P/D backend must be one of {', '.join(PD_BACKENDS)}, got {pd_link.backend!r}", where="--pd-backend"
        )
    limits = sched.default_limits(gpu, config.max_context or replica.model.seq_len)
    if limits is not None:
        d_tokens, d_seqs = limits
        config = replace(
            config, max_batched_tokens=config.max_batched_tokens or d_tokens, max_num_seqs=config.max_num_seqs or d_seqs
        )
    config.check()
    tokens, seqs = config.max_batched_tokens or config.chunk_size or 8192, config.max_num_seqs or 256
    timer: StepTimer = step_timer(
        replica.model,
        gpu,
        replica.tp,
        replica.pp,
        replica.ep,
        replica.precision,
        replica.cluster,
        replica.host_overhead_ms,
        max_batched_tokens=tokens,
        max_num_seqs=seqs,
        kv_cache_dtype=replica.kv_cache_dtype,
        profile=replica.profile,
        engine_gemm_efficiency=replica.engine_gemm_efficiency,
    )
    if replica.draft_model is not None:
        if config.spec_decode is None:
            raise InputError(
                "a draft model drafts for speculative decoding: give --spec-decode K:A as well", where="--draft-model"
            )
        try:
            draft = step_timer(
                replica.draft_model,
                gpu,
                replica.tp,
                1,
                1,
                replica.precision,
                replica.cluster,
                replica.host_overhead_ms,
                max_batched_tokens=tokens,
                max_num_seqs=seqs,
                kv_cache_dtype=replica.kv_cache_dtype,
                engine_gemm_efficiency=replica.engine_gemm_efficiency,
            )
        except InputError as e:
            raise InputError(f"the draft model: {e.message}", where="--draft-model") from None
        timer = DraftedTimer(timer, draft, config.spec_decode[0])
    _check_kv_blocks(config, timer)
    return Serving(replica, config, timer, pd_link, gpu)


def _check_kv_blocks(config: ServeConfig, timer: StepTimer) -> None:
    """Refuse a ``--kv-blocks`` whose share on one GPU is more than its memory leaves after the
    weights (the activations are not counted: a block count read off a real engine's log may
    rest on a smaller activation estimate than podsim's)."""
    if config.kv_blocks is None:
        return
    room = max(timer.kv_capacity_bytes + timer.activation_bytes, 0.0)
    block = timer.kv_bytes_per_token * config.block_size  # bytes of one block on one GPU
    if config.kv_blocks * block > room:
        raise InputError(
            f"{config.kv_blocks:,} blocks of {config.block_size} tokens need {config.kv_blocks * block / 2**30:.4g} "
            f"GiB per GPU; the GPU has {room / 2**30:.4g} GiB left after the weights (room for "
            f"{int(room // block):,} blocks)",
            where="--kv-blocks",
        )


def usd_per_mtok(gpus: int, usd_per_gpu_hour: float, tokens_per_s: float | None) -> float | None:
    """US dollars per million tokens when ``gpus`` GPUs at ``usd_per_gpu_hour`` each produce
    ``tokens_per_s`` tokens a second (None when they produce none)."""
    if not tokens_per_s:
        return None
    return gpus * usd_per_gpu_hour / 3600 / tokens_per_s * 1e6


#: a run is taken as steady when its arrivals last at least this many mean end-to-end latencies
STEADY_FACTOR = 10


def transient_note(result: LLMServeResult, factor: float = STEADY_FACTOR) -> str | None:
    """A warning when ``result``'s arrivals last less than ``factor`` x its mean end-to-end
    latency: the replicas' queues may not have filled, so its SLO attainment (and a capacity
    found from it) is optimistic.  None when the run is long enough."""
    if result.num_requests < 2:
        return None
    span = (max(result.arrival_ns) - min(result.arrival_ns)) / 1e9
    e2e = result.stats()["e2e_mean_s"] or 0.0
    if span >= factor * e2e:
        return None
    return (
        f"the requests arrive over {span:.3g} s, less than {factor:g} x their mean end-to-end latency "
        f"({e2e:.3g} s): the queues may not reach a steady state, so the SLO attainment is optimistic; "
        f"give more --requests"
    )
