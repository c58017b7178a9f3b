"""A search's results store: one DuckDB file (``--store PATH``), a row per evaluated layout, added
as soon as the layout is evaluated; a search that stops (interrupted, or killed) and runs again
with the same store skips what the store already holds, so no layout is evaluated twice.

Table ``results``, one row per layout (``pandas.read_sql`` / ``duckdb.sql("from results")`` /
``polars.read_database`` load it): ``key`` (what identifies the point: model, GPU, cluster,
backend and every layout field), ``model``, ``gpu``, ``cluster``, ``backend`` (``estimate``: the
screen's closed-form estimate; ``analytical`` or ``flow``: simulated), the layout's ``gpus``,
``tp``, ``pp``, ``vpp``, ``cp``, ``ep``, ``etp`` (expert TP), ``dp``, ``micro_batch``, ``global_batch``,
``seq_len``, ``recompute``, ``sequence_parallel``, ``distributed_optimizer``, ``zero``, ``tp_overlap``,
``overlap_grad_reduce``, ``overlap_param_gather``, ``precision``, the results
``tokens_per_s``, ``mfu``, ``iteration_time_s`` (s), ``memory_peak_gib`` (GiB), ``compute_s``,
``exposed_comm_s``, ``bubble_s``, ``other_s`` (s; null where the run does not say), the
reproducing ``command`` and ``row`` (the whole row as JSON).  duckdb is an optional dependency
(``pip install podsim[search]``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..optional import require

_LAYOUT = (
    "gpus",
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "micro_batch",
    "global_batch",
    "seq_len",
    "recompute",
    "sequence_parallel",
    "distributed_optimizer",
    "zero",
    "tp_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "precision",
)
_RESULTS = ("tokens_per_s", "mfu", "iteration_time_s", "memory_peak_gib")
_BREAKDOWN = ("compute_s", "exposed_comm_s", "bubble_s", "other_s")
_SCHEMA = (
    "key VARCHAR PRIMARY KEY, model VARCHAR, gpu VARCHAR, cluster VARCHAR, backend VARCHAR, gpus INTEGER, "
    "tp INTEGER, pp INTEGER, vpp INTEGER, cp INTEGER, ep INTEGER, etp INTEGER, dp INTEGER, micro_batch INTEGER, "
    "global_batch INTEGER, seq_len INTEGER, recompute VARCHAR, sequence_parallel BOOLEAN, "
    "distributed_optimizer BOOLEAN, zero INTEGER, tp_overlap VARCHAR, overlap_grad_reduce BOOLEAN, "
    "overlap_param_gather BOOLEAN, precision VARCHAR, tokens_per_s DOUBLE, mfu DOUBLE, iteration_time_s DOUBLE, "
    "memory_peak_gib DOUBLE, compute_s DOUBLE, exposed_comm_s DOUBLE, bubble_s DOUBLE, other_s DOUBLE, "
    "command VARCHAR, row VARCHAR"
)

#: the columns a row fills, in the order :meth:`Store.add` gives their values
_COLUMNS = ("key", "model", "gpu", "cluster", "backend", *_LAYOUT, *_RESULTS, *_BREAKDOWN, "command", "row")
#: columns added after the first stores were written (name, type)
_ADDED = (("etp", "INTEGER"), ("precision", "VARCHAR"))


def point_key(model: str, gpu: str, cluster: str | None, backend: str, layout: dict[str, Any]) -> str:
    """What identifies an evaluated point (a hash of the model, GPU, cluster, backend and layout)."""
    text = json.dumps([model, gpu, cluster or "", backend, layout], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Store:
    """The results of a search, in a DuckDB file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        duckdb = require("duckdb", "a results store (--store)", "--store")
        self.path = Path(path)
        if self.path.is_dir():
            raise InputError("is a folder; give the results store's file (a DuckDB database)", str(path), "--store")
        try:
            self._db = duckdb.connect(str(self.path))
            self._db.execute(f"CREATE TABLE IF NOT EXISTS results ({_SCHEMA})")
            columns = [c for (c, *_rest) in self._db.execute("DESCRIBE results").fetchall()]
        except duckdb.Error as e:
            raise InputError(
                f"cannot open it as a results store: {str(e).splitlines()[0]}", str(path), "--store"
            ) from None
        if "key" not in columns or "row" not in columns:
            self._db.close()
            raise InputError(
                "its table 'results' is not a podsim search's (no key and row columns)", str(path), "--store"
            )
        for name, kind in _ADDED:  # a store of an older podsim: the columns added since (null in its rows)
            if name not in columns:
                self._db.execute(f"ALTER TABLE results ADD COLUMN {name} {kind}")

    def keys(self) -> set[str]:
        """The points already evaluated."""
        return {k for (k,) in self._db.execute("SELECT key FROM results").fetchall()}

    def add(self, key: str, model: str, gpu: str, cluster: str | None, backend: str, row: dict[str, Any]) -> None:
        """Append one evaluated point (committed at once)."""
        lay, br = row["layout"], row.get("breakdown") or {}
        values = [
            key,
            model,
            gpu,
            cluster or "",
            backend,
            *(lay.get(k) for k in _LAYOUT),
            *(row[k] for k in _RESULTS),
            *(br.get(k) for k in _BREAKDOWN),
            row["command"],
            json.dumps(row),
        ]
        marks = ", ".join("?" * len(values))
        names = ", ".join(_COLUMNS)
        self._db.execute(f"INSERT INTO results ({names}) VALUES ({marks}) ON CONFLICT (key) DO NOTHING", values)

    def row(self, key: str) -> dict[str, Any]:
        """One stored row.

        Raises:
            KeyError: the store does not hold ``key``.
        """
        got = self._db.execute("SELECT row FROM results WHERE key = ?", [key]).fetchone()
        if got is None:
            raise KeyError(key)
        return json.loads(got[0])

    def rows(self, keys: set[str] | None = None) -> list[dict[str, Any]]:
        """The stored rows (those of ``keys``, if given), as the search returns them."""
        got = self._db.execute("SELECT key, row FROM results").fetchall()
        return [json.loads(r) for k, r in got if keys is None or k in keys]

    def close(self) -> None:
        self._db.close()
