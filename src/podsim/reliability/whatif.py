"""What-ifs of a run's goodput: the same run with one thing changed, each at its own best
checkpoint interval (closed form, :func:`~podsim.reliability.estimate.estimate`).

* ``hot-spares``: a spare node waits warm, so a failed part is swapped in ``hot_spare_s``
  instead of the rescheduling time;
* ``async-checkpoints``: training stops only for the device-to-host snapshot;
* ``in-memory-checkpoints``: snapshots to a peer node's memory, restores from there;
* ``storage-x10``: ten times the storage's write and read bandwidth;
* ``half-failure-rate``: every kind's rate halved (better hardware, or burn-in).

Variants that are the run itself (async when the run is async already) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .estimate import Estimate, RunModel, estimate
from .restart import RestartTimes

#: the factor ``storage-x10`` applies to the storage's bandwidths
STORAGE_FACTOR = 10.0


@dataclass(frozen=True)
class WhatIf:
    """One variant of the run and its estimate."""

    name: str
    description: str
    estimate: Estimate


def variants(model: RunModel, hot_spare_s: float) -> list[tuple[str, str, RunModel]]:
    """The variants of ``model`` (name, what changes, the changed model), each at its optimum
    interval."""
    base = replace(model, interval_s=None)
    out = []
    if hot_spare_s < model.times.reschedule_s:
        t = model.times
        out.append(
            (
                "hot-spares",
                f"a failed part swapped for a warm spare in {hot_spare_s:g} s (instead of {t.reschedule_s:g} s)",
                replace(base, times=RestartTimes(t.detect_s, hot_spare_s, t.warmup_s)),
            )
        )
    if model.mode != "async":
        out.append(
            ("async-checkpoints", "training stops only for the snapshot to host memory", replace(base, mode="async"))
        )
    if model.mode != "memory":
        out.append(
            ("in-memory-checkpoints", "checkpoints to a peer node's memory over the NIC", replace(base, mode="memory"))
        )
        out.append(
            (
                "storage-x10",
                f"{STORAGE_FACTOR:g}x the storage's write and read bandwidth",
                replace(
                    base,
                    write_bytes_per_s=model.write_bytes_per_s * STORAGE_FACTOR,
                    read_bytes_per_s=model.read_bytes_per_s * STORAGE_FACTOR,
                ),
            )
        )
    out.append(
        (
            "half-failure-rate",
            "every kind's failure rate halved",
            replace(base, reliability=model.reliability.scaled(0.5)),
        )
    )
    return out


def what_ifs(model: RunModel, hot_spare_s: float, work_s: float) -> list[WhatIf]:
    """Each variant's estimate for the same work (``work_s`` s of failure-free training: a
    run given in days is compared on the tokens those days train)."""
    return [WhatIf(name, text, estimate(m, work_s=work_s)) for name, text, m in variants(model, hot_spare_s)]
