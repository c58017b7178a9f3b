"""A search (``podsim search``): the best training layouts of a model on N GPUs, or, with a
workload, the best ways to serve it.  :class:`SearchJob` is the API's input and declares every
flag on its fields; the flags it shares with ``podsim llm`` and ``podsim serve-llm`` (the model,
the GPU, the cluster, the backend, the SLOs, the router) are their declarations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..llm.layout import RECOMPUTE, TP_OVERLAP
from ..params import Param, build, nested, param, params_of
from ..serving.llm.schedulers import SCHEDULERS
from .hardware import CLUSTER, GPU
from .model import MODEL, MODEL_CONFIG
from .serve_llm import SERVE_LLM_PARAMS
from .simulation import BACKEND

#: layouts simulated exactly after the closed-form screen, and re-run with the flow backend
SIMULATE_TOP = 32
FLOW_TOP = 0
#: what a search ranks by: a training search's, and a serving search's capacity
SEARCH_OBJECTIVES = ("tokens", "mfu", "time", "cost", "capacity")

_SERVE = {p.name: p for p in SERVE_LLM_PARAMS}


def ints(text: Any, where: str) -> tuple[int, ...]:
    """``1,2,4``: whole numbers >= 1."""
    try:
        out = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise InputError(f"expected whole numbers separated by commas, got {text!r}", where=where) from None
    if not out or min(out) < 1:
        raise InputError(f"expected whole numbers >= 1, got {text!r}", where=where)
    return out


def zero_stages(text: Any, where: str) -> tuple[int, ...]:
    """``0,1,2,3``: ZeRO stages."""
    try:
        out = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        out = ()
    if not out or any(z not in (0, 1, 2, 3) for z in out):
        raise InputError(f"expected ZeRO stages 0-3 separated by commas, got {text!r}", where=where)
    return out


def words(choices: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """A parser of ``a,b``: some of ``choices``."""
    def parse(text: Any, where: str) -> tuple[str, ...]:
        out = tuple(x.strip() for x in str(text).split(","))
        if not out or any(x not in choices for x in out):
            raise InputError(f"expected some of {', '.join(choices)} separated by commas, got {text!r}",
                             where=where)
        return out
    return parse


def switches(text: Any, where: str) -> tuple[bool, ...]:
    """``on``, ``off`` or ``on,off``."""
    names = {"on": True, "off": False, "true": True, "false": False}
    out = tuple(names.get(x.strip().lower()) for x in str(text).split(","))
    if not out or any(x is None for x in out):
        raise InputError(f"expected on, off or on,off, got {text!r}", where=where)
    return tuple(dict.fromkeys(out))  # type: ignore[arg-type]


def _values(name: str, default: str | None, what: str, parse: Any = ints, metavar: str = "N,N,...") -> Any:
    return param(Param(f"{name}-values", "list", default, metavar=metavar, parse=parse, help=what))


@dataclass(frozen=True)
class SearchJob:
    """A search, as ``podsim search`` takes it: each field declares its flag (``global_batch``
    is ``--global-batch``).

    Both kinds: ``gpus`` to search; the model; the GPU; ``objective`` (None: a training
    search's ``tokens``, a serving search's ``capacity``); prices; the cluster; where the runs
    go (``workers`` or ``ray``); the TP, PP and EP values to try.  A training search
    (``workload`` None) needs ``global_batch``; a serving search takes the serving fields.
    """

    gpus: tuple[int, ...] | None = param(Param("gpus", "list", metavar="N[,N...]", parse=ints,
                                               help="GPU counts to search (required)"))
    model: str | None = param(MODEL)
    model_config: str | None = param(MODEL_CONFIG)
    gpu: str = param(GPU)
    objective: str | None = param(Param(
        "objective", "choice", None, SEARCH_OBJECTIVES,
        help="rank by tokens/s (default), MFU, time (an iteration's, or to train --train-tokens) or cost per million "
             "tokens; a serving search by capacity (requests/s per GPU meeting the SLOs, its default), tokens "
             "(output tokens/s per GPU at capacity) or cost (per million output tokens)"))
    gpu_hour_price: float | None = param(Param(
        "gpu-hour-price", "number", metavar="USD", unit="USD",
        help="the price of one GPU-hour in US dollars: rows then say their cost per million tokens (with "
             "--objective cost and no price, the GPU's price in --gpu-prices)"))
    gpu_prices: str | None = param(Param(
        "gpu-prices", "path", metavar="FILE",
        help="a YAML file of GPU-hour prices ({gpu key: {usd_per_gpu_hour: USD}}; default: podsim's "
             "hardware/prices.yaml, published on-demand prices of 2026)"))
    cluster: str | None = param(CLUSTER)
    workers: int | None = param(Param("workers", "count", metavar="W", exclusive="where", sweep=False,
                                      help="worker processes on this machine (default: the CPUs, at most 8; 1: this "
                                           "process)"))
    ray: str | None = param(Param("ray", "text", const="local", metavar="ADDRESS", exclusive="where", sweep=False,
                                  help="run on a Ray cluster (pip install podsim[ray]): ADDRESS as `ray start "
                                       "--head` prints it (host:6379), or none to start Ray on this machine"))
    tp_values: tuple[int, ...] = _values("tp", "1,2,4,8", "TP values to try (default 1,2,4,8)")
    pp_values: tuple[int, ...] | None = _values("pp", None, "PP values to try (default 1,2,4,8,16; a serving "
                                                            "search: 1)")
    ep_values: tuple[int, ...] = _values("ep", "1", "EP values to try (default 1)")
    # a training search
    global_batch: int | None = param(Param("global-batch", "count", metavar="B",
                                           help="sequences per iteration (a training search needs it)"))
    seq_len: int | None = param(Param("seq-len", "count", metavar="S", help="tokens per sequence (default 2048)"))
    train_tokens: float | None = param(Param("train-tokens", "number", metavar="N",
                                             help="tokens to train (e.g. 15e12): rows then say the hours it takes "
                                                  "(time_to_train_h)"))
    memory_reserve: float = param(Param(
        "memory-reserve", "nonneg", 0.0, metavar="GIB", unit="GiB",
        help="GiB per GPU to keep free of the model's states and activations (the CUDA context, NCCL's buffers, "
             "the allocator's fragmentation); a layout must fit in the rest (default 0)"))
    vpp_values: tuple[int, ...] = _values("vpp", "1,2", "VPP values to try (default 1,2)")
    cp_values: tuple[int, ...] = _values("cp", "1", "CP values to try (default 1)")
    micro_batch_values: tuple[int, ...] = _values("micro-batch", "1,2,4", "micro-batch values to try (default "
                                                                          "1,2,4)")
    zero_values: tuple[int, ...] = _values("zero", "0", "ZeRO stages to try besides the distributed optimizer (0-3; "
                                                        "default 0)", zero_stages)
    recompute_values: tuple[str, ...] = _values(
        "recompute", ",".join(RECOMPUTE), f"recompute values to try, of {', '.join(RECOMPUTE)} (default "
                                          f"{','.join(RECOMPUTE)})", words(RECOMPUTE), "X,X,...")
    tp_overlap_values: tuple[str, ...] = _values(
        "tp-overlap", "te", f"tp-overlap values to try, of {', '.join(TP_OVERLAP)} (default te)", words(TP_OVERLAP),
        "X,X,...")
    sequence_parallel_values: tuple[bool, ...] = _values(
        "sequence-parallel", "on,off", "sequence parallel on, off or both (default on,off)", switches, "on,off")
    distributed_optimizer_values: tuple[bool, ...] = _values(
        "distributed-optimizer", "on,off", "distributed optimizer on, off or both (default on,off)", switches,
        "on,off")
    overlap_grad_reduce_values: tuple[bool, ...] = _values(
        "overlap-grad-reduce", "on", "overlap grad reduce on, off or both (default on)", switches, "on,off")
    overlap_param_gather_values: tuple[bool, ...] = _values(
        "overlap-param-gather", "on", "overlap param gather on, off or both (default on)", switches, "on,off")
    simulate_top: int = param(Param(
        "simulate-top", "count", SIMULATE_TOP, metavar="N",
        help=f"after every layout is estimated in closed form, simulate the best N exactly as podsim llm does "
             f"(default {SIMULATE_TOP}; a space of at most N layouts is simulated whole)"))
    flow_top: int = param(Param("flow-top", "natural", FLOW_TOP, metavar="N",
                                help="re-run the best N with the flow backend (congestion) as well (default 0)"))
    backend: str = param(BACKEND)
    store: str | None = param(Param("store", "path", metavar="PATH",
                                    help="a results store (DuckDB file; pip install podsim[search]): every evaluated "
                                         "layout is added as it finishes, and a search run again skips what it "
                                         "holds"))
    # a serving search
    workload: str | None = param(Param("workload", "name", metavar="TRACE.csv|poisson:QPS[,...]",
                                       help="the requests (as podsim serve-llm --workload): makes this a serving "
                                            "search"))
    requests: int = param(Param("requests", "count", 1000, metavar="N",
                                help="requests of each capacity run (default 1000; more make a steadier answer at "
                                     "high rates)"))
    slo_ttft: float | None = param(_SERVE["slo-ttft"])
    slo_tpot: float | None = param(_SERVE["slo-tpot"])
    capacity_target: float = param(Param("capacity-target", "number", 0.99, metavar="SHARE",
                                         help="the share of requests that must meet the SLOs (default 0.99)"))
    scheduler_values: tuple[str, ...] = _values(
        "scheduler", "vllm,sarathi", f"schedulers to try, of {', '.join(SCHEDULERS.names())} (default vllm,sarathi)",
        words(SCHEDULERS.names()), "X,X,...")
    chunk_values: tuple[int, ...] = _values(
        "chunk", "512,2048,8192", "token budgets of a step to try (vllm's --max-batched-tokens, sarathi's "
                                  "--chunk-size; default 512,2048,8192)")
    pd_values: str = param(Param("pd-values", "text", "off", metavar="off,P:D,all",
                                 help="prefill/decode splits to try: off (mixed replicas; default), P:D, all (every "
                                      "split)"))
    router: str = param(_SERVE["router"])
    max_context: int | None = param(_SERVE["max-context"])

    @property
    def serving(self) -> bool:
        """A serving search (``workload`` given) rather than a training one."""
        return self.workload is not None

    @property
    def model_arg(self) -> str:
        """The model as a reproducing command line names it (``--model NAME`` or ``--model-config FILE``)."""
        return f"--model {self.model}" if self.model else f"--model-config {self.model_config}"


@dataclass(frozen=True)
class SearchOutputs:
    """What ``podsim search`` prints and writes."""

    top: int = param(Param("top", "count", 10, metavar="K", sweep=False, help="layouts to print (default 10)"))
    report: str | None = param(Param("report", "path", metavar="OUT.html", sweep=False,
                                     help="write an HTML report: the Pareto front, the best layouts' time breakdown "
                                          "and memory per stage, filters by parallel dimension"))
    json: str | None = param(Param("json", "path", metavar="OUT", sweep=False,
                                   help="evaluated, rejected (by reason) and the best layouts, as JSON"))


@dataclass(frozen=True)
class SearchCommand:
    """``podsim search``'s job and its outputs."""

    job: SearchJob = nested(SearchJob)
    outputs: SearchOutputs = nested(SearchOutputs)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "SearchCommand":
        """The command from flag values keyed by parameter or field name."""
        return build(cls, values)


#: every parameter of ``podsim search``, in --help order
SEARCH_PARAMS: tuple[Param, ...] = params_of(SearchCommand)
