"""``podsim sweep``: run every point of a sweep spec (:mod:`.spec`) under every what-if, in
worker processes or on Ray (:func:`~podsim.sweep.executors.run_tasks`), into one table.

Each finished point goes to the results store at once (:mod:`.sweep_store`); points the store
already holds are taken from it, not run again.  A point podsim refuses (a layout the model
cannot take) becomes a row with an ``error`` and null metrics; the sweep goes on.

Units: as the metric columns say (:data:`podsim.sweep.runs.RUNS`): s, us, GB/s, GiB, per s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .executors import run_tasks
from .runs import evaluate, with_defaults
from .spec import Point, SweepSpec
from .sweep_store import SweepStore


@dataclass
class SweepResult:
    """A sweep's table: one row per point and what-if, in the spec's order.

    Attributes:
        spec: the sweep.
        rows: ``{key, sweep, run, what_if, <parameter columns>, <metric columns>, error}`` each.
        evaluated: points run now.
        reused: points taken from the results store.
        failed: rows with an ``error`` (of all rows).
        store: the results store the sweep used (None: none).
        points: the distinct parameter points (each run under every what-if).
    """

    spec: SweepSpec
    rows: list[dict[str, Any]]
    evaluated: int
    reused: int
    failed: int
    store: str | None = None
    points: int = 0

    @property
    def columns(self) -> list[str]:
        """Every column of :attr:`rows`, in table order."""
        return table_columns(self.spec)

    def to_dict(self) -> dict[str, Any]:
        """The ``podsim sweep --json`` document: the sweep, its counts, columns and rows."""
        return {
            "sweep": self.spec.name,
            "run": self.spec.run.name,
            "source": self.spec.source,
            "store": self.store,
            "runs": len(self.rows),
            "evaluated": self.evaluated,
            "reused": self.reused,
            "failed": self.failed,
            "columns": self.columns,
            "rows": self.rows,
        }


def table_columns(spec: SweepSpec) -> list[str]:
    """``key, sweep, run, what_if``, the spec's parameters (underscore names), the run kind's
    metrics and ``error``."""
    return (
        ["key", "sweep", "run", "what_if"]
        + [spec.run.param(p).column for p in spec.parameters]
        + list(spec.run.metrics)
        + ["error"]
    )


def column_types(spec: SweepSpec) -> dict[str, str]:
    """The DuckDB type of each parameter and metric column of ``spec``'s rows."""
    out = {spec.run.param(p).column: spec.run.param(p).sql_type for p in spec.parameters}
    out.update(spec.run.metrics)
    return out


def make_row(spec: SweepSpec, point: Point, result: dict[str, Any]) -> dict[str, Any]:
    """The table row of ``point`` from its metrics (or ``{"error": ...}``); a parameter the point
    leaves out has its default there."""
    row: dict[str, Any] = {"key": point.key, "sweep": spec.name, "run": spec.run.name, "what_if": point.whatif["name"]}
    full = with_defaults(spec.run, point.params)
    for p in spec.parameters:
        row[spec.run.param(p).column] = full[p]
    for m in spec.run.metrics:
        row[m] = result.get(m)
    row["error"] = result.get("error")
    return row


def run_sweep(
    spec: SweepSpec,
    store: str | None = None,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Run ``spec``: every point under every what-if, the store's points taken from it.

    ``store``: a DuckDB results store (default: the spec's ``store``; None: keep nothing).
    ``workers``: local worker processes (default: the CPUs, at most 8; 1: this process).
    ``ray_address``: run on Ray instead (``"local"``: start one on this machine).
    ``progress(done, total)``: called as points finish (``total``: the points to run now).

    Raises:
        InputError: for a store that cannot be opened, or Ray that cannot be reached.
    """
    points = spec.expand()
    path = store or spec.store
    db = SweepStore(path) if path else None
    got: dict[str, dict[str, Any]] = {}
    try:
        if db:
            db.ensure_columns(column_types(spec))
            stored = db.rows({p.key for p in points})
            for p in points:
                if p.key in stored:
                    got[p.key] = make_row(spec, p, stored[p.key])
        reused = len(got)
        todo = [p for p in points if p.key not in got]
        tasks = [(spec.run.name, p.params, p.whatif, spec.base) for p in todo]
        if progress:
            progress(0, len(todo))
        for n, (i, result) in enumerate(run_tasks(evaluate, tasks, workers, ray_address), 1):
            row = make_row(spec, todo[i], result)
            if db:
                db.add(row)
            got[row["key"]] = row
            if progress:
                progress(n, len(todo))
    finally:
        if db:
            db.close()
    rows = [got[p.key] for p in points]
    distinct = len({json.dumps(p.params, sort_keys=True, default=str) for p in points})
    return SweepResult(spec, rows, len(todo), reused, sum(1 for r in rows if r["error"]), path, distinct)
