"""A readable terminal summary of a :class:`~podsim.report.result.Result`."""

from __future__ import annotations

from ..units import format_ns
from .faults import fault_lines
from .result import RankResult, RankResults, Result

_COLS = (
    ("finish", "finish_ns"),
    ("compute", "compute_ns"),
    ("comm", "comm_ns"),
    ("overlap", "overlap_ns"),
    ("exposed comm", "exposed_comm_ns"),
)


def _row_key(r: RankResult) -> tuple[int, ...]:
    return tuple(getattr(r, f) for _, f in _COLS) + (r.cpu_ns, r.mem_ns)


def _rows(result: Result) -> dict[tuple[int, ...], list[int]]:
    """The ranks (ascending) of each set of figures (:func:`_row_key`); ranks that copy a
    simulated rank's figures are taken a class at a time."""
    groups: dict[tuple[int, ...], list[int]] = {}
    if isinstance(result.ranks, RankResults):
        for base, ranks in result.ranks.classes():
            groups.setdefault(_row_key(base), []).extend(ranks.tolist())
        return {k: sorted(v) for k, v in groups.items()}
    for r in result.ranks:
        groups.setdefault(_row_key(r), []).append(r.rank)
    return groups


def rank_ranges(ranks: list[int], max_parts: int = 8) -> str:
    """Compact rank list: ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``; an even stride of four or more
    ranks as ``"0,2,...,510"``; more than ``max_parts`` parts as the first three, ``...``, the
    last and the count (``"0-1,4-5,8-9,...,1020-1021 (512 ranks)"``)."""
    ranks = sorted(ranks)
    if (
        len(ranks) >= 4
        and ranks[1] - ranks[0] > 1
        and all(b - a == ranks[1] - ranks[0] for a, b in zip(ranks, ranks[1:]))
    ):
        return f"{ranks[0]},{ranks[1]},...,{ranks[-1]}"
    out = []
    start = prev = ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    if len(out) > max_parts:
        return ",".join(out[:3]) + f",...,{out[-1]} ({len(ranks)} ranks)"
    return ",".join(out)


def format_summary(result: Result, max_rows: int = 20) -> str:
    """Format the result as a table: ranks with identical figures share one row."""
    lines = []
    title = result.info.get("title", "simulation")
    lines.append(f"podsim: {title}")
    for key in ("workload", "network", "system", "cluster", "fabric", "mode"):
        if key in result.info:
            lines.append(f"  {key:<9} {result.info[key]}")
    fin = result.finish_ns
    lines.append(f"  finish    {format_ns(fin)} ({fin} ns) on {result.num_ranks} ranks")
    groups = _rows(result)
    # host (CPU) ops and remote memory get columns when some rank has them
    extra = [
        (i, name) for i, name in ((len(_COLS), "cpu"), (len(_COLS) + 1, "remote mem")) if any(k[i] for k in groups)
    ]
    header = ["ranks"] + [f"{name} (ns)" for name, _ in _COLS] + [f"{name} (ns)" for _, name in extra]
    rows = []
    for key, ranks in sorted(groups.items(), key=lambda kv: kv[1][0]):
        rows.append([rank_ranges(ranks)] + [f"{v:,}" for v in key[: len(_COLS)]] + [f"{key[i]:,}" for i, _ in extra])
    shown = rows[:max_rows]
    widths = [max(len(h), *(len(r[i]) for r in shown)) for i, h in enumerate(header)]
    lines.append("")
    lines.append("  " + "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))))
    lines.append("  " + "  ".join("-" * w for w in widths))
    for row in shown:
        lines.append("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    if len(rows) > max_rows:
        lines.append(f"  ... {len(rows) - max_rows} more rows (see --json for every rank)")
    if result.links:
        lines.append("")
        lines.append("  busiest links (flow backend; utilization = bytes / (bandwidth x run time))")
        for lk in result.links[:5]:
            lines.append(
                f"    {lk.name:<28} {lk.bytes / 1e6:10.2f} MB  busy {format_ns(lk.busy_ns):>10}  "
                f"peak {lk.peak_flows} flows  {lk.utilization:6.1%}"
            )
    lines += fault_lines(result.faults)
    if "wall_s" in result.info:
        lines.append("")
        lines.append(f"  simulated in {float(result.info['wall_s']):.3f} s of wall time")  # type: ignore[arg-type]
    if any(k[len(_COLS)] and not k[1] for k in groups):  # cpu time without GPU compute
        lines.append(
            "  note: some ranks ran their compute on the host (a CPU capture): 'exposed comm' is "
            "finish - GPU compute, as ASTRA-sim reports it, so it includes their cpu time"
        )
    for note in result.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
