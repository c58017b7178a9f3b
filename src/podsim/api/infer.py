"""``podsim infer`` as a Python call: the prefill and decode step times of an LLM on one
replica, from podsim's compute model and the cluster's fabric, or from measured tables in
Vidur's profile layout.

Example::

    from podsim.api import infer
    from podsim.jobs.infer import InferJob
    r = infer(InferJob.from_values({"model": "llama2-70b", "gpu": "h100", "tp": 4,
                                    "prompt-tokens": 1024, "output-tokens": 128})).report
    print(r.prefill_s, r.decode_step_mean_s)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..jobs.infer import InferJob
from ..llm.training import replica_calibration
from ..serving.llm.step_timer import step_timer
from ..serving.llm.steps import InferenceReport, LLMStepTimer
from ..serving.llm.steps import infer as time_steps
from ..serving.llm.vidur_profiles import write_vidur_profiles
from ..stacks.stack import SoftwareStack, serving_host_overhead, serving_stack


@dataclass
class InferOutcome:
    """What one ``infer`` job gives: the step times (``report``) and the replica's step timer
    they came from (its GPU and the share of memory it may use); ``software``: the serving
    stack it ran on (None: none)."""

    job: InferJob
    report: InferenceReport
    timer: LLMStepTimer
    software: SoftwareStack | None = None

    @property
    def calibration(self) -> dict:
        """How the step times are known (as ``podsim llm``'s ``calibration``)."""
        return replica_calibration(self.timer.gpu, self.job.replica.profile)

    @property
    def stack(self) -> dict | None:
        """The serving stack the job ran on (its echo), or None."""
        st = self.software if self.software is not None else serving_stack(self.job.software.stack)
        return st.echo() if st else None


def infer(job: InferJob, software: SoftwareStack | None = None) -> InferOutcome:
    """Time one prefill of the job's batch and the decode steps after it, on the job's serving
    stack (``software``: this stack instead, e.g. one ``podsim calibrate inference`` is trying).

    Raises:
        InputError: a missing input, lengths below 1, a sequence longer than the model's context,
            a stack whose host overhead podsim has not measured on the job's GPU."""
    for flag, value in (("--prompt-tokens", job.batch.prompt_tokens), ("--output-tokens", job.batch.output_tokens)):
        if value is None:
            raise InputError(f"{flag} is required")
    st = software if software is not None else serving_stack(job.software.stack)
    model = job.model.load()
    rep, hw = job.replica, job.hardware
    host = serving_host_overhead(rep.host_overhead_ms, st, hw.gpu)
    timer = step_timer(
        model,
        hw.gpu,
        rep.tp,
        rep.pp,
        rep.ep,
        rep.precision,
        hw.cluster,
        host,
        kv_cache_dtype=rep.kv_cache_dtype,
        profile=rep.profile,
        engine_gemm_efficiency=float(st.get("engine_gemm_efficiency") or 1.0) if st is not None else 1.0,
    )
    b = job.batch
    return InferOutcome(job, time_steps(timer, b.batch, b.prompt_tokens, b.output_tokens), timer, st)


def write_profiles(job: InferJob, folder: str) -> tuple[list[int], list[Path]]:
    """Write podsim's compute-model times of the job's model, GPU and cluster as Vidur's
    profiling CSVs under ``folder``, for TP 1, 2, 4, 8 (those dividing the heads) and the job's
    TP; returns (the TPs, the files written)."""
    model = job.model.load()
    tp = job.replica.tp
    tps = [t for t in sorted({1, 2, 4, 8, tp}) if t == tp or (model.heads % t == 0 and t <= 8)]
    files = write_vidur_profiles(
        folder, model, job.hardware.gpu, tps, precision=job.replica.precision, cluster=job.hardware.cluster
    )
    return tps, [Path(f) for f in files]
