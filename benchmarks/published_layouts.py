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

from podsim.sweep.published import published_rank
from podsim.validation.rows import shipped_rows

ROWS = ("megatron_sc21_t1_", "megatron_sc21_t2_PTD_", "llama3_405b_")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="", help="row ids (prefixes) to check, comma-separated (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    want = tuple(x for x in args.rows.split(",") if x) or ROWS
    seen, rows = set(), []
    for r in shipped_rows(("fitted", "reported")):
        cid = r["row_id"].rsplit("_", 1)[0]
        if (
            r.get("category", "training_throughput")
            and cid.startswith(want)
            and cid not in seen
            and r.get("framework")
            and "t2_ZeRO" not in cid
        ):
            seen.add(cid)
            rows.append(r)
    print(
        f"{'run':<34} {'GPUs':>6}  {'published (tp,pp,cp,vpp)':<24} {'rank':>9}  {'gap':>6}  {'podsim best':<16} "
        f"{'layouts':>7} {'time':>6}"
    )
    for r in rows:
        c = published_rank(r, args.workers)
        rank = f"{c['rank']}/{c['groups']}" if c["rank"] else "not kept"
        gap = f"{c['gap_pct']:5.1f}%" if c["gap_pct"] is not None else "   -"
        print(
            f"{c['row']:<34} {c['gpus']:>6}  {str(c['published']):<24} {rank:>9}  {gap:>6}  {str(c['best']):<16} "
            f"{c['evaluated']:>7} {c['wall_s']:5.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
