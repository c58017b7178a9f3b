"""The printed summary and the CSV of ``podsim sweep``: what ran, the table (the swept
parameters, the what-if and the run kind's main metrics, units in the column names), the points
that failed and where the results store is.

Each function takes what :func:`podsim.api.sweep.sweep` returns (a
:class:`~podsim.sweep.sweep.SweepResult`); its ``--json`` document is ``result.to_dict()``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..fileio import atomic_write_text, check_output_file

if TYPE_CHECKING:
    from ..sweep.sweep import SweepResult


def cell(v: Any) -> str:
    """A table cell: integers with separators, numbers to 4 significant figures (whole from
    1,000 up), None as ``-``, booleans as yes / no."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a == 0:
            return "0"
        if a < 1e-4:
            return f"{v:.3e}"
        return f"{v:.{max(0, 3 - math.floor(math.log10(a)))}f}"
    return str(v)


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def format_table(res: SweepResult) -> str:
    """The sweep's table for the terminal: the swept parameters, the what-if, the run's main
    metrics (their units in their names)."""
    spec = res.spec
    cols = [spec.run.param(p).column for p in spec.swept]
    if len(spec.whatifs) > 1:
        cols.append("what_if")
    cols += list(spec.run.shown)
    cells = [[cell(r[c]) if not (r["error"] and c in spec.run.metrics) else "error" for c in cols] for r in res.rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    numeric = [all(_numeric(r[c]) for r in res.rows) for c in cols]

    def line(vals: list[str]) -> str:
        return "  " + "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(c) for c in cells])


def format_sweep(res: SweepResult) -> str:
    """What ran (points, what-ifs, evaluated, reused, failed), the table, the first failures
    and the results store."""
    spec = res.spec
    n_w = len(spec.whatifs)
    n_p = res.points
    runs = f"{n_p:,} point{'s' if n_p > 1 else ''}" + (f" x {n_w} what-ifs = {len(res.rows):,} runs" if n_w > 1 else "")
    lines = [
        f"podsim sweep: {spec.name} ({spec.run.name}, {runs}): {res.evaluated:,} evaluated"
        + (f", {res.reused:,} taken from {res.store}" if res.store else "")
        + (f", {res.failed:,} failed (see the error column)" if res.failed else ""),
        "",
        format_table(res),
    ]
    if res.failed:
        lines.append(f"\n  {res.failed} run{'s' if res.failed > 1 else ''} failed:")
        for r in [r for r in res.rows if r["error"]][:5]:
            label = ", ".join(f"{p} {cell(r[spec.run.param(p).column])}" for p in spec.swept)
            label += (", " if label else "") + (r["what_if"] if n_w > 1 else "")
            lines.append(f"    {label.rstrip(', ')}: {r['error']}")
        if res.failed > 5:
            lines.append(f"    ... {res.failed - 5} more (--csv or --json, or the store, hold every error)")
    if res.store:
        lines.append(
            f"\n  results store: {res.store} (table 'sweep'; duckdb.connect({res.store!r}).sql('from sweep').df())"
        )
    return "\n".join(lines)


def format_examples(examples: Mapping[str, str]) -> str:
    """The built-in specs (name -> what each shows), one a line."""
    return "\n".join(f"  {k:<12} {what}" for k, what in examples.items())


def sweep_csv(res: SweepResult) -> str:
    """The table as CSV: every column, a header line, empty cells for nulls."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    columns = res.columns
    w.writerow(columns)
    for r in res.rows:
        w.writerow(["" if r[c] is None else r[c] for c in columns])
    return buf.getvalue()


def write_sweep_csv(res: SweepResult, path: str | os.PathLike[str]) -> None:
    """Write :func:`sweep_csv` to ``path`` atomically."""
    atomic_write_text(path, sweep_csv(res))


def write_sweep_json(res: SweepResult, path: str | os.PathLike[str]) -> None:
    """Write the ``--json`` document (``res.to_dict()``, indented by one) to ``path`` atomically."""
    atomic_write_text(path, json.dumps(res.to_dict(), indent=1) + "\n")


def check_output_files(paths: Mapping[str, str | None]) -> None:
    """Refuse, before the sweep runs, an output path (flag -> path; None: not given) that
    cannot become a file.

    Raises:
        InputError: naming the flag and the path."""
    for flag, path in paths.items():
        if path:
            check_output_file(path, flag)
