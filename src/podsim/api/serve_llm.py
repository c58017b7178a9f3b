"""``podsim serve-llm`` as a Python call: LLM serving on replicas with continuous batching, a
paged KV cache, schedulers, routers and prefill/decode disaggregation.

:func:`serve_llm` takes a :class:`~podsim.jobs.serve_llm.ServeLLMJob` (what the command line
and the sweep build from their flags) and returns a :class:`ServeLLMOutcome`: the run (or, with
``find-capacity``, the capacity search and the run at capacity).

Example::

    from podsim.api import serve_llm
    from podsim.jobs.serve_llm import ServeLLMJob
    job = ServeLLMJob.from_values({"model": "llama3-8b", "gpu": "h100",
                                   "workload": "poisson:10,prompt=1000,output=200", "requests": 200})
    print(serve_llm(job).result.stats()["ttft_p99_s"])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..hardware.cluster import ClusterSpec
from ..hardware.gpu import GpuSpec
from ..jobs.model import ModelChoice
from ..jobs.serve_llm import SERVE_LLM_PARAMS, ServeLLMJob
from ..llm.model import ModelConfig
from ..llm.training import replica_calibration
from ..params import refuse_unused
from ..serving.llm.capacity import Capacity
from ..serving.llm.deployment import (
    PDLink,
    ReplicaSpec,
    Serving,
    parse_pair,
    prepare,
    requests_at,
    transient_note,
    usd_per_mtok,
)
from ..serving.llm.footprint import check_footprint
from ..serving.llm.metrics import LLMServeResult
from ..serving.llm.plot import plot_serving
from ..serving.llm.requests import GeneratorSpec, Request, is_generator, workload
from ..serving.llm.simulate import ServeConfig
from ..serving.llm.trace import write_serve_trace
from ..stacks.stack import SoftwareStack, serving_host_overhead, serving_stack

#: makes the progress callback of one run: given what the run is ("served {done}/{total}
#: requests"), returns ``progress(done, total)`` and a function that ends the line
ProgressFactory = Callable[[str], tuple[Callable[[int, int], None] | None, Callable[[], None]]]


@dataclass
class ServeLLMOutcome:
    """What one ``serve-llm`` job gives.

    Attributes:
        job: the job as run.
        model: its model.
        serving: the prepared deployment (replicas, config, step timer).
        requests: the requests served (at the workload's own arrival times).
        result: the run (at capacity with ``find-capacity``; None when no rate met the SLOs).
        capacity: the capacity search, with ``find-capacity``.
        generator: the request generator, when the workload is one.
        notes: what the run rests on that the summary must say (e.g. generated requests cut to
            the context).
    """

    job: ServeLLMJob
    model: ModelConfig
    serving: Serving
    requests: list[Request]
    result: LLMServeResult | None
    capacity: Capacity | None = None
    generator: GeneratorSpec | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second: the run's, or at capacity the capacity times the mean
        output tokens of a request (the steady state the SLOs hold at)."""
        if self.capacity is not None:
            return self.capacity.qps * sum(r.output_tokens for r in self.requests) / len(self.requests)
        return None if self.result is None else self.result.stats()["tokens_per_s"]

    def cost(self, usd_per_gpu_hour: float) -> dict[str, Any]:
        """The JSON document's cost fields: ``gpus``, ``usd_per_gpu_hour`` and
        ``cost_per_mtok_usd`` (US dollars per million output tokens)."""
        return {
            "gpus": self.serving.gpus,
            "usd_per_gpu_hour": usd_per_gpu_hour,
            "cost_per_mtok_usd": usd_per_mtok(self.serving.gpus, usd_per_gpu_hour, self.tokens_per_s),
        }

    @property
    def calibration(self) -> dict:
        """How the replicas' step times are known (as ``podsim llm``'s ``calibration``)."""
        return replica_calibration(self.serving.timer.gpu, self.job.replica.profile)

    @property
    def stack(self) -> dict | None:
        """The serving stack the job named (its echo), or None."""
        st = serving_stack(self.job.software.stack)
        return st.echo() if st else None

    def transient_note(self) -> str | None:
        """A note when the run at capacity ended before reaching a steady state."""
        return transient_note(self.result) if self.result is not None else None


def _draft(name: str | None) -> ModelConfig | None:
    """The draft model: a zoo name, or a HuggingFace-style config file (a path that exists or
    ends in .json)."""
    if name is None:
        return None
    is_file = name.endswith(".json") or Path(name).exists()
    return ModelChoice(None, name).load() if is_file else ModelChoice(name, None).load()


def check_flags(job: ServeLLMJob) -> None:
    """Refuse a flag given a value that only another flag makes used (``--swap-space`` without
    ``--preemption swap``, ...): the command line would run as if it were not there.  (A sweep
    that varies the parent flag keeps such a value fixed, so only the command line calls this.)

    Raises:
        InputError: naming the flag and the flag it needs."""
    eng, slo = job.engine, job.service
    swap, link = eng.preemption == "swap", eng.pd_backend == "link"
    pd = parse_pair(eng.pd, "--pd", whole=True) is not None
    refuse_unused(
        SERVE_LLM_PARAMS,
        (
            ("swap-space", eng.swap_space, swap, "--preemption swap"),
            ("swap-bandwidth", eng.swap_bandwidth, swap, "--preemption swap"),
            ("pd-backend", eng.pd_backend, pd, "--pd P:D"),
            ("pd-bandwidth", eng.pd_bandwidth, pd and link, "--pd P:D --pd-backend link"),
            ("pd-latency", eng.pd_latency, pd and link, "--pd P:D --pd-backend link"),
            ("capacity-target", slo.capacity_target, slo.find_capacity, "--find-capacity"),
        ),
    )


def prepare_job(job: ServeLLMJob, software: SoftwareStack | None = None) -> tuple[ModelConfig, Serving]:
    """The job's model and its deployment, ready to serve; ``software``: this serving stack
    instead of the one the job names (e.g. one ``podsim calibrate inference`` is trying).

    Raises:
        InputError: a missing or contradictory input, a layout the GPU cannot hold."""
    model = job.model.load()
    eng, rep, slo, hw = job.engine, job.replica, job.service, job.hardware
    pd = parse_pair(eng.pd, "--pd", whole=True)
    if pd is not None and eng.replicas is not None and eng.replicas != sum(pd):
        raise InputError(f"--pd {eng.pd} makes {sum(pd)} replicas, --replicas says {eng.replicas}", where="--pd")
    cfg = ServeConfig(
        replicas=eng.replicas or 1,
        scheduler=eng.scheduler,
        max_num_seqs=eng.max_num_seqs,
        max_batched_tokens=eng.max_batched_tokens,
        chunk_size=eng.chunk_size,
        router=eng.router,
        pd=pd,
        block_size=eng.block_size,
        kv_blocks=eng.kv_blocks,
        max_context=eng.max_context or model.seq_len,
        prefix_hit_rate=eng.prefix_hit_rate,
        spec_decode=parse_pair(eng.spec_decode, "--spec-decode"),
        slo_ttft_s=slo.slo_ttft,
        slo_tpot_s=slo.slo_tpot,
        preemption=eng.preemption,
        swap_space_gib=eng.swap_space,
        swap_bandwidth_gbps=eng.swap_bandwidth,
    )
    st = software if software is not None else serving_stack(job.software.stack)
    replica = ReplicaSpec(
        model,
        hw.gpu,
        rep.tp,
        rep.pp,
        rep.ep,
        rep.precision,
        rep.kv_cache_dtype,
        serving_host_overhead(rep.host_overhead_ms, st, hw.gpu),
        hw.cluster,
        rep.profile,
        _draft(eng.draft_model),
        float(st.get("engine_gemm_efficiency") or 1.0) if st is not None else 1.0,
    )
    return model, prepare(replica, cfg, PDLink(eng.pd_backend, eng.pd_bandwidth, eng.pd_latency))


def load_job_requests(job: ServeLLMJob, max_context: int) -> tuple[list[Request], GeneratorSpec | None, int]:
    """The job's requests, its generator when the workload is one, and how many generated
    requests were cut to ``max_context`` (tokens; see :func:`~podsim.serving.llm.requests.workload`)."""
    spec = job.requests.workload
    if not spec:
        raise InputError(
            "--workload is required: a request trace CSV or a generator such as poisson:10,prompt=1000,output=200",
            where="--workload",
        )
    try:
        return workload(spec, job.requests.requests, max_context)
    except InputError as e:
        raise e if e.source or e.where else InputError(e.message, where="--workload") from None


def serve_llm(
    job: ServeLLMJob,
    *,
    record_steps: bool = False,
    progress: ProgressFactory | None = None,
    software: SoftwareStack | None = None,
) -> ServeLLMOutcome:
    """Serve the job's requests; with ``find-capacity``, search the highest rate meeting the
    SLOs first.  ``record_steps`` keeps each step (for a trace): at capacity, the run at the
    capacity is served again with its steps recorded.  ``progress`` makes each run's progress
    callback.  ``software``: this serving stack instead of the one the job names (e.g. one
    ``podsim calibrate inference`` is trying).

    Raises:
        InputError: a missing or contradictory input; more requests or replicas than the
            machine's memory holds (before any is generated or read)."""
    model, serving = prepare_job(job, software)
    cfg = serving.config
    # refuse what memory cannot hold before generating or reading anything (a trace's rows are
    # counted when read, in simulate)
    spec, count = job.requests.workload, job.requests.requests
    if count is None and spec and is_generator(spec):
        count = 1000
    check_footprint(
        count or 0,
        cfg.num_replicas,
        json=bool(job.outputs.json),
        replicas_flag="--pd" if cfg.pd is not None else "--replicas",
    )
    ctx = cfg.max_context
    requests, gen, cut = load_job_requests(job, ctx)
    notes = []
    if cut:
        notes.append(
            f"{cut:,} generated requests were longer than the context ({ctx:,} tokens): their prompts and "
            "outputs were cut to fit it, as a benchmark client sizes them"
        )

    def serve(reqs: list[Request], record: bool, what: str) -> LLMServeResult:
        show, done = progress(what) if progress is not None else (None, lambda: None)
        r = serving.run(reqs, record_steps=record, progress=show)
        done()
        return r

    if job.service.find_capacity:
        cap = serving.capacity(
            requests,
            gen,
            job.service.capacity_target,
            run_at=lambda q, reqs: serve(reqs, False, f"{q:.3g} req/s: served {{done}}/{{total}} requests"),
        )
        result = cap.result
        if result is not None and record_steps:
            result = serve(requests_at(requests, gen, cap.qps), True, "served {done}/{total} requests")
        return ServeLLMOutcome(job, model, serving, requests, result, cap, gen, notes)
    result = serve(requests, record_steps, "served {done}/{total} requests")
    result.info["notes"] = [
        f"{serving.describe()}; KV cache {result.info['kv_blocks']:,} blocks of "
        f"{serving.config.block_size} tokens a replica",
        *notes,
    ]
    return ServeLLMOutcome(job, model, serving, requests, result, None, gen, notes)


def with_hardware(job: ServeLLMJob, gpu: str | GpuSpec, cluster: str | ClusterSpec | None) -> ServeLLMJob:
    """``job`` on another GPU or cluster (a what-if's typed specs)."""
    return replace(job, hardware=replace(job.hardware, gpu=gpu, cluster=cluster))


def write_trace(outcome: ServeLLMOutcome, path: str, announce: Callable[[str], None] | None = None) -> int:
    """Write the run's steps as a Perfetto trace; returns the steps written."""
    assert outcome.result is not None
    return write_serve_trace(outcome.result, path, announce)


def write_plot(outcome: ServeLLMOutcome, path: str) -> None:
    """Draw the run's latency CDFs and KV use as a PNG (needs matplotlib)."""
    assert outcome.result is not None
    plot_serving(outcome.result, path, outcome.model.name)
