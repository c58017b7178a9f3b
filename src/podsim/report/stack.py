"""What ``podsim stack`` and ``podsim calibrate`` print: the presets, one stack's properties
with their values, meanings and sources, and a calibration's fit with each run's residual
(relative error, %)."""

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
    if isinstance(v, dict) and all(isinstance(k, int) for k in v):  # by sequence length
        return "(" + ", ".join(f"{_value(x, unit)} at {n} tokens" for n, x in v.items()) + ")"
    if isinstance(v, dict):  # per GPU architecture
        return ", ".join(f"{arch} {_value(x, unit)}" for arch, x in v.items())
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
    unset = "(podsim's default)" if st.kind == "serving" else "(Megatron-Core's on the GPU)"
    for p in section_props(st.kind):
        v = st.get(p.name)
        shown = _value(v, p.unit) if v is not None else unset if not p.rule else "(layout default)"
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


def _fitted(v: Any) -> str:
    """A fitted or held value (a held measured host overhead is a word)."""
    return f"{v:.4g}" if isinstance(v, (int, float)) else str(v)


def _measured(v: float) -> str:
    """A measured value: 4 significant digits, a large one in full (28,201, not 2.82e+04)."""
    return f"{v:,.0f}" if 1e4 <= abs(v) < 1e15 else f"{v:,.4g}"


def format_calibration(cal: Any, out: str | None) -> str:
    """A calibration (training, inference or trace): the fitted values, those held, each measured
    run before and after (a serving run's prefill and decode step times, a replayed run's mean
    TTFT, mean E2E and median TPOT, or a trace's GEMM, attention and memory-bound ms, each on a
    line of its own)."""
    d = cal.to_dict()
    rows = len(dict.fromkeys(r["row_id"] for r in d["runs"]))
    lines = [f"podsim calibrate {d['kind']}: {rows} run(s), base stack {d['base']}"]
    if d.get("replay"):
        lines.append(f"  replayed request by request as podsim serve-llm {d['replay']}")
    for k, v in d["fitted"].items():
        lines.append(f"  fitted {k:<22} {_fitted(v)}")
    serving = d["kind"] in ("inference", "trace")
    fewer = "fewer measured step times than free parameters" if serving else "fewer runs than free parameters"
    flat = "a trace does not measure it" if d["kind"] == "trace" else "these runs do not depend on it"
    for k, v in d["held"].items():
        why = flat if k in d["flat"] else fewer
        lines.append(f"  held   {k:<22} {_fitted(v)}  ({why}: kept at the base's value)")
    labels = [f"{r['row_id']} {r['metric']}" if serving else r["row_id"] for r in d["runs"]]
    w = max(len(x) for x in labels)
    lines.append(f"  {'run':<{w}}  {'measured':>12}  {'error before':>12}  {'error after':>11}")
    for label, r in zip(labels, d["runs"]):
        lines.append(
            f"  {label:<{w}}  {_measured(r['measured']):>12}  {100 * r['error_before']:>+11.1f}%  "
            f"{100 * r['error_after']:>+10.1f}%"
        )
    lines.append(f"  ({d['evaluations']} simulations)")
    if d["note"]:
        lines.append(f"  ({d['note']})")
    if d["refusal"]:
        lines.append(f"refused: {d['refusal']}; no stack file written")
    elif out:
        lines.append(f"wrote {out} (use it as --stack {out})")
    return "\n".join(lines)
