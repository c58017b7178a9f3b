"""Chakra ET files -> podsim :class:`~podsim.workload.Workload`.

Conversion rules (the units and conventions of ASTRA-sim 2.x):

* ``duration_micros`` is integer microseconds -> ``duration_ns = duration_micros * 1000``;
* ``comm_size`` / ``tensor_size`` are bytes; any protobuf integer type is accepted
  (int32/int64/uint32/uint64/sint*/fixed*), as are integral doubles;
* COMP -> COMPUTE, COMM_COLL -> COLLECTIVE, COMM_SEND/COMM_RECV -> SEND/RECV (peer from
  ``comm_dst`` / ``comm_src``), MEM_LOAD/MEM_STORE -> memory ops (``tensor_size`` bytes), and
  every other node type -> NOOP;
* ``pg_name`` names the communicator group ("" and "0" mean all ranks);
* ``involved_dim`` (bool list) -> a bit mask of network dimensions;
* ops are kept in node-id order, which is the order ASTRA-sim issues ready nodes in;
* data and control dependencies are both kept (ASTRA-sim's FeederV3 waits on both); control
  dependencies on nodes missing from the file, or on the node itself, are dropped with a note.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...workload import (
    CollectiveKind,
    Group,
    OpKind,
    Program,
    Workload,
    dedupe_programs,
)
from ...workload.program import COLUMNS, csr_from_arrays
from ...workload.validate import check_acyclic
from .etfile import Trace, read_trace
from .schema import INTEGER_TYPES, Node, NodeType

MAX_BYTES = 1 << 50  # 1 PiB: larger sizes are rejected as absurd
MAX_DURATION_US = 10**12  # ~11.6 days per op
MAX_ID = (1 << 63) - 1  # node ids, tags and priorities are int64
MIN_INT64 = -(1 << 63)
MAX_RANK = (1 << 31) - 1

_KIND_OF = {
    NodeType.COMP_NODE: OpKind.COMPUTE,
    NodeType.COMM_COLL_NODE: OpKind.COLLECTIVE,
    NodeType.COMM_SEND_NODE: OpKind.SEND,
    NodeType.COMM_RECV_NODE: OpKind.RECV,
    NodeType.MEM_LOAD_NODE: OpKind.MEM_LOAD,
    NodeType.MEM_STORE_NODE: OpKind.MEM_STORE,
}


def rank_file(prefix: str | os.PathLike[str], rank: int) -> str:
    """The file name ASTRA-sim opens for ``rank``: ``<prefix>.<rank>.et``."""
    return f"{prefix}.{rank}.et"


def discover_ranks(prefix: str | os.PathLike[str]) -> int:
    """Count the consecutive rank files ``<prefix>.0.et``, ``<prefix>.1.et``, ...

    Raises:
        InputError: if there is no ``<prefix>.0.et``, or if rank files exist beyond a gap.
    """
    prefix = str(prefix)
    folder = Path(prefix).parent if Path(prefix).parent != Path("") else Path(".")
    stem = Path(prefix).name
    pat = re.compile(re.escape(stem) + r"\.(\d+)\.et$")
    try:
        found = sorted(int(m.group(1)) for f in os.listdir(folder) if (m := pat.match(f)))
    except FileNotFoundError:
        raise InputError("workload folder not found", str(folder)) from None
    if not found or found[0] != 0:
        raise InputError(f"no rank files: expected {rank_file(prefix, 0)}", prefix)
    for i, r in enumerate(found):
        if r != i:
            raise InputError(f"rank file missing: found ranks up to {found[-1]} but not {i}", rank_file(prefix, i))
    return len(found)


def _int_attr(
    node: Node, name: str, path: str, default: int | None = None, lo: int | None = None, hi: int | None = None
) -> int | None:
    a = node.attrs.get(name)
    if a is None:
        return default
    v = a.value
    if a.type in INTEGER_TYPES or a.type == "bool":
        iv = int(v)  # type: ignore[arg-type]
    elif a.type in ("double", "float") and float(v).is_integer():  # type: ignore[arg-type]
        iv = int(v)  # type: ignore[arg-type]
    else:
        raise InputError(f"attribute {name!r} must be an integer, got {a.type} {v!r}", path, f"node {node.id}")
    if lo is not None and iv < lo:
        raise InputError(f"attribute {name!r} must be >= {lo}, got {iv}", path, f"node {node.id}")
    if hi is not None and iv > hi:
        raise InputError(f"attribute {name!r} = {iv} is absurd (more than {hi})", path, f"node {node.id}")
    return iv


def _bool_attr(node: Node, name: str, path: str, default: bool) -> bool:
    a = node.attrs.get(name)
    if a is None:
        return default
    if a.type == "bool" or a.type in INTEGER_TYPES:
        return bool(a.value)
    raise InputError(f"attribute {name!r} must be a bool, got {a.type} {a.value!r}", path, f"node {node.id}")


def _dims_mask(node: Node, path: str) -> tuple[int, tuple[bool, ...] | None]:
    a = node.attrs.get("involved_dim")
    if a is None:
        return -1, None
    if not a.type.endswith("_list"):
        raise InputError(f"attribute 'involved_dim' must be a bool list, got {a.type}", path, f"node {node.id}")
    flags = tuple(bool(x) for x in a.value)  # type: ignore[union-attr]
    mask = 0
    for i, f in enumerate(flags):
        if f:
            mask |= 1 << i
    return mask, flags


def trace_to_program(trace: Trace, rank: int | None = None, num_ranks: int | None = None) -> Program:
    """Convert one decoded trace into a :class:`Program` (ops sorted by node id).  With
    ``rank`` (and ``num_ranks``), a send or receive must name another rank (that exists)."""
    path = trace.path
    nodes = sorted(trace.nodes, key=lambda nd: nd.id)
    n = len(nodes)
    if n and nodes[-1].id > MAX_ID:
        raise InputError(f"node id {nodes[-1].id} is absurd (more than {MAX_ID})", path)
    ids = np.fromiter((nd.id for nd in nodes), dtype=np.int64, count=n)
    if n > 1:
        dup = np.flatnonzero(ids[1:] == ids[:-1])
        if dup.size:
            raise InputError(f"duplicate node id {int(ids[dup[0]])}", path)
    index = {int(i): k for k, i in enumerate(ids)}
    cols = {k: np.full(n, default, dtype=dt) for k, (dt, default) in COLUMNS.items()}
    cols["node_id"][:] = ids
    names: list[str] = []
    streams = ["compute", "comm", "cpu"]
    group_keys: list[str] = []
    extras: dict[int, dict[str, object]] = {}
    data_counts = np.zeros(n, dtype=np.int64)
    ctrl_counts = np.zeros(n, dtype=np.int64)
    data_flat: list[int] = []
    ctrl_flat: list[int] = []
    host_colls = 0
    dangling_ctrl = 0
    self_ctrl = 0
    no_cpu_attr = 0
    for k, nd in enumerate(nodes):
        where = f"node {nd.id}"
        names.append(nd.name)
        try:
            ntype = NodeType(nd.type)
        except ValueError:
            raise InputError(f"unknown node type {nd.type}", path, where) from None
        kind = _KIND_OF.get(ntype, OpKind.NOOP)
        cols["kind"][k] = kind
        if nd.duration_micros > MAX_DURATION_US:
            raise InputError(f"duration_micros = {nd.duration_micros} is absurd", path, where)
        cols["duration_ns"][k] = nd.duration_micros * 1000
        if "is_cpu_op" not in nd.attrs and kind != OpKind.NOOP:
            no_cpu_attr += 1
        is_cpu = _bool_attr(nd, "is_cpu_op", path, False)
        cols["is_cpu"][k] = is_cpu
        cols["replay_only"][k] = _bool_attr(nd, "replay-only", path, False)
        if kind == OpKind.COMPUTE:
            cols["flops"][k] = float(_int_attr(nd, "num_ops", path, 0, lo=0) or 0)
            cols["size_bytes"][k] = _int_attr(nd, "tensor_size", path, 0, lo=0, hi=MAX_BYTES) or 0
            cols["stream"][k] = 2 if is_cpu else 0
        elif kind == OpKind.COLLECTIVE and is_cpu:
            # the host-side launcher of a collective (PyTorch's c10d::*): CPU time, replayed
            kind = OpKind.COMPUTE
            cols["kind"][k] = kind
            cols["stream"][k] = 2
            host_colls += 1
        elif kind == OpKind.COLLECTIVE:
            ctype = _int_attr(nd, "comm_type", path, None)
            if ctype is None:
                raise InputError("COMM_COLL_NODE without 'comm_type'", path, where)
            try:
                CollectiveKind(ctype)
            except ValueError:
                raise InputError(f"unknown comm_type {ctype}: expected 0..9", path, where) from None
            cols["collective"][k] = ctype
            size = _int_attr(nd, "comm_size", path, None, lo=0, hi=MAX_BYTES)
            if size is None:
                raise InputError("COMM_COLL_NODE without 'comm_size'", path, where)
            cols["size_bytes"][k] = size
            cols["priority"][k] = _int_attr(nd, "comm_priority", path, 0, lo=MIN_INT64, hi=MAX_ID) or 0
            mask, flags = _dims_mask(nd, path)
            cols["dims_mask"][k] = mask
            if flags is not None:
                extras.setdefault(k, {})["involved_dim"] = flags
            pg = nd.attr("pg_name")
            if pg not in (None, "", "0"):
                key = str(pg)
                if key not in group_keys:
                    group_keys.append(key)
                cols["group"][k] = group_keys.index(key)
            cols["stream"][k] = 1
        elif kind in (OpKind.SEND, OpKind.RECV):
            size = _int_attr(nd, "comm_size", path, None, lo=0, hi=MAX_BYTES)
            if size is None:
                size = _int_attr(nd, "tensor_size", path, None, lo=0, hi=MAX_BYTES)
            if size is None:
                raise InputError("send/recv node without 'comm_size'", path, where)
            cols["size_bytes"][k] = size
            src = _int_attr(nd, "comm_src", path, None, lo=0, hi=MAX_RANK)
            dst = _int_attr(nd, "comm_dst", path, None, lo=0, hi=MAX_RANK)
            peer = dst if kind == OpKind.SEND else src
            need = "comm_dst" if kind == OpKind.SEND else "comm_src"
            if peer is None:
                raise InputError(f"{ntype.name} without {need!r}", path, where)
            me = src if kind == OpKind.SEND else dst
            if rank is not None and me is not None and me != rank:
                side = "comm_src" if kind == OpKind.SEND else "comm_dst"
                raise InputError(f"{side} = {me} but this file is rank {rank}", path, where)
            if peer == rank:
                raise InputError(f"{need} = {peer}: rank {rank} sends to or receives from itself", path, where)
            if num_ranks is not None and peer >= num_ranks:
                raise InputError(f"{need} = {peer}, but the workload has ranks 0..{num_ranks - 1}", path, where)
            cols["peer"][k] = peer
            cols["tag"][k] = _int_attr(nd, "comm_tag", path, 0, lo=MIN_INT64, hi=MAX_ID) or 0
            cols["priority"][k] = _int_attr(nd, "comm_priority", path, 0, lo=MIN_INT64, hi=MAX_ID) or 0
            cols["stream"][k] = 1
        elif kind in (OpKind.MEM_LOAD, OpKind.MEM_STORE):
            cols["size_bytes"][k] = _int_attr(nd, "tensor_size", path, 0, lo=0, hi=MAX_BYTES) or 0
        for dep_list, flat, counts in ((nd.data_deps, data_flat, data_counts), (nd.ctrl_deps, ctrl_flat, ctrl_counts)):
            kept = 0
            for d in dep_list:
                j = index.get(d)
                if j is None:
                    if flat is ctrl_flat:
                        # control deps are caller->callee links; converters drop callers
                        dangling_ctrl += 1
                        continue
                    raise InputError(f"data dependency on node {d}, which is not in the file", path, where)
                if j == k:
                    if flat is ctrl_flat:
                        self_ctrl += 1
                        continue
                    raise InputError("node has a data dependency on itself (a cycle)", path, where)
                flat.append(j)
                kept += 1
            counts[k] = kept
    data_ptr, data_idx = csr_from_arrays(data_counts, np.asarray(data_flat, dtype=np.int32))
    ctrl_ptr, ctrl_idx = csr_from_arrays(ctrl_counts, np.asarray(ctrl_flat, dtype=np.int32))
    label = Path(path).name
    notes = []
    if dangling_ctrl:
        notes.append(f"{label}: dropped {dangling_ctrl} control dependencies on nodes not in the file")
    if self_ctrl:
        notes.append(f"{label}: dropped {self_ctrl} control dependencies of nodes on themselves")
    if no_cpu_attr:
        notes.append(
            f"{label}: {no_cpu_attr} nodes have no 'is_cpu_op' attribute and were taken as GPU ops "
            "(Chakra feeders disagree on the default; set it explicitly)"
        )
    if host_colls:
        notes.append(f"{label}: {host_colls} COMM_COLL nodes marked is_cpu_op were replayed as host (CPU) time")
    return Program(label, cols, data_ptr, data_idx, ctrl_ptr, ctrl_idx, names, streams, group_keys, extras, notes)


def read_workload(
    prefix: str | os.PathLike[str],
    num_ranks: int | None = None,
    comm_groups: Mapping[str, Sequence[int]] | None = None,
    check_cycles: bool = True,
) -> Workload:
    """Read ``<prefix>.<rank>.et`` for every rank into a :class:`Workload`.

    Args:
        prefix: the ET prefix, as ASTRA-sim's ``--workload-configuration``.
        num_ranks: the number of ranks the machine has; every rank file must exist.  If None,
            the consecutive rank files found are used.
        comm_groups: ``{group id: ranks}`` (ASTRA-sim's comm-group configuration).
        check_cycles: reject dependency cycles (data dependencies).
    """

    prefix = str(prefix)
    if num_ranks is None:
        num_ranks = discover_ranks(prefix)
    per_rank: list[Program] = []
    cache: dict[bytes, Program] = {}
    for r in range(num_ranks):
        path = rank_file(prefix, r)
        if not os.path.exists(path):
            raise InputError(f"rank file missing (the machine has {num_ranks} NPUs)", path)
        raw = Path(path).read_bytes()
        prog = cache.get(raw)
        if prog is None:
            prog = trace_to_program(read_trace(path), rank=r, num_ranks=num_ranks)
            if check_cycles:
                try:
                    check_acyclic(prog, use_ctrl=True, source=path)
                except InputError:
                    check_acyclic(prog, use_ctrl=False, source=path)  # a real cycle: raise it
                    prog.ctrl_deps_order = False
                    prog.notes.append(
                        f"{Path(path).name}: control dependencies form cycles with the data dependencies "
                        "(older Chakra converters used them for caller links), so only data dependencies "
                        "order ops here; ASTRA-sim would wait forever"
                    )
            if not any(prog.kind[i] in (OpKind.SEND, OpKind.RECV) for i in range(len(prog))):
                cache[raw] = prog
        per_rank.append(prog)
    programs, mapping = dedupe_programs(per_rank)
    groups = [Group(str(k), tuple(int(x) for x in v)) for k, v in (comm_groups or {}).items()]
    return Workload(programs, mapping, groups, name=Path(prefix).name)


__all__ = ["read_workload", "trace_to_program", "discover_ranks", "rank_file"]
