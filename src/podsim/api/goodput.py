"""``podsim goodput`` as a Python call: how long a training run takes once failures, checkpoints
and restarts are counted.

:func:`goodput` takes a :class:`~podsim.jobs.goodput.GoodputJob` (what the command line and
the sweep build from their flags): its step is simulated as ``podsim llm`` does (or taken from
a :class:`~podsim.llm.training.TrainingResult` already simulated: ``podsim llm --goodput``),
then the reliability model (:mod:`podsim.reliability`) gives the expected interruptions, the
goodput at the best checkpoint interval (and Young's and Daly's next to it), a Monte Carlo of
the time to train (p10/p50/p90) and what-ifs.  Returns a :class:`GoodputResult`; its JSON
document is :func:`podsim.report.goodput.goodput_json`.

Example::

    from podsim.api.goodput import goodput
    from podsim.jobs.goodput import GoodputJob
    job = GoodputJob.from_values({"model": "llama3-8b", "gpu": "h100", "gpus": 1024, "tp": 1,
                                  "global-batch": 1024, "seq-len": 8192, "train-tokens": 1e12})
    print(goodput(job).estimate.goodput)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..hardware.cluster import ClusterSpec
from ..hardware.gpu import GpuSpec, get_gpu
from ..jobs.goodput import GOODPUT_PARAMS, GoodputJob
from ..jobs.reliability import NIC_BYTES_PER_S, GoodputOptions
from ..llm.layout import Layout
from ..llm.model import ModelConfig
from ..llm.training import TrainingResult, default_cluster
from ..params import echo, params_of, refuse_unused
from ..reliability.checkpoint import CheckpointState, checkpoint_state
from ..reliability.estimate import Estimate, RunModel, estimate
from ..reliability.goodput import goodput as goodput_at
from ..reliability.goodput import optimal_interval_s
from ..reliability.montecarlo import RunSamples, simulate_run
from ..reliability.rates import Reliability, load_reliability
from ..reliability.restart import RestartTimes, mean_restart_s, restart_by_kind
from ..reliability.whatif import WhatIf, what_ifs
from ..units import parse_bandwidth
from .train import train

__all__ = ["GOODPUT_PARAMS", "GoodputJob", "GoodputResult", "goodput", "goodput_of_step", "goodput_of_training"]

#: the most Monte Carlo samples a run may ask for (memory: a few arrays of this length)
MAX_SAMPLES = 100_000
#: the wall-clock days ``llm --goodput`` and ``search --goodput`` assume when given no length
DEFAULT_DAYS = 30.0


@dataclass
class GoodputResult:
    """A run's goodput.

    Attributes:
        model, gpu, cluster: names; gpus: GPUs in the job.
        step_time_s: one training step (simulated); tokens_per_step: global batch x sequence.
        train_tokens: the tokens the run trains (with ``days``: what those days train on average).
        steps: the steps that takes.
        days: the run's wall-clock days when given that way, else None.
        state: the checkpoint's bytes; reliability: the failure model used.
        estimate: the closed-form expectation; samples: the Monte Carlo.
        what_ifs: the variants (:mod:`podsim.reliability.whatif`).
        by_gpus: (GPUs, goodput at its best interval) for 1/16 to 16 times the job's GPUs.
        by_interval: (interval s, goodput) around the best interval.
        seed, samples_count: the Monte Carlo's.
        notes: what the reader should know.
    """

    model: str
    gpu: str
    cluster: str
    gpus: int
    step_time_s: float
    tokens_per_step: int
    train_tokens: float
    steps: int
    days: float | None
    state: CheckpointState
    reliability: Reliability
    estimate: Estimate
    samples: RunSamples
    what_ifs: list[WhatIf]
    by_gpus: list[tuple[int, float]]
    by_interval: list[tuple[float, float]]
    seed: int
    samples_count: int
    notes: list[str] = field(default_factory=list)

    @property
    def time_to_train_h(self) -> dict[str, float]:
        """p10, p50, p90 of the Monte Carlo's time to train (h)."""
        return self.samples.percentiles_h()


def _gbps(value: float | None, flag: str) -> float | None:
    """GB/s (10^9 bytes/s) as bytes/s, checked finite and > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise InputError(f"expected a finite bandwidth in GB/s > 0, got {value!r}", where=flag)
    return float(value) * 1e9


def _seconds(value: float, flag: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < math.inf):
        raise InputError(f"expected a finite number of seconds >= 0, got {value!r}", where=flag)
    return float(value)


def _check_options(o: GoodputOptions) -> None:
    """What the command line checks by the flags' kinds, checked again for API callers."""
    for flag, v in (
        ("--days", o.days),
        ("--train-tokens", o.train_tokens),
        ("--checkpoint-interval", o.checkpoint_interval),
    ):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf)):
            raise InputError(f"expected a finite number > 0, got {v!r}", where=flag)
    if o.days is not None and o.train_tokens is not None:
        raise InputError("give one of --days and --train-tokens, not both", where="--days")
    if not isinstance(o.samples, int) or not 1 <= o.samples <= MAX_SAMPLES:
        raise InputError(
            f"expected a whole number of runs from 1 to {MAX_SAMPLES}, got {o.samples!r}", where="--samples"
        )
    if not isinstance(o.seed, int) or o.seed < 0:
        raise InputError(f"expected a whole number >= 0, got {o.seed!r}", where="--seed")


def check_goodput_flags(options: GoodputOptions, wanted: bool, parent: str = "--goodput") -> None:
    """Refuse a reliability or checkpoint flag given to ``podsim llm`` / ``search`` without
    ``--goodput`` (``parent``: what would make it read; nothing reads it otherwise).

    Raises:
        InputError: naming the flag."""
    given = echo(options)
    refuse_unused(
        params_of(GoodputOptions), ((p.name, given[p.name], wanted, parent) for p in params_of(GoodputOptions))
    )


def job_cluster(job: GoodputJob, gpu: GpuSpec) -> ClusterSpec:
    """The cluster ``job`` runs on (its preset or file, with its GPUs per node and NIC overrides)."""
    over = job.cluster
    nic_arg = parse_bandwidth(over.nic_bandwidth, where="--nic-bandwidth") if over.nic_bandwidth else None
    return default_cluster(gpu, over.gpus_per_node, nic_arg, job.hardware.cluster)


def run_model(
    options: GoodputOptions, model: ModelConfig, layout: Layout, cluster: ClusterSpec, step_s: float
) -> RunModel:
    """The reliability model's inputs for a run of ``model`` under ``layout`` on ``cluster``
    whose step takes ``step_s`` seconds."""
    o = options
    nic = cluster.inter.get("nic_bandwidth")
    nic_bytes_per_s = float(nic) * 1e9 if nic else NIC_BYTES_PER_S
    write = _gbps(o.storage_bandwidth, "--storage-bandwidth")
    read = _gbps(o.storage_read_bandwidth, "--storage-read-bandwidth") or write
    return RunModel(
        load_reliability(o.reliability),
        layout.gpus,
        cluster.gpus_per_node,
        checkpoint_state(model, layout),
        o.checkpoint_mode,
        write,  # type: ignore[arg-type]
        read,  # type: ignore[arg-type]
        _gbps(o.snapshot_bandwidth, "--snapshot-bandwidth"),  # type: ignore[arg-type]
        nic_bytes_per_s,
        RestartTimes(
            _seconds(o.detect, "--detect"), _seconds(o.reschedule, "--reschedule"), _seconds(o.warmup, "--warmup")
        ),
        o.checkpoint_interval,
        step_s,
    )


def _by_gpus(model: RunModel) -> list[tuple[int, float]]:
    """Goodput at its best interval for 1/16 to 16 times the job's GPUs (the per-GPU state kept)."""
    out = []
    for e in range(-4, 5):
        n = int(model.gpus * 2.0**e)
        if n < 1:
            continue
        m = replace(model, gpus=n, interval_s=None)
        rates = m.rates_per_s()
        lam = sum(rates.values())
        ck = m.checkpoint()
        r = mean_restart_s(restart_by_kind(m.times, ck, m.reliability), rates)
        tau = optimal_interval_s(lam, ck.blocking_s)
        tau = max(tau, ck.lag_s) if math.isfinite(tau) else 0.0
        out.append((n, goodput_at(lam, tau, ck.blocking_s, r) if math.isfinite(tau) and tau > 0 else 1.0))
    return out


def _by_interval(est: Estimate) -> list[tuple[float, float]]:
    """Goodput at 41 intervals from 1/20 to 20 times the best (or the one used)."""
    centre = est.optimal_interval_s or est.interval_s
    c = est.checkpoint.blocking_s
    return [
        (t, goodput_at(est.rate_per_s, t, c, est.restart_s))
        for t in (centre * 20.0 ** (i / 20.0) for i in range(-20, 21))
    ]


def goodput_of_training(job: GoodputJob, training: TrainingResult, default_days: float | None = None) -> GoodputResult:
    """The goodput of ``job`` whose step was simulated already (``training``: no second
    simulation).  ``default_days``: the run's length when the job gives neither ``--days`` nor
    ``--train-tokens`` (None: refuse).

    Raises:
        InputError: a bad option (a bandwidth or interval not finite and > 0, both or neither
            length), a bad reliability file, an interval shorter than a checkpoint."""
    gpu = training.gpu if isinstance(training.gpu, GpuSpec) else get_gpu(training.gpu)
    return goodput_of_step(
        job.options,
        training.model,
        training.layout,
        gpu,
        job_cluster(job, gpu),
        training.iteration_time_s,
        default_days,
        training.cluster,
    )


def goodput_of_step(
    options: GoodputOptions,
    model: ModelConfig,
    layout: Layout,
    gpu: GpuSpec,
    cluster: ClusterSpec,
    step_s: float,
    default_days: float | None = None,
    cluster_name: str | None = None,
) -> GoodputResult:
    """The goodput of a run of ``model`` under ``layout`` on ``gpu`` and ``cluster`` whose
    step, simulated already, takes ``step_s`` seconds (``podsim llm --goodput`` and ``podsim
    search --goodput`` give theirs: no second simulation).  ``default_days``: the run's length
    when ``options`` give neither ``--days`` nor ``--train-tokens`` (None: refuse);
    ``cluster_name``: the cluster as results name it (default: ``cluster``'s name).

    Raises:
        InputError: as :func:`goodput_of_training`."""
    o = options
    _check_options(o)
    notes: list[str] = []
    days = o.days
    if days is None and o.train_tokens is None:
        if default_days is None:
            raise InputError(
                "give the run's length: --train-tokens T (tokens) or --days D (wall clock)", where="--train-tokens"
            )
        days = default_days
        notes.append(f"a run of {days:g} days assumed (give --days or --train-tokens)")
    model_run = run_model(o, model, layout, cluster, step_s)
    if o.reliability is None:
        notes.append(
            "failure rates: podsim's defaults, Meta's RSC-1 total (A100s, 6.50 failures per 1,000 node-days) split "
            "over kinds by podsim's assumption; on Llama 3 405B's 54 days (16,384 H100s) they predict 719 "
            "interruptions where 419 were reported (podsim validate --only goodput_): give --reliability FILE.yaml "
            "for your fleet's rates"
        )
    lay = layout
    tokens_per_step = lay.global_batch * lay.seq_len
    if o.train_tokens is not None:
        steps = max(1, math.ceil(o.train_tokens / tokens_per_step))
        est = estimate(model_run, work_s=steps * step_s)
        tokens = float(o.train_tokens)
    else:
        est = estimate(model_run, days=days)
        steps = max(1, round(est.work_s / step_s))
        tokens = est.work_s / step_s * tokens_per_step
    samples = simulate_run(
        est.work_s, est.interval_s, est.checkpoint.blocking_s, est.restart_s, est.rates_per_s, o.samples, o.seed
    )
    return GoodputResult(
        model.name,
        gpu.name,
        cluster_name or cluster.name,
        lay.gpus,
        step_s,
        tokens_per_step,
        tokens,
        steps,
        days,
        model_run.state,
        model_run.reliability,
        est,
        samples,
        what_ifs(model_run, _seconds(o.hot_spare, "--hot-spare"), est.work_s),
        _by_gpus(model_run),
        _by_interval(est),
        o.seed,
        o.samples,
        notes + est.notes,
    )


def goodput(job: GoodputJob) -> GoodputResult:
    """Simulate ``job``'s training step (as ``podsim llm`` does, without a timeline), then its
    goodput (:func:`goodput_of_training`).

    Raises:
        InputError: what :func:`~podsim.api.train.train` refuses (a layout that does not fit in
            memory among them), and what :func:`goodput_of_training` refuses."""
    _check_options(job.options)
    if job.options.days is None and job.options.train_tokens is None:
        raise InputError(
            "give the run's length: --train-tokens T (tokens) or --days D (wall clock)", where="--train-tokens"
        )
    training = train(job.train_job(), record_timeline=False)
    return goodput_of_training(job, training)
