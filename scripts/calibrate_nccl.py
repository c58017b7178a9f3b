"""Fit the NCCL tuning of the A100 presets to measured all-reduce tables and print the error
tables for docs/calibration.md.

    python scripts/calibrate_nccl.py [--data ../shared/data] [--write]

--write replaces the ``nccl:`` section (the last one) of the two preset files and the tables
in docs/calibration.md between the ``<!-- fit:... -->`` markers.

Azure ND A100 v4: nccl-tests logs on 2-32 GPUs (1 GPU is a local copy, not a collective), every
size from 1 KiB.  DGX A100: vTrain's single-node tables (2-8 GPUs, 1 MiB-1 GiB, every 32nd size)
for NVLink; its NIC figures are Azure's (the same 8x HDR 200 Gb/s per node).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
import yaml

from podsim.collectives.nccl.fit import Case, Predictor, fit
from podsim.collectives.nccl.tuning import NcclTuning, tuning_to_dict
from podsim.formats.nccl_tests import read_nccl_tests_log, read_vtrain_lut
from podsim.hardware.cluster import build_fabric, load_cluster


def cases_azure(data: str):
    spec = load_cluster("azure-nd-a100-v4")
    out = []
    for p in sorted(glob.glob(os.path.join(data, "nccl/azure-nd-a100-v4/allreduce_*gpus.log"))):
        t = read_nccl_tests_log(p)
        if t.gpus < 2:
            continue
        rows = [r for r in t.rows if r.bytes >= 1024]
        out.append(
            Case(
                t.gpus,
                build_fabric(spec, t.gpus),
                np.array([r.bytes for r in rows]),
                np.array([r.time_us for r in rows]),
            )
        )
    return spec, sorted(out, key=lambda c: c.gpus)


def cases_vtrain(data: str):
    spec = load_cluster("dgx-a100-superpod")
    out = []
    for p in sorted(glob.glob(os.path.join(data, "nccl/vtrain-a100/AR_GPU*_LUT"))):
        t = read_vtrain_lut(p)
        rows = t.rows[::32] + [t.rows[-1]]
        out.append(
            Case(
                t.gpus,
                build_fabric(spec, t.gpus),
                np.array([r.bytes for r in rows]),
                np.array([r.time_us for r in rows]),
            )
        )
    return spec, sorted(out, key=lambda c: c.gpus)


def error_table(cases, tuning) -> str:
    """Mean |busbw error| per GPU count and size decade (busbw error = time error inverted)."""
    decades = [
        (0, 1 << 20, "< 1 MiB"),
        (1 << 20, 16 << 20, "1-16 MiB"),
        (16 << 20, 256 << 20, "16-256 MiB"),
        (256 << 20, 1 << 40, ">= 256 MiB"),
    ]
    head = "| GPUs | " + " | ".join(d[2] for d in decades) + " | all >= 1 MiB | chosen (small / large) |"
    lines = [head, "|" + "---|" * (len(decades) + 3)]
    alls = []
    for c in cases:
        p = Predictor(c, tuning.channels, tuning.pxn, tuning.algorithms)
        t, choice = p.times_us(tuning)
        err = np.abs(c.times_us / t - 1) * 100  # busbw_pred / busbw_meas - 1 = t_meas / t_pred - 1
        cells = []
        for lo, hi, _ in decades:
            m = (c.sizes >= lo) & (c.sizes < hi)
            cells.append(f"{err[m].mean():.1f}%" if m.any() else "-")
        big = c.sizes >= (1 << 20)
        alls.append(err[big])
        lines.append(f"| {c.gpus} | " + " | ".join(cells) + f" | {err[big].mean():.1f}% | {choice[0]} / {choice[-1]} |")
    lines.append(f"\nmean |busbw error| over all sizes >= 1 MiB: {np.concatenate(alls).mean():.1f}%")
    return "\n".join(lines)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_preset(name: str, tuning) -> None:
    """Replace the preset's trailing ``nccl:`` section."""
    path = os.path.join(ROOT, "src/podsim/hardware/presets", f"{name}.yaml")
    text = open(path).read()
    marker = "# fitted by scripts/calibrate_nccl.py"
    cut = text.index(marker) if marker in text else text.index("\nnccl:") + 1
    head = text[:cut]
    body = yaml.safe_dump({"nccl": tuning_to_dict(tuning)}, sort_keys=False, default_flow_style=None, width=100)
    with open(path, "w") as f:
        f.write(head + "# fitted by scripts/calibrate_nccl.py; see docs/calibration.md\n" + body)


def write_doc_table(marker: str, table: str) -> None:
    """Replace the text between ``<!-- fit:marker -->`` and ``<!-- /fit:marker -->``."""
    path = os.path.join(ROOT, "docs/calibration.md")
    text = open(path).read()
    a, b = f"<!-- fit:{marker} -->", f"<!-- /fit:{marker} -->"
    i, j = text.index(a) + len(a), text.index(b)
    with open(path, "w") as f:
        f.write(text[:i] + "\n" + table + "\n" + text[j:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("PODSIM_REFERENCE_DATA", "../shared/data"))
    ap.add_argument("--write", action="store_true", help="update the presets and docs/calibration.md")
    args = ap.parse_args()
    spec, cases = cases_azure(args.data)
    # start from NCCL's published defaults, not from the preset's current (fitted) values,
    # so that a rerun reproduces the same fit
    start = NcclTuning(pxn=spec.nccl.pxn)
    tuned, _f = fit(cases, start, log=lambda s: print("  azure:", s, file=sys.stderr))
    print("## azure-nd-a100-v4\n")
    print(yaml.safe_dump({"nccl": tuning_to_dict(tuned)}, sort_keys=False))
    table1 = error_table(cases, tuned)
    print(table1)
    _spec2, cases2 = cases_vtrain(args.data)
    tuned2, _f2 = fit(
        cases2,
        tuned,
        channel_options=(tuned.channels,),
        algo_options=(tuned.algorithms,),
        log=lambda s: print("  dgx-a100:", s, file=sys.stderr),
    )
    print("\n## dgx-a100-superpod (NVLink fitted to vTrain; network from Azure)\n")
    print(yaml.safe_dump({"nccl": tuning_to_dict(tuned2)}, sort_keys=False))
    table2 = error_table(cases2, tuned2)
    print(table2)
    if args.write:
        write_preset("azure-nd-a100-v4", tuned)
        write_preset("dgx-a100-superpod", tuned2)
        write_doc_table("azure", table1)
        write_doc_table("dgx-a100", table2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
