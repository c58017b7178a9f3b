"""The parameters of ``podsim trace`` (capture a PyTorch step), ``podsim convert`` (one trace
format to another) and ``podsim inspect`` (what a Chakra trace holds).

A flag that means what another command's flag means is that command's declaration with the
help (and, for ``--seq-len``, the default) this command gives it: the capture's
``--batch-size`` and ``--bucket-mb`` are ``podsim simulate``'s (the batch a trace was taken
at, DDP's gradient bucket), ``--seq-len`` is ``podsim llm``'s, ``convert``'s ``--format`` and
``--gpus`` are ``simulate``'s, and ``--json`` is every subcommand's."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..formats.registry import TRACE_FORMATS, writable
from ..llm.layout import Layout
from ..params import JobSpec, Param, param, params_of
from .outputs import JSON
from .simulate import SIMULATE_PARAMS

#: the declarations of ``podsim simulate``'s and ``podsim llm``'s flags, by name
_SIMULATE = {p.name: p for p in SIMULATE_PARAMS}
_LLM = {p.name: p for p in params_of(Layout)}

#: the devices a step is captured on, and the optimizers it steps
DEVICES = ("cpu", "cuda")
OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class TraceJob(JobSpec):
    """Everything one ``podsim trace`` run depends on: one profiled training step of a PyTorch
    model (in one process, or ``nproc`` processes of DistributedDataParallel), or a parallel job
    of ``world_size`` ranks under ``layout``, traced rank by rank."""

    model: str | None = param(
        Param(
            "model",
            "text",
            metavar="MODEL",
            required=True,
            help="torchvision:NAME, hf:CONFIG.json, module:callable; with --world-size also "
            "megatron:CONFIG.json (Megatron-Core's GPT)",
        )
    )
    batch_size: int | None = param(
        replace(
            _SIMULATE["batch-size"],
            required=True,
            help="the batch of the profiled step: samples per process (with --world-size, per data-parallel rank)",
        )
    )
    steps: int = param(
        Param("steps", "count", 3, metavar="K", help="warm-up steps before the profiled one (default 3)")
    )
    device: str = param(
        Param(
            "device",
            "choice",
            "cpu",
            DEVICES,
            help="where the step runs: cpu (default) or cuda (one GPU per process)",
        )
    )
    optimizer: str = param(
        Param("optimizer", "choice", "adam", OPTIMIZERS, help="the optimizer the step ends with (default adam)")
    )
    nproc: int = param(
        Param(
            "nproc",
            "count",
            1,
            metavar="N",
            help="distributed capture: N processes of DistributedDataParallel (gloo on the CPU, NCCL on "
            "GPUs), each writing kineto.<rank>.json and et.<rank>.json with the collectives",
        )
    )
    bucket_mb: float = param(
        replace(
            _SIMULATE["bucket-mb"], help="with --nproc: DDP's bucket_cap_mb, its gradient bucket in MiB (default 25)"
        )
    )
    world_size: int | None = param(
        Param(
            "world-size",
            "count",
            metavar="N",
            help="trace a parallel job of N ranks (with --layout; --fake-ranks or --nproc N)",
        )
    )
    layout: str | None = param(
        Param(
            "layout",
            "text",
            metavar="tp=T[,pp=P][,cp=C][,fsdp]",
            help="the job's parallel layout; data parallel takes the ranks left over",
        )
    )
    fake_ranks: bool = param(
        Param(
            "fake-ranks",
            "bool",
            False,
            help="run each distinct rank's step in this process on a fake process group (calls return at "
            "once and are recorded); ranks that differ only in their data-parallel peers are traced once",
        )
    )
    json: str | None = param(
        replace(JSON, help="with --world-size: what was traced, as JSON (fields: docs/outputs.md)")
    )
    rank_timeout: float = param(
        Param(
            "rank-timeout",
            "number",
            1800.0,
            metavar="S",
            unit="s",
            help="with --world-size: stop a rank (or the real job) that runs longer than S seconds (default 1800)",
        )
    )
    seq_len: int = param(
        replace(_LLM["seq-len"], default=128, help="hf and megatron models: tokens per sequence (default 128)")
    )
    out: str | None = param(
        Param(
            "out",
            "path",
            metavar="DIR",
            required=True,
            help="the folder to write: the profiler and execution traces, their Chakra copy and capture.json "
            "(docs/outputs.md)",
        )
    )

    @property
    def parallel(self) -> bool:
        """A parallel job traced rank by rank: ``world_size``, ``layout`` or ``fake_ranks`` given."""
        return self.world_size is not None or self.layout is not None or self.fake_ranks


@dataclass(frozen=True)
class ConvertJob(JobSpec):
    """Everything one ``podsim convert`` run depends on: a trace in any format podsim reads, and
    the format and path to write it to."""

    input: str | None = param(
        Param(
            "input",
            "path",
            metavar="IN",
            positional=True,
            required=True,
            help="a TrioSim trace directory, a podsim trace folder (every rank), a PyTorch Kineto "
            "or execution trace (.json), a .txt workload or a Chakra prefix",
        )
    )
    to: str | None = param(
        Param(
            "to",
            "choice",
            None,
            writable(),
            required=True,
            help="the output format",
        )
    )
    output: str | None = param(
        Param(
            "output",
            "path",
            metavar="OUT",
            positional=True,
            required=True,
            help="the output prefix (chakra) or folder (triosim)",
        )
    )
    trace_format: str | None = param(
        replace(
            _SIMULATE["format"],
            help="the input's format, instead of sniffing it: "
            + ", ".join(TRACE_FORMATS.names())
            + " (docs/traces.md)",
        )
    )
    gpus: int | None = param(
        replace(_SIMULATE["gpus"], help="ranks to write (required for ASTRA-sim 1.0 text; SimAI default: all_gpus)")
    )


@dataclass(frozen=True)
class InspectJob(JobSpec):
    """Everything one ``podsim inspect`` run depends on: a Chakra trace and how many of its rank
    files to summarize."""

    trace: str | None = param(
        Param(
            "chakra-trace",
            "path",
            metavar="TRACE",
            positional=True,
            required=True,
            help="a .et file, or a prefix of <prefix>.<rank>.et files",
        )
    )
    ranks: int = param(Param("ranks", "count", 4, metavar="N", help="how many rank files to summarize (default 4)"))
    json: str | None = param(replace(JSON, help="write the summaries as JSON (fields: docs/outputs.md)"))


#: every parameter of ``podsim trace``, in --help order
TRACE_PARAMS: tuple[Param, ...] = params_of(TraceJob)
#: every parameter of ``podsim convert``, in --help order
CONVERT_PARAMS: tuple[Param, ...] = params_of(ConvertJob)
#: every parameter of ``podsim inspect``, in --help order
INSPECT_PARAMS: tuple[Param, ...] = params_of(InspectJob)
