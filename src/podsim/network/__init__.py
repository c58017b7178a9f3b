"""Topologies and network backends (analytical; more in later issues)."""

from .topology import BlockKind, Dimension, Topology

__all__ = ["BlockKind", "Dimension", "Topology"]
