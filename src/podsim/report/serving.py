"""What a DLSIM serving run (``podsim serve``, :class:`~podsim.serving.simulator.ServeResult`)
reports: its JSON document (:func:`summarize`, fields in :mod:`podsim.serving.stats`), the text
summary of that document, the JSON file, a Chrome / Perfetto trace and the latency CDF (PNG).

The trace has one process per node, one track per GPU, and one slice per (request, stage, GPU)
named ``r<id>.s<stage>`` as DLSIM names them, with the request id, model and service in its
arguments; timestamps in microseconds.  Latencies print in ms.
"""

from __future__ import annotations

import json
import math
import os

from ..fileio import atomic_write_text
from ..serving.simulator import ServeResult
from ..serving.stats import summarize
from .plot import pyplot, save_png

__all__ = ["format_serve_summary", "plot_latency_cdf", "summarize", "write_serve_json", "write_serving_trace"]


def format_serve_summary(doc: dict[str, object]) -> str:
    """Lines for the terminal from :func:`summarize`'s document: overall and per-model latency
    (ms), SLO attainment, GPU use."""

    def ms(x: object) -> str:
        return f"{'-':>9}" if x is None else f"{float(x) * 1e3:9.2f}"  # type: ignore[arg-type]

    def pct(x: object) -> str:
        return "-" if x is None else f"{100 * float(x):.1f}%"  # type: ignore[arg-type]

    lines = [
        f"podsim serve: {doc['workload']} on {doc['placement']} ({doc['scheduler']} scheduler)",
        f"  requests {doc['num_requests']}, completed {doc['completed']}, dropped {doc['dropped']}; "
        f"throughput {float(doc['throughput_rps']):.3f} req/s; SLO attainment {pct(doc['slo_attainment'])}",
        "",
        "  model  service               requests  mean (ms)  p50 (ms)  p90 (ms)  p99 (ms)  SLO met",
        "  -----  --------------------  --------  ---------  --------  --------  --------  -------",
    ]
    rows = [("all", "", doc["num_requests"], doc)] + [
        (m, v["service"] or "", v["requests"], v) for m, v in doc["per_model"].items()
    ]  # type: ignore[union-attr]
    for m, svc, cnt, v in rows:
        lines.append(
            f"  {m:<5}  {svc[:20]:<20}  {cnt:>8}  {ms(v['latency_mean_s'])}  {ms(v['latency_p50_s'])[1:]}  "
            f"{ms(v['latency_p90_s'])[1:]}  {ms(v['latency_p99_s'])[1:]}  {pct(v['slo_attainment']):>7}"
        )
    gpus = doc["gpus"]
    lines.append("")
    lines.append(
        "  GPU utilization: "
        + ", ".join(f"node {g['node']} gpu {g['gpu']} {100 * g['utilization']:.1f}%" for g in gpus)
    )  # type: ignore[union-attr]
    lines.extend(f"  note: {x}" for x in doc["notes"])  # type: ignore[union-attr]
    return "\n".join(lines)


def write_serve_json(doc: dict[str, object], name: str, path: str | os.PathLike[str]) -> None:
    """Write the run named ``name`` and :func:`summarize`'s document as JSON (atomically)."""
    atomic_write_text(path, json.dumps({"name": name, **doc}, indent=1) + "\n")


def write_serving_trace(r: ServeResult, path: str | os.PathLike[str]) -> None:
    """Write the Chrome / Perfetto trace JSON of a run (atomically)."""
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
            events.append(
                {
                    "ph": "X",
                    "name": f"r{req}.s{stage}",
                    "cat": f"model {m}",
                    "pid": node,
                    "tid": gpu,
                    "ts": start / 1000.0,
                    "dur": (end - start) / 1000.0,
                    "args": {
                        "request": req,
                        "model_id": m,
                        "service": services[m],
                        "stage": stage,
                        "executor": r.placement.executors[r.executor_of[req]].executable,
                    },
                }
            )
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "podsim serve", "workload": r.workload.name},
    }
    atomic_write_text(path, json.dumps(doc, separators=(",", ":")))


def plot_latency_cdf(r: ServeResult, path: str | os.PathLike[str]) -> None:
    """A PNG of the latency CDF (ms), overall and per model, with each model's SLO marked (needs
    matplotlib)."""
    plt = pyplot("plotting the latency CDF (--cdf)", "--cdf")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    series = [("all", r.latencies_s(), None)] + [
        (f"model {m} ({r.placement.services()[m]})", r.latencies_s(m), r.workload.slos_s[m])
        for m in range(r.workload.num_models)
    ]
    for label, lat, slo in series:
        if not lat:
            continue
        s = sorted(lat)
        ys = [(i + 1) / len(s) for i in range(len(s))]
        (line,) = ax.step(
            [x * 1e3 for x in s],
            ys,
            where="post",
            label=f"{label}: mean {1e3 * sum(s) / len(s):.1f} ms",
            linewidth=2 if label == "all" else 1.2,
        )
        if slo is not None and math.isfinite(slo):
            ax.axvline(slo * 1e3, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.set_title(f"{r.workload.name}: {os.path.basename(r.placement.source)} ({r.scheduler})", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save_png(fig, path)
