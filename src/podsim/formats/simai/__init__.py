"""SimAI formats: ns-3 topology files."""

from .topology import read_topology, write_topology

__all__ = ["read_topology", "write_topology"]
