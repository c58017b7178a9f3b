"""Flow-level (max-min fair) network backend."""

from .maxmin import max_min_rates
from .network import Clock, FlowNetwork, LinkStats, run_batch

__all__ = ["Clock", "FlowNetwork", "LinkStats", "max_min_rates", "run_batch"]
