"""A training run's goodput under failures (``podsim goodput``, the sweep's ``run: goodput``):
the training step of ``podsim llm`` (model, hardware, layout, stack: the same dataclasses), the
run's length, the reliability model, the checkpoints and the restarts."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llm.layout import Layout
from ..params import JobSpec, Param, nested, param, params_of
from .hardware import ClusterOverrides, Hardware
from .model import ModelChoice
from .outputs import JSON
from .reliability import GoodputOptions
from .simulation import Simulation
from .software import TrainingSoftware
from .train import Timing, TrainJob


@dataclass(frozen=True)
class GoodputOutputs:
    """What ``podsim goodput`` writes besides its summary (not sweep parameters)."""

    json: str | None = param(JSON)
    plot: str | None = param(
        Param(
            "plot",
            "path",
            metavar="OUT.png",
            sweep=False,
            help="draw goodput vs GPUs and vs checkpoint interval as a PNG (needs matplotlib: pip install "
            "podsim[plot])",
        )
    )


@dataclass(frozen=True)
class GoodputJob(JobSpec):
    """A training run and how it fails: the step as ``podsim llm`` simulates it, and the run's
    reliability and checkpoint options."""

    layout: Layout = field(metadata={"nested": Layout})
    model: ModelChoice = nested(ModelChoice)
    hardware: Hardware = nested(Hardware)
    cluster: ClusterOverrides = nested(ClusterOverrides)
    simulation: Simulation = nested(Simulation)
    timing: Timing = nested(Timing)
    software: TrainingSoftware = nested(TrainingSoftware)
    options: GoodputOptions = nested(GoodputOptions)
    outputs: GoodputOutputs = nested(GoodputOutputs)

    def train_job(self) -> TrainJob:
        """The training step this run repeats, as ``podsim llm`` takes it."""
        return TrainJob(
            layout=self.layout,
            model=self.model,
            hardware=self.hardware,
            cluster=self.cluster,
            simulation=self.simulation,
            timing=self.timing,
            software=self.software,
        )


#: every parameter of ``podsim goodput``, in --help order
GOODPUT_PARAMS: tuple[Param, ...] = params_of(GoodputJob)
