"""Refit each training stack preset's free parameters to its anchor run(s) and compare with the
values the preset holds (podsim/validation/calibration_stacks.csv; docs/stacks.md).

    python scripts/fit_stacks.py          # print fitted vs shipped values; exit 1 if they differ by > 1%
"""

from __future__ import annotations

import sys
from collections import defaultdict
from importlib import resources

from podsim.api.calibrate import calibrate_training
from podsim.hardware.gpu import get_gpu
from podsim.stacks.stack import load_stack
from podsim.validation.rows import read_rows


def main() -> int:
    rows = read_rows(str(resources.files("podsim.validation") / "calibration_stacks.csv"), "fitted")
    by: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by[r["stack"]].append(r)
    stale = 0
    for name, runs in sorted(by.items()):
        cal = calibrate_training(runs, name, source="calibration_stacks.csv")
        shipped = load_stack(name)
        arch = get_gpu(runs[0]["gpu"]).architecture
        for k, v in cal.fit.fitted.items():
            have = shipped.value_for(k, arch)
            ok = have is not None and abs(have / v - 1) <= 0.01
            stale += not ok
            print(f"{name:<20} {k:<18} fitted {v:.4f}  shipped {have}  {'ok' if ok else 'DIFFERS'}")
        if cal.fit.refusal:
            print(f"{name:<20} refused: {cal.fit.refusal}")
            stale += 1
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
