"""Trace-driven benchmarks (issue #5): importing a captured step and scaling it out.

Cases (the H100 ResNet-50 capture in data/captures, batch 128, DGX A100 SuperPOD preset,
analytical backend; each in a fresh process):
  * import: read the Kineto + execution trace into a one-GPU step (parameters, layers, split ops);
  * replay: the capture as a workload, host and GPU streams, simulated as captured;
  * ddp-8 / ddp-64 / ddp-1024: DDP with 25 MiB buckets;
  * tp-8: tensor parallelism on one server;
  * pp-8: 8 pipeline stages, 32 micro-batches, 1F1B.

Prints wall time (import included where it applies), peak RSS and the simulated step.

    python benchmarks/bench_traces.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-resnet50-bs128"
CASES = ["import", "replay", "ddp-8", "ddp-64", "ddp-1024", "tp-8", "pp-8"]


def _run(case: str) -> dict:
    from podsim.api import simulate
    from podsim.formats.pytorch_trace import capture_to_workload
    from podsim.parallelize import load_step, parallelize

    t0 = time.perf_counter()
    if case == "replay":
        res = simulate(capture_to_workload(CAPTURE), cluster="dgx-a100-superpod", record_timeline=False)
        step_ms = res.finish_ns / 1e6
    else:
        step = load_step(pytorch=CAPTURE)
        step_ms = step.total_ns / 1e6
        if case != "import":
            mode, gpus = case.split("-")
            w = parallelize(step, mode, int(gpus), batch=128, micro_batch=4 if mode == "pp" else None)
            step_ms = simulate(w, cluster="dgx-a100-superpod", record_timeline=False).finish_ns / 1e6
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": case, "wall_s": round(wall, 3), "rss_mb": round(rss), "step_ms": round(step_ms, 3)}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(_run(sys.argv[2])))
        return
    print(f"{'case':<10} {'wall (s)':>9} {'peak RSS':>9} {'step (ms)':>10}")
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['case']:<10} {r['wall_s']:>9.3f} {r['rss_mb']:>6} MB {r['step_ms']:>10.3f}")


if __name__ == "__main__":
    main()
