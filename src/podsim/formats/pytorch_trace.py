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
collective ops of their ET input bytes over all ranks.  Names are the original op and kernel
names.  Units: ns.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..workload import CollectiveKind, OpKind, ProgramBuilder, Workload

ET_SCHEMAS = ("1.0.1", "1.0.2-chakra.0.0.4", "1.0.3-chakra.0.0.4", "1.0.4-chakra.0.0.4", "1.1.0-chakra.0.0.4",
              "1.1.1-chakra.0.0.4")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_COLLECTIVES = {"allreduce": CollectiveKind.ALL_REDUCE, "all_reduce": CollectiveKind.ALL_REDUCE,
                "allgather": CollectiveKind.ALL_GATHER, "_allgather_base": CollectiveKind.ALL_GATHER,
                "reduce_scatter": CollectiveKind.REDUCE_SCATTER, "_reduce_scatter_base": CollectiveKind.REDUCE_SCATTER,
                "alltoall": CollectiveKind.ALL_TO_ALL, "broadcast": CollectiveKind.BROADCAST}


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
    launches: dict[int, tuple[float, int]]     #: correlation -> (ts, tid) of the runtime call
    gpu: list[GpuEvent]


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
        out, todo = [], [node]
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(children.get(n.node_id, ()))
        return out


def _load_json(path: str | Path, what: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no such {what} file", str(p))
    try:
        if p.suffix == ".gz":
            import gzip
            with gzip.open(p, "rt") as f:
                text = f.read()
        else:
            text = p.read_text()
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", str(p), f"line {e.lineno}") from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read: {e}", str(p)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(p))
    return data


def trace_folder_files(folder: str | Path) -> tuple[Path, Path | None]:
    """The Kineto trace and execution trace of a ``podsim trace`` folder (``kineto.json`` or
    ``.json.gz``; ``et.json`` or ``.json.gz`` if present).

    Raises:
        InputError: when the folder has no Kineto trace.
    """
    d = Path(folder)

    def find(stem: str) -> Path | None:
        return next((d / n for n in (f"{stem}.json", f"{stem}.json.gz") if (d / n).is_file()), None)
    kineto = find("kineto")
    if kineto is None:
        raise InputError("no kineto.json or kineto.json.gz here (a podsim trace folder)", str(d))
    return kineto, find("et")


def read_kineto(path: str | Path) -> KinetoTrace:
    """Read a Kineto chrome trace.

    Raises:
        InputError: for a file that is not a chrome trace (no ``traceEvents``).
    """
    data = _load_json(path, "Kineto trace")
    events = data.get("traceEvents")
    if not isinstance(events, list):
        raise InputError("no traceEvents: not a PyTorch profiler (Kineto) chrome trace", str(path))
    host, notes, gpu = [], [], []
    launches: dict[int, tuple[float, int]] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        args = e.get("args") or {}
        if cat in ("cpu_op", "user_annotation"):
            op = HostOp(str(e.get("name", "")), float(e.get("ts", 0)), float(e.get("dur", 0)), int(e.get("tid", 0)),
                        args.get("Record function id"), args.get("External id"))
            (host if cat == "cpu_op" else notes).append(op)
        elif cat in ("cuda_runtime", "cuda_driver"):
            if "correlation" in args:
                launches[int(args["correlation"])] = (float(e.get("ts", 0)), int(e.get("tid", 0)))
        elif cat in GPU_CATS:
            gpu.append(GpuEvent(str(e.get("name", "")), float(e.get("ts", 0)), float(e.get("dur", 0)),
                                int(args.get("stream", e.get("tid", 0)) or 0), args.get("correlation")))
    return KinetoTrace(str(path), host, notes, launches, gpu)


def read_execution_trace(path: str | Path) -> ExecutionTrace:
    """Read a PyTorch execution trace (the ``ExecutionTraceObserver``'s JSON).

    Raises:
        InputError: for an unknown schema version (naming the supported ones) or no nodes.
    """
    data = _load_json(path, "execution trace")
    schema = str(data.get("schema", ""))
    if schema not in ET_SCHEMAS:
        raise InputError(f"unknown execution-trace schema {schema!r}; podsim reads {', '.join(ET_SCHEMAS)}",
                         str(path), "schema")
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InputError("no nodes", str(path))
    out = []
    for n in nodes:
        if schema == "1.0.1":
            attrs = n
            values, outs, parent = n.get("inputs") or [], n.get("outputs") or [], n.get("parent")
        else:
            attrs = {a.get("name"): a.get("value") for a in n.get("attrs") or []}
            values = (n.get("inputs") or {}).get("values") or []
            outs = (n.get("outputs") or {}).get("values") or []
            parent = n.get("ctrl_deps")
        rf, seq = attrs.get("rf_id"), attrs.get("seq_id")
        tensors = _tensors(values)
        out.append(EtNode(int(n.get("id", 0)), str(n.get("name", "")), int(rf) if rf is not None else None,
                          sum(b for _, b in tensors), int(parent) if isinstance(parent, int) else None,
                          int(seq) if isinstance(seq, int) and seq >= 0 else None, tuple(tensors),
                          tuple(_tensors(outs))))
    return ExecutionTrace(str(path), schema, out)


def _tensors(values: list) -> list[tuple[int, int]]:
    """``(storage id, bytes)`` of the tensors among ET values; a tensor is ``[id, storage, offset,
    numel, itemsize, device]``, lists of tensors are nested lists of those."""
    out = []
    for v in values:
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) for x in v[:5]):
            out.append((v[1], v[3] * v[4]))
        elif isinstance(v, list) and v and all(isinstance(x, list) for x in v):
            out.extend(_tensors(v))
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
        raise InputError("no ProfilerStep annotation: capture with torch.profiler.profile(schedule=...) and call "
                         "prof.step() after each step, so the profiled step is marked (or simulate the whole "
                         "trace: --whole-trace)", k.source)
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


def pytorch_to_workload(kineto: str | Path, et: str | Path | None = None, whole_trace: bool = False,
                        ranks: int = 1) -> Workload:
    """The profiled step of a Kineto trace (and its ET) as a workload on ``ranks`` ranks.

    Raises:
        InputError: when the trace has no ``ProfilerStep`` annotation (unless ``whole_trace``),
            when the ET and the Kineto trace come from different runs (few record-function ids
            match), or when the step has no host ops.
    """
    k = read_kineto(kineto)
    lo, hi, step = step_window(k, whole_trace)
    host = [o for o in k.host_ops if lo <= o.ts < hi and not o.name.startswith("ProfilerStep#")]
    if not host:
        raise InputError("the profiled step has no host ops", k.source)
    main_tid = step.tid if step is not None else max({o.tid for o in host}, key=lambda t: sum(
        o.dur for o in host if o.tid == t))
    top = [o for o in top_level_ops(host) if o.tid == main_tid]
    et_nodes: dict[int, EtNode] = {}
    notes = []
    if et is not None:
        et_nodes = read_execution_trace(et).by_rf_id()
        with_rf = [o for o in host if o.rf_id is not None]
        if not with_rf:
            notes.append("the Kineto trace carries no record-function ids (an older PyTorch): the execution trace "
                         "is not linked")
        else:
            matched = sum(1 for o in with_rf if o.rf_id in et_nodes)
            if matched < 0.5 * len(with_rf):
                raise InputError(f"only {matched} of {len(with_rf)} profiled host ops have a record-function id in "
                                 f"the execution trace {et}: the two files come from different runs; capture both in "
                                 "one profiler session (execution_trace_observer=...)", k.source)
    b = ProgramBuilder(Path(kineto).stem)
    nid = 0
    host_idx: list[int] = []
    starts = [o.ts for o in top] + [hi]
    prev: list[int] = []
    if top and top[0].ts > lo:  # the host's time from the step's start to its first op
        nid += 1
        prev = [b.add(OpKind.COMPUTE, "host (before the first op)", node_id=nid, is_cpu=True, stream="host",
                      duration_ns=max(1, round((top[0].ts - lo) * 1000)))]
    for i, o in enumerate(top):
        nid += 1
        name = o.name
        coll = _collective_kind(name)
        if coll is not None and o.rf_id in et_nodes:
            size = et_nodes[o.rf_id].tensor_bytes_in
            idx = b.add(OpKind.COLLECTIVE, name, data_deps=prev, node_id=nid, collective=int(coll),
                        size_bytes=max(size, 1), stream="comm")
        else:
            ns = max(1, round((starts[i + 1] - o.ts) * 1000))
            idx = b.add(OpKind.COMPUTE, name, data_deps=prev, node_id=nid, duration_ns=ns, is_cpu=True,
                        stream="host")
        host_idx.append(idx)
        prev = [idx]
    # GPU events on their streams, each after the host op before the one that launched it
    launch_of: dict[int, int] = {}
    top_starts = [o.ts for o in top]
    for g in k.gpu:
        if g.correlation is None or g.correlation not in k.launches:
            continue
        ts, _tid = k.launches[g.correlation]
        launch_of[id(g)] = max(bisect.bisect_right(top_starts, ts) - 1, 0)
    last_on: dict[int, int] = {}
    for g in sorted((g for g in k.gpu if lo <= g.ts < hi or id(g) in launch_of), key=lambda g: g.ts):
        nid += 1
        deps = [last_on[g.stream]] if g.stream in last_on else []
        j = launch_of.get(id(g))
        if j is not None and j > 0:
            deps.append(host_idx[j - 1])
        last_on[g.stream] = b.add(OpKind.COMPUTE, g.name, data_deps=deps, node_id=nid,
                                  duration_ns=max(1, round(g.dur * 1000)), stream=f"cuda stream {g.stream}")
    prog = b.build()
    prog.notes.extend(notes)
    return Workload([prog], [0] * ranks, [], f"{Path(kineto).name}" + (" (whole trace)" if step is None else
                                                                         f" ({step.name})"))


def _collective_kind(name: str) -> CollectiveKind | None:
    if not name.startswith("c10d::"):
        return None
    base = name[len("c10d::"):].rstrip("_")
    return _COLLECTIVES.get(base)

