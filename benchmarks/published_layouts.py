"""Do published best layouts rank at the top of podsim search?  (issue #15, "published best
layouts")

For each training run of Narayanan et al. 2021 (Megatron-LM, SC'21: Table 1 and the PTD-P rows of
Table 2) and of the Llama 3 405B pre-training (Llama Team 2024, Table 4), as podsim ships them
(src/podsim/validation/calibration.csv), search the layouts of the same model on the same GPUs
with the same global batch and sequence length, keeping the software settings of the run
(precision, recomputation, overlap: podsim.validation.predict.layout_of), and say where the
published (TP, PP, CP, VPP) ranks among the searched ones (each taken at its best micro-batch
and the other settings), and how far its throughput is from the best podsim finds.

    python benchmarks/published_layouts.py [--rows ID,ID,...] [--workers W]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from podsim.hardware.gpu import get_gpu
from podsim.sweep.search import search
from podsim.sweep.space import Space
from podsim.validation.predict import layout_of, model_of
from podsim.validation.rows import shipped_rows

ROWS = ("megatron_sc21_t1_", "megatron_sc21_t2_PTD_", "llama3_405b_")


def divisors(n: int, top: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, min(n, top) + 1) if n % d == 0)


def check(r: dict, workers: int) -> dict:
    model = model_of(r)
    pub = layout_of(r, model)
    gpu = get_gpu(r["gpu"])
    old = r.get("framework", "").endswith("2021")
    layers = model.layers + (2 if pub.account_for_embedding else 1 if pub.account_for_loss else 0)
    base = replace(pub, pipeline_layers=None, vpp=1, schedule="1f1b")
    space = Space(gpus=(pub.gpus,), global_batch=pub.global_batch, seq_len=pub.seq_len, tp=(1, 2, 4, 8),
                  pp=divisors(layers, 64), vpp=(1,) if old else (1, 2, 4),
                  cp=(1,) if pub.cp == 1 else (1, 2, 4, 8, 16), micro_batch=(1, 2, 4, 8),
                  recompute=(pub.recompute,) if old else ("none", "selective", "full"),
                  sequence_parallel=(pub.sequence_parallel,) if old else (True, False),
                  distributed_optimizer=(pub.distributed_optimizer,), zero=(pub.zero,),
                  tp_overlap=(pub.tp_overlap,), base=base)
    t = time.perf_counter()
    res = search(model, f"--model {r['model']}", space, r["gpu"], gpu.memory_gib, cluster=r.get("system") or None,
                 workers=workers)
    wall = time.perf_counter() - t
    groups: dict[tuple, float] = {}
    for row in res.rows:
        lay = row["layout"]
        key = (lay["tp"], lay["pp"], lay["cp"], lay["vpp"])
        groups[key] = max(groups.get(key, 0.0), row["tokens_per_s"])
    order = sorted(groups, key=lambda k: -groups[k])
    mine = (pub.tp, pub.pp, pub.cp, pub.vpp)
    rank = order.index(mine) + 1 if mine in groups else None
    return {"row": r["row_id"], "model": model.name, "gpus": pub.gpus, "published": mine, "rank": rank,
            "groups": len(order), "best": order[0], "gap_pct": 100 * (1 - groups[mine] / groups[order[0]]) if rank else None,
            "evaluated": res.evaluated, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="", help="row ids (prefixes) to check, comma-separated (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    want = tuple(x for x in args.rows.split(",") if x) or ROWS
    seen, rows = set(), []
    for r in shipped_rows(("fitted", "reported")):
        cid = r["row_id"].rsplit("_", 1)[0]
        if r.get("category", "training_throughput") and cid.startswith(want) and cid not in seen \
                and r.get("framework") and "t2_ZeRO" not in cid:
            seen.add(cid)
            rows.append(r)
    print(f"{'run':<34} {'GPUs':>6}  {'published (tp,pp,cp,vpp)':<24} {'rank':>9}  {'gap':>6}  {'podsim best':<16} "
          f"{'layouts':>7} {'time':>6}")
    for r in rows:
        c = check(r, args.workers)
        rank = f"{c['rank']}/{c['groups']}" if c["rank"] else "not kept"
        gap = f"{c['gap_pct']:5.1f}%" if c["gap_pct"] is not None else "   -"
        print(f"{c['row']:<34} {c['gpus']:>6}  {str(c['published']):<24} {rank:>9}  {gap:>6}  {str(c['best']):<16} "
              f"{c['evaluated']:>7} {c['wall_s']:5.1f}s", flush=True)


if __name__ == "__main__":
    main()
