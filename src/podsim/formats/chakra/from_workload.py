"""podsim :class:`~podsim.workload.Workload` -> Chakra ET files.

Attributes are written with the protobuf types ASTRA-sim reads (``comm_size`` int64,
``comm_src``/``comm_dst``/``comm_tag``/``comm_priority`` int32, ``is_cpu_op`` bool, ``pg_name``
string, ``involved_dim`` bool list, ``num_ops`` int64, ``tensor_size`` uint64).  Durations are
written in whole microseconds (Chakra's unit), rounded to the nearest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...fileio import atomic_write_text
from ...workload import OpKind, Program, Workload
from .etfile import write_trace
from .schema import GlobalMetadata, Node, NodeType
from .to_workload import rank_file

_TYPE_OF = {
    OpKind.COMPUTE: NodeType.COMP_NODE,
    OpKind.COLLECTIVE: NodeType.COMM_COLL_NODE,
    OpKind.SEND: NodeType.COMM_SEND_NODE,
    OpKind.RECV: NodeType.COMM_RECV_NODE,
    OpKind.MEM_LOAD: NodeType.MEM_LOAD_NODE,
    OpKind.MEM_STORE: NodeType.MEM_STORE_NODE,
    OpKind.NOOP: NodeType.METADATA_NODE,
}


def program_to_nodes(program: Program, rank: int) -> list[Node]:
    """Chakra nodes for ``rank`` running ``program``.  Node ids are the program's node ids
    (or op indices + 1 where a program has none)."""
    ids = [int(x) if x >= 0 else i + 1 for i, x in enumerate(program.node_id)]
    nodes = []
    for i in range(len(program)):
        kind = OpKind(int(program.kind[i]))
        nd = Node(id=ids[i], name=program.names[i], type=int(_TYPE_OF[kind]))
        nd.data_deps = [ids[j] for j in program.data_deps(i)]
        nd.ctrl_deps = [ids[j] for j in program.ctrl_deps(i)]
        dur = int(program.duration_ns[i])
        if dur > 0:
            nd.duration_micros = (dur + 500) // 1000
        nd.set_attr("is_cpu_op", bool(program.is_cpu[i]), "bool")
        size = int(program.size_bytes[i])
        if kind == OpKind.COMPUTE:
            if program.flops[i] > 0:
                nd.set_attr("num_ops", int(program.flops[i]), "int64")
            if size > 0:
                nd.set_attr("tensor_size", size, "uint64")
        elif kind == OpKind.COLLECTIVE:
            nd.set_attr("comm_type", int(program.collective[i]), "int64")
            nd.set_attr("comm_size", size, "int64")
            g = int(program.group[i])
            if g >= 0:
                nd.set_attr("pg_name", program.group_keys[g], "string")
            extra = program.extras.get(i, {})
            flags = extra.get("involved_dim")
            if flags is not None:
                nd.set_attr("involved_dim", [bool(x) for x in flags], "bool_list")  # type: ignore[union-attr]
            elif int(program.dims_mask[i]) >= 0:
                mask = int(program.dims_mask[i])
                nd.set_attr(
                    "involved_dim", [bool(mask >> b & 1) for b in range(max(mask.bit_length(), 1))], "bool_list"
                )
            if program.priority[i]:
                nd.set_attr("comm_priority", int(program.priority[i]), "int32")
        elif kind in (OpKind.SEND, OpKind.RECV):
            peer = program.peer_of(i, rank)
            src, dst = (rank, peer) if kind == OpKind.SEND else (peer, rank)
            nd.set_attr("comm_src", src, "int32")
            nd.set_attr("comm_dst", dst, "int32")
            nd.set_attr("comm_tag", int(program.tag[i]), "int32")
            nd.set_attr("comm_size", size, "int64")
        elif kind in (OpKind.MEM_LOAD, OpKind.MEM_STORE):
            nd.set_attr("tensor_size", size, "uint64")
        nodes.append(nd)
    return nodes


def write_workload(workload: Workload, prefix: str | os.PathLike[str], compress: bool = False) -> list[str]:
    """Write ``<prefix>.<rank>.et`` for every rank; returns the paths written."""
    paths = []
    for r in range(workload.num_ranks):
        path = rank_file(prefix, r)
        write_trace(path, program_to_nodes(workload.program_of(r), r), GlobalMetadata(version="0.0.4"), compress)
        paths.append(path)
    return paths


def write_workload_with_groups(workload: Workload, prefix: str | os.PathLike[str]) -> tuple[list[str], str | None]:
    """Write ``<prefix>.<rank>.et`` for every rank and, when the workload has communicator
    groups, ``<prefix>.comm_groups.json`` (ASTRA-sim's ``{id: [ranks]}``, ids from 1: 0 is
    reserved for all ranks) with every collective's ``pg_name`` set to its group's id.
    Returns (ET paths, JSON path or None)."""

    ids: dict[tuple[str, tuple[int, ...]], str] = {}
    for g in workload.groups:
        ids.setdefault((g.name, tuple(g.ranks)), str(len(ids) + 1))
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(workload.num_ranks):
        prog = workload.program_of(r)
        nodes = program_to_nodes(prog, r)
        for i, nd in enumerate(nodes):
            g = int(prog.group[i])
            if int(prog.kind[i]) == OpKind.COLLECTIVE and g >= 0:
                grp = workload.group_of(prog.group_keys[g], r)
                if grp is not None:
                    nd.set_attr("pg_name", ids[(grp.name, tuple(grp.ranks))], "string")
        path = rank_file(prefix, r)
        write_trace(path, nodes, GlobalMetadata(version="0.0.4"))
        paths.append(path)
    if not ids:
        return paths, None
    cg = f"{prefix}.comm_groups.json"
    atomic_write_text(cg, json.dumps({v: list(k[1]) for k, v in ids.items()}) + "\n")
    return paths, cg
