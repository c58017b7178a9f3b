"""The printed summary, the JSON document and the plot of a run's goodput
(:class:`~podsim.api.goodput.GoodputResult`); the JSON fields are documented in
docs/goodput.md and docs/outputs.md.  Reads a result, never re-runs anything.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .plot import pyplot, save_png

if TYPE_CHECKING:
    from ..api.goodput import GoodputResult

_GB = 1e9


def _h(seconds: float) -> float:
    return seconds / 3600.0


def _opt(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def goodput_json(r: GoodputResult) -> dict[str, Any]:
    """The JSON document: the fields scripts rely on (``interruptions_expected``,
    ``interruptions_by_kind``, ``goodput``, ``checkpoint_interval_s``,
    ``optimal_checkpoint_interval_s``, ``time_to_train_h`` {p10, p50, p90}, ``step_time_s``)
    and documented extras."""
    e = r.estimate
    ck = e.checkpoint
    fails = r.samples.failures.sum(axis=1)
    return {
        "model": r.model,
        "gpu": r.gpu,
        "cluster": r.cluster,
        "gpus": r.gpus,
        "step_time_s": round(r.step_time_s, 6),
        "tokens_per_step": r.tokens_per_step,
        "train_tokens": r.train_tokens,
        "steps": r.steps,
        "days": r.days,
        "interruptions_expected": round(e.interruptions, 3),
        "interruptions_by_kind": {k: round(v, 3) for k, v in e.interruptions_by_kind.items()},
        "goodput": round(e.goodput, 6),
        "goodput_first_order": _opt(e.goodput_first_order),
        "checkpoint_interval_s": round(e.interval_s, 3),
        "checkpoint_interval_steps": max(1, round(e.interval_s / r.step_time_s)) if r.step_time_s > 0 else None,
        "optimal_checkpoint_interval_s": _opt(e.optimal_interval_s, 3),
        "young_interval_s": _opt(e.young_interval_s, 3),
        "daly_interval_s": _opt(e.daly_interval_s, 3),
        "time_to_train_h": {k: round(v, 4) for k, v in r.time_to_train_h.items()},
        "expected_time_to_train_h": round(_h(e.wall_s), 4),
        "failure_free_time_h": round(_h(e.work_s), 4),
        "mtbf_h": _opt(_h(e.mtbf_s) if e.mtbf_s else None, 4),
        "failure_rate_per_h_by_kind": {k: round(v * 3600, 6) for k, v in e.rates_per_s.items()},
        "checkpoint": {
            "mode": ck.mode,
            "total_bytes": r.state.total_bytes,
            "per_gpu_bytes": r.state.per_gpu_bytes,
            "blocking_s": round(ck.blocking_s, 4),
            "write_s": round(ck.write_s, 4),
            "restore_s": round(ck.restore_s, 4),
        },
        "restart_s": round(e.restart_s, 3),
        "restart_by_kind_s": {k: round(v, 3) for k, v in e.restart_by_kind_s.items()},
        "monte_carlo": {
            "samples": r.samples_count,
            "seed": r.seed,
            "interruptions_mean": round(float(fails.mean()), 3),
            "time_to_train_mean_h": round(_h(float(r.samples.wall_s.mean())), 4),
        },
        "what_ifs": [
            {
                "name": w.name,
                "description": w.description,
                "goodput": round(w.estimate.goodput, 6),
                "optimal_checkpoint_interval_s": _opt(w.estimate.optimal_interval_s, 3),
                "expected_time_to_train_h": round(_h(w.estimate.wall_s), 4),
            }
            for w in r.what_ifs
        ],
        "goodput_by_gpus": [{"gpus": n, "goodput": round(g, 6)} for n, g in r.by_gpus],
        "goodput_by_interval": [{"interval_s": round(t, 3), "goodput": round(g, 6)} for t, g in r.by_interval],
        "reliability": reliability_json(r),
        "notes": list(r.notes),
    }


#: what a search row's ``goodput`` leaves out of :func:`goodput_json`: the same for every row
#: (the rates, the model, the GPU), the row's own (its GPUs) or the plot's curves
ROW_OMITS = ("model", "gpu", "cluster", "gpus", "reliability", "goodput_by_gpus", "goodput_by_interval")


def goodput_row_json(r: GoodputResult) -> dict[str, Any]:
    """A search row's ``goodput`` object: :func:`goodput_json`'s fields but :data:`ROW_OMITS`."""
    return {k: v for k, v in goodput_json(r).items() if k not in ROW_OMITS}


def reliability_json(r: GoodputResult) -> dict[str, Any]:
    """The failure rates a run used and their sources (``goodput_json``'s ``reliability``)."""
    return {
        "source": r.reliability.source,
        "gpus_per_switch": r.reliability.gpus_per_switch,
        "kinds": {
            k.name: {"rate_per_component_h": k.rate, "per": k.per, "replace": k.replace, "source": k.source}
            for k in r.reliability.kinds.values()
        },
    }


def _duration(hours: float) -> str:
    return f"{hours / 24:.2f} days" if hours >= 48 else f"{hours:.2f} h"


def format_goodput(r: GoodputResult) -> str:
    """The summary: the run, its failures, checkpoints, goodput, time to train and what-ifs."""
    e = r.estimate
    ck = e.checkpoint
    tt = r.time_to_train_h
    length = f"{r.days:g} days of wall clock" if r.days is not None else f"{r.train_tokens:.4g} tokens"
    lines = [
        f"podsim goodput: {r.model} on {r.gpus:,} x {r.gpu} ({r.cluster}), {length}",
        f"  step time                    {r.step_time_s:.4f} s "
        f"({r.tokens_per_step:,} tokens a step, {r.steps:,} steps)",
        f"  failure-free time            {_duration(_h(e.work_s))}",
        "  failures",
        "    job MTBF                   " + (f"{_h(e.mtbf_s):.3f} h" if e.mtbf_s else "none (every rate is 0)"),
        f"    interruptions expected     {e.interruptions:,.1f}",
    ]
    for k, v in e.interruptions_by_kind.items():
        lines.append(f"      {k:<24} {v:,.1f}")
    lines += [
        f"  checkpoint ({ck.mode})",
        f"    state                      {r.state.total_bytes / _GB:,.1f} GB "
        f"({r.state.per_gpu_bytes / _GB:.2f} GB per GPU)",
        f"    blocks training            {ck.blocking_s:.2f} s; restore {ck.restore_s:.2f} s",
        f"    interval                   {e.interval_s:,.0f} s"
        + (" (the optimum)" if r.estimate.optimal_interval_s == e.interval_s else ""),
        "    optimum / Young / Daly     "
        + " / ".join(
            f"{x:,.0f} s" if x is not None else "-"
            for x in (e.optimal_interval_s, e.young_interval_s, e.daly_interval_s)
        ),
        f"  restart per failure          {e.restart_s:.0f} s (detection, rescheduling, warm-up, restore)",
        f"  goodput                      {100 * e.goodput:.2f} %"
        + (f" (first order {100 * e.goodput_first_order:.2f} %)" if e.goodput_first_order is not None else ""),
        f"  time to train                p10 {_duration(tt['p10'])}, p50 {_duration(tt['p50'])}, "
        f"p90 {_duration(tt['p90'])}"
        f" (Monte Carlo, {r.samples_count} runs, seed {r.seed})",
        "  what-ifs (each at its best interval)",
    ]
    for w in r.what_ifs:
        lines.append(
            f"    {w.name:<24} goodput {100 * w.estimate.goodput:6.2f} %, "
            f"time to train {_duration(_h(w.estimate.wall_s))}"
        )
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def plot_goodput(r: GoodputResult, path: str | os.PathLike[str]) -> None:
    """Two panels: goodput vs GPUs (each at its best interval) and vs checkpoint interval."""
    plt = pyplot("to draw the goodput plot", "--plot")
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs, ys = zip(*r.by_gpus)
    a.plot(xs, [100 * y for y in ys], marker="o")
    a.axvline(r.gpus, color="grey", linestyle=":", label=f"this run ({r.gpus:,} GPUs)")
    a.set_xscale("log", base=2)
    a.set_xlabel("GPUs")
    a.set_ylabel("goodput (%)")
    a.set_title("goodput vs GPUs (best checkpoint interval)")
    a.legend()
    ts, gs = zip(*r.by_interval)
    b.plot([t / 60 for t in ts], [100 * g for g in gs])
    b.axvline(r.estimate.interval_s / 60, color="grey", linestyle=":", label="interval used")
    if r.estimate.young_interval_s:
        b.axvline(r.estimate.young_interval_s / 60, color="tab:orange", linestyle="--", label="Young")
    b.set_xscale("log")
    b.set_xlabel("checkpoint interval (min)")
    b.set_ylabel("goodput (%)")
    b.set_title(f"goodput vs checkpoint interval ({r.gpus:,} GPUs)")
    b.legend()
    fig.suptitle(f"{r.model} on {r.gpu}: goodput under failures")
    fig.tight_layout()
    save_png(fig, path)
