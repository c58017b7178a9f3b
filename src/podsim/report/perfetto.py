"""Chrome / Perfetto trace JSON (open it at ui.perfetto.dev or chrome://tracing).

One process per rank, one thread (track) per stream, ops as complete ("X") slices, and
point-to-point messages as flow arrows.  On a cluster with the flow backend, a "network links"
process holds one counter track per link: its load as a fraction of line rate.  Timestamps are
microseconds with ns precision.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from ..fileio import atomic_write_text
from .result import Result


def trace_events(result: Result, max_ranks: int | None = None) -> list[dict[str, object]]:
    """The trace events of a result."""
    events: list[dict[str, object]] = []
    ranks = sorted(result.timelines)
    if max_ranks is not None:
        ranks = ranks[:max_ranks]
    tids: dict[tuple[int, str], int] = {}
    labels = result.info.get("rank_labels")
    labels = labels if isinstance(labels, list) else []
    for rank in ranks:
        name = f"rank {rank}" + (f" ({labels[rank]})" if rank < len(labels) else "")
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for s in result.timelines[rank]:
            key = (rank, s.stream)
            if key not in tids:
                tid = sum(1 for k in tids if k[0] == rank) + 1
                tids[key] = tid
                events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": s.stream}})
            events.append(
                {
                    "ph": "X",
                    "name": s.name,
                    "cat": s.category,
                    "pid": rank,
                    "tid": tids[key],
                    "ts": s.start_ns / 1000.0,
                    "dur": (s.end_ns - s.start_ns) / 1000.0,
                    "args": s.args,
                }
            )
    shown = set(ranks)
    for i, f in enumerate(result.flows):
        if f.src_rank not in shown or f.dst_rank not in shown:
            continue
        src_tid = tids.get((f.src_rank, "comm"), 1)
        dst_tid = tids.get((f.dst_rank, "comm"), 1)
        events.append(
            {
                "ph": "s",
                "id": i,
                "name": f.name,
                "cat": "p2p",
                "pid": f.src_rank,
                "tid": src_tid,
                "ts": f.send_ns / 1000.0,
                "args": {"bytes": f.size_bytes},
            }
        )
        events.append(
            {
                "ph": "f",
                "bp": "e",
                "id": i,
                "name": f.name,
                "cat": "p2p",
                "pid": f.dst_rank,
                "tid": dst_tid,
                "ts": f.recv_ns / 1000.0,
            }
        )
    events.extend(counter_events(result))
    return events


def counter_events(result: Result) -> list[dict[str, object]]:
    """Counter ("C") events, one process per counter group."""
    events: list[dict[str, object]] = []
    pids: dict[str, int] = {}
    for c in result.counters:
        pid = pids.get(c.group)
        if pid is None:
            pid = pids[c.group] = 1_000_000 + len(pids)
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": c.group}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}})
        for t, v in c.samples:
            events.append(
                {
                    "ph": "C",
                    "name": c.name,
                    "pid": pid,
                    "ts": t / 1000.0,
                    "args": {"load (fraction of line rate)": round(v, 6)},
                }
            )
    return events


#: traces larger than this (bytes) are announced before they are written
LARGE_TRACE_BYTES = 50_000_000


def write_trace(
    result: Result,
    path: str | os.PathLike[str],
    max_ranks: int | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Write the trace JSON atomically; returns how many ranks it holds.  ``announce(message)``
    hears, before the file is written, of a trace over :data:`LARGE_TRACE_BYTES`."""
    shown = len(result.timelines) if max_ranks is None else min(max_ranks, len(result.timelines))
    events = trace_events(result, max_ranks)
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "podsim",
            "finish_ns": result.finish_ns,
            "ranks_in_trace": shown,
            "ranks_simulated": result.num_ranks,
        },
    }
    text = json.dumps(doc, separators=(",", ":"))
    if announce is not None and len(text) > LARGE_TRACE_BYTES:
        announce(
            f"writing a {len(text) / 1e6:,.0f} MB trace to {path}: {len(events):,} events of {shown} "
            f"rank{'s' if shown != 1 else ''} (--trace-ranks N keeps fewer)"
        )
    atomic_write_text(path, text)
    return shown
