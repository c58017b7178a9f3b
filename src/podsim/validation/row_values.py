"""A validation row's values: the numbers its CSV columns hold, with one-line errors naming
the row and the column."""

from __future__ import annotations

import math

from ..errors import InputError


def row_float(r: dict, key: str, default: float | None = None) -> float:
    """Row ``r``'s ``key`` as a float (NaN when it is not a number), ``default`` when empty.

    Raises:
        InputError: an empty value without a default."""
    v = r.get(key, "")
    if v in ("", None):
        if default is None:
            raise InputError(f"row {r['row_id']}: {key} is needed", "podsim validate")
        return default
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan
