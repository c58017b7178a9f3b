"""The discrete-event engine: ranks, streams, rendezvous, and the deadlock check."""

from .simulator import ComputeModel, RemoteMemoryParams, equivalent_ranks, simulate
from .system import SystemParams

__all__ = ["ComputeModel", "RemoteMemoryParams", "SystemParams", "equivalent_ranks", "simulate"]
