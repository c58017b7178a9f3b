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
from multiprocessing import Pool

from podsim.compute.fit import coordinate_descent
from podsim.llm.stack import Stack
from podsim.validation.predict import throughput
from podsim.validation.rows import shipped_rows

PARAMS = {
    "gemm_efficiency": (0.6, 1.1),
    "attention_efficiency": (0.3, 1.2),
    "host_ns": (1000.0, 300000.0),
    "nccl_compute_slowdown": (0.0, 0.6),
}


def _rows() -> list[dict]:
    return [
        r for r in shipped_rows(("fitted",)) if r.get("gpu") == "h100-80gb" and r["metric"] == "model_tflops_per_gpu"
    ]


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
    errs_of: dict[Stack, list[float]] = {}

    def report(rnd: int, name: str, value: float, score: float) -> None:
        print(f"round {rnd} {name} {value:.4g}: score {100 * score:.2f}%", flush=True)

    with Pool(2) as pool:

        def loss(s: Stack) -> float:
            score, errs_of[s] = evaluate(pool, rows, s, a.backend)
            return score

        stack, _ = coordinate_descent(
            stack, loss, PARAMS, a.rounds, step=1.25, from_zero=0.05, tol=1e-5, on_better=report
        )
    errs = errs_of[stack]
    print("\nbest:", stack)
    for r, e in zip(rows, errs):
        print(f"  {r['row_id']:<40} measured {r['value']:>7} TFLOP/s  error {100 * e:+.1f}%")
    ab = [abs(e) for e in errs]
    print(f"mean {100 * sum(ab) / len(ab):.2f}%, max {100 * max(ab):.2f}%")


if __name__ == "__main__":
    main()
