"""Capture a training step of a PyTorch model: profiler + execution trace (``podsim trace``)."""

from .models import TrainingSetup, resolve
from .run import Capture, capture

__all__ = ["Capture", "TrainingSetup", "capture", "resolve"]
