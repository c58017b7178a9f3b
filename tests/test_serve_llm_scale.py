"""Serving at scale (issue #29): a replica's decoding requests step as one aggregate
(serving/llm/decode_group.py), step timers time a batch from its decodes' count and total
context, and counts beyond the machine's memory are refused up front.  Expectations are derived
by hand (a linear step timer: ``base + per_token x (new tokens)`` ns a step), or come from the
one-by-one simulation (``fast=False``) and the plain ``stage_ns`` of an explicit batch."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.llm.model import get_model
from podsim.report.serving_llm import REPLICA_LINES, format_serve_llm_run
from podsim.serving.llm.decode_group import DecodeGroup
from podsim.serving.llm.footprint import REPLICA_BYTES, REQUEST_BYTES, check_footprint, run_bytes
from podsim.serving.llm.kvcache import KVCache
from podsim.serving.llm.replica import Replica
from podsim.serving.llm.requests import Request, generate, parse_generator
from podsim.serving.llm.schedulers import make_scheduler
from podsim.serving.llm.sequence import Seq
from podsim.serving.llm.simulate import ServeConfig, simulate
from podsim.serving.llm.step_timer import step_timer
from podsim.serving.llm.timing import LinearTimer, split_batch

MS = 1_000_000
#: 1 ms a step plus 10 us a new token
T = LinearTimer(base_ns=MS, per_token_ns=10_000)


def _steps(r):  # type: ignore[no-untyped-def]
    return [(x.stages[0], x.ids, list(x.tokens)) for x in r.replicas[0].records]


# -- the decode group, hand-derived -----------------------------------------------------------------


def test_decodes_step_together_and_the_newest_is_preempted_when_blocks_run_short() -> None:
    # blocks of 4 tokens, 7 in all.  A and B: 4-token prompts, C: 3; 6 output tokens each.
    # step 1: the three prompts (1 block each, 4 left): 1 ms + 11 x 10 us -> 1.11 ms, first tokens
    # steps 2-5 (1.03 ms each, 3 decodes): contexts A, B 4..7, C 3..6; A and B take a block at
    #   context 4 (step 2), C at its context 4 (step 3): 1 block left
    # step 6: A and B (context 8) each need a block, 1 is free: A takes it; B cannot grow, so the
    #   newest running request, C (idle, context 7, no block due), is preempted by recompute
    #   (its 2 blocks back); B grows; A and B decode (1.02 ms) -> their 6th token at 6.25 ms
    # step 7: C recomputes its prompt and 5 tokens (8 tokens, 1.08 ms) -> its 6th at 7.33 ms
    reqs = [Request(0, 0, 4, 6), Request(1, 0, 4, 6), Request(2, 0, 3, 6)]
    for fast in (True, False):
        r = simulate(reqs, T, ServeConfig(kv_blocks=7, block_size=4), fast=fast, record_steps=True)
        assert r.first_ns == [1_110_000] * 3
        assert r.finish_ns == [6_250_000, 6_250_000, 7_330_000] and r.preemptions == [0, 0, 1]
        assert _steps(r)[5] == ((5_230_000, 6_250_000), [0, 1], [1, 1])
        assert _steps(r)[6] == ((6_250_000, 7_330_000), [2], [8])


def test_a_decode_that_cannot_grow_and_is_the_newest_preempts_itself() -> None:
    # blocks of 4 tokens, 3 in all; two 4-token prompts, 3 output tokens each
    # step 1: both prompts (1 block each, 1 left): 1.08 ms
    # step 2: both at context 4 need a block: A takes the last; B cannot grow and is the newest:
    #   B is preempted (its block back: 1 free) and the step stops there: A alone (1.01 ms)
    # step 3: B waits for 2 blocks (5 tokens), 1 is free: A decodes alone -> done at 3.10 ms (2 blocks back)
    # step 4: B recomputes 5 tokens (1.05 ms) -> its 2nd token at 4.15 ms; step 5: 1.01 ms -> 5.16 ms
    reqs = [Request(0, 0, 4, 3), Request(1, 0, 4, 3)]
    for fast in (True, False):
        r = simulate(reqs, T, ServeConfig(kv_blocks=3, block_size=4), fast=fast, record_steps=True)
        assert r.first_ns == [1_080_000, 1_080_000]
        assert r.finish_ns == [3_100_000, 5_160_000] and r.preemptions == [0, 1]
        assert [ids for _, ids, _ in _steps(r)] == [[0, 1], [0], [0], [1], [1]]


def test_the_group_counts_the_blocks_its_members_take_in_closed_form() -> None:
    # members at random contexts and holdings: the blocks taken over any span of steps equal a
    # step-by-step count of the contexts that cross a block boundary beyond what each holds
    rnd = random.Random(3)
    for bs in (1, 4, 16):
        g = DecodeGroup(bs, prefixes=False)
        members = []
        for i in range(40):
            s = Seq(Request(i, 0, rnd.randint(1, 300), 1000))
            s.generated = rnd.randint(1, 50)
            s.computed = s.prompt + s.generated - 1
            s.blocks = -(-s.computed // bs) + rnd.choice([0, 0, 1, 5])  # some reserve more
            g.join(s)
            members.append((s.computed, s.blocks))
        for a, b in ((0, 0), (0, 5), (3, 40), (17, 17), (1, 200)):
            brute = 0
            for c0, held in members:
                for x in range(a, b + 1):
                    c = c0 + x  # context before step x
                    h = max(held, -(-c // bs))
                    brute += -(-(c + 1) // bs) > h
            assert g.blocks_taken(a, b) == brute, (bs, a, b)


def test_a_budget_smaller_than_the_group_takes_its_first_members() -> None:
    # six decoding requests (8-token prompts, contexts 8..13, blocks of 4 held for them: 18 of 100)
    # and a budget of 4 tokens: the first four decode (one token each), the last two leave the
    # group unchanged, first in line among the others; only the first, at context 8, takes a block
    kv = KVCache(100, 4)
    rep = Replica(0, "mixed", T, kv, make_scheduler("vllm", max_batched_tokens=4), on_finish=lambda s, t: None)
    seqs = []
    for i in range(6):
        s = Seq(Request(i, 0, 8, 10))
        s.computed, s.generated = 8 + i, 1 + i
        s.blocks = -(-s.computed // 4)
        kv.free -= s.blocks
        rep.running.append(s)
        seqs.append(s)
    rep.outstanding = 6
    rep._try(0)
    g = rep.group
    assert g is not None and g.members() == seqs[:4] and rep.running == seqs[4:]
    assert rep.inflight[0] == (MS + 4 * 10_000, [], [], 4) and kv.free == 100 - 18 - 1
    assert [(s.computed, s.generated, s.blocks, s.busy) for s in seqs[4:]] == [(12, 5, 3, False), (13, 6, 4, False)]
    rep._complete()
    assert g.contexts() == [9, 10, 11, 12]


PREFIXES = ",prefixes=5:96"


@pytest.mark.parametrize(
    "cfg, spec",
    [
        (dict(scheduler="vllm", router="kv-aware", kv_blocks=250, max_num_seqs=40), PREFIXES),
        (dict(scheduler="vllm", kv_blocks=2500, block_size=1, max_batched_tokens=24), ""),  # a small budget
        (dict(scheduler="vllm", kv_blocks=200, preemption="swap", swap_space_gib=2e-6), ""),
        (dict(scheduler="vllm-v0", router="jsq", kv_blocks=200, watermark=0.01), ""),
        (dict(scheduler="sarathi", chunk_size=64, kv_blocks=700, block_size=4), PREFIXES),
        (dict(scheduler="orca", kv_blocks=200, max_batched_tokens=256), PREFIXES),
        (dict(scheduler="vllm", pd=(1, 2), router="least-outstanding", kv_blocks=250), PREFIXES),
    ],
)
def test_the_aggregate_serves_as_one_by_one(cfg: dict, spec: str) -> None:
    # preemptions (recompute, swap), prefix sharing by id, budgets, P/D and routers that read the
    # replicas: every step identical to the one-by-one simulation
    g = "poisson:20,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=7" + spec
    reqs = generate(parse_generator(g), 250)
    timer = LinearTimer(base_ns=8 * MS, per_token_ns=15_000, per_context_ns=300, kv_bytes_per_token=1.0)
    _same_as_one_by_one(reqs, timer, ServeConfig(replicas=2, **cfg))  # type: ignore[arg-type]


def _same_as_one_by_one(reqs: list[Request], timer: LinearTimer, cfg: ServeConfig) -> None:
    a = simulate(reqs, timer, cfg, fast=True, record_steps=True)
    b = simulate(reqs, timer, cfg, fast=False, record_steps=True)
    assert a.first_ns == b.first_ns and a.finish_ns == b.finish_ns and a.preemptions == b.preemptions
    assert [[(x.stages, x.ids, list(x.tokens)) for x in r.records] for r in a.replicas] == [
        [(x.stages, x.ids, list(x.tokens)) for x in r.records] for r in b.replicas
    ]
    assert min(a.finish_ns) > 0


@pytest.mark.parametrize(
    "workload, n, base_ms, cfg",
    [
        # a run of decode steps started while a member would register its prefix, evicted before,
        # at the end of the run's first step (the aggregate registered it only after the run)
        (
            "poisson:40,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=62,prefixes=5:16",
            200,
            2,
            dict(
                scheduler="orca",
                router="least-outstanding",
                block_size=1,
                kv_blocks=2400,
                max_num_seqs=8,
                max_batched_tokens=1024,
                pd=(1, 2),
            ),
        ),
        (
            "poisson:40,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=52,prefixes=4:16",
            100,
            2,
            dict(scheduler="vllm", router="kv-aware", kv_blocks=250, max_num_seqs=8, pd=(2, 2)),
        ),
        # vLLM V0: the request preempted in a decode step, first in line, computed its prefix
        # itself and finds it cached now: it needs fewer blocks than it freed and is admitted at
        # the next step (the aggregate ran on, taking it for one that cannot be admitted)
        (
            "poisson:40,prompt=lognormal:100:0.7,output=lognormal:80:0.8,seed=30,prefixes=6:160",
            200,
            8,
            dict(
                scheduler="vllm-v0",
                router="kv-aware",
                block_size=1,
                kv_blocks=2400,
                max_num_seqs=40,
                max_batched_tokens=4096,
                replicas=3,
            ),
        ),
        (
            "poisson:12,prompt=lognormal:100:0.7,output=lognormal:80:0.8,seed=61,prefixes=8:160",
            200,
            8,
            dict(
                scheduler="vllm-v0",
                router="kv-aware",
                block_size=4,
                kv_blocks=600,
                max_batched_tokens=1024,
                watermark=0.01,
            ),
        ),
        (
            "poisson:20,prompt=lognormal:100:0.7,output=lognormal:80:0.8,seed=65,prefixes=3:300",
            100,
            8,
            dict(scheduler="vllm-v0", kv_blocks=150, max_batched_tokens=1024, pd=(1, 1)),
        ),
    ],
)
def test_prefixes_lost_to_evictions_serve_as_one_by_one(workload: str, n: int, base_ms: int, cfg: dict) -> None:
    # shared prefixes evicted and registered again by the requests that use them, and requests
    # preempted that find theirs cached: random configurations where the aggregate once differed
    timer = LinearTimer(base_ns=base_ms * MS, per_token_ns=15_000, per_context_ns=300, kv_bytes_per_token=1.0)
    _same_as_one_by_one(generate(parse_generator(workload), n), timer, ServeConfig(**cfg))  # type: ignore[arg-type]


# -- timers: a batch from its decodes' totals ---------------------------------------------------------


def _timers(tmp_path: Path):  # type: ignore[no-untyped-def]
    from podsim.serving.llm.vidur_profiles import write_vidur_profiles

    write_vidur_profiles(
        tmp_path, get_model("llama2-70b"), "h100", (4,), max_tokens=1024, max_seq_len=1024, max_batch=16
    )
    return [
        LinearTimer(base_ns=MS, per_token_ns=10_000.5, per_context_ns=3.25),
        LinearTimer(base_ns=MS, per_token_ns=7, per_context_ns=0),
        step_timer(get_model("llama3-8b"), "h100"),
        step_timer(get_model("llama3-70b"), "h100", tp=4, pp=2, precision="fp8"),
        step_timer(get_model("mixtral-8x7b"), "h100", tp=2, ep=2, host_overhead_ms=0.35),
        step_timer(get_model("llama2-70b"), "h100", tp=4, profile=str(tmp_path)),
    ]


def test_timers_time_a_batch_from_its_decodes_count_and_total_context(tmp_path: Path) -> None:
    rnd = random.Random(5)
    for timer in _timers(tmp_path):
        for _ in range(60):
            batch = [(1, rnd.randint(1, 900)) for _ in range(rnd.randint(0, 40))]
            batch += [(rnd.randint(1, 500), rnd.randint(0, 500)) for _ in range(rnd.randint(0, 3))]
            rnd.shuffle(batch)
            d, ctx, rest = split_batch(batch)
            assert timer.stage_ns_decodes(d, ctx, rest) == timer.stage_ns(batch)
            # a run of decode steps: every context one token longer a step
            ctxs = [c for _, c in batch[:12]] or [5]
            k = rnd.randint(1, 30)
            want = [timer.stage_ns([(1, c + j) for c in ctxs]) for j in range(k)]
            assert timer.stage_ns_decode_run(len(ctxs), sum(ctxs), k) == want


# -- memory bounds --------------------------------------------------------------------------------


def test_a_run_beyond_the_machines_memory_is_refused_naming_the_flag() -> None:
    gib = 2**30
    # 10 GiB: 10,000,000 requests at 1,000 B and 100 replicas at 8,000 B fit (about 9.4 GiB)
    assert run_bytes(10_000_000, 100) == 100_000_000 + 10_000_000 * REQUEST_BYTES + 100 * REPLICA_BYTES
    check_footprint(10_000_000, 100, memory_bytes=10 * gib)
    with pytest.raises(InputError, match="give at most 3,545,539") as e:  # (10 GiB - 100 MB - 800 kB) / 3,000 B
        check_footprint(10_000_000, 100, json=True, memory_bytes=10 * gib)
    assert e.value.where == "--requests"
    with pytest.raises(InputError, match="give at most 1,329,552") as e:  # (10 GiB - 100 MB - 1 MB) / 8,000 B
        check_footprint(1_000, 2_000_000, replicas_flag="--pd", memory_bytes=10 * gib)
    assert e.value.where == "--pd"


@pytest.mark.parametrize(
    "flags, where", [(["--requests", "2147483648"], "--requests"), (["--replicas", "2147483648"], "--replicas")]
)
def test_huge_counts_are_refused_at_once(flags: list[str], where: str, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.process_time()
    rc = main(["serve-llm", "--model", "llama3-8b", "--gpu", "h100", "--workload", "poisson:25", *flags])
    err = capsys.readouterr().err
    assert rc == 2 and where in err and "more than this machine's" in err and "Traceback" not in err
    assert time.process_time() - t0 < 30  # refused before generating anything (generating takes hours)


# -- the summary ----------------------------------------------------------------------------------


def test_the_summary_has_a_line_for_16_replicas_then_one_a_role() -> None:
    reqs = generate(parse_generator("poisson:400,prompt=64,output=8"), 200)
    r = simulate(reqs, T, ServeConfig(pd=(18, 22), kv_blocks=1000))
    text = format_serve_llm_run(r)
    assert REPLICA_LINES == 16
    assert sum(1 for line in text.splitlines() if line.startswith("  replica ")) == 16
    assert "  replicas 16-17 (prefill): " in text and "  replicas 18-39 (decode): " in text
