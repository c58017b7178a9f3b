"""The runs a sweep can make (``run:`` in a sweep spec): ``llm``, ``goodput``, ``collective``,
``simulate``, ``serve`` and ``serve-llm``, each with its parameters (named as the subcommand's
flags, docs/sweep.md) and the metrics of one point, units in their names.

:func:`evaluate` runs one point under one what-if through podsim's API (never its command
line) and returns a flat dict of metrics, or ``{"error": message}`` when podsim refuses the
point (a layout the model cannot take, a GPU count the cluster cannot hold): one bad point does
not stop a sweep.  It is a module-level function of picklable arguments, for worker processes
and Ray.

Units: times in s (``_s``) or us (``_us``), bandwidths in GB/s = 10^9 B/s (``_gbps``), memory in
GiB (``_gib``), sizes in B (``bytes``), rates per second (``_per_s``, ``_rps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..api.collective import run_job
from ..api.goodput import GoodputResult, check_goodput_flags, goodput, goodput_of_training
from ..api.serve import serve
from ..api.serve_llm import serve_llm, with_hardware
from ..api.simulate import run_job as simulate_job
from ..api.train import train
from ..errors import InputError, PodsimError, unknown_key_error
from ..hardware.cluster import ClusterSpec, preset_names
from ..hardware.gpu import get_gpu
from ..jobs.collective import COLLECTIVE_PARAMS, CollectiveJob
from ..jobs.goodput import GOODPUT_PARAMS, GoodputJob
from ..jobs.serve import SERVE_PARAMS, ServeCommand
from ..jobs.serve_llm import SERVE_LLM_PARAMS, ServeLLMJob
from ..jobs.simulate import SIMULATE_PARAMS, SimulateJob
from ..jobs.train import TRAIN_PARAMS, TrainJob
from ..llm.model import get_model
from ..llm.training import default_cluster
from ..params import Param
from ..report.goodput import goodput_json
from ..report.serving import summarize
from ..serving.llm.deployment import parse_pair, usd_per_mtok
from ..serving.llm.requests import is_generator, parse_generator
from ..units import parse_bandwidth, parse_message_size
from .search import gpu_hour_price
from .whatif import CLUSTER_FIELDS, apply_cluster, apply_gpu

#: the largest integer or number a parameter may take
_MAX_INT = 2**31
_MAX_NUMBER = 1e15


@dataclass(frozen=True)
class RunKind:
    """A run a sweep can make: its parameters, which are required, its metrics (column ->
    DuckDB type, in table order), the metrics the printed table shows, and the what-if fields
    that apply to it."""

    name: str
    params: tuple[Param, ...]
    required: tuple[tuple[str, ...], ...]  #: each: exactly one of these names (usually one name)
    metrics: dict[str, str]
    shown: tuple[str, ...]
    gpu_fields: tuple[str, ...]
    cluster_fields: tuple[str, ...]
    describe: str = ""
    aliases: dict[str, str] = field(default_factory=dict)  #: other spellings the CLI takes -> name

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


#: a training run's goodput metrics (``run: goodput``, and ``run: llm`` given ``days`` or
#: ``train-tokens``): 0-1, hours, interruptions, seconds
GOODPUT_METRICS = {
    "goodput": "DOUBLE",
    "time_to_train_p10_h": "DOUBLE",
    "time_to_train_p50_h": "DOUBLE",
    "time_to_train_p90_h": "DOUBLE",
    "expected_time_to_train_h": "DOUBLE",
    "interruptions_expected": "DOUBLE",
    "checkpoint_interval_s": "DOUBLE",
    "optimal_checkpoint_interval_s": "DOUBLE",
    "mtbf_h": "DOUBLE",
}

LLM = RunKind(
    "llm",
    tuple(p for p in TRAIN_PARAMS if p.sweep),
    (("model", "model-config"), ("gpus",), ("global-batch",)),
    {
        "iteration_time_s": "DOUBLE",
        "tokens_per_s": "DOUBLE",
        "tokens_per_s_per_gpu": "DOUBLE",
        "model_tflops_per_gpu": "DOUBLE",
        "mfu": "DOUBLE",
        "memory_peak_gib": "DOUBLE",
        "memory_fits": "BOOLEAN",
        "dp": "BIGINT",
        "compute_s": "DOUBLE",
        "exposed_comm_s": "DOUBLE",
        "bubble_s": "DOUBLE",
        "other_s": "DOUBLE",
        "fault_cost_s": "DOUBLE",
        **GOODPUT_METRICS,
    },
    ("iteration_time_s", "tokens_per_s", "mfu", "memory_peak_gib", "memory_fits"),
    ("peak_scale", "peak_tflops", "hbm_bandwidth", "hbm_bandwidth_scale", "memory_gib"),
    CLUSTER_FIELDS,
    "one training iteration of an LLM under a parallel layout (podsim llm)",
    {a: p.name for p in TRAIN_PARAMS if p.sweep for a in p.aliases},
)

GOODPUT = RunKind(
    "goodput",
    tuple(p for p in GOODPUT_PARAMS if p.sweep),
    (("model", "model-config"), ("gpus",), ("global-batch",), ("days", "train-tokens")),
    {"step_time_s": "DOUBLE", **GOODPUT_METRICS},
    ("step_time_s", "goodput", "time_to_train_p50_h", "interruptions_expected", "optimal_checkpoint_interval_s"),
    LLM.gpu_fields,
    CLUSTER_FIELDS,
    "a training run's goodput and time to train under failures, checkpoints and restarts (podsim goodput)",
    {a: p.name for p in GOODPUT_PARAMS if p.sweep for a in p.aliases},
)

COLLECTIVE = RunKind(
    "collective",
    tuple(p for p in COLLECTIVE_PARAMS if p.sweep),
    (("collective",), ("cluster",), ("gpus",), ("size",)),
    {
        "bytes": "BIGINT",
        "time_us": "DOUBLE",
        "algbw_gbps": "DOUBLE",
        "busbw_gbps": "DOUBLE",
        "algorithm": "VARCHAR",
        "protocol": "VARCHAR",
        "servers": "BIGINT",
        "baseline_time_us": "DOUBLE",
    },
    ("bytes", "time_us", "busbw_gbps", "algorithm"),
    (),
    CLUSTER_FIELDS,
    "one collective of one size, as nccl-tests would time it (podsim collective)",
    {"name": "collective", "bytes": "size"},
)

SIMULATE = RunKind(
    "simulate",
    tuple(p for p in SIMULATE_PARAMS if p.sweep),
    (("workload-configuration",),),
    {
        "time_s": "DOUBLE",
        "num_ranks": "BIGINT",
        "compute_s": "DOUBLE",
        "comm_s": "DOUBLE",
        "exposed_comm_s": "DOUBLE",
        "fault_cost_s": "DOUBLE",
    },
    ("time_s", "compute_s", "exposed_comm_s"),
    (),
    CLUSTER_FIELDS,
    "a workload on a cluster or an ASTRA-sim machine (podsim simulate)",
    {
        "system": "system-configuration",
        "network": "network-configuration",
        **{a: p.name for p in SIMULATE_PARAMS if p.sweep for a in p.aliases},
    },
)

SERVE = RunKind(
    "serve",
    tuple(p for p in SERVE_PARAMS if p.sweep),
    (("workload", "closed-loop"), ("placement",)),
    {
        "num_requests": "BIGINT",
        "completed": "BIGINT",
        "dropped": "BIGINT",
        "latency_mean_s": "DOUBLE",
        "latency_p50_s": "DOUBLE",
        "latency_p90_s": "DOUBLE",
        "latency_p99_s": "DOUBLE",
        "slo_attainment": "DOUBLE",
        "throughput_rps": "DOUBLE",
        "makespan_s": "DOUBLE",
    },
    ("throughput_rps", "latency_mean_s", "latency_p99_s", "slo_attainment"),
    ("memory_gib",),
    ("preset", "gpus_per_node"),
    "inference serving: requests, placements, per-GPU queues (podsim serve)",
    {a: p.name for p in SERVE_PARAMS if p.sweep for a in p.aliases if a.replace("_", "-") != p.name},
)

SERVE_LLM = RunKind(
    "serve-llm",
    tuple(p for p in SERVE_LLM_PARAMS if p.sweep),
    (("model", "model-config"), ("workload",)),
    {
        "gpus": "BIGINT",
        "capacity_qps": "DOUBLE",
        "ttft_mean_s": "DOUBLE",
        "ttft_p99_s": "DOUBLE",
        "tpot_mean_s": "DOUBLE",
        "tpot_p99_s": "DOUBLE",
        "e2e_mean_s": "DOUBLE",
        "e2e_p99_s": "DOUBLE",
        "tokens_per_s": "DOUBLE",
        "tokens_per_s_per_gpu": "DOUBLE",
        "requests_per_s": "DOUBLE",
        "slo_attainment": "DOUBLE",
        "preemptions": "BIGINT",
        "mfu": "DOUBLE",
        "usd_per_gpu_hour": "DOUBLE",
        "cost_per_mtok_usd": "DOUBLE",
    },
    ("capacity_qps", "tokens_per_s", "ttft_p99_s", "tpot_p99_s", "slo_attainment", "cost_per_mtok_usd"),
    ("peak_scale", "peak_tflops", "hbm_bandwidth", "hbm_bandwidth_scale", "memory_gib"),
    CLUSTER_FIELDS,
    "LLM serving on replicas: continuous batching, a paged KV cache, schedulers, P/D (podsim serve-llm)",
    {a: p.name for p in SERVE_LLM_PARAMS if p.sweep for a in p.aliases},
)

#: run kind -> its definition
RUNS: dict[str, RunKind] = {r.name: r for r in (LLM, GOODPUT, COLLECTIVE, SIMULATE, SERVE, SERVE_LLM)}


# -- values ------------------------------------------------------------------------------------


def size_bytes(v: object, where: str | None = None) -> int:
    """A message size in bytes: an integer, ``1K`` / ``4M`` / ``1G`` (KiB, MiB, GiB, as
    nccl-tests and ``podsim collective -b`` read them) or a size with a unit (``16 MB`` = 16e6).

    Raises:
        InputError: for anything else or a size below 1 B.
    """
    n = parse_message_size(v, where=where)
    if n < 1:
        raise InputError(f"expected a size of at least 1 B, got {v!r}", where=where)
    return n


def _is_path_like(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json", ".txt", ".csv")) or "/" in name or "\\" in name


def resolve(path: str, base: str | None) -> str:
    """``path`` against ``base`` (the spec's folder) when relative."""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() or not base else Path(base) / p)


def check_value(run: RunKind, p: Param, v: object, base: str | None, source: str | None, where: str) -> object:
    """A parameter's value checked for its kind (see :class:`Param`) and, for names, against
    what podsim knows (models, GPUs, cluster presets, files); returns the plain value
    (lists as ``a,b,c``).

    Raises:
        InputError: naming ``where``, with the closest valid name for a misspelled one.
    """

    def bad(expected: str) -> InputError:
        return InputError(f"expected {expected}, got {v!r}", source, where)

    k = p.kind
    if k in ("count", "natural"):
        lo = 1 if k == "count" else 0
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= _MAX_INT:
            raise bad("a positive integer" if k == "count" else "an integer >= 0")
        return v
    if k in ("number", "nonneg"):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v <= _MAX_NUMBER
        if not ok or not (v > 0 if k == "number" else v >= 0):  # type: ignore[operator]
            raise bad("a finite number > 0" if k == "number" else "a finite number >= 0")
        return float(v)  # type: ignore[arg-type]
    if k == "bool":
        if not isinstance(v, bool):
            raise bad("true or false")
        return v
    if k == "choice":
        if not isinstance(v, str) or v not in p.choices:
            hint = (
                unknown_key_error(str(v), p.choices, None, "value").message
                if isinstance(v, str)
                else f"expected one of {', '.join(p.choices)}, got {v!r}"
            )
            raise InputError(hint, source, where)
        return v
    if k == "list":
        if isinstance(v, list) and v and all(isinstance(x, (int, float, str)) and not isinstance(x, bool) for x in v):
            return ",".join(str(x) for x in v)
        if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
            return str(v)
        raise bad("a comma-separated list or a YAML list")
    if k == "size":
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise bad("a size in bytes, such as 1048576, 1M or '16 MB'")
        try:
            size_bytes(v)
        except InputError as e:
            raise InputError(e.message, source, where) from None
        return v
    if k == "bandwidth":
        try:
            parse_bandwidth(v)
        except InputError as e:
            raise InputError(e.message, source, where) from None
        return v
    if k == "text":  # a number >= 0 or a word (host-overhead-ms: 0.5, eager, cuda-graphs)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)) or (isinstance(v, str) and not v.strip()):
            raise bad("a number or a word")
        if isinstance(v, (int, float)) and not (math.isfinite(v) and 0 <= v <= _MAX_NUMBER):
            raise bad("a finite number >= 0")
        return v
    if v is False and p.name in _OFF_NAMES:  # YAML reads a bare off / no as false
        return "off"
    if not isinstance(v, str) or not v.strip():
        raise bad(
            ("one of " + ", ".join(map(str, p.choices)) if p.choices else "a name") if k == "name" else "a file path"
        )
    if k == "path" and not Path(resolve(v, base)).exists() and not _chakra_prefix(resolve(v, base)):
        raise InputError(f"no such file or folder: {resolve(v, base)}", source, where)
    if k == "name" and p.choices and v not in p.choices:
        raise InputError(unknown_key_error(v, p.choices, None, "value").message, source, where)
    checker = _NAME_CHECKS.get(p.name)
    if checker is not None:
        try:
            checker(v, base)
        except InputError as e:
            raise InputError(e.message, source, where) from None
    return v


#: parameters that take ``off`` (which YAML reads as false when bare)
_OFF_NAMES = ("pd", "spec-decode")


def _chakra_prefix(path: str) -> bool:
    """Whether ``path`` is a Chakra prefix (``<path>.0.et`` exists)."""
    return Path(f"{path}.0.et").exists()


def _check_model(v: str, base: str | None) -> None:
    get_model(v)


def _check_gpu(v: str, base: str | None) -> None:
    get_gpu(v)


def _check_cluster(v: str, base: str | None) -> None:
    if _is_path_like(v) or Path(resolve(v, base)).exists():
        if not Path(resolve(v, base)).exists():
            raise InputError(f"no such cluster file: {resolve(v, base)}")
        return
    names = preset_names()
    if v not in names:
        raise unknown_key_error(v, names, None, what="cluster preset")


def _check_kernel_table(v: str, base: str | None) -> None:
    if v != "measured" and not Path(resolve(v, base)).exists():
        raise InputError(f"expected a kernel table CSV or 'measured'; no such file: {resolve(v, base)}")


def _check_workload(v: str, base: str | None) -> None:
    if is_generator(v):
        parse_generator(v, where="workload")
    elif not Path(resolve(v, base)).exists():
        raise InputError(
            f"expected a request trace file or a generator such as poisson:10,prompt=1000,output=200; "
            f"no such file: {resolve(v, base)}"
        )


def _check_pair(v: str, base: str | None) -> None:
    parse_pair(v, "")


_NAME_CHECKS: dict[str, Callable[[str, str | None], None]] = {
    "model": _check_model,
    "draft-model": _check_model,
    "gpu": _check_gpu,
    "cluster": _check_cluster,
    "kernel-table": _check_kernel_table,
    "workload": _check_workload,
    "pd": _check_pair,
    "spec-decode": _check_pair,
}


# -- runs ----------------------------------------------------------------------------------------


def _cluster_arg(
    p: dict[str, Any], whatif: dict[str, Any], base: str | None, default: str | None
) -> str | ClusterSpec | None:
    """The cluster a run uses: None (the run's default), a path or preset name, or a
    :class:`ClusterSpec` with the what-if's cluster overrides."""
    name = p.get("cluster") or default
    ov = whatif.get("cluster")
    if ov:
        return apply_cluster(name, ov, whatif["name"], base)  # type: ignore[arg-type]
    if name is None:
        return None
    return resolve(name, base) if _is_path_like(name) else name


def default_cluster_name(gpu: Any) -> str:
    """The preset (or cluster) ``podsim llm`` and ``podsim serve-llm`` pick for ``gpu`` when
    given none: what a what-if's cluster overrides change."""
    spec = default_cluster(gpu, None, None, None)
    src = spec.source or ""
    return src[len("preset ") :] if src.startswith("preset ") else spec.name


def _training_job(kind: type[Any], p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> Any:
    """A ``podsim llm`` or ``podsim goodput`` job (``kind``) of the point ``p`` under ``whatif``:
    its paths against the spec's folder, its GPU and cluster with the what-if's changes."""
    if p["fsdp"] and p["zero"] not in (0, 3):
        raise InputError(f"fsdp means zero 3, and the point says zero {p['zero']}: give one of them", where="fsdp")
    gpu = apply_gpu(get_gpu(p["gpu"]), whatif.get("gpu"))
    default = default_cluster_name(gpu) if whatif.get("cluster") and not p.get("cluster") else None
    paths = {
        k: resolve(p[k], base)
        for k in ("model-config", "kernel-table", "reliability")
        if p.get(k) and p[k] != "measured"
    }
    job = kind.from_values({**p, **paths})
    return replace(job, hardware=replace(job.hardware, gpu=gpu, cluster=_cluster_arg(p, whatif, base, default)))


def goodput_metrics(g: GoodputResult) -> dict[str, Any]:
    """:data:`GOODPUT_METRICS` of a run's goodput (as ``podsim goodput --json`` rounds them)."""
    d = goodput_json(g)
    ttt = d["time_to_train_h"]
    return {
        "goodput": d["goodput"],
        "time_to_train_p10_h": ttt["p10"],
        "time_to_train_p50_h": ttt["p50"],
        "time_to_train_p90_h": ttt["p90"],
        **{k: d[k] for k in GOODPUT_METRICS if not k.startswith("time_to_train_") and k != "goodput"},
    }


def run_goodput(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim goodput`` point: its step (s), goodput (0-1), time to train (h: the Monte
    Carlo's p10, p50, p90 and the closed form's expectation), interruptions, checkpoint interval
    and its optimum (s), the job's MTBF (h)."""
    g = goodput(_training_job(GoodputJob, p, whatif, base))
    return {"step_time_s": round(g.step_time_s, 9), **goodput_metrics(g)}


def run_llm(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim llm`` point: the iteration's time (s), tokens/s, model TFLOP/s per GPU, MFU,
    memory peak per GPU (GiB) and the breakdown of the rank finishing last (s); given ``days``
    or ``train-tokens``, also the run's goodput metrics from that step (as ``podsim llm
    --goodput``; null otherwise, and the other goodput options are then refused)."""
    job = _training_job(TrainJob, p, whatif, base)
    with_goodput = job.reliability.days is not None or job.reliability.train_tokens is not None
    check_goodput_flags(job.reliability, with_goodput, "days or train-tokens (the run's goodput)")
    r = train(job, record_timeline=True)
    lay = r.layout
    d = r.to_dict()
    b = d["breakdown"]
    return {
        "iteration_time_s": d["iteration_time_s"],
        "tokens_per_s": d["tokens_per_s"],
        "tokens_per_s_per_gpu": d["tokens_per_s"] / lay.gpus,
        "model_tflops_per_gpu": d["model_tflops_per_gpu"],
        "mfu": d["mfu"],
        "memory_peak_gib": d["memory_peak_gib"],
        "memory_fits": d["memory_fits"],
        "dp": lay.dp,
        "compute_s": b["compute_s"],
        "exposed_comm_s": b["exposed_comm_s"],
        "bubble_s": b["bubble_s"],
        "other_s": b["other_s"],
        "fault_cost_s": _fault_cost_s(r.result.faults),
        **(goodput_metrics(goodput_of_training(_training_job(GoodputJob, p, whatif, base), r)) if with_goodput else {}),
    }


def _fault_cost_s(faults: dict[str, Any]) -> float | None:
    """What the injected faults cost the step (s); None without faults."""
    return faults["cost_ns"] / 1e9 if faults else None


def run_collective(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim collective`` size: its time (us), algorithm and bus bandwidths (GB/s)."""
    job = CollectiveJob.from_values({**p, "size": size_bytes(p["size"], "size")})
    t = run_job(replace(job, options=replace(job.options, cluster=_cluster_arg(p, whatif, base, None))))
    r = t.rows[0]
    return {
        "bytes": r.bytes,
        "time_us": r.time_us,
        "algbw_gbps": r.algbw_gbps,
        "busbw_gbps": r.busbw_gbps,
        "algorithm": r.algorithm,
        "protocol": r.protocol,
        "servers": t.servers,
        "baseline_time_us": t.faults["sizes"][0]["baseline_time_us"] if t.faults else None,
    }


def _simulate_cluster(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> str | ClusterSpec | None:
    """The cluster of a ``simulate`` run: the point's own (a preset or a path), or its spec with
    the what-if's cluster overrides."""
    if whatif.get("cluster") and p.get("cluster") is None and "preset" not in whatif["cluster"]:
        raise InputError(f"what-if {whatif['name']!r} changes the cluster, and the point names none: give cluster")
    return _cluster_arg(p, whatif, base, None)


def run_simulate(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim simulate`` run: when the last rank finishes (s), and that rank's compute,
    communication and exposed communication (s)."""

    paths = {
        k: resolve(p[k], base)
        for k in (
            "workload-configuration",
            "system-configuration",
            "network-configuration",
            "comm-group-configuration",
            "execution-trace",
            "remote-memory-configuration",
        )
        if p.get(k)
    }
    cluster = _simulate_cluster(p, whatif, base)
    job = SimulateJob.from_values({**p, **paths})
    if cluster is not None:  # the cluster's fabric, not an ASTRA-sim network
        job = replace(job, machine=replace(job.machine, cluster=cluster, network=None))
    if not p.get("parallel") and cluster is None and not (job.machine.system and job.machine.network):
        raise InputError("give cluster, or system-configuration and network-configuration")
    res = simulate_job(job).result
    last = res.last_rank()
    return {
        "time_s": res.finish_ns / 1e9,
        "num_ranks": res.num_ranks,
        "compute_s": last.compute_ns / 1e9,
        "comm_s": last.comm_ns / 1e9,
        "exposed_comm_s": last.exposed_comm_ns / 1e9,
        "fault_cost_s": _fault_cost_s(res.faults),
    }


def run_serve(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim serve`` run (:func:`podsim.api.serve.serve`): requests, latencies (s), SLO
    attainment, throughput (req/s).  A what-if's GPU memory and its cluster's preset and GPUs
    per node override the point's."""
    gpu_ov = whatif.get("gpu") or {}
    memory_gb = gpu_ov["memory_gib"] * 2**30 / 1e9 if "memory_gib" in gpu_ov else p.get("memory-capacity")
    cl_ov = whatif.get("cluster") or {}
    preset = cl_ov.get("preset", p.get("cluster"))
    paths = {k: resolve(p[k], base) for k in ("placement", "workload", "profile") if p.get(k)}
    if p.get("closed-loop"):
        paths["workload"] = None
    job = ServeCommand.from_values({**p, **paths}).job
    job = replace(
        job,
        cluster=resolve(preset, base) if preset and _is_path_like(preset) else preset,
        gpus_per_node=cl_ov.get("gpus_per_node", p.get("num-devices-per-node")),
        memory_gb=memory_gb,
    )
    doc = summarize(serve(job))
    return {k: doc[k] for k in SERVE.metrics}


def run_serve_llm(p: dict[str, Any], whatif: dict[str, Any], base: str | None) -> dict[str, Any]:
    """One ``podsim serve-llm`` run (or, with ``find-capacity``, the run at the highest rate
    meeting the SLOs): latencies (s), output tokens/s, requests/s, SLO attainment, preemptions,
    the GPUs of every replica and the cost of a million output tokens (US dollars) at the
    GPU-hour price (``gpu-hour-price``, else podsim's price for the GPU, else null).

    Rates: a run's output tokens and requests over the time from its first arrival to its last
    finish; at capacity, the capacity (requests/s) and it times the workload's mean output
    tokens (the steady state the SLOs hold at)."""

    gpu = apply_gpu(get_gpu(p["gpu"]), whatif.get("gpu"))
    default = default_cluster_name(gpu) if whatif.get("cluster") and not p.get("cluster") else None
    paths = {k: resolve(p[k], base) for k in ("model-config", "profile") if p.get(k)}
    if p.get("workload") and not is_generator(p["workload"]):
        paths["workload"] = resolve(p["workload"], base)
    job = ServeLLMJob.from_values({**p, **paths})
    outcome = serve_llm(with_hardware(job, gpu, _cluster_arg(p, whatif, base, default)))
    if outcome.capacity is not None and outcome.result is None:
        raise InputError(
            f"no rate tried meets the SLOs for {100 * p['capacity-target']:g}% of requests "
            f"(down to {min(q for q, _ in outcome.capacity.probes):.3g} req/s)",
            where="find-capacity",
        )
    result, serving, requests = outcome.result, outcome.serving, outcome.requests
    capacity = outcome.capacity.qps if outcome.capacity is not None else None
    d = result.stats()
    price = p.get("gpu-hour-price")
    if price is None:
        try:
            price = gpu_hour_price(gpu.key)
        except InputError:
            price = None
    tps, rps = d["tokens_per_s"], d["requests_per_s"]
    if capacity is not None:  # the steady state the SLOs hold at, not one finite run's drain
        tps, rps = capacity * sum(r.output_tokens for r in requests) / len(requests), capacity
    return {
        "gpus": serving.gpus,
        "capacity_qps": capacity,
        **{k: d[k] for k in ("ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "e2e_mean_s", "e2e_p99_s")},
        "tokens_per_s": tps,
        "tokens_per_s_per_gpu": tps / serving.gpus if tps else None,
        "requests_per_s": rps,
        "slo_attainment": d["slo_attainment"],
        "preemptions": result.total_preemptions,
        "mfu": d["mfu"],
        "usd_per_gpu_hour": price,
        "cost_per_mtok_usd": usd_per_mtok(serving.gpus, price, tps) if price is not None else None,
    }


_RUNNERS: dict[str, Callable[[dict[str, Any], dict[str, Any], str | None], dict[str, Any]]] = {
    "llm": run_llm,
    "goodput": run_goodput,
    "collective": run_collective,
    "simulate": run_simulate,
    "serve": run_serve,
    "serve-llm": run_serve_llm,
}


def with_defaults(run: RunKind, params: dict[str, Any]) -> dict[str, Any]:
    """A point's parameters with every default filled in (what a run and a key see)."""
    out = {p.name: p.default for p in run.params}
    out.update(params)
    return out


def evaluate(task: tuple[str, dict[str, Any], dict[str, Any], str | None]) -> dict[str, Any]:
    """One point under one what-if: ``(run kind, parameters, what-if, the spec's folder)`` ->
    its metrics, or ``{"error": message}`` when podsim refuses the point (a worker's task)."""
    run, params, whatif, base = task
    try:
        return _RUNNERS[run](with_defaults(RUNS[run], params), whatif, base)
    except PodsimError as e:
        return {"error": str(e)}
