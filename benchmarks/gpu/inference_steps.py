#!/usr/bin/env python3
"""Measure LLM serving steps (prefill, decode, mixed) on the GPU it finds; write a CSV.

What it runs (``podsim.examples.llama.ServingStep``: a serving engine's forward step over a
static KV cache, random weights, BF16, no download), one step shape at a time, most valuable
first, until ``--budget-s`` is spent:

* a Llama 3 8B shape with all 32 layers, and Llama 3 70B's layer shape cut to the layers that
  fit (the count is in each row);
* prefill of batches of prompts (128-8,192 tokens, batch 1-64); decode steps (batch 1-256,
  context 512-8,192) where their KV cache fits; mixed steps as chunked-prefill schedulers build
  them (a prefill chunk and decodes filling a token budget of 2,048 or 8,192);
* each eager and replayed from a CUDA graph captured for that shape (as vLLM captures its decode
  steps); SDPA's flash and cuDNN backends where they differ.

For each: the median synchronous step (an engine reads its sampled tokens every step), the GPU's
own time (CUDA events), a profiled step (``podsim.capture.breakdown``: the device's busy and
idle time, the host's time to issue the step, device time by kernel category), the peak
memory.  Rows are written after every shape (atomically); a shape that fails is a row with its
``status``.  Provenance as ``#`` lines.  Columns: docs/serving-llm.md, "Measured serving steps".

    python benchmarks/gpu/inference_steps.py --out "$OUT"       # the GPU machine: $OUT/inference_steps/<gpu>.csv
    python benchmarks/gpu/inference_steps.py --quick --out /tmp/serve.csv   # CPU, tiny shapes

``--quick`` runs the same code path on tiny shapes (on the CPU there are no CUDA graphs: those
rows say so); the tests run it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import (
    GIB,
    add_arguments,
    failure_status,
    open_device,
    output_path,
    profiled_breakdown,
    provenance,
    settle_arguments,  # noqa: E402  (puts the checkout's podsim on the path)
)

from podsim.capture.breakdown import CATEGORIES  # noqa: E402
from podsim.compute.steps import gpu_key_for_device  # noqa: E402
from podsim.examples.llama import SHAPES, LlamaShape, ServingStep, build  # noqa: E402
from podsim.serving.llm.measured_steps import write_serving_steps  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """One measured step shape."""

    kind: str  #: prefill | decode | mixed
    batch: int  #: prefill prompts or decode sequences (mixed: its decodes)
    tokens: int = 0  #: prefill: tokens a prompt; mixed: the prefill chunk
    context: int = 0  #: decode / mixed: cached tokens of each decoding sequence
    mode: str = "eager"  #: eager | graph
    attention: str = "flash"

    def parts(self) -> list[tuple[str, int, int, int]]:
        if self.kind == "prefill":
            return [("prefill", self.batch, self.tokens, 0)]
        if self.kind == "decode":
            return [("decode", self.batch, 1, self.context)]
        return [("prefill", 1, self.tokens, 0), ("decode", self.batch, 1, self.context)]

    @property
    def sequences(self) -> int:
        return self.batch + (1 if self.kind == "mixed" else 0)

    @property
    def max_context(self) -> int:
        return max(self.tokens, self.context + 1)

    def label(self) -> str:
        what = {
            "prefill": f"b{self.batch} x {self.tokens} tok",
            "decode": f"b{self.batch} ctx {self.context}",
            "mixed": f"chunk {self.tokens} + {self.batch} decodes ctx {self.context}",
        }[self.kind]
        return f"{self.kind} {what} {self.mode} {self.attention}"


def kv_bytes(shape: LlamaShape, s: Shape) -> float:
    """The static KV cache of a step shape: its sequences x its longest context, keys and values."""
    return 2.0 * 2 * shape.layers * shape.kv_heads * shape.head_dim * s.sequences * s.max_context


def step_memory(shape: LlamaShape, s: Shape) -> float:
    """Bytes a step needs, roughly: bf16 weights, the KV cache, the step's activations (~12 h
    bf16 bytes a token, the MLP's 3 f) and fp32 logits of each sequence."""
    tokens = s.batch * s.tokens if s.kind == "prefill" else s.batch + s.tokens
    act = tokens * (12 * shape.hidden + 3 * shape.ffn_hidden) * 2.0
    attn = s.batch * shape.heads * s.tokens * 4.0 if s.kind == "prefill" else 0.0
    return 2.0 * shape.params() + kv_bytes(shape, s) + act + attn + s.sequences * shape.vocab * 6.0


def plan(quick: bool) -> list[Shape]:
    """The step shapes in the order they run (most valuable first)."""
    if quick:
        return [
            Shape("prefill", 2, 32),
            Shape("decode", 4, context=48),
            Shape("decode", 4, context=48, mode="graph"),
            Shape("mixed", 3, 32, 48),
            Shape("prefill", 2, 32, attention="cudnn"),
        ]
    out: list[Shape] = []
    for b, c in ((1, 2048), (32, 2048), (128, 2048), (8, 512), (64, 8192 // 4), (256, 512), (1, 8192), (32, 8192)):
        out += [Shape("decode", b, context=c, mode="graph"), Shape("decode", b, context=c)]
    out += [
        Shape("prefill", b, p) for b, p in ((1, 2048), (1, 512), (1, 8192), (4, 2048), (16, 512), (64, 128), (1, 128))
    ]
    out += [Shape("mixed", d, 2048 - d, 2048) for d in (32,)] + [Shape("mixed", d, 8192 - d, 2048) for d in (64,)]
    out += [Shape("mixed", 32, 2048 - 32, 2048, mode="graph")]
    out += [Shape("prefill", 1, p, attention="cudnn") for p in (2048, 8192)]
    out += [
        Shape("decode", 32, context=2048, attention="cudnn"),
        Shape("decode", 32, context=2048, mode="graph", attention="cudnn"),
    ]
    out += [Shape("decode", b, context=2048, mode=m) for b in (4, 16) for m in ("graph", "eager")]
    return out


#: the models measured: (shape, a step-shape filter); the 70B layer shape gets the layers that fit
def models(memory: float, quick: bool) -> list[LlamaShape]:
    if quick:
        return [SHAPES["tiny"]]
    big = SHAPES["llama3-70b"]
    layers = max(1, min(8, int(0.35 * memory / (2.0 * (big.with_layers(1).params() - 2 * big.vocab * big.hidden)))))
    return [SHAPES["llama3-8b"], big.with_layers(layers)]


def measure(torch: Any, model: Any, s: Shape, device: str, steps: int, folder: Path) -> dict:
    """One step shape's row (the measured columns)."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    step = ServingStep(model, s.parts(), s.max_context)
    ctx: Any = contextlib.nullcontext()
    if s.attention == "cudnn" or cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ctx = sdpa_kernel([SDPBackend.CUDNN_ATTENTION if s.attention == "cudnn" else SDPBackend.FLASH_ATTENTION])
    row: dict[str, Any] = {"status": "ok"}
    with ctx:
        if s.mode == "graph":
            step.capture()
        for _ in range(3):
            step.replay()
        walls, gpus = [], []
        for _ in range(steps):
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                a.record()
                out = step.replay()
                b.record()
                out.cpu()  # the engine reads its sampled tokens: the step ends with a synchronisation
                walls.append((time.perf_counter() - t0) * 1e3)
                gpus.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                step.replay().cpu()
                walls.append((time.perf_counter() - t0) * 1e3)
        b = profiled_breakdown(lambda s=step: s.replay().cpu(), cuda, folder)
    row.update(
        step_ms=round(statistics.median(walls), 4),
        step_ms_min=round(min(walls), 4),
        step_ms_max=round(max(walls), 4),
        steps=steps,
        gpu_ms=round(statistics.median(gpus), 4) if gpus else None,
        host_ms=b.host_ms,
        busy_ms=round(b.busy_ms, 4),
        idle_ms=round(b.idle_ms, 4),
        kernels=b.kernels,
        kv_cache_gib=round(kv_bytes(model.shape, s) / GIB, 4),
    )
    if cuda:
        row["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
    for c in CATEGORIES:
        row[f"{c}_ms"] = round(b.ms[c], 4)
    del step
    return row


def run(args: argparse.Namespace, argv: list[str]) -> int:
    torch, memory = open_device(args, "inference_steps")
    device = args.device
    quick = args.quick
    prov = provenance(torch, device, argv)
    gpu = gpu_key_for_device(prov.get("device", "cpu")) or ""
    out = output_path(args.out, "inference_steps", gpu, quick)
    steps = args.steps or (3 if quick else 20)
    shapes = [s for s in plan(quick) if not args.only or args.only in s.label()]
    rows: list[dict] = []
    start = time.perf_counter()
    say = (lambda s: print(s, flush=True)) if not args.quiet else (lambda s: None)
    with tempfile.TemporaryDirectory(prefix="podsim-serve-") as tmp:
        for shape in models(memory, quick):
            model = None
            todo = [s for s in shapes if step_memory(shape, s) <= 0.85 * memory]
            if shape.name != "llama3-8b" and not quick:  # the larger shape: its decodes and a prefill
                todo = [
                    s
                    for s in todo
                    if (s.kind == "decode" and s.attention == "flash" and s.batch in (1, 32, 128))
                    or (s.kind == "prefill" and s.attention == "flash" and s.batch == 1 and s.tokens == 2048)
                ]
            say(
                f"inference_steps: {shape.name} x {shape.layers} layers, {len(todo)} step shapes on "
                f"{prov.get('device')} ({gpu or 'no podsim GPU key'})"
            )
            for i, s in enumerate(todo):
                base = {
                    "gpu": gpu,
                    "device_name": prov.get("device", "cpu"),
                    "model": shape.name,
                    "layers": shape.layers,
                    "hidden": shape.hidden,
                    "heads": shape.heads,
                    "kv_heads": shape.kv_heads,
                    "ffn_hidden": shape.ffn_hidden,
                    "vocab": shape.vocab,
                    "precision": "bf16",
                    "kind": s.kind,
                    "batch": s.sequences,
                    "prompt_tokens": s.tokens or "",
                    "context": s.context or "",
                    "decodes": s.batch if s.kind == "mixed" else "",
                    "step_tokens": s.batch * s.tokens if s.kind == "prefill" else s.batch + s.tokens,
                    "mode": s.mode,
                    "attention": s.attention,
                }
                left = args.budget_s - (time.perf_counter() - start)
                why = (
                    ("graphs need CUDA" if s.mode == "graph" else "cudnn attention needs CUDA")
                    if device == "cpu" and (s.mode == "graph" or s.attention == "cudnn")
                    else ""
                )
                if left < (2 if quick else 8):
                    why = f"budget ({left:.0f} s left)"
                if why:
                    rows.append({**base, "status": f"skipped: {why}"})
                    write_serving_steps(out, rows, prov)
                    say(f"  [{i + 1}/{len(todo)}] {s.label()}: skipped ({why})")
                    continue
                t = time.perf_counter()
                try:
                    if model is None:
                        model = build(shape, device, dtype=torch.bfloat16).eval()
                    row = measure(torch, model, s, device, steps, Path(tmp))
                except Exception as e:  # noqa: BLE001 - one shape's failure is its row; the run goes on
                    row = {"status": failure_status(e)}
                    if args.debug:
                        traceback.print_exc()
                rows.append({**base, **row})
                write_serving_steps(out, rows, prov)
                say(
                    f"  [{i + 1}/{len(todo)}] {s.label()}: {row.get('status')}, step {row.get('step_ms', '-')} ms "
                    f"(GPU {row.get('gpu_ms', '-')}, busy {row.get('busy_ms', '-')}) ({time.perf_counter() - t:.1f} s)"
                )
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
            del model
            gc.collect()
    write_serving_steps(out, rows, prov)
    ok = sum(r.get("status") == "ok" for r in rows)
    say(
        f"inference_steps: {ok} of {len(rows)} step shapes measured in {time.perf_counter() - start:.0f} s; wrote {out}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="columns: docs/serving-llm.md, 'Measured serving steps'"
    )
    add_arguments(ap, "inference_steps", "step shape", 20)
    args = ap.parse_args(argv)
    settle_arguments(args, "inference_steps")
    return run(args, argv)


if __name__ == "__main__":
    sys.exit(main())
