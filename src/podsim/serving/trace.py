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


def plot_latency_cdf(r: ServeResult, path: str | os.PathLike[str]) -> None:
    """A PNG of the latency CDF, overall and per model, with each model's SLO marked (needs
    matplotlib)."""
    import io

    from ..fileio import atomic_write_bytes
    from ..optional import require

    mpl = require("matplotlib", "plotting the latency CDF (--cdf)", "--cdf")
    mpl.use("Agg")
    plt = require("matplotlib.pyplot", "plotting the latency CDF (--cdf)", "--cdf")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    series = [("all", r.latencies_s(), None)] + [
        (f"model {m} ({r.placement.services()[m]})", r.latencies_s(m), r.workload.slos_s[m])
        for m in range(r.workload.num_models)]
    for label, lat, slo in series:
        if not lat:
            continue
        s = sorted(lat)
        ys = [(i + 1) / len(s) for i in range(len(s))]
        line, = ax.step([x * 1e3 for x in s], ys, where="post", label=f"{label}: mean {1e3 * sum(s) / len(s):.1f} ms",
                        linewidth=2 if label == "all" else 1.2)
        if slo is not None and slo == slo and slo != float("inf"):
            ax.axvline(slo * 1e3, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.set_title(f"{r.workload.name}: {os.path.basename(r.placement.source)} ({r.scheduler})", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
