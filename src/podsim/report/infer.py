"""What ``podsim infer`` prints: prefill and decode step times (ms), end to end (s), memory per
GPU (GiB) and where each step's time goes (shares)."""

from __future__ import annotations

from typing import Any


def calibration_line(cal: dict) -> str | None:
    """The summary's line on a derived calibration (a GPU without a fit of its own runs on a
    sibling's: the times rest on that), None for a fitted or measured one."""
    return f"  calibration derived: {cal['source']}" if cal["status"] == "derived" else None


def format_infer(outcome: Any) -> str:
    """The summary of an :class:`~podsim.api.infer.InferOutcome`."""
    r, timer = outcome.report, outcome.timer
    profile = outcome.job.replica.profile
    lines = [
        f"podsim infer: {r.model} on {r.tp * r.pp} x {r.gpu} (tp {r.tp}, pp {r.pp}, ep {r.ep}, {r.precision}), "
        f"batch {r.batch} x {r.prompt_tokens} prompt + {r.output_tokens} output tokens"
    ]
    if profile:
        lines.append(
            f"  step times from the tables in {profile} (Vidur's layout); memory, logits and host: podsim's model"
        )
    line = calibration_line(outcome.calibration)
    if line:
        lines.append(line)
    if outcome.stack:
        lines.append(
            f"  stack      {outcome.stack['name']} (host overhead per step: "
            f"{outcome.stack['values'].get('host_overhead_ms')}; --host-overhead-ms given wins)"
        )
    lines.append(f"  prefill (time to first token)  {r.prefill_s * 1e3:10.2f} ms")
    lines.append(
        f"  decode step, mean               {r.decode_step_mean_s * 1e3:10.3f} ms"
        + (f"   ({r.batch / r.decode_step_mean_s:,.0f} output tokens/s)" if r.decode_step_mean_s else "")
    )
    lines.append(f"  end to end                      {r.e2e_s:10.3f} s")
    lines.append(
        f"  memory per GPU: weights {r.weights_gib_per_gpu:.1f} GiB, KV cache {r.kv_cache_gib:.2f} GiB, "
        f"in all {r.memory_gib_per_gpu:.1f} GiB"
        + (
            ""
            if r.memory_fits
            else f"  -- does not fit in {timer.memory_utilization:.0%} of {timer.gpu.memory_gib:g} GiB"
        )
    )
    for what, parts in (("prefill", r.prefill_parts_s), ("decode", r.decode_parts_s)):
        total = sum(parts.values()) or 1.0
        lines.append(f"  {what:<8}" + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts.items() if v))
    return "\n".join(lines)
