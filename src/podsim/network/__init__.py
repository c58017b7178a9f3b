"""Topologies, fabrics and network backends (analytical; flow-level in :mod:`.flow`)."""

from .topology import BlockKind, Dimension, Topology

__all__ = ["BlockKind", "Dimension", "Topology"]
