"""Where one profiled training step's device time went, read from its Kineto (Chrome) trace.

:func:`step_breakdown` takes the trace PyTorch's profiler exports (``export_chrome_trace``) and
the last ``ProfilerStep#N`` annotation in it, and returns the device time of that step by
category, the time the device was busy (the union of its kernels, copies and sets over every
stream) and idle (the step's window minus busy: the device waited on the host), and the
kernel count.

Each device event is put in one of :data:`CATEGORIES` from what launched it:

* on a GPU, the kernel's launch (the ``cuda_runtime`` / ``cuda_driver`` event of the same
  ``correlation``) and the operators and annotations open on that host thread at that moment;
  on a CPU (no device events) each *leaf* operator is a kernel, with the operators around it;
* a backward kernel (launched under ``autograd::engine::evaluate_function: ...``) also takes the
  context of the forward operator of the same ``Sequence number``, so a norm's gradient kernels
  land in ``norm``;
* the rules, in order: copies and sets -> ``memcpy``; under ``Optimizer.step`` ->
  ``optimizer``; a scaled-dot-product-attention operator (or a flash / fmha / cuDNN SDPA kernel
  name) -> ``attention_fwd`` / ``attention_bwd``; a matrix-multiply operator (or a cuBLAS /
  CUTLASS kernel name) -> ``gemm``; the ``podsim::<region>`` annotation of
  :mod:`podsim.examples.llama` (``norm``, ``rope``, ``swiglu``, ``loss`` -> ``cross_entropy``,
  ``embedding``; ``grad_cast``, ``clip``, ``param_cast`` (a trainer's master-weight work around
  the optimizer step) -> ``optimizer``; a serving step's ``kv_write`` -> ``kv_cache`` and
  ``sample`` -> ``sampling``; other kernels under ``attention`` -> ``attention_other``:
  grouped-query KV copies; the type casts autocast adds to the GEMM regions -> ``cast``; ``residual`` ->
  ``elementwise``); gradient accumulation -> ``grad_accumulate``; finally the kernel's own name
  (the fused Triton kernels of ``torch.compile`` name their ops: ``rsqrt`` -> ``norm``,
  ``silu`` -> ``swiglu``, ``log_softmax`` / ``nll_loss`` -> ``cross_entropy``, ...), else
  ``elementwise`` or ``other``.

Units: milliseconds in the result (the trace's microseconds / 1000).  Pure Python: no torch.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compute.steps import CATEGORIES
from ..errors import InputError
from ..fileio import load_json

_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_BACKWARD = "autograd::engine::evaluate_function"
_SDPA = re.compile(
    r"scaled_dot_product|flash_attention|cudnn_attention|efficient_attention|"
    r"ScaledDotProduct",
    re.I,
)
_SDPA_KERNEL = re.compile(
    r"flash_fwd|flash_bwd|fmha|_sdpa_|sdpa_|flash_attn|attention_kernel|"
    r"flash_fprop|flash_bprop",
    re.I,
)
_GEMM_OP = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|_scaled_mm|matmul|linear|addmv|mv|_grouped_mm)$|"
    r"^(Mm|Addmm|Bmm|Baddbmm|Mv)Backward\d*$|evaluate_function: (Mm|Addmm|Bmm)Backward"
)
_GEMM_KERNEL = re.compile(r"gemm|nvjet|xmma|cutlass|cublas|wgmma|ampere_.*_(tn|nt|nn|tt)|sm\d+_.*(tn|nt|nn|tt)", re.I)
_CAST_OP = re.compile(r"^aten::(_to_copy|to|copy_|_copy_from|_copy_from_and_resize)$|ToCopyBackward")
_REGION = {
    "norm": "norm",
    "rope": "rope",
    "swiglu": "swiglu",
    "loss": "cross_entropy",
    "embedding": "embedding",
    "residual": "elementwise",
    "grad_cast": "optimizer",
    "param_cast": "optimizer",
    "clip": "optimizer",
    "kv_write": "kv_cache",
    "sample": "sampling",
}
#: the kernel name's own word, for kernels no operator or region places (fused Triton kernels)
_NAME_RULES = (
    (re.compile(r"adam|multi_tensor|foreach", re.I), "optimizer"),
    (re.compile(r"log_softmax|logsoftmax|nll_loss|cross_entropy", re.I), "cross_entropy"),
    (re.compile(r"rsqrt|rms_norm|rmsnorm|layer_norm|layernorm", re.I), "norm"),
    (re.compile(r"silu|swiglu", re.I), "swiglu"),
    (re.compile(r"rotary|rope|\bcos\b|\bsin\b", re.I), "rope"),
    (re.compile(r"embedding", re.I), "embedding"),
    (re.compile(r"_to_copy|convert|copy", re.I), "cast"),
    (re.compile(r"triton_|elementwise|reduce_kernel|vectorized|unrolled", re.I), "elementwise"),
)


@dataclass
class Breakdown:
    """One profiled step's device time (ms) by category."""

    device: str  #: ``cuda`` (kernels in the trace) or ``cpu`` (leaf operators)
    step_ms: float  #: the step's window: its ProfilerStep annotation to its last device event's end
    busy_ms: float  #: union of device activity in the window (every stream)
    kernels: int  #: device events counted
    ms: dict[str, float] = field(default_factory=dict)  #: per category, sum of event durations
    #: the longest-running kernel names of each category (name -> ms), for reading what a
    #: category holds; at most 5 each
    top: dict[str, dict[str, float]] = field(default_factory=dict)
    #: on a GPU, the host's time to issue the step: the step's start to the end of its last
    #: kernel launch (None on a CPU, where the host runs the step itself)
    host_ms: float | None = None

    @property
    def idle_ms(self) -> float:
        """The window minus busy: time the device waited (on the host: launches, Python, syncs)."""
        return max(self.step_ms - self.busy_ms, 0.0)

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "step_ms": round(self.step_ms, 4),
            "busy_ms": round(self.busy_ms, 4),
            "idle_ms": round(self.idle_ms, 4),
            "kernels": self.kernels,
            "ms": {c: round(self.ms.get(c, 0.0), 4) for c in CATEGORIES},
            "top": self.top,
            "host_ms": None if self.host_ms is None else round(self.host_ms, 4),
        }


def load_trace(path: str | Path) -> dict:
    """A Chrome trace (``.json`` or ``.json.gz``) as a dict.

    Raises:
        InputError: the file is missing or is not a Chrome trace.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = load_json(raw, str(p))
    except FileNotFoundError:
        raise InputError("no such trace file", str(p)) from None
    except (OSError, EOFError) as e:
        raise InputError(f"not a readable Chrome trace: {e}", str(p)) from None
    except InputError as e:
        raise InputError(f"not a readable Chrome trace: {e.message}", str(p), e.where) from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError("not a Chrome trace (expected an object with a traceEvents list)", str(p))
    return doc


class _Stacks:
    """The host operators and annotations open on each thread at a given time."""

    def __init__(self, ops: list[dict]) -> None:
        by_tid: dict[Any, list[dict]] = {}
        for e in ops:
            by_tid.setdefault(e.get("tid"), []).append(e)
        self.by_tid = {t: sorted(es, key=lambda e: (e["ts"], -e["dur"])) for t, es in by_tid.items()}
        self.starts = {t: [e["ts"] for e in es] for t, es in self.by_tid.items()}

    def at_many(self, queries: list[tuple[Any, float]]) -> list[list[dict]]:
        """For each ``(tid, ts)``, the events of ``tid`` open at ``ts`` (outermost first): one
        sweep per thread over its events and its queries in time order."""
        out: list[list[dict]] = [[] for _ in queries]
        by_tid: dict[Any, list[int]] = {}
        for i, (tid, _ts) in enumerate(queries):
            by_tid.setdefault(tid, []).append(i)
        for tid, idx in by_tid.items():
            es = self.by_tid.get(tid, [])
            idx.sort(key=lambda i: queries[i][1])
            stack: list[dict] = []
            j = 0
            for i in idx:
                ts = queries[i][1]
                while j < len(es) and es[j]["ts"] <= ts:
                    e = es[j]
                    while stack and stack[-1]["ts"] + stack[-1]["dur"] < e["ts"]:
                        stack.pop()
                    stack.append(e)
                    j += 1
                open_now = [e for e in stack if e["ts"] + e["dur"] >= ts]
                out[i] = open_now
        return out

    def own_times(self, lo: float, hi: float) -> list[tuple[dict, list[dict], float]]:
        """Every operator in ``[lo, hi]`` with the events around it (outermost first, itself
        last) and its own time in us: its duration less its child operators' (what it computed
        itself, on a CPU)."""
        out = []
        for es in self.by_tid.values():
            stack: list[dict] = []
            mine: list[list] = []
            for e in es:
                while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                    stack.pop()
                if e.get("cat") == "cpu_op" and lo <= e["ts"] and e["ts"] + e["dur"] <= hi:
                    for anc in reversed(stack):  # the nearest enclosing operator loses this time
                        if anc.get("cat") == "cpu_op":
                            anc["_own"] = anc.get("_own", anc["dur"]) - e["dur"]
                            break
                    mine.append([e, [*stack, e]])
                stack.append(e)
            out += [(e, ctx, max(e.pop("_own", e["dur"]), 0.0)) for e, ctx in mine]
        return out


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total / 1000.0


def classify(kernel: str, context: list[str], forward: list[str], backward: bool, cat: str = "kernel") -> str:
    """The category of one device event (see the module docstring): ``kernel`` its name,
    ``context`` the host operators and annotations open at its launch (outermost first),
    ``forward`` those of the forward operator a backward kernel belongs to."""
    if cat in ("gpu_memcpy", "gpu_memset"):
        return "memcpy"
    names = context + forward
    if any(n.startswith("Optimizer.step") for n in context):
        return "optimizer"
    inner = context[-1] if context else ""
    if any(_SDPA.search(n) for n in names) or _SDPA_KERNEL.search(kernel):
        return "attention_bwd" if backward else "attention_fwd"
    if (
        _GEMM_OP.search(inner)
        or any(_GEMM_OP.search(n) for n in forward[-1:] if backward)
        or _GEMM_KERNEL.search(kernel)
    ) and not _CAST_OP.search(inner):
        return "gemm"
    regions = [n.removeprefix("podsim::") for n in names if n.startswith("podsim::")]
    if regions:
        region = regions[-1]
        if region in _REGION:
            return _REGION[region]
        if region == "attention":
            return "attention_other"
        if region == "optimizer":
            return "optimizer"
        if any(_CAST_OP.search(n) for n in names):
            return "cast"  # autocast's weight casts in the GEMM regions (and their gradients)
    if any("AccumulateGrad" in n for n in context):
        return "grad_accumulate"
    for rule, category in _NAME_RULES:
        if rule.search(kernel):
            return category
    if any(_CAST_OP.search(n) for n in names):
        return "cast"
    return "other"


def _last_step(events: list[dict], trace: dict | str | Path) -> dict:
    """The host's last ``ProfilerStep#N`` annotation that launched device work (else its last).

    The GPU's copy of the annotation (``gpu_user_annotation``, on the device's clock) is not a
    step window; nor is the empty annotation a profiler may open at its last ``prof.step()``.
    """
    steps = sorted(
        (
            e
            for e in events
            if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"
        ),
        key=lambda e: e["ts"],
    )
    if not steps:
        raise InputError(
            "no ProfilerStep# annotation: profile with a schedule and call prof.step() after each step",
            str(trace) if not isinstance(trace, dict) else "trace",
        )
    launched = [e["ts"] for e in events if e.get("cat") in _LAUNCH_CATS]
    for step in reversed(steps):
        if any(step["ts"] <= t <= step["ts"] + step["dur"] for t in launched):
            return step
    return steps[-1]


def step_breakdown(trace: dict | str | Path, top: int = 5) -> Breakdown:
    """The device time of the trace's last profiled step, by category.

    Raises:
        InputError: the trace has no ``ProfilerStep#`` annotation (it was not recorded under a
            profiler schedule with ``prof.step()``).
    """
    doc = load_trace(trace) if not isinstance(trace, dict) else trace
    events = [
        e
        for e in doc["traceEvents"]
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("ts"), (int, float))
        and isinstance(e.get("dur"), (int, float))
    ]
    step = _last_step(events, trace)
    lo, hi = step["ts"], step["ts"] + step["dur"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    stacks = _Stacks(host)
    fwd = [
        e
        for e in host
        if (e.get("args") or {}).get("Sequence number") is not None
        and lo <= e["ts"] <= hi
        and not e["name"].startswith(_BACKWARD)
    ]
    by_seq: dict[Any, list[str]] = {}
    for e, ctx in zip(fwd, stacks.at_many([(e["tid"], e["ts"] + e["dur"] / 2) for e in fwd])):
        by_seq.setdefault(e["args"]["Sequence number"], [x["name"] for x in ctx])
    launches = {(e.get("args") or {}).get("correlation"): e for e in events if e.get("cat") in _LAUNCH_CATS}
    device = [e for e in events if e.get("cat") in _DEVICE_CATS]
    items: list[tuple[dict, list[dict]]] = []
    if device:
        kind = "cuda"
        placed = []
        for e in device:
            launch = launches.get((e.get("args") or {}).get("correlation"))
            at = launch["ts"] if launch is not None else e["ts"]
            if lo <= at <= hi:
                placed.append((e, launch))
        ctxs = stacks.at_many([(la["tid"], la["ts"]) if la is not None else (None, 0.0) for _e, la in placed])
        items = [(e, ctx if la is not None else []) for (e, la), ctx in zip(placed, ctxs)]
        issued = [la["ts"] + la["dur"] for _e, la in placed if la is not None]
        host_ms = (max(issued) - lo) / 1000.0 if issued else None
    else:  # a CPU run: each operator's own time is its "kernel"
        kind = "cpu"
        host_ms = None
        for e, ctx, own in stacks.own_times(lo, hi):
            if own > 0:
                items.append(({**e, "dur": own}, ctx))
    ms = dict.fromkeys(CATEGORIES, 0.0)
    names: dict[str, dict[str, float]] = {}
    end = hi
    for e, ctx in items:
        context = [x["name"] for x in ctx]
        bwd = [x for x in ctx if x["name"].startswith(_BACKWARD)]
        forward: list[str] = []
        if bwd:
            forward = by_seq.get((bwd[-1].get("args") or {}).get("Sequence number"), [])
        cat = e.get("cat", "kernel") if kind == "cuda" else "kernel"
        c = classify(e["name"], context, forward, bool(bwd), cat)
        ms[c] += e["dur"] / 1000.0
        names.setdefault(c, {})
        names[c][e["name"]] = names[c].get(e["name"], 0.0) + e["dur"] / 1000.0
        end = max(end, e["ts"] + e["dur"])
    busy = _union_ms([(e["ts"], e["ts"] + e["dur"]) for e, _ in items])
    tops = {c: {n: round(v, 4) for n, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]} for c, d in names.items()}
    return Breakdown(kind, (end - lo) / 1000.0, busy, len(items), ms, tops, host_ms)
