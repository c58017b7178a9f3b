"""Search and sweeps: many configurations, many runs (issue #15; in progress: the space of
training layouts so far)."""

from .space import Enumerated, Space, enumerate_layouts

__all__ = ["Enumerated", "Space", "enumerate_layouts"]
