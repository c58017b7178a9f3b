"""A PNG of an LLM serving run: the CDFs of TTFT, TPOT and end-to-end latency (SLOs marked) and
each replica's KV-cache use over time.  Needs matplotlib (``pip install podsim[plot]``),
imported only when drawing."""

from __future__ import annotations

import os

from ...report.plot import pyplot, save_png
from .metrics import LLMServeResult, thin


def plot_serving(r: LLMServeResult, path: str | os.PathLike[str], title: str = "") -> None:
    """Write the figure (atomically).

    Raises:
        InputError: without matplotlib, naming ``--plot``.
    """
    plt = pyplot("plotting the latency CDFs (--plot)", "--plot")
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), dpi=110)
    stats = r.stats()  # the legend's mean and p99 are the summary's and the JSON's
    series = (
        ("time to first token", "ttft", r.ttft_s(), r.slo_ttft_s),
        ("time per output token", "tpot", [x for x in r.tpot_s() if x is not None], r.slo_tpot_s),
        ("end-to-end latency", "e2e", r.e2e_s(), None),
    )
    for ax, (label, key, vals, slo) in zip(axes.flat, series):
        s = sorted(vals)
        if s:
            ys = [(i + 1) / len(s) for i in range(len(s))]
            ax.step(
                [x * 1e3 for x in s],
                ys,
                where="post",
                linewidth=1.6,
                label=f"mean {1e3 * stats[f'{key}_mean_s']:,.1f} ms, p99 {1e3 * stats[f'{key}_p99_s']:,.1f} ms",
            )
            ax.legend(fontsize=8, loc="lower right")
        if slo is not None:
            ax.axvline(slo * 1e3, color="crimson", linestyle=":", linewidth=1.2)
            ax.text(slo * 1e3, 0.5, f" SLO {slo * 1e3:g} ms", color="crimson", fontsize=8, rotation=90, va="center")
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    ax = axes.flat[3]
    for rs in r.replicas[:16]:
        pts = thin(rs.kv_samples, 4000)
        role = "" if rs.role == "mixed" else f" ({rs.role})"
        ax.step(
            [t / 1e9 for t, _ in pts],
            [100 * u / rs.blocks for _, u in pts],
            where="post",
            linewidth=0.9,
            label=f"replica {rs.index}{role}",
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV cache in use (% of blocks)")
    ax.set_ylim(0, 101)
    ax.grid(alpha=0.3)
    if len(r.replicas) <= 8:
        ax.legend(fontsize=7, loc="upper right")
    att = r.slo_attainment()
    fig.suptitle(
        (title + ": " if title else "")
        + f"{r.num_requests:,} requests, {len(r.replicas)} replica{'s' if len(r.replicas) > 1 else ''}"
        + (f", SLO met by {100 * att:.1f}%" if att is not None else ""),
        fontsize=10,
    )
    fig.tight_layout()
    save_png(fig, path)
