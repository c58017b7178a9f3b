"""LLM training benchmarks (issue #4): one simulated iteration, flow backend.

Cases:
  * gpt3-175b-1024: GPT-3 175B on 1,024 A100s (dgx-a100-superpod), TP 8, PP 16, DP 8, global
    batch 1536, micro-batch 1, 1F1B, sequence 2048.  Target: under 2 s.
  * llama3-405b-16384: Llama 3 405B on 16,384 H100s (dgx-h100), TP 8, PP 16 (7 layers on the
    first and last pipeline ranks, 8 on the others), DP 128, global batch 2048 x 8192 tokens,
    micro-batch 1, sequence parallelism, distributed optimizer.  Target: under 10 s.

Each case runs in a fresh process and prints: the wall and CPU time of the whole call (model,
fabric, workload generation, simulation), peak RSS, the simulated iteration time, flows, and
the same with every collective round simulated (``--rounds``) for comparison.

Then the commands (``COMMANDS``), each run as ``podsim llm ...`` in a fresh process: its CPU
time (user + sys, import included) and peak RSS.

  * gpt3-175b-1024-cli: the README's GPT-3 175B command (1,024 A100s, TP 8, PP 16, batch 1536,
    selective recompute, sequence parallelism, distributed optimizer) on the flow backend, with
    the Megatron-Core stack and ``--json``.  Target (issue #29): at most 2 s of CPU.

    python benchmarks/bench_llm.py [--rounds] [--trace]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CASES = {
    "gpt3-175b-1024": (
        "gpt3-175b",
        "a100-80gb",
        dict(gpus=1024, tp=8, pp=16, global_batch=1536, micro_batch=1, seq_len=2048),
    ),
    "llama3-405b-16384": (
        "llama3-405b",
        "h100-80gb",
        dict(
            gpus=16384,
            tp=8,
            pp=16,
            global_batch=2048,
            micro_batch=1,
            seq_len=8192,
            first_stage_layers=7,
            last_stage_layers=7,
            sequence_parallel=True,
            distributed_optimizer=True,
        ),
    ),
}


#: whole ``podsim llm`` commands, timed as a user runs them
COMMANDS = {
    "gpt3-175b-1024-cli": [
        "--model",
        "gpt3-175b",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "16",
        "--global-batch",
        "1536",
        "--recompute",
        "selective",
        "--sequence-parallel",
        "--distributed-optimizer",
        "--backend",
        "flow",
    ],
}


def _command(args: list[str]) -> dict:
    """``podsim llm args --json`` in a fresh process: its CPU time (s), peak RSS (MB), iteration."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "podsim", "llm", *args, "--json", out]
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, use = os.wait4(child.pid, 0)  # this child's own CPU time and peak RSS
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if child.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({child.returncode})")
        with open(out) as f:
            doc = json.load(f)
    return {
        "wall_s": wall,
        "cpu_s": use.ru_utime + use.ru_stime,
        "peak_rss_mb": use.ru_maxrss / 1024,
        "iteration_s": doc["iteration_time_s"],
    }


def _run(case: str, granularity: str, trace: bool) -> dict:
    from podsim.api.train import simulate_training
    from podsim.llm import get_model
    from podsim.llm.layout import Layout

    model, gpu, lay = CASES[case]
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = simulate_training(
        get_model(model),
        Layout(**lay),
        gpu,
        None,
        "flow",
        record_timeline=trace,
        granularity=granularity,
        allow_oom=True,
    )
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "case": case,
        "granularity": granularity,
        "timeline": trace,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "iteration_s": round(r.iteration_time_s, 4),
        "mfu": round(r.mfu, 4),
        "flows": r.result.info.get("flows"),
        "simulated_ranks": r.result.info.get("simulated_ranks"),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(_run(sys.argv[2], sys.argv[3], sys.argv[4] == "1")))
        return
    grains = ["bulk"] + (["round"] if "--rounds" in sys.argv else [])
    trace = "--trace" in sys.argv
    print(
        f"{'case':<20} {'granularity':<11} {'wall':>8} {'CPU':>8} {'peak RSS':>9} {'iteration':>10} {'MFU':>6} "
        f"{'flows':>9}"
    )
    for case in CASES:
        for g in grains:
            if case.startswith("llama3-405b") and g == "round":
                continue  # minutes: every round of 144 reduce-scatters over 128 GPUs as flows
            out = subprocess.run(
                [sys.executable, __file__, "--one", case, g, "1" if trace else "0"],
                capture_output=True,
                text=True,
                check=True,
            )
            d = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{case:<20} {g:<11} {d['wall_s']:>7.2f}s {d['cpu_s']:>7.2f}s {d['peak_rss_mb']:>7.0f}MB "
                f"{d['iteration_s']:>9.3f}s "
                f"{100 * d['mfu']:>5.1f}% {d['flows']:>9,}"
            )

    print(f"\n{'command':<20} {'wall':>8} {'CPU':>8} {'peak RSS':>9} {'iteration':>10}")
    for name, args in COMMANDS.items():
        d = _command(args)
        print(
            f"{name:<20} {d['wall_s']:>7.2f}s {d['cpu_s']:>7.2f}s {d['peak_rss_mb']:>7.0f}MB {d['iteration_s']:>9.3f}s"
        )


if __name__ == "__main__":
    main()
