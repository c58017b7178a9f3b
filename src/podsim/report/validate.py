"""The printed summary of ``podsim validate``: each compared row (measured, predicted, error),
one block per set, then the mean and max |error| per set, per GPU type within a set, and per
family of rows (the fitted set) or source (the reported set).

:func:`format_checks` takes the checks of :func:`podsim.validation.run_validation` (or of
:func:`podsim.api.validate.validate`): objects with ``row_id``, ``config``, ``measured``,
``predicted``, ``error`` (a fraction), ``set``, ``gpu``, ``source``, ``metric`` and
``outside``.  Errors are printed in per cent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..api.validate import Validation
    from ..validation import Check


def _stats(errs: list[float]) -> str:
    return f"mean {100 * sum(errs) / len(errs):.2f}%, max {100 * max(errs):.2f}% over {len(errs)} rows"


_FAMILIES = (
    ("megatron_sc21_t1", "Megatron SC'21 Table 1 (A100)"),
    ("megatron_sc21_t2_PTD", "Megatron SC'21 Table 2, PTD-P (A100)"),
    ("megatron_sc21_t2_ZeRO", "Megatron SC'21 Table 2, ZeRO-3 (DeepSpeed 2021; see docs/compute.md)"),
    ("mcore_h100", "Megatron-Core r0.8 weak scaling (H100)"),
    ("llama3_405b", "Llama 3 405B (H100)"),
    ("korthikanti", "Korthikanti memory"),
    ("nccl", "NCCL bus bandwidth"),
    ("steps_", "podsim's measured single-GPU training steps"),
    ("serve_", "podsim's measured serving steps"),
    ("goodput_", "whole runs under failures (interruptions, effective training time)"),
)


def format_checks(checks: Sequence[Check], skipped: int) -> str:
    """The table, one block per set, then mean and max |error| per set, per GPU type, per family
    (fitted set) or source (reported set).  Rows marked outside the model (their ``notes``
    start with ``outside the model:``) are shown but not averaged."""
    lines = []
    for s in ("fitted", "reported", "user"):
        mine = [c for c in checks if c.set == s]
        if not mine:
            continue
        title = {
            "fitted": "FITTED set (the parameters were fitted to these rows)",
            "reported": "REPORTED set (never fitted to: podsim's error on data it has not seen)",
            "user": "your rows",
        }[s]
        lines.append(f"{title}\n{'row':<46} {'configuration':<44} {'measured':>10} {'predicted':>10} {'error':>8}")
        for c in mine:
            lines.append(
                f"{c.row_id[:46]:<46} {c.config[:44]:<44} {c.measured:>10.4g} {c.predicted:>10.4g} "
                f"{100 * c.error:>+7.1f}%" + ("  (outside the model)" if c.outside else "")
            )
        lines.append("")
    if not checks:
        return f"no rows compared ({skipped} skipped)"
    outside = [c for c in checks if c.outside]
    checks = [c for c in checks if not c.outside]
    if not checks:
        return "\n".join(lines + [f"{len(outside)} rows, all outside the model ({skipped} skipped)"])
    errs = [abs(c.error) for c in checks]
    lines.append(
        f"{len(checks)} rows compared ({skipped} skipped): mean |error| {100 * sum(errs) / len(errs):.2f}%, "
        f"max {100 * max(errs):.2f}%"
    )
    for s in ("fitted", "reported", "user"):
        mine = [c for c in checks if c.set == s]
        if not mine:
            continue
        lines.append(f"  {s}: {_stats([abs(c.error) for c in mine])}")
        perf = [c for c in mine if c.gpu and c.metric not in ("allreduce_busbw_GBps",)]
        for gpu in sorted({c.gpu for c in perf}):
            lines.append(f"    {gpu}: {_stats([abs(c.error) for c in perf if c.gpu == gpu])}")
        for prefix, label in _FAMILIES:
            sub = [abs(c.error) for c in mine if c.row_id.startswith(prefix)]
            if sub:
                lines.append(f"    {label}: {_stats(sub)}")
        if s != "fitted":
            for src in sorted({c.source for c in mine if c.source}):
                lines.append(f"    {src[:70]}: {_stats([abs(c.error) for c in mine if c.source == src])}")
    stacks = sorted({c.stack for c in checks if c.stack})
    if stacks:
        lines.append("  per software stack (--stack; rows of other stacks: megatron-core):")
        lines.append(f"    {'stack':<20} {'fitted':<40} reported")
        for st in stacks:
            cells = []
            for s in ("fitted", "reported"):
                errs = [abs(c.error) for c in checks if c.stack == st and c.set == s]
                cells.append(_stats(errs) if errs else "-")
            lines.append(f"    {st:<20} {cells[0]:<40} {cells[1]}")
    if outside:
        why = sorted({c.outside for c in outside})
        lines.append(f"  {len(outside)} rows shown above but not averaged, outside podsim's model: " + "; ".join(why))
    return "\n".join(lines)


def format_validation(v: Validation) -> str:
    """The summary of a validation run (:func:`format_checks` of its checks)."""
    return format_checks(v.checks, v.skipped)
