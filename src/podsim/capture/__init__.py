"""Capture a training step of a PyTorch model: profiler + execution trace (``podsim trace``), or
a parallel job rank by rank on one device (``podsim trace --fake-ranks``)."""

from .fake_ranks import RankCapture, trace_ranks
from .models import TrainingSetup, resolve
from .parallel import MeshLayout, ParallelContext, TrainingStep, parse_layout
from .run import Capture, capture

__all__ = [
    "Capture",
    "MeshLayout",
    "ParallelContext",
    "RankCapture",
    "TrainingSetup",
    "TrainingStep",
    "capture",
    "parse_layout",
    "resolve",
    "trace_ranks",
]
