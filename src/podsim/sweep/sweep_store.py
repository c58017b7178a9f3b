"""A sweep's results store: one DuckDB file (``podsim sweep --store PATH`` or ``store:`` in the
spec), a row per evaluated point, added and committed as soon as the point finishes, so that a
sweep that stops (Ctrl-C, a crash, SIGKILL) loses at most the points in flight; run again with
the same store, it evaluates only the points the store lacks.

Table ``sweep`` (``duckdb.connect(PATH).sql("from sweep").df()`` gives a pandas frame,
``polars.read_database("from sweep", duckdb.connect(PATH))`` a polars one):

* ``key``: what identifies the point (a hash of the run kind, every parameter that differs
  from its default, and the what-if; :func:`podsim.sweep.spec.point_key`);
* ``sweep``: the name of the sweep that evaluated it; ``run``: ``llm``, ``collective``,
  ``simulate`` or ``serve``; ``what_if``: the what-if's name;
* one column per parameter a spec gave (``gpus``, ``tp``, ``global_batch``...: the flag's name
  with underscores; integers BIGINT, numbers DOUBLE, switches BOOLEAN, the rest VARCHAR);
* one column per metric of the run kind, its unit in its name (``iteration_time_s``,
  ``tokens_per_s``, ``busbw_gbps``...; :data:`podsim.sweep.runs.RUNS`);
* ``error``: why podsim refused the point (its metrics are then null), null otherwise;
* ``row``: the whole row as JSON.

Several sweeps may share a store: a table column a sweep does not have is null in its rows.
duckdb is an optional dependency (``pip install podsim[search]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..optional import require

#: the columns every sweep row has, before its parameters and metrics
BASE_COLUMNS = {
    "key": "VARCHAR PRIMARY KEY",
    "sweep": "VARCHAR",
    "run": "VARCHAR",
    "what_if": "VARCHAR",
    "error": "VARCHAR",
    "row": "VARCHAR",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SweepStore:
    """The results of sweeps, in a DuckDB file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        duckdb = require("duckdb", "a results store (--store)", "--store")
        self.path = Path(path)
        if self.path.is_dir():
            raise InputError("is a folder; give the results store's file (a DuckDB database)", str(path), "--store")
        self._error = duckdb.Error
        try:
            self._db = duckdb.connect(str(self.path))
            cols = ", ".join(f"{_quote(k)} {t}" for k, t in BASE_COLUMNS.items())
            self._db.execute(f"CREATE TABLE IF NOT EXISTS sweep ({cols})")
            self._types = {c: t for (c, t, *_rest) in self._db.execute("DESCRIBE sweep").fetchall()}
        except duckdb.Error as e:
            raise InputError(
                f"cannot open it as a results store: {str(e).splitlines()[0]}", str(path), "--store"
            ) from None
        if "key" not in self._types or "row" not in self._types:
            self._db.close()
            raise InputError("its table 'sweep' is not a podsim sweep's (no key and row columns)", str(path), "--store")

    def ensure_columns(self, columns: dict[str, str]) -> None:
        """Add the columns (name -> DuckDB type) the table lacks.

        Raises:
            InputError: when a column exists with a type its values cannot go into.
        """
        for name, typ in columns.items():
            have = self._types.get(name)
            if have is None:
                self._db.execute(f"ALTER TABLE sweep ADD COLUMN {_quote(name)} {typ}")
                self._types[name] = typ
            elif have != typ and have != "VARCHAR":
                raise InputError(
                    f"its column {name!r} holds {have}, and this sweep's {name} is {typ}: use another store",
                    str(self.path),
                    "--store",
                )

    def keys(self) -> set[str]:
        """The points already evaluated."""
        return {k for (k,) in self._db.execute("SELECT key FROM sweep").fetchall()}

    def rows(self, keys: set[str] | None = None) -> dict[str, dict[str, Any]]:
        """The stored rows (those of ``keys``, if given) by key, as :meth:`add` took them."""
        got = self._db.execute("SELECT key, row FROM sweep").fetchall()
        return {k: json.loads(r) for k, r in got if keys is None or k in keys}

    def add(self, row: dict[str, Any]) -> None:
        """Append one evaluated point (``row`` holds ``key`` and its columns' values; committed at
        once).  A key the store holds already is left as it is."""
        cols = [c for c in row if c in self._types and c != "row"]
        values = [row[c] if self._types[c] != "VARCHAR" or row[c] is None else str(row[c]) for c in cols]
        cols.append("row")
        values.append(json.dumps(row))
        marks = ", ".join("?" * len(values))
        self._db.execute(
            f"INSERT INTO sweep ({', '.join(map(_quote, cols))}) VALUES ({marks}) ON CONFLICT (key) DO NOTHING", values
        )

    def close(self) -> None:
        self._db.close()
