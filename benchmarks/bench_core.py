"""Core benchmarks (issue #2): wall time and peak memory of podsim's ASTRA-sim mode.

Cases (Ring topology, 50 GB/s, 500 ns; 4 splits, 1 active chunk, local-mem-bw 1600, LIFO):
  * ring all-reduce of 1 MiB on 512, 1,024 and 4,096 NPUs;
  * 8 layers of (500 us compute, then a 16 MiB all-reduce), the next compute depending only
    on the previous compute, on 512 NPUs.
Reference, ASTRA-sim 2.x analytical backend on a 2-core machine: 2.7 s, 18 s, 333 s (5.5 GB)
and 39 s.  Each case runs in a fresh process so its peak RSS is its own.

    python benchmarks/bench_core.py            # all cases
    python benchmarks/bench_core.py --full     # also simulate every rank (no symmetry) at 512
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

ASTRA_SIM_S = {"allreduce-512": 2.7, "allreduce-1024": 18.0, "allreduce-4096": 333.0, "layers8-512": 39.0}


def _case(name: str, symmetry: bool) -> dict:
    from podsim.collectives.plan import Algo
    from podsim.engine import SystemParams, simulate
    from podsim.network.topology import BlockKind, Dimension, Topology
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    kind, n = name.split("-")
    n = int(n)
    topo = Topology((Dimension(BlockKind.RING, n, 50 * 2**30 / 1e9, 500.0),))
    algos = {k: (Algo("ring"),) for k in CollectiveKind}
    params = SystemParams("LIFO", "localBWAware", 1, 4, 10, 1600.0, 1, algos)
    b = ProgramBuilder(kind)
    if kind == "allreduce":
        b.add(OpKind.COLLECTIVE, "ar", collective=int(CollectiveKind.ALL_REDUCE), size_bytes=1 << 20, node_id=1)
    else:
        prev = None
        for layer in range(8):
            c = b.add(
                OpKind.COMPUTE,
                f"l{layer}",
                duration_ns=500_000,
                node_id=2 * layer + 1,
                data_deps=[] if prev is None else [prev],
            )
            b.add(
                OpKind.COLLECTIVE,
                f"ar{layer}",
                collective=int(CollectiveKind.ALL_REDUCE),
                size_bytes=16 << 20,
                node_id=2 * layer + 2,
                data_deps=[c],
            )
            prev = c
    wl = Workload([b.build()], [0] * n)
    t0 = time.perf_counter()
    res = simulate(wl, topo, params, use_symmetry=symmetry, record_timeline=False)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "case": name,
        "symmetry": symmetry,
        "wall_s": wall,
        "peak_rss_mb": peak_mb,
        "finish_ns": res.finish_ns,
        "distinct_finish": len({x.finish_ns for x in res.ranks}),
        "simulated_ranks": res.info["simulated_ranks"],
        "messages": res.info["messages_simulated"],
    }


def expected_allreduce_ns(n: int) -> int:
    """Hand formula: 4 chunks of 256 KiB back to back; each (2n-1) bus + (2n-2) hops + (n-1) reductions."""
    m = (1 << 20) // 4 // n
    hop = int(500 + m / (50 * 2**30 / 1e9))
    red = 3 * int(m / 1600e9 * 1e9)
    return 4 * ((2 * n - 1) * 10 + (2 * n - 2) * hop + (n - 1) * red)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="also run 512 NPUs without the symmetry reduction")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--no-symmetry", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(_case(a.one, not a.no_symmetry)))
        return
    cases = [("allreduce-512", True), ("allreduce-1024", True), ("allreduce-4096", True), ("layers8-512", True)]
    if a.full:
        cases += [("allreduce-512", False), ("layers8-512", False)]
    print(
        f"{'case':<16} {'ranks simulated':>15} {'wall (s)':>9} {'peak RSS (MB)':>13} {'ASTRA-sim (s)':>13} "
        f"{'speed-up':>9} {'finish (ns)':>14}  check"
    )
    for name, sym in cases:
        cmd = [sys.executable, __file__, "--one", name] + ([] if sym else ["--no-symmetry"])
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        ref = ASTRA_SIM_S[name]
        check = "same on every rank" if out["distinct_finish"] == 1 else "RANKS DIFFER"
        if name.startswith("allreduce"):
            exp = expected_allreduce_ns(int(name.split("-")[1]))
            check += ", = hand formula" if out["finish_ns"] == exp else f", != hand formula {exp}"
        print(
            f"{name:<16} {out['simulated_ranks']:>15} {out['wall_s']:>9.3f} {out['peak_rss_mb']:>13.1f} "
            f"{ref:>13.1f} {ref / out['wall_s']:>8.0f}x {out['finish_ns']:>14,}  {check}"
        )


if __name__ == "__main__":
    main()
