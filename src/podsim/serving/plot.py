"""Latency CDF of a serving run (PNG; needs matplotlib)."""

from __future__ import annotations

import math
import os

from ..report.plot import pyplot, save_png
from .simulator import ServeResult


def plot_latency_cdf(r: ServeResult, path: str | os.PathLike[str]) -> None:
    """A PNG of the latency CDF, overall and per model, with each model's SLO marked (needs
    matplotlib)."""
    plt = pyplot("plotting the latency CDF (--cdf)", "--cdf")
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
