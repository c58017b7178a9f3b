"""Ex-situ tracing (``podsim trace --fake-ranks``) against reality, and its cost.

1. Against a real job on this machine: small jobs run for real over gloo on the CPU
   (``--nproc``) and are traced rank by rank on the fake process group.  Per rank: whether both
   list the same calls (kind, bytes, group ranks, peer, order), and the fake-rank workload
   replayed with the real capture's measured time for each call, against the real step.
2. Cost: tracing and composing a 1,024-rank FSDP2 x TP 8 job of a small Llama config on the
   CPU, and simulating the result on DGX H100s.

Run: ``python benchmarks/bench_fake_ranks.py [--skip-real] [--skip-llama]`` (needs torch;
transformers for part 2).  Prints times in ms and s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _calls(folder: Path, rank: int) -> list[tuple]:
    data = json.loads((folder / f"comms.{rank}.json").read_text())
    return [(c["kind"], c["bytes"], tuple(c["ranks"]), c.get("peer")) for c in data["calls"]]


def against_real(work: Path, name: str, job: str, world: int, layout: str, batch: int) -> list[dict]:
    from podsim.api import simulate
    from podsim.capture import trace_ranks
    from podsim.formats.rank_traces import replay_with_measured

    fake = trace_ranks(f"podsim.examples.jobs:{job}", batch, work / f"{name}-fake", world, layout, steps=2)
    real = trace_ranks(f"podsim.examples.jobs:{job}", batch, work / f"{name}-real", world, layout, steps=2, nproc=world)
    w = replay_with_measured(fake.folder, real.folder)
    res = simulate(w, cluster="dgx-h100", use_symmetry=False)
    rows = []
    for r in range(world):
        rep = fake.layout.representative(r)
        same = _calls(fake.folder, rep) == _calls(real.folder, r) if rep == r else None
        got = res.ranks[r].finish_ns / 1e6
        rows.append(
            {
                "job": name,
                "rank": r,
                "same_calls": same,
                "calls": len(_calls(real.folder, r)),
                "real_ms": real.step_ms[r],
                "replayed_ms": round(got, 3),
                "error_pct": round(100 * (got - real.step_ms[r]) / real.step_ms[r], 2),
            }
        )
    return rows


def llama(work: Path, world: int) -> dict:
    from podsim.api import load_workload, simulate
    from podsim.capture import trace_ranks

    cfg = work / "llama" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 512,
                "intermediate_size": 1376,
                "num_attention_heads": 8,
                "num_key_value_heads": 8,
                "num_hidden_layers": 4,
                "vocab_size": 8192,
                "max_position_embeddings": 1024,
                "rms_norm_eps": 1e-5,
                "tie_word_embeddings": False,
            }
        )
    )
    t0 = time.perf_counter()
    c = trace_ranks(f"hf:{cfg}", 2, work / f"llama{world}", world, "tp=8,fsdp", steps=1, seq_len=128)
    t1 = time.perf_counter()
    w = load_workload(c.folder)
    t2 = time.perf_counter()
    res = simulate(w, cluster="dgx-h100")
    t3 = time.perf_counter()
    return {
        "ranks": w.num_ranks,
        "traced": len(c.ranks_traced),
        "trace_s": round(t1 - t0, 1),
        "compose_s": round(t2 - t1, 2),
        "simulate_s": round(t3 - t2, 2),
        "step_ms": round(res.finish_ns / 1e6, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--keep", metavar="DIR", help="keep the traces in DIR")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="podsim-fake-ranks-"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.skip_real:
        # the real job's processes each get one thread (podsim gives a process of an N-process job on
        # C cores C // N threads); the fake ranks are traced with the same, so compute compares
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // 4))
        rows = (
            against_real(work, "fsdp-tp", "mlp", 4, "tp=2,fsdp", 8)
            + against_real(work, "fsdp-tp-fixed", "fixed_time_mlp", 4, "tp=2,fsdp", 8)
            + against_real(work, "fsdp-2", "mlp", 2, "fsdp", 8)
            + against_real(work, "tp-2", "mlp", 2, "tp=2", 8)
            + against_real(work, "pipeline", "mlp", 2, "pp=2", 4)
            + against_real(work, "pipeline-fixed", "fixed_time_pipeline", 2, "pp=2", 4)
        )
        print(
            f"{'job':<14} {'rank':>4} {'same calls':>10} {'calls':>5} {'real (ms)':>10} {'replayed (ms)':>13} "
            f"{'error':>7}"
        )
        for r in rows:
            same = "traced" if r["same_calls"] is None else ("yes" if r["same_calls"] else "NO")
            print(
                f"{r['job']:<14} {r['rank']:>4} {same:>10} {r['calls']:>5} {r['real_ms']:>10.3f} "
                f"{r['replayed_ms']:>13.3f} {r['error_pct']:>6.2f}%"
            )
    os.environ.pop("OMP_NUM_THREADS", None)
    if not args.skip_llama:
        for world in (64, 1024):
            d = llama(work, world)
            print(
                f"Llama (4 layers, hidden 512), FSDP2 x TP 8 on {d['ranks']:>5} ranks: traced {d['traced']} ranks "
                f"in {d['trace_s']} s, composed in {d['compose_s']} s, simulated in {d['simulate_s']} s "
                f"(step {d['step_ms']} ms on DGX H100s)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
