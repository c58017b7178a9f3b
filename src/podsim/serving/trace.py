"""Chrome / Perfetto trace of a serving run: one process per node, one track per GPU, one slice
per (request, stage, GPU) named ``r<id>.s<stage>`` as DLSIM names them, with the request id,
model and service in its arguments.  Timestamps in microseconds."""

from __future__ import annotations

import json
import os

from ..fileio import atomic_write_text
from .simulator import ServeResult


def write_serving_trace(r: ServeResult, path: str | os.PathLike[str]) -> None:
    """Write the trace JSON (atomically)."""
    per_node = r.cluster.gpus_per_node
    events: list[dict[str, object]] = []
    for node in sorted({g // per_node for g in r.slices}):
        events.append({"ph": "M", "name": "process_name", "pid": node, "tid": 0, "args": {"name": f"node {node}"}})
    services = r.placement.services()
    for g, sl in sorted(r.slices.items()):
        node, gpu = divmod(g, per_node)
        events.append({"ph": "M", "name": "thread_name", "pid": node, "tid": gpu, "args": {"name": f"GPU {gpu}"}})
        for req, stage, start, end in sl:
            m = r.model_ids[req]
            events.append({"ph": "X", "name": f"r{req}.s{stage}", "cat": f"model {m}", "pid": node, "tid": gpu,
                           "ts": start / 1000.0, "dur": (end - start) / 1000.0,
                           "args": {"request": req, "model_id": m, "service": services[m], "stage": stage,
                                    "executor": r.placement.executors[r.executor_of[req]].executable}})
    doc = {"traceEvents": events, "displayTimeUnit": "ms",
           "otherData": {"generator": "podsim serve", "workload": r.workload.name}}
    atomic_write_text(path, json.dumps(doc, separators=(",", ":")))
