"""``podsim validate`` as a Python call: podsim's predictions against every published (or your
own) measurement it can run.

:func:`validate` returns a :class:`Validation`: one :class:`~podsim.validation.Check` per
compared row (measured, predicted, relative error) and the rows skipped; its printed summary is
:func:`podsim.report.validate.format_validation`, its ``--json`` document :meth:`Validation.to_dict`.
The parameters of ``podsim validate`` are :class:`ValidateJob`'s (its flags: :data:`VALIDATE_PARAMS`).

Example::

    from podsim.api.validate import validate
    v = validate(sets=("reported",), only="mcore_h100")
    print(max(abs(c.error) for c in v.checks))      # a fraction

Rows ship with podsim (the ``fitted`` set, what its parameters were fitted to, and the
``reported`` set, never fitted to); their columns are in docs/calibration.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..jobs.validate import SETS, VALIDATE_PARAMS, ValidateJob
from ..validation import Check, default_jobs, read_rows, run_validation
from ..validation.predict import METRICS, handler
from ..validation.rows import check_choices

__all__ = ["SETS", "VALIDATE_PARAMS", "Check", "Validation", "ValidateJob", "validate"]


@dataclass
class Validation:
    """The compared rows (in the order of the rows) and the count of rows skipped (no
    prediction for their kind, or not runnable as transcribed)."""

    checks: list[Check]
    skipped: int

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: every compared row (fields: docs/calibration.md) and the skipped count."""
        return {"rows": [c.to_dict() for c in self.checks], "skipped": self.skipped}


def validate(
    rows: str | os.PathLike[str] | None = None,
    only: str | None = None,
    sets: tuple[str, ...] | None = None,
    backend: str = "analytical",
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
    count: Callable[[int, int], None] | None = None,
) -> Validation:
    """Predict every row podsim can run and compare: the shipped ``sets`` (None: all of
    :data:`SETS`), or the rows of the CSV ``rows`` (the columns of docs/calibration.md, or a
    training-steps CSV); ``only`` keeps row ids starting with it; ``backend`` times the
    throughput rows; ``jobs`` worker processes (default: the CPUs, at most 8).
    ``progress(text)`` gets each row id as it runs, then a ``not runnable: ...`` line for each
    shipped row that could not run; ``count(done, total)`` the number of rows done (0 first).
    On Ctrl-C the worker processes are stopped at once and the KeyboardInterrupt goes on.

    Raises:
        InputError: a rows file that cannot be read; ``sets`` with ``rows``; ``only`` matching
            no row; a user's row podsim has no prediction for (its metric) or cannot run as
            written (the first, with why); no row compared."""
    if rows is not None and sets is not None:
        raise InputError("picks among the shipped rows; with --rows it would be ignored", where="--set")
    table = None
    if rows is not None:
        table = read_rows(rows, "user")  # read once: checked here, then run
        _check_user_rows(table, only, str(rows))
    reasons: list[str] = []

    def seen(text: str) -> None:
        if text.startswith(NOT_RUNNABLE):
            reasons.append(text[len(NOT_RUNNABLE) :])
            if rows is not None:
                return  # said in the error below
        if progress is not None:
            progress(text)

    checks, skipped = run_validation(table, only, seen, sets or SETS, backend, jobs or default_jobs(), count)
    if rows is not None and reasons:
        raise InputError(
            f"{len(reasons)} of your rows cannot run as written; the first: {reasons[0]}", str(rows), "--rows"
        )
    if not checks:
        raise InputError(
            "no row was compared" + (f" (none of the rows' ids starts with {only!r})" if only else ""),
            str(rows) if rows is not None else None,
            "--only" if only else "--rows",
        )
    return Validation(checks, skipped)


#: how :func:`~podsim.validation.run_validation` reports a row that could not run
NOT_RUNNABLE = "not runnable: "


def _check_user_rows(table: list[dict[str, str]], only: str | None, source: str) -> None:
    """A user's rows that podsim would skip without a word: none left after ``only``, or a
    row whose metric podsim does not predict."""
    kept = [r for r in table if not only or r["row_id"].startswith(only)]
    if not kept:
        raise InputError(
            "no rows" + (f" whose id starts with {only!r}" if only and table else " (only a header)"),
            source,
            "--only" if only and table else "--rows",
        )
    for r in kept:
        check_choices(r, source)
        if handler(r) is None:
            raise InputError(
                f"podsim has no prediction for metric {r['metric']!r} on this row (metrics: "
                f"{', '.join(METRICS)}; throughput and inference rows also need hidden, gpus or batch: "
                "docs/calibration.md)",
                source,
                f"row {r['row_id']}",
            )
