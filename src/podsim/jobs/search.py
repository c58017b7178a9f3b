"""A search (``podsim search``): the best training layouts of a model on N GPUs, or, with a
workload, the best ways to serve it.  :class:`SearchJob` is the API's input and declares every
flag on its fields.  One vocabulary with the runs it searches over:

* a flag that is ``podsim llm``'s or ``podsim serve-llm``'s (the model, the GPU, the cluster,
  the backend, the SLOs, the router, the context) is that command's declaration; one that means
  the same with a help of its own (``--global-batch``, ``--seq-len``, ``--workload``,
  ``--gpu-hour-price``, ``--capacity-target``) is that declaration with the help replaced;
* a flag that lists values of such a flag is ``--<field>-values`` (``--tp-values`` lists
  ``podsim llm --tp``'s), named from the field it sets and checked against its choices;
* each field a search of one kind only takes is marked so (:data:`TRAINING_ONLY`,
  :data:`SERVING_ONLY`), and the API refuses it in the other kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import InputError
from ..llm.layout import Layout
from ..params import JobSpec, Param, nested, param, params_of
from ..serving.llm.schedulers import SCHEDULERS
from .hardware import CLUSTER, GPU
from .model import MODEL, MODEL_CONFIG
from .reliability import TRAIN_TOKENS, GoodputOptions
from .serve_llm import SERVE_LLM_PARAMS
from .simulation import BACKEND, RAY, WORKERS
from .software import TRAINING_STACK
from .train import GOODPUT

#: layouts simulated exactly after the closed-form screen, and re-run with the flow backend
SIMULATE_TOP = 32
FLOW_TOP = 0
#: what a search ranks by: a training search's, and a serving search's capacity
SEARCH_OBJECTIVES = ("tokens", "mfu", "time", "cost", "capacity")

#: the declarations of ``podsim llm``'s layout flags and of ``podsim serve-llm``'s flags, by name
_LLM = {p.name: p for p in params_of(Layout)}
_SERVE = {p.name: p for p in SERVE_LLM_PARAMS}
#: the declarations of the goodput options (``podsim goodput``'s and ``podsim llm --goodput``'s), by name
_REL = {p.name: p for p in params_of(GoodputOptions)}

#: how a flag's text becomes a field's value: ``parse(text, "--flag")``
Parse = Callable[[Any, str], Any]


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
    """``0,1,2,3``: ZeRO stages, the values ``podsim llm --zero`` takes."""
    try:
        out = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        out = ()
    if not out or any(z not in _LLM["zero"].choices for z in out):
        raise InputError(f"expected ZeRO stages 0-3 separated by commas, got {text!r}", where=where)
    return out


def words(choices: tuple[str, ...]) -> Parse:
    """A parser of ``a,b``: some of ``choices``."""

    def parse(text: Any, where: str) -> tuple[str, ...]:
        out = tuple(x.strip() for x in str(text).split(","))
        if not out or any(x not in choices for x in out):
            raise InputError(f"expected some of {', '.join(choices)} separated by commas, got {text!r}", where=where)
        return out

    return parse


def switches(text: Any, where: str) -> tuple[bool, ...]:
    """``on``, ``off`` or ``on,off``."""
    names = {"on": True, "off": False, "true": True, "false": False}
    out = tuple(names.get(x.strip().lower()) for x in str(text).split(","))
    if not out or any(x is None for x in out):
        raise InputError(f"expected on, off or on,off, got {text!r}", where=where)
    return tuple(dict.fromkeys(out))  # type: ignore[arg-type]


def _only(kind: str, declared: Any) -> Any:
    """The declared field ``declared`` (:func:`~podsim.params.param`'s), marked as taken by a
    ``kind`` search only (``training`` or ``serving``)."""
    return field(
        default=declared.default, default_factory=declared.default_factory, metadata={**declared.metadata, "only": kind}
    )


def _reworded(p: Param, text: str, only: str | None = None) -> Any:
    """A field declared by another command's ``p`` (its name, kind, default, metavar, unit),
    with the help a search gives it; ``only``: the kind of search that takes it."""
    declared = param(replace(p, help=text))
    return _only(only, declared) if only else declared


def _values_of(of: Param) -> str:
    """The name of the search's flag that lists values of ``of``: ``--<the field it sets>-values``."""
    return (of.field or of.column).replace("_", "-") + "-values"


def _values(
    of: Param,
    default: str | None,
    what: str,
    parse: Parse = ints,
    *,
    choices: tuple[str, ...] = (),
    shown: str = "",
    default_text: str | None = None,
    command: str = "llm",
    only: str | None = None,
) -> Any:
    """A field declaring ``--<field>-values``: the values of ``podsim <command>``'s flag ``of``
    to try (``of`` sets the field ``tp``: ``--tp-values``).  ``choices``: the words it takes
    (their parser then); ``shown``: the values it takes, for the help (default: ``choices``);
    ``default_text``: the default as the help says it (default: ``default``)."""
    if choices:
        parse, shown = words(choices), shown or ", ".join(choices)
    flag = f"podsim {command} --{of.name}" + (f": {shown}" if shown else "")
    declared = param(
        Param(
            _values_of(of),
            "list",
            default,
            metavar="X,X,..." if choices else "N,N,...",
            parse=parse,
            help=f"{what} ({flag}; default {default_text or default})",
        )
    )
    return _only(only, declared) if only else declared


def _on_off(of: Param, default: str, what: str) -> Any:
    """A training search's ``--<field>-values on,off``: ``podsim llm``'s switch ``of`` on, off or
    both (a negated flag, ``--no-overlap-grad-reduce``, is the off)."""
    flag = f"off: podsim llm --{of.name}" if of.negate else f"podsim llm --{of.name}"
    declared = param(
        Param(
            _values_of(of),
            "list",
            default,
            metavar="on,off",
            parse=switches,
            help=f"{what} on, off or both ({flag}; default {default})",
        )
    )
    return _only("training", declared)


@dataclass(frozen=True)
class SearchJob:
    """A search, as ``podsim search`` takes it: each field declares its flag (``global_batch``
    is ``--global-batch``).

    Both kinds: ``gpus`` to search; the model; the GPU; ``objective`` (None: a training
    search's ``tokens``, a serving search's ``capacity``); prices; the cluster; where the runs
    go (``workers`` or ``ray``); the TP, PP and EP values to try.  A training search
    (``workload`` None) needs ``global_batch``; a serving search takes the serving fields.
    """

    gpus: tuple[int, ...] | None = param(
        Param("gpus", "list", metavar="N[,N...]", parse=ints, help="GPU counts to search (podsim llm --gpus; required)")
    )
    model: str | None = param(MODEL)
    model_config: str | None = param(MODEL_CONFIG)
    gpu: str = param(GPU)
    objective: str | None = param(
        Param(
            "objective",
            "choice",
            None,
            SEARCH_OBJECTIVES,
            help="rank by tokens/s (default), MFU, time (an iteration's, or to train --train-tokens) or cost "
            "per million tokens; a serving search by capacity (requests/s per GPU meeting the SLOs, its "
            "default), tokens (output tokens/s per GPU at capacity) or cost (per million output tokens)",
        )
    )
    gpu_hour_price: float | None = _reworded(
        _SERVE["gpu-hour-price"],
        "the price of one GPU-hour in US dollars: rows then say their cost per million tokens (with --objective cost "
        "and no price, the GPU's price in --gpu-prices)",
    )
    gpu_prices: str | None = param(
        Param(
            "gpu-prices",
            "path",
            metavar="FILE",
            help="a YAML file of GPU-hour prices ({gpu key: {usd_per_gpu_hour: USD}}; default: podsim's "
            "hardware/prices.yaml, published on-demand prices of 2026)",
        )
    )
    cluster: str | None = param(CLUSTER)
    workers: int | None = param(WORKERS)
    ray: str | None = param(RAY)
    tp_values: tuple[int, ...] = _values(_LLM["tp"], "1,2,4,8", "TP values to try")
    pp_values: tuple[int, ...] | None = _values(
        _LLM["pp"], None, "PP values to try", default_text="1,2,4,8,16; a serving search: 1"
    )
    ep_values: tuple[int, ...] = _values(_LLM["ep"], "1", "EP values to try")
    etp_values: tuple[int, ...] | None = _values(
        _LLM["etp"], None, "expert TP values to try (MoE models)", default_text="each layout's TP", only="training"
    )
    # a training search
    global_batch: int | None = _reworded(
        _LLM["global-batch"], "sequences per iteration (a training search needs it)", "training"
    )
    seq_len: int | None = _reworded(
        _LLM["seq-len"], "tokens per sequence (default: the model's, as podsim llm)", "training"
    )
    train_tokens: float | None = _reworded(
        TRAIN_TOKENS,
        "tokens to train (e.g. 15e12): rows then say the hours it takes (time_to_train_h); with --goodput, "
        "the hours with failures, checkpoints and restarts too, and the search ranks by them",
        "training",
    )
    goodput: bool = _reworded(
        GOODPUT,
        "also each simulated layout's goodput under failures and its time to train, as podsim goodput gives them "
        "from that layout's step (its flags: --days or --train-tokens, --reliability, --checkpoint-* ...; "
        "docs/goodput.md)",
        "training",
    )
    days: float | None = _only("training", param(_REL["days"]))
    reliability: str | None = _only("training", param(_REL["reliability"]))
    checkpoint_interval: float | None = _only("training", param(_REL["checkpoint-interval"]))
    checkpoint_mode: str = _only("training", param(_REL["checkpoint-mode"]))
    storage_bandwidth: float = _only("training", param(_REL["storage-bandwidth"]))
    storage_read_bandwidth: float | None = _only("training", param(_REL["storage-read-bandwidth"]))
    snapshot_bandwidth: float = _only("training", param(_REL["snapshot-bandwidth"]))
    detect: float = _only("training", param(_REL["detect"]))
    reschedule: float = _only("training", param(_REL["reschedule"]))
    warmup: float = _only("training", param(_REL["warmup"]))
    hot_spare: float = _only("training", param(_REL["hot-spare"]))
    seed: int = _only("training", param(_REL["seed"]))
    samples: int = _only("training", param(_REL["samples"]))
    memory_reserve: float = _only(
        "training",
        param(
            Param(
                "memory-reserve",
                "nonneg",
                0.0,
                metavar="GIB",
                unit="GiB",
                help="GiB per GPU to keep free of the model's states and activations (the CUDA context, NCCL's "
                "buffers, the allocator's fragmentation); a layout must fit in the rest (default 0)",
            )
        ),
    )
    precision: str = _only("training", param(_LLM["precision"]))
    vpp_values: tuple[int, ...] = _values(_LLM["vpp"], "1,2", "VPP values to try", only="training")
    cp_values: tuple[int, ...] = _values(_LLM["cp"], "1", "CP values to try", only="training")
    micro_batch_values: tuple[int, ...] = _values(
        _LLM["micro-batch"], "1,2,4", "micro-batch values to try", only="training"
    )
    zero_values: tuple[int, ...] = _values(
        _LLM["zero"],
        "0",
        "ZeRO stages to try besides the distributed optimizer",
        zero_stages,
        shown="0-3",
        only="training",
    )
    recompute_values: tuple[str, ...] = _values(
        _LLM["recompute"],
        ",".join(_LLM["recompute"].choices),
        "recompute values to try",
        choices=_LLM["recompute"].choices,
        only="training",
    )
    tp_overlap_values: tuple[str, ...] = _values(
        _LLM["tp-overlap"], "te", "tp-overlap values to try", choices=_LLM["tp-overlap"].choices, only="training"
    )
    sequence_parallel_values: tuple[bool, ...] = _on_off(_LLM["sequence-parallel"], "on,off", "sequence parallel")
    distributed_optimizer_values: tuple[bool, ...] = _on_off(
        _LLM["distributed-optimizer"], "on,off", "distributed optimizer"
    )
    overlap_grad_reduce_values: tuple[bool, ...] = _on_off(_LLM["no-overlap-grad-reduce"], "on", "overlap grad reduce")
    overlap_param_gather_values: tuple[bool, ...] = _on_off(
        _LLM["no-overlap-param-gather"], "on", "overlap param gather"
    )
    simulate_top: int = _only(
        "training",
        param(
            Param(
                "simulate-top",
                "count",
                SIMULATE_TOP,
                metavar="N",
                help=f"after every layout is estimated in closed form, simulate the best N exactly as podsim llm does "
                f"(default {SIMULATE_TOP}; a space of at most N layouts is simulated whole)",
            )
        ),
    )
    flow_top: int = _only(
        "training",
        param(
            Param(
                "flow-top",
                "natural",
                FLOW_TOP,
                metavar="N",
                help="re-run the best N with the flow backend (congestion) as well (default 0)",
            )
        ),
    )
    backend: str = _only("training", param(BACKEND))
    stack: str = _only("training", param(TRAINING_STACK))
    store: str | None = _only(
        "training",
        param(
            Param(
                "store",
                "path",
                metavar="PATH",
                help="a results store (DuckDB file; pip install podsim[search]): every evaluated layout is added as it "
                "finishes, and a search run again skips what it holds",
            )
        ),
    )
    # a serving search
    workload: str | None = _reworded(
        _SERVE["workload"], "the requests (as podsim serve-llm --workload): makes this a serving search"
    )
    requests: int = _only(
        "serving",
        param(
            Param(
                "requests",
                "count",
                1000,
                metavar="N",
                help="requests of each capacity run (default 1000; more make a steadier answer at high rates)",
            )
        ),
    )
    slo_ttft: float | None = _only("serving", param(_SERVE["slo-ttft"]))
    slo_tpot: float | None = _only("serving", param(_SERVE["slo-tpot"]))
    capacity_target: float = _reworded(
        _SERVE["capacity-target"], "the share of requests that must meet the SLOs (default 0.99)", "serving"
    )
    scheduler_values: tuple[str, ...] = _values(
        _SERVE["scheduler"],
        "vllm,sarathi",
        "schedulers to try",
        choices=SCHEDULERS.names(),
        command="serve-llm",
        only="serving",
    )
    chunk_values: tuple[int, ...] = _only(
        "serving",
        param(
            Param(
                "chunk-values",
                "list",
                "512,2048,8192",
                metavar="N,N,...",
                parse=ints,
                help="token budgets of a step to try (podsim serve-llm --max-batched-tokens of vllm, --chunk-size of "
                "sarathi; default 512,2048,8192)",
            )
        ),
    )
    pd_values: str = _only(
        "serving",
        param(
            Param(
                "pd-values",
                "text",
                "off",
                metavar="off,P:D,all",
                help="prefill/decode splits to try: off (mixed replicas; default), P:D (podsim serve-llm --pd), "
                "all (every split)",
            )
        ),
    )
    router: str = _only("serving", param(_SERVE["router"]))
    max_context: int | None = _only("serving", param(_SERVE["max-context"]))

    @property
    def serving(self) -> bool:
        """A serving search (``workload`` given) rather than a training one."""
        return self.workload is not None

    @property
    def goodput_options(self) -> GoodputOptions:
        """The goodput options this search gives (``--goodput``'s: the same fields by name)."""
        return GoodputOptions(**{f.name: getattr(self, f.name) for f in fields(GoodputOptions)})

    @property
    def model_arg(self) -> str:
        """The model as a reproducing command line names it (``--model NAME`` or ``--model-config FILE``)."""
        return f"--model {self.model}" if self.model else f"--model-config {self.model_config}"


def only(kind: str) -> tuple[str, ...]:
    """The fields of :class:`SearchJob` that only a ``kind`` search (``training`` or
    ``serving``) takes, in --help order."""
    return tuple(f.name for f in fields(SearchJob) if f.metadata.get("only") == kind)


#: the fields only a training search takes, and those only a serving search takes
TRAINING_ONLY: tuple[str, ...] = only("training")
SERVING_ONLY: tuple[str, ...] = only("serving")


@dataclass(frozen=True)
class SearchOutputs:
    """What ``podsim search`` prints and writes."""

    top: int = param(Param("top", "count", 10, metavar="K", sweep=False, help="layouts to print (default 10)"))
    report: str | None = param(
        Param(
            "report",
            "path",
            metavar="OUT.html",
            sweep=False,
            help="write an HTML report: the Pareto front, the best layouts' time breakdown "
            "and memory per stage, filters by parallel dimension",
        )
    )
    json: str | None = param(
        Param(
            "json",
            "path",
            metavar="OUT",
            sweep=False,
            help="evaluated, rejected (by reason) and the best layouts, as JSON",
        )
    )


@dataclass(frozen=True)
class SearchCommand(JobSpec):
    """``podsim search``'s job and its outputs."""

    job: SearchJob = nested(SearchJob)
    outputs: SearchOutputs = nested(SearchOutputs)


#: every parameter of ``podsim search``, in --help order
SEARCH_PARAMS: tuple[Param, ...] = params_of(SearchCommand)
