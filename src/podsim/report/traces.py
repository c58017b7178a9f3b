"""What the trace subcommands print: ``podsim inspect`` (Chakra trace summaries), ``podsim trace``
(a capture), ``podsim convert`` (what was written) and the per-layer section of ``podsim
simulate``.  One formatter per result type; none of them reads or simulates anything."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..fileio import atomic_write_text
from .layers import LayerRow, format_layers

if TYPE_CHECKING:  # the result types, from the rooms that make them
    from ..api.convert import Converted
    from ..capture import Capture, RankCapture
    from ..formats.chakra.inspect import TraceSummary


def format_layer_section(rows: list[LayerRow]) -> str:
    """The per-layer section after a simulation's summary: rank 0's 15 longest layers (ms)."""
    return f"\n  per layer, rank 0 ({len(rows)} layers; the 15 longest by compute + exposed comm):\n" + format_layers(
        rows
    )


def format_trace_summaries(n: int, sums: list[TraceSummary]) -> str:
    """``podsim inspect``: each summarized rank file's nodes by type, dependencies, durations
    (us, Chakra's unit) and communication bytes, then how many rank files there are."""
    lines = []
    for s in sums:
        lines.append(f"{s.path}  (schema {s.schema or '?'})")
        lines.append(f"  nodes        {s.nodes:,}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(s.by_type.items())))
        lines.append(f"  CPU ops      {s.cpu_ops:,}")
        if s.collectives:
            lines.append("  collectives  " + ", ".join(f"{k} {v}" for k, v in sorted(s.collectives.items())))
        lines.append(f"  deps         {s.data_deps:,} data, {s.ctrl_deps:,} control")
        lines.append(f"  durations    {s.total_duration_us:,} us in all; {s.zero_duration:,} nodes of 0 us")
        lines.append(f"  comm bytes   {s.comm_bytes:,}")
    if n > len(sums):
        lines.append(f"... and {n - len(sums)} more rank files ({n} in all)")
    else:
        lines.append(f"{n} rank file{'s' if n != 1 else ''}")
    return "\n".join(lines)


def trace_summaries_json(n: int, sums: list[TraceSummary]) -> dict[str, Any]:
    """``podsim inspect --json``: ``rank_files`` and the ``summarized`` ones (docs/outputs.md)."""
    return {"rank_files": n, "summarized": [asdict(s) for s in sums]}


def format_capture(c: Capture, batch_size: int) -> str:
    """``podsim trace``: the profiled step, the files written, how to replay and scale it."""
    procs = f" x {c.nproc} processes (DDP)" if c.nproc > 1 else ""
    lines = [f"podsim trace: {c.model} on {c.device}{procs}, batch {batch_size}: profiled step {c.step_ms:.3f} ms"]
    if c.nproc > 1:
        lines.append(
            f"  wrote {c.folder}/kineto.<rank>.json, et.<rank>.json, {c.workload_prefix}.<rank>.et, "
            f"capture.json for ranks 0-{c.nproc - 1}"
        )
    else:
        lines.append(f"  wrote {c.kineto}, {c.execution_trace}, {c.workload_prefix}.0.et, {c.folder / 'capture.json'}")
    lines.append(f"  replay it:   podsim simulate --workload-configuration {c.folder} --cluster dgx-h100")
    lines.append(f"  scale it:    podsim simulate --pytorch {c.folder} --gpus 4 --parallel ddp|tp|pp")
    return "\n".join(lines)


def format_rank_capture(c: RankCapture, model: str, batch_size: int) -> str:
    """``podsim trace --world-size N``: the ranks traced for the job, their step times (ms), the
    files written and how to simulate (and, for fake ranks, rescale) it."""
    how = "on the fake process group" if c.fake else f"for real in {c.world_size} processes (gloo)"
    lines = [
        f"podsim trace: {model}, {c.world_size} ranks ({c.layout.spec()}, dp={c.layout.dp}), batch "
        f"{batch_size} a rank: traced {len(c.ranks_traced)} of {c.world_size} ranks {how} in {c.trace_s:.1f} s"
    ]
    for r in c.ranks_traced[:8]:
        coords = ", ".join(f"{d}={v}" for d, v in c.layout.coords(r).items())
        lines.append(f"  rank {r:>5} ({coords}): profiled step {c.step_ms[r]:.3f} ms")
    if len(c.ranks_traced) > 8:
        lines.append(f"  ... and {len(c.ranks_traced) - 8} more")
    lines.append(f"  wrote {c.folder}/kineto.<rank>.json, comms.<rank>.json, capture.json")
    lines.append(f"  simulate it: podsim simulate --workload-configuration {c.folder} --cluster dgx-h100")
    if c.fake:
        lines.append(
            f"  rescale it:  podsim simulate --workload-configuration {c.folder} --cluster dgx-h100 --gpus "
            f"{c.world_size * 2}   # dp={c.layout.dp * 2}"
        )
    return "\n".join(lines)


def rank_capture_json(c: RankCapture) -> dict[str, Any]:
    """``podsim trace --world-size N --json``: what was traced (docs/traces.md)."""
    return {
        "world_size": c.world_size,
        "layout": c.layout.to_json(),
        "ranks_traced": c.ranks_traced,
        "ranks_traced_count": len(c.ranks_traced),
        "fake_ranks": c.fake,
        "trace_s": round(c.trace_s, 3),
        "step_ms_per_rank": {str(r): v for r, v in c.step_ms.items()},
        "folder": str(c.folder),
    }


def format_converted(c: Converted) -> str:
    """``podsim convert``: what was read and the files written."""
    if c.format == "triosim":
        trace, tensors = c.paths[:2]
        return (
            f"podsim convert: {c.source}: {c.ops} ops of one GPU's step -> {trace} and {tensors} "
            f"(TrioSim's format; run it with podsim simulate --triosim {c.output})"
        )
    if c.format == "chakra":
        ets = [p for p in c.paths if p.endswith(".et")]
        groups = [p for p in c.paths if not p.endswith(".et")]
        return (
            f"podsim convert: {c.source}: {len(ets)} Chakra ET file{'s' if len(ets) != 1 else ''} "
            f"{c.output}.<rank>.et" + (f" and {groups[0]}" if groups else "")
        )
    what = f"{c.ops} ops of one GPU's step" if c.writes == "step" else "the workload"
    return f"podsim convert: {c.source}: {what} -> {', '.join(c.paths)} ({c.format} format)"


def write_json_doc(doc: dict[str, Any], path: str) -> None:
    """Write ``doc`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
