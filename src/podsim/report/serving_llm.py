"""What ``podsim serve-llm`` prints: a run's summary (latencies in ms, rates per second), or a
capacity search's probes and capacity (requests/s), and the cost of a million output tokens
(US dollars) at a GPU-hour price."""

from __future__ import annotations

from typing import Any

from ..serving.llm.metrics import LLMServeResult
from .infer import calibration_line


def format_serve_llm(outcome: Any, usd_per_gpu_hour: float | None) -> str:
    """The summary of a :class:`~podsim.api.serve_llm.ServeLLMOutcome`."""
    job, serving = outcome.job, outcome.serving
    cap = outcome.capacity
    cal = calibration_line(outcome.calibration)
    if outcome.stack:
        cal = "\n".join(
            x
            for x in (
                cal,
                f"  stack      {outcome.stack['name']} (host overhead per step: "
                f"{outcome.stack['values'].get('host_overhead_ms')})",
            )
            if x
        )
    if cap is None:
        lines = [format_serve_llm_run(outcome.result), *([cal] if cal else [])]
        if usd_per_gpu_hour is not None:
            cost = outcome.cost(usd_per_gpu_hour)["cost_per_mtok_usd"]
            if cost is not None:
                lines.append(
                    f"  cost          ${cost:.4g} per million output tokens ({serving.gpus} GPUs "
                    f"at ${usd_per_gpu_hour:g} a GPU-hour)"
                )
        return "\n".join(lines)
    target = job.service.capacity_target
    lines = [
        f"podsim serve-llm --find-capacity: {serving.describe()}, {len(outcome.requests)} requests a run, "
        f"{job.engine.scheduler} scheduler, {job.engine.router} router"
    ]
    if cal:
        lines.append(cal)
    for q, a in cap.probes:
        lines.append(f"  {q:10.4g} req/s   SLO met by {100 * a:5.1f}%   {'meets' if a >= target else '-'}")
    if cap.bound == "upper":
        lines.append(
            f"  capacity: at most {cap.qps:.4g} req/s (an upper bound: its run was too short to fill the queues, "
            f"so the {100 * target:g}% SLO attainment it found is optimistic)"
        )
    else:
        lines.append(
            f"  capacity: {cap.qps:.4g} req/s meet the SLOs for {100 * target:g}% of requests"
            + (f" ({cap.upper_qps:.4g} req/s do not)" if cap.upper_qps is not None else "")
        )
    note = outcome.transient_note()
    if note:
        lines.append(f"  note: at capacity, {note}")
    lines += [f"  note: {n}" for n in outcome.notes]
    if usd_per_gpu_hour is not None:
        doc = outcome.cost(usd_per_gpu_hour)
        if doc["cost_per_mtok_usd"] is not None:
            lines.append(
                f"  cost: ${doc['cost_per_mtok_usd']:.4g} per million output tokens at capacity "
                f"({outcome.tokens_per_s:,.0f} output tokens/s on {serving.gpus} GPUs at "
                f"${usd_per_gpu_hour:g} a GPU-hour)"
            )
    return "\n".join(lines)


def serve_llm_document(outcome: Any, usd_per_gpu_hour: float | None) -> dict[str, Any]:
    """The JSON document of a serve-llm outcome (fields: docs/serving-llm.md): the run's, or the
    capacity search's, with the cost fields when a GPU-hour price is given."""
    doc = outcome.capacity.to_dict() if outcome.capacity is not None else outcome.result.to_dict()
    if usd_per_gpu_hour is not None:
        doc.update(outcome.cost(usd_per_gpu_hour))
    doc["calibration"] = outcome.calibration
    doc["stack"] = outcome.stack
    return doc


#: replicas the summary has a line for each; the others share one
REPLICA_LINES = 16


def format_serve_llm_run(r: LLMServeResult) -> str:
    """Lines for the terminal: what ran, latencies (ms), rates, SLO attainment, replica use."""
    d = r.stats()

    def ms(x: float | None) -> str:
        return f"{'-':>9}" if x is None else f"{x * 1e3:9.1f}"

    info = r.info
    head = (
        f"podsim serve-llm: {r.num_requests} requests on {info.get('replicas_text', len(r.replicas))} "
        f"({info.get('scheduler', '?')} scheduler, {info.get('router', '?')} router)"
    )
    lines = [
        head,
        "",
        "  latency (ms)      mean       p50       p90       p99",
        "  ------------  --------  --------  --------  --------",
    ]
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end to end")):
        lines.append(
            f"  {label:<12}" + "".join(ms(d[f"{name}_{k}_s"]) + " " for k in ("mean", "p50", "p90", "p99")).rstrip()
        )
    span = r.span_s
    tps, rps = d["tokens_per_s"], d["requests_per_s"]
    lines.append("")
    lines.append(
        f"  throughput    {tps or 0:,.1f} output tokens/s, {rps or 0:.3f} requests/s over {span:,.1f} s"
        + (f", MFU {100 * r.mfu:.1f}%" if r.mfu is not None else "")
    )
    att = d["slo_attainment"]
    if att is not None:
        slos = [f"TTFT <= {r.slo_ttft_s:g} s" for _ in [0] if r.slo_ttft_s is not None] + [
            f"TPOT <= {r.slo_tpot_s:g} s" for _ in [0] if r.slo_tpot_s is not None
        ]
        lines.append(f"  SLO met       {100 * att:.1f}% of requests ({' and '.join(slos)})")
    swaps = sum(rs.swaps for rs in r.replicas)
    lines.append(f"  preemptions   {r.total_preemptions:,}" + (f" ({swaps:,} by swap)" if swaps else ""))
    shown = r.replicas if len(r.replicas) <= REPLICA_LINES + 1 else r.replicas[:REPLICA_LINES]
    for rs in shown:
        peak = max((u for _, u in rs.kv_samples), default=0)
        util = rs.busy_ns / 1e9 / span if span > 0 else 0.0
        role = "" if rs.role == "mixed" else f" ({rs.role})"
        lines.append(
            f"  replica {rs.index}{role}: {rs.steps:,} steps, busy {100 * min(util, 1.0):.1f}%, KV peak "
            f"{100 * peak / rs.blocks:.1f}% of {rs.blocks:,} blocks, {rs.preemptions:,} preemptions"
        )
    rest = r.replicas[len(shown) :]
    for role in dict.fromkeys(x.role for x in rest):  # the others: a line a role
        group = [x for x in rest if x.role == role]
        busy = [min(x.busy_ns / 1e9 / span, 1.0) if span > 0 else 0.0 for x in group]
        peak = max(max((u for _, u in x.kv_samples), default=0) / x.blocks for x in group)
        lines.append(
            f"  replicas {group[0].index}-{group[-1].index}{'' if role == 'mixed' else f' ({role})'}: "
            f"{sum(x.steps for x in group):,} steps, busy {100 * min(busy):.1f}-{100 * max(busy):.1f}%, KV peak "
            f"up to {100 * peak:.1f}%, {sum(x.preemptions for x in group):,} preemptions (--json has each)"
        )
    notes = info.get("notes")
    lines.extend(f"  note: {n}" for n in (notes if isinstance(notes, list) else []))
    return "\n".join(lines)
