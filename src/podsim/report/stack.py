"""What ``podsim stack`` and ``podsim calibrate`` print: the presets, one stack's properties
with their values, meanings and sources, and a calibration's fit with each run's residual."""

from __future__ import annotations

from typing import Any

from ..stacks.schema import section_props
from ..stacks.stack import SoftwareStack


def format_stack_list(stacks: list[SoftwareStack]) -> str:
    """One line per preset: name, kind, base and title."""
    lines = ["software stacks (podsim stack show NAME; --stack NAME on llm, search, sweep, infer, serve-llm):"]
    for kind in ("training", "serving"):
        group = [s for s in stacks if s.kind == kind]
        if not group:
            continue
        lines.append(f"  {kind}:")
        w = max(len(s.name) for s in group)
        for s in group:
            base = f" (on {s.base})" if s.base else ""
            lines.append(f"    {s.name:<{w}}  {s.title}{base}")
    return "\n".join(lines)


def _value(v: Any, unit: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g} {unit}".rstrip() if unit != "x" else f"{v:g}x"
    return str(v)


def format_stack(st: SoftwareStack) -> str:
    """A stack's properties: the value each one has (its own, a base's, or the default), what
    it means and where the value comes from."""
    origin = "preset" if st.origin == "preset" else f"file {st.origin}"
    lines = [f"stack {st.name} ({st.kind}, {origin}" + (f", on {st.base})" if st.base else ")"), f"  {st.title}"]
    if st.description:
        lines.append(f"  {st.description}")
    lines.append("")
    for p in section_props(st.kind):
        v = st.get(p.name)
        shown = (
            _value(v, p.unit) if v is not None else "(Megatron-Core's on the GPU)" if not p.rule else "(layout default)"
        )
        kind = "rule" if p.rule else "physical"
        lines.append(f"  {p.name:<22} {shown:<14} [{kind}] {p.help}")
        if p.name in st.sources:
            lines.append(f"  {'':<22} source: {st.sources[p.name]}")
    if st.free:
        lines.append("")
        lines.append(
            "  free (podsim calibrate fits these): "
            + ", ".join(f"{k} in [{lo:g}, {hi:g}]" for k, (lo, hi) in st.free.items())
        )
    return "\n".join(lines)


def format_calibration(cal: Any, out: str | None) -> str:
    """A training calibration: the fitted values, those held, each run before and after."""
    d = cal.to_dict()
    lines = [f"podsim calibrate training: {len(d['runs'])} run(s), base stack {d['base']}"]
    for k, v in d["fitted"].items():
        lines.append(f"  fitted {k:<22} {v:.4g}")
    for k, v in d["held"].items():
        why = "these runs do not depend on it" if k in d["flat"] else "fewer runs than free parameters"
        lines.append(f"  held   {k:<22} {v:.4g}  ({why}: kept at the base's value)")
    w = max(len(r["row_id"]) for r in d["runs"])
    lines.append(f"  {'run':<{w}}  {'measured':>12}  {'error before':>12}  {'error after':>11}")
    for r in d["runs"]:
        lines.append(
            f"  {r['row_id']:<{w}}  {r['measured']:>12,.4g}  {100 * r['error_before']:>+11.1f}%  "
            f"{100 * r['error_after']:>+10.1f}%"
        )
    lines.append(f"  ({d['evaluations']} simulations)")
    if d["refusal"]:
        lines.append(f"refused: {d['refusal']}; no stack file written")
    elif out:
        lines.append(f"wrote {out} (use it as --stack {out})")
    return "\n".join(lines)
