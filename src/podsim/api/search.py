"""``podsim search`` as a Python call: the best training layouts of a model on a number of GPUs,
or, given a request workload, the best ways to serve it.

:func:`search` takes a :class:`SearchJob` (what the command line builds from its flags; each
field is the flag of the same name with dashes) and returns :class:`RankedLayouts` (a training
search) or :class:`RankedServing` (a serving search: ``workload`` given).  Their printed
summaries are in :mod:`podsim.report.search`; :meth:`RankedLayouts.to_dict` and
:meth:`RankedServing.to_dict` are the ``--json`` documents.

Example::

    from podsim.api import SearchJob, search
    res = search(SearchJob(gpus=(64,), model="llama3-8b", gpu="h100", global_batch=256, seq_len=8192))
    best = res.rows[0]
    print(best["tokens_per_s"], best["command"])

Units: GPU memory in GiB, prices in US dollars per GPU-hour, SLOs in s, times in the rows as
their names say (``_s``, ``_h``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import InputError
from ..hardware.gpu import check_precision, get_gpu
from ..jobs.search import SERVING_ONLY, TRAINING_ONLY, SearchJob
from ..llm.layout import RECOMPUTE, TP_OVERLAP, Layout
from ..llm.model import load_model
from ..params import echo
from ..serving.llm.router import DEFAULT_ROUTER, ROUTERS
from ..serving.llm.schedulers import SCHEDULERS
from ..stacks.stack import DEFAULT_TRAINING, load_stack
from ..sweep.report import write_report
from ..sweep.search import FLOW_TOP, OBJECTIVES, SIMULATE_TOP, SearchResult, gpu_hour_price
from ..sweep.search import search as search_layouts
from ..sweep.serving_search import SERVING_OBJECTIVES, RequestMix, ServingSearchResult, ServingSpace, parse_pd
from ..sweep.serving_search import search_serving as search_ways_to_serve
from ..sweep.space import Space
from .goodput import check_goodput_flags

__all__ = [
    "FLOW_TOP",
    "OBJECTIVES",
    "RECOMPUTE",
    "ROUTERS",
    "SCHEDULERS",
    "SERVING_OBJECTIVES",
    "SERVING_ONLY",
    "SIMULATE_TOP",
    "TP_OVERLAP",
    "TRAINING_ONLY",
    "DEFAULT_ROUTER",
    "RankedLayouts",
    "RankedServing",
    "SearchJob",
    "check_kind",
    "search",
    "write_search_report",
]

#: where the shipped GPU-hour prices are, as messages name them
_PRICES = "podsim/hardware/prices.yaml"

#: ``progress(phase, done, total)``: ``screen``, ``simulate`` and ``flow`` (a training search's
#: passes) or ``serve`` (a serving search's capacity runs)
Progress = Callable[[str, int, int], None]

#: each field's default: a field holding another value was given (the fields only one kind of
#: search takes are marked on :class:`SearchJob`: TRAINING_ONLY, SERVING_ONLY)
_DEFAULTS = {f.name: f.default for f in fields(SearchJob)}


def _given(job: SearchJob, names: tuple[str, ...]) -> list[str]:
    """The fields of ``names`` that ``job`` sets to other values than their defaults, as flags."""
    return ["--" + n.replace("_", "-") for n in names if getattr(job, n) != _DEFAULTS[n]]


def check_kind(job: SearchJob, outputs: Sequence[str] = ()) -> None:
    """Refuse a job that mixes a training search's options with a serving search's.
    ``outputs``: output flags given that only a training search writes (``--report``).

    Raises:
        InputError: naming the options that do not belong to the job's kind.
    """
    if not job.gpus:
        raise InputError("give the GPU counts to search: --gpus N[,N...]", where="--gpus")
    if job.serving:
        given = _given(job, TRAINING_ONLY) + list(outputs)
        if given:
            raise InputError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for a training search; a "
                "serving search (--workload) takes --requests, --slo-ttft, --slo-tpot, "
                "--scheduler-values, --chunk-values, --pd-values and the like",
                where=given[0],
            )
        return
    given = _given(job, SERVING_ONLY)
    if given:
        raise InputError(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for a serving search: give "
            "--workload TRACE.csv|poisson:QPS,... as well",
            where=given[0],
        )
    if job.global_batch is None:
        raise InputError(
            "a training search needs --global-batch B (or --workload for a serving search)", where="--global-batch"
        )


@dataclass
class RankedLayouts:
    """What a training search found.

    Attributes:
        job: the search, with what it left open filled in (objective, seq_len, pp_values).
        model: the model's name.  gpu: the GPU's name.
        price: US dollars per GPU-hour, or None (rows then carry no cost).
        price_note: a line saying where the price came from, when it was looked up ('' when given).
        result: the ranked rows and counts (:class:`~podsim.sweep.search.SearchResult`).
        stack: the software stack the layouts ran on, as ``podsim llm --json`` shows it (name,
            origin, values) with ``applied``: what its rules set on the best layout.
    """

    job: SearchJob
    model: str
    gpu: str
    price: float | None
    price_note: str
    result: SearchResult
    stack: dict[str, Any] | None = None

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The ranked rows, best first (fields: :mod:`podsim.sweep.search`)."""
        return self.result.rows

    @property
    def ranked_by(self) -> str:
        """What orders the simulated rows, in words (the estimated rows follow by the objective)."""
        if self.result.ranked_by_goodput:
            return "expected time to train with failures, checkpoints and restarts (goodput.expected_time_to_train_h)"
        return {
            "tokens": "tokens/s",
            "mfu": "MFU",
            "time": "iteration time",
            "cost": "cost per million tokens",
        }[self.job.objective or "tokens"]

    def goodput_echo(self) -> dict[str, Any] | None:
        """With ``--goodput``: its options (as flags) and the failure rates used; else None."""
        if not self.job.goodput:
            return None
        return {"options": echo(self.job.goodput_options), "reliability": self.result.reliability}

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """The ``--json`` document: the search, its counts and the best ``top`` simulated rows."""
        res, job = self.result, self.job
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpus": list(job.gpus),
            "global_batch": job.global_batch,
            "seq_len": job.seq_len,
            "objective": job.objective,
            "train_tokens": job.train_tokens,
            "ranked_by": self.ranked_by,
            "goodput": self.goodput_echo(),
            "stack": self.stack,
            "evaluated": res.evaluated,
            "simulated": res.simulated,
            "flow": res.flow,
            "reused": res.reused,
            "rejected": dict(res.rejected.most_common()),
            "best": res.rows[: min(top, res.simulated)],
        }


@dataclass
class RankedServing:
    """What a serving search found.

    Attributes:
        job: the search, with its objective filled in.
        model: the model's name.  gpu: the GPU's name.
        price: US dollars per GPU-hour, or None.
        price_note: a line saying where the price came from, when it was looked up ('' when given).
        result: the ranked rows (:class:`~podsim.sweep.serving_search.ServingSearchResult`).
    """

    job: SearchJob
    model: str
    gpu: str
    price: float | None
    price_note: str
    result: ServingSearchResult

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The ranked rows, best first; points that could not be served last (their ``error`` set)."""
        return self.result.rows

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """The ``--json`` document: the search, its counts and the best ``top`` rows."""
        res, job = self.result, self.job
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpus": list(job.gpus),
            "workload": job.workload,
            "requests": job.requests,
            "slo_ttft_s": job.slo_ttft,
            "slo_tpot_s": job.slo_tpot,
            "capacity_target": job.capacity_target,
            "objective": job.objective,
            "usd_per_gpu_hour": self.price,
            "evaluated": res.evaluated,
            "rejected": dict(res.rejected.most_common()),
            "best": res.rows[:top],
        }


def search(job: SearchJob, progress: Progress | None = None) -> RankedLayouts | RankedServing:
    """Run the search ``job`` describes: a training search (every layout estimated, the best
    simulated exactly; :func:`podsim.sweep.search.search`) or, with ``job.workload``, a serving
    search (every way to serve at its capacity under the SLOs;
    :func:`podsim.sweep.serving_search.search_serving`).

    ``progress(phase, done, total)`` is called as work finishes (see :data:`Progress`).

    Raises:
        InputError: options of the other kind of search, a missing global batch, an unknown
            model, GPU, objective or stack, a price that cannot be found, a reserve that leaves
            no memory, or a space with nothing left to try.
    """
    check_kind(job)
    if job.serving:
        return _serving(job, progress)
    return _training(job, progress)


def _training(job: SearchJob, progress: Progress | None) -> RankedLayouts:
    if job.objective == "capacity":
        raise InputError(
            "capacity ranks a serving search (--workload); a training search ranks by tokens, mfu, time or cost",
            where="--objective",
        )
    options = job.goodput_options
    # --train-tokens is a search's own too (time_to_train_h); the rest only read with --goodput
    check_goodput_flags(replace(options, train_tokens=None), job.goodput)
    model = load_model(job.model, job.model_config)
    job = replace(
        job,
        objective=job.objective or ("time" if job.goodput and job.train_tokens else "tokens"),
        seq_len=job.seq_len or model.seq_len,
        pp_values=job.pp_values or (1, 2, 4, 8, 16),
    )
    gpu = get_gpu(job.gpu)
    software = load_stack(job.stack or DEFAULT_TRAINING, "training")
    assert job.global_batch is not None and job.seq_len is not None and job.pp_values is not None
    space = Space(
        gpus=job.gpus,
        global_batch=job.global_batch,
        seq_len=job.seq_len,
        tp=job.tp_values,
        pp=job.pp_values,
        vpp=job.vpp_values,
        cp=job.cp_values,
        ep=job.ep_values,
        etp=job.etp_values or (None,),
        micro_batch=job.micro_batch_values,
        recompute=job.recompute_values,
        sequence_parallel=job.sequence_parallel_values,
        distributed_optimizer=job.distributed_optimizer_values,
        zero=job.zero_values,
        tp_overlap=job.tp_overlap_values,
        overlap_grad_reduce=job.overlap_grad_reduce_values,
        overlap_param_gather=job.overlap_param_gather_values,
        base=Layout(gpus=1, precision=job.precision),
        stack=software,
    )
    price, note = job.gpu_hour_price, ""
    if price is None and (job.objective == "cost" or job.gpu_prices):
        price = gpu_hour_price(job.gpu, job.gpu_prices)
        note = (
            f"podsim search: a GPU-hour of the {gpu.name} at ${price:g} ({job.gpu_prices or _PRICES}"
            "; --gpu-hour-price USD sets another)"
        )
    check_precision(job.precision, gpu)
    room = gpu.memory_gib - job.memory_reserve
    if room <= 0:
        raise InputError(
            f"the {gpu.name} has {gpu.memory_gib:g} GiB: a reserve of {job.memory_reserve:g} GiB leaves nothing",
            where="--memory-reserve",
        )
    res = search_layouts(
        model,
        job.model_arg,
        space,
        job.gpu,
        room,
        job.cluster,
        job.backend,
        job.objective,
        job.workers,
        progress,
        job.store,
        price,
        job.simulate_top,
        job.flow_top,
        job.ray,
        job.train_tokens,
        options if job.goodput else None,
    )
    applied = {k: list(v) if isinstance(v, tuple) else v for k, v in res.applied.items()}
    return RankedLayouts(job, model.name, gpu.name, price, note, res, {**software.echo(), "applied": applied})


def _serving(job: SearchJob, progress: Progress | None) -> RankedServing:
    model = load_model(job.model, job.model_config)
    gpu = get_gpu(job.gpu)
    ROUTERS.get(job.router)  # a misspelt router is one error, not every way's
    job = replace(job, objective=job.objective or "capacity")
    price, note = job.gpu_hour_price, ""
    if price is None:
        try:
            price = gpu_hour_price(job.gpu, job.gpu_prices)
            note = (
                f"  a GPU-hour of the {gpu.name} at ${price:g} ({job.gpu_prices or _PRICES}"
                "; --gpu-hour-price USD sets another)"
            )
        except InputError:
            if job.objective == "cost" or job.gpu_prices:
                raise
    space = ServingSpace(
        gpus=job.gpus,
        tp=job.tp_values,
        pp=job.pp_values or (1,),
        ep=job.ep_values,
        scheduler=job.scheduler_values,
        chunk=job.chunk_values,
        pd=tuple(parse_pd(job.pd_values)),
    )
    mix = RequestMix(
        job.workload or "", job.requests, job.slo_ttft, job.slo_tpot, job.capacity_target, job.router, job.max_context
    )

    def counted(done: int, total: int) -> None:
        if progress is not None:
            progress("serve", done, total)

    res = search_ways_to_serve(
        model, job.model_arg, job.gpu, space, mix, job.objective, job.cluster, price, job.workers, job.ray, counted
    )
    if res.rows and all(r["error"] for r in res.rows):  # nothing to rank: say why, once
        why = Counter(r["error"] for r in res.rows).most_common(1)[0][0]
        raise InputError(f"none of the {len(res.rows):,} ways to serve could serve; {why}")
    return RankedServing(job, model.name, gpu.name, price, note, res)


def write_search_report(path: str, ranked: RankedLayouts, top: int = 10) -> None:
    """Write a training search's HTML report to ``path``: the Pareto front, the best layouts'
    time breakdown and memory per stage, filters by parallel dimension."""
    write_report(path, dict(ranked.to_dict(top), rows=ranked.rows))
