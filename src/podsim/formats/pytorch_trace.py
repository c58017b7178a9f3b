"""PyTorch traces: the profiler's Kineto chrome trace, optionally with the execution trace (ET)
of the same step, read into a one-rank workload.

* **Kineto** (``torch.profiler`` ``export_chrome_trace``): ``cpu_op`` events (host ops, ``ts``
  and ``dur`` in us), ``user_annotation`` ranges (``ProfilerStep#N`` marks the profiled step),
  ``cuda_runtime`` launches and the GPU events they launch (``kernel``, ``gpu_memcpy``,
  ``gpu_memset``), matched by ``correlation``; the GPU events carry their ``stream``.
* **ET** (``ExecutionTraceObserver``): the host ops with their tensors; schema ``1.0.1`` (older
  PyTorch, fields at the top level) or ``1.0.x`` / ``1.1.x-chakra.0.0.4`` (``attrs`` list).
  Linked to Kineto ops by record-function id (ET ``rf_id`` == Kineto ``Record function id``).

The workload: the profiled step's top-level host ops in order on the host (each lasting until
the next one starts, so the host's gaps are kept), and every GPU event on its stream, in order,
each able to start once the host op that launched it has begun.  ``c10d::`` collectives become
collective ops of their ET input bytes over all ranks: issued when their op runs (on a
``comm`` stream; with NCCL, in place of the kernel the op launched, on its stream).  Where the
host sat idle until a collective ended (gloo's worker threads record when: ``gloo:*`` ranges,
record-function id + 1) the next host op waits for that collective instead of replaying the
idle time, so a faster or slower network moves it.  Names are the original op and kernel names.
Units: ns.
"""

from __future__ import annotations

import bisect
import gc
import gzip
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError
from ..fileio import load_json
from ..workload import CollectiveKind, Group, OpKind, Program, ProgramBuilder, Workload

ET_SCHEMAS = (
    "1.0.1",
    "1.0.2-chakra.0.0.4",
    "1.0.3-chakra.0.0.4",
    "1.0.4-chakra.0.0.4",
    "1.1.0-chakra.0.0.4",
    "1.1.1-chakra.0.0.4",
)
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: c10d ops (``c10d::NAME_``) and functional collectives (``_c10d_functional::NAME``, DTensor and
#: torch.compile) by their collective
_COLLECTIVES = {
    **dict.fromkeys(
        ("allreduce", "all_reduce", "allreduce_coalesced", "all_reduce_coalesced"), CollectiveKind.ALL_REDUCE
    ),
    **dict.fromkeys(
        (
            "allgather",
            "_allgather_base",
            "allgather_coalesced",
            "allgather_into_tensor_coalesced",
            "all_gather_into_tensor",
            "all_gather_into_tensor_out",
            "all_gather_into_tensor_coalesced",
        ),
        CollectiveKind.ALL_GATHER,
    ),
    **dict.fromkeys(
        ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced"),
        CollectiveKind.REDUCE_SCATTER,
    ),
    **dict.fromkeys(("alltoall", "alltoall_base", "all_to_all_single"), CollectiveKind.ALL_TO_ALL),
    "broadcast": CollectiveKind.BROADCAST,
}
_COLLECTIVE_PREFIXES = ("c10d::", "_c10d_functional::")


@dataclass(frozen=True)
class HostOp:
    """A Kineto ``cpu_op`` (times in us)."""

    name: str
    ts: float
    dur: float
    tid: int
    rf_id: int | None
    ext_id: int | None


@dataclass(frozen=True)
class GpuEvent:
    """A kernel, copy or memset on a GPU stream (times in us)."""

    name: str
    ts: float
    dur: float
    stream: int
    correlation: int | None


@dataclass
class KinetoTrace:
    source: str
    host_ops: list[HostOp]
    annotations: list[HostOp]
    launches: dict[int, tuple[float, int]]  #: correlation -> (ts, tid) of the runtime call
    gpu: list[GpuEvent]
    #: ``record_param_comms`` ops (the NCCL path's) with their process group: (op, group name, ranks)
    comms: list[tuple[HostOp, str, tuple[int, ...]]] = field(default_factory=list)
    #: the first GPU's name as the profiler recorded it (``deviceProperties``), None on a CPU run
    device_name: str | None = None


@dataclass
class EtNode:
    """An execution-trace node: its tensors as ``(storage id, bytes)`` pairs."""

    node_id: int
    name: str
    rf_id: int | None
    tensor_bytes_in: int
    parent: int | None = None
    seq_id: int | None = None
    inputs: tuple[tuple[int, int], ...] = ()
    outputs: tuple[tuple[int, int], ...] = ()
    arg_bytes: tuple[int, ...] = ()  #: tensor bytes of each input argument (tensor lists summed)
    #: each input argument's shape as the trace wrote it (a list of ints for a tensor; unchecked:
    #: :mod:`podsim.formats.aten_work` reads what it needs) and its type ("Tensor(float)", "Int")
    shapes: tuple = ()
    types: tuple = ()

    def collective_bytes(self, kind: CollectiveKind) -> int:
        """The size of the collective this c10d op runs, as nccl-tests counts it: the gathered
        output of an all-gather (its first argument), the input of a reduce-scatter or
        all-to-all (its second), the tensor of an all-reduce or broadcast (its first)."""
        k = 1 if kind in (CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL) else 0
        return self.arg_bytes[k] if len(self.arg_bytes) > k and self.arg_bytes[k] else self.tensor_bytes_in

    @property
    def tensor_bytes_out(self) -> int:
        return sum(b for _, b in self.outputs)


@dataclass
class ExecutionTrace:
    source: str
    schema: str
    nodes: list[EtNode] = field(default_factory=list)

    def by_rf_id(self) -> dict[int, EtNode]:
        return {n.rf_id: n for n in self.nodes if n.rf_id is not None}

    def children(self) -> dict[int, list[EtNode]]:
        """Node id -> the nodes whose parent it is."""
        out: dict[int, list[EtNode]] = {}
        for n in self.nodes:
            if n.parent is not None:
                out.setdefault(n.parent, []).append(n)
        return out

    def subtree(self, node: EtNode, children: dict[int, list[EtNode]]) -> list[EtNode]:
        """``node`` and every node below it."""
        out, todo, seen = [], [node], {node.node_id}
        while todo:
            n = todo.pop()
            out.append(n)
            kids = [c for c in children.get(n.node_id, ()) if c.node_id not in seen]  # parent cycles end here
            seen.update(c.node_id for c in kids)
            todo.extend(kids)
        return out


def load_json_object(path: str | Path, what: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no such {what} file", str(p))
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8") as f:
                text = f.read()
        else:
            text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start})", str(p)) from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read: {e}", str(p)) from None
    data = load_json(text, str(p))
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(p))
    return data


def read_kineto(path: str | Path) -> KinetoTrace:
    """Read a Kineto chrome trace.

    Raises:
        InputError: for a file that is not a chrome trace (no ``traceEvents``).
    """
    with _gc_paused():
        return _read_kineto(path)


def _device_name(data: dict) -> str | None:
    """The first device's name in a Kineto trace's ``deviceProperties`` (None when absent)."""
    props = data.get("deviceProperties")
    first = props[0] if isinstance(props, list) and props else None
    name = first.get("name") if isinstance(first, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def _read_kineto(path: str | Path) -> KinetoTrace:
    data = load_json_object(path, "Kineto trace")
    events = data.get("traceEvents")
    if not isinstance(events, list):
        raise InputError("no traceEvents: not a PyTorch profiler (Kineto) chrome trace", str(path))
    src = str(path)
    host: list[HostOp] = []
    notes: list[HostOp] = []
    gpu: list[GpuEvent] = []
    comms: list[tuple[HostOp, str, tuple[int, ...]]] = []
    launches: dict[int, tuple[float, int]] = {}
    # The common event (plain JSON types, fields in range) is read inline; any other one is
    # read, and checked, by _kineto_event, which raises the errors.
    cats, max_time, max_dur, max_field = _KINETO_CATS, _MAX_TIME, _MAX_DURATION, _MAX_FIELD
    for i, e in enumerate(events):
        if type(e) is not dict:
            if not isinstance(e, dict):
                continue
            _kineto_event(e, i, src, host, notes, gpu, comms, launches)
            continue
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if type(cat) is not str:
            if cat in _KINETO_CAT_ORDER:  # (a non-string equal to a category: not from JSON)
                _kineto_event(e, i, src, host, notes, gpu, comms, launches)
            continue
        if cat not in cats:
            continue
        args = e.get("args") or {}
        ts = e.get("ts", 0)
        tid = e.get("tid", 0)
        if (
            type(args) is not dict
            or not ((type(ts) is float or type(ts) is int) and -max_time <= ts <= max_time)
            or type(tid) is not int
            or not -max_field <= tid <= max_field
        ):
            _kineto_event(e, i, src, host, notes, gpu, comms, launches)
            continue
        if cat == "cpu_op" or cat == "user_annotation":
            dur = e.get("dur", 0)
            rf = args.get("Record function id")
            ext = args.get("External id")
            if (
                not ((type(dur) is float or type(dur) is int) and 0 <= dur <= max_dur)
                or not (rf is None or (type(rf) is int and -max_field <= rf <= max_field))
                or not (ext is None or (type(ext) is int and -max_field <= ext <= max_field))
            ):
                _kineto_event(e, i, src, host, notes, gpu, comms, launches)
                continue
            name = e.get("name", "")
            if type(name) is not str:
                name = str(name)
            if name == "record_param_comms" and "Process Group Name" in args:
                _kineto_event(e, i, src, host, notes, gpu, comms, launches)
                continue
            (host if cat == "cpu_op" else notes).append(HostOp(name, float(ts), float(dur), tid, rf, ext))
        elif cat == "cuda_runtime" or cat == "cuda_driver":
            if "correlation" in args:
                corr = args["correlation"]
                if type(corr) is not int or not -max_field <= corr <= max_field:
                    _kineto_event(e, i, src, host, notes, gpu, comms, launches)
                    continue
                launches[corr] = (float(ts), tid)
        else:
            stream = args.get("stream", tid) or 0
            dur = e.get("dur", 0)
            corr = args.get("correlation")
            if (
                type(stream) is not int
                or not -max_field <= stream <= max_field
                or not ((type(dur) is float or type(dur) is int) and 0 <= dur <= max_dur)
                or not (corr is None or (type(corr) is int and -max_field <= corr <= max_field))
            ):
                _kineto_event(e, i, src, host, notes, gpu, comms, launches)
                continue
            name = e.get("name", "")
            if type(name) is not str:
                name = str(name)
            gpu.append(GpuEvent(name, float(ts), float(dur), stream, corr))
    return KinetoTrace(src, host, notes, launches, gpu, comms, _device_name(data))


_KINETO_CAT_ORDER = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver") + GPU_CATS
_KINETO_CATS = frozenset(_KINETO_CAT_ORDER)


def _kineto_event(
    e: dict,
    i: int,
    src: str,
    host: list[HostOp],
    notes: list[HostOp],
    gpu: list[GpuEvent],
    comms: list[tuple[HostOp, str, tuple[int, ...]]],
    launches: dict[int, tuple[float, int]],
) -> None:
    """Read one trace event into the lists of :func:`read_kineto`, every field checked (the
    reading of any event its inline path does not take)."""
    if not isinstance(e, dict) or e.get("ph") != "X":
        return
    cat = e.get("cat")
    if cat not in _KINETO_CAT_ORDER:
        return
    where = f"traceEvents[{i}]"
    args = e.get("args") or {}
    if not isinstance(args, dict):
        raise InputError(f"expected a mapping, got {args!r}", src, f"{where}.args")
    ts, tid = _time(e, "ts", src, where), _whole(e.get("tid", 0), src, f"{where}.tid")
    if cat in ("cpu_op", "user_annotation"):
        op = HostOp(
            str(e.get("name", "")),
            ts,
            _time(e, "dur", src, where, duration=True),
            tid,
            _id(args, "Record function id", src, where),
            _id(args, "External id", src, where),
        )
        (host if cat == "cpu_op" else notes).append(op)
        if op.name == "record_param_comms" and "Process Group Name" in args:
            ranks = args.get("Process Group Ranks") or []
            if isinstance(ranks, str):  # some PyTorch versions write the list as a string
                ranks = [x for x in ranks.strip("[]").replace(" ", "").split(",") if x]
            if not isinstance(ranks, list):
                raise InputError(f"expected a list of ranks, got {ranks!r}", src, f"{where}.args.Process Group Ranks")
            comms.append(
                (
                    op,
                    str(args["Process Group Name"]),
                    tuple(_whole(r, src, f"{where}.args.Process Group Ranks", lo=0) for r in ranks),
                )
            )
    elif cat in ("cuda_runtime", "cuda_driver"):
        if "correlation" in args:
            launches[_whole(args["correlation"], src, f"{where}.args.correlation")] = (ts, tid)
    else:
        stream = args.get("stream", e.get("tid", 0)) or 0
        gpu.append(
            GpuEvent(
                str(e.get("name", "")),
                ts,
                _time(e, "dur", src, where, duration=True),
                _whole(stream, src, f"{where}.args.stream"),
                _id(args, "correlation", src, where),
            )
        )


_TWICE = object()  #: an attribute named more than once


def _named_once(attrs: list, names: list[str], name: str) -> object:
    """The value of attribute ``name`` (None when absent, ``_TWICE`` when named twice)."""
    k = names.count(name)
    if k == 1:
        return attrs[names.index(name)].get("value")
    return _TWICE if k else None


def _plain_values(v: object) -> object:
    """An ET node's ``{values: [...]}`` inputs or outputs as their list ([] when absent); None
    when they are not such a mapping (then _et_node says so)."""
    if v is None:
        return []
    if type(v) is dict:
        got = v.get("values")
        return [] if got is None else got
    return None


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a trace is read: decoding and reading it allocate
    millions of objects but no reference cycles, and each collection would rescan them all."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


#: the largest duration (us; 31 years), timestamp (us since the epoch; float-exact) and id or count
#: a trace field may hold
_MAX_DURATION = 10**15
_MAX_TIME = 2**53
_MAX_FIELD = 2**63 - 1
_MAX_ELEMENTS = 10**15  #: elements of one tensor


def _time(e: dict, key: str, src: str, where: str, duration: bool = False) -> float:
    """A finite time of an event (us; a duration must not be negative)."""
    v = e.get(key, 0)
    hi = _MAX_DURATION if duration else _MAX_TIME
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= hi or (duration and v < 0):
        what = "a duration >= 0" if duration else "a finite time"
        raise InputError(f"expected {what} (us), got {v!r}", src, f"{where}.{key}")
    return float(v)


def _whole(v: object, src: str, where: str, lo: int = -_MAX_FIELD) -> int:
    """An integer field (a thread, stream, rank or id; ``"7"`` and ``7.0`` are taken)."""
    if isinstance(v, str) and v.strip().lstrip("-").isdecimal():
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= _MAX_FIELD:
        raise InputError(f"expected an integer, got {v!r}", src, where)
    return v


def _id(args: dict, key: str, src: str, where: str) -> int | None:
    """An optional id in an event's ``args``."""
    v = args.get(key)
    return None if v is None else _whole(v, src, f"{where}.args.{key}")


def read_execution_trace(path: str | Path) -> ExecutionTrace:
    """Read a PyTorch execution trace (the ``ExecutionTraceObserver``'s JSON).

    Raises:
        InputError: for an unknown schema version (naming the supported ones) or no nodes.
    """
    with _gc_paused():
        return _read_execution_trace(path)


def _read_execution_trace(path: str | Path) -> ExecutionTrace:
    data = load_json_object(path, "execution trace")
    schema = str(data.get("schema", ""))
    if schema not in ET_SCHEMAS:
        raise InputError(
            f"unknown execution-trace schema {schema!r}; podsim reads {', '.join(ET_SCHEMAS)}", str(path), "schema"
        )
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InputError("no nodes", str(path))
    src = str(path)
    out = []
    ids: set[int] = set()
    old_schema = schema == "1.0.1"
    max_field, max_elements = _MAX_FIELD, _MAX_ELEMENTS
    # The common node (plain JSON types, fields and tensors in range, an attribute named once) is
    # read inline; any other one is read, and checked, by _et_node, which raises the errors.
    # Nothing here changes ``ids`` or ``out`` before the node is known to read inline; a value
    # that is not a plain tensor goes to _tensors, whose error (if any) is the one _et_node
    # would raise first, every check before it having passed.
    for i, n in enumerate(nodes):
        if type(n) is not dict:
            out.append(_et_node(n, i, schema, src, ids))
            continue
        if old_schema:
            values, outs, parent = n.get("inputs") or [], n.get("outputs") or [], n.get("parent")
            rf, seq = n.get("rf_id"), n.get("seq_id")
            shapes, types = n.get("input_shapes"), n.get("input_types")
        else:
            a_list = n.get("attrs")
            if a_list is None:
                rf = seq = None
            elif type(a_list) is list:
                try:  # each attribute a mapping with a string name (else a TypeError or KeyError)
                    names = [a["name"] for a in a_list]
                    "".join(names)
                except (TypeError, KeyError):
                    out.append(_et_node(n, i, schema, src, ids))
                    continue
                rf, seq = _named_once(a_list, names, "rf_id"), _named_once(a_list, names, "seq_id")
                if rf is _TWICE or seq is _TWICE:  # named twice: the last counts
                    out.append(_et_node(n, i, schema, src, ids))
                    continue
            else:
                out.append(_et_node(n, i, schema, src, ids))
                continue
            values, outs = _plain_values(n.get("inputs")), _plain_values(n.get("outputs"))
            parent = n.get("ctrl_deps")
            io = n.get("inputs")
            shapes, types = (io.get("shapes"), io.get("types")) if type(io) is dict else (None, None)
        nid = n.get("id")
        if (
            type(values) is not list
            or type(outs) is not list
            or type(nid) is not int
            or not 0 <= nid <= max_field
            or nid in ids
            or not (rf is None or (type(rf) is int and 0 <= rf <= max_field))
        ):
            out.append(_et_node(n, i, schema, src, ids))
            continue
        # the tensors as _tensors reads them: (storage, bytes) of each, and each argument's bytes
        tensors: list[tuple[int, int]] = []
        arg_bytes: list[int] = []
        odd = False
        for v in values:
            if type(v) is list:
                if len(v) == 6:
                    t_id, storage, offset, numel, itemsize, device = v
                    if (
                        type(t_id) is int
                        and type(storage) is int
                        and type(offset) is int
                        and type(numel) is int
                        and type(itemsize) is int
                        and type(device) is str
                    ):
                        if not (0 <= numel <= max_elements and 0 <= itemsize <= 1024):
                            odd = True
                            break
                        nbytes = numel * itemsize
                        tensors.append((storage, nbytes))
                        arg_bytes.append(nbytes)
                        continue
                    some = _tensors([v], src, f"nodes[{i}]")  # (a bool among the fields, say)
                    tensors.extend(some)
                    arg_bytes.append(sum(b for _, b in some))
                    continue
                if v and type(v[0]) is list:  # a list of tensors (or not a tensor at all)
                    some = _tensors([v], src, f"nodes[{i}]")
                    tensors.extend(some)
                    arg_bytes.append(sum(b for _, b in some))
                    continue
            arg_bytes.append(0)
        outputs: list[tuple[int, int]] = []
        if not odd:
            for v in outs:
                if type(v) is list:
                    if len(v) == 6:
                        t_id, storage, offset, numel, itemsize, device = v
                        if (
                            type(t_id) is int
                            and type(storage) is int
                            and type(offset) is int
                            and type(numel) is int
                            and type(itemsize) is int
                            and type(device) is str
                        ):
                            if not (0 <= numel <= max_elements and 0 <= itemsize <= 1024):
                                odd = True
                                break
                            outputs.append((storage, numel * itemsize))
                            continue
                        outputs.extend(_tensors([v], src, f"nodes[{i}]"))
                        continue
                    if v and type(v[0]) is list:
                        outputs.extend(_tensors([v], src, f"nodes[{i}]"))
        if odd:
            out.append(_et_node(n, i, schema, src, ids))
            continue
        ids.add(nid)
        name = n.get("name", "")
        out.append(
            EtNode(
                nid,
                name if type(name) is str else str(name),
                rf,
                sum(arg_bytes),
                int(parent) if isinstance(parent, int) else None,
                int(seq) if isinstance(seq, int) and seq >= 0 else None,
                tuple(tensors),
                tuple(outputs),
                tuple(arg_bytes),
                tuple(shapes) if type(shapes) is list else (),
                tuple(types) if type(types) is list else (),
            )
        )
    return ExecutionTrace(src, schema, out)


def _et_node(n: object, i: int, schema: str, src: str, ids: set[int]) -> EtNode:
    """Execution-trace node ``i``, every field checked (the reading of any node the inline path
    of :func:`read_execution_trace` does not take); adds its id to ``ids``."""
    where = f"nodes[{i}]"
    if not isinstance(n, dict):
        raise InputError(f"expected a node object, got {n!r:.60}", src, where)
    if schema == "1.0.1":
        attrs = n
        values, outs, parent = n.get("inputs") or [], n.get("outputs") or [], n.get("parent")
    else:
        attrs = {}
        for a in _list(n.get("attrs"), src, f"{where}.attrs"):
            if not isinstance(a, dict) or not isinstance(a.get("name"), str):
                raise InputError(f"expected an attribute {{name, type, value}}, got {a!r:.60}", src, f"{where}.attrs")
            attrs[a["name"]] = a.get("value")
        values = _values(n.get("inputs"), src, f"{where}.inputs")
        outs = _values(n.get("outputs"), src, f"{where}.outputs")
        parent = n.get("ctrl_deps")
    values, outs = _list(values, src, f"{where}.inputs"), _list(outs, src, f"{where}.outputs")
    if "id" not in n:
        raise InputError("a node without an 'id'", src, where)
    nid = _whole(n["id"], src, f"{where}.id", lo=0)
    if nid in ids:
        raise InputError(f"node id {nid} appears twice", src, f"{where}.id")
    ids.add(nid)
    rf, seq = attrs.get("rf_id"), attrs.get("seq_id")
    tensors = _tensors(values, src, where)
    io = n.get("inputs")
    shapes, types = (
        (n.get("input_shapes"), n.get("input_types"))
        if schema == "1.0.1"
        else ((io.get("shapes"), io.get("types")) if isinstance(io, dict) else (None, None))
    )
    return EtNode(
        nid,
        str(n.get("name", "")),
        _whole(rf, src, f"{where}.rf_id", lo=0) if rf is not None else None,
        sum(b for _, b in tensors),
        int(parent) if isinstance(parent, int) else None,
        int(seq) if isinstance(seq, int) and seq >= 0 else None,
        tuple(tensors),
        tuple(_tensors(outs, src, where)),
        tuple(sum(b for _, b in _tensors([v], src, where)) for v in values),
        tuple(shapes) if isinstance(shapes, list) else (),
        tuple(types) if isinstance(types, list) else (),
    )


def _list(v: object, src: str, where: str) -> list:
    """A list field of an ET node (absent: empty)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"expected a list, got {v!r:.60}", src, where)
    return v


def _values(io: object, src: str, where: str) -> list:
    """The ``values`` of a node's ``inputs`` or ``outputs`` (schema 1.0.2 and later)."""
    if io is None:
        return []
    if not isinstance(io, dict):
        raise InputError(f"expected {{values, shapes, types}}, got {io!r:.60}", src, where)
    return _list(io.get("values"), src, f"{where}.values")


def _tensors(values: list, src: str = "", where: str = "") -> list[tuple[int, int]]:
    """``(storage id, bytes)`` of the tensors among ET values; a tensor is ``[id, storage, offset,
    numel, itemsize, device]``, lists of tensors are nested lists of those.

    Raises:
        InputError: for a tensor of a negative or absurd size."""
    out = []
    for v in values:
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) for x in v[:5]) and isinstance(v[5], str):
            if not (0 <= v[3] <= _MAX_ELEMENTS and 0 <= v[4] <= 1024):
                raise InputError(f"tensor {v!r} has {v[3]} elements of {v[4]} bytes; expected counts >= 0", src, where)
            out.append((v[1], v[3] * v[4]))
        elif isinstance(v, list) and v and all(isinstance(x, list) for x in v):
            out.extend(_tensors(v, src, where))
    return out


def step_window(k: KinetoTrace, whole_trace: bool = False) -> tuple[float, float, HostOp | None]:
    """(start, end, annotation) of the profiled step (us): the last ``ProfilerStep#N``, or with
    ``whole_trace`` the span of every event.

    Raises:
        InputError: without a step annotation (unless ``whole_trace``) or any event.
    """
    steps = [a for a in k.annotations + k.host_ops if a.name.startswith("ProfilerStep#")]
    if steps:
        step = max(steps, key=lambda a: a.ts)
        return step.ts, step.ts + step.dur, step
    if not whole_trace:
        raise InputError(
            "no ProfilerStep annotation: capture with torch.profiler.profile(schedule=...) and call "
            "prof.step() after each step, so the profiled step is marked (or simulate the whole "
            "trace: --whole-trace)",
            k.source,
        )
    spans = [(o.ts, o.ts + o.dur) for o in k.host_ops] + [(g.ts, g.ts + g.dur) for g in k.gpu]
    if not spans:
        raise InputError("no host ops or GPU events", k.source)
    return min(a for a, _ in spans), max(b for _, b in spans), None


def top_level_ops(ops: list[HostOp]) -> list[HostOp]:
    """Host ops not nested in another host op of the same thread."""
    out = []
    ends: dict[int, float] = {}
    for op in sorted(ops, key=lambda o: (o.ts, -o.dur)):
        if op.ts < ends.get(op.tid, -math.inf):
            continue
        out.append(op)
        ends[op.tid] = op.ts + op.dur
    return out


def pytorch_to_workload(
    kineto: str | Path, et: str | Path | None = None, whole_trace: bool = False, ranks: int = 1, comm: str = "simulate"
) -> Workload:
    """The profiled step of a Kineto trace (and its ET) as a workload on ``ranks`` ranks, all
    running the same step.

    Raises:
        InputError: when the trace has no ``ProfilerStep`` annotation (unless ``whole_trace``),
            when the ET and the Kineto trace come from different runs (few record-function ids
            match), or when the step has no host ops.
    """
    prog, label, groups = _rank_program(kineto, et, whole_trace, comm)
    world = tuple(range(ranks))
    sub = sorted(name for name, r in groups if tuple(sorted(r)) != world)
    if sub:
        raise InputError(
            f"the trace's collectives run on process groups of some of the {ranks} ranks "
            f"({', '.join(sub)}): simulate every rank's trace together (a podsim trace folder), or "
            "give the group's size as --gpus",
            str(kineto),
        )
    return Workload([prog], [0] * ranks, [Group(f"pg {name}", world) for name, _ in sorted(groups)], label)


def execution_trace_to_workload(et: str | Path, ranks: int = 2) -> Workload:
    """The collectives of an execution trace alone (no Kineto trace, so no times): its
    ``c10d::`` ops in order on ``ranks`` ranks, each of its nccl-tests size, for what the
    communication costs by itself.  (Chakra's converter makes the same of an unlinked ET: every
    compute node 0 us.)

    Raises:
        InputError: for a bad execution trace or one without collectives.
    """
    tr = read_execution_trace(et)
    b = ProgramBuilder(Path(et).stem)
    prev: list[int] = []
    for n in sorted(tr.nodes, key=lambda n: n.node_id):
        kind = _collective_kind(n.name)
        if kind is None:
            continue
        prev = [
            b.add(
                OpKind.COLLECTIVE,
                n.name,
                data_deps=prev,
                node_id=n.node_id,
                collective=int(kind),
                size_bytes=max(n.collective_bytes(kind), 1),
                stream="comm",
            )
        ]
    if not prev:
        raise InputError(
            "no c10d collectives in this execution trace, and no Kineto trace to time its ops: give "
            "the profiler's trace as the workload and this file as --execution-trace",
            str(et),
        )
    prog = b.build()
    prog.notes.append("an execution trace alone: its collectives only (no Kineto trace, so compute has no time)")
    return Workload([prog], [0] * ranks, [], f"{Path(et).name} (collectives)")


def is_execution_trace(path: str | Path) -> bool:
    """Whether a JSON file is an execution trace (``schema`` and ``nodes``), not a Kineto trace;
    reads only its start."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as f:
            head = f.read(4096)
    except (OSError, EOFError, UnicodeDecodeError):
        return False
    return '"schema"' in head and '"traceEvents"' not in head


def capture_to_workload(folder: str | Path, comm: str = "simulate") -> Workload:
    """Every rank of a ``podsim trace`` folder: ``kineto.json`` (+ ``et.json``) for one process,
    ``kineto.<r>.json`` (+ ``et.<r>.json``) for each rank of a distributed capture.  ``comm``:
    ``simulate`` times the traced collectives on the cluster; ``measured`` replays each for the
    time its backend (gloo) spent on it, to check the capture against its own step time.

    Raises:
        InputError: for a folder without traces, missing ranks, or a bad trace.
    """
    files = capture_files(folder)
    progs, groups = [], set()
    for k, e in files:
        prog, _label, g = _rank_program(k, e, False, comm)
        progs.append(prog)
        groups |= g
    n = len(progs)
    for name, ranks in groups:
        if any(r >= n for r in ranks):
            raise InputError(f"process group {name} has ranks {list(ranks)} but the capture has {n} ranks", str(folder))
    return Workload(
        progs,
        list(range(n)),
        [Group(f"pg {name}", ranks) for name, ranks in sorted(groups)],
        f"{Path(folder).name} ({n} rank{'s' if n > 1 else ''})",
    )


_RANK_KINETO = re.compile(r"^kineto\.(\d+)\.json(\.gz)?$")


def capture_files(folder: str | Path) -> list[tuple[Path, Path | None]]:
    """(Kineto trace, execution trace or None) of each rank of a ``podsim trace`` folder, in
    rank order (``.json`` or ``.json.gz``).

    Raises:
        InputError: for a folder without a Kineto trace, or ranks missing between 0 and the last.
    """
    d = Path(folder)

    def find(stem: str) -> Path | None:
        return next((d / n for n in (f"{stem}.json", f"{stem}.json.gz") if (d / n).is_file()), None)

    one = find("kineto")
    if one is not None:
        return [(one, find("et"))]
    ranks = sorted(int(m.group(1)) for f in d.iterdir() if (m := _RANK_KINETO.match(f.name)))
    if not ranks:
        raise InputError("no kineto.json or kineto.<rank>.json here (a podsim trace folder)", str(d))
    if ranks != list(range(len(ranks))):
        missing = sorted(set(range(ranks[-1] + 1)) - set(ranks))
        raise InputError(f"the Kineto traces of ranks {missing} are missing (kineto.<rank>.json)", str(d))
    return [(find(f"kineto.{r}"), find(f"et.{r}")) for r in ranks]  # type: ignore[misc]


@dataclass
class _Collective:
    op: HostOp
    kind: CollectiveKind
    size: int
    end: float | None  #: when its backend finished it (us), if the trace says
    backend_ops: list[HostOp] = field(default_factory=list)
    group: tuple[str, tuple[int, ...]] | None = None  #: its process group (NCCL traces say)


def _collectives(
    k: KinetoTrace, host: list[HostOp], nodes: dict[int, EtNode], lo: float, hi: float
) -> list[_Collective]:
    """The step's c10d collectives (any thread, any depth) with their ET sizes, their process
    group (NCCL's ``record_param_comms`` inside the op says it) and, for gloo, the worker-thread
    range that ran them (record-function id + 1; otherwise the first unclaimed one after)."""
    backend = sorted(
        (a for a in k.annotations if lo <= a.ts < hi and a.name.startswith(("gloo:", "nccl:"))), key=lambda a: a.ts
    )
    by_rf = {a.rf_id: a for a in backend if a.rf_id is not None}
    comms: dict[int, tuple[list[float], list[tuple[str, tuple[int, ...]]]]] = {}  # tid -> (starts, groups)
    for c, name, ranks in sorted(k.comms, key=lambda x: x[0].ts):
        if ranks:
            starts, groups = comms.setdefault(c.tid, ([], []))
            starts.append(c.ts)
            groups.append((name, ranks))
    ops = sorted(
        (
            o
            for o in host
            if o.name.startswith(_COLLECTIVE_PREFIXES) and _collective_kind(o.name) is not None and o.rf_id in nodes
        ),
        key=lambda o: o.ts,
    )
    claimed = {id(by_rf[o.rf_id + 1]) for o in ops if o.rf_id is not None and o.rf_id + 1 in by_rf}
    free = [a for a in backend if id(a) not in claimed]
    free_starts = [a.ts for a in free]
    taken: set[int] = set()
    out = []
    for o in ops:
        kind = _collective_kind(o.name)
        assert kind is not None
        b = by_rf.get(o.rf_id + 1) if o.rf_id is not None else None
        if b is None:  # the first unclaimed backend range at or after the op
            j = bisect.bisect_left(free_starts, o.ts)
            while j < len(free) and id(free[j]) in taken:
                j += 1
            if j < len(free):
                b = free[j]
                taken.add(id(b))
        group = None
        starts, groups = comms.get(o.tid, ([], []))
        j = bisect.bisect_left(starts, o.ts)
        if j < len(starts) and starts[j] <= o.ts + o.dur:
            group = groups[j]
        out.append(
            _Collective(
                o,
                kind,
                max(nodes[o.rf_id].collective_bytes(kind), 1),
                b.ts + b.dur if b else None,
                [b] if b else [],
                group,
            )
        )
    return out


def read_linked(kineto: str | Path, et: str | Path | None) -> tuple[KinetoTrace, ExecutionTrace | None, list[str]]:
    """Read a Kineto trace and its execution trace.  Older PyTorch (schema 1.0.1 era) wrote no
    record-function ids into Kineto: then, when every op name occurs as often in both files,
    the n-th Kineto op of a name takes the record-function id of the ET's n-th node of that name
    (both files list ops in the order they started), and a note says so.

    Raises:
        InputError: as :func:`read_kineto` and :func:`read_execution_trace`.
    """
    k = read_kineto(kineto)
    if et is None:
        return k, None, []
    tr = read_execution_trace(et)
    if any(o.rf_id is not None for o in k.host_ops):
        return k, tr, []
    ops_by_name: dict[str, list[HostOp]] = {}
    for o in sorted(k.host_ops, key=lambda o: o.ts):
        ops_by_name.setdefault(o.name, []).append(o)
    nodes_by_name: dict[str, list[EtNode]] = {}
    for n in sorted(tr.nodes, key=lambda n: n.node_id):
        if n.rf_id is not None and n.name in ops_by_name:
            nodes_by_name.setdefault(n.name, []).append(n)
    if not ops_by_name or any(len(v) != len(nodes_by_name.get(name, ())) for name, v in ops_by_name.items()):
        return k, tr, []
    rf = {id(o): n.rf_id for name, ops in ops_by_name.items() for o, n in zip(ops, nodes_by_name[name])}
    host = [replace(o, rf_id=rf[id(o)]) for o in k.host_ops]
    return (
        replace(k, host_ops=host),
        tr,
        [
            "the Kineto trace carries no record-function ids (an older PyTorch): linked to the execution trace by "
            "the order of each op name"
        ],
    )


def linked_nodes(k: KinetoTrace, host: list[HostOp], et: ExecutionTrace) -> tuple[dict[int, EtNode], list[str]]:
    """The ET's nodes by record-function id, checked against the step's host ops, and notes.

    Raises:
        InputError: when fewer than half the host ops' ids are in the ET (another run's ET).
    """
    nodes = et.by_rf_id()
    with_rf = [o for o in host if o.rf_id is not None]
    if not with_rf:
        return nodes, [
            "the Kineto trace carries no record-function ids and its ops do not pair with the execution "
            "trace's by name and order: the execution trace is not linked"
        ]
    matched = sum(1 for o in with_rf if o.rf_id in nodes)
    if matched < 0.5 * len(with_rf):
        raise InputError(
            f"only {matched} of {len(with_rf)} profiled host ops have a record-function id in the "
            f"execution trace {et.source}: the two files come from different runs; capture both in one "
            "profiler session (execution_trace_observer=...)",
            k.source,
        )
    return nodes, []


def _rank_program(
    kineto: str | Path, et: str | Path | None, whole_trace: bool, comm: str
) -> tuple[Program, str, set[tuple[str, tuple[int, ...]]]]:
    """One rank's program: host ops in order on the host, each until the next begins (the
    host's gaps are kept) except where the next one waited for a collective; GPU events on
    their streams; c10d collectives issued when their op runs, the first host op after a
    collective's end that found the host idle waiting for it."""
    with _gc_paused():  # (the traces are freed before the collector runs again)
        return _read_rank_program(kineto, et, whole_trace, comm)


def _read_rank_program(
    kineto: str | Path, et: str | Path | None, whole_trace: bool, comm: str
) -> tuple[Program, str, set[tuple[str, tuple[int, ...]]]]:
    if comm not in ("simulate", "measured"):
        raise InputError(f"comm must be 'simulate' or 'measured', not {comm!r}")
    k, tr, notes = read_linked(kineto, et)
    lo, hi, step = step_window(k, whole_trace)
    host = [o for o in k.host_ops if lo <= o.ts < hi and not o.name.startswith("ProfilerStep#")]
    if not host:
        raise InputError("the profiled step has no host ops", k.source)
    main_tid = (
        step.tid
        if step is not None
        else max({o.tid for o in host}, key=lambda t: sum(o.dur for o in host if o.tid == t))
    )
    top = [o for o in top_level_ops(host) if o.tid == main_tid]
    et_nodes: dict[int, EtNode] = {}
    if tr is not None:
        et_nodes, link_notes = linked_nodes(k, host, tr)
        notes += link_notes
    colls = _collectives(k, host, et_nodes, lo, hi)
    unknown = _unknown_collectives(host)
    if unknown:
        notes.append(f"not read as collectives (replayed as host time): {', '.join(unknown)}")
    top_starts = [o.ts for o in top]
    # NCCL: the collective is the kernel its op launched; it runs on the kernel's stream
    by_tid: dict[int, list[tuple[float, float, int]]] = {}  # tid -> (start, end, collective), by start
    for c_i, c in enumerate(colls):
        by_tid.setdefault(c.op.tid, []).append((c.op.ts, c.op.ts + c.op.dur, c_i))
    for v in by_tid.values():
        v.sort()
    nccl_of: dict[int, int] = {}  # id(GPU event) -> collective
    for g in k.gpu:
        if g.name.lower().startswith("nccl") and g.correlation in k.launches:
            ts, tid = k.launches[g.correlation]
            spans = by_tid.get(tid, [])
            j = bisect.bisect_right(spans, (ts, math.inf, 0)) - 1
            if j >= 0 and spans[j][0] <= ts <= spans[j][1]:
                nccl_of[id(g)] = spans[j][2]
    on_gpu = set(nccl_of.values())
    # which host op waited for which collective: the first to start after the collective ended,
    # when the op before it had already finished (the host sat idle, blocked in a wait); NCCL
    # collectives run on GPU streams, the host does not wait for them
    waits_for: dict[int, list[int]] = {}
    for c_i, c in enumerate(colls):
        if c.end is None or c_i in on_gpu:
            continue
        j = bisect.bisect_left(top_starts, c.end)
        if 0 < j < len(top) and top[j - 1].ts + top[j - 1].dur <= c.end:
            waits_for.setdefault(j, []).append(c_i)
    b = ProgramBuilder(Path(kineto).stem)
    nid = 0
    host_idx: list[int] = []
    starts = top_starts + [hi]
    prev: list[int] = []
    if top and top[0].ts > lo:  # the host's time from the step's start to its first op
        nid += 1
        prev = [
            b.add(
                OpKind.COMPUTE,
                "host (before the first op)",
                node_id=nid,
                is_cpu=True,
                stream="host",
                duration_ns=max(1, round((top[0].ts - lo) * 1000)),
            )
        ]
    coll_idx: dict[int, int] = {}
    issued_in: dict[int, list[int]] = {}  # top-level op -> the collectives issued while it runs
    for c_i, c in sorted(enumerate(colls), key=lambda x: x[1].op.ts):
        if c_i not in on_gpu:
            issued_in.setdefault(max(bisect.bisect_right(top_starts, c.op.ts) - 1, 0), []).append(c_i)
    for i, o in enumerate(top):
        for c_i in issued_in.get(i, ()):
            c = colls[c_i]
            nid += 1
            deps = [host_idx[i - 1]] if i > 0 else []
            if comm == "measured" and c.end is not None:
                # from the start of the op that issued it to its traced end (queueing behind other
                # buckets included), on a track of its own
                coll_idx[c_i] = b.add(
                    OpKind.COMPUTE,
                    f"{c.op.name} ({c.size:,} B, measured)",
                    data_deps=deps,
                    node_id=nid,
                    duration_ns=max(1, round((c.end - o.ts) * 1000)),
                    stream=f"collective {c_i} (measured)",
                )
            else:
                coll_idx[c_i] = b.add(
                    OpKind.COLLECTIVE,
                    c.op.name,
                    data_deps=deps,
                    node_id=nid,
                    collective=int(c.kind),
                    size_bytes=c.size,
                    stream="comm",
                    group=f"pg {c.group[0]}" if c.group else None,
                )
        nid += 1
        deps = prev + [coll_idx[c] for c in waits_for.get(i, ()) if c in coll_idx]
        if i in waits_for:  # the host resumes some time after the collective it waited for ends
            wake = o.ts - max(colls[c].end or 0.0 for c in waits_for[i])
            if wake > 0:
                deps = [
                    b.add(
                        OpKind.COMPUTE,
                        "host (resumes after the wait)",
                        data_deps=deps,
                        node_id=nid,
                        duration_ns=max(1, round(wake * 1000)),
                        is_cpu=True,
                        stream="host",
                    )
                ]
                nid += 1
        end = o.ts + o.dur if i + 1 in waits_for else starts[i + 1]
        ns = max(1, round((end - o.ts) * 1000))
        idx = b.add(OpKind.COMPUTE, o.name, data_deps=deps, node_id=nid, duration_ns=ns, is_cpu=True, stream="host")
        host_idx.append(idx)
        prev = [idx]
    # GPU events on their streams, each after the host op before the one that launched it
    launch_of: dict[int, int] = {}
    for g in k.gpu:
        if g.correlation is None or g.correlation not in k.launches:
            continue
        ts, _tid = k.launches[g.correlation]
        if lo <= ts < hi:  # launched in this step (it may run after the step's host part ends)
            launch_of[id(g)] = max(bisect.bisect_right(top_starts, ts) - 1, 0)
    last_on: dict[int, int] = {}
    in_step = (
        g
        for g in k.gpu
        if id(g) in launch_of or (lo <= g.ts < hi and (g.correlation is None or g.correlation not in k.launches))
    )
    for g in sorted(in_step, key=lambda g: g.ts):
        nid += 1
        deps = [last_on[g.stream]] if g.stream in last_on else []
        j = launch_of.get(id(g))
        if j is not None and j > 0:
            deps.append(host_idx[j - 1])
        c_i = nccl_of.get(id(g))
        if c_i is not None and comm == "simulate":
            c = colls[c_i]
            last_on[g.stream] = b.add(
                OpKind.COLLECTIVE,
                c.op.name,
                data_deps=deps,
                node_id=nid,
                collective=int(c.kind),
                size_bytes=c.size,
                stream=f"cuda stream {g.stream}",
                group=f"pg {c.group[0]}" if c.group else None,
                extra={"kernel": g.name},
            )
            continue
        last_on[g.stream] = b.add(
            OpKind.COMPUTE,
            g.name,
            data_deps=deps,
            node_id=nid,
            duration_ns=max(1, round(g.dur * 1000)),
            stream=f"cuda stream {g.stream}",
        )
    prog = b.build()
    prog.notes.extend(notes)
    label = f"{Path(kineto).name}" + (" (whole trace)" if step is None else f" ({step.name})")
    return prog, label, {c.group for c in colls if c.group}


def _collective_kind(name: str) -> CollectiveKind | None:
    for prefix in _COLLECTIVE_PREFIXES:
        if name.startswith(prefix):
            return _COLLECTIVES.get(name[len(prefix) :].rstrip("_"))
    return None


def _unknown_collectives(host: list[HostOp]) -> list[str]:
    """Names of c10d ops that move data but podsim does not read as collectives (a note)."""
    skip = ("barrier", "wait", "wait_tensor", "monitored_barrier", "send", "recv", "recv_any_source")
    return sorted(
        {
            o.name
            for o in host
            if o.name.startswith(_COLLECTIVE_PREFIXES)
            and _collective_kind(o.name) is None
            and o.name.split("::", 1)[1].rstrip("_") not in skip
        }
    )
