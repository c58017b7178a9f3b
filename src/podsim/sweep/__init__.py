"""Search and sweeps: many configurations, many runs (the space of training layouts,
the search, the sweep and their store and report)."""

from .space import Enumerated, Space, enumerate_layouts

__all__ = ["Enumerated", "Space", "enumerate_layouts"]
