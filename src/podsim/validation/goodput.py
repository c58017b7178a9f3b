"""Predict a whole run's outcome under failures (``kind`` = ``goodput`` rows, the reported set):
its interruptions (all, or one kind's: ``interruptions_<kind>``) and its effective training
time (``effective_training_pct``: goodput in per cent) over the row's ``days`` of wall clock,
with the shipped failure rates (never fitted to these rows) and podsim's default checkpoint and
restart assumptions, the row's ``storage_bandwidth`` (GB/s) where the source gives it.

No step is simulated: a run's failures and goodput do not depend on its step time (the
checkpoint interval is not rounded to whole steps here).
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..jobs.reliability import DETECT_S, NIC_BYTES_PER_S, RESCHEDULE_S, SNAPSHOT_GBPS, STORAGE_GBPS, WARMUP_S
from ..llm.layout import Layout
from ..llm.model import ModelConfig
from ..reliability.checkpoint import checkpoint_state
from ..reliability.estimate import RunModel, estimate
from ..reliability.rates import KINDS, default_reliability
from ..reliability.restart import RestartTimes
from .row_values import row_float

#: the metrics of a goodput row
GOODPUT_METRICS = ("interruptions", *(f"interruptions_{k}" for k in KINDS), "effective_training_pct")


def _positive(r: dict, key: str, default: float | None = None) -> float:
    f = row_float(r, key, default)
    if not (math.isfinite(f) and f > 0):
        raise InputError(f"row {r['row_id']}: {key} must be a finite number > 0, got {r.get(key)!r}", "podsim validate")
    return f


def predict_goodput(r: dict, model: ModelConfig, lay: Layout) -> float:
    """The row's metric, predicted for ``model`` under ``lay`` (the row's, as the throughput
    rows read them; see the module docstring)."""
    bw = _positive(r, "storage_bandwidth", STORAGE_GBPS) * 1e9
    run = RunModel(
        default_reliability(),
        lay.gpus,
        int(_positive(r, "gpus_per_node", 8)),
        checkpoint_state(model, lay),
        "sync",
        bw,
        bw,
        SNAPSHOT_GBPS * 1e9,
        NIC_BYTES_PER_S,  # for in-memory checkpoints: not used by these rows' sync checkpoints
        RestartTimes(DETECT_S, RESCHEDULE_S, WARMUP_S),
        None,
        0.0,
    )
    e = estimate(run, days=_positive(r, "days"))
    metric = r["metric"]
    if metric == "effective_training_pct":
        return 100 * e.goodput
    if metric == "interruptions":
        return e.interruptions
    return e.interruptions_by_kind[metric.removeprefix("interruptions_")]
