"""The layout's process groups, now read off a rank grid in arrays (issue #29: a million GPUs),
are the groups of the position-by-position construction they replace (kept here as the
reference), in the same order, for dense, context-parallel and expert layouts."""

from __future__ import annotations

import pytest

from podsim.llm.generate import build_groups, rank_of
from podsim.llm.layout import Layout


def reference_dense_groups(layout: Layout) -> list[tuple[str, tuple[int, ...]]]:
    t, c, d, p = layout.tp, layout.cp, layout.dp, layout.pp
    out = []
    for pp in range(p):
        for dp in range(d):
            for cp in range(c):
                out.append(("tp", tuple(rank_of(layout, i, cp, dp, pp) for i in range(t))))
        for tp in range(t):
            for dp in range(d):
                if c > 1:
                    out.append(("cp", tuple(rank_of(layout, tp, i, dp, pp) for i in range(c))))
            out.append(("dp", tuple(rank_of(layout, tp, cp, i, pp) for i in range(d) for cp in range(c))))
    pp_groups = []
    if p > 1:
        for tp in range(t):
            for cp in range(c):
                for dp in range(d):
                    pp_groups.append(("pp", tuple(rank_of(layout, tp, cp, dp, s) for s in range(p))))
    return out, pp_groups


@pytest.mark.parametrize(
    "kw",
    [
        dict(gpus=64, tp=8, pp=4, global_batch=64, seq_len=128),
        dict(gpus=96, tp=2, pp=3, cp=4, global_batch=48, seq_len=128),
        dict(gpus=16, tp=1, pp=1, global_batch=16, seq_len=128),
        dict(gpus=48, tp=4, pp=2, cp=2, ep=2, global_batch=48, seq_len=128),
    ],
)
def test_groups_are_the_reference_groups(kw: dict) -> None:
    lay = Layout(**kw)
    got = [(g.name, g.ranks) for g in build_groups(lay)]
    dense, pp = reference_dense_groups(lay)
    assert got[: len(dense)] == dense  # TP, CP and DP groups stage by stage
    assert got[len(got) - len(pp) :] == pp  # PP groups last
    assert all(isinstance(r, int) for _, ranks in got for r in ranks)
