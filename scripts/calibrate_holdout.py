"""The "calibrate on the smallest run, predict the rest" check of the shipped stack rows: for
each source of ``podsim/validation/reported_stacks.csv`` (runs podsim is never fitted to) and GPU
architecture, fit the row's stack preset's free parameters to that group's one smallest run
(fewest GPUs, then the fewest parameters, then the shortest sequences) with ``podsim calibrate training``'s fitter, then
predict the group's other runs with the fitted stack (the fitted value written into the
architecture's entry, as ``podsim calibrate training`` writes it).  Prints, per source and
GPU, the mean / max |error| with the preset as shipped and with the stack calibrated on the
smallest run.

    python scripts/calibrate_holdout.py                # every source
    python scripts/calibrate_holdout.py --source llm-foundry --json out.json

This is a report, not a fit: nothing it finds is written into a preset.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from importlib import resources

from podsim.api.calibrate import calibrate_training
from podsim.errors import InputError
from podsim.hardware.gpu import get_gpu
from podsim.stacks.stack import load_stack
from podsim.validation.predict import model_of, throughput
from podsim.validation.rows import read_rows


def _size(r: dict[str, str]) -> tuple[int, float, int]:
    """A run's size: GPUs, then parameters, then tokens per sequence."""
    return int(r["gpus"]), model_of(r).total_params(), int(r["seq_len"])


def _source(r: dict[str, str]) -> str:
    """The source's repository and document (``pytorch/torchtitan benchmarks/x.md``), without its commit."""
    return r["source"].split("@")[0]


def _err(pred: float, r: dict[str, str]) -> float:
    return (pred / float(r["value"]) - 1) * 100


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", help="only sources whose name starts with this")
    ap.add_argument("--json", help="write the per-run errors here")
    args = ap.parse_args(argv)
    rows = read_rows(str(resources.files("podsim.validation") / "reported_stacks.csv"), "reported")
    rows = [r for r in rows if not r.get("notes", "").startswith("outside the model")]
    by: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if args.source and not _source(r).startswith(args.source):
            continue
        by[(_source(r), r["stack"], get_gpu(r["gpu"]).architecture)].append(r)
    out = []
    print(f"{'source':<58} {'stack':<20} {'gpu':<10} {'runs':>4} {'preset mean/max':>16} {'calibrated mean/max':>20}")
    for (src, name, _arch), runs in sorted(by.items()):
        anchor = min(runs, key=_size)
        try:
            cal = calibrate_training([anchor], name, source=f"{anchor['row_id']} (smallest run of {src})")
        except InputError as e:
            print(f"{src:<58} {name:<20} calibration failed: {e}")
            continue
        preset = load_stack(name, "training")
        fitted = preset.with_values(
            {k: preset.fitted_value(k, v, cal.architectures) for k, v in cal.fit.fitted.items()}
        )
        per_gpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in runs:
            if r is anchor:
                continue
            try:
                before, after = _err(throughput(r), r), _err(throughput(r, software=fitted), r)
            except InputError:
                continue
            per_gpu[r["gpu"]].append((before, after))
            out.append(
                {
                    "row_id": r["row_id"],
                    "source": src,
                    "stack": name,
                    "gpu": r["gpu"],
                    "preset": before,
                    "calibrated": after,
                }
            )
        for gpu, errs in sorted(per_gpu.items()):
            b = [abs(x) for x, _ in errs]
            a = [abs(y) for _, y in errs]
            print(
                f"{src:<58} {name:<20} {gpu:<10} {len(errs):>4} {sum(b) / len(b):>8.1f}/{max(b):>6.1f}% "
                f"{sum(a) / len(a):>11.1f}/{max(a):>6.1f}%"
            )
        fit = ", ".join(f"{k} {v:.3f}" for k, v in cal.fit.fitted.items())
        print(
            f"{'':<58} {'':<20} calibrated on {anchor['row_id']}: {fit}"
            + (f" (refused: {cal.fit.refusal})" if cal.fit.refusal else "")
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
