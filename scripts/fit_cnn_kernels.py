#!/usr/bin/env python3
"""Fit podsim's CNN kernel model (:mod:`podsim.compute.cnn_kernels`) to one GPU's kernel
measurements (``benchmarks/gpu/conv_kernels.py``) and write ``compute/tables/cnn_kernels.yaml``.

Each group of parameters is fitted to its own rows by least squares on the log of predicted
over measured kernel time (a coarse grid, then a finer one around its best point):
convolution passes (per pass and precision class: max, knee, stride penalty), batch norm
forward and backward (max, knee in channels; the backward's time is the row's forward-and-
backward minus its forward), elementwise (ReLU: the bandwidth fraction from tensors far
larger than L2, the floor from tiny ones).  Prints the
fit's error on its rows.

    python scripts/fit_cnn_kernels.py benchmarks/gpu/runs/conv_kernels/h200.csv --gpu h200
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import yaml

from podsim.compute.cnn_kernels import CONV_PRECISIONS, FIT_FILE, NORM_TENSORS, PASSES, from_dict
from podsim.hardware.gpu import get_gpu

#: elementwise rows this large (bytes moved) measure HBM, not L2; rows this small, a kernel's floor
BIG_BYTES, TINY_BYTES = 256 << 20, 1 << 20


def _rows(path: Path) -> tuple[list[dict], dict[str, str]]:
    lines = path.read_text().splitlines()
    prov = dict(line[2:].split(": ", 1) for line in lines if line.startswith("# ") and ": " in line)
    rows = [r for r in csv.DictReader(line for line in lines if not line.startswith("#")) if r["status"] == "ok"]
    return rows, prov


def _search(err, grids):  # type: ignore[no-untyped-def]
    """The grid point (then a finer grid around it) with the least mean squared log error."""
    best = None
    for _ in range(2):
        for point in itertools.product(*grids):
            e = err(*point)
            if best is None or e < best[0]:
                best = (e, point)
        grids = [np.linspace(v * 0.8, v * 1.2, 9) for v in best[1]]
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--gpu", required=True, help="the GPU the rows were measured on (podsim's name)")
    ap.add_argument("--out", type=Path, default=FIT_FILE)
    args = ap.parse_args(argv)
    gpu = get_gpu(args.gpu)
    rows, prov = _rows(args.csv)
    bw = gpu.hbm_bandwidth

    def col(sel: list[dict], key: str) -> np.ndarray:
        return np.array([float(r[key]) for r in sel])

    # elementwise: the bandwidth from tensors far larger than L2 (ReLU), the floor from tiny ones
    el = [r for r in rows if r["kind"] == "relu"]  # (the second run's add read one tensor twice)
    big = [r for r in el if float(r["bytes"]) >= BIG_BYTES]
    tiny = [r for r in el if float(r["bytes"]) <= TINY_BYTES]
    b, t = col(big, "bytes"), col(big, "kernel_ns")
    el_fixed = float(np.median(col(tiny, "kernel_ns")))
    e_el, (elementwise,) = _search(
        lambda f: float(np.mean(np.log((b / (bw * f) + el_fixed) / t) ** 2)), [np.arange(0.3, 1.0, 0.01)]
    )
    out: dict = {
        "source": f"fitted by scripts/fit_cnn_kernels.py to {args.csv.as_posix()} ({prov.get('device', '?')}, "
        f"torch {prov.get('torch', '?')}, cuDNN {prov.get('cudnn', '?')}, {prov.get('date', '?')}): kernel times "
        "from the profiler, as fractions of that GPU's peak and HBM bandwidth",
        "elementwise": round(float(elementwise), 3),
        "elementwise_fixed_ns": round(float(el_fixed)),
        "conv": {},
        "norm": {},
    }
    report = [
        f"elementwise: {len(big)} rows over {BIG_BYTES >> 20} MiB, rms log error {math.sqrt(e_el):.3f}; "
        f"floor {el_fixed:.0f} ns from {len(tiny)} rows under {TINY_BYTES >> 20} MiB"
    ]
    # batch norm: forward rows, and the backward alone (forward-and-backward minus forward)
    fwd = {(r["batch"], r["c_in"], r["hw"]): r for r in rows if r["kind"] == "batch_norm_fwd"}
    both = {(r["batch"], r["c_in"], r["hw"]): r for r in rows if r["kind"] == "batch_norm_fwd_bwd"}
    for step in ("fwd", "bwd"):
        keys = sorted(set(fwd) & set(both))
        ch = np.array([float(k[1]) for k in keys])
        elems = np.array([float(k[0]) * float(k[2]) ** 2 for k in keys]) * ch * 4  # fp32 bytes of one tensor
        nb = NORM_TENSORS[step] * elems
        if step == "fwd":
            tt = np.array([float(fwd[k]["kernel_ns"]) for k in keys])
        else:
            tt = np.array([float(both[k]["kernel_ns"]) - float(fwd[k]["kernel_ns"]) for k in keys])
        ok = tt > 0
        nb, tt, ch = nb[ok], tt[ok], ch[ok]

        def err(top: float, knee: float, nb=nb, tt=tt, ch=ch) -> float:  # type: ignore[no-untyped-def]
            return float(np.mean(np.log(nb / (bw * top * ch / (ch + knee)) / tt) ** 2))

        e, (top, knee) = _search(err, [np.arange(0.2, 1.3, 0.05), np.array([1, 4, 16, 32, 64, 128, 256])])
        out["norm"][step] = {"max": round(float(top), 3), "knee": round(float(knee), 1)}
        report.append(f"batch norm {step}: {len(tt)} rows, rms log error {math.sqrt(e):.3f}")
    for prec, dtype in zip(CONV_PRECISIONS, ("fp32", "bf16")):
        out["conv"][prec] = {}
        peak = gpu.peak("tf32" if prec == "tf32" else "bf16")
        for step in PASSES:
            sel = [r for r in rows if r["kind"] == f"conv_{step}" and r["dtype"] == dtype]
            m, n, cin, win = col(sel, "m"), col(sel, "n"), col(sel, "c_in"), col(sel, "kernel") ** 2
            nb, tt, strided = col(sel, "bytes"), col(sel, "kernel_ns"), col(sel, "stride") > 1
            k = np.ceil(cin / 8) * 8 * win
            t_mem = nb / (bw * elementwise) + el_fixed

            def err(top, knee, pen, fixed, m=m, n=n, k=k, t_mem=t_mem, tt=tt, strided=strided) -> float:  # type: ignore[no-untyped-def]
                eff = top * (m / (m + knee)) * (n / (n + knee)) * (k / (k + knee))
                p = np.maximum(2 * m * n * k / (peak * eff), t_mem) * np.where(strided, pen, 1.0) + fixed
                return float(np.mean(np.log(p / tt) ** 2))

            e, (top, knee, pen, fixed) = _search(
                err,
                [
                    np.arange(0.1, 1.01, 0.05),
                    np.array([8, 16, 32, 64, 128, 256]),
                    np.arange(1.0, 4.01, 0.25),
                    np.array([1.0, 2000, 4000, 8000, 16000]),
                ],
            )
            out["conv"][prec][step] = {
                "max": round(float(top), 3),
                "knee": round(float(knee), 1),
                "stride_penalty": round(float(pen), 3),
                "fixed_ns": round(float(fixed)),
            }
            report.append(f"conv {prec} {step}: {len(sel)} rows, rms log error {math.sqrt(e):.3f}")
    from_dict(out, out["source"])  # the file must load
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(
        "# podsim's CNN kernel model (podsim/compute/cnn_kernels.py); written by scripts/fit_cnn_kernels.py\n"
        + yaml.safe_dump(out, sort_keys=False, width=100)
    )
    tmp.replace(args.out)
    print("\n".join(report))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
