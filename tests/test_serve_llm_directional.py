"""vLLM V0's prefill-first scheduler (``vllm-v0``) by hand, and the serving papers' directional
claims (issue #16) on podsim's step times: chunked prefill (Sarathi-Serve, OSDI'24), prefill/decode
disaggregation (DistServe, OSDI'24; Splitwise, ISCA'24) and tensor parallelism.

The hand-derived tests use a linear step timer: a step takes ``1 ms + 10 us x (new tokens)``.
The directional tests use podsim's compute model (Llama 3 on H100s) and seeded Poisson workloads
of a few hundred requests; benchmarks/serving_directions.py prints the same checks as a table,
over several seeds."""

from __future__ import annotations

import pytest

from podsim.cli import main
from podsim.llm.model import get_model
from podsim.serving.llm.capacity import find_capacity
from podsim.serving.llm.requests import Request, generate, parse_generator
from podsim.serving.llm.schedulers import SCHEDULERS, make_scheduler, vllm_v0_defaults
from podsim.serving.llm.simulate import ServeConfig, link_transfer, simulate
from podsim.serving.llm.step_timer import step_timer
from podsim.serving.llm.timing import LinearTimer

MS = 1_000_000
#: 1 ms a step plus 10 us a new token
T = LinearTimer(base_ns=MS, per_token_ns=10_000)


def _req(i: int, at_ns: int, prompt: int, output: int) -> Request:
    return Request(i, at_ns, prompt, output, -1, 0)


def _steps(r) -> list[tuple[int, int, list[int], list[int]]]:  # type: ignore[no-untyped-def]
    """(start ns, end ns, request ids, token counts) of replica 0's steps."""
    return [(x.stages[0][0], x.stages[-1][1], x.ids, x.tokens) for x in r.replicas[0].records]


def _v0(reqs: list[Request], timer: LinearTimer = T, **cfg: object):  # type: ignore[no-untyped-def]
    cfg.setdefault("kv_blocks", 10_000)
    return simulate(reqs, timer, ServeConfig(scheduler="vllm-v0", **cfg), record_steps=True)  # type: ignore[arg-type]


# -- vllm-v0 by hand -------------------------------------------------------------------------------

#: request 0 (100 prompt tokens, 5 output) at 0; requests 1 and 2 (200 and 300 tokens, 3 output
#: each) arrive together at 3 ms while request 0 decodes
THREE = [_req(0, 0, 100, 5), _req(1, 3 * MS, 200, 3), _req(2, 3 * MS, 300, 3)]


def test_vllm_v0_runs_prefills_first_and_the_decodes_stall() -> None:
    r = _v0(THREE)
    # step 1 [0, 2 ms]: request 0's prompt (1 ms + 100 x 10 us)
    # step 2 [2, 3.01]: request 0's decode; requests 1 and 2 arrive at 3 ms, during it
    # step 3 [3.01, 9.01]: both prompts, 500 tokens (1 ms + 5 ms), and nothing else: request 0's
    #   decode stalls for 6 ms
    # steps 4, 5: all three decode (1.03 ms each): requests 1 and 2 are done at 11.07 ms
    # step 6: request 0 alone (1.01 ms) -> 12.08 ms
    assert _steps(r) == [
        (0, 2_000_000, [0], [100]),
        (2_000_000, 3_010_000, [0], [1]),
        (3_010_000, 9_010_000, [1, 2], [200, 300]),
        (9_010_000, 10_040_000, [0, 1, 2], [1, 1, 1]),
        (10_040_000, 11_070_000, [0, 1, 2], [1, 1, 1]),
        (11_070_000, 12_080_000, [0], [1]),
    ]
    assert r.first_ns == [2_000_000, 9_010_000, 9_010_000]
    assert r.finish_ns == [12_080_000, 11_070_000, 11_070_000]
    # request 0's 4 gaps: 1.01 + (6 + 1.03) + 1.03 + 1.01 ms = 10.08 ms: the stall is in its TPOT
    assert r.tpot_s()[0] == pytest.approx(10.08e-3 / 4)
    # vLLM V1 (chunked prefill) runs request 0's decode in step 3 beside the prompts: 6.01 ms
    v1 = simulate(THREE, T, ServeConfig(kv_blocks=10_000), record_steps=True)
    assert _steps(v1)[2] == (3_010_000, 9_020_000, [0, 1, 2], [1, 200, 300])


def test_vllm_v0_token_budget_and_sequence_cap() -> None:
    # a budget of 400 tokens: request 1 (200) fits, request 2 (300) would make 500 -> its own step
    r = _v0(THREE, max_batched_tokens=400)
    # step 3 [3.01, 6.01]: request 1's prompt (3 ms); step 4 [6.01, 10.01]: request 2's (4 ms);
    # request 0 stalls for both; then all three decode
    assert [(s, e, ids) for s, e, ids, _ in _steps(r)[2:5]] == [
        (3_010_000, 6_010_000, [1]),
        (6_010_000, 10_010_000, [2]),
        (10_010_000, 11_040_000, [0, 1, 2]),
    ]
    assert r.first_ns == [2_000_000, 6_010_000, 10_010_000]
    # at most 2 running requests: request 2 waits for a free slot, not for the budget
    c = _v0(THREE, max_num_seqs=2)
    # step 3 [3.01, 6.01]: request 1's prompt (requests 0 and 1 now run: the cap)
    # steps 4, 5 [6.01, 8.05]: both decode (1.02 ms each); request 1 is done at 8.05 ms
    # step 6 [8.05, 12.05]: request 2's prompt (a slot is free), request 0 stalls
    # step 7 [12.05, 13.07]: requests 0 (its 5th and last token) and 2; step 8: request 2 -> 14.08 ms
    assert [(s, e, ids) for s, e, ids, _ in _steps(c)[2:]] == [
        (3_010_000, 6_010_000, [1]),
        (6_010_000, 7_030_000, [0, 1]),
        (7_030_000, 8_050_000, [0, 1]),
        (8_050_000, 12_050_000, [2]),
        (12_050_000, 13_070_000, [0, 2]),
        (13_070_000, 14_080_000, [2]),
    ]
    assert c.finish_ns == [13_070_000, 8_050_000, 14_080_000]


def test_vllm_v0_admits_a_prompt_longer_than_the_budget_alone() -> None:
    # budget 512: request 0's 1000-token prompt runs alone (never stuck), request 1's next
    r = _v0([_req(0, 0, 1000, 3), _req(1, 0, 100, 2)], max_batched_tokens=512)
    # step 1: 1 ms + 1000 x 10 us = 11 ms; step 2: request 1's prompt (2 ms), request 0 stalls;
    # step 3: both decode (1.02 ms): request 1 done at 14.02 ms; step 4: request 0 -> 15.03 ms
    assert [(s, e, ids, n) for s, e, ids, n in _steps(r)] == [
        (0, 11_000_000, [0], [1000]),
        (11_000_000, 13_000_000, [1], [100]),
        (13_000_000, 14_020_000, [0, 1], [1, 1]),
        (14_020_000, 15_030_000, [0], [1]),
    ]


def test_vllm_v0_preempts_the_newest_by_recompute_and_decodes_while_it_waits() -> None:
    # blocks of 4 tokens, 5 blocks; two requests of 8 prompt and 6 output tokens at t = 0
    r = _v0([_req(0, 0, 8, 6), _req(1, 0, 8, 6)], kv_blocks=5, block_size=4)
    # step 1: both prompts (16 tokens, 1.16 ms), 2 + 2 blocks, 1 free
    # step 2 (decode: nothing waits): request 0 grows to 9 tokens (3 blocks, 0 free); request 1
    #   cannot grow and is the newest: preempted (2 blocks freed), back to the waiting queue
    # steps 3-6: request 1 waits first in line but needs 3 blocks for its 9 tokens, only 2 then 1
    #   are free: no prefill can be formed, so request 0 decodes alone; it finishes at
    #   1.16 + 5 x 1.01 = 6.21 ms
    # step 7: request 1 recomputes 9 tokens (1.09 ms -> 7.30 ms, its 2nd token); 4 decodes follow
    assert r.preemptions == [0, 1]
    assert r.finish_ns == [6_210_000, 6_210_000 + 1_090_000 + 4 * 1_010_000]
    assert _steps(r)[6] == (6_210_000, 7_300_000, [1], [9])


@pytest.mark.parametrize("pp", [1, 2])
def test_vllm_v0_runs_of_decode_steps_in_one_go_change_nothing(pp: int) -> None:
    # KV pressure (preemptions), a sequence cap and routers that read the queues
    reqs = generate(parse_generator("poisson:12,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=4"), 300)
    timer = LinearTimer(base_ns=8 * MS, per_token_ns=15_000, per_context_ns=300, pp=pp)
    for router in ("round-robin", "jsq", "kv-aware"):
        cfg = ServeConfig(
            replicas=2, scheduler="vllm-v0", router=router, kv_blocks=250, max_num_seqs=40, max_batched_tokens=1024
        )
        a = simulate(reqs, timer, cfg, fast=True, record_steps=True)
        b = simulate(reqs, timer, cfg, fast=False, record_steps=True)
        assert a.first_ns == b.first_ns and a.finish_ns == b.finish_ns and a.preemptions == b.preemptions
        assert [[(x.stages, x.ids) for x in rep.records] for rep in a.replicas] == [
            [(x.stages, x.ids) for x in rep.records] for rep in b.replicas
        ]
        assert min(a.finish_ns) > 0 and (pp == 2 or sum(a.preemptions) > 0)
        # every step is prefills only or decodes only (PP: requests in flight are skipped)
        for rep in a.replicas:
            assert all(x.decodes in (0, len(x.ids)) for x in rep.records)


def test_vllm_v0_name_defaults_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert "vllm-v0" in SCHEDULERS
    s = make_scheduler("vLLM-V0")
    # vLLM V0 without chunked prefill: max(max_model_len, 2048) tokens (8192 unless told), 256 sequences
    assert (s.name, s.max_batched_tokens, s.max_num_seqs) == ("vllm-v0", 8192, 256)  # type: ignore[attr-defined]
    assert vllm_v0_defaults(4096) == (4096, 256) and vllm_v0_defaults(1024) == (2048, 256)
    assert vllm_v0_defaults(None) == (8192, 256)
    assert (
        main(
            [
                "serve-llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--workload",
                "poisson:5,prompt=200,output=20",
                "--requests",
                "30",
                "--scheduler",
                "vllm-v0",
            ]
        )
        == 0
    )
    assert "TTFT" in capsys.readouterr().out


# -- the papers' directions ------------------------------------------------------------------------


def _timer(model: str, tp: int):  # type: ignore[no-untyped-def]
    return step_timer(get_model(model), "h100", tp=tp, max_batched_tokens=8192, max_num_seqs=1024)


def _capacity(reqs_at, timer, cfg: ServeConfig, start: float, **kw: object) -> float:  # type: ignore[no-untyped-def]
    return find_capacity(lambda q: simulate(reqs_at(q), timer, cfg, **kw), 0.99, start_qps=start, rel_tol=0.05).qps


#: Sarathi-Serve's setting: long prompts, short outputs, one Llama 3 70B replica on 4 H100s
LONG_PROMPTS = "poisson:1,prompt=uniform:4096-7168,output=uniform:150-250,seed=1"


def test_chunked_prefill_raises_capacity_under_a_tpot_slo_on_long_prompts() -> None:
    """Why: vLLM V0 runs a prompt whole, ahead of the decodes: a 4-7k-token prompt of a 70B model
    on 4 H100s is a 0.27-0.48 s compute-bound step during which every running request waits
    (a generation stall).  A request decoding for ~200 steps of ~20-25 ms sees the prompts that
    arrive meanwhile, so its TPOT grows about as t_decode / (1 - rate x t_prefill) and the TPOT
    SLO is missed at about 1 request/s.  Sarathi's 512-token chunks keep every step at ~45-50 ms
    (at the batch sizes reached here) and piggyback the decodes on the chunks' compute, so TPOT
    stays under the SLO as the rate grows; its capacity ends where prefill throughput pushes TTFT
    past its SLO -- higher.  Chunks cost throughput (a 512-token chunk takes ~42 ms, 82 us a token,
    against ~66 us a token in a whole 5k-token prompt), so chunking trades TTFT for TPOT: at a low
    rate V0's TTFT is the lower one."""
    timer = _timer("llama3-70b", 4)
    gen = parse_generator(LONG_PROMPTS)
    tokens, seqs = vllm_v0_defaults(get_model("llama3-70b").seq_len)  # 8192, 256
    v0 = ServeConfig(scheduler="vllm-v0", max_batched_tokens=tokens, max_num_seqs=seqs, slo_ttft_s=5.0, slo_tpot_s=0.06)
    sarathi = ServeConfig(scheduler="sarathi", chunk_size=512, max_num_seqs=256, slo_ttft_s=5.0, slo_tpot_s=0.06)

    def at(q: float) -> list[Request]:
        return generate(gen.with_qps(q), 300)

    # the mechanism, at 1 request/s: V0 stalls decodes (higher TPOT tail), serves prompts sooner
    a, b = simulate(at(1.0), timer, v0).stats(), simulate(at(1.0), timer, sarathi).stats()
    assert a["tpot_p99_s"] > 1.15 * b["tpot_p99_s"] and a["ttft_p50_s"] < b["ttft_p50_s"]
    # capacity under TTFT <= 5 s and TPOT <= 60 ms for 99% of requests (seed 1: 1.62 vs 1.19 req/s;
    # seeds 1-5: 1.37-1.59x; 1.04-1.12x at TPOT <= 100 ms, where V0's stalls are tolerated)
    c_v0 = _capacity(at, timer, v0, 1.0)
    c_sarathi = _capacity(at, timer, sarathi, 1.0)
    assert c_sarathi > 1.2 * c_v0, (c_sarathi, c_v0)


#: DistServe's setting: prompts of 1-3k tokens, outputs of 128-384; 16 H100s as 4 replicas of
#: Llama 3 70B at TP 4, mixed or split 2 prefill : 2 decode
PD_WORKLOAD = "poisson:1,prompt=uniform:1024-3072,output=uniform:128-384,seed=1"


def test_disaggregation_wins_under_a_tight_tpot_slo() -> None:
    """Why: on a mixed replica every step that carries a prompt (or a chunk of one) is a
    compute-bound step that the batch's decodes share: a 2k-token prompt costs ~0.14 s of a 70B
    replica on 4 H100s, and a decoding request sees every prompt that arrives at its replica while
    it decodes.  With a 30 ms TPOT SLO (a pure decode step takes ~20-25 ms) a mixed replica meets
    it only while prompts take a small share of its time -- with vLLM's 8192-token steps or
    Sarathi's 512-token chunks alike.  Decode replicas of a P/D split never run a prompt: their
    steps are memory-bound weight reads shared by the batch (~22 ms), so TPOT holds, and the
    capacity is the prefill pool's (2 replicas x ~7 prompts/s) plus the KV transfer (~3 ms at
    50 GB/s).  At a loose TPOT SLO the trade reverses: the 2 prefill replicas saturate near
    14 requests/s, where 4 mixed replicas still serve everything."""
    timer = _timer("llama3-70b", 4)
    gen = parse_generator(PD_WORKLOAD)
    link = link_transfer()  # 50 GB/s, 10 us per GPU
    mixed_vllm = dict(replicas=4, scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024)
    mixed_sarathi = dict(replicas=4, scheduler="sarathi", chunk_size=512, max_num_seqs=1024)
    pd = dict(pd=(2, 2), scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024)

    def at(q: float, n: int = 300) -> list[Request]:
        return generate(gen.with_qps(q), n)

    def cap(kw: dict) -> float:  # type: ignore[type-arg]
        return _capacity(at, timer, ServeConfig(slo_ttft_s=2.0, slo_tpot_s=0.03, **kw), 8.0, transfer_ns=link)

    c_pd, c_vllm, c_sarathi = cap(pd), cap(mixed_vllm), cap(mixed_sarathi)
    # seed 1: 15.5 vs 8.25 and 10 req/s; seeds 1-6: P/D 1.78-2.00x mixed vLLM, 1.41-1.64x mixed
    # Sarathi.  300 requests are a short run (P/D at capacity: ~20 s of arrivals, ~3 mean
    # end-to-end latencies), but these capacities barely move with longer ones: 14.5 vs 8.5 and 10
    # with 1000 requests, 14.0 vs 8.0 and 9.5 with 3000
    assert c_pd > 1.3 * max(c_vllm, c_sarathi), (c_pd, c_vllm, c_sarathi)
    # loose (TPOT 100 ms) at 17 requests/s: the mixed replicas meet it (their capacity: ~19 req/s
    # in runs of 3000 requests), the prefill pool (~14.5) does not.  1000 requests: a shorter run
    # ends before an overloaded prefill pool's queue has grown past the TTFT SLO
    loose = {
        name: simulate(
            at(17.0, 1000), timer, ServeConfig(slo_ttft_s=2.0, slo_tpot_s=0.1, **kw), transfer_ns=link
        ).slo_attainment()
        for name, kw in (("mixed", mixed_vllm), ("pd", pd))
    }
    assert loose["mixed"] >= 0.99 and loose["pd"] < 0.6, loose


def test_more_tp_lowers_tpot_with_diminishing_returns() -> None:
    """Why: a decode step is memory-bound: each GPU reads its 1/TP share of the weights (and of
    the KV cache), which halves as TP doubles; but every step also pays what TP does not divide
    -- kernel launches, the two all-reduces a layer (whose latency grows with TP), the norms and
    residuals every GPU repeats -- so TPOT tends to that floor and each doubling gains less
    (Amdahl): a batch-1 decode step takes 7.2, 4.7, 3.3, 2.8 ms at TP 1, 2, 4, 8.
    Served, not one step: one replica of Llama 3 8B on 1-8 H100s at 4 requests/s."""
    reqs = generate(parse_generator("poisson:4,prompt=uniform:512-1536,output=uniform:128-384,seed=1"), 200)
    tpot = []
    for tp in (1, 2, 4, 8):
        r = simulate(
            reqs, _timer("llama3-8b", tp), ServeConfig(scheduler="vllm", max_batched_tokens=8192, max_num_seqs=1024)
        )
        tpot.append(r.stats()["tpot_mean_s"])
    gains = [a / b for a, b in zip(tpot, tpot[1:])]  # 1 -> 2, 2 -> 4, 4 -> 8: 1.64, 1.46, 1.19
    assert all(g > 1.05 for g in gains), tpot
    assert gains[0] > gains[1] > gains[2] and gains[2] < 1.5, gains
