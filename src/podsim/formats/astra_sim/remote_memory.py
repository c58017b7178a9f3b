"""ASTRA-sim remote memory JSON -> :class:`RemoteMemoryConfig`.

``memory-type``: NO_MEMORY_EXPANSION (memory ops are an error), PER_NPU_MEMORY_EXPANSION
(private, no contention), PER_NODE_MEMORY_EXPANSION (one FIFO channel per node of
``num-npus-per-node`` NPUs), MEMORY_POOL (one FIFO channel for all).  A transfer of ``b`` bytes
takes ``remote-mem-latency + b / remote-mem-bw`` ns (``remote-mem-bw`` in bytes per ns).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...errors import InputError
from ...units import MAX_BYTES, MAX_NS
from .common import check_keys, get_choice, get_float, get_int, load_json

TYPES = ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")
KEYS = ("memory-type", "remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node")


@dataclass(frozen=True)
class RemoteMemoryConfig:
    """Remote memory model settings."""

    memory_type: str = "NO_MEMORY_EXPANSION"
    latency_ns: float = 0.0
    bandwidth: float | None = None  #: bytes per ns
    num_nodes: int | None = None
    npus_per_node: int | None = None
    source: str = "<remote-memory>"


def parse_remote_memory(data: dict, source: str = "<remote-memory>") -> RemoteMemoryConfig:
    """Build a :class:`RemoteMemoryConfig` from a loaded JSON object."""
    check_keys(data, KEYS, source)
    if "memory-type" not in data:
        raise InputError(f"missing key 'memory-type' (one of {', '.join(TYPES)})", source)
    mtype = get_choice(data, "memory-type", None, TYPES, source)
    lat = get_float(data, "remote-mem-latency", 0.0, source, lo=0.0, hi=MAX_NS)
    bw = (
        get_float(data, "remote-mem-bw", None, source, positive=True, hi=MAX_BYTES / 1e9)
        if "remote-mem-bw" in data
        else None
    )
    nodes = get_int(data, "num-nodes", None, source, lo=1, hi=1 << 24)
    per_node = get_int(data, "num-npus-per-node", None, source, lo=1, hi=1 << 24)
    if mtype != "NO_MEMORY_EXPANSION" and bw is None:
        raise InputError(f"{mtype} needs 'remote-mem-bw' (bytes per ns)", source)
    if mtype == "PER_NODE_MEMORY_EXPANSION" and per_node is None:
        raise InputError("PER_NODE_MEMORY_EXPANSION needs 'num-npus-per-node'", source)
    return RemoteMemoryConfig(mtype, lat or 0.0, bw, nodes, per_node, source)  # type: ignore[arg-type]


def read_remote_memory(path: str | os.PathLike[str]) -> RemoteMemoryConfig:
    """Read an ASTRA-sim remote memory JSON file."""
    path = str(path)
    return parse_remote_memory(load_json(path), path)
