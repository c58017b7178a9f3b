"""The summary's lines on injected faults: what they cost the step, who waited on whom (times
in ms, or s for a training iteration)."""

from __future__ import annotations

from typing import Any


def fault_lines(faults: dict[str, Any], unit_s: bool = False) -> list[str]:
    """The summary's lines on injected faults (``faults``: a result's ``faults`` section)."""
    if not faults:
        return []

    def t(ns: float) -> str:
        return f"{ns / 1e9:.4f} s" if unit_s else f"{ns / 1e6:.3f} ms"

    base, step = faults["baseline_step_ns"], faults["step_ns"]
    frac = faults.get("cost_fraction") or 0.0
    lines = [
        "",
        f"  faults ({faults['simulated']})",
        f"    step without faults {t(base)}, with them {t(step)}: +{t(step - base)} ({100 * frac:+.2f} %)",
    ]
    for row in faults["injected"]:
        cost = ""
        if "cost_ns" in row:
            cost = f": alone +{t(row['cost_ns'])} ({100 * (row.get('cost_fraction') or 0.0):+.2f} %)"
            if "cost_ns_per_step" in row:
                cost += f", {t(row['cost_ns_per_step'])} per step amortised"
        lines.append(f"    {row['flag']} {row['spec']}: {row['what']}{cost}")
    h = faults.get("hiccup")
    if h:
        lines.append(
            f"    hiccup: the affected step {t(h['affected_step_ns'])}, a typical one {t(h['typical_step_ns'])}; "
            f"mean over {h['every_steps']} steps {t(h['mean_step_ns'])}"
        )
    w = faults.get("waits") or {}
    if w.get("waited_for"):
        who = ", ".join(f"rank {x['rank']} ({t(x['others_waited_ns'])})" for x in w["waited_for"][:5])
        lines.append(f"    waited for most (others' summed wait at collectives): {who}")
    for x in (w.get("top_waits") or [])[:3]:
        lines.append(
            f"    {x['waiting_ranks']} of {x['group_size']} ranks waited for rank {x['last_rank']} at "
            f"{x['collective']!r} (up to {t(x['max_wait_ns'])})"
        )
    return lines
