"""Where a published training layout ranks in ``podsim search`` among the layouts
of the same job.

For a published training run (a row of podsim's shipped validation set: Megatron-LM SC'21,
Llama 3 405B, ...), search the layouts of the same model on the same GPUs with the same global
batch and sequence length, keeping the run's software settings (precision, recomputation,
overlap: :func:`podsim.validation.predict.layout_of`), and rank the published (TP, PP, CP, VPP)
among the searched ones, each at its best micro-batch and other settings.  Units: tokens/s, %.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..hardware.gpu import get_gpu
from ..validation.predict import layout_of, model_of
from .search import search
from .space import Space


def divisors(n: int, top: int) -> tuple[int, ...]:
    """The divisors of ``n`` up to ``top``."""
    return tuple(d for d in range(1, min(n, top) + 1) if n % d == 0)


def published_rank(r: dict[str, str], workers: int | None = None) -> dict[str, Any]:
    """Search around the run of row ``r``; ``rank`` (1: best) of its published (TP, PP, CP, VPP)
    among the ``groups`` searched, ``gap_pct`` its tokens/s below the best's, ``best`` the best
    (TP, PP, CP, VPP), ``evaluated`` layouts and ``wall_s``."""
    model = model_of(r)
    pub = layout_of(r, model)
    gpu = get_gpu(r["gpu"])
    old = r.get("framework", "").endswith("2021")
    layers = model.layers + (2 if pub.account_for_embedding else 1 if pub.account_for_loss else 0)
    base = replace(pub, pipeline_layers=None, vpp=1, schedule="1f1b")
    space = Space(
        gpus=(pub.gpus,),
        global_batch=pub.global_batch,
        seq_len=pub.seq_len,
        tp=(1, 2, 4, 8),
        pp=divisors(layers, 64),
        vpp=(1,) if old else (1, 2, 4),
        cp=(1,) if pub.cp == 1 else (1, 2, 4, 8, 16),
        micro_batch=(1, 2, 4, 8),
        recompute=(pub.recompute,) if old else ("none", "selective", "full"),
        sequence_parallel=(pub.sequence_parallel,) if old else (True, False),
        distributed_optimizer=(pub.distributed_optimizer,),
        zero=(pub.zero,),
        tp_overlap=(pub.tp_overlap,),
        base=base,
    )
    t = time.perf_counter()
    res = search(
        model,
        f"--model {r['model']}",
        space,
        r["gpu"],
        gpu.memory_gib,
        cluster=r.get("system") or None,
        workers=workers,
    )
    wall = time.perf_counter() - t
    groups: dict[tuple, float] = {}
    for row in res.rows:
        lay = row["layout"]
        key = (lay["tp"], lay["pp"], lay["cp"], lay["vpp"])
        groups[key] = max(groups.get(key, 0.0), row["tokens_per_s"])
    order = sorted(groups, key=lambda k: -groups[k])
    mine = (pub.tp, pub.pp, pub.cp, pub.vpp)
    rank = order.index(mine) + 1 if mine in groups else None
    return {
        "row": r["row_id"],
        "model": model.name,
        "gpus": pub.gpus,
        "published": mine,
        "rank": rank,
        "groups": len(order),
        "best": order[0],
        "gap_pct": 100 * (1 - groups[mine] / groups[order[0]]) if rank else None,
        "evaluated": res.evaluated,
        "wall_s": wall,
    }
