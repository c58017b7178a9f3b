"""The printed summary of ``podsim search``: what was evaluated and rejected, then the best rows
with the command line that reproduces each.

:func:`format_search` takes what :func:`podsim.api.search.search` returns (a training search's
:class:`~podsim.api.search.RankedLayouts` or a serving search's
:class:`~podsim.api.search.RankedServing`).  Units: tokens/s, MFU (0-1), iteration and flow
times in s, memory in GiB, US dollars per million tokens, hours to train; a serving search's
requests/s, output tokens/s per GPU and p99 latencies in ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .training import stack_line

if TYPE_CHECKING:
    from ..api.search import RankedLayouts, RankedServing


def format_search(ranked: RankedLayouts | RankedServing, top: int = 10) -> str:
    """The summary of a search's result, its ``top`` best rows first (either kind)."""
    if ranked.job.serving:
        return format_ranked_serving(ranked, top)  # type: ignore[arg-type]
    return format_ranked_layouts(ranked, top)  # type: ignore[arg-type]


def _layout_text(r: dict[str, Any]) -> str:
    lay = r["layout"]
    return (
        f"gpus {lay['gpus']} tp {lay['tp']} pp {lay['pp']} vpp {lay['vpp']} cp {lay['cp']} ep {lay['ep']} "
        + (f"etp {lay['etp']} " if lay.get("etp", lay["tp"]) != lay["tp"] else "")
        + f"dp {lay['dp']} mb {lay['micro_batch']} recompute {lay['recompute']}"
        + (" sp" if lay["sequence_parallel"] else "")
        + (" dist-opt" if lay["distributed_optimizer"] else "")
        + (f" zero-{lay['zero']}" if lay["zero"] else "")
        + (f" tp-overlap {lay['tp_overlap']}" if lay["tp"] > 1 and lay["tp_overlap"] != "te" else "")
        + ("" if lay["overlap_grad_reduce"] else " no-overlap-grad-reduce")
        + ("" if r["method"] == "simulated" else "  (estimated)")
    )


def format_ranked_layouts(ranked: RankedLayouts, top: int = 10) -> str:
    """A training search: the price's source (when looked up), the counts, the software stack
    (and what its rules set on the best layout) and the rejections, then the ``top`` best
    layouts and the command that reproduces the best."""
    job, res = ranked.job, ranked.result
    lines = [ranked.price_note] if ranked.price_note else []
    lines.append(
        f"podsim search: {ranked.model} on {', '.join(map(str, job.gpus))} x {ranked.gpu}, global batch "
        f"{job.global_batch} x {job.seq_len} tokens: {res.evaluated:,} layouts evaluated "
        f"({res.evaluated - res.simulated:,} estimated, {res.simulated:,} simulated"
        + (f", {res.flow} also with the flow backend" if res.flow else "")
        + ")"
        + (f", {res.reused:,} results taken from {job.store}" if res.reused else "")
        + f"; {sum(res.rejected.values()):,} rejected"
    )
    if ranked.stack:
        lines.append(f"  stack      {stack_line(ranked.stack)}")
    for reason, n in res.rejected.most_common():
        lines.append(f"  rejected {n:>6,}: {reason}")
    cost = ranked.price is not None
    flow = res.flow > 0
    good = job.goodput
    if good:
        lines.append(_goodput_line(ranked))
    lines.append(
        f"\n  {'#':>3}  {'tokens/s':>12}  {'MFU':>6}  {'iter (s)':>9}"
        + (f"  {'flow (s)':>9}" if flow else "")
        + f"  {'mem (GiB)':>9}"
        + (f"  {'$/Mtok':>8}" if cost else "")
        + (f"  {'train (h)':>10}" if job.train_tokens else "")
        + (f"  {'goodput':>7}  {'fail (h)':>10}  {'p50 (h)':>10}" if good else "")
        + "  layout"
    )
    for i, r in enumerate(res.rows[:top], 1):
        fl = r.get("flow")
        lines.append(
            f"  {i:>3}  {r['tokens_per_s']:>12,.0f}  {r['mfu']:>6.3f}  {r['iteration_time_s']:>9.3f}  "
            + (f"{fl['iteration_time_s']:>9.3f}  " if fl else " " * 11 if flow else "")
            + f"{r['memory_peak_gib']:>9.1f}  "
            + (f"{r['cost_per_mtok_usd']:>8.3f}  " if cost else "")
            + (f"{r['time_to_train_h']:>10,.1f}  " if job.train_tokens else "")
            + (_goodput_cells(r) if good else "")
            + _layout_text(r)
        )
    if res.rows:
        lines.append(f"\n  reproduce the best: {res.rows[0]['command']}")
    return "\n".join(lines)


def _goodput_line(ranked: RankedLayouts) -> str:
    """What the goodput columns say, and what ranks the rows."""
    job = ranked.job
    days = next((r["goodput"]["days"] for r in ranked.rows if r.get("goodput")), job.days)
    length = f"{job.train_tokens:.4g} tokens" if job.train_tokens else f"{days:g} days of wall clock"
    return (
        f"  goodput    of each simulated layout at its own GPU count, a run of {length} "
        f"({job.checkpoint_mode} checkpoints, "
        + (f"every {job.checkpoint_interval:g} s" if job.checkpoint_interval else "each at its best interval")
        + "): goodput 0-1, fail (h) the expected time to train with failures, checkpoints and restarts, "
        "p50 (h) the Monte Carlo's median"
        + (f"\n  ranked by  {ranked.ranked_by}" if ranked.result.ranked_by_goodput else "")
    )


def _goodput_cells(r: dict[str, Any]) -> str:
    g = r.get("goodput")
    if not g:
        return f"{'-':>7}  {'-':>10}  {'-':>10}  " if r["method"] == "simulated" else " " * 33
    return f"{g['goodput']:>7.4f}  {g['expected_time_to_train_h']:>10,.1f}  {g['time_to_train_h']['p50']:>10,.1f}  "


def _ms(x: float | None) -> str:
    return f"{'-':>8}" if x is None else f"{1e3 * x:6.0f}ms"


def format_ranked_serving(ranked: RankedServing, top: int = 10) -> str:
    """A serving search: the counts and rejections, the price's source (when looked up), then
    the ``top`` best ways to serve (those that could not serve say why) and the command that
    reproduces the best."""
    job, res = ranked.job, ranked.result
    ok = [r for r in res.rows if not r["error"]]
    slos = " and ".join(
        f"{name} <= {v:g} s" for name, v in (("TTFT", job.slo_ttft), ("TPOT", job.slo_tpot)) if v is not None
    )
    lines = [
        f"podsim search: serving {ranked.model} on {', '.join(map(str, job.gpus))} x {ranked.gpu}, "
        f"{job.workload} ({job.requests} requests a run), {slos} for {100 * job.capacity_target:g}% of requests: "
        f"{res.evaluated:,} ways evaluated, {len(res.rows) - len(ok):,} could not serve; "
        f"{sum(res.rejected.values()):,} rejected"
    ]
    for reason, n in res.rejected.most_common():
        lines.append(f"  rejected {n:>6,}: {reason}")
    if ranked.price_note:
        lines.append(ranked.price_note)
    cost = ranked.price is not None
    lines.append(
        f"\n  {'#':>3}  {'req/s':>8}  {'req/s/GPU':>9}  {'tok/s/GPU':>9}  {'TTFT p99':>8}  {'TPOT p99':>8}"
        + (f"  {'$/Mtok':>8}" if cost else "")
        + "  serving"
    )
    for i, r in enumerate(res.rows[:top], 1):
        desc = (
            f"gpus {r['gpus']} tp {r['tp']} pp {r['pp']}"
            + (f" ep {r['ep']}" if r["ep"] > 1 else "")
            + (f" replicas {r['replicas']}" if r["pd"] == "off" else f" pd {r['pd']}")
            + f" {r['scheduler']}"
            + (f" chunk {r['chunk']}" if r["chunk"] is not None else "")
        )
        if r["error"]:
            lines.append(
                f"  {i:>3}  {'-':>8}  {'-':>9}  {'-':>9}  {'-':>8}  {'-':>8}"
                + (f"  {'-':>8}" if cost else "")
                + f"  {desc}: {r['error']}"
            )
            continue
        lines.append(
            f"  {i:>3}  {r['capacity_qps']:>8.3g}  {r['capacity_qps_per_gpu']:>9.3g}  "
            f"{r['tokens_per_s_per_gpu']:>9,.0f}  {_ms(r['ttft_p99_s'])}  {_ms(r['tpot_p99_s'])}"
            + (
                f"  {r['cost_per_mtok_usd']:>8.3f}"
                if cost and r["cost_per_mtok_usd"] is not None
                else f"  {'-':>8}"
                if cost
                else ""
            )
            + f"  {desc}"
        )
    shaky = sum(1 for r in res.rows[:top] if not r["error"] and not r["steady"])
    if shaky:
        lines.append(
            f"\n  note: {shaky} of these rows' runs at capacity end before their queues can fill (arrivals "
            "over less than 10 mean end-to-end latencies): their capacity is optimistic; give more --requests"
        )
    if ok:
        lines.append(f"\n  reproduce the best: {ok[0]['command']}")
    return "\n".join(lines)
