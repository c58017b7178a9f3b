"""The published rows ``podsim validate`` runs, shipped inside the package.

Two sets, told apart in every report:

* ``fitted`` (``calibration.csv``): the measurements podsim's parameters were fitted to
  (Megatron-LM SC'21 Tables 1-2 on A100, Megatron-Core's H100 weak-scaling table, Llama 3 405B
  on 8K-16K H100, Korthikanti et al.'s memory figures, NCCL bus bandwidths);
* ``reported`` (``reported.csv``): every other published figure found, never used to set a
  parameter -- podsim's error on them is its error on data it has not seen.

Both are podsim's own transcriptions with their citations (``source``, ``source_loc``,
``url``); the columns are documented in docs/calibration.md.  A user's own rows in the same
columns can be added with ``podsim validate --rows FILE``.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

from ..errors import InputError

SETS = {"fitted": "calibration.csv", "reported": "reported.csv"}
REQUIRED = ("row_id", "metric", "value")


def read_rows(path: str | Path, set_name: str) -> list[dict[str, str]]:
    """The rows of one CSV (``#`` lines are comments), each with ``set`` = ``set_name``.

    Raises:
        InputError: for an unreadable file, a missing column or a non-numeric value.
    """
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", src) from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column {missing[0]!r} (rows need {', '.join(REQUIRED)})", src)
    out = []
    for n, r in enumerate(reader, start=2):
        try:
            float(r["value"])
        except (TypeError, ValueError):
            raise InputError(f"value must be a number, got {r['value']!r}", src, f"row {n} ({r['row_id']})") from None
        r = {k: (v or "").strip() for k, v in r.items() if k is not None}
        r["set"] = set_name
        out.append(r)
    return out


def shipped_rows(sets: tuple[str, ...] = ("fitted", "reported")) -> list[dict[str, str]]:
    """The rows shipped with podsim, the ``fitted`` set first."""
    out: list[dict[str, str]] = []
    for s in sets:
        p = resources.files("podsim.validation") / SETS[s]
        if p.is_file():
            out += read_rows(Path(str(p)), s)
    return out
