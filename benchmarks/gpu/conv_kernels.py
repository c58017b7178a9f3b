#!/usr/bin/env python3
"""Time single convolution, fp32 matrix-multiply and memory-bound kernels on the GPU it finds;
write a CSV (the kernel measurements podsim's re-timing of captured CNN steps is fitted to).

What it runs, each on random data, one shape at a time, with PyTorch's defaults (cuDNN's TF32
on for fp32 convolutions, ``torch.backends.cuda.matmul.allow_tf32`` off, ``cudnn.benchmark``
off), as ``podsim trace --device cuda`` captures a step:

* 2-D convolutions over a grid of CNN-like shapes (batch 16 / 64 / 256; channels 3 to 2,048;
  feature maps 7 to 224; kernels 1x1, 3x3 and the 7x7 stride-2 stem), fp32 and bf16, each pass
  apart: ``fwd`` (``aten::convolution``), ``bwd_data`` and ``bwd_weight``
  (``aten::convolution_backward`` with one gradient asked for);
* fp32 matrix multiplies (``aten::mm``, full fp32) of classifier and square shapes;
* memory-bound kernels of a CNN step: batch norm forward and backward (training mode), ReLU,
  an elementwise add, in fp32.

Each row, after warm-up, the inputs rotated among three sets when they are small enough to sit
in L2: ``kernel_ns``, the mean over ``--reps`` calls of the GPU kernels' own durations from the
profiler (as a captured step's ops are measured: the kernels, not the host's launch gaps), and
``wall_ns``, the median time between CUDA events around one call (launch overhead included).  The implicit GEMM
of a convolution is the one :mod:`podsim.formats.aten_work` derives from a trace
(M = output elements / O, N = O, K = C x kh x kw), so the rows fit what re-timing uses.

    python benchmarks/gpu/conv_kernels.py --out "$OUT"           # GPU machine: $OUT/conv_kernels/<gpu>.csv
    python benchmarks/gpu/conv_kernels.py --quick --out /tmp/k.csv   # CPU, tiny shapes, seconds
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import ROOT, provenance  # noqa: E402

COLUMNS = [
    "kind",
    "dtype",
    "batch",
    "c_in",
    "c_out",
    "hw",
    "kernel",
    "stride",
    "m",
    "n",
    "k",
    "flops",
    "bytes",
    "kernel_ns",
    "wall_ns",
    "reps",
    "status",
]

#: (c_in, c_out, feature map, kernel, stride): ResNet-like layers and their neighbours
CONV_SHAPES = [
    (3, 64, 224, 7, 2),
    (64, 64, 56, 3, 1),
    (64, 64, 56, 1, 1),
    (64, 256, 56, 1, 1),
    (256, 64, 56, 1, 1),
    (128, 128, 28, 3, 1),
    (256, 512, 28, 1, 2),
    (512, 128, 28, 1, 1),
    (256, 256, 14, 3, 1),
    (1024, 256, 14, 1, 1),
    (256, 1024, 14, 1, 1),
    (512, 512, 7, 3, 1),
    (2048, 512, 7, 1, 1),
    (512, 2048, 7, 1, 1),
    (128, 256, 28, 3, 2),
]
BATCHES = [16, 64, 256]
GEMMS = [
    (64, 1000, 512),
    (128, 1000, 2048),
    (256, 1000, 2048),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
]
QUICK_CONV = [(3, 8, 16, 3, 1), (8, 16, 8, 1, 1)]
QUICK_GEMMS = [(16, 32, 64)]


#: wall-clock deadline (time.perf_counter()) after which no more shapes are timed (``--budget-s``)
DEADLINE = [float("inf")]


class OutOfTime(Exception):
    """The run's ``--budget-s`` is spent: the rows so far are written."""


def _time(torch: Any, fn: Any, sets: list[Any], reps: int, cuda: bool) -> tuple[float, float]:
    """(kernel ns, wall ns) of one ``fn(*s)`` call, ``sets`` rotated: on a GPU the mean of the
    kernels' own durations over ``reps`` calls from the profiler (what a captured step's ops are
    measured by; no host launch gaps), and the median time between CUDA events around each call
    (launch and host overhead included); on the CPU the median wall time for both."""
    if time.perf_counter() > DEADLINE[0]:
        raise OutOfTime
    for i in range(3):
        fn(*sets[i % len(sets)])
    if not cuda:
        times = []
        for i in range(reps):
            t = time.perf_counter()
            fn(*sets[i % len(sets)])
            times.append((time.perf_counter() - t) * 1e9)
        return statistics.median(times), statistics.median(times)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*sets[i % len(sets)])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e6)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0.0)
        total_us += us
    return total_us * 1e3 / reps, statistics.median(times)


def _sets(make: Any, nbytes: int) -> list[Any]:
    """Three input sets when they fit in L2 together (so repeats do not time a warm cache), else one."""
    return [make() for _ in range(3 if 3 * nbytes < (256 << 20) else 1)]


def conv_rows(
    torch: Any, dev: str, dtype_name: str, shapes: list, batches: list[int], reps: int, out: list[dict]
) -> None:
    """The three passes of every convolution shape."""
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    esz = 4 if dtype_name == "fp32" else 2
    for batch in batches:
        for c_in, c_out, hw, k, stride in shapes:
            pad = k // 2
            ho = (hw + 2 * pad - k) // stride + 1
            m, n, kk = batch * ho * ho, c_out, c_in * k * k
            x_b, w_b, y_b = batch * c_in * hw * hw * esz, c_out * c_in * k * k * esz, batch * c_out * ho * ho * esz

            def make() -> tuple:
                x = torch.randn(batch, c_in, hw, hw, device=dev, dtype=dt)
                w = torch.randn(c_out, c_in, k, k, device=dev, dtype=dt) * 0.05
                g = torch.randn(batch, c_out, ho, ho, device=dev, dtype=dt)
                return x, w, g

            try:
                sets = _sets(make, x_b + w_b + y_b)
            except RuntimeError as e:  # out of memory
                out.append(
                    _row("conv_fwd", dtype_name, batch, c_in, c_out, hw, k, stride, m, n, kk, 0, 0, status=str(e)[:60])
                )
                continue
            conv = torch.ops.aten.convolution
            back = torch.ops.aten.convolution_backward
            passes = {
                "conv_fwd": (
                    lambda x, w, g: conv(x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1),
                    x_b + w_b + y_b,
                ),
                "conv_bwd_data": (
                    lambda x, w, g: back(
                        g, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, [True, False, False]
                    ),
                    y_b + w_b + x_b,
                ),
                "conv_bwd_weight": (
                    lambda x, w, g: back(
                        g, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, [False, True, False]
                    ),
                    y_b + x_b + w_b,
                ),
            }
            for kind, (fn, nbytes) in passes.items():
                try:
                    med, lo = _time(torch, fn, sets, reps, dev == "cuda")
                    out.append(
                        _row(kind, dtype_name, batch, c_in, c_out, hw, k, stride, m, n, kk, med, lo, nbytes, reps)
                    )
                except OutOfTime:
                    raise
                except RuntimeError as e:
                    out.append(
                        _row(kind, dtype_name, batch, c_in, c_out, hw, k, stride, m, n, kk, 0, 0, status=str(e)[:60])
                    )
            del sets
            if dev == "cuda":
                torch.cuda.empty_cache()


def gemm_rows(torch: Any, dev: str, shapes: list, reps: int, out: list[dict]) -> None:
    """fp32 matrix multiplies (full fp32, as PyTorch runs them by default)."""
    for m, n, k in shapes:
        sets = _sets(
            lambda: (torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)), 4 * (m * k + k * n + m * n)
        )
        med, lo = _time(torch, torch.mm, sets, reps, dev == "cuda")
        out.append(_row("gemm", "fp32", 0, 0, 0, 0, 0, 0, m, n, k, med, lo, 4 * (m * k + k * n + m * n), reps))


def memory_rows(torch: Any, dev: str, shapes: list, batches: list[int], reps: int, out: list[dict]) -> None:
    """Batch norm (training: ``nn.BatchNorm2d`` on an input that needs its gradient, so cuDNN's
    kernels run as in a training step) forward, and forward and backward; ReLU and add on each
    feature map; ReLU on small tensors (a kernel's floor).  fp32."""
    seen = set()
    for batch in batches:
        for _, c, hw, _, _ in shapes:
            if (batch, c, hw) in seen:
                continue
            seen.add((batch, c, hw))
            nb = batch * c * hw * hw * 4
            sets = _sets(
                lambda: (
                    torch.randn(batch, c, hw, hw, device=dev, requires_grad=True),
                    torch.randn(batch, c, hw, hw, device=dev),
                ),
                2 * nb,
            )
            bn = torch.nn.BatchNorm2d(c).to(dev).train()

            def bn_fwd(x: Any, y: Any) -> Any:
                return bn(x)

            def bn_fwd_bwd(x: Any, y: Any) -> None:
                x.grad = bn.weight.grad = bn.bias.grad = None
                bn(x).backward(y)

            for kind, fn, nbytes in (
                ("batch_norm_fwd", bn_fwd, 2 * nb),
                ("batch_norm_fwd_bwd", bn_fwd_bwd, 5 * nb),
                ("relu", lambda x, y: torch.relu(y), 2 * nb),
                ("add", lambda x, y: y + y, 3 * nb),
            ):
                med, lo = _time(torch, fn, sets, reps, dev == "cuda")
                out.append(_row(kind, "fp32", batch, c, c, hw, 0, 0, 0, 0, 0, med, lo, nbytes, reps))
    for elems in (1 << 10, 1 << 14, 1 << 18, 1 << 20):
        sets = _sets(lambda: (None, torch.randn(elems, device=dev)), 8 * elems)
        med, lo = _time(torch, lambda x, y: torch.relu(y), sets, reps, dev == "cuda")
        out.append(_row("relu", "fp32", 1, 1, 1, elems, 0, 0, 0, 0, 0, med, lo, 8 * elems, reps))


def _row(kind, dtype, batch, c_in, c_out, hw, k, stride, m, n, kk, med, lo, nbytes=0, reps=0, status="ok") -> dict:  # type: ignore[no-untyped-def]
    flops = 2 * m * n * kk
    return dict(
        kind=kind, dtype=dtype, batch=batch, c_in=c_in, c_out=c_out, hw=hw, kernel=k, stride=stride, m=m, n=n, k=kk,
        flops=flops, bytes=nbytes, kernel_ns=round(med), wall_ns=round(lo), reps=reps, status=status,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=None, metavar="CSV|DIR", help="the CSV, or a folder: <folder>/conv_kernels/<gpu>.csv"
    )
    ap.add_argument("--quick", action="store_true", help="tiny shapes on the CPU (the same code path)")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per kernel (default 20; quick 3)")
    ap.add_argument(
        "--parts", default="conv,gemm,memory", help="what to time, of conv, gemm, memory (default all three)"
    )
    ap.add_argument(
        "--budget-s", type=float, default=240.0, help="stop timing new shapes after S seconds (default 240)"
    )
    args = ap.parse_args(argv)
    import torch

    dev = "cpu" if args.quick or not torch.cuda.is_available() else "cuda"
    if args.quick:
        shapes, batches, gemms, reps = QUICK_CONV, [2], QUICK_GEMMS, args.reps or 3
    else:
        shapes, batches, gemms, reps = CONV_SHAPES, BATCHES, GEMMS, args.reps or 20
    prov = provenance(torch, dev, sys.argv[1:] if argv is None else argv)
    gpu = prov.get("device", "cpu").replace(" ", "-") if dev == "cuda" else "cpu-quick"
    t0 = time.perf_counter()
    DEADLINE[0] = t0 + args.budget_s
    rows: list[dict] = []
    try:
        parts = {
            "conv": lambda: [conv_rows(torch, dev, dt, shapes, batches, reps, rows) for dt in ("fp32", "bf16")],
            "gemm": lambda: gemm_rows(torch, dev, gemms, reps, rows),
            "memory": lambda: memory_rows(torch, dev, shapes, batches, reps, rows),
        }
        for name in args.parts.split(","):
            parts[name]()
            print(f"{len(rows)} rows after {time.perf_counter() - t0:.1f} s", flush=True)
    except OutOfTime:
        print(f"--budget-s spent: {len(rows)} rows kept")
    out = Path(args.out or ROOT / "benchmarks" / "gpu" / "results" / "conv_kernels-quick.csv")
    if out.is_dir():
        out = out / "conv_kernels" / f"{gpu}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        for key, value in prov.items():
            f.write(f"# {key}: {value}\n")
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        wr.writerows(rows)
    os.replace(tmp, out)
    bad = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows)} rows ({bad} failed) in {time.perf_counter() - t0:.1f} s -> {out}")
    for kind in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight", "gemm"):
        for dt in ("fp32", "bf16"):
            sel = [r for r in rows if r["kind"] == kind and r["dtype"] == dt and r["kernel_ns"] > 0]
            if sel:
                tf = [r["flops"] / r["kernel_ns"] / 1e3 for r in sel]
                print(f"{kind:16s} {dt}: {len(sel):3d} rows, TFLOP/s med {statistics.median(tf):.1f} max {max(tf):.1f}")
    mem = [r["bytes"] / r["kernel_ns"] for r in rows if r["kind"] in ("relu", "add") and r["kernel_ns"] > 0]
    if mem:
        print(f"relu/add: GB/s median {statistics.median(mem):.0f} max {max(mem):.0f}")
    return 0 if not bad or bad < len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
