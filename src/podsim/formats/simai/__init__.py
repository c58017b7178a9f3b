"""SimAI formats: ns-3 topology files and AICB workload files."""

from .topology import read_topology, write_topology
from .workload import read_simai_workload, simai_to_workload

__all__ = ["read_simai_workload", "read_topology", "simai_to_workload", "write_topology"]
