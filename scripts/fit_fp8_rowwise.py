"""Refit ``fp8_rowwise_overhead`` (llm/stack.yaml) to torchao's measured rowwise-fp8 linear
speedups on H100 (podsim/compute/tables/fp8_rowwise_h100.csv) and compare with the shipped value;
print podsim's error per forward M.

    python scripts/fit_fp8_rowwise.py     # exit 1 if the shipped value differs from the fit by > 1%
"""

from __future__ import annotations

import sys
from collections import defaultdict

from podsim.llm.stack import Stack
from podsim.validation.fp8_rowwise import TABLE_GPU, errors_pct, fit_overhead, read_cells


def main() -> int:
    cells = read_cells()
    fitted = fit_overhead(cells)
    shipped = Stack.for_gpu(TABLE_GPU).fp8_rowwise_overhead
    errs = errors_pct(fitted, cells)
    by: dict[int, list[float]] = defaultdict(list)
    for c, e in zip(cells, errs):
        by[c.m].append(e)
    print(f"fp8_rowwise_overhead: fitted {fitted:.3f}, shipped {shipped:g} (llm/stack.yaml)")
    print(f"{'M':>6} {'cells':>5} {'mean |error|':>13} {'signed':>8} {'max':>7}")
    for m, es in sorted(by.items()):
        worst = max(es, key=abs)
        print(f"{m:>6} {len(es):>5} {sum(map(abs, es)) / len(es):>12.1f}% {sum(es) / len(es):>+7.1f}% {worst:>+6.0f}%")
    print(f"{'all':>6} {len(errs):>5} {sum(map(abs, errs)) / len(errs):>12.1f}% {sum(errs) / len(errs):>+7.1f}%")
    naive = errors_pct(1.0, cells)
    print(f"with the casts on the memory roofline (1.0): mean error {sum(naive) / len(naive):+.1f}%")
    ok = abs(shipped / fitted - 1) <= 0.01
    print("ok" if ok else "DIFFERS: update llm/stack.yaml")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
