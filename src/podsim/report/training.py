"""What ``podsim llm`` prints: the iteration's summary, the kernel table and the lists of
models and GPUs (times in s or us, FLOP/s in 10^12, memory in GiB)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..llm.kernel_report import SECTIONS
from .faults import fault_lines


def stack_line(stack: dict) -> str:
    """The stack a result ran on, and what its rules set: ``torchtitan (preset; set zero 3,
    tp_overlap none)``."""
    origin = "preset" if stack.get("origin") == "preset" else f"file {stack.get('origin')}"
    applied = stack.get("applied") or {}
    what = ", ".join(f"{k} {v}" for k, v in applied.items())
    return f"{stack.get('name')} ({origin}" + (f"; set {what})" if what else ")")


def format_training(r: Any, backend: str) -> str:
    """The summary of a :class:`~podsim.llm.training.TrainingResult`: layout, iteration time,
    throughput, MFU, memory and where the time went, then its notes and warnings."""
    d = r.to_dict()
    b = d["breakdown"]
    lay = r.layout
    lines = [
        f"podsim llm: {r.model.name} on {lay.gpus} x {r.gpu.name} ({d['cluster']}, {backend})",
        f"  compute    {r.compute_model}",
    ]
    cal = r.calibration
    lines.append(f"  calibration {cal['status']}: {cal['source']}")
    if r.stack:
        lines.append(f"  stack      {stack_line(r.stack)}")
    lines.append(
        f"  layout     TP {lay.tp} x PP {lay.pp} x DP {lay.dp}"
        + (f" x CP {lay.cp}" if lay.cp > 1 else "")
        + (f", EP {lay.ep} x ETP {lay.expert_tp} x EDP {lay.edp}" if r.model.moe else "")
        + (f", VPP {lay.vpp}" if lay.vpp > 1 else "")
        + f"; batch {lay.global_batch} x {lay.seq_len} tokens, micro-batch {lay.micro_batch} "
        f"({lay.num_microbatches} per pipeline); recompute {lay.recompute}" + (", SP" if lay.sequence_parallel else "")
    )
    rows = [
        ("iteration time", f"{d['iteration_time_s']:.4f} s"),
        ("model TFLOP/s per GPU", f"{d['model_tflops_per_gpu']:.1f}"),
        ("  causal count (NeMo's)", f"{d['model_tflops_per_gpu_causal']:.1f}"),
        ("tokens per second per GPU", f"{d['tokens_per_s'] / lay.gpus:,.0f}"),
        ("MFU", f"{100 * d['mfu']:.1f} %"),
        ("tokens per second", f"{d['tokens_per_s']:,.0f}"),
        (
            "memory peak per GPU",
            f"{d['memory_peak_gib']:.2f} GiB of {r.gpu.memory_gib:g}" + ("" if d["memory_fits"] else " DOES NOT FIT"),
        ),
        ("  compute", f"{b['compute_s']:.4f} s"),
        ("  exposed communication", f"{b['exposed_comm_s']:.4f} s"),
        ("  pipeline bubble", f"{b['bubble_s']:.4f} s"),
        ("  other", f"{b['other_s']:.4f} s"),
    ]
    lines += [f"  {k:<24} {v:>20}" for k, v in rows]
    lines += fault_lines(d.get("faults") or {}, unit_s=True)
    lines += [f"  warning: {note}" if "does not fit" in note else f"  note: {note}" for note in d["notes"]]
    return "\n".join(lines)


def format_catalog(models: Iterable[tuple[str, Any]], gpus: Iterable[tuple[str, Any]]) -> str:
    """The zoo's models (parameters in billions, layers, hidden size, experts) and the GPUs
    (memory in GiB, bf16 peak in TFLOP/s, architecture: the key of a stack's per-architecture
    values): what ``podsim llm --list`` prints."""
    lines = ["models (--model):"]
    for name, m in models:
        kind = f"MoE {m.experts}x, top-{m.top_k}" if m.experts else "dense"
        lines.append(
            f"  {name:<20} {m.total_params() / 1e9:>8.1f} B params  {m.layers:>3} layers  hidden {m.hidden:>5}  {kind}"
        )
    lines.append("GPUs (--gpu):")
    for key, g in gpus:
        lines.append(
            f"  {key:<20} {g.name:<22} {g.memory_gib:>6g} GiB  bf16 {g.peak_tflops.get('bf16', 0):>7g} TFLOP/s"
            f"  {g.architecture}"
        )
    return "\n".join(lines)


def format_kernels(rows: dict[str, list[dict]], host_ns: float) -> str:
    """The kernel table as text: one block per section, times in us, with each kernel's share
    of its section."""
    lines = []
    for sec in SECTIONS:
        rs = rows.get(sec) or []
        if not rs:
            continue
        total = sum(r["step_us"] for r in rs)
        lines.append(
            f"\n{sec.replace('_', ' ')} (one GPU, one micro-batch"
            f"{'' if sec != 'optimizer' else ', once per iteration'}): "
            f"{total:,.1f} us in {len(rs)} kernels"
        )
        lines.append(
            f"  {'kernel':<34} {'shape':<26} {'dtype':<5} {'GFLOP':>9} {'MB':>9} {'us':>9} "
            f"{'in step us':>10} {'share':>6} {'TFLOP/s':>8} {'GB/s':>7}  overlapped collective"
        )
        for r in rs:
            share = 100 * r["step_us"] / total if total else 0.0
            lines.append(
                f"  {r['name'][:34]:<34} {r['shape'][:26]:<26} {r['dtype']:<5} {r['gflop']:>9.2f} "
                f"{r['mbytes']:>9.2f} {r['time_us']:>9.1f} {r['step_us']:>10.1f} {share:>5.1f}% "
                f"{r['tflops']:>8.0f} {r['gbps']:>7.0f}  {r['collective']}"
            )
    lines.append(
        f"\n(a layer pass lasts at least its kernel launches x {host_ns / 1e3:g} us of host time; "
        "'in step' includes an overlapped TP collective's interference)"
    )
    return "\n".join(lines).lstrip("\n")
