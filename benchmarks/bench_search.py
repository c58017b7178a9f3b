"""podsim search at scale (issue #15): about 10,000 training layouts of Llama 3 70B on 1,024 H100s
screened with the analytical estimate, the best 32 simulated exactly, the best 20 re-run with the
flow backend.  Prints layouts per second, each pass's wall time and how far the screen's estimate
was from the simulation on the simulated layouts.

    python benchmarks/bench_search.py [--workers W]
"""

from __future__ import annotations

import argparse
import time

from podsim.hardware.gpu import get_gpu
from podsim.llm.model import get_model
from podsim.sweep.search import search
from podsim.sweep.space import Space


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--flow-top", type=int, default=20)
    args = ap.parse_args()
    model, gpu = get_model("llama3-70b"), get_gpu("h100")
    space = Space(
        gpus=(1024,),
        global_batch=1024,
        seq_len=8192,
        tp=(1, 2, 4, 8),
        pp=(1, 2, 4, 5, 8, 10, 16, 20),
        vpp=(1, 2, 4, 5),
        cp=(1, 2, 4, 8),
        micro_batch=(1, 2, 4, 8),
        tp_overlap=("te", "async"),
        overlap_grad_reduce=(True, False),
    )
    t = time.perf_counter()
    res = search(
        model,
        "--model llama3-70b",
        space,
        "h100",
        gpu.memory_gib,
        workers=args.workers,
        simulate_top=32,
        flow_top=args.flow_top,
    )
    wall = time.perf_counter() - t
    ph = res.phases_s
    print(f"podsim search: {model.name} on 1,024 x {gpu.name}, global batch 1024 x 8192")
    print(
        f"  space {space.size():,} points: {res.evaluated:,} layouts evaluated, "
        f"{sum(res.rejected.values()):,} rejected; {args.workers} workers"
    )
    print(f"  enumerate {ph['enumerate_s']:6.1f} s   ({space.size() / ph['enumerate_s']:,.0f} points/s)")
    print(f"  screen    {ph['screen_s']:6.1f} s   ({res.evaluated / ph['screen_s']:,.0f} layouts/s)")
    print(
        f"  simulate  {ph['simulate_s']:6.1f} s   ({res.simulated} layouts, "
        f"{ph['simulate_s'] / max(1, res.simulated) * args.workers:.2f} s each per worker)"
    )
    print(f"  flow      {ph['flow_s']:6.1f} s   ({res.flow} layouts)")
    print(f"  total     {wall:6.1f} s   ({res.evaluated / wall:,.0f} layouts/s end to end)")
    from podsim.llm.estimate import LayoutEstimator
    from podsim.llm.training import default_cluster
    from podsim.sweep.space import enumerate_layouts

    best = res.rows[0]
    print(
        f"  best: {best['tokens_per_s']:,.0f} tokens/s, MFU {best['mfu']:.3f}, {best['iteration_time_s']:.3f} s"
        + (f" (flow {best['flow']['iteration_time_s']:.3f} s)" if "flow" in best else "")
        + f"\n    {best['command']}"
    )
    # how far the estimate is from the simulation on the simulated rows
    sims = {r["command"]: r["iteration_time_s"] for r in res.rows if r["method"] == "simulated"}
    e = enumerate_layouts(model, space, gpu.memory_gib)
    est = LayoutEstimator(model, gpu, default_cluster(gpu, None, None, None))
    from podsim.sweep.search import llm_command

    errs = []
    for lay in e.layouts:
        cmd = llm_command("--model llama3-70b", lay, "h100", None, "analytical")
        if cmd in sims:
            errs.append(est.iteration_ns(lay) / 1e9 / sims[cmd] - 1)
    print(
        f"  estimate vs simulation on the {len(errs)} simulated: mean {sum(errs) / len(errs) * 100:+.2f}%, "
        f"worst {max(errs, key=abs) * 100:+.2f}%"
    )


if __name__ == "__main__":
    main()
