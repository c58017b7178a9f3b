"""Routers that read the replicas, at scale: the index (serving/llm/router_index.py) that brings up
to date only the replicas with events before an arrival and looks only at those whose bound may
win must choose the replica a scan of the whole pool chooses (``PoolIndex.scan``: every replica
advanced, the router's ``choose``).  Checked at every decision and on whole runs (many replica
counts, P/D, schedulers), and by hand on set states and on a decode run's bound."""

from __future__ import annotations

import pytest

from podsim.serving.llm import router_index
from podsim.serving.llm.kvcache import KVCache
from podsim.serving.llm.replica import INF, Replica
from podsim.serving.llm.requests import Request, generate, parse_generator
from podsim.serving.llm.router import make_router
from podsim.serving.llm.router_index import PoolIndex
from podsim.serving.llm.schedulers import make_scheduler
from podsim.serving.llm.sequence import Seq
from podsim.serving.llm.simulate import ServeConfig, simulate
from podsim.serving.llm.timing import LinearTimer

MS = 1_000_000
#: 1 ms a step plus 10 us a new token
T = LinearTimer(base_ns=MS, per_token_ns=10_000)
OBSERVING = ("least-outstanding", "jsq", "kv-aware")


def _replicas(n: int) -> list[Replica]:
    return [Replica(i, "mixed", T, KVCache(100), make_scheduler("vllm"), on_finish=lambda s, t: None) for i in range(n)]


# -- by hand ----------------------------------------------------------------------------------------


def test_the_index_on_set_states_takes_the_least_key_and_the_lowest_index_of_equal_ones() -> None:
    reps = _replicas(4)
    for r, out, tok, free, wait in zip(reps, (3, 1, 1, 2), (50, 90, 40, 40), (10, 30, 25, 30), (0, 25, 0, 5)):
        r.outstanding, r.pending_tokens, r.kv.free, r.waiting_blocks = out, tok, free, wait
    ix = {name: PoolIndex(reps, make_router(name)) for name in OBSERVING}  # type: ignore[arg-type]
    assert ix["least-outstanding"].choose(0) == 1  # 1 and 1 outstanding: the lower index
    assert ix["jsq"].choose(0) == 2  # 40 and 40 tokens: the lower index
    assert ix["kv-aware"].choose(0) == 2  # headroom 10, 5, 25, 25: the lower index
    # replica 1 finishes a request, replica 2 gets 30 tokens, replica 3 frees 20 blocks: touched
    reps[1].outstanding, reps[2].pending_tokens, reps[3].kv.free = 0, 70, 50
    for r in reps[1:]:
        for x in ix.values():
            x.touch(r, 1)
    assert [ix[name].choose(1) for name in OBSERVING] == [1, 3, 3]  # 0 outstanding; 40 tokens; 45 blocks


def test_a_decode_runs_token_bound_holds_until_the_last_step_it_counts() -> None:
    # one request of 10 prompt + 100 output tokens: the prefill ends at 1.10 ms, then a run of 98
    # decode steps of 1.01 ms from 1.10 ms (the 99th token finishes it, outside the run): step k
    # (0-based) ends at 1.10 + 1.01 (k + 1) ms.  Tokens to compute: 99 after the prefill.
    rep = _replicas(1)[0]
    rep.enqueue(Seq(Request(0, 0, 10, 100)), 0)
    rep.advance_ahead(5 * MS)  # the run timed to its end (RUN_AHEAD)
    assert rep.due() == 1_100_000 + 98 * 1_010_000
    # at 5 ms three steps are done (2.11, 3.12, 4.13 ms): 96 tokens left
    assert rep.pending_at(5 * MS) == 96
    # above a floor of 90, the bound may count five steps more: 91 tokens, until step 8's end
    # (10.19 ms: at most 8 steps are done up to then)
    assert rep.pending_bound(5 * MS, 90) == (91, 10_190_000)
    # at or above the tokens left, the bound is exact until the step in progress ends (5.14 ms)
    assert rep.pending_bound(5 * MS, 96) == (96, 5_140_000)
    # far below, every step timed: 99 - 97 = 2 tokens, until the run's end
    assert rep.pending_bound(5 * MS, -1000) == (2, rep.due())
    # without a run, the tokens left until another event
    idle = _replicas(1)[0]
    idle.pending_tokens = 7
    assert idle.pending_bound(5 * MS, 0) == (7, INF)


def test_prefill_replicas_done_at_once_hand_off_in_index_order() -> None:
    # P/D 2:2: two equal prompts at t = 0 go to prefill replicas 0 and 1 (least-outstanding) and
    # finish together; replica 0's completion comes first, so request 0 goes to decode replica 2
    # (both idle: the lower index) and request 1 to decode replica 3
    reqs = [Request(0, 0, 100, 4), Request(1, 0, 100, 4)]
    r = simulate(reqs, T, ServeConfig(pd=(2, 2), router="least-outstanding", kv_blocks=1000))
    assert r.replica == [2, 3]
    assert r.first_ns[0] == r.first_ns[1]


# -- against the scan --------------------------------------------------------------------------------

CASES = [
    # (replicas or P/D, scheduler, extra settings): a mixed pool, P/D's two pools, KV pressure
    (1, "vllm", {}),
    (3, "vllm", dict(kv_blocks=300)),  # preemptions
    (16, "vllm", {}),
    (64, "vllm", {}),
    (8, "vllm-v0", dict(kv_blocks=400, watermark=0.01)),
    (8, "sarathi", dict(chunk_size=256)),
    (8, "orca", dict(max_batched_tokens=2048)),
    (8, "static", {}),
    (8, "lightllm", dict(kv_blocks=600)),
    ((3, 5), "vllm", {}),
    ((5, 3), "vllm", dict(kv_blocks=400)),
]


def _config(shape: int | tuple[int, int], scheduler: str, router: str, extra: dict) -> ServeConfig:
    kw = dict(scheduler=scheduler, router=router, max_num_seqs=48, **extra)
    kw.setdefault("kv_blocks", 2000)
    if isinstance(shape, tuple):
        return ServeConfig(pd=shape, **kw)  # type: ignore[arg-type]
    return ServeConfig(replicas=shape, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("router", OBSERVING)
@pytest.mark.parametrize("shape, scheduler, extra", CASES)
def test_the_index_chooses_as_the_scan(
    shape: int | tuple[int, int], scheduler: str, extra: dict, router: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replicas = shape if isinstance(shape, int) else sum(shape)
    spec = f"poisson:{12 * replicas},prompt=lognormal:300:0.6,output=lognormal:60:0.8,seed={replicas}"
    reqs = generate(parse_generator(spec), min(80 * replicas, 1200))
    timer = LinearTimer(base_ns=8 * MS, per_token_ns=15_000, per_context_ns=300, kv_bytes_per_token=1.0)
    cfg = _config(shape, scheduler, router, extra)
    fast = simulate(reqs, timer, cfg, record_steps=True)
    choose = PoolIndex.choose
    decisions = []

    def checked(self: PoolIndex, now: int) -> int:
        got = choose(self, now)
        want = self.scan(now)  # every replica brought to now, the router's scan of the pool
        decisions.append((got, want))
        return want

    monkeypatch.setattr(router_index.PoolIndex, "choose", checked)
    checked_run = simulate(reqs, timer, cfg, record_steps=True)
    monkeypatch.setattr(router_index.PoolIndex, "choose", PoolIndex.scan)
    scan = simulate(reqs, timer, cfg, record_steps=True)
    assert len(decisions) >= len(reqs) and all(got == want for got, want in decisions)
    for r in (fast, checked_run):
        assert r.replica == scan.replica and r.first_ns == scan.first_ns and r.finish_ns == scan.finish_ns
        assert r.preemptions == scan.preemptions
        assert [[(x.stages, x.ids) for x in rep.records] for rep in r.replicas] == [
            [(x.stages, x.ids) for x in rep.records] for rep in scan.replicas
        ]
    assert min(fast.finish_ns) > 0 and (len(set(fast.replica)) > 1 or replicas == 1)
