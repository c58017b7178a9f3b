"""The discrete-event engine: ranks, streams, rendezvous, and the deadlock check."""

from .simulator import ComputeTiming, RemoteMemoryParams, equivalent_ranks, simulate
from .system import SystemParams

__all__ = ["ComputeTiming", "RemoteMemoryParams", "SystemParams", "equivalent_ranks", "simulate"]
