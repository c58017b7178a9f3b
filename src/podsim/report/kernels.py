"""The printed summaries of ``podsim kernels``: a fit of the roofline's efficiencies to a kernel
table, and measured training steps against podsim (the table itself:
:func:`podsim.report.steps.format_step_comparison`).

Each takes what :mod:`podsim.api.kernels` returns.  Units: errors in per cent, step times in ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .steps import format_step_comparison

if TYPE_CHECKING:
    from ..api.kernels import KernelFit, StepComparison


def format_kernel_fit(fit: KernelFit) -> str:
    """The fitted efficiencies, then each kernel family's mean |time error|."""
    lines = [
        f"podsim kernels fit: {fit.table} on {fit.gpu}",
        "  efficiency: {" + ", ".join(f"{k}: {v:g}" for k, v in fit.efficiency.items()) + "}",
    ]
    for fam, e in fit.errors.items():
        lines.append(f"  {fam:<10} mean |time error| {100 * e:.1f}% (weighted by sqrt(time))")
    return "\n".join(lines)


def format_steps(cmp: StepComparison) -> str:
    """Where the steps come from (file, device, date, torch), then each step measured against
    podsim's prediction."""
    prov = cmp.provenance
    header = (
        f"podsim kernels steps: {len(cmp.entries)} measured steps of {', '.join(cmp.gpus) or 'no GPU'} from "
        f"{cmp.path} ({prov.get('device', '?')}, {prov.get('date', '?')}, torch {prov.get('torch', '?')})"
    )
    return format_step_comparison(cmp.entries, cmp.efficiency, cmp.stack_values, header)
