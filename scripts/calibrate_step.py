"""Fit the training-step parameters of ``llm/stack.yaml`` to the H100 rows of the fitted set.

    python scripts/calibrate_step.py [--rounds 3] [--backend analytical]

The fitted set's H100 throughput rows (Megatron-Core r0.8 weak scaling, Llama 3 405B) are
simulated as ``podsim validate`` does, with the kernel times of the H100 roofline (fitted to
podsim's measured H100 kernel table) and a :class:`~podsim.llm.stack.Stack` whose
``gemm_efficiency``, ``attention_efficiency``, ``host_ns`` and ``nccl_compute_slowdown`` are
searched (multiplicative coordinate descent) for the least mean |error| + max |error| / 4.
The winner goes into ``llm/stack.yaml`` (``h100-80gb``) by hand, with docs/compute.md.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from multiprocessing import Pool

from podsim.llm.stack import Stack
from podsim.validation.predict import throughput
from podsim.validation.rows import shipped_rows

PARAMS = {"gemm_efficiency": (0.6, 1.1), "attention_efficiency": (0.3, 1.2), "host_ns": (1000.0, 300000.0),
          "nccl_compute_slowdown": (0.0, 0.6)}


def _rows() -> list[dict]:
    return [r for r in shipped_rows(("fitted",)) if r.get("gpu") == "h100-80gb"
            and r["metric"] == "model_tflops_per_gpu"]


def _err(args: tuple[dict, Stack, str]) -> float:
    row, stack, backend = args
    return throughput(row, backend, stack=stack) / float(row["value"]) - 1


def evaluate(pool: Pool, rows: list[dict], stack: Stack, backend: str) -> tuple[float, list[float]]:
    errs = pool.map(_err, [(r, stack, backend) for r in rows])
    a = [abs(e) for e in errs]
    return sum(a) / len(a) + max(a) / 4, errs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="analytical")
    a = ap.parse_args()
    rows = _rows()
    stack = Stack.for_gpu("h100-80gb")
    with Pool(2) as pool:
        best, errs = evaluate(pool, rows, stack, a.backend)
        step = 1.25
        for rnd in range(a.rounds):
            for name, (lo, hi) in PARAMS.items():
                for direction in (step, 1 / step):
                    while True:
                        v = getattr(stack, name)
                        new = min(max(v * direction if v > 0 else 0.05, lo), hi)
                        if new == v:
                            break
                        trial = replace(stack, **{name: new})
                        score, e = evaluate(pool, rows, trial, a.backend)
                        if score >= best - 1e-5:
                            break
                        stack, best, errs = trial, score, e
                        print(f"round {rnd} {name} {new:.4g}: score {100 * score:.2f}%", flush=True)
            step = step ** 0.5
    print("\nbest:", stack)
    for r, e in zip(rows, errs):
        print(f"  {r['row_id']:<40} measured {r['value']:>7} TFLOP/s  error {100 * e:+.1f}%")
    ab = [abs(e) for e in errs]
    print(f"mean {100 * sum(ab) / len(ab):.2f}%, max {100 * max(ab):.2f}%")


if __name__ == "__main__":
    main()
