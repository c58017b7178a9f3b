"""Serving benchmarks (issue #6): the simulation's cost as requests and GPUs grow.

Cases (DLSIM's V100 profile, fifo scheduler, DLSIM's overhead):
  * dlsim-50hz: the shipped 50 Hz, 60 s workload (2,976 requests) on Bert-125M inter-op, if the
    reference data is there (PODSIM_REFERENCE_DATA, default ../shared/data);
  * gen-100k-2gpu: 100,000 generated Poisson requests of 2 models on 2 GPUs (inter-op pipeline);
  * gen-100k-64gpu: 100,000 requests of 32 models, each on its own 2-stage pipeline (64 GPUs,
    8 nodes of 8).

Prints wall time (simulation only), requests per second of wall time and peak RSS.

    python benchmarks/bench_serving.py
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from podsim.serving import (
    generate_workload,
    load_profiles,
    read_workload,
    simulate_serving,
)
from podsim.serving.placement import (
    MeshExecutorSpec,
    Placement,
    ServeCluster,
    check_placement,
)


def _pipelines(models: int, gpus: int, per_node: int) -> Placement:
    """Model m's 2-stage pipeline on GPU pair m mod (gpus / 2)."""
    execs = []
    for m in range(models):
        g = 2 * (m % (gpus // 2))
        a, b = divmod(g, per_node), divmod(g + 1, per_node)
        execs.append(MeshExecutorSpec(f"s{m}", "Bert_125M", "Bert_125M_2_device_inter", ((a,), (b,)), ((1, 1), (1, 1))))
    return Placement("<generated>", execs)


def main() -> None:
    ex = load_profiles()
    cases = []
    ref = Path(os.environ.get("PODSIM_REFERENCE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    wl = ref / "dlsim" / "workload" / "test_workload_8to2_50Hz_60s"
    if wl.is_file():
        from podsim.serving import read_placement

        cases.append(
            (
                "dlsim-50hz",
                read_workload(wl),
                read_placement(ref / "dlsim" / "placements" / "placement_125M_interop.json"),
                ServeCluster(1, 2, 16 * 10**9),
            )
        )
    w2 = generate_workload(2, 100.0, 1000.0, proportions=[0.8, 0.2], seed=1)
    cases.append(("gen-100k-2gpu", w2, _pipelines(2, 2, 2), ServeCluster(1, 2, 16 * 10**9)))
    w64 = generate_workload(32, 1000.0, 100.0, seed=2)
    cases.append(("gen-100k-64gpu", w64, _pipelines(32, 64, 8), ServeCluster(8, 8, 16 * 10**9)))
    print(f"{'case':<16} {'requests':>9} {'GPUs':>5} {'wall (s)':>9} {'req/s':>10} {'peak RSS':>9}")
    for name, w, pl, cl in cases:
        check_placement(pl, ex, cl)
        t0 = time.perf_counter()
        r = simulate_serving(w, pl, ex, cl)
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{name:<16} {len(r.arrival_ns):>9,} {cl.num_gpus:>5} {wall:>9.3f} {len(r.arrival_ns) / wall:>10,.0f} "
            f"{rss:>6.0f} MB"
        )


if __name__ == "__main__":
    main()
