"""Perfetto / Chrome trace of an LLM serving run (open it at ui.perfetto.dev).

One process per replica (``replica 0``, ``replica 2 (decode)``, ...), one track per pipeline
stage (``steps`` without PP), one slice per step named by its composition (``prefill 2 /
decode 14``) with the request ids and their token counts in its arguments, and a counter track
of the replica's KV-cache use (share of its blocks).  Built on :mod:`podsim.report.perfetto`'s
events; timestamps in microseconds with ns precision.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ...errors import InputError
from ...fileio import atomic_write_text
from ...report.perfetto import LARGE_TRACE_BYTES, trace_events
from ...report.result import RankResult, Result, Slice
from .metrics import LLMServeResult


def as_report(r: LLMServeResult) -> Result:
    """The run as a :class:`~podsim.report.result.Result`: replica i is "rank" i, its steps the
    slices of one stream per pipeline stage."""
    timelines: dict[int, list[Slice]] = {}
    ranks = []
    for rs in r.replicas:
        out: list[Slice] = []
        for rec in rs.records:
            args: dict[str, object] = {"requests": rec.ids, "tokens": rec.tokens}
            label = rec.label
            for k, (a, b) in enumerate(rec.stages):
                out.append(Slice(label, f"stage {k}" if rs.pp > 1 else "steps", a, b, "compute", args))
        timelines[rs.index] = out
        ranks.append(RankResult(rs.index, max((s.end_ns for s in out), default=0), compute_ns=rs.busy_ns))
    return Result(ranks, timelines)


def trace_document(r: LLMServeResult) -> dict[str, object]:
    """The trace as a JSON-ready document."""
    events = trace_events(as_report(r))
    roles = {rs.index: rs.role for rs in r.replicas}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            i = int(e["pid"])  # type: ignore[call-overload]
            role = roles.get(i, "mixed")
            e["args"] = {"name": f"replica {i}" + ("" if role == "mixed" else f" ({role})")}
    for rs in r.replicas:
        for t, used in rs.kv_samples:
            events.append(
                {
                    "ph": "C",
                    "name": "KV cache used",
                    "pid": rs.index,
                    "ts": t / 1000.0,
                    "args": {"share of blocks": round(used / rs.blocks, 6)},
                }
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "podsim serve-llm", "replicas": len(r.replicas), "requests": r.num_requests},
    }


def write_serve_trace(r: LLMServeResult, path: str | Path, announce: Callable[[str], None] | None = None) -> int:
    """Write the trace JSON atomically; returns its step slices.  ``announce(message)`` hears of
    a trace over :data:`~podsim.report.perfetto.LARGE_TRACE_BYTES` before it is written.

    Raises:
        InputError: when the run kept no steps (simulate with ``record_steps=True``).
    """
    steps = sum(len(rs.records) for rs in r.replicas)
    if not steps:
        raise InputError("no steps recorded: simulate with record_steps=True", where="--trace")
    text = json.dumps(trace_document(r), separators=(",", ":"))
    if announce is not None and len(text) > LARGE_TRACE_BYTES:
        announce(
            f"writing a {len(text) / 1e6:,.0f} MB trace to {path}: {steps:,} steps of {len(r.replicas)} "
            "replicas (fewer requests, --requests N, make a smaller one)"
        )
    atomic_write_text(path, text)
    return steps
