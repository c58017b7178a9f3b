"""``podsim search --workload``: rank the ways to serve an LLM on a number of GPUs.

A :class:`ServingSpace` lists what may vary: the GPU counts, TP, PP and EP of a replica (the
replicas are what the GPU count leaves), the scheduler, its token budget per step (``chunk``:
vLLM's ``max_num_batched_tokens``, Sarathi's chunk size; the other schedulers have none) and the
prefill/decode split (``off``: mixed replicas; ``P:D``; ``all``: every split of the replicas).
The requests, their SLOs and the router are a :class:`RequestMix`.
:func:`enumerate_serving` keeps the points whose replica the model takes and whose weights leave
room for a KV cache, counting the rest by reason; :func:`search_serving` finds each point's
capacity -- the highest request rate meeting the SLOs for ``target`` of the requests
(:meth:`podsim.serving.llm.deployment.Serving.capacity`, Vidur-Search's binary search) -- on worker
processes or Ray, and ranks them.

Row fields: ``gpus``, ``tp``, ``pp``, ``ep``, ``replicas``, ``pd`` (``off`` or ``P:D``),
``scheduler``, ``chunk`` (tokens, null for schedulers without a budget), ``capacity_qps``
(requests/s), ``capacity_qps_per_gpu``, ``tokens_per_s`` (output tokens/s at capacity: the
rate x the workload's mean output tokens), ``tokens_per_s_per_gpu``, ``ttft_p99_s``,
``tpot_p99_s`` (s, the run at capacity), ``slo_attainment`` (of that run), ``steady`` (whether
that run's arrivals last at least 10 mean end-to-end latencies: if not, its queues may not have
filled and the capacity is optimistic; more requests a run make it steady),
``cost_per_mtok_usd`` (US dollars per million output tokens at capacity, with a price: ``gpus x
price / 3600 / tokens_per_s x 10^6``), ``command`` (the ``podsim serve-llm --find-capacity``
command line that reproduces the row) and ``error`` (why a point could not be served; its
metrics are then null).  Objectives: ``capacity`` (requests/s per GPU, highest first), ``tokens``
(output tokens/s per GPU) and ``cost`` (lowest first).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, PodsimError
from ..llm.model import ModelConfig
from ..serving.llm.deployment import PDLink, ReplicaSpec, prepare, transient_note, usd_per_mtok
from ..serving.llm.requests import load_requests, workload
from ..serving.llm.router import DEFAULT_ROUTER
from ..serving.llm.schedulers import SCHEDULERS, scheduler_class
from ..serving.llm.simulate import ServeConfig
from ..serving.llm.step_timer import step_timer
from .executors import run_tasks

SERVING_OBJECTIVES = ("capacity", "tokens", "cost")
#: schedulers whose step has a token budget (``chunk``): those that declare the flag that sets it
CHUNKED = tuple(name for name, cls in SCHEDULERS.items() if cls.chunk_flag)


@dataclass(frozen=True)
class ServingSpace:
    """What a serving search varies (see the module docstring)."""

    gpus: tuple[int, ...]
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1,)
    ep: tuple[int, ...] = (1,)
    scheduler: tuple[str, ...] = ("vllm", "sarathi")
    chunk: tuple[int, ...] = (512, 2048, 8192)
    pd: tuple[str, ...] = ("off",)


@dataclass(frozen=True)
class ServingPoint:
    """One way to serve: GPUs, the replica's TP x PP (EP), the split, the scheduler and budget."""

    gpus: int
    tp: int
    pp: int
    ep: int
    replicas: int
    pd: tuple[int, int] | None
    scheduler: str
    chunk: int | None

    def as_row(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "replicas": self.replicas,
            "pd": "off" if self.pd is None else f"{self.pd[0]}:{self.pd[1]}",
            "scheduler": self.scheduler,
            "chunk": self.chunk,
        }


@dataclass(frozen=True)
class RequestMix:
    """The requests each capacity run serves, how they are routed, and the SLOs they must meet."""

    spec: str  #: a trace CSV or a generator (``podsim serve-llm --workload``)
    requests: int | None  #: the first N of a trace / N generated (None: all / 1000)
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    target: float = 0.99  #: the share of requests that must meet the SLOs
    router: str = DEFAULT_ROUTER
    max_context: int | None = None


@dataclass
class ServingSearchResult:
    """Ranked rows (best first; points that could not be served last) and the points rejected
    before any run, by reason."""

    rows: list[dict[str, Any]]
    rejected: Counter[str] = field(default_factory=Counter)

    @property
    def evaluated(self) -> int:
        return len(self.rows)


def parse_pd(text: str) -> list[str]:
    """``off,1:3,all`` -> its words, each ``off``, ``all`` or ``P:D`` (whole numbers >= 1).

    Raises:
        InputError: naming ``--pd-values``.
    """
    out = [x.strip().lower() for x in text.split(",") if x.strip()]
    for x in out:
        if x in ("off", "all"):
            continue
        m = re.fullmatch(r"(\d+):(\d+)", x)
        if not m or min(int(m[1]), int(m[2])) < 1:
            raise InputError(
                f"expected off, all or P:D (prefill and decode replicas, each >= 1), got {x!r}", where="--pd-values"
            )
    if not out:
        raise InputError("expected off, all or P:D values separated by commas", where="--pd-values")
    return out


def _splits(pd: tuple[str, ...], replicas: int) -> list[tuple[int, int] | None]:
    out: list[tuple[int, int] | None] = []
    for x in pd:
        if x == "off":
            out.append(None)
        elif x == "all":
            out.extend((p, replicas - p) for p in range(1, replicas))
        else:
            a, b = (int(v) for v in x.split(":"))
            if a + b == replicas:
                out.append((a, b))
    return list(dict.fromkeys(out))


def enumerate_serving(
    model: ModelConfig, gpu: str, space: ServingSpace, cluster: str | None = None, precision: str = "bf16"
) -> tuple[list[ServingPoint], Counter[str]]:
    """The points of ``space`` whose replica ``model`` takes (heads, layers, experts) and whose
    weights leave room for a KV cache on ``gpu``; the rest counted by reason.

    Raises:
        InputError: an unknown scheduler, or nothing left (naming the commonest reason).
    """
    for s in space.scheduler:
        scheduler_class(s)
    rejected: Counter[str] = Counter()
    points: list[ServingPoint] = []
    fits: dict[tuple[int, int, int], str | None] = {}
    for g, tp, pp, ep in itertools.product(space.gpus, space.tp, space.pp, space.ep):
        per = tp * pp
        if g % per:
            rejected["TP x PP does not divide the GPUs"] += 1
            continue
        key = (tp, pp, ep)
        if key not in fits:
            try:
                timer = step_timer(model, gpu, tp, pp, ep, precision, cluster)
                fits[key] = (
                    None
                    if timer.kv_capacity_bytes >= timer.kv_bytes_per_token * 16
                    else "the weights leave no room for a KV cache"
                )
            except InputError as e:
                fits[key] = re.sub(r"\d+", "N", e.message.replace(model.name, "the model"))
        if fits[key] is not None:
            rejected[fits[key]] += 1  # type: ignore[index]
            continue
        replicas = g // per
        splits = _splits(space.pd, replicas)
        if not splits:
            rejected["no P/D split of the values makes the replicas"] += 1
        for split, sched in itertools.product(splits, space.scheduler):
            for chunk in space.chunk if sched in CHUNKED else (None,):
                points.append(ServingPoint(g, tp, pp, ep, replicas, split, sched, chunk))
    points = list(dict.fromkeys(points))
    if not points:
        worst = ", ".join(f"{n:,} x {r}" for r, n in rejected.most_common(3)) or "the space is empty"
        raise InputError(
            f"no way to serve {model.name} is left on {', '.join(map(str, space.gpus))} GPUs: {worst}",
            where="search space",
        )
    return points, rejected


def serve_command(model_arg: str, gpu: str, cluster: str | None, pt: ServingPoint, w: RequestMix) -> str:
    """The ``podsim serve-llm --find-capacity`` command line of a point."""
    parts = ["podsim serve-llm", model_arg, f"--gpu {gpu}", f"--tp {pt.tp}"]
    if pt.pp > 1:
        parts.append(f"--pp {pt.pp}")
    if pt.ep > 1:
        parts.append(f"--ep {pt.ep}")
    parts.append(f"--pd {pt.pd[0]}:{pt.pd[1]}" if pt.pd else f"--replicas {pt.replicas}")
    parts.append(f"--scheduler {pt.scheduler}")
    if pt.chunk is not None:
        parts.append(f"--{scheduler_class(pt.scheduler).chunk_flag} {pt.chunk}")
    if w.router != DEFAULT_ROUTER:
        parts.append(f"--router {w.router}")
    parts.append(f"--workload {w.spec}")
    if w.requests is not None:
        parts.append(f"--requests {w.requests}")
    if w.max_context is not None:
        parts.append(f"--max-context {w.max_context}")
    parts += [f"--slo-{k} {v:g}" for k, v in (("ttft", w.slo_ttft_s), ("tpot", w.slo_tpot_s)) if v is not None]
    if w.target != 0.99:
        parts.append(f"--capacity-target {w.target:g}")
    if cluster:
        parts.append(f"--cluster {cluster}")
    return " ".join(parts + ["--find-capacity"])


#: (model, model argument, GPU, cluster, point, requests, price per GPU-hour or None)
Task = tuple[ModelConfig, str, str, "str | None", ServingPoint, RequestMix, "float | None"]


def evaluate_point(task: Task) -> dict[str, Any]:
    """One point's capacity and the run at it (a worker's task; an error becomes a row's
    ``error``)."""
    model, model_arg, gpu, cluster, pt, w, price = task
    row = pt.as_row()
    row["command"] = serve_command(model_arg, gpu, cluster, pt, w)
    try:
        flag = scheduler_class(pt.scheduler).chunk_flag
        cfg = ServeConfig(
            replicas=pt.replicas,
            scheduler=pt.scheduler,
            pd=pt.pd,
            router=w.router,
            max_batched_tokens=pt.chunk if flag == "max-batched-tokens" else None,
            chunk_size=pt.chunk if flag == "chunk-size" else None,
            max_context=w.max_context or model.seq_len,
            slo_ttft_s=w.slo_ttft_s,
            slo_tpot_s=w.slo_tpot_s,
        )
        serving = prepare(ReplicaSpec(model, gpu, pt.tp, pt.pp, pt.ep, cluster=cluster), cfg, PDLink())
        requests, gen, _ = workload(w.spec, w.requests, cfg.max_context)
        cap = serving.capacity(requests, gen, w.target)
    except PodsimError as e:
        return dict(row, error=str(e))
    mean_output = sum(r.output_tokens for r in requests) / len(requests)
    tps = cap.qps * mean_output
    d = cap.result.stats() if cap.result is not None else {}
    row.update(
        {
            "steady": cap.result is not None and transient_note(cap.result) is None,
            "capacity_qps": cap.qps,
            "capacity_qps_per_gpu": cap.qps / pt.gpus,
            "tokens_per_s": tps,
            "tokens_per_s_per_gpu": tps / pt.gpus,
            "ttft_p99_s": d.get("ttft_p99_s"),
            "tpot_p99_s": d.get("tpot_p99_s"),
            "slo_attainment": d.get("slo_attainment"),
            "cost_per_mtok_usd": usd_per_mtok(pt.gpus, price, tps) if price is not None else None,
            "error": None,
        }
    )
    return row


def _rank(objective: str) -> Callable[[dict[str, Any]], tuple[int, float]]:
    def key(r: dict[str, Any]) -> tuple[int, float]:
        if r.get("error") or not r.get("capacity_qps"):
            return (1, 0.0)
        if objective == "cost":
            return (0, r["cost_per_mtok_usd"])
        return (0, -(r["capacity_qps_per_gpu"] if objective == "capacity" else r["tokens_per_s_per_gpu"]))

    return key


def search_serving(
    model: ModelConfig,
    model_arg: str,
    gpu: str,
    space: ServingSpace,
    mix: RequestMix,
    objective: str = "capacity",
    cluster: str | None = None,
    gpu_hour_usd: float | None = None,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ServingSearchResult:
    """Every point of ``space`` that can serve ``model`` on ``gpu``, each at its capacity under
    ``mix``'s SLOs, ranked by ``objective`` (module docstring).

    Raises:
        InputError: an unknown objective, a cost objective without a price, no SLO, or nothing
            left to try.
    """
    if objective not in SERVING_OBJECTIVES:
        raise InputError(
            f"a serving search ranks by {', '.join(SERVING_OBJECTIVES)}, not {objective!r}", where="--objective"
        )
    if objective == "cost" and gpu_hour_usd is None:
        raise InputError("the cost objective needs the price of a GPU-hour: --gpu-hour-price USD", where="--objective")
    if mix.slo_ttft_s is None and mix.slo_tpot_s is None:
        raise InputError(
            "a serving search finds each point's capacity under SLOs: give --slo-ttft S and/or --slo-tpot S",
            where="--workload",
        )
    if not 0 < mix.target <= 1:
        raise InputError(f"the SLO attainment target must be in (0, 1], got {mix.target}", where="--capacity-target")
    load_requests(mix.spec, 1)  # a bad workload fails once, here, not in every worker
    points, rejected = enumerate_serving(model, gpu, space, cluster)
    tasks: list[Task] = [(model, model_arg, gpu, cluster, pt, mix, gpu_hour_usd) for pt in points]
    rows: list[dict[str, Any]] = []
    for _, row in run_tasks(evaluate_point, tasks, workers, ray_address):
        rows.append(row)
        if progress is not None:
            progress(len(rows), len(tasks))
    rows.sort(key=_rank(objective))
    return ServingSearchResult(rows, rejected)
