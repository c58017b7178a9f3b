"""What injected faults cost a step: the step simulated without them (the baseline), with each
alone (when cheap), and with all of them; the result's ``faults`` section (docs/outputs.md)
holds the costs and who waited on whom.

The caller gives ``run(spec)``, which simulates one step with the faults of ``spec`` (an empty
spec: none) and returns its :class:`~podsim.report.result.Result` (or an object holding one,
read with ``result_of``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine.faults import FaultSpec
from ..report.result import Result

#: the largest job whose faults are each simulated alone as well (each is an every-rank run)
ALONE_MAX_GPUS = 1024


def run_with_faults(
    spec: FaultSpec,
    gpus: int,
    run: Callable[[FaultSpec], Any],
    result_of: Callable[[Any], Result] = lambda x: x,
) -> Any:
    """The step with every fault of ``spec`` (what ``run(spec)`` returns), its result's
    ``faults`` section filled in.  Runs: the baseline; each fault alone when there are several
    and ``gpus`` <= :data:`ALONE_MAX_GPUS`; with a host hiccup and other faults, the step
    without the hiccup (a typical step); then all of them."""
    base = result_of(run(FaultSpec())).finish_ns
    items = spec.items()
    alone: dict[str, int] = {}
    if len(items) > 1 and gpus <= ALONE_MAX_GPUS:
        for name, _ in items:
            alone[name] = result_of(run(spec.only(name))).finish_ns
        how = f"each fault simulated alone, then all {len(items)} together"
    elif len(items) > 1:
        how = (
            f"the {len(items)} faults simulated together only ({gpus} GPUs > {ALONE_MAX_GPUS}: each alone would be "
            "another every-rank run)"
        )
    else:
        how = "one fault: its cost is the step's"
    typical = None
    if spec.hiccup is not None:
        rest = spec.without("hiccup")
        if not rest:
            typical = base
        elif len(items) == 2 and rest.items()[0][0] in alone:
            typical = alone[rest.items()[0][0]]
        else:
            typical = result_of(run(rest)).finish_ns
    out = run(spec)
    res = result_of(out)
    step = res.finish_ns
    if len(items) == 1:
        alone[items[0][0]] = step
    described = res.info.get("faults", {})
    described = described if isinstance(described, dict) else {}
    injected = []
    for name, fault in items:
        row: dict[str, object] = {"flag": f"--{name}", "spec": str(fault), "what": described.get(name, "")}
        if name in alone:
            row["alone_step_ns"] = alone[name]
            row["cost_ns"] = alone[name] - base
            row["cost_fraction"] = round((alone[name] - base) / base, 6) if base else None
            if name == "hiccup" and spec.hiccup is not None:
                row["cost_ns_per_step"] = round((alone[name] - base) / spec.hiccup.every, 3)
        injected.append(row)
    report: dict[str, object] = {
        "baseline_step_ns": base,
        "step_ns": step,
        "cost_ns": step - base,
        "cost_fraction": round((step - base) / base, 6) if base else None,
        "simulated": how,
        "injected": injected,
    }
    if spec.hiccup is not None and typical is not None:
        h = spec.hiccup
        report["hiccup"] = {
            "every_steps": h.every,
            "delay_ns": h.delay_ns,
            "host": h.host,
            "typical_step_ns": typical,
            "affected_step_ns": step,
            "mean_step_ns": round(typical + (step - typical) / h.every, 3),
        }
    waits = dict(res.faults)
    waits["note"] = (
        "waits at collectives: a rank waits from the time it issues a collective to the time the last rank of "
        "its group does (pipeline sends and receives are not counted)"
    )
    report["waits"] = waits
    res.faults = report
    return out
