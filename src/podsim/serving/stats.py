"""Serving statistics and their JSON document (its text summary, the JSON file, the trace and
the latency CDF: :mod:`podsim.report.serving`).

JSON fields (``podsim serve --json``), times in seconds:

* ``num_requests``, ``completed``, ``dropped``; ``latency_mean_s``, ``latency_p50_s``,
  ``latency_p90_s``, ``latency_p99_s`` (completed requests); ``slo_attainment`` (the fraction of
  all requests, dropped ones included, that finished within their model's SLO: AlpaServe's
  goodput); ``throughput_rps`` (completed requests over the time from the first arrival to the
  last finish); ``makespan_s``;
* ``per_model: {model_id: {service, requests, completed, latency_mean_s, latency_p50_s,
  latency_p90_s, latency_p99_s, slo_s, slo_attainment}}``;
* ``gpus: [{node, gpu, busy_s, utilization}]`` (busy time over that same span);
* ``requests: [{id, model_id, arrival_s, finish_s, latency_s, executor}]`` (``finish_s`` and
  ``latency_s`` null for a dropped request; ``executor``: the placement entry that served it).

Percentiles interpolate linearly between the nearest ranks, as numpy's ``quantile`` and DLSIM's
statistics do (the p99 of 143 requests sits at rank 0.99 x 142 = 140.58 counting from 0: 58% of
the way from the 141st value to the 142nd).
"""

from __future__ import annotations

import math

from ..intervals import union_length
from .simulator import ServeResult


def percentile(sorted_values: list[float], q: float) -> float:
    """Percentile ``q`` (0-100) of ascending values, linearly interpolated between the two
    nearest ranks (numpy's default quantile, which DLSIM's statistics use); NaN for none."""
    if not sorted_values:
        return math.nan
    pos = q / 100 * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def latency_stats(latencies_s: list[float]) -> dict[str, float | None]:
    """Mean, p50, p90 and p99 (s; None without requests)."""
    s = sorted(latencies_s)
    vals = {
        "latency_mean_s": sum(s) / len(s) if s else math.nan,
        "latency_p50_s": percentile(s, 50),
        "latency_p90_s": percentile(s, 90),
        "latency_p99_s": percentile(s, 99),
    }
    return {k: (None if math.isnan(v) else v) for k, v in vals.items()}


def summarize(r: ServeResult) -> dict[str, object]:
    """The JSON document of a serving run (fields in the module docstring)."""
    w = r.workload
    n = len(r.arrival_ns)
    lat_ns = [None if f is None else f - a for f, a in zip(r.finish_ns, r.arrival_ns)]
    good = [x is not None and x <= w.slos_s[m] * 1e9 for x, m in zip(lat_ns, r.model_ids)]
    completed = sum(1 for x in lat_ns if x is not None)
    span = max(r.makespan_ns - min(r.arrival_ns, default=0), 1)
    services = r.placement.services()
    per_model: dict[str, object] = {}
    for m in range(w.num_models):
        idx = [i for i in range(n) if r.model_ids[i] == m]
        per_model[str(m)] = {
            "service": services[m] if m < len(services) else None,
            "requests": len(idx),
            "completed": sum(1 for i in idx if lat_ns[i] is not None),
            **latency_stats(r.latencies_s(m)),
            "slo_s": w.slos_s[m] if math.isfinite(w.slos_s[m]) else None,
            "slo_attainment": sum(good[i] for i in idx) / len(idx) if idx else None,
        }
    gpus = []
    for g, sl in sorted(r.slices.items()):
        busy = union_length([(a, b) for _, _, a, b in sl])
        gpus.append(
            {
                "node": g // r.cluster.gpus_per_node,
                "gpu": g % r.cluster.gpus_per_node,
                "busy_s": busy / 1e9,
                "utilization": busy / span,
            }
        )
    return {
        "workload": w.name,
        "placement": r.placement.source,
        "scheduler": r.scheduler,
        "num_requests": n,
        "completed": completed,
        "dropped": n - completed,
        **latency_stats(r.latencies_s()),
        "slo_attainment": sum(good) / n if n else None,
        "throughput_rps": completed / (span / 1e9),
        "makespan_s": r.makespan_ns / 1e9,
        "per_model": per_model,
        "gpus": gpus,
        "notes": list(r.notes),
        "requests": [
            {
                "id": i,
                "model_id": r.model_ids[i],
                "arrival_s": r.arrival_ns[i] / 1e9,
                "finish_s": None if r.finish_ns[i] is None else r.finish_ns[i] / 1e9,
                "latency_s": None if lat_ns[i] is None else lat_ns[i] / 1e9,
                "executor": r.executor_of[i],
            }
            for i in range(n)
        ],
    }
