"""The serving papers' directional claims on podsim (issue #16), as markdown tables for the docs.

1. Chunked prefill raises capacity under a TPOT SLO over vLLM V0's prefill-first policy on long
   prompts (Sarathi-Serve, OSDI'24): Llama 3 70B, TP 4 on H100s, one replica; prompts of
   4096-7168 tokens, outputs of 150-250; capacity = the highest Poisson rate at which 99% of
   requests meet TTFT <= 5 s and TPOT <= 60 ms (and, looser, 100 ms).
2. Disaggregation wins under tight TPOT SLOs (DistServe, OSDI'24; Splitwise, ISCA'24): 16 H100s
   as 4 replicas of Llama 3 70B at TP 4, mixed or split 2 prefill : 2 decode (KV over a 50 GB/s
   link); prompts of 1024-3072 tokens, outputs of 128-384; capacity at TTFT <= 2 s and
   TPOT <= 30 ms (tight) or 100 ms (loose).
3. More TP lowers TPOT with diminishing returns: Llama 3 8B on 1-8 H100s, one replica, vLLM V1,
   4 requests/s, prompts of 512-1536 tokens, outputs of 128-384; TPOT = the requests' mean.

Capacities for the first seed (the one tests/test_serve_llm_directional.py uses) and the ratio's
range over every seed.  Runs of 500 (check 1) and 1500 (check 2) requests: a capacity bound by
throughput (TTFT growing without bound) is overestimated by short runs, which end before the
queues have grown (check 2's loose-SLO capacity of 4 mixed replicas: 35 req/s in runs of 300
requests, 21 with 1000, 19 with 3000); the tight-SLO capacities hardly move (P/D 15.5, 14.5,
14.0).  A capacity whose run at that rate still ended too soon (:func:`~podsim.serving.llm.deployment.
transient_note`: arrivals over less than 10 mean end-to-end latencies) is marked with a dagger.
Prints its own run time (about 1.5-2 min on one core).

    python benchmarks/serving_directions.py [--seeds 1,2,3] [--requests-long 500] [--requests-pd 1500]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from podsim.llm.model import get_model
from podsim.serving.llm.capacity import find_capacity
from podsim.serving.llm.deployment import transient_note
from podsim.serving.llm.requests import Request, generate, parse_generator
from podsim.serving.llm.schedulers import vllm_v0_defaults
from podsim.serving.llm.simulate import ServeConfig, link_transfer, simulate
from podsim.serving.llm.step_timer import step_timer

LONG_PROMPTS = "poisson:1,prompt=uniform:4096-7168,output=uniform:150-250"
PD_WORKLOAD = "poisson:1,prompt=uniform:1024-3072,output=uniform:128-384"
TP_WORKLOAD = "poisson:4,prompt=uniform:512-1536,output=uniform:128-384"


def _timer(model: str, tp: int):  # type: ignore[no-untyped-def]
    return step_timer(get_model(model), "h100", tp=tp, max_batched_tokens=8192, max_num_seqs=1024)


#: capacities whose run at that rate ended before its queues could fill
TRANSIENT: set[tuple[str, int, float]] = set()


def _capacity(
    spec: str,
    seed: int,
    n: int,
    timer,
    cfg: ServeConfig,
    start: float,  # type: ignore[no-untyped-def]
    transfer: Callable[[int, int, int], int] | None = None,
) -> float:
    """The highest rate (req/s) at which 99% of ``n`` requests meet ``cfg``'s SLOs."""
    gen = parse_generator(f"{spec},seed={seed}")

    def run(q: float):  # type: ignore[no-untyped-def]
        reqs: list[Request] = generate(gen.with_qps(q), n)
        return simulate(reqs, timer, cfg, transfer_ns=transfer)

    cap = find_capacity(run, 0.99, start_qps=start, rel_tol=0.05)
    if cap.result is not None and transient_note(cap.result):
        TRANSIENT.add((spec, seed, cap.qps))
    return cap.qps


def _cell(spec: str, seed: int, qps: float) -> str:
    """A capacity (req/s), with a dagger if its run was too short to be steady."""
    return f"{qps:.2f}" + (" †" if (spec, seed, qps) in TRANSIENT else "")


def _ratios(caps: dict[int, float], base: dict[int, float]) -> tuple[float, float]:
    r = [caps[s] / base[s] for s in caps]
    return min(r), max(r)


def chunked_prefill(seeds: list[int], n: int) -> list[str]:
    timer = _timer("llama3-70b", 4)
    tokens, seqs = vllm_v0_defaults(get_model("llama3-70b").seq_len)
    confs = [
        (
            "vLLM V0 prefill-first (`vllm-v0`, 8192 tokens, 256 seqs)",
            dict(scheduler="vllm-v0", max_batched_tokens=tokens, max_num_seqs=seqs),
        ),
        (
            "vLLM V1 chunked, `vllm serve` H100 budget (8192 tokens)",
            dict(scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024),
        ),
        ("vLLM V1 chunked, 512-token budget", dict(scheduler="vllm", max_batched_tokens=512, max_num_seqs=256)),
        ("Sarathi-Serve, 512-token chunks", dict(scheduler="sarathi", chunk_size=512, max_num_seqs=256)),
    ]
    out = [
        "### 1. Chunked prefill vs prefill-first on long prompts (Sarathi-Serve)",
        "",
        "Llama 3 70B, TP 4 on H100, 1 replica; Poisson, prompts uniform 4096-7168, outputs uniform 150-250, "
        f"{n} requests a run; capacity: 99% meet TTFT <= 5 s and the TPOT SLO. Ratios: vs vLLM V0, over seeds "
        f"{','.join(map(str, seeds))}.",
        "",
        "| scheduler | capacity, TPOT <= 60 ms (req/s) | ratio | capacity, TPOT <= 100 ms (req/s) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    caps: dict[tuple[str, float], dict[int, float]] = {}
    for name, kw in confs:
        for tpot in (0.06, 0.1):
            cfg = ServeConfig(slo_ttft_s=5.0, slo_tpot_s=tpot, **kw)  # type: ignore[arg-type]
            caps[name, tpot] = {s: _capacity(LONG_PROMPTS, s, n, timer, cfg, 1.0) for s in seeds}
    base = confs[0][0]
    for name, _ in confs:
        cells = []
        for tpot in (0.06, 0.1):
            c = caps[name, tpot]
            lo, hi = _ratios(c, caps[base, tpot])
            cells += [
                _cell(LONG_PROMPTS, seeds[0], c[seeds[0]]),
                "1" if name == base else f"{c[seeds[0]] / caps[base, tpot][seeds[0]]:.2f} ({lo:.2f}-{hi:.2f})",
            ]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    # the mechanism at 1 request/s, first seed
    reqs = generate(parse_generator(f"{LONG_PROMPTS},seed={seeds[0]}"), n)
    a = simulate(reqs, timer, ServeConfig(**confs[0][1])).stats()  # type: ignore[arg-type]
    b = simulate(reqs, timer, ServeConfig(**confs[3][1])).stats()  # type: ignore[arg-type]
    out += [
        "",
        f"At 1 req/s (seed {seeds[0]}): vLLM V0 TTFT p50 {a['ttft_p50_s']:.2f} s, TPOT p50 / p99 "
        f"{1e3 * a['tpot_p50_s']:.1f} / {1e3 * a['tpot_p99_s']:.1f} ms; Sarathi (512) TTFT p50 "
        f"{b['ttft_p50_s']:.2f} s, TPOT p50 / p99 {1e3 * b['tpot_p50_s']:.1f} / {1e3 * b['tpot_p99_s']:.1f} ms.",
    ]
    lo, hi = _ratios(caps[confs[3][0], 0.06], caps[base, 0.06])
    summary = (
        f"| 1. chunked prefill > prefill-first, TPOT SLO, long prompts | 70B TP4, prompts 4-7k, TTFT 5 s, "
        f"TPOT 60 ms | Sarathi-512 {caps[confs[3][0], 0.06][seeds[0]]:.2f} vs V0 "
        f"{caps[base, 0.06][seeds[0]]:.2f} req/s | {lo:.2f}-{hi:.2f}x | {'yes' if lo > 1 else 'NO'} |"
    )
    return [summary] + out


def disaggregation(seeds: list[int], n: int) -> list[str]:
    timer = _timer("llama3-70b", 4)
    link = link_transfer()
    confs = [
        (
            "4 mixed, vLLM V1 (8192 tokens, 1024 seqs)",
            dict(replicas=4, scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024),
        ),
        (
            "4 mixed, Sarathi (512-token chunks)",
            dict(replicas=4, scheduler="sarathi", chunk_size=512, max_num_seqs=1024),
        ),
        ("4 mixed, vLLM V0 prefill-first", dict(replicas=4, scheduler="vllm-v0")),
        (
            "P/D 2:2, vLLM V1 (8192 tokens), KV at 50 GB/s",
            dict(pd=(2, 2), scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024),
        ),
    ]
    caps: dict[tuple[str, float], dict[int, float]] = {}
    for name, kw in confs:
        for tpot in (0.03, 0.1):
            cfg = ServeConfig(slo_ttft_s=2.0, slo_tpot_s=tpot, **kw)  # type: ignore[arg-type]
            caps[name, tpot] = {s: _capacity(PD_WORKLOAD, s, n, timer, cfg, 8.0, link) for s in seeds}
    pd = confs[3][0]
    out = [
        "### 2. Prefill/decode disaggregation vs mixed replicas (DistServe, Splitwise)",
        "",
        "16 H100s: Llama 3 70B at TP 4 as 4 mixed replicas or 2 prefill + 2 decode; Poisson, prompts uniform "
        f"1024-3072, outputs uniform 128-384, {n} requests a run; capacity: 99% meet TTFT <= 2 s and the TPOT "
        f"SLO. Ratios: P/D over the row, over seeds {','.join(map(str, seeds))}.",
        "",
        "| replicas | capacity, TPOT <= 30 ms (req/s) | P/D ratio | capacity, TPOT <= 100 ms (req/s) | P/D ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, _ in confs:
        cells = []
        for tpot in (0.03, 0.1):
            c = caps[name, tpot]
            lo, hi = _ratios(caps[pd, tpot], c)
            cells += [
                _cell(PD_WORKLOAD, seeds[0], c[seeds[0]]),
                "1" if name == pd else f"{caps[pd, tpot][seeds[0]] / c[seeds[0]]:.2f} ({lo:.2f}-{hi:.2f})",
            ]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    best = {s: max(caps[name, 0.03][s] for name, _ in confs[:3]) for s in seeds}
    lo, hi = _ratios(caps[pd, 0.03], best)
    llo, lhi = _ratios(caps[pd, 0.1], caps[confs[0][0], 0.1])
    summary = (
        f"| 2. P/D > mixed under a tight TPOT SLO (equal GPUs) | 16 H100, 70B TP4, 2:2 vs 4 mixed, TTFT 2 s, "
        f"TPOT 30 ms | P/D {caps[pd, 0.03][seeds[0]]:.2f} vs best mixed {best[seeds[0]]:.2f} req/s "
        f"(TPOT 100 ms: {caps[pd, 0.1][seeds[0]]:.2f} vs {caps[confs[0][0], 0.1][seeds[0]]:.2f}) | "
        f"{lo:.2f}-{hi:.2f}x (loose: {llo:.2f}-{lhi:.2f}x) | {'yes' if lo > 1 else 'NO'} |"
    )
    return [summary] + out


def tensor_parallelism(seeds: list[int], n: int) -> list[str]:
    rows = []
    per_seed: dict[int, list[float]] = {}
    for s in seeds:
        reqs = generate(parse_generator(f"{TP_WORKLOAD},seed={s}"), n)
        per_seed[s] = []
        for tp in (1, 2, 4, 8):
            timer = _timer("llama3-8b", tp)
            r = simulate(reqs, timer, ServeConfig(scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024))
            per_seed[s].append(r.stats()["tpot_mean_s"])
            if s == seeds[0]:
                rows.append((tp, r.stats(), timer.stage_ns([(1, 1000)]) / 1e6))
    t = per_seed[seeds[0]]
    out = [
        "### 3. More TP lowers TPOT with diminishing returns",
        "",
        f"Llama 3 8B on H100, 1 replica, vLLM V1 (8192 tokens, 1024 seqs); Poisson 4 req/s, prompts uniform "
        f"512-1536, outputs uniform 128-384, {n} requests; seed {seeds[0]} (gain range over seeds "
        f"{','.join(map(str, seeds))}).",
        "",
        "| TP | TPOT mean (ms) | TPOT p99 (ms) | TTFT p50 (ms) | decode step, batch 1 (ms) | gain over TP/2 | ideal |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, (tp, d, step) in enumerate(rows):
        if i:
            g = [per_seed[s][i - 1] / per_seed[s][i] for s in seeds]
            gain = f"{t[i - 1] / t[i]:.2f} ({min(g):.2f}-{max(g):.2f})"
        else:
            gain = "-"
        out.append(
            f"| {tp} | {1e3 * d['tpot_mean_s']:.2f} | {1e3 * d['tpot_p99_s']:.2f} | {1e3 * d['ttft_p50_s']:.1f} "
            f"| {step:.2f} | {gain} | {'2.00' if i else '-'} |"
        )
    gains = [[per_seed[s][i] / per_seed[s][i + 1] for i in range(3)] for s in seeds]
    ok = all(g[0] > g[1] > g[2] > 1 for g in gains)
    steps = " / ".join(f"{a / b:.2f}" for a, b in zip(t, t[1:]))
    summary = (
        f"| 3. more TP lowers TPOT, diminishing | 8B on 1/2/4/8 H100, 4 req/s | TPOT "
        f"{' / '.join(f'{1e3 * x:.2f}' for x in t)} ms | gains {steps} | {'yes' if ok else 'NO'} |"
    )
    return [summary] + out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3", help="workload seeds (the first is the tests')")
    ap.add_argument("--requests-long", type=int, default=500, help="requests a run of check 1")
    ap.add_argument("--requests-pd", type=int, default=1500, help="requests a run of check 2")
    ap.add_argument("--requests-tp", type=int, default=200, help="requests a run of check 3")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    parts = [
        chunked_prefill(seeds, args.requests_long),
        disaggregation(seeds, args.requests_pd),
        tensor_parallelism(seeds, args.requests_tp),
    ]
    print("## Serving directions in podsim (issue #16)\n")
    print("| check | setting | numbers (first seed) | ratio (all seeds) | holds |")
    print("|---|---|---|---|---|")
    for p in parts:
        print(p[0])
    for p in parts:
        print()
        print("\n".join(p[1:]))
    if TRANSIENT:
        print(
            "\n† the run at that rate ended before its queues could fill (arrivals over less than 10 mean "
            "end-to-end latencies): optimistic"
        )
    print(f"\n(run time {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
