"""NCCL-like collectives: algorithms as flow schedules, a cost model, a selector."""

from .algorithms import COLLECTIVES, Communicator, communicator
from .schedule import Schedule, Step
from .selector import build, candidates, select
from .sweep import SweepRow, bus_factor, sweep
from .timing import BACKENDS, CollectiveTime, Timer
from .tuning import NcclTuning, tuning_from_dict, tuning_to_dict

__all__ = [
    "BACKENDS",
    "COLLECTIVES",
    "CollectiveTime",
    "Communicator",
    "NcclTuning",
    "Schedule",
    "Step",
    "SweepRow",
    "Timer",
    "build",
    "bus_factor",
    "candidates",
    "communicator",
    "select",
    "sweep",
    "tuning_from_dict",
    "tuning_to_dict",
]
