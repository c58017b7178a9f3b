"""Measured single-GPU training steps against podsim, as text (``podsim kernels steps``)."""

from __future__ import annotations

#: the categories shown per row, in this order (the rest are summed into "rest")
SHOWN = ("gemm", "attention_fwd", "attention_bwd", "norm", "rope", "swiglu", "cross_entropy", "optimizer")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def format_step_comparison(
    entries: list[dict], efficiency: dict[str, float] | None, stack_values: dict[str, float], header: str
) -> str:
    """The rows of :func:`podsim.validation.training_steps.compare`: step measured, predicted and
    predicted with the measured in-step efficiency (ms, error); then, per row, each category's
    measured / predicted device ms and the idle time podsim does not model as such."""
    lines = [header]
    if not entries:
        return "\n".join(lines + ["  no measured GPU step to compare (rows of a CPU run, or none 'ok')"])
    fitted = efficiency is not None
    lines.append(
        f"  {'configuration':<46} {'measured':>10} {'podsim':>10} {'error':>7}"
        + (f" {'fitted':>10} {'error':>7}" if fitted else "")
        + "   (ms)"
    )
    for e in entries:
        label = (
            f"{e['model']} {e['layers']}L s{e['seq_len']} b{e['micro_batch']} {e['mode']} {e['attention']} "
            f"{e['optimizer']}" + (" ckpt" if e["checkpoint"] == "full" else "")
        )
        line = f"  {label[:46]:<46} {e['measured_ms']:>10,.1f} {e['predicted_ms']:>10,.1f} {100 * e['error']:>+6.1f}%"
        if fitted:
            line += f" {e['predicted_fitted_ms']:>10,.1f} {100 * e['error_fitted']:>+6.1f}%"
        lines.append(line)
    errs = [abs(e["error"]) for e in entries]
    lines.append(
        f"  mean |error| {100 * sum(errs) / len(errs):.1f}%, max {100 * max(errs):.1f}% over {len(errs)} rows"
        + (
            f"; with the measured in-step efficiency: mean "
            f"{100 * sum(abs(e['error_fitted']) for e in entries) / len(entries):.1f}%"
            if fitted
            else ""
        )
    )
    if efficiency:
        lines.append(
            "  in-step efficiency measured: "
            + ", ".join(f"{k} {v:g} (llm/stack.yaml: {stack_values.get(k, 1.0):g})" for k, v in efficiency.items())
        )
    lines.append(
        "\n  device time by category, measured / podsim (ms; idle: the device waited on the host; host: the "
        "host's time to issue the step, and per kernel podsim lists, us)"
    )
    lines.append(
        f"  {'configuration':<30}"
        + "".join(f" {c[:13]:>15}" for c in (*SHOWN, "rest"))
        + f" {'idle':>9} {'host':>9} {'us/kernel':>9}"
    )
    for e in entries:
        cats = e["categories"]
        label = f"{e['model']} s{e['seq_len']} b{e['micro_batch']} {e['mode'][:3]} {e['attention'][:5]}"
        cells = [f"{_ms(cats[c]['measured_ms'])}/{_ms(cats[c]['predicted_ms'])}" for c in SHOWN]
        rest_m = [v["measured_ms"] for c, v in cats.items() if c not in SHOWN and v["measured_ms"] is not None]
        rest_p = sum(v["predicted_ms"] for c, v in cats.items() if c not in SHOWN)
        cells.append(f"{_ms(sum(rest_m) if rest_m else None)}/{_ms(rest_p)}")
        per = e.get("host_us_per_listed_kernel")
        lines.append(
            f"  {label[:30]:<30}" + "".join(f" {c:>15}" for c in cells) + f" {_ms(e['idle_ms']):>9}"
            f" {_ms(e.get('host_ms')):>9} {'-' if per is None else f'{per:.1f}':>9}"
        )
    return "\n".join(lines)
