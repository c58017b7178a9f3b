"""One training iteration of an LLM (``podsim llm``, the sweep's ``run: llm``): the model, the
hardware, the layout (with the training options that change its time), how it is simulated
and timed, and what the command line also writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llm.layout import Layout
from ..params import JobSpec, Param, nested, param, params_of
from .faults import Faults
from .hardware import ClusterOverrides, Hardware
from .model import ModelChoice
from .outputs import Outputs
from .reliability import GoodputOptions
from .simulation import Simulation
from .software import TrainingSoftware


@dataclass(frozen=True)
class Timing:
    """How kernels are timed."""

    kernel_table: str | None = param(
        Param(
            "kernel-table",
            "name",
            metavar="CSV|measured",
            help="time kernels by interpolating a measured kernel table (podsim kernels measure); 'measured' = the "
            "table podsim ships for --gpu (h100-80gb)",
        )
    )


#: ``--goodput``: declared once, here; ``podsim search`` takes it with a help of its own
GOODPUT = Param(
    "goodput",
    "bool",
    False,
    sweep=False,
    help="also the run's goodput under failures, as podsim goodput gives it from this step (its flags: "
    "--days or --train-tokens, --reliability, --checkpoint-*; also in --json under 'goodput')",
)


@dataclass(frozen=True)
class TrainExports:
    """What ``podsim llm`` prints or writes besides the result (not sweep parameters)."""

    kernels: bool = param(
        Param(
            "kernels",
            "bool",
            False,
            sweep=False,
            help="print the per-kernel list of one layer, the embedding, the output layer and "
            "the optimizer with their times (also in --json under 'kernels')",
        )
    )
    simai: str | None = param(
        Param(
            "simai",
            "path",
            metavar="OUT.txt",
            sweep=False,
            help="also write pipeline stage 0 as a SimAI/AICB workload file",
        )
    )
    goodput: bool = param(GOODPUT)
    chakra: str | None = param(
        Param(
            "chakra",
            "path",
            metavar="PREFIX",
            sweep=False,
            help="also write Chakra ET files PREFIX.<rank>.et and PREFIX.comm_groups.json (ASTRA-sim inputs)",
        )
    )


@dataclass(frozen=True)
class TrainJob(JobSpec):
    """Everything one training iteration depends on.  ``layout.seq_len`` None-like values are
    resolved by :func:`podsim.api.train` (the model's sequence length)."""

    layout: Layout = field(metadata={"nested": Layout})
    model: ModelChoice = nested(ModelChoice)
    hardware: Hardware = nested(Hardware)
    cluster: ClusterOverrides = nested(ClusterOverrides)
    simulation: Simulation = nested(Simulation)
    timing: Timing = nested(Timing)
    software: TrainingSoftware = nested(TrainingSoftware)
    faults: Faults = nested(Faults)
    outputs: Outputs = nested(Outputs)
    exports: TrainExports = nested(TrainExports)
    reliability: GoodputOptions = nested(GoodputOptions)


#: every parameter of ``podsim llm``, in --help order
TRAIN_PARAMS: tuple[Param, ...] = params_of(TrainJob)
