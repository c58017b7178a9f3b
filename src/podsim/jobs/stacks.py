"""The parameters of ``podsim stack`` (list and show software stacks) and ``podsim calibrate``
(fit a training or serving stack's free parameters to measured runs and write a stack file;
a measured serving run is replayed with ``podsim serve-llm``'s own flags)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..llm.layout import Layout
from ..params import JobSpec, Param, nested, param, params_of
from .hardware import CLUSTER, GPU
from .model import ModelChoice
from .outputs import JSON
from .replica import ReplicaOptions
from .serve_llm import EngineOptions, RequestsSpec

#: what ``podsim stack`` does (its positional argument)
STACK_ACTIONS: tuple[str, ...] = ("list", "show")
#: what ``podsim calibrate`` fits (its positional argument)
CALIBRATE_KINDS: tuple[str, ...] = ("training", "inference", "trace")


@dataclass(frozen=True)
class StackJob(JobSpec):
    """``podsim stack list`` / ``podsim stack show NAME|FILE``."""

    action: str | None = param(
        Param(
            "action",
            "choice",
            None,
            STACK_ACTIONS,
            positional=True,
            sweep=False,
            help="list: the presets (also --list); show: one stack's properties, values and sources",
        )
    )
    name: str | None = param(
        Param("name", "name", None, positional=True, sweep=False, metavar="NAME|FILE", help="the stack to show")
    )
    list: bool = param(Param("list", "bool", False, sweep=False, help="list the presets, then exit"))
    json: str | None = param(replace(JSON, help="write the stack (or the list) as JSON"))


_REPLICA = {p.name: p for p in params_of(ReplicaOptions)}
_REQUESTS = {p.name: p for p in params_of(RequestsSpec)}


@dataclass(frozen=True)
class ServingRunReplica:
    """The hardware and replica a measured serving run ran on: ``podsim serve-llm``'s flags (the GPU
    has no default: a serving run names the GPU it ran on)."""

    gpu: str | None = param(
        replace(GPU, default=None, help="a serving run (per-request rows): the GPU it ran on (required); " + GPU.help)
    )
    cluster: str | None = param(CLUSTER)
    tp: int = param(_REPLICA["tp"])
    pp: int = param(_REPLICA["pp"])
    ep: int = param(_REPLICA["ep"])
    precision: str = param(_REPLICA["precision"])
    kv_cache_dtype: str | None = param(_REPLICA["kv-cache-dtype"])
    requests: int | None = param(
        replace(_REQUESTS["requests"], help="a serving run: replay and fit its first N requests only (default all)")
    )


@dataclass(frozen=True)
class ServingRunOptions:
    """How a measured serving run was served (``podsim calibrate inference RUN.csv``): the model,
    the replica and the engine's settings, as ``podsim serve-llm`` takes them, for the replay."""

    model: ModelChoice = nested(ModelChoice)
    replica: ServingRunReplica = nested(ServingRunReplica)
    engine: EngineOptions = nested(EngineOptions)


_LLM = {p.name: p for p in params_of(Layout)}


@dataclass(frozen=True)
class TraceStepOptions:
    """The training step a profiled trace holds (``podsim calibrate trace DIR``): its shape on one
    GPU, as ``podsim llm`` names it; the model and GPU are --model and --gpu above."""

    seq_len: int | None = param(
        replace(_LLM["seq-len"], default=None, help="a trace: tokens per sequence of the traced step (required)")
    )
    micro_batch: int = param(replace(_LLM["micro-batch"], help="a trace: sequences in the traced step (default 1)"))
    recompute: str = param(
        replace(_LLM["recompute"], help="a trace: the traced step's activation recomputation: none, selective or full")
    )
    layers: int | None = param(
        Param(
            "layers",
            "count",
            None,
            metavar="N",
            sweep=False,
            help="a trace: the traced model's layers where it ran fewer than --model's (a shortened model; "
            "default the model's own)",
        )
    )


@dataclass(frozen=True)
class CalibrateJob(JobSpec):
    """``podsim calibrate training|inference ROWS.csv --base STACK --out FILE.yaml``."""

    kind: str | None = param(
        Param(
            "kind",
            "choice",
            None,
            CALIBRATE_KINDS,
            positional=True,
            required=True,
            sweep=False,
            help="training: fit a training stack to measured iterations (tokens/s, TFLOP/s, step time); "
            "inference: fit a serving stack to measured prefill and decode step times, or to a serving run's "
            "per-request TTFT and end-to-end latency; trace: read a training stack's GEMM and attention "
            "efficiencies and elementwise traffic off a profiled step of one GPU (PyTorch profiler traces)",
        )
    )
    rows: str | None = param(
        Param(
            "rows",
            "path",
            None,
            positional=True,
            sweep=False,
            metavar="ROWS.csv",
            help="the measured runs: for training podsim validate's columns (docs/calibration.md) or the "
            "published-measurements table's; for inference model, gpu, tp, pp, batch, prompt_tokens, output_tokens, "
            "prefill_ms, decode_ms (docs/stacks.md), or a serving run: one row per request with arrived_at, "
            "num_prefill_tokens, num_decode_tokens, ttft_ms, e2e_ms, replayed with the serve-llm flags below; "
            "shipped:PREFIX takes podsim's own published rows whose id starts with PREFIX (several: shipped:A,B); "
            "for trace a folder of PyTorch profiler (Kineto / Chrome) traces of one GPU's training step, "
            "*.json or *.json.gz, or one such file",
        )
    )
    base: str | None = param(
        Param(
            "base",
            "name",
            None,
            metavar="STACK",
            sweep=False,
            help="the stack to start from (a preset or a stack YAML); its 'free' parameters are fitted",
        )
    )
    out: str | None = param(
        Param("out", "path", None, metavar="FILE.yaml", sweep=False, help="write the fitted stack here (required)")
    )
    name: str | None = param(
        Param(
            "stack-name",
            "text",
            None,
            metavar="NAME",
            sweep=False,
            help="the fitted stack's name (default: the --out file's stem)",
        )
    )
    free: tuple[str, ...] | None = param(
        Param(
            "free",
            "list",
            None,
            metavar="P,P,...",
            sweep=False,
            help="the parameters to fit instead of the base's free list (e.g. gemm_efficiency,host_ns; serving: "
            "host_overhead_ms,engine_gemm_efficiency)",
        )
    )
    run: ServingRunOptions = nested(ServingRunOptions)
    step: TraceStepOptions = nested(TraceStepOptions)
    json: str | None = param(replace(JSON, help="write the fit (values, residuals before and after) as JSON"))


#: every parameter of ``podsim stack``, in --help order
STACK_PARAMS: tuple[Param, ...] = params_of(StackJob)
#: every parameter of ``podsim calibrate``, in --help order
CALIBRATE_PARAMS: tuple[Param, ...] = params_of(CalibrateJob)
