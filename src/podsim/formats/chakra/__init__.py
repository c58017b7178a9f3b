"""Chakra execution traces (``.et``): read and write, with no protobuf runtime needed."""

from .etfile import Trace, encode_trace, read_trace, write_trace
from .from_workload import program_to_nodes, write_workload, write_workload_with_groups
from .schema import Attr, CommType, GlobalMetadata, Node, NodeType
from .to_workload import discover_ranks, rank_file, read_workload, trace_to_program

__all__ = [
    "Attr",
    "CommType",
    "GlobalMetadata",
    "Node",
    "NodeType",
    "Trace",
    "encode_trace",
    "read_trace",
    "write_trace",
    "program_to_nodes",
    "write_workload",
    "write_workload_with_groups",
    "discover_ranks",
    "rank_file",
    "read_workload",
    "trace_to_program",
]
