"""What ``podsim calibrate`` found, as one object for every kind (training, inference, trace):
the base stack, the measurements, the fit, and the fitted stack as a stack file
(:meth:`Calibration.to_yaml`)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..stacks.calibrate import Fit
from ..stacks.stack import SoftwareStack


@dataclass
class Calibration:
    """What ``podsim calibrate`` found: the base stack, the measurements, the fit.

    Attributes:
        base: the stack the fit started from.
        name: the fitted stack's name.
        runs: one entry per measurement (``row_id``, ``metric``: a training run's row, or a serving
            run's ``prefill_ms`` / ``decode_ms``), in the order of ``measured`` and the fit's errors.
        measured: the measured values (the metric's unit: tokens/s, TFLOP/s, s or ms).
        fit: the fit (fitted and held values, each measurement's error before and after).
        source: where the runs came from (ROWS.csv or ``shipped:PREFIX``).
        kind: ``training``, ``inference`` or ``trace``: what was calibrated.
        note: how the errors before the fit were taken, where not at the base's own values.
        replay: a serving run's ``podsim serve-llm`` flags it was replayed with ('' otherwise).
        architectures: the GPU architectures the runs ran on: a per-architecture value of the base
            (``{default: x, ampere: y}``) is written with their entries set to the fitted value.
    """

    base: SoftwareStack
    name: str
    runs: list[dict[str, str]]
    measured: list[float]
    fit: Fit
    source: str = ""
    kind: str = "training"
    note: str = ""
    replay: str = ""
    architectures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.fit.refusal

    @property
    def row_ids(self) -> list[str]:
        """The runs' ids, each once, in order."""
        return list(dict.fromkeys(r["row_id"] for r in self.runs))

    def citation(self) -> str:
        ids = ", ".join(self.row_ids)
        how = f"; replayed as podsim serve-llm {self.replay}" if self.replay else ""
        return f"fitted by podsim calibrate {self.kind} {self.source} (runs: {ids}{how}) on {datetime.date.today()}"

    def to_yaml(self) -> str:
        """The fitted stack as a stack file (base + the fitted values with their citation)."""
        cite = self.citation()
        section = self.base.kind
        data: dict[str, Any] = {
            "name": self.name,
            "title": f"{self.base.title}, calibrated to {len(self.row_ids)} measured run(s)",
            "kind": section,
            "base": self.base.name if self.base.origin == "preset" else None,
            "description": f"{self.base.name} with {', '.join(self.fit.fitted)} fitted by podsim calibrate "
            f"{self.kind} to {self.source}; held at the base's values: {', '.join(self.fit.held) or 'none'}.",
            section: {
                k: _rounded(self.base.fitted_value(k, v, self.architectures)) for k, v in self.fit.fitted.items()
            },
            "sources": dict.fromkeys(self.fit.fitted, cite),
        }
        if data["base"] is None:  # a user's file as the base: its values are written out in full
            data[section] = {**self.base.values, **data[section]}
            data["sources"] = {**self.base.sources, **data["sources"]}
            del data["base"]
        return yaml.safe_dump(data, sort_keys=False, width=100)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base": self.base.name,
            "name": self.name,
            "fitted": self.fit.fitted,
            "held": self.fit.held,
            "flat": self.fit.flat,
            "refusal": self.fit.refusal or None,
            "note": self.note or None,
            "replay": self.replay or None,
            "evaluations": self.fit.evaluations,
            "runs": [
                {
                    "row_id": r["row_id"],
                    "metric": r["metric"],
                    "measured": m,
                    "error_before": round(b, 5),
                    "error_after": round(a, 5),
                }
                for r, m, b, a in zip(self.runs, self.measured, self.fit.before, self.fit.after)
            ],
        }


def _table(table: dict) -> str:
    """A table by sequence length as text: ``512: 0.67, 8192: 0.56``."""
    return ", ".join(f"{n}: {x:g}" for n, x in table.items())


def _rounded(v: float | dict[str, float]) -> float | dict[str, float]:
    """A fitted value (or per-architecture mapping) to 6 decimals, as a stack file holds it."""
    return {k: round(x, 6) for k, x in v.items()} if isinstance(v, dict) else round(v, 6)
