"""``podsim search``: rank every training layout of a space.

Three passes over the layouts that :func:`~podsim.sweep.space.enumerate_layouts` keeps:

1. **screen**: every layout's iteration time estimated in closed form
   (:class:`podsim.llm.estimate.LayoutEstimator`: the same kernel and collective times as the
   simulation, shared across layouts; within a few per cent of it), in batches on worker
   processes or Ray;
2. **simulate**: the best ``simulate_top`` estimated layouts simulated exactly as ``podsim llm``
   does (:func:`podsim.api.train.simulate_training`, with the timeline for the time breakdown);
   when the space is no larger than that, every layout is simulated and the estimate is skipped;
3. **flow**: the best ``flow_top`` of those re-run with the flow backend (congestion), reported
   beside the analytical figures.

Rows are ranked by the objective: ``tokens`` (tokens per second, highest first), ``mfu``,
``time`` (iteration time, lowest first) or ``cost`` (US dollars per million tokens at a price
per GPU-hour, lowest first: ``price x gpus x iteration time / 3600 / tokens per iteration x
10^6``); simulated rows rank before estimated ones.  Row fields: ``layout`` (as ``podsim llm
--json``), ``method`` (``simulated`` or ``estimated``), ``tokens_per_s``, ``mfu`` (0-1),
``iteration_time_s`` (s), ``memory_peak_gib`` (GiB), ``memory_per_stage`` (GiB, simulated rows),
``breakdown`` (``compute_s``, ``exposed_comm_s``, ``bubble_s``, ``other_s``: s; simulated rows),
``command`` (the ``podsim llm`` command line that reproduces the row), ``cost_per_mtok_usd``
(with a price), ``time_to_train_h`` (hours to train a given number of tokens), ``flow``
(``iteration_time_s``, ``tokens_per_s``, ``mfu``, ``command``: the flow re-run, on the best rows),
``goodput`` (with goodput options, on simulated rows: ``podsim goodput --json``'s fields for the
row's layout and step, :func:`add_goodput`).

Under a software stack (:attr:`Space.stack <podsim.sweep.space.Space.stack>`) every pass runs
each layout as ``podsim llm --stack`` does: the layouts carry the stack's rules
(:func:`~podsim.sweep.space.enumerate_layouts`), the screen's estimator and the simulations time
kernels with the GPU's step parameters under the stack (:meth:`podsim.llm.stack.Stack.for_gpu`),
and each row's ``command`` names the stack (``--stack NAME``, or its file) unless it is the default.
"""

from __future__ import annotations

import math
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import yaml

from ..api.goodput import DEFAULT_DAYS, goodput_of_step
from ..api.train import simulate_training
from ..errors import InputError, yaml_error
from ..fileio import load_yaml, read_text
from ..hardware.gpu import get_gpu
from ..jobs.reliability import GoodputOptions
from ..jobs.search import FLOW_TOP, SIMULATE_TOP
from ..llm.estimate import LayoutEstimator
from ..llm.flops import iteration_flops
from ..llm.layout import Layout
from ..llm.model import ModelConfig, load_model  # noqa: F401 (load_model: re-exported)
from ..llm.stack import Stack
from ..llm.training import default_cluster, layout_dict
from ..report.goodput import goodput_row_json, reliability_json
from ..stacks.stack import DEFAULT_TRAINING, SoftwareStack
from .executors import default_workers, run_tasks
from .space import Space, enumerate_layouts
from .store import Store, point_key

OBJECTIVES = ("tokens", "mfu", "time", "cost")

#: ``progress(phase, done, total)``: phase is ``screen``, ``simulate`` or ``flow``
Progress = Callable[[str, int, int], None]


@dataclass
class SearchResult:
    """Ranked rows (best first), how many layouts were evaluated, and the rejected ones by reason."""

    rows: list[dict[str, Any]]
    evaluated: int
    rejected: Counter[str]
    objective: str
    reused: int = 0  #: rows a results store already held (not evaluated again)
    simulated: int = 0  #: rows simulated exactly (the rest estimated)
    flow: int = 0  #: rows re-run with the flow backend
    phases_s: dict[str, float] = field(default_factory=dict)  #: wall time of each pass (s)
    #: what the stack's rules set on the best row's layout (field -> value; empty without a stack)
    applied: dict[str, Any] = field(default_factory=dict)
    #: with goodput: the failure rates used and their sources (``podsim goodput --json``'s ``reliability``)
    reliability: dict[str, Any] | None = None
    #: the simulated rows are ranked by their expected time to train with failures
    ranked_by_goodput: bool = False


def stack_arg(software: SoftwareStack | None) -> str | None:
    """``podsim llm --stack``'s value that names ``software`` (a preset's name, a file's path);
    None for none and for the default stack (a command then leaves the flag out)."""
    if software is None:
        return None
    if software.origin == "preset":
        return None if software.name == DEFAULT_TRAINING else software.name
    return software.origin


def llm_command(
    model_arg: str, layout: Layout, gpu: str, cluster: str | None, backend: str, stack: str | None = None
) -> str:
    """The ``podsim llm`` command line that simulates ``layout`` (``model_arg``: ``--model NAME``
    or ``--model-config FILE``; ``stack``: ``--stack``'s value, None to leave it out)."""
    parts = [
        "podsim llm",
        model_arg,
        f"--gpu {gpu}",
        f"--gpus {layout.gpus}",
        f"--tp {layout.tp}",
        f"--pp {layout.pp}",
        f"--vpp {layout.vpp}",
        f"--cp {layout.cp}",
        f"--ep {layout.ep}",
        *([f"--etp {layout.etp}"] if layout.etp is not None else []),
        f"--global-batch {layout.global_batch}",
        f"--micro-batch {layout.micro_batch}",
        f"--seq-len {layout.seq_len}",
        f"--recompute {layout.recompute}",
    ]
    if layout.sequence_parallel:
        parts.append("--sequence-parallel")
    if layout.distributed_optimizer:
        parts.append("--distributed-optimizer")
    if layout.zero:
        parts.append(f"--zero {layout.zero}")
    if layout.interleaved:
        parts.append("--schedule interleaved")
    if layout.tp_overlap != "te":
        parts.append(f"--tp-overlap {layout.tp_overlap}")
    if not layout.overlap_grad_reduce:
        parts.append("--no-overlap-grad-reduce")
    if not layout.overlap_param_gather:
        parts.append("--no-overlap-param-gather")
    if layout.precision != "bf16":
        parts.append(f"--precision {layout.precision}")
    if cluster:
        parts.append(f"--cluster {cluster}")
    if stack:
        parts.append(f"--stack {shlex.quote(stack)}")
    parts.append(f"--backend {backend}")
    return " ".join(parts)


# -- the passes' tasks (module-level: they run in worker processes or on Ray) -------------------

#: (model, model argument, GPU, cluster, layouts, their peak memory per GPU in GiB, the stack)
Batch = tuple[ModelConfig, str, str, "str | None", list[Layout], list[float], "SoftwareStack | None"]


def _screen(task: Batch) -> list[dict[str, Any]]:
    """Estimated rows of a batch of layouts (one estimator shared by the batch)."""
    model, model_arg, gpu, cluster, layouts, memory_gib, software = task
    spec_gpu = get_gpu(gpu)
    cl = default_cluster(spec_gpu, None, None, cluster)
    est = LayoutEstimator(model, spec_gpu, cl, Stack.for_gpu(spec_gpu.key, software))
    named = stack_arg(software)
    rows = []
    for lay, mem in zip(layouts, memory_gib):
        try:
            ns = est.iteration_ns(lay)
        except ValueError:  # ZeRO-3: simulated instead
            ns = simulate_training(
                model, lay, gpu=spec_gpu, cluster=est.cluster, record_timeline=False, software=software
            ).result.finish_ns
        s = ns / 1e9
        mf, _ = iteration_flops(model, lay)
        rows.append(
            {
                "layout": layout_dict(model, lay),
                "method": "estimated",
                "tokens_per_s": round(lay.global_batch * lay.seq_len / s, 3),
                "mfu": round(mf / s / lay.gpus / 1e12 * 1000 / spec_gpu.peak(lay.compute_dtype), 5),
                "iteration_time_s": round(s, 9),
                "memory_peak_gib": round(mem, 4),
                "breakdown": None,
                "command": llm_command(model_arg, lay, gpu, cluster, "analytical", named),
            }
        )
    return rows


def _simulate(task: tuple[ModelConfig, Layout, str, str | None, str, str, SoftwareStack | None]) -> dict[str, Any]:
    """One layout simulated as ``podsim llm`` does, with its time breakdown."""
    model, layout, gpu, cluster, backend, model_arg, software = task
    r = simulate_training(
        model,
        layout,
        gpu=gpu,
        cluster=cluster,
        backend=backend,
        record_timeline=backend == "analytical",
        software=software,
    )
    d = r.to_dict()
    return {
        "layout": d["layout"],
        "method": "simulated",
        "tokens_per_s": d["tokens_per_s"],
        "mfu": d["mfu"],
        "iteration_time_s": d["iteration_time_s"],
        "memory_peak_gib": d["memory_peak_gib"],
        "memory_per_stage": d["memory_per_stage"],
        "breakdown": d["breakdown"],
        "command": llm_command(model_arg, layout, gpu, cluster, backend, stack_arg(software)),
    }


def gpu_hour_price(gpu: str, path: str | None = None) -> float:
    """The price of one GPU-hour of ``gpu`` in US dollars, from ``path`` (a YAML file of
    ``{gpu key: {usd_per_gpu_hour: ...}}``) or podsim's ``hardware/prices.yaml``.

    Raises:
        InputError: the file has no price for the GPU, or is not such a file.
    """

    key = get_gpu(gpu).key
    where = path or "podsim/hardware/prices.yaml"
    text = read_text(path, "price file") if path else (resources.files("podsim.hardware") / "prices.yaml").read_text()
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, where, column=False) from None
    if not isinstance(doc, dict):
        raise InputError("expected a mapping of GPU keys to {usd_per_gpu_hour: USD}", where, "--gpu-prices")
    prices = {}
    for k, v in doc.items():
        try:
            prices[get_gpu(str(k)).key] = v
        except InputError as e:
            raise InputError(e.message, where, "--gpu-prices") from None
    entry = prices.get(key)
    if entry is None:
        raise InputError(
            f"no price for the {key} here (it has {', '.join(map(str, doc)) or 'none'}): give "
            "--gpu-hour-price USD, or add it to the file",
            where,
            "--gpu-prices",
        )
    price = entry.get("usd_per_gpu_hour") if isinstance(entry, dict) else None
    if not isinstance(price, (int, float)) or isinstance(price, bool) or not 0 < price < math.inf:
        raise InputError(f"{key}: usd_per_gpu_hour must be a finite number > 0, got {price!r}", where, "--gpu-prices")
    return float(price)


def cost_per_mtok(row: dict[str, Any], gpu_hour_usd: float) -> float:
    """US dollars per million tokens of a row at ``gpu_hour_usd`` a GPU-hour."""
    lay = row["layout"]
    tokens = lay["global_batch"] * lay["seq_len"]
    return gpu_hour_usd * lay["gpus"] * row["iteration_time_s"] / 3600 / tokens * 1e6


def _time_with_failures(row: dict[str, Any]) -> float:
    """A row's expected time to train with failures (h; rows without a goodput last)."""
    g = row.get("goodput")
    return g["expected_time_to_train_h"] if g else math.inf


def add_goodput(
    rows: list[tuple[dict[str, Any], Layout]],
    model: ModelConfig,
    gpu: str,
    cluster: str | None,
    options: GoodputOptions,
) -> dict[str, Any] | None:
    """Add to each simulated row its ``goodput`` (:func:`~podsim.report.goodput.goodput_row_json`
    of :func:`~podsim.api.goodput.goodput_of_step` on the row's step time: no second simulation)
    for the row's own GPU count; a row the goodput model refuses gets ``goodput`` None and
    ``goodput_error``.  Returns the rates used (None without rows).

    Raises:
        InputError: the goodput model refuses every row (its first message: a bad option is
            one error, not one per row)."""
    spec_gpu = get_gpu(gpu)
    cl = default_cluster(spec_gpu, None, None, cluster)
    reliability, first = None, None
    for row, lay in rows:
        try:
            g = goodput_of_step(options, model, lay, spec_gpu, cl, row["iteration_time_s"], DEFAULT_DAYS)
        except InputError as e:
            first = first or e
            row["goodput"], row["goodput_error"] = None, str(e)
            continue
        row["goodput"] = goodput_row_json(g)
        reliability = reliability or reliability_json(g)
    if first is not None and reliability is None:
        raise first
    return reliability


def _key(objective: str) -> Callable[[dict[str, Any]], float]:
    if objective == "cost":
        return lambda r: r["cost_per_mtok_usd"]
    if objective == "tokens":
        return lambda r: -r["tokens_per_s"]
    if objective == "mfu":
        return lambda r: -r["mfu"]
    return lambda r: r["iteration_time_s"]


def _batches(layouts: list[Layout], memory_gib: list[float], workers: int) -> Iterator[list[int]]:
    """Indices of ``layouts`` in batches of layouts that share their layer costs (same TP, CP,
    EP, micro-batch, recomputation ...), a few batches per worker."""
    order = sorted(
        range(len(layouts)),
        key=lambda i: (
            layouts[i].gpus,
            layouts[i].tp,
            layouts[i].cp,
            layouts[i].ep,
            layouts[i].expert_tp,
            layouts[i].micro_batch,
            layouts[i].sequence_parallel,
            layouts[i].recompute,
            layouts[i].tp_overlap,
            layouts[i].pp,
        ),
    )
    size = max(16, min(400, len(order) // max(1, 4 * workers) + 1))
    for a in range(0, len(order), size):
        yield order[a : a + size]


def search(
    model: ModelConfig,
    model_arg: str,
    space: Space,
    gpu: str,
    gpu_memory_gib: float,
    cluster: str | None = None,
    backend: str = "analytical",
    objective: str = "tokens",
    workers: int | None = None,
    progress: Progress | None = None,
    store: str | None = None,
    gpu_hour_usd: float | None = None,
    simulate_top: int = SIMULATE_TOP,
    flow_top: int = FLOW_TOP,
    ray_address: str | None = None,
    train_tokens: float | None = None,
    goodput: GoodputOptions | None = None,
) -> SearchResult:
    """Evaluate every layout of ``space`` that fits and rank them by ``objective`` (see the
    module docstring for the three passes).

    ``workers``: worker processes (default: the CPUs, at most 8; 1 evaluates in this process);
    ``ray_address``: run on Ray instead (:func:`~podsim.sweep.executors.run_tasks`).
    ``store``: a results store (:mod:`podsim.sweep.store`): each evaluated row is added as it
    finishes, and rows it already holds are taken from it, not evaluated again.
    ``gpu_hour_usd``: the price of a GPU-hour; rows then carry ``cost_per_mtok_usd`` (needed by
    the ``cost`` objective).  ``train_tokens``: rows then carry ``time_to_train_h``, the hours to
    train that many tokens (the ``time`` objective's order: the iteration time's, as every layout
    of a search takes the same tokens per iteration).  ``goodput``: the simulated rows then carry
    ``goodput`` (:func:`add_goodput`: at their own GPU count); with ``train_tokens`` the ``time``
    objective ranks them by their expected time to train with failures, checkpoints and restarts
    (the screen still picks them by iteration time).  ``simulate_top``: layouts simulated exactly after the screen (all
    of them when there are no more); ``flow_top``: of those, re-run with the flow backend.
    ``space.stack``: the software stack every layout runs on (see the module docstring); a
    results store keeps the rows of another than the default stack apart.

    Raises:
        InputError: for an unknown objective, or a space with nothing left (see
            :func:`enumerate_layouts`).
    """

    if objective not in OBJECTIVES:
        raise InputError(
            f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}", where="--objective"
        )
    if objective == "cost" and gpu_hour_usd is None:
        raise InputError("the cost objective needs the price of a GPU-hour: --gpu-hour-price USD", where="--objective")
    if train_tokens is not None and not train_tokens > 0:
        raise InputError(f"the tokens to train must be more than 0, got {train_tokens:g}", where="--train-tokens")
    if gpu_hour_usd is not None and not gpu_hour_usd > 0:
        raise InputError(f"a GPU-hour must cost more than 0, got {gpu_hour_usd:g}", where="--gpu-hour-price")
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    e = enumerate_layouts(model, space, gpu_memory_gib)
    phases["enumerate_s"] = time.perf_counter() - t0
    n_workers = workers or default_workers()
    rank = _key(objective)
    software = space.stack
    # a store's key names the stack, unless it is the default (whose keys are those of before stacks)
    ident = None
    if software is not None and stack_arg(software) is not None:
        ident = {"name": software.name, "values": software.values}

    def finish_row(row: dict[str, Any]) -> dict[str, Any]:
        if gpu_hour_usd is not None:
            row["cost_per_mtok_usd"] = round(cost_per_mtok(row, gpu_hour_usd), 6)
        if train_tokens is not None:
            row["time_to_train_h"] = round(train_tokens / row["tokens_per_s"] / 3600, 6)
        return row

    db = Store(store) if store else None
    try:
        done = db.keys() if db else set()
        reused = 0

        def key_of(lay: Layout, method: str) -> str:
            point = asdict(lay) if ident is None else {**asdict(lay), "stack": ident}
            return point_key(model.name, gpu, cluster, method, point)

        def run(
            phase: str,
            fn: Callable[[Any], Any],
            tasks: list[Any],
            counts: list[int],
            keys: list[list[str]],
            method: str,
            out: dict[str, dict[str, Any]],
            total: int,
            already: int,
        ) -> None:
            finished = already
            for i, got in run_tasks(fn, tasks, n_workers, ray_address):
                for k, row in zip(keys[i], got if isinstance(got, list) else [got]):
                    out[k] = row
                    if db:
                        db.add(k, model.name, gpu, cluster, method, row)
                finished += counts[i]
                if progress:
                    progress(phase, finished, total)

        # 1. screen (skipped when every layout is simulated anyway)
        screened: dict[str, dict[str, Any]] = {}
        exact_all = len(e.layouts) <= simulate_top
        if exact_all:
            candidates = list(range(len(e.layouts)))
        else:
            t0 = time.perf_counter()
            skeys = [key_of(lay, "estimate") for lay in e.layouts]
            for k in skeys:
                if k in done:
                    screened[k] = db.row(k)  # type: ignore[union-attr]
            reused += len(screened)
            todo = [i for i, k in enumerate(skeys) if k not in screened]
            batches = [
                [todo[j] for j in b]
                for b in _batches([e.layouts[i] for i in todo], [e.memory_gib[i] for i in todo], n_workers)
            ]
            tasks = [
                (model, model_arg, gpu, cluster, [e.layouts[i] for i in b], [e.memory_gib[i] for i in b], software)
                for b in batches
            ]
            run(
                "screen",
                _screen,
                tasks,
                [len(b) for b in batches],
                [[skeys[i] for i in b] for b in batches],
                "estimate",
                screened,
                len(e.layouts),
                len(screened),
            )
            phases["screen_s"] = time.perf_counter() - t0
            est_rows = [finish_row(screened[k]) for k in skeys]
            candidates = sorted(range(len(e.layouts)), key=lambda i: rank(est_rows[i]))[:simulate_top]
        # 2. simulate the candidates exactly
        t0 = time.perf_counter()
        simulated: dict[str, dict[str, Any]] = {}
        xkeys = [key_of(e.layouts[i], backend) for i in candidates]
        for k in xkeys:
            if k in done:
                simulated[k] = db.row(k)  # type: ignore[union-attr]
        reused += len(simulated)
        todo_x = [(k, i) for k, i in zip(xkeys, candidates) if k not in simulated]
        run(
            "simulate",
            _simulate,
            [(model, e.layouts[i], gpu, cluster, backend, model_arg, software) for _, i in todo_x],
            [1] * len(todo_x),
            [[k] for k, _ in todo_x],
            backend,
            simulated,
            len(candidates),
            len(simulated),
        )
        phases["simulate_s"] = time.perf_counter() - t0
        reliability = None
        if goodput is not None:
            t0 = time.perf_counter()
            reliability = add_goodput(
                [(simulated[k], e.layouts[i]) for k, i in zip(xkeys, candidates)], model, gpu, cluster, goodput
            )
            phases["goodput_s"] = time.perf_counter() - t0
        by_goodput = goodput is not None and train_tokens is not None and objective == "time"
        rank_exact = _time_with_failures if by_goodput else rank
        exact = sorted((finish_row(simulated[k]) for k in xkeys), key=rank_exact)
        # the best row's layout (the first of the lowest, as the stable sort puts it first)
        best_i = candidates[min(range(len(xkeys)), key=lambda j: rank_exact(simulated[xkeys[j]]))] if xkeys else None
        # 3. the best again with the flow backend
        t0 = time.perf_counter()
        flow_n = min(flow_top, len(exact)) if backend == "analytical" else 0
        if flow_n:
            by_cmd = {r["command"]: r for r in exact}
            lays = {r["command"]: e.layouts[i] for r, i in zip((simulated[k] for k in xkeys), candidates)}
            best = exact[:flow_n]
            fkeys = [key_of(lays[r["command"]], "flow") for r in best]
            flows: dict[str, dict[str, Any]] = {k: db.row(k) for k in fkeys if k in done} if db else {}
            reused += len(flows)
            todo_f = [(k, r) for k, r in zip(fkeys, best) if k not in flows]
            run(
                "flow",
                _simulate,
                [(model, lays[r["command"]], gpu, cluster, "flow", model_arg, software) for _, r in todo_f],
                [1] * len(todo_f),
                [[k] for k, _ in todo_f],
                "flow",
                flows,
                flow_n,
                len(flows),
            )
            for k, r in zip(fkeys, best):
                f = flows[k]
                by_cmd[r["command"]]["flow"] = {
                    "iteration_time_s": f["iteration_time_s"],
                    "tokens_per_s": f["tokens_per_s"],
                    "mfu": f["mfu"],
                    "command": f["command"],
                }
        phases["flow_s"] = time.perf_counter() - t0
    finally:
        if db:
            db.close()
    chosen = set(candidates)
    rest = [] if exact_all else sorted((r for i, r in enumerate(est_rows) if i not in chosen), key=rank)
    rows = exact + rest
    applied = dict(e.applied[best_i]) if best_i is not None and e.applied else {}
    return SearchResult(
        rows,
        len(e.layouts),
        e.rejected,
        objective,
        reused,
        len(exact),
        flow_n,
        phases,
        applied,
        reliability,
        by_goodput,
    )
