"""A workload on a machine (``podsim simulate``, the sweep's ``run: simulate``): a trace in any
format (Chakra, ASTRA-sim text, SimAI, Kineto, TrioSim, a podsim trace folder) on an ASTRA-sim
machine (system, network, remote memory configurations) or a cluster preset; a one-GPU trace
taken to many GPUs (``--parallel``).  ASTRA-sim's flags keep their spellings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError
from ..formats.registry import TRACE_FORMATS
from ..parallelize.plan import MODES
from ..params import JobSpec, Param, nested, param, params_of
from .faults import Faults
from .hardware import GPUS
from .outputs import ResultOutputs
from .simulation import BACKEND


def truth(value: Any, where: str) -> bool:
    """ASTRA-sim's ``BOOL`` values: true / false / 1 / 0 (any case), or a YAML boolean.

    Raises:
        InputError: naming ``where`` for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("0", "1", "false", "true"):
        raise InputError(f"expected true or false, got {value!r}", where=where)
    return text in ("1", "true")


@dataclass(frozen=True)
class TraceInput:
    """The workload: a path in any trace format, or one of the one-GPU trace shortcuts."""

    workload: str | None = param(
        Param(
            "workload-configuration",
            "path",
            metavar="PATH",
            aliases=("workload",),
            field="workload",
            help="the workload, in any trace format (sniffed; --format to name it): a Chakra ET prefix "
            "(<PATH>.<rank>.et for every rank), an ASTRA-sim 1.0 text workload (.txt); with --cluster also a "
            "SimAI/AICB .txt, a TrioSim trace directory, a podsim trace folder or a PyTorch profiler (Kineto) "
            ".json; with --parallel, a one-GPU trace to run on --gpus GPUs",
        )
    )
    trace_format: str | None = param(
        Param(
            "format",
            "name",
            None,
            TRACE_FORMATS.spellings(),
            metavar="NAME",
            field="trace_format",
            help="the format of --workload, instead of sniffing it: "
            + ", ".join(TRACE_FORMATS.names())
            + " (docs/traces.md)",
        )
    )
    execution_trace: str | None = param(
        Param(
            "execution-trace",
            "path",
            metavar="ET.json",
            help="with a PyTorch profiler (Kineto) trace as the workload: its execution trace, linked by "
            "record-function id (names, collective sizes)",
        )
    )
    whole_trace: bool = param(
        Param(
            "whole-trace",
            "bool",
            False,
            help="with a Kineto trace that has no ProfilerStep annotation: simulate all of it",
        )
    )
    triosim: str | None = param(
        Param(
            "triosim",
            "path",
            metavar="DIR",
            sweep=False,
            help="a TrioSim trace directory (trace.csv, tensor.csv) to run data parallel on --gpus GPUs of --cluster "
            "(default dgx-h100); = --workload DIR --format triosim",
        )
    )
    pytorch: str | None = param(
        Param(
            "pytorch",
            "path",
            metavar="DIR",
            aliases=("capture",),
            sweep=False,
            help="a podsim trace folder (kineto.json[.gz], et.json[.gz]) -- or a Kineto trace file with "
            "--execution-trace -- to run in parallel on --gpus GPUs of --cluster (default dgx-h100)",
        )
    )


@dataclass(frozen=True)
class OneGpuOptions:
    """How a one-GPU trace's step runs on many GPUs (:class:`podsim.api.simulate.ParallelSpec`)."""

    gpu_memory: float | None = param(
        Param(
            "gpu-memory",
            "number",
            metavar="GIB",
            unit="GiB",
            help="with --triosim / --pytorch: memory per GPU in GiB (default: the "
            "cluster's GPU; TrioSim's -capacity C is 2^C bytes)",
        )
    )
    remote_bandwidth: float | None = param(
        Param(
            "remote-bandwidth",
            "number",
            metavar="GBPS",
            unit="GB/s",
            help="with --triosim / --pytorch: offload activations that do not fit to remote memory of this bandwidth "
            "per GPU in GB/s (TrioSim's -bandwidth); without it a step that does not fit is an error",
        )
    )
    retime: str | None = param(
        Param(
            "retime",
            "name",
            metavar="GPU|off",
            help="with --pytorch: time each captured op on this GPU from the execution trace's shapes (default: the "
            "cluster's GPU when the capture ran on the CPU or on another GPU, whose measured times it then scales); "
            "off: the captured times",
        )
    )
    layers: str | None = param(
        Param(
            "layers",
            "path",
            metavar="FILE.csv",
            sweep=False,
            help="with --triosim / --pytorch: write the per-layer breakdown (forward, "
            "backward, optimizer, comm, exposed comm; ns) of rank 0 as CSV",
        )
    )
    parallel: str | None = param(
        Param(
            "parallel",
            "choice",
            None,
            MODES,
            help="with --triosim / --pytorch: dp (one all-reduce after the backward), ddp (bucketed, overlapped; "
            "default), tp (split convolutions / linear layers, all-reduce outputs) or pp (one pipeline stage per "
            "GPU); with --workload: take its one-GPU step to --gpus GPUs this way",
        )
    )
    micro_batch: int | None = param(
        Param(
            "micro-batch",
            "count",
            metavar="M",
            aliases=("micro-batch-size",),
            help="with --parallel pp: micro-batch size (micro-batches = batch / M; default: one micro-batch per stage)",
        )
    )
    schedule: str = param(
        Param(
            "schedule",
            "choice",
            "1f1b",
            ("1f1b", "gpipe"),
            aliases=("pipeline-schedule",),
            help="with --parallel pp (default 1f1b)",
        )
    )
    dp: int = param(
        Param(
            "dp",
            "count",
            1,
            metavar="D",
            help="with --parallel pp: D data-parallel pipelines of --gpus / D stages each, gradients "
            "all-reduced per stage (default 1)",
        )
    )
    bucket_mb: float = param(
        Param(
            "bucket-mb",
            "number",
            25.0,
            metavar="MB",
            unit="MiB",
            help="with --triosim --parallel ddp: gradient bucket size in MiB (default 25)",
        )
    )
    batch_size: int | None = param(
        Param(
            "batch-size",
            "count",
            metavar="B",
            help="with --triosim: the batch the trace was taken at (a --pytorch capture says it in capture.json)",
        )
    )
    batch_size_sim: int | None = param(
        Param(
            "batch-size-sim",
            "count",
            metavar="B",
            help="with --triosim: the batch per GPU to simulate (forward and "
            "backward times scale with it; the optimizer and gradient sizes "
            "do not)",
        )
    )


@dataclass(frozen=True)
class Machine:
    """Where it runs: an ASTRA-sim machine, or a cluster with NCCL-like collectives."""

    system: str | None = param(
        Param(
            "system-configuration",
            "path",
            metavar="FILE",
            field="system",
            help="ASTRA-sim system JSON (optional with --cluster)",
        )
    )
    network: str | None = param(
        Param(
            "network-configuration", "path", metavar="FILE", field="network", help="ASTRA-sim analytical network YAML"
        )
    )
    cluster: Any = param(
        Param(
            "cluster",
            "name",
            metavar="PRESET_OR_YAML",
            help="run on a cluster (preset name or YAML) with NCCL-like collectives instead of an "
            "ASTRA-sim network; rank r runs on GPU r (presets: podsim collective --list)",
        )
    )
    backend: str = param(replace(BACKEND, help="with --cluster: " + BACKEND.help))
    gpus: int | None = param(
        replace(
            GPUS,
            aliases=(),
            help="with --cluster and a SimAI .txt workload: GPUs to run it on (default: its "
            "all_gpus); with --parallel: GPUs in all",
        )
    )
    remote_memory: str | None = param(
        Param(
            "remote-memory-configuration",
            "path",
            metavar="FILE",
            field="remote_memory",
            help="ASTRA-sim remote memory JSON",
        )
    )
    comm_groups: str | None = param(
        Param(
            "comm-group-configuration",
            "path",
            metavar="FILE",
            field="comm_groups",
            help="communicator groups JSON {id: [ranks]} ('empty' for none)",
        )
    )
    num_queues_per_dim: int = param(
        Param(
            "num-queues-per-dim", "count", 1, metavar="N", help="ASTRA-sim's queues per network dimension (default 1)"
        )
    )
    comm_scale: float = param(
        Param("comm-scale", "number", 1.0, metavar="X", sweep=False, help="accepted and ignored, as ASTRA-sim 2.x does")
    )
    injection_scale: float = param(
        Param(
            "injection-scale",
            "number",
            1.0,
            metavar="X",
            help="multiply endpoint-delay by X (when the system JSON sets it)",
        )
    )
    compute_scale: float = param(
        Param(
            "compute-scale",
            "number",
            1.0,
            metavar="X",
            sweep=False,
            hidden=True,
            help="accepted and ignored, as ASTRA-sim 2.x does",
        )
    )
    rendezvous: bool = param(
        Param(
            "rendezvous-protocol",
            "bool",
            False,
            metavar="BOOL",
            parse=truth,
            field="rendezvous",
            help="true: every message waits for an 8 KiB handshake from its receiver",
        )
    )
    logging_configuration: str | None = param(Param("logging-configuration", "path", sweep=False, hidden=True))
    logging_folder: str | None = param(Param("logging-folder", "path", sweep=False, hidden=True))


@dataclass(frozen=True)
class SimulateJob(JobSpec):
    """Everything one ``podsim simulate`` run depends on."""

    trace: TraceInput = nested(TraceInput)
    one_gpu: OneGpuOptions = nested(OneGpuOptions)
    machine: Machine = nested(Machine)
    faults: Faults = nested(Faults)
    outputs: ResultOutputs = nested(ResultOutputs)


#: every parameter of ``podsim simulate``, in --help order
SIMULATE_PARAMS: tuple[Param, ...] = params_of(SimulateJob)
