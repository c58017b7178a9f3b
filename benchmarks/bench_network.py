"""Network benchmarks (issue #3): the flow backend on datacenter fabrics.

Cases:
  * ring-1024: ring all-reduce (Simple) of 1 GiB on 1,024 GPUs of the dgx-a100-superpod
    preset with the flow backend (``podsim collective``'s path).  Target: under 2 s.
  * sim-ring-1024: the same all-reduce as a one-op workload through ``podsim simulate``'s
    engine (its 2,046 identical rounds: one simulated, the rest fast-forwarded exactly).
  * tp-dp-512: 64 concurrent 8-GPU tensor-parallel all-reduces (64 MiB, one per server) plus 8
    data-parallel rings (256 MiB, one per rail, 64 GPUs each, crossing the spines), all
    issued at once on 512 GPUs of dgx-a100-superpod, flow backend (``podsim simulate``'s path).
  * p2p-64: 20,000 point-to-point flows (4 KiB or 1 MiB, random pairs, random instants over
    10 ms) on 64 GPUs of dgx-h100, adaptive routing: one flow at a time, the flow network's
    worst case since issue #17 (its arrays pay per call); ``p2p-64-per-flow`` runs the same
    on the per-flow reference network, for the ratio (the same arrivals, checked by their sum).

  * scale-131k (issue #29): DGX H100 rails at 131,072 GPUs, in one process: the fabric
    (``podsim fabric``: build and summary), the all-reduce sweep of ``podsim collective``
    (1 KiB to 1 GiB, 21 sizes, analytical, adaptive routing) and ``podsim llm`` of Llama 3
    70B (TP 8, PP 4, SP, distributed optimizer, 8,192 x 8,192 tokens); CPU seconds of each
    part.  ``scale-1m``: the same at 1,048,576 GPUs (65,536 sequences), with ``--big`` only
    (about 80 s; up to 5 GB).

Each case runs in a fresh process; prints wall time, peak RSS, flows and flows solved per
second (flows whose rate a max-min solve computed, over wall time).

    python benchmarks/bench_network.py [--big]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time


def _ring_1024() -> dict:
    import podsim
    from podsim.collectives.nccl import Timer, communicator
    from podsim.collectives.nccl.selector import build
    from podsim.hardware.cluster import build_fabric, load_cluster

    t0 = time.perf_counter()
    spec = load_cluster("dgx-a100-superpod")
    fab = build_fabric(spec, 1024)
    t_build = time.perf_counter() - t0
    sched = build(communicator(fab), "all_reduce", 1 << 30, "ring", "Simple", spec.nccl)
    timer = Timer(fab, spec.nccl, "flow")
    t1 = time.perf_counter()
    res = timer.time(sched)
    t_sim = time.perf_counter() - t1
    table = podsim.collective(
        "all_reduce", spec, 1024, min_bytes="1G", max_bytes="1G", backend="flow", algorithm="ring", protocol="Simple"
    )
    wall = time.perf_counter() - t0
    flows = sum(s.flows for s in res.steps)
    return {
        "wall_s": wall,
        "build_s": t_build,
        "solve_s": t_sim,
        "flows": flows,
        "flows_per_s": flows / t_sim,
        "time_us": res.time_ns / 1000,
        "busbw_gbps": table.rows[0].busbw_gbps,
        "gpus": 1024,
    }


def _tp_dp_512() -> dict:
    from podsim.engine.cluster import simulate_cluster
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.workload import CollectiveKind, Group, OpKind, ProgramBuilder, Workload

    n, gpn = 512, 8
    b = ProgramBuilder("tp+dp")
    b.add(
        OpKind.COLLECTIVE,
        "tp all-reduce",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=64 << 20,
        node_id=1,
        group="tp",
    )
    b.add(
        OpKind.COLLECTIVE,
        "dp all-reduce",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=256 << 20,
        node_id=2,
        group="dp",
    )
    groups = [Group("tp", tuple(range(s * gpn, (s + 1) * gpn))) for s in range(n // gpn)]
    groups += [Group("dp", tuple(range(k, n, gpn))) for k in range(gpn)]
    w = Workload([b.build()], [0] * n, groups, "tp+dp")
    spec = load_cluster("dgx-a100-superpod")
    t0 = time.perf_counter()
    fab = build_fabric(spec, n)
    res = simulate_cluster(w, fab, spec.nccl, "flow", record_timeline=False)
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "flows": res.info["flows"],
        "solves": res.info["flow_solves"],
        "flows_per_s": res.info["flows"] / wall,
        "finish_us": res.finish_ns / 1000,
        "gpus": n,
        "collectives": res.info["collectives"],
    }


def _simulate_ring_1024() -> dict:
    from dataclasses import replace

    from podsim.engine.cluster import simulate_cluster
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    spec = load_cluster("dgx-a100-superpod")
    b = ProgramBuilder("ar")
    b.add(OpKind.COLLECTIVE, "ar", collective=int(CollectiveKind.ALL_REDUCE), size_bytes=1 << 30, node_id=1)
    w = Workload([b.build()], [0] * 1024, [], "ar")
    ring = replace(spec.nccl, algorithms=("ring",), protocols=("Simple",))
    t0 = time.perf_counter()
    res = simulate_cluster(w, build_fabric(spec, 1024), ring, "flow", record_timeline=False)
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "flows": res.info["flows"],
        "flows_per_s": res.info["flows"] / wall,
        "finish_us": res.finish_ns / 1000,
        "skipped": res.info["rounds_fast_forwarded"],
    }


def _p2p(reference: bool) -> dict:
    import random

    from podsim.engine.events import EventQueue
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.network.flow import FlowNetwork
    from podsim.network.flow.reference import ReferenceFlowNetwork

    fab = build_fabric(load_cluster("dgx-h100"), 64)
    rng = random.Random(1)
    msgs = [
        (rng.randrange(10_000_000), rng.randrange(64), rng.randrange(64), rng.choice([4096, 1 << 20]))
        for _ in range(20_000)
    ]
    q = EventQueue()
    net = (ReferenceFlowNetwork if reference else FlowNetwork)(fab, q)
    done = []
    for t, a, b, x in msgs:
        q.schedule(t, lambda _a, a=a, b=b, x=x: net.start(a, b, x, lambda: done.append(q.now)))
    t0 = time.perf_counter()
    q.run()
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "flows": net.flows_started,
        "solves": net.solves,
        "flows_per_s": net.flows_started / wall,
        "finish_us": q.now / 1000,
        "arrivals": sum(done),
    }


def _scale(gpus: int) -> dict:
    import contextlib
    import io

    import podsim
    from podsim.cli import main as cli
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.network.describe import describe_fabric

    t0, c0 = time.perf_counter(), time.process_time()
    fab = build_fabric(load_cluster("dgx-h100"), gpus)
    describe_fabric(fab)
    c1 = time.process_time()
    table = podsim.collective("all_reduce", "dgx-h100", gpus)
    c2 = time.process_time()
    out = io.StringIO()
    args = ["llm", "--model", "llama3-70b", "--gpu", "h100", "--gpus", str(gpus), "--tp", "8", "--pp", "4"]
    args += ["--global-batch", str(gpus // 16), "--sequence-parallel", "--distributed-optimizer"]
    with contextlib.redirect_stdout(out):
        rc = cli(args)
    c3 = time.process_time()
    mfu = next(line.split()[-2] for line in out.getvalue().splitlines() if line.strip().startswith("MFU"))
    return {
        "wall_s": time.perf_counter() - t0,
        "cpu_fabric_s": c1 - c0,
        "cpu_collective_s": c2 - c1,
        "cpu_llm_s": c3 - c2,
        "links": fab.num_links,
        "busbw_1g": table.rows[-1].busbw_gbps,
        "llm_rc": rc,
        "mfu": mfu,
        "gpus": gpus,
    }


CASES = {
    "ring-1024": _ring_1024,
    "sim-ring-1024": _simulate_ring_1024,
    "tp-dp-512": _tp_dp_512,
    "p2p-64": lambda: _p2p(False),
    "p2p-64-per-flow": lambda: _p2p(True),
    "scale-131k": lambda: _scale(131_072),
}
BIG = {"scale-1m": lambda: _scale(1_048_576)}


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        out = {**CASES, **BIG}[sys.argv[2]]()
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out))
        return 0
    print(f"{'case':<15} {'wall (s)':>9} {'RSS (MB)':>9} {'flows':>9} {'flows/s':>10}  result")
    for name in list(CASES) + (list(BIG) if "--big" in sys.argv else []):
        proc = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr)
            return 1
        r = json.loads(proc.stdout)
        if name == "ring-1024":
            extra = f"{r['time_us']:.0f} us, busbw {r['busbw_gbps']:.1f} GB/s (solve {r['solve_s']:.2f} s)"
        elif name == "sim-ring-1024":
            extra = f"finish {r['finish_us']:.0f} us, {r['skipped']} identical rounds fast-forwarded"
        elif name.startswith("scale"):
            print(
                f"{name:<15} {r['wall_s']:9.2f} {r['peak_rss_mb']:9.0f}  CPU: fabric {r['cpu_fabric_s']:.1f} s "
                f"({r['links']:,} links), all-reduce sweep {r['cpu_collective_s']:.1f} s (busbw at 1 GiB "
                f"{r['busbw_1g']:.1f} GB/s), llm {r['cpu_llm_s']:.1f} s (MFU {r['mfu']} %)"
            )
            continue
        elif name.startswith("p2p"):
            extra = f"finish {r['finish_us']:.0f} us, {r['solves']} solves, arrival sum {r['arrivals']}"
        else:
            extra = f"finish {r['finish_us']:.0f} us, {r['collectives']} collectives, {r['solves']} solves"
        print(
            f"{name:<15} {r['wall_s']:9.2f} {r['peak_rss_mb']:9.0f} {r['flows']:9d} {r['flows_per_s']:10.0f}  {extra}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
