"""A one-GPU training step as parallelization needs it: ops in order with their time, stage and
the parameter gradients each backward op makes ready.  The IR of one-GPU trace formats: what
:mod:`podsim.parallelize` takes to many GPUs.

Built from TrioSim's processed traces (:func:`from_triosim`, :func:`read_triosim_step`) or a
PyTorch profiler trace with its execution trace (:func:`from_pytorch`, :func:`read_pytorch_step`:
a ``podsim trace`` folder or a Kineto file).

TrioSim traces: which backward op finishes which parameters' gradients: parametrized forward
ops (those reading weights) are matched in reverse order with the backward ops of the same kinds
(``ConvolutionBackward``, ``AddmmBackward``, ``MmBackward``, ``*BatchNormBackward``,
``EmbeddingBackward``, ...), as autograd runs them; when the counts do not match, every gradient
is ready at the end of the backward pass (and a note says so).

PyTorch traces: the execution trace says it exactly.  Parameters are the storages that both the
forward pass and the optimizer read; a backward op belongs to the forward op whose autograd
sequence number (ET ``seq_id``) it carries; ``AccumulateGrad`` makes its gradient ready.

Layers (:attr:`StepOp.layer`): each forward op that reads parameters starts one (named after
its position and op, ``"L3 conv2d"``); parameter-free forward ops join the layer before them;
backward ops join their forward op's layer; optimizer ops join the layer whose parameters they
update, or ``"(optimizer)"`` for ops over many layers' parameters at once (``_foreach_*``).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError
from ..fileio import load_json, read_text
from .aten_work import Work, op_work
from .pytorch_trace import capture_files, linked_nodes, read_linked, step_window, top_level_ops
from .triosim import TriosimOp, TriosimTensor, TriosimTrace, read_triosim

#: forward ops tensor parallelism splits (when they read parameters), as TrioSim's tpflag
_TP_SPLIT = ("conv1d", "conv2d", "conv3d", "convolution", "linear", "addmm", "mm", "matmul", "embedding")
#: their weight-gradient backward ops
_TP_SPLIT_BWD = ("ConvolutionBackward", "AddmmBackward", "MmBackward", "EmbeddingBackward", "LinearBackward")
OPTIMIZER_LAYER = "(optimizer)"
_GRAD_OPS = (
    "ConvolutionBackward",
    "AddmmBackward",
    "MmBackward",
    "BatchNormBackward",
    "EmbeddingBackward",
    "LinearBackward",
    "LayerNormBackward",
    "BmmBackward",
)


@dataclass(frozen=True)
class StepOp:
    """One op of the step: ``ns`` of GPU time; ``grad_bytes`` of parameter gradients ready when
    it ends (backward ops); ``param_bytes`` it reads (forward ops); ``output_bytes`` of new
    activations it writes; ``tp_split``: tensor parallelism can split it."""

    def __post_init__(self) -> None:
        if self.result_bytes < 0:  # not given: all it writes is new
            object.__setattr__(self, "result_bytes", self.output_bytes)

    name: str
    ns: int
    stage: str
    grad_bytes: int = 0
    param_bytes: int = 0
    tp_split: bool = False
    output_bytes: int = 0
    layer: str = ""  #: the layer it belongs to (see :func:`label_layers`)
    #: bytes of the tensors it returns, in place or not (``output_bytes``: only new storages)
    result_bytes: int = -1
    offload_bytes: int = 0  #: of its output kept in remote memory until the backward (:mod:`.memory`)
    #: the kernels it runs, from the execution trace (:mod:`.aten_work`; () for none, as a view;
    #: None when no trace describes it)
    work: tuple[Work, ...] | None = None


@dataclass
class OneGpuStep:
    """A one-GPU training step."""

    source: str
    ops: list[StepOp]
    notes: list[str] = field(default_factory=list)
    optimizer_states: int = 2  #: optimizer state per parameter, in parameter sizes (Adam: 2; plain SGD: 0)
    batch: int | None = None  #: samples per GPU the step processes, when known
    #: where its op times were measured: ``cpu`` (a CPU capture: host time), ``cuda`` (GPU
    #: kernels), None (unknown: a TrioSim trace); ``retimed`` when re-timed on a GPU since
    device: str | None = None
    #: the GPU a ``cuda`` capture ran on, as the profiler named it (``NVIDIA H100 80GB HBM3``)
    device_name: str | None = None

    @property
    def total_ns(self) -> int:
        return sum(o.ns for o in self.ops)

    @property
    def gradient_bytes(self) -> int:
        return sum(o.grad_bytes for o in self.ops)

    def stage_ns(self) -> dict[str, int]:
        """Time per stage (forward, backward, optimizer), ns."""
        out = {"forward": 0, "backward": 0, "optimizer": 0}
        for o in self.ops:
            out[o.stage] = out.get(o.stage, 0) + o.ns
        return out


def _is_grad_op(name: str) -> bool:
    return any(k in name for k in _GRAD_OPS)


def from_triosim(trace: TriosimTrace, time: str = "kernel") -> OneGpuStep:
    """The step of a TrioSim trace (``kernel``: summed kernel time, ``span``: first to last kernel)."""
    params = [trace.parameter_bytes(o) if o.stage == "forward" else 0 for o in trace.ops]
    fwd_params = [p for p, o in zip(params, trace.ops) if p > 0]
    grad_idx = [i for i, o in enumerate(trace.ops) if o.stage == "backward" and _is_grad_op(o.name)]
    grads = [0] * len(trace.ops)
    notes = []
    if len(grad_idx) == len(fwd_params):
        for i, p in zip(grad_idx, reversed(fwd_params)):
            grads[i] = p
    else:
        last_bwd = max((i for i, o in enumerate(trace.ops) if o.stage == "backward"), default=len(trace.ops) - 1)
        grads[last_bwd] = sum(fwd_params)
        notes.append(
            f"{len(fwd_params)} parametrized forward ops but {len(grad_idx)} weight-gradient backward ops: "
            "all gradients are taken as ready at the end of the backward pass"
        )

    def out_bytes(o) -> int:  # type: ignore[no-untyped-def]
        known = [trace.tensors[t].bytes for t in o.outputs if t in trace.tensors]
        return sum(known) if known else 4 * sum(o.output_sizes)  # fp32 when tensor.csv lacks them

    ops = [
        StepOp(o.name, (o.kernel_us if time == "kernel" else o.span_us) * 1000, o.stage, g, p, o.tp_split, out_bytes(o))
        for o, g, p in zip(trace.ops, grads, params)
    ]
    # backward ops: a weight-gradient op belongs with the forward op it was matched with; the ops
    # autograd runs before it (activation backward, e.g. ReLU) belong to the same layer
    fwd_of: dict[int, int] = {}
    if len(grad_idx) == len(fwd_params):
        fwd_param_idx = [i for i, p in enumerate(params) if p > 0]
        matched = {g: fwd_param_idx[len(fwd_param_idx) - 1 - k] for k, g in enumerate(grad_idx)}
        pending: list[int] = []
        for i, o in enumerate(ops):
            if o.stage != "backward":
                continue
            pending.append(i)
            if i in matched:
                for j in pending:
                    fwd_of[j] = matched[i]
                pending = []
    return OneGpuStep(trace.source, label_layers(ops, fwd_of, {}), notes)


def to_triosim(step: OneGpuStep) -> TriosimTrace:
    """The step as a TrioSim trace (what ``podsim convert --to triosim`` writes): one operator
    per op, its time as both span and kernel time (whole us), a weight tensor of ``param_bytes``
    read by each forward op that reads parameters, an output tensor of ``output_bytes``; fp32
    elements (4 bytes).  Reading it back with :func:`from_triosim` gives the same ops, stages,
    parameters and (when every weight-gradient op is named like PyTorch's) gradients."""
    ops: list[TriosimOp] = []
    tensors: dict[int, TriosimTensor] = {}
    prev_out: tuple[int, ...] = ()
    for i, o in enumerate(step.ops):
        inputs = list(prev_out)
        if o.stage == "forward" and o.param_bytes > 0:
            wid = 2 * i + 1
            tensors[wid] = TriosimTensor(wid, o.param_bytes // 4, 4, "weight", frozenset({"weight"}))
            inputs.append(wid)
        oid = 2 * i + 2
        elements = max(o.output_bytes // 4, 0)
        tensors[oid] = TriosimTensor(oid, elements, 4, "output", frozenset({"output"}))
        us = round(o.ns / 1000)
        ops.append(
            TriosimOp(
                i,
                o.name,
                tuple(inputs),
                (oid,),
                us,
                us,
                tuple(tensors[t].elements for t in inputs),
                (elements,),
                o.stage,
                o.tp_split,
            )
        )
        # an input the next op reads: tensor roles stay as first written (weights stay weights)
        prev_out = (oid,)
    return TriosimTrace(step.source, ops, tensors)


def _short(name: str) -> str:
    """``aten::conv2d`` -> ``conv2d``; ``autograd::engine::evaluate_function: AddmmBackward0`` -> ``AddmmBackward0``."""
    return name.rsplit(": ", 1)[-1].rsplit("::", 1)[-1]


def label_layers(ops: list[StepOp], fwd_of: dict[int, int], opt_of: dict[int, int]) -> list[StepOp]:
    """``ops`` with their layer set: forward ops by the parametrized op they follow (those before
    the first join it), backward ops by ``fwd_of`` (op index -> forward op index; unmapped ones
    join the backward op before them), optimizer ops by ``opt_of`` (op index -> the forward op
    whose parameters it updates) or :data:`OPTIMIZER_LAYER`."""
    layers: list[str] = [""] * len(ops)
    current = ""
    n_layers = 0
    for i, o in enumerate(ops):
        if o.stage == "forward":
            if o.param_bytes > 0:
                current = f"L{n_layers} {_short(o.name)}"
                n_layers += 1
            layers[i] = current
    first = next((x for x in layers if x), "(all)")  # "(all)": no op reads parameters
    prev = first
    for i, o in enumerate(ops):
        if o.stage == "forward":
            layers[i] = layers[i] or first
        elif o.stage == "backward":
            f = fwd_of.get(i)
            layers[i] = layers[f] if f is not None and layers[f] else prev
            prev = layers[i]
        elif o.stage == "optimizer":
            f = opt_of.get(i)
            layers[i] = layers[f] if f is not None and layers[f] else OPTIMIZER_LAYER
    return [replace(o, layer=layer) for o, layer in zip(ops, layers)]


def from_pytorch(
    kineto: str | Path, execution_trace: str | Path | None = None, whole_trace: bool = False
) -> OneGpuStep:
    """The step of a PyTorch profiler trace: its top-level host ops (every thread: autograd
    runs the backward on its own) in time order, each lasting the GPU time of the kernels it
    launched (its host time on a CPU-only trace), staged forward / backward (inside an
    ``autograd::engine`` op) / optimizer (inside ``Optimizer.step``).  With the execution
    trace, each ``AccumulateGrad`` makes its parameter's gradient (its input bytes) ready.

    Raises:
        InputError: as :func:`podsim.formats.pytorch_trace.pytorch_to_workload`.
    """
    k, et, notes = read_linked(kineto, execution_trace)
    lo, hi, _step = step_window(k, whole_trace)
    host = [o for o in k.host_ops if lo <= o.ts < hi and not o.name.startswith("ProfilerStep#")]
    if not host:
        raise InputError("the profiled step has no host ops", k.source)
    # a distributed capture's own communication (c10d ops at the top level, e.g. DDP's buffer
    # broadcast) is not compute of the step: the parallelization adds its own
    top = sorted(
        (o for o in top_level_ops(host) if not o.name.startswith(("c10d::", "_c10d_functional::"))), key=lambda o: o.ts
    )
    opt = [a for a in k.annotations if a.name.startswith("Optimizer.step") and lo <= a.ts < hi]

    by_tid: dict[int, tuple[list[float], list[int]]] = {}  # tid -> (starts, op indices), in order
    for i, o in enumerate(top):
        starts, idx = by_tid.setdefault(o.tid, ([], []))
        starts.append(o.ts)
        idx.append(i)

    def owner(ts: float, tid: int) -> int | None:
        """The top-level op of thread ``tid`` running at ``ts`` (they do not overlap)."""
        starts, idx = by_tid.get(tid, ((), ()))
        j = bisect.bisect_right(starts, ts) - 1
        if j < 0:
            return None
        o = top[idx[j]]
        return idx[j] if ts < o.ts + o.dur else None

    gpu_ns = [0.0] * len(top)
    for g in k.gpu:
        if g.name.lower().startswith("nccl"):  # the capture's collectives: communication, not compute
            continue
        launch = k.launches.get(g.correlation) if g.correlation is not None else None
        if launch is not None and lo <= launch[0] < hi:
            i = owner(*launch)
            if i is not None:
                gpu_ns[i] += g.dur * 1000
    stages = _stages(top, opt)
    n = len(top)
    facts = _EtFacts.empty(n)
    notes = list(notes)
    if et is not None:
        nodes, link_notes = linked_nodes(k, host, et)
        notes.extend(link_notes)
        facts = _EtFacts.read(top, stages, host, nodes, et, owner)
        notes.extend(facts.notes)
    else:
        notes.append(
            "no execution trace: gradient and parameter sizes unknown, so no data-parallel reduction is "
            "sized and no op is split by tensor parallelism"
        )
    works: list[tuple[Work, ...] | None] = [None] * n
    if et is not None:
        children = et.children()
        works = [tuple(op_work(nodes[o.rf_id], children)) if o.rf_id in nodes else None for o in top]
    grads, params, outputs, inputs_act, results = (
        facts.grads,
        facts.params,
        facts.outputs,
        facts.inputs_act,
        facts.results,
    )
    fwd_of, opt_layer_of = facts.fwd_of, facts.opt_of
    use_gpu = any(gpu_ns)
    keep = [
        i for i in range(n) if (round(gpu_ns[i]) if use_gpu else round(top[i].dur * 1000)) > 0 or grads[i] or params[i]
    ]
    new_index = {i: j for j, i in enumerate(keep)}
    ops = []
    for i in keep:
        o = top[i]
        ns = round(gpu_ns[i]) if use_gpu else round(o.dur * 1000)
        split = False
        out = outputs[i]
        if stages[i] == "forward":
            split = params[i] > 0 and _short(o.name) in _TP_SPLIT
        elif stages[i] == "backward" and i in fwd_of and any(k in o.name for k in _TP_SPLIT_BWD):
            f = fwd_of[i]
            split = params[f] > 0 and _short(top[f].name) in _TP_SPLIT
            out = inputs_act[f]  # the gradient of the forward op's input
        ops.append(
            StepOp(
                o.name,
                max(ns, 1),
                stages[i],
                grads[i],
                params[i],
                split,
                out,
                result_bytes=results[i] if stages[i] == "forward" else out,
                work=works[i],
            )
        )
    fwd_map = {new_index[i]: new_index[f] for i, f in fwd_of.items() if i in new_index and f in new_index}
    opt_map = {new_index[i]: new_index[f] for i, f in opt_layer_of.items() if i in new_index and f in new_index}
    return OneGpuStep(
        str(kineto),
        label_layers(ops, fwd_map, opt_map),
        notes,
        device="cuda" if use_gpu else "cpu",
        device_name=k.device_name if use_gpu else None,
    )


def _stages(top: list, opt: list) -> list[str]:  # type: ignore[type-arg]
    """Each top-level op's stage: backward ops are autograd's (and DDP's bucket copies); what
    runs inside an Optimizer.step range, or after the last backward op, is the optimizer's (a
    hand-written update, zero_grad at the end); the rest, before, is the forward pass."""
    is_bwd = [o.name.startswith(("autograd::engine", "torch.distributed.")) for o in top]
    last_bwd = max((i for i, b in enumerate(is_bwd) if b), default=len(top))
    out = []
    for i, o in enumerate(top):
        if any(a.ts <= o.ts < a.ts + a.dur for a in opt):
            out.append("optimizer")
        elif is_bwd[i]:
            out.append("backward")
        else:
            out.append("optimizer" if i > last_bwd else "forward")
    return out


@dataclass
class _EtFacts:
    """What the execution trace says of each top-level op (by index): gradient bytes it makes
    ready, parameter bytes it reads first, new activation bytes and all bytes it returns, its
    input activation's bytes; the forward op of each backward op and of each optimizer op."""

    grads: list[int]
    params: list[int]
    outputs: list[int]
    inputs_act: list[int]
    results: list[int]
    fwd_of: dict[int, int] = field(default_factory=dict)
    opt_of: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, n: int) -> _EtFacts:
        return cls([0] * n, [0] * n, [0] * n, [0] * n, [0] * n)

    @classmethod
    def read(
        cls,
        top: list,
        stages: list[str],
        host: list,
        nodes: dict,
        et: object,  # type: ignore[type-arg]
        owner: object,
    ) -> _EtFacts:
        """Parameters are the storages that both the forward pass and the optimizer read and
        that no forward or backward op creates (storage ids of freed activations get reused; a
        view of a parameter, as aten::t, writes the storage it reads), each with a gradient of
        its size (the trace names storages by address, so two tensors may share an id)."""
        n = len(top)
        f = cls.empty(n)
        children = et.children()  # type: ignore[attr-defined]
        subtree = [et.subtree(nodes[o.rf_id], children) if o.rf_id in nodes else [] for o in top]  # type: ignore[attr-defined]
        fwd_reads = {sid for i in range(n) if stages[i] == "forward" for x in subtree[i] for sid, _ in x.inputs}
        written = {
            sid
            for i in range(n)
            if stages[i] != "optimizer"
            for x in subtree[i]
            for sid in {s for s, _ in x.outputs} - {s for s, _ in x.inputs}
        }
        opt_reads = {sid for i in range(n) if stages[i] == "optimizer" for x in subtree[i] for sid, _ in x.inputs}
        if opt_reads:
            param_storages = (fwd_reads & opt_reads) - written
        else:  # no optimizer in the step: what the forward reads and nothing in the step made
            param_storages = fwd_reads - written
            f.notes.append(
                "no optimizer in the profiled step: parameters taken as the tensors the forward pass "
                "reads that the step did not make (the input batch and buffers included)"
            )
        accumulated: list[int] = []
        for o in host:  # AccumulateGrad makes its gradient (its input) ready in the op it runs under
            if o.name == "torch::autograd::AccumulateGrad" and o.rf_id in nodes:
                nbytes = nodes[o.rf_id].tensor_bytes_in
                accumulated.append(nbytes)
                i = owner(o.ts, o.tid)  # type: ignore[operator]
                if i is not None:
                    f.grads[i] += nbytes
        unclaimed = Counter(accumulated)
        seen: set[int] = set()
        owner_of_param: dict[int, int] = {}
        seq_owner: dict[int, int] = {}
        for i in range(n):
            if stages[i] != "forward" or not subtree[i]:
                continue
            head = subtree[i][0]
            # activations: outputs in storages the op made (not in-place results or views of its inputs)
            read = {sid for sid, _ in head.inputs}
            f.outputs[i] = sum(b for sid, b in dict(head.outputs).items() if sid not in read)
            f.results[i] = head.tensor_bytes_out
            for x in subtree[i]:
                if x.seq_id is not None:  # the op that creates the autograd node takes the number last
                    seq_owner[x.seq_id] = i
                for sid, nbytes in x.inputs:
                    if sid in param_storages and sid not in seen:
                        seen.add(sid)
                        if accumulated:
                            if not unclaimed[nbytes]:
                                continue
                            unclaimed[nbytes] -= 1
                        f.params[i] += nbytes
                        owner_of_param[sid] = i
            f.inputs_act[i] = next((b for sid, b in head.inputs if sid not in owner_of_param), 0)
        for i in range(n):
            if stages[i] == "backward":
                fw = next((seq_owner[x.seq_id] for x in subtree[i] if x.seq_id in seq_owner), None)
                if fw is not None:
                    f.fwd_of[i] = fw
            elif stages[i] == "optimizer":
                owners = {owner_of_param[sid] for x in subtree[i] for sid, _ in x.inputs if sid in owner_of_param}
                if len(owners) == 1:
                    f.opt_of[i] = owners.pop()
        return f


def read_triosim_step(folder: str | Path) -> OneGpuStep:
    """The one-GPU step of a TrioSim trace folder (``trace.csv``, ``tensor.csv``); TrioSim's
    traces step Adam.  Its batch is unknown (``batch`` None).

    Raises:
        InputError: as :func:`podsim.formats.triosim.read_triosim`.
    """
    return from_triosim(read_triosim(folder))


def read_pytorch_step(
    path: str | Path, execution_trace: str | Path | None = None, whole_trace: bool = False
) -> OneGpuStep:
    """The one-GPU step of a ``podsim trace`` folder (rank 0 of a distributed capture), or of a
    Kineto trace file with its ``execution_trace`` (a capture made elsewhere).  A folder's
    ``capture.json`` gives the step's batch (``batch``) and optimizer (plain SGD keeps no state).

    Raises:
        InputError: for a path that does not exist, a folder without traces, a bad trace or a
            capture.json that is not a JSON object.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(
            f"{path}: no such folder or file; expected a `podsim trace --out` folder or a Kineto trace JSON",
            where="--pytorch",
        )
    if p.is_file():
        kineto, et = p, (Path(execution_trace) if execution_trace else None)
    else:
        kineto, et = capture_files(p)[0]  # rank 0 of a distributed capture
    step = from_pytorch(kineto, et, whole_trace)
    step.source = str(path)  # the capture folder names the run
    info = capture_info(kineto.parent)
    if info.get("optimizer") == "sgd":  # podsim trace's SGD has no momentum
        step.optimizer_states = 0
    captured = info.get("batch_size")
    if isinstance(captured, int):
        step.batch = captured
    return step


def capture_info(folder: Path) -> dict:
    """``capture.json`` of a ``podsim trace`` folder, or {} when it has none (a trace from
    elsewhere).

    Raises:
        InputError: for a capture.json that is not a JSON object.
    """
    p = folder / "capture.json"
    if not p.is_file():
        return {}
    info = load_json(read_text(p, "capture.json"), str(p))
    if not isinstance(info, dict):
        raise InputError("expected a JSON object", str(p))
    return info
