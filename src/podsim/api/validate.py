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

from ..jobs.validate import SETS, VALIDATE_PARAMS, ValidateJob
from ..validation import Check, default_jobs, run_validation

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
    sets: tuple[str, ...] = SETS,
    backend: str = "analytical",
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
    count: Callable[[int, int], None] | None = None,
) -> Validation:
    """Predict every row podsim can run and compare: the shipped ``sets``, or the rows of the
    CSV ``rows`` (the columns of docs/calibration.md, or a training-steps CSV); ``only`` keeps
    row ids starting with it; ``backend`` times the throughput rows; ``jobs`` worker processes
    (default: the CPUs, at most 8).  ``progress(text)`` gets each row's id, then a
    ``not runnable: ...`` line for each row that could not run; ``count(done, total)`` the
    number of rows done (0 first).  On Ctrl-C the worker processes are stopped at once and the
    KeyboardInterrupt goes on.

    Raises:
        InputError: a rows file that cannot be read, or an unknown set."""
    checks, skipped = run_validation(rows, only, progress, sets, backend, jobs or default_jobs(), count)
    return Validation(checks, skipped)
