"""What ``podsim serve-llm`` prints: a run's summary (latencies in ms, rates per second), or a
capacity search's probes and capacity (requests/s), and the cost of a million output tokens
(US dollars) at a GPU-hour price."""

from __future__ import annotations

from typing import Any

from ..serving.llm.metrics import format_summary


def format_serve_llm(outcome: Any, usd_per_gpu_hour: float | None) -> str:
    """The summary of a :class:`~podsim.api.serve_llm.ServeLLMOutcome`."""
    job, serving = outcome.job, outcome.serving
    cap = outcome.capacity
    if cap is None:
        lines = [format_summary(outcome.result)]
        if usd_per_gpu_hour is not None:
            cost = outcome.cost(usd_per_gpu_hour)["cost_per_mtok_usd"]
            if cost is not None:
                lines.append(f"  cost          ${cost:.4g} per million output tokens ({serving.gpus} GPUs "
                             f"at ${usd_per_gpu_hour:g} a GPU-hour)")
        return "\n".join(lines)
    target = job.service.capacity_target
    lines = [f"podsim serve-llm --find-capacity: {serving.describe()}, {len(outcome.requests)} requests a run, "
             f"{job.engine.scheduler} scheduler, {job.engine.router} router"]
    for q, a in cap.probes:
        lines.append(f"  {q:10.4g} req/s   SLO met by {100 * a:5.1f}%   {'meets' if a >= target else '-'}")
    lines.append(f"  capacity: {cap.qps:.4g} req/s meet the SLOs for {100 * target:g}% of requests"
                 + (f" ({cap.upper_qps:.4g} req/s do not)" if cap.upper_qps is not None else ""))
    note = outcome.transient_note()
    if note:
        lines.append(f"  note: at capacity, {note}")
    if usd_per_gpu_hour is not None:
        doc = outcome.cost(usd_per_gpu_hour)
        if doc["cost_per_mtok_usd"] is not None:
            lines.append(f"  cost: ${doc['cost_per_mtok_usd']:.4g} per million output tokens at capacity "
                         f"({outcome.tokens_per_s:,.0f} output tokens/s on {serving.gpus} GPUs at "
                         f"${usd_per_gpu_hour:g} a GPU-hour)")
    return "\n".join(lines)


def serve_llm_document(outcome: Any, usd_per_gpu_hour: float | None) -> dict[str, Any]:
    """The JSON document of a serve-llm outcome (fields: docs/serving-llm.md): the run's, or the
    capacity search's, with the cost fields when a GPU-hour price is given."""
    doc = outcome.capacity.to_dict() if outcome.capacity is not None else outcome.result.to_dict()
    if usd_per_gpu_hour is not None:
        doc.update(outcome.cost(usd_per_gpu_hour))
    return doc
