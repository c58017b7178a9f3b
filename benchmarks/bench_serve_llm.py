"""LLM serving benchmarks (issues #16, #29): the simulation's cost as requests and replicas grow.

Cases (vLLM V1 with `vllm serve`'s H100 defaults: 8192 batched tokens, 1024 sequences; round-robin
router unless --router says otherwise):
  * azure-conv-4: Llama 2 70B, TP 4 on H100s: the Azure LLM conversation trace (19,366 requests,
    one hour) on 4 replicas, if the reference data is there (PODSIM_REFERENCE_DATA, default
    ../shared/data); target <= 20 s CPU;
  * gen-100k-16: the same replicas, 100,000 Poisson requests at 22/s (prompts lognormal, median
    1020, sigma 0.8; outputs lognormal, median 129, sigma 0.9: the conversation trace's medians)
    on 16 replicas; target <= 60 s CPU;
  * gen-100k-1, gen-1m-1: Llama 3 8B on one H100 at 25 requests/s of 1,024 + 128 tokens (a load
    it keeps up with: `podsim serve-llm --model llama3-8b --gpu h100 --workload poisson:25`),
    10^5 and 10^6 requests; target <= 60 s (issue #29: 10^6 requests in under a minute);
  * gen-1m-1000 (only with --case): the same on 1,000 replicas at 25,000 requests/s;
  * routing cases, for the routers that read the replicas (--router least-outstanding,jsq,kv-aware;
    `podsim serve-llm --model llama3-8b --gpu h100 --workload poisson:2500 --requests 100000
    --replicas 100 --router jsq`): 100,000 requests at 2,500/s (1,024 + 128 tokens) on 100
    replicas (route-100k-100) and on 1,000 (route-100k-1000); only with --case, 10^6 requests on
    100 replicas (route-1m-100) and 10^5 requests on 10^5 replicas (route-100k-100000); target
    <= 60 s (issue: 10^6 requests in under a minute, 10^5 replicas practical).

Step times from podsim's compute model (``podsim infer``'s step timer, the default), or from a
linear timer (``--timer linear``: 15 ms + 30 us a new token + 50 ns a context token, a stage).
Prints CPU and wall time of the simulation alone, requests simulated per CPU second, steps, and
the process's peak RSS (run one case a process, ``--case``, for each case's own).

    python benchmarks/bench_serve_llm.py [--timer podsim|linear] [--router NAME[,NAME...]] [--case NAME]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from podsim.serving.llm.requests import generate, parse_generator, read_trace
from podsim.serving.llm.simulate import ServeConfig, simulate
from podsim.serving.llm.timing import LinearTimer

#: the Llama 2 70B replica's cases, and the Llama 3 8B ones
SEVENTY_B = ("azure-conv-4", "gen-100k-16")
#: the routing cases: (requests, replicas), all at 2,500 requests/s; the last two only with --case
ROUTING = {
    "route-100k-100": (100_000, 100),
    "route-100k-1000": (100_000, 1000),
    "route-1m-100": (1_000_000, 100),
    "route-100k-100000": (100_000, 100_000),
}
CASES = (*SEVENTY_B, "gen-100k-1", "gen-1m-1", "gen-1m-1000", *ROUTING)


def _timer(kind: str, model: str, tp: int):  # type: ignore[no-untyped-def]
    if kind == "linear":
        return LinearTimer(
            base_ns=15_000_000,
            per_token_ns=30_000,
            per_context_ns=50,
            kv_bytes_per_token=81_920,
            kv_capacity_bytes=40 * 2**30,
        )
    from podsim.llm.model import get_model
    from podsim.serving.llm.step_timer import step_timer

    return step_timer(get_model(model), "h100", tp=tp, max_batched_tokens=8192, max_num_seqs=1024)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timer", default="podsim", choices=["podsim", "linear"])
    ap.add_argument("--router", default="round-robin", help="a router, or several separated by commas")
    ap.add_argument("--case", default=None, choices=CASES)
    args = ap.parse_args()
    cases = []
    ref = Path(os.environ.get("PODSIM_REFERENCE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    conv = ref / "llm-serving" / "azure_llm_2023_conv.csv"
    if args.case in (None, "azure-conv-4"):
        if conv.is_file():
            cases.append(("azure-conv-4", lambda: read_trace(conv), 4, 20.0))
        else:
            print(f"(skipping azure-conv-4: {conv} not found)")
    if args.case in (None, "gen-100k-16"):
        spec = parse_generator("poisson:22,prompt=lognormal:1020:0.8,output=lognormal:129:0.9,seed=0")
        cases.append(("gen-100k-16", lambda spec=spec: generate(spec, 100_000), 16, 60.0))
    for name, n, replicas in (("gen-100k-1", 100_000, 1), ("gen-1m-1", 1_000_000, 1), ("gen-1m-1000", 1_000_000, 1000)):
        if args.case == name or (args.case is None and replicas == 1):
            spec = parse_generator(f"poisson:{25 * replicas},prompt=1024,output=128,seed=0")
            cases.append((name, lambda spec=spec, n=n: generate(spec, n), replicas, 60.0))
    for name, (n, replicas) in ROUTING.items():
        if args.case == name or (args.case is None and replicas <= 1000 and n <= 100_000):
            spec = parse_generator("poisson:2500,prompt=1024,output=128,seed=0")
            cases.append((name, lambda spec=spec, n=n: generate(spec, n), replicas, 60.0))
    routers = [x.strip() for x in args.router.split(",")]
    print(f"timer: {args.timer}; routers: {', '.join(routers)}")
    print(
        f"{'case':<17} {'router':<17} {'requests':>9} {'replicas':>8} {'steps':>10} {'CPU (s)':>8} "
        f"{'wall (s)':>8} {'req/CPU s':>10} {'target':>7}  TTFT p50 / TPOT p50 (ms)"
    )
    for name, load, replicas, target in cases:
        timer = _timer(args.timer, *(("llama2-70b", 4) if name in SEVENTY_B else ("llama3-8b", 1)))
        reqs = load()
        for router in routers:
            cfg = ServeConfig(
                replicas=replicas, scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024, router=router
            )
            c0, w0 = time.process_time(), time.perf_counter()
            r = simulate(reqs, timer, cfg)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            d = r.stats()
            steps = sum(x.steps for x in r.replicas)
            print(
                f"{name:<17} {router:<17} {len(reqs):>9,} {replicas:>8} {steps:>10,} {cpu:>8.1f} {wall:>8.1f} "
                f"{len(reqs) / cpu:>10,.0f} {'ok' if cpu <= target else 'SLOW':>7}  "
                f"{1e3 * (d['ttft_p50_s'] or 0):.1f} / {1e3 * (d['tpot_p50_s'] or 0):.2f}",
                flush=True,
            )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
