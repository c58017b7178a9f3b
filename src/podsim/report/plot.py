"""Timeline plot (PNG) of a simulated run: one lane per stream of the first ranks, ops as bars
coloured by what they are (forward, backward, optimizer compute, communication, memory, host),
the longest ones labelled with their original names.  Needs matplotlib (``pip install
podsim[plot]``); imported only here.
"""

from __future__ import annotations

import io
import os
from typing import Any

from ..fileio import atomic_write_bytes
from ..optional import require
from .result import Result, Slice

COLOURS = {
    "forward": "#4C72B0",
    "backward": "#DD8452",
    "optimizer": "#55A868",
    "compute": "#64B5CD",
    "comm": "#C44E52",
    "chunk": "#E8A0A2",
    "mem": "#8172B3",
    "cpu": "#937860",
    "other": "#BBBBBB",
}
_LABELS = {
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "compute": "compute",
    "comm": "collective / transfer",
    "chunk": "collective algorithm",
    "mem": "remote memory",
    "cpu": "host",
    "other": "other",
}


def pyplot(purpose: str, flag: str) -> Any:
    """matplotlib's pyplot on the file-only Agg backend, or a clear error naming ``flag``."""
    require("matplotlib", purpose, flag).use("Agg")
    return require("matplotlib.pyplot", purpose, flag)


def save_png(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` as a PNG, whole or not at all, and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def _colour_key(s: Slice) -> str:
    if s.category == "compute":
        stage = s.args.get("stage")
        return stage if stage in ("forward", "backward", "optimizer") else "compute"
    return s.category if s.category in COLOURS else "other"


def plot_timeline(result: Result, path: str | os.PathLike[str], max_ranks: int = 4, title: str | None = None) -> int:
    """Write the timeline of the first ``max_ranks`` ranks as a PNG (atomically).  Returns the
    number of ranks drawn.

    Raises:
        InputError: without matplotlib, or when the result holds no timeline.
    """
    from ..errors import InputError

    if not result.timelines:
        raise InputError("no timeline recorded: simulate with record_timeline=True")
    plt = pyplot("plotting a timeline (--plot)", "--plot")
    from matplotlib.patches import Patch

    ranks = sorted(result.timelines)[:max_ranks]
    lanes: list[tuple[int, str]] = []
    for r in ranks:  # per rank: the compute stream first, the others as they first appear
        streams: list[str] = []
        for s in result.timelines[r]:
            if s.stream not in streams:
                streams.append(s.stream)
        streams.sort(key=lambda st: 0 if st in ("compute", "main", "host") else 1)
        lanes.extend((r, st) for st in streams)
    end_ms = max((s.end_ns for r in ranks for s in result.timelines[r]), default=1) / 1e6 or 1.0
    fig, ax = plt.subplots(figsize=(14, 0.45 * len(lanes) + 1.6), dpi=110)
    used: set[str] = set()
    for y, (r, stream) in enumerate(lanes):
        slices = [s for s in result.timelines[r] if s.stream == stream]
        bars: dict[str, list[tuple[float, float]]] = {}
        for s in slices:
            key = _colour_key(s)
            used.add(key)
            bars.setdefault(key, []).append((s.start_ns / 1e6, max(s.end_ns - s.start_ns, 1) / 1e6))
        for key, spans in bars.items():
            ax.broken_barh(spans, (y - 0.38, 0.76), facecolors=COLOURS[key], edgecolor="white", linewidth=0.2)
        for s in sorted(slices, key=lambda s: s.start_ns - s.end_ns)[:3]:  # name the longest ops
            width = (s.end_ns - s.start_ns) / 1e6
            if width > 0.06 * end_ms:
                name = s.name.rsplit(": ", 1)[-1]
                ax.text(
                    s.start_ns / 1e6 + width / 2,
                    y,
                    name[: max(4, int(90 * width / end_ms))],
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                    clip_on=True,
                )
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {r} {stream}" for r, stream in lanes], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, end_ms * 1.01)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", alpha=0.3)
    shown = f"{len(ranks)} of {result.num_ranks} ranks" if len(ranks) < result.num_ranks else f"{len(ranks)} ranks"
    ax.set_title(
        title or f"{result.info.get('title', 'podsim')}: {result.finish_ns / 1e6:.3f} ms ({shown})", fontsize=10
    )
    order = [k for k in COLOURS if k in used]
    fig.legend(
        handles=[Patch(color=COLOURS[k], label=_LABELS[k]) for k in order],
        loc="lower center",
        ncol=len(order),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.6 / fig.get_figheight(), 1, 1))
    save_png(fig, path)
    return len(ranks)
