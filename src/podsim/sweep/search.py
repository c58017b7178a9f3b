"""``podsim search``: evaluate every training layout of a space and rank them (issue #15; first
part: local worker processes, the analytical or flow backend, no results store yet).

Each layout that :func:`~podsim.sweep.space.enumerate_layouts` keeps is simulated as ``podsim llm``
would (:func:`podsim.llm.run.simulate_training`), in a pool of worker processes, and ranked by
the objective: ``tokens`` (tokens per second, highest first), ``mfu``, ``time`` (iteration
time, lowest first) or ``cost`` (US dollars per million tokens at a given price per GPU-hour,
lowest first: ``price x gpus x iteration time / 3600 / tokens per iteration x 10^6``).  Every row carries the ``podsim llm`` command line that reproduces it.
Units: s, GiB, tokens/s.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError
from ..llm.layout import Layout
from ..llm.model import ModelConfig, from_hf_config, get_model
from .space import Space, enumerate_layouts

OBJECTIVES = ("tokens", "mfu", "time", "cost")


@dataclass
class SearchResult:
    """Ranked rows (best first), how many layouts were evaluated, and the rejected ones by reason."""

    rows: list[dict[str, Any]]
    evaluated: int
    rejected: Counter[str]
    objective: str
    reused: int = 0   #: rows a results store already held (not evaluated again)


def load_model(model: str | None, model_config: str | None) -> ModelConfig:
    """A zoo model by name, or one from a HuggingFace-style config.

    Raises:
        InputError: neither or both given, or an unknown name / bad file.
    """
    if (model is None) == (model_config is None):
        raise InputError("give --model NAME or --model-config FILE", where="--model")
    return get_model(model) if model is not None else from_hf_config(model_config)  # type: ignore[arg-type]


def llm_command(model_arg: str, layout: Layout, gpu: str, cluster: str | None, backend: str) -> str:
    """The ``podsim llm`` command line that simulates ``layout`` (``model_arg``: ``--model NAME``
    or ``--model-config FILE``)."""
    parts = ["podsim llm", model_arg, f"--gpu {gpu}", f"--gpus {layout.gpus}", f"--tp {layout.tp}",
             f"--pp {layout.pp}", f"--vpp {layout.vpp}", f"--cp {layout.cp}", f"--ep {layout.ep}",
             f"--global-batch {layout.global_batch}", f"--micro-batch {layout.micro_batch}",
             f"--seq-len {layout.seq_len}", f"--recompute {layout.recompute}"]
    if layout.sequence_parallel:
        parts.append("--sequence-parallel")
    if layout.distributed_optimizer:
        parts.append("--distributed-optimizer")
    if layout.interleaved:
        parts.append("--schedule interleaved")
    if cluster:
        parts.append(f"--cluster {cluster}")
    parts.append(f"--backend {backend}")
    return " ".join(parts)


def _evaluate(args: tuple[ModelConfig, Layout, str, str | None, str, str]) -> dict[str, Any]:
    """One layout, simulated (a worker's task)."""
    from ..llm.run import simulate_training
    model, layout, gpu, cluster, backend, model_arg = args
    r = simulate_training(model, layout, gpu=gpu, cluster=cluster, backend=backend, record_timeline=False)
    d = r.to_dict()
    return {"layout": d["layout"], "tokens_per_s": d["tokens_per_s"], "mfu": d["mfu"],
            "iteration_time_s": d["iteration_time_s"], "memory_peak_gib": d["memory_peak_gib"],
            "breakdown": d["breakdown"], "command": llm_command(model_arg, layout, gpu, cluster, backend)}


def cost_per_mtok(row: dict[str, Any], gpu_hour_usd: float) -> float:
    """US dollars per million tokens of a row at ``gpu_hour_usd`` a GPU-hour."""
    lay = row["layout"]
    tokens = lay["global_batch"] * lay["seq_len"]
    return gpu_hour_usd * lay["gpus"] * row["iteration_time_s"] / 3600 / tokens * 1e6


def _key(objective: str) -> Callable[[dict[str, Any]], float]:
    if objective == "cost":
        return lambda r: r["cost_per_mtok_usd"]
    if objective == "tokens":
        return lambda r: -r["tokens_per_s"]
    if objective == "mfu":
        return lambda r: -r["mfu"]
    return lambda r: r["iteration_time_s"]


def search(model: ModelConfig, model_arg: str, space: Space, gpu: str, gpu_memory_gib: float,
           cluster: str | None = None, backend: str = "analytical", objective: str = "tokens",
           workers: int | None = None, progress: Callable[[int, int], None] | None = None,
           store: str | None = None, gpu_hour_usd: float | None = None) -> SearchResult:
    """Evaluate every layout of ``space`` that fits and rank them by ``objective``.

    ``workers``: worker processes (default: the CPUs, at most 8; 1 evaluates in this process).
    ``store``: a results store (:mod:`podsim.sweep.store`): each evaluated layout is added as it
    finishes, and layouts it already holds are taken from it, not evaluated again.
    ``gpu_hour_usd``: the price of a GPU-hour; rows then carry ``cost_per_mtok_usd`` (needed by
    the ``cost`` objective).

    Raises:
        InputError: for an unknown objective, or a space with nothing left (see
            :func:`enumerate_layouts`).
    """
    from dataclasses import asdict

    from .store import Store, point_key
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}",
                         where="--objective")
    if objective == "cost" and gpu_hour_usd is None:
        raise InputError("the cost objective needs the price of a GPU-hour: --gpu-hour-price USD",
                         where="--objective")
    if gpu_hour_usd is not None and not gpu_hour_usd > 0:
        raise InputError(f"a GPU-hour must cost more than 0, got {gpu_hour_usd:g}", where="--gpu-hour-price")
    e = enumerate_layouts(model, space, gpu_memory_gib)
    keys = [point_key(model.name, gpu, cluster, backend, asdict(lay)) for lay in e.layouts]
    db = Store(store) if store else None
    try:
        done = db.keys() if db else set()
        rows = db.rows(set(keys) & done) if db else []
        reused = len(rows)
        todo = [(k, (model, lay, gpu, cluster, backend, model_arg)) for k, lay in zip(keys, e.layouts) if k not in done]
        n = workers or min(8, os.cpu_count() or 1)

        def take(key: str, row: dict[str, Any]) -> None:
            rows.append(row)
            if db:
                db.add(key, model.name, gpu, cluster, backend, row)
            if progress:
                progress(len(rows), len(keys))
        if n <= 1:
            for key, task in todo:
                take(key, _evaluate(task))
        else:
            with ProcessPoolExecutor(max_workers=n) as pool:
                chunk = max(1, len(todo) // (4 * n))
                for (key, _), row in zip(todo, pool.map(_evaluate, [t for _, t in todo], chunksize=chunk)):
                    take(key, row)
    finally:
        if db:
            db.close()
    if gpu_hour_usd is not None:
        for r in rows:
            r["cost_per_mtok_usd"] = round(cost_per_mtok(r, gpu_hour_usd), 6)
    rows.sort(key=_key(objective))
    return SearchResult(rows, len(rows) - reused, e.rejected, objective, reused)
