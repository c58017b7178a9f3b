"""ASTRA-sim 2.x configuration files: system JSON, analytical network YAML, remote memory
JSON and communicator groups."""

from .comm_groups import parse_comm_groups, read_comm_groups
from .network import parse_network, read_network
from .remote_memory import RemoteMemoryConfig, parse_remote_memory, read_remote_memory
from .system import (
    AlgorithmSpec,
    SystemConfig,
    parse_algorithm,
    parse_system,
    read_system,
)

__all__ = [
    "AlgorithmSpec",
    "RemoteMemoryConfig",
    "SystemConfig",
    "parse_algorithm",
    "parse_comm_groups",
    "parse_network",
    "parse_remote_memory",
    "parse_system",
    "read_comm_groups",
    "read_network",
    "read_remote_memory",
    "read_system",
]
