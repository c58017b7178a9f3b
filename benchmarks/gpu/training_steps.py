#!/usr/bin/env python3
"""Measure whole training steps of Llama-shaped decoders on the GPU it finds; write a CSV.

What it runs (``podsim.examples.llama``: a plain-PyTorch Llama with random weights, no
download), one configuration at a time, most valuable first, until ``--budget-s`` is spent:

* shapes of Llama 3 8B (4 layers) and 70B (2 layers, or 1 where 2 do not fit; the count is
  in each row), sequence 2,048 / 4,096 / 8,192, micro-batch 1-4;
* BF16 mixed precision as Megatron-Core and FSDP2 run it: a bf16 model, fp32 master weights,
  gradients cast to fp32 for AdamW and the updated weights copied back;
* eager and ``torch.compile`` (Inductor, static shapes); SDPA's flash and cuDNN backends and
  the math backend once (the unfused reference); AdamW ``fused`` vs ``foreach``; with and
  without activation checkpointing (every block re-run in the backward).

For each: the median step time of ``--steps`` steps after warm-up (CUDA events at each step's
start, no synchronisation between steps: a step is start to next start, host gaps included),
the peak memory, and one profiled step's breakdown (``podsim.capture.breakdown``: GEMMs,
attention forward / backward, norms, RoPE, SwiGLU, cross entropy, optimizer, casts, ..., and the
time the GPU sat idle waiting on the host).  Then one ``podsim trace --device cuda`` capture of the
first configuration, replayed with ``podsim simulate`` and compared with the measured step.

Rows are written after every configuration (atomically), so a run cut short keeps what it
measured; a configuration that fails (out of memory, a backend that is not there) is a row
with its ``status``.  The CSV's ``#`` lines carry the provenance (GPU, clocks and power limit
where ``nvidia-smi`` reads them, driver, CUDA, cuDNN, torch, date, podsim commit); a JSON beside
it holds each configuration's longest kernels by category.  Columns: docs/compute.md,
"Measured training steps".

    python benchmarks/gpu/training_steps.py --out src/podsim/compute/tables/steps/h100-80gb.csv
    python benchmarks/gpu/training_steps.py --out "$OUT"      # the GPU machine: $OUT/training_steps/<gpu>.csv
    python benchmarks/gpu/training_steps.py --quick --out /tmp/steps.csv     # CPU, tiny shapes, ~1 min

``--quick`` runs the same code path on tiny shapes (on the CPU unless ``--device cuda``;
``torch.compile`` with the ``aot_eager`` backend there, so no C++ toolchain is needed); the
tests run it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import (
    GIB,
    ROOT,
    add_arguments,
    failure_status,
    open_device,
    output_path,
    profiled_breakdown,
    provenance,
    settle_arguments,  # noqa: E402  (puts the checkout's podsim on the path)
)

from podsim.capture.breakdown import CATEGORIES  # noqa: E402
from podsim.compute.steps import gpu_key_for_device, write_steps  # noqa: E402
from podsim.examples.llama import SHAPES, LlamaShape, batch, build, loss_fn  # noqa: E402
from podsim.fileio import atomic_write_text  # noqa: E402


@dataclass(frozen=True)
class Config:
    """One measured configuration."""

    model: str  #: a key of podsim.examples.llama.SHAPES
    layers: int
    seq_len: int
    micro_batch: int
    mode: str = "eager"  #: eager | compile
    attention: str = "flash"  #: flash | cudnn | math (SDPA backend)
    optimizer: str = "fused"  #: fused | foreach (AdamW implementation)
    checkpoint: str = "none"  #: none | full (every block re-run in the backward)
    trace: bool = False  #: also capture it with podsim trace and replay it

    @property
    def shape(self) -> LlamaShape:
        return SHAPES[self.model].with_layers(self.layers)

    def label(self) -> str:
        return (
            f"{self.model} x{self.layers}L s{self.seq_len} b{self.micro_batch} {self.mode} {self.attention} "
            f"adamw-{self.optimizer}"
            + (" ckpt" if self.checkpoint != "none" else "")
            + (" +trace" if self.trace else "")
        )


# -- the plan --------------------------------------------------------------------------------


def memory_estimate(shape: LlamaShape, seq_len: int, micro_batch: int, checkpoint: str) -> float:
    """Peak bytes of a step, roughly: 20 B a parameter (bf16 weights and gradients, fp32 master
    weights, gradients and two AdamW moments), saved activations (~32 h + 8 f bf16 bytes a token
    a layer with flash attention and fp32 RoPE; 2 h with checkpointing) and the logits (bf16,
    their fp32 copy and gradient: 14 B a token a vocabulary entry)."""
    tokens = seq_len * micro_batch
    act = tokens * (32 * shape.hidden + 8 * shape.ffn_hidden) * (shape.layers if checkpoint == "none" else 1)
    act += tokens * 2 * shape.hidden * shape.layers * (checkpoint != "none")
    return 20.0 * shape.params() + act + 14.0 * tokens * shape.vocab


def plan(memory_bytes: float, quick: bool) -> list[Config]:
    """The configurations in the order they run (most valuable first), on a device of
    ``memory_bytes``; the 70B shape gets 2 layers where the largest of its runs fits in 90%
    of the memory, else 1."""
    if quick:
        t = "tiny"
        return [
            Config(t, 2, 64, 1, trace=True),
            Config(t, 2, 128, 1),
            Config(t, 2, 64, 2),
            Config(t, 2, 64, 1, attention="cudnn"),
            Config(t, 2, 64, 1, attention="math"),
            Config(t, 2, 64, 1, optimizer="foreach"),
            Config(t, 2, 64, 1, checkpoint="full"),
            Config(t, 2, 64, 1, mode="compile"),
        ]
    big = "llama3-70b"
    layers70 = 2 if memory_estimate(SHAPES[big].with_layers(2), 4096, 1, "none") <= 0.9 * memory_bytes else 1
    e8 = [("llama3-8b", 4, s, b) for s, b in ((2048, 1), (4096, 1), (8192, 1), (2048, 4), (4096, 2))]
    e70 = [(big, layers70, s, 1) for s in (2048, 4096, 8192)]
    out = [Config(*e8[0])]
    out += [Config(*c) for c in e8[1:3]]
    out += [Config(*e8[0], trace=True)]  # the first again, captured by podsim trace and replayed
    out += [Config("llama3-8b", 4, 4096, 1, mode="compile")]
    out += [Config(*c, attention="cudnn") for c in e8[:3]]
    out += [Config(*c) for c in e70]
    out += [Config("llama3-8b", 4, s, 1, mode="compile") for s in (2048, 8192)]
    out += [Config(*c) for c in e8[3:]]
    out += [Config("llama3-8b", 4, s, 1, checkpoint="full") for s in (4096, 8192)]
    out += [Config("llama3-8b", 4, 4096, 1, optimizer="foreach"), Config("llama3-8b", 4, 2048, 1, attention="math")]
    out += [Config(big, layers70, 4096, 1, attention="cudnn"), Config(big, layers70, 4096, 1, mode="compile")]
    out += [
        Config("llama3-8b", 4, 2048, 4, mode="compile"),
        Config("llama3-8b", 4, 8192, 1, mode="compile", checkpoint="full"),
    ]
    fits = [c for c in out if memory_estimate(c.shape, c.seq_len, c.micro_batch, c.checkpoint) <= 0.95 * memory_bytes]
    return fits


#: rough device seconds a configuration takes (model build, warm-up, timing, a profiled step);
#: the run skips what would not finish within its budget
def cost_estimate_s(c: Config, quick: bool) -> float:
    if quick:
        return 2.0
    s = 12.0 + (70.0 if c.mode == "compile" else 0.0) + (60.0 if c.trace else 0.0)
    return s * (1.5 if c.model == "llama3-70b" else 1.0)


# -- one configuration -----------------------------------------------------------------------


class Trainer:
    """A bf16 model with fp32 master weights and AdamW, as Megatron-Core / FSDP2 mixed
    precision run it; :meth:`step` is one training step."""

    def __init__(self, torch: Any, c: Config, device: str, compile_backend: str) -> None:
        self.torch = torch
        self.c = c
        self.model = build(c.shape, device, dtype=torch.bfloat16)
        self.model.checkpoint = c.checkpoint != "none"
        self.params = [p for p in self.model.parameters()]
        self.masters = [p.detach().float() for p in self.params]
        for m in self.masters:
            m.grad = torch.zeros_like(m)
        kw = {"fused": True} if c.optimizer == "fused" else {"foreach": True}
        self.opt = torch.optim.AdamW(self.masters, lr=1e-4, weight_decay=0.1, **kw)
        self.x, self.y = batch(c.shape, c.micro_batch, c.seq_len, device)
        self.loss = loss_fn(None)
        self.forward: Any = self.model
        if c.mode == "compile":
            self.forward = torch.compile(self.model, backend=compile_backend, dynamic=False)

    def attention_context(self) -> Any:
        if self.c.attention in ("", "default"):
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[
            self.c.attention
        ]
        return sdpa_kernel([backend])

    def step(self) -> None:
        torch = self.torch
        region = torch.profiler.record_function
        for p in self.params:
            p.grad = None
        with self.attention_context():
            loss = self.loss(self.forward, self.x, self.y)
            loss.backward()
        with region("podsim::grad_cast"):
            torch._foreach_copy_([m.grad for m in self.masters], [p.grad for p in self.params])
        with region("podsim::clip"):  # the gradient norm, clipped to 1 (torchtitan's and Megatron's default)
            torch.nn.utils.clip_grad_norm_(self.masters, 1.0, foreach=True)
        self.opt.step()
        with region("podsim::param_cast"), torch.no_grad():
            torch._foreach_copy_(self.params, self.masters)


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(torch: Any, tr: Trainer, device: str, steps: int) -> tuple[list[float], float]:
    """Per-step times (ms) of ``steps`` back-to-back steps, and the host's wall ms per step.

    On a GPU: CUDA events recorded at each step's start (and after the last), no
    synchronisation in between, so a step lasts from its first kernel's turn to the next
    step's (the GPU's view, host gaps included)."""
    _sync(torch, device)
    t0 = time.perf_counter()
    if device.startswith("cuda"):
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        for i in range(steps):
            marks[i].record()
            tr.step()
        marks[steps].record()
        torch.cuda.synchronize()
        times = [marks[i].elapsed_time(marks[i + 1]) for i in range(steps)]
    else:
        times = []
        for _ in range(steps):
            s = time.perf_counter()
            tr.step()
            times.append((time.perf_counter() - s) * 1000.0)
    return times, (time.perf_counter() - t0) * 1000.0 / steps


def measure(
    torch: Any, c: Config, device: str, steps: int, warmup: int, compile_backend: str, folder: Path
) -> tuple[dict, dict]:
    """One configuration's row (``COLUMNS``) and its kernel detail."""
    row: dict[str, Any] = {"status": "ok"}
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    tr = Trainer(torch, c, device, compile_backend)
    t0 = time.perf_counter()
    tr.step()
    _sync(torch, device)
    first_s = time.perf_counter() - t0
    for _ in range(max(warmup - 1, 0)):
        tr.step()
    times, wall = time_steps(torch, tr, device, steps)
    row["compile_s"] = round(first_s, 3) if c.mode == "compile" else ""
    row.update(
        step_ms=round(statistics.median(times), 4),
        step_ms_min=round(min(times), 4),
        step_ms_max=round(max(times), 4),
        steps=steps,
        wall_step_ms=round(wall, 4),
        tokens_per_s=round(c.seq_len * c.micro_batch / statistics.median(times) * 1000.0, 1),
    )
    if cuda:
        row["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
        row["reserved_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 3)
    b = profiled_breakdown(lambda t=tr: (t.step(), _sync(torch, device)), cuda, folder).to_dict()
    row.update(
        profiled_step_ms=b["step_ms"],
        busy_ms=b["busy_ms"],
        idle_ms=b["idle_ms"],
        host_ms=b["host_ms"],
        kernels=b["kernels"],
    )
    for cat in CATEGORIES:
        row[f"{cat}_ms"] = b["ms"][cat]
    del tr
    return row, b["top"]


# -- the podsim trace capture, replayed ------------------------------------------------------


def trace_and_replay(c: Config, device: str, folder: Path, timeout_s: float = 300.0) -> dict:
    """Capture ``c`` with ``podsim trace`` (eager, bf16 weights, Adam: the tracer's own loop)
    and replay it with ``podsim simulate`` on one GPU: the traced step's measured ms and the
    replay's simulated ms."""
    shim = folder / "podsim_bench_llama.py"
    shim.write_text(
        "from podsim.examples.llama import SHAPES, trace_builder\n"
        f"build = trace_builder(SHAPES[{c.model!r}].with_layers({c.layers}), {c.seq_len})\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(folder), os.environ.get("PYTHONPATH", "")]),
    }
    out = folder / "capture"
    cmd = [
        sys.executable,
        "-m",
        "podsim",
        "trace",
        "--model",
        "podsim_bench_llama:build",
        "--batch-size",
        str(c.micro_batch),
        "--device",
        "cuda" if device.startswith("cuda") else "cpu",
        "--steps",
        "2",
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=folder, capture_output=True, text=True, timeout=timeout_s)
    info = json.loads((out / "capture.json").read_text())
    res = folder / "replay.json"
    cmd = [
        sys.executable,
        "-m",
        "podsim",
        "simulate",
        "--workload-configuration",
        str(out),
        "--cluster",
        "dgx-h100",
        "--gpus",
        "1",
        "--retime",
        "off",  # the capture as captured (a CPU one too): its replay against its own measured step
        "--json",
        str(res),
    ]
    subprocess.run(
        cmd,
        check=True,
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=max(timeout_s - (time.perf_counter() - t0), 30.0),
    )
    doc = json.loads(res.read_text())
    return {"trace_step_ms": info["step_ms"], "replay_ms": round(replay_ms(doc), 4)}


def replay_ms(doc: dict) -> float:
    """The simulated step (ms) in ``podsim simulate --json``'s output: the latest rank's finish."""
    finish = doc.get("finish_ns")
    if finish is None:
        finish = max((r.get("finish_ns", 0) for r in doc.get("ranks") or []), default=0)
    return finish / 1e6


# -- the run ---------------------------------------------------------------------------------


def run(args: argparse.Namespace, argv: list[str]) -> int:
    torch, memory = open_device(args, "training_steps")
    device = args.device
    quick = args.quick
    configs = plan(memory, quick)
    if args.only:
        configs = [c for c in configs if args.only in c.label()]
    if args.no_trace:
        configs = [replace(c, trace=False) for c in configs]
    prov = provenance(torch, device, argv)
    gpu = gpu_key_for_device(prov.get("device", "cpu")) or ""
    steps = args.steps or (3 if quick else 10)
    warmup = args.warmup or (1 if quick else 3)
    compile_backend = "aot_eager" if quick and device == "cpu" else "inductor"
    out = output_path(args.out, "training_steps", gpu, quick)
    side = out.with_suffix(".json")
    rows: list[dict] = []
    detail: dict[str, Any] = {"provenance": prov, "configs": {}}
    start = time.perf_counter()
    say = (lambda s: print(s, flush=True)) if not args.quiet else (lambda s: None)
    say(
        f"training_steps: {len(configs)} configurations on {prov.get('device')} ({gpu or 'no podsim GPU key'}), "
        f"budget {args.budget_s:g} s"
    )
    with tempfile.TemporaryDirectory(prefix="podsim-steps-") as tmp:
        for i, c in enumerate(configs):
            base = {
                "gpu": gpu,
                "device_name": prov.get("device", "cpu"),
                "model": c.model,
                "layers": c.layers,
                "hidden": c.shape.hidden,
                "heads": c.shape.heads,
                "kv_heads": c.shape.kv_heads,
                "ffn_hidden": c.shape.ffn_hidden,
                "vocab": c.shape.vocab,
                "seq_len": c.seq_len,
                "micro_batch": c.micro_batch,
                "precision": "bf16",
                "mode": c.mode,
                "compile_backend": compile_backend if c.mode == "compile" else "",
                "attention": c.attention,
                "optimizer": c.optimizer,
                "checkpoint": c.checkpoint,
            }
            left = args.budget_s - (time.perf_counter() - start)
            if cost_estimate_s(c, quick) > left:
                rows.append({**base, "status": f"skipped: budget ({left:.0f} s left)"})
                say(f"  [{i + 1}/{len(configs)}] {c.label()}: skipped, {left:.0f} s of budget left")
                continue
            if c.attention == "cudnn" and device == "cpu":
                rows.append({**base, "status": "skipped: cudnn attention needs CUDA"})
                say(f"  [{i + 1}/{len(configs)}] {c.label()}: skipped (cudnn attention needs CUDA)")
                write_steps(out, rows, prov)
                continue
            t = time.perf_counter()
            top: dict = {}
            try:
                row, top = measure(torch, c, device, steps, warmup, compile_backend, Path(tmp))
            except Exception as e:  # noqa: BLE001 - one configuration's failure is its row; the run goes on
                row = {"status": failure_status(e)}
                if args.debug:
                    traceback.print_exc()
            if c.trace and row.get("status") == "ok":
                try:
                    left = args.budget_s - (time.perf_counter() - start)
                    row.update(trace_and_replay(c, device, Path(tmp), max(min(300.0, left), 60.0)))
                except Exception as e:  # noqa: BLE001
                    msg = e.stderr.strip().splitlines()[-1] if getattr(e, "stderr", None) else str(e)
                    row["notes"] = f"trace failed: {type(e).__name__}: {msg[:160]}"
                    if args.debug:
                        traceback.print_exc()
            rows.append({**base, **row})
            detail["configs"][c.label()] = top
            write_steps(out, rows, prov)  # after every configuration: a run cut short keeps what it measured
            atomic_write_text(side, json.dumps(detail, indent=1) + "\n")
            say(
                f"  [{i + 1}/{len(configs)}] {c.label()}: {row.get('status')}, step {row.get('step_ms', '-')} ms, "
                f"peak {row.get('peak_mem_gib', '-')} GiB, idle {row.get('idle_ms', '-')} ms "
                f"({time.perf_counter() - t:.1f} s)"
            )
            gc.collect()
            if c.mode == "compile":
                torch._dynamo.reset()
            if device == "cuda":
                torch.cuda.empty_cache()
    write_steps(out, rows, prov)
    atomic_write_text(side, json.dumps(detail, indent=1) + "\n")
    ok = sum(r.get("status") == "ok" for r in rows)
    say(
        f"training_steps: {ok} of {len(rows)} configurations measured in {time.perf_counter() - start:.0f} s; "
        f"wrote {out} and {side}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="columns: docs/compute.md, 'Measured training steps'"
    )
    add_arguments(ap, "training_steps", "configuration", 10)
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 3; quick 1)")
    ap.add_argument("--no-trace", action="store_true", help="skip the podsim trace capture and replay")
    args = ap.parse_args(argv)
    settle_arguments(args, "training_steps")
    return run(args, argv)


if __name__ == "__main__":
    sys.exit(main())
