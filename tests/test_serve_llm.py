"""The LLM serving simulation (issue #16, podsim serve-llm): every expectation below is derived by
hand from a linear step timer -- a stage takes ``base + per_token x (new tokens) + per_context x
(context tokens)`` ns -- and the schedulers' rules, written out in the comments."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.serving.llm.capacity import find_capacity
from podsim.serving.llm.kvcache import KVCache, blocks_from_memory
from podsim.serving.llm.replica import Replica
from podsim.serving.llm.requests import (
    Request,
    generate,
    parse_generator,
    read_trace,
    with_poisson_arrivals,
)
from podsim.serving.llm.router import make_router
from podsim.serving.llm.schedulers import make_scheduler, vllm_defaults
from podsim.serving.llm.simulate import ServeConfig, link_transfer, simulate
from podsim.serving.llm.timing import LinearTimer

MS = 1_000_000
#: 1 ms a step plus 10 us a new token (no context cost unless a test says so)
T = LinearTimer(base_ns=MS, per_token_ns=10_000)


def _req(i: int, at_ns: int, prompt: int, output: int, pid: int = -1, plen: int = 0) -> Request:
    return Request(i, at_ns, prompt, output, pid, plen)


def _run(reqs: list[Request], timer: LinearTimer = T, **cfg: object):  # type: ignore[no-untyped-def]
    cfg.setdefault("kv_blocks", 10_000)
    return simulate(reqs, timer, ServeConfig(**cfg))  # type: ignore[arg-type]


# -- one replica, hand-derived ------------------------------------------------------------------


def test_one_request_on_an_idle_replica_takes_the_step_times() -> None:
    timer = LinearTimer(base_ns=MS, per_token_ns=10_000, per_context_ns=100)
    r = _run([_req(0, 5 * MS, 100, 4)], timer)
    # prefill (100 new, 0 context): 1,000,000 + 100 x 10,000 = 2,000,000 ns -> TTFT 2 ms
    # decodes over contexts 100, 101, 102: 1,000,000 + 10,000 + 100 c = 1,020,000 / 1,020,100 / 1,020,200
    assert r.first_ns == [5 * MS + 2_000_000]
    assert r.finish_ns == [5 * MS + 2_000_000 + 1_020_000 + 1_020_100 + 1_020_200]
    d = r.to_dict()
    assert d["ttft_mean_s"] == pytest.approx(0.002) and d["ttft_p99_s"] == pytest.approx(0.002)
    assert d["tpot_mean_s"] == pytest.approx(1_020_100e-9)  # (3,060,300 ns) / 3 gaps
    assert d["e2e_mean_s"] == pytest.approx(5_060_300e-9)
    assert d["preemptions"] == 0 and d["requests"][0]["replica"] == 0
    # 4 output tokens over the 5.0603 ms from arrival to finish
    assert d["tokens_per_s"] == pytest.approx(4 / 5_060_300e-9)


def test_two_requests_share_one_batch() -> None:
    r = _run([_req(0, 0, 100, 3), _req(1, 0, 50, 2)])
    # step 1: both prompts, 150 tokens: 1 ms + 1.5 ms = 2.5 ms -> both first tokens at 2.5 ms
    # step 2: both decode (2 tokens): 1.02 ms -> 3.52 ms, request 1's last token
    # step 3: request 0 alone: 1.01 ms -> 4.53 ms
    assert r.first_ns == [2_500_000, 2_500_000]
    assert r.finish_ns == [4_530_000, 3_520_000]
    tpot = r.tpot_s()
    assert tpot[0] == pytest.approx((4.53 - 2.5) / 2 * 1e-3) and tpot[1] == pytest.approx(1.02e-3)
    assert r.replicas[0].steps == 3


def test_a_full_kv_cache_preempts_the_newest_request_by_recompute() -> None:
    # blocks of 4 tokens, 5 blocks; two requests of 8 prompt tokens and 6 output tokens at t = 0
    r = _run([_req(0, 0, 8, 6), _req(1, 0, 8, 6)], kv_blocks=5, block_size=4)
    # step 1: both prompts (16 tokens, 1.16 ms); 2 + 2 blocks taken, 1 free
    # step 2: request 0 grows to 9 tokens (3 blocks, 0 free); request 1 cannot grow: it is the
    #   newest, so it is preempted (its 2 blocks freed); request 0 decodes alone: 1.01 ms -> 2.17 ms
    # steps 3-6: request 1 needs 3 blocks for its 8 + 1 tokens but only 2, then 1, are free;
    #   request 0 decodes alone (4 x 1.01 ms) and finishes at 6.21 ms, freeing its 4 blocks
    # step 7: request 1 recomputes 9 tokens (1.09 ms -> 7.30 ms: its 2nd token); steps 8-11 decode
    assert r.preemptions == [0, 1] and r.to_dict()["preemptions"] == 1
    assert r.first_ns == [1_160_000, 1_160_000]
    assert r.finish_ns == [6_210_000, 6_210_000 + 1_090_000 + 4 * 1_010_000]
    assert r.tpot_s()[1] == pytest.approx((11_340_000 - 1_160_000) / 5 * 1e-9)
    # KV use as each step is formed: 4 (step 1), 3 (request 0 alone, 9-12 tokens), 4 (its 13 tokens at
    # step 6), 3 (request 1's 9 tokens at 6.21 ms, right after request 0 left), 4 (its 13), 0 (done)
    assert r.replicas[0].kv_samples == [
        (0, 4),
        (1_160_000, 3),
        (5_200_000, 4),
        (6_210_000, 3),
        (6_210_000 + 1_090_000 + 3 * 1_010_000, 4),
        (11_340_000, 0),
    ]


def test_a_full_kv_cache_preempts_by_swap_and_the_victim_resumes_without_recompute() -> None:
    # as above, but the victim's blocks go to host memory: a block is 4 tokens x 1 B = 4 B, at
    # 0.0004 GB/s (0.0004 B/ns) 10 us a copy
    swap = dict(kv_blocks=5, block_size=4, preemption="swap", swap_space_gib=1.0, swap_bandwidth_gbps=0.0004)
    r = _run([_req(0, 0, 8, 6), _req(1, 0, 8, 6)], **swap)
    # step 1: both prompts, 1.16 ms.  Step 2: request 1 is preempted, its 2 blocks copied out
    #   (20 us, in this step): request 0 decodes alone, 1.01 + 0.02 ms -> 2.19 ms
    # steps 3-6: request 0 alone (4 x 1.01 ms) -> finishes at 6.23 ms, freeing its 4 blocks
    # step 7: request 1 comes back with its 8 computed tokens: its 2 blocks copied in (20 us) and
    #   a third block taken; it decodes its 9th token at once (1.01 + 0.02 ms -> 7.26 ms): no
    #   recompute of the 9 tokens (1.09 ms by recompute); steps 8-11 decode -> 11.30 ms
    assert r.preemptions == [0, 1] and r.replicas[0].preemptions == 1
    assert r.first_ns == [1_160_000, 1_160_000]
    assert r.finish_ns == [6_230_000, 6_230_000 + 1_030_000 + 4 * 1_010_000]
    assert r.replicas[0].steps == 11
    # no host space for two blocks: preempted by recompute, exactly as the test above
    r = _run([_req(0, 0, 8, 6), _req(1, 0, 8, 6)], **dict(swap, swap_space_gib=4e-9))  # 4.3 B: one block
    assert r.finish_ns == [6_210_000, 6_210_000 + 1_090_000 + 4 * 1_010_000]
    with pytest.raises(InputError, match="--preemption"):
        _run([_req(0, 0, 8, 6)], preemption="evict")


def test_a_draft_model_adds_its_passes_and_takes_memory() -> None:
    from podsim.serving.llm.drafting import DraftedTimer

    class Draft(LinearTimer):
        weights_bytes_per_gpu = 200.0

    target = LinearTimer(base_ns=MS, per_token_ns=10_000, kv_bytes_per_token=1.0, kv_capacity_bytes=1000.0)
    draft = Draft(base_ns=100_000, per_token_ns=1_000, kv_bytes_per_token=0.5)
    t = DraftedTimer(target, draft, 3)  # type: ignore[arg-type]
    # two decodes verifying 1 + 3 tokens and a 20-token prompt chunk: the target 1 ms + 28 x 10 us;
    # the draft one pass over the chunk and the two decodes' first proposals (100 us + 22 x 1 us),
    # then 2 passes of the two decodes (2 x 102 us)
    assert t.stage_ns([(4, 100), (4, 50), (20, 0)]) == 1_280_000 + 122_000 + 204_000
    assert t.kv_bytes_per_token == 1.5 and t.kv_capacity_bytes == 800.0
    # served: one request, 100-token prompt, 9 output tokens, k = 3 all accepted: the prefill
    # (2 ms + the draft's 200 us), then two decode steps of 4 tokens each (1.04 ms + 3 x 101 us)
    r = simulate([_req(0, 0, 100, 9)], t, ServeConfig(kv_blocks=100, spec_decode=(3, 1.0)))
    assert r.first_ns == [2_200_000] and r.finish_ns == [2_200_000 + 2 * 1_343_000]


@pytest.mark.parametrize(
    "extra, match",
    [
        ([], "give --spec-decode K:A as well"),
        (["--spec-decode", "4:0.7", "--pp", "2"], "without pipeline parallelism"),
        (["--spec-decode", "4:0.7", "--draft-model", "lama3-8b"], "did you mean 'llama3-8b'"),
    ],
)
def test_a_draft_model_refuses_what_it_cannot_do(
    extra: list[str], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "serve-llm",
        "--model",
        "llama3-70b",
        "--gpu",
        "h100",
        "--tp",
        "4",
        "--workload",
        "poisson:1",
        "--requests",
        "5",
        "--draft-model",
        "llama3-8b",
        *extra,
    ]
    assert main(args) != 0
    assert match in capsys.readouterr().err


def test_serve_llm_reports_mfu_from_the_served_tokens(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    assert (
        main(
            [
                "serve-llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--replicas",
                "2",
                "--workload",
                "poisson:4,prompt=1000,output=100",
                "--requests",
                "100",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    # by hand: 2 x 6.98e9 FLOPs per token (2N over Llama 3 8B's matrices: 8.03e9 parameters less
    # the 128,256 x 4,096 embedding and output layer), 1,099 tokens a request computed once, over
    # the run on 2 GPUs of 989.4 dense bf16 TFLOP/s; attention (~2%) and the sampled positions'
    # logits (~1.5%) add a few per cent
    span = 100 / d["requests_per_s"]
    rough = 100 * 1099 * 2 * 6.98e9 / (span * 2 * 989.4e12)
    assert 1.0 < d["mfu"] / rough < 1.08


def test_a_shared_prefix_takes_its_blocks_once_and_is_evicted_when_unused() -> None:
    # blocks of 4 tokens, 6 blocks; requests of 12-token prompts whose first 8 tokens (2 blocks)
    # are prefix 0; A at t = 0, B at 0.5 ms (while A's prefill runs)
    reqs = [_req(0, 0, 12, 2, pid=0, plen=8), _req(1, MS // 2, 12, 2, pid=0, plen=8)]
    r = _run(reqs, kv_blocks=6, block_size=4)
    # step 1: A's 12 tokens (1.12 ms); its first 2 blocks become prefix 0's.  Step 2: A decodes (13
    #   tokens: 4 blocks, 2 of them the prefix's) and B is admitted with 8 tokens cached: its 12
    #   tokens take 1 block of its own beside the prefix's 2 -- 5 of 6 in use, so it fits;
    #   1 + 4 tokens, 1.05 ms -> 2.17 ms: A's last token, B's first.  Step 3: B decodes, 3.18 ms.
    assert r.first_ns == [1_120_000, 2_170_000] and r.finish_ns == [2_170_000, 3_180_000]
    assert (2_170_000 - MS // 2) / 1e9 == pytest.approx(r.ttft_s()[1])
    # KV use as steps are formed: 3 (A's prompt), 5 (A 4 + B's own 1), 4 (B: 2 + 2 of its own);
    # at the end prefix 0 is cached but unused: not counted
    assert [u for _, u in r.replicas[0].kv_samples] == [3, 5, 4, 0]
    # without sharing B's 12 tokens would take 3 blocks (7 > 6): it would wait for A to finish
    # (first token at 3.17 ms).  Here a third request without a prefix needs 5 blocks (6 with
    # its decode slot) at 4 ms, when only 4 are free and prefix 0's 2 are cached: they are
    # evicted, so a fourth request of prefix 0 at 20 ms computes its whole prompt again
    more = reqs + [_req(2, 4 * MS, 20, 2), _req(3, 20 * MS, 12, 2, pid=0, plen=8)]
    r = _run(more, kv_blocks=6, block_size=4)
    assert r.first_ns[2] == 4 * MS + 1_200_000  # 20 tokens, nothing cached
    assert r.first_ns[3] == 20 * MS + 1_120_000  # 12 tokens: the prefix was evicted
    again = _run(reqs + [_req(3, 20 * MS, 12, 2, pid=0, plen=8)], kv_blocks=6, block_size=4)
    assert again.first_ns[2] == 20 * MS + 1_040_000  # kept: only 4 tokens computed
    slow = simulate(more, T, ServeConfig(kv_blocks=6, block_size=4), fast=False)
    assert slow.first_ns == r.first_ns and slow.finish_ns == r.finish_ns


def test_chunked_prefill_splits_a_long_prompt_into_budget_sized_steps() -> None:
    timer = LinearTimer(base_ns=MS, per_token_ns=10_000, per_context_ns=100)
    r = _run([_req(0, 0, 1300, 2)], timer, max_batched_tokens=512)
    # chunks of 512, 512 and 276 tokens over contexts 0, 512, 1024:
    #   3 x 1 ms + 1300 x 10 us + (512 + 1024) x 100 ns = 16,153,600 ns
    assert r.first_ns == [16_153_600]
    assert r.replicas[0].steps == 4  # 3 prefill chunks, 1 decode
    # Sarathi: decodes first, then the new prompt's chunk fills the 512-token budget
    s = _run([_req(0, 0, 10, 20), _req(1, 500_000, 1022, 2)], scheduler="sarathi", chunk_size=512)
    # step 1 (0 ms): request 0's prompt, 1.1 ms; request 1 arrives at 0.5 ms
    # steps 2, 3: request 0's decode + 511 tokens of request 1: 1 ms + 512 x 10 us = 6.12 ms each
    # -> request 1's prompt is done at 1.1 + 2 x 6.12 = 13.34 ms: TTFT 12.84 ms
    assert s.first_ns[1] - 500_000 == 12_840_000


def test_static_batching_waits_for_the_batch_to_finish() -> None:
    reqs = [_req(0, 0, 10, 3), _req(1, 0, 10, 5), _req(2, 500_000, 10, 2)]
    r = _run(reqs, scheduler="static", max_num_seqs=2)
    # step 1: the batch {0, 1} prefills 20 tokens: 1.2 ms; steps 2-3 decode both (1.02 ms each),
    #   request 0 is done at 3.24 ms; steps 4-5 decode request 1 alone (1.01 ms) -> 5.26 ms
    # only then is request 2 (arrived at 0.5 ms) batched: prefill 1.1 ms -> 6.36 ms, decode -> 7.37 ms
    assert r.first_ns == [1_200_000, 1_200_000, 6_360_000]
    assert r.finish_ns == [3_240_000, 5_260_000, 7_370_000]
    # vLLM lets request 2 join step 2 (at 1.2 ms) beside the two decodes: 12 tokens, 1.12 ms
    v = _run(reqs)
    assert v.first_ns[2] == 1_200_000 + 1_000_000 + 2 * 10_000 + 10 * 10_000


def test_orca_and_lightllm_admit_whole_prompts() -> None:
    # Orca: no chunking even with a 512-token cap: a 1300-token prompt runs whole, alone
    o = _run([_req(0, 0, 1300, 2)], scheduler="orca", max_batched_tokens=512)
    assert o.first_ns == [MS + 1300 * 10_000] and o.replicas[0].steps == 2
    # LightLLM admits a request only if every admitted request's prompt + output fits:
    # 10 blocks of 4 tokens; request 0 takes 32 tokens = 8 blocks, so request 1 (8 blocks) waits for it
    r = _run([_req(0, 0, 16, 16), _req(1, 0, 16, 16)], scheduler="lightllm", kv_blocks=10, block_size=4)
    assert r.preemptions == [0, 0]
    assert r.first_ns[1] > r.finish_ns[0]
    # request 0: prefill 16 tokens (1.16 ms), 15 decodes of 1.01 ms -> 16.31 ms; then request 1 the same
    assert r.finish_ns == [16_310_000, 2 * 16_310_000]


def test_pipeline_stages_overlap_batches() -> None:
    timer = LinearTimer(base_ns=MS, per_token_ns=10_000, pp=2)
    r = _run([_req(0, 0, 100, 2), _req(1, 500_000, 100, 2)], timer)
    # a stage of a 100-token prefill: 2 ms. Request 0: stage 0 [0, 2], stage 1 [2, 4] -> TTFT 4 ms
    # request 1 enters stage 0 when it frees: [2, 4], stage 1 [4, 6] -> first token at 6 ms
    # request 0's decode (1.01 ms a stage): stage 0 [4, 5.01], stage 1 waits for request 1: [6, 7.01]
    # request 1's decode enters at 6 ms (its batch is back): stage 0 [6, 7.01], stage 1 [7.01, 8.02]
    assert r.first_ns == [4_000_000, 6_000_000]
    assert r.finish_ns == [7_010_000, 8_020_000]


# -- routers ---------------------------------------------------------------------------------------


def test_routers_choose_by_their_measure() -> None:
    # replica 0: a short prompt with a long output (few KV blocks, many tokens to decode);
    # replica 1: a long prompt (many blocks, fewer tokens). Then short requests at 3 and 4 ms.
    reqs = [
        _req(0, 0, 10, 2000),
        _req(1, MS, 1500, 2),
        _req(2, 3 * MS, 10, 2),
        _req(3, 4 * MS, 10, 2),
        _req(4, 6 * MS, 10, 2),
        _req(5, 6_500_000, 10, 2),
    ]

    def chosen(router: str) -> list[int]:
        return _run(reqs, replicas=2, router=router).replica

    # round-robin: in turn
    assert chosen("round-robin") == [0, 1, 0, 1, 0, 1]
    # least-outstanding: request 1 -> the empty replica 1; request 2: 1 and 1 -> replica 0 (ties to the
    # lowest); request 3: 2 (requests 0, 2) vs 1 -> replica 1; request 4 at 6 ms: request 2 is done
    # (prefill with request 0's decode 3.12 -> 4.23 ms, one decode -> 5.25 ms): 1 vs 2 -> replica 0;
    # request 5 at 6.5 ms: 2 (requests 0, 4) vs 2 (request 1 prefills until 17 ms, 3 waits) -> replica 0
    assert chosen("least-outstanding") == [0, 1, 0, 1, 0, 0]
    # jsq: at 3 ms replica 0 has 10 + 2000 - 1 - 11 = 1998 tokens to go (prompt, one decode done at
    # 2.11 ms), replica 1 has 1500 + 2 - 1 = 1501 -> replica 1; at 4 ms 1997 vs 1501 + 11 -> replica 1
    assert chosen("jsq")[:4] == [0, 1, 1, 1]
    # kv-aware: replica 1 holds 94 blocks for its 1500-token prompt, replica 0 one or two -> replica 0
    assert chosen("kv-aware")[:4] == [0, 1, 0, 0]


def test_router_measures_on_set_states() -> None:
    reps = [Replica(i, "mixed", T, KVCache(100), make_scheduler("vllm"), on_finish=lambda s, t: None) for i in range(3)]
    for r, out, tok, free, wait in zip(reps, (3, 1, 1), (50, 90, 40), (10, 30, 25), (0, 25, 0)):
        r.outstanding, r.pending_tokens, r.kv.free, r.waiting_blocks = out, tok, free, wait
    assert make_router("least-outstanding").choose(reps, 0) == 1  # 1 and 1: the lower index
    assert make_router("jsq").choose(reps, 0) == 2  # 40 tokens
    assert make_router("kv-aware").choose(reps, 0) == 2  # 10, 30 - 25 = 5, 25
    rr = make_router("round-robin")
    assert [rr.choose(reps, 0) for _ in range(4)] == [0, 1, 2, 0]


# -- P/D, speculative decoding, prefix caching ------------------------------------------------------


def test_pd_ttft_includes_the_kv_transfer() -> None:
    timer = LinearTimer(base_ns=MS, per_token_ns=10_000, kv_bytes_per_token=1000)
    sent: list[tuple[int, int, int]] = []

    def link(nbytes: int, src: int, dst: int) -> int:
        sent.append((nbytes, src, dst))
        return link_transfer(50.0, 10_000)(nbytes, src, dst)

    r = simulate([_req(0, 0, 100, 3)], timer, ServeConfig(pd=(1, 1), kv_blocks=100), transfer_ns=link)
    # prefill on replica 0: 2 ms; KV 1000 B x 100 tokens = 100,000 B per GPU at 50 B/ns = 2,000 ns
    # + 10 us latency: the first token reaches the user at 2,012,000 ns
    assert sent == [(100_000, 0, 1)]
    assert r.first_ns == [2_012_000]
    # the decode replica then decodes twice (1.01 ms each)
    assert r.finish_ns == [2_012_000 + 2 * 1_010_000] and r.replica == [1]
    # the prefill replica holds the prompt's 7 blocks (100 / 16) until the transfer is done
    assert r.replicas[0].kv_samples == [(0, 7), (2_012_000, 0)]


def test_speculative_decoding_yields_the_expected_tokens() -> None:
    # k = 3, a = 0.5: (1 - 0.5^4) / (1 - 0.5) = 1.875 tokens a step; running sums 1.875 j rounded
    # down: 1, 3, 5, 7, 9, 11, 13, 15 -> the 15 tokens after the first take 8 steps (not 15)
    r = _run([_req(0, 0, 100, 16)], spec_decode=(3, 0.5))
    # each step verifies 1 + 3 tokens: 1 ms + 4 x 10 us = 1.04 ms
    assert r.finish_ns == [2_000_000 + 8 * 1_040_000]
    assert r.tpot_s() == [pytest.approx(8 * 1.04e-3 / 15)]
    full = _run([_req(0, 0, 100, 16)], spec_decode=(3, 1.0))  # every draft accepted: 4 a step
    assert full.finish_ns == [2_000_000 + 4 * 1_040_000]  # 15 tokens: 4, 4, 4, then 3


def test_prefix_caching_skips_the_cached_tokens() -> None:
    timer = LinearTimer(base_ns=MS, per_token_ns=10_000, per_context_ns=100)
    # hit rate 0.5 of 100 tokens = 50, whole blocks of 16: 48 cached; 52 computed over 48 context
    r = _run([_req(0, 0, 100, 1)], timer, prefix_hit_rate=0.5)
    assert r.first_ns == [MS + 52 * 10_000 + 48 * 100]
    # shared prefix ids: the second request with prefix 7 (64 tokens) finds them computed
    reqs = [_req(0, 0, 100, 1, 7, 64), _req(1, 5 * MS, 100, 1, 7, 64), _req(2, 10 * MS, 100, 1, 8, 64)]
    s = _run(reqs)
    ttft = [f - a for f, a in zip(s.first_ns, s.arrival_ns)]
    assert ttft == [2_000_000, MS + 36 * 10_000, 2_000_000]  # prefix 8 was never computed


# -- the exact fast path, capacity -------------------------------------------------------------------


@pytest.mark.parametrize("scheduler", ["vllm", "sarathi", "orca", "static", "lightllm"])
@pytest.mark.parametrize("prefixes", ["", ",prefixes=3:160"])
def test_runs_of_decode_steps_in_one_go_change_nothing(scheduler: str, prefixes: str) -> None:
    reqs = generate(
        parse_generator("poisson:12,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=4" + prefixes), 300
    )
    timer = LinearTimer(base_ns=8 * MS, per_token_ns=15_000, per_context_ns=300)
    for router in ("round-robin", "jsq", "kv-aware"):
        cfg = ServeConfig(replicas=2, scheduler=scheduler, router=router, kv_blocks=250, max_num_seqs=40)
        a = simulate(reqs, timer, cfg, fast=True, record_steps=True)
        b = simulate(reqs, timer, cfg, fast=False, record_steps=True)
        assert a.first_ns == b.first_ns and a.finish_ns == b.finish_ns and a.preemptions == b.preemptions
        assert [[(x.stages, x.ids) for x in r.records] for r in a.replicas] == [
            [(x.stages, x.ids) for x in r.records] for r in b.replicas
        ]


def test_a_timer_may_time_a_run_of_decode_steps_at_once() -> None:
    class RunTimer(LinearTimer):
        calls = 0

        def decode_steps_ns(self, contexts: list[int], steps: int) -> list[int]:
            RunTimer.calls += 1  # step j: every context one longer, in closed form
            n, c = len(contexts), sum(contexts)
            return [
                round(self.base_ns + self.per_token_ns * n + self.per_context_ns * (c + j * n)) for j in range(steps)
            ]

    reqs = generate(parse_generator("poisson:12,prompt=lognormal:300:0.7,output=lognormal:80:0.8,seed=4"), 300)
    args = dict(base_ns=8 * MS, per_token_ns=15_000, per_context_ns=300)
    cfg = ServeConfig(replicas=2, kv_blocks=250, max_num_seqs=40)
    a = simulate(reqs, RunTimer(**args), cfg)
    b = simulate(reqs, LinearTimer(**args), cfg)
    assert RunTimer.calls > 0 and a.first_ns == b.first_ns and a.finish_ns == b.finish_ns


def test_a_drafted_timer_passes_on_the_targets_activations() -> None:
    """``activation_bytes`` is part of the StepTimer protocol (issue 29): the drafted timer keeps
    the target's, so --kv-blocks is checked against the memory left after the weights, and a
    step whose activations leave no room for the cache is named as such."""
    from podsim.serving.llm.deployment import _check_kv_blocks
    from podsim.serving.llm.drafting import DraftedTimer
    from podsim.serving.llm.simulate import kv_blocks

    class Draft(LinearTimer):
        weights_bytes_per_gpu = 200.0

    draft = Draft(base_ns=100_000, per_token_ns=1_000, kv_bytes_per_token=0.5)
    target = LinearTimer(
        base_ns=MS, per_token_ns=10_000, kv_bytes_per_token=1.0, kv_capacity_bytes=1000.0, activation_bytes=300.0
    )
    t = DraftedTimer(target, draft, 3)  # type: ignore[arg-type]
    assert t.activation_bytes == 300.0 and t.kv_capacity_bytes == 800.0
    # after the two models' weights 800 + 300 = 1,100 B a GPU; a block of 16 tokens of 1.5 B is 24 B:
    # 45 blocks (1,080 B) fit, 46 (1,104 B) do not
    _check_kv_blocks(ServeConfig(kv_blocks=45, block_size=16), t)
    with pytest.raises(InputError, match="room for 45 blocks"):
        _check_kv_blocks(ServeConfig(kv_blocks=46, block_size=16), t)
    # the KV room of 20 B holds no 24-B block, which the 300 B of activations would: said so
    small = DraftedTimer(replace(target, kv_capacity_bytes=220.0), draft, 3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="--max-num-seqs: a step of --max-num-seqs / --max-batched-tokens this large"):
        kv_blocks(ServeConfig(block_size=16), small)


def test_find_capacity_brackets_the_rate() -> None:
    class Stub:
        def __init__(self, qps: float) -> None:
            self.qps = qps

        def slo_attainment(self) -> float:
            return 1.0 if self.qps <= 7.3 else 0.5

    cap = find_capacity(Stub, 0.99, start_qps=1.0)  # type: ignore[arg-type]
    # 1, 2, 4 meet, 8 does not; then halves of [4, 8] down to 2% of the upper end
    assert cap.qps <= 7.3 < cap.upper_qps and cap.upper_qps - cap.qps <= 0.02 * cap.upper_qps  # type: ignore[operator]
    assert [q for q, _ in cap.probes[:4]] == [1.0, 2.0, 4.0, 8.0]
    # on a real run: the rate found meets the SLO, the one above does not
    base = generate(parse_generator("poisson:1,prompt=200,output=20"), 200)

    def run(qps: float):  # type: ignore[no-untyped-def]
        return simulate(with_poisson_arrivals(base, qps), T, ServeConfig(kv_blocks=5000, slo_ttft_s=0.01))

    real = find_capacity(run, 0.9, start_qps=10.0, iterations=6)
    atts = dict(real.probes)
    assert atts[real.qps] >= 0.9 and real.upper_qps is not None and atts[real.upper_qps] < 0.9


# -- outputs ---------------------------------------------------------------------------------------


def test_json_fields_trace_and_plot(tmp_path: Path) -> None:
    from podsim.serving.llm.trace import write_serve_trace

    r = simulate(
        [_req(0, 0, 100, 3), _req(1, 0, 50, 2)],
        T,
        ServeConfig(kv_blocks=100, slo_ttft_s=0.01, slo_tpot_s=0.0010175),
        record_steps=True,
    )
    d = r.to_dict()
    stats = {f"{m}_{k}_s" for m in ("ttft", "tpot", "e2e") for k in ("mean", "p50", "p90", "p99")}
    assert set(d) == stats | {
        "tokens_per_s",
        "requests_per_s",
        "slo_attainment",
        "mfu",
        "preemptions",
        "swaps",
        "requests",
        "kv_use",
    }
    assert set(d["requests"][0]) == {
        "id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "replica",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "preemptions",
    }
    # TTFTs 2.5 ms meet 10 ms; TPOTs 1.015 ms and 1.02 ms (test_two_requests_share_one_batch): one meets
    # 1.0175 ms
    assert d["slo_attainment"] == 0.5
    # KV: 7 + 4 blocks of 16 for the prompts (100 and 50 tokens, neither grows past its blocks), request
    # 1's 4 freed when it finishes (3.52 ms), request 0's 7 at 4.53 ms
    assert d["kv_use"][0]["samples"] == [[0.0, 0.11], [0.00352, 0.07], [0.00453, 0.0]]
    write_serve_trace(r, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [s["name"] for s in slices] == ["prefill 2", "decode 2", "decode 1"]
    assert slices[0]["args"]["requests"] == [0, 1] and slices[0]["dur"] == 2500.0  # us
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"]
    assert names == ["replica 0"]
    pytest.importorskip("matplotlib")
    from podsim.serving.llm.plot import plot_serving

    plot_serving(r, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vllm_defaults_follow_vllm_serve() -> None:
    # vllm/engine/arg_utils.py: >= 70 GiB and not an A100: 8192 tokens, 1024 sequences; else 2048, 256
    assert vllm_defaults(79.6, "H100-SXM5-80GB") == (8192, 1024)
    assert vllm_defaults(80, "A100-SXM4-80GB") == (2048, 256)
    assert vllm_defaults(40, "A100-SXM4-40GB") == (2048, 256)


def test_kv_capacity_from_memory() -> None:
    # 1 GiB per GPU at 81,920 B a token (Llama 2 70B at TP 4) in blocks of 16: 2^30 / 1,310,720 = 819
    assert blocks_from_memory(2**30, 81_920, 16) == 819
    with pytest.raises(InputError, match="no room for a KV cache"):
        blocks_from_memory(-5e9, 81_920, 16)


# -- workloads --------------------------------------------------------------------------------------


def test_generators(tmp_path: Path) -> None:
    p = generate(parse_generator("poisson:10,prompt=uniform:5-7,output=lognormal:100:0.5,seed=1"), 4000)
    gaps = [(b.arrival_ns - a.arrival_ns) / 1e9 for a, b in zip(p, p[1:])]
    assert p[0].arrival_ns == 0 and statistics.mean(gaps) == pytest.approx(0.1, rel=0.05)
    assert {r.prompt_tokens for r in p} == {5, 6, 7}
    assert statistics.median(r.output_tokens for r in p) == pytest.approx(100, rel=0.05)
    g = generate(parse_generator("gamma:10,cv=2,prompt=8,output=4"), 4000)
    ggaps = [(b.arrival_ns - a.arrival_ns) / 1e9 for a, b in zip(g, g[1:])]
    assert statistics.mean(ggaps) == pytest.approx(0.1, rel=0.1)
    assert statistics.pstdev(ggaps) / statistics.mean(ggaps) == pytest.approx(2.0, rel=0.1)
    # the same lengths at another rate, gaps scaled
    q = generate(parse_generator("poisson:20,prompt=uniform:5-7,output=lognormal:100:0.5,seed=1"), 4000)
    assert [r.prompt_tokens for r in q] == [r.prompt_tokens for r in p]
    assert q[100].arrival_ns == pytest.approx(p[100].arrival_ns / 2, abs=1)
    # a trace with shared prefixes
    f = tmp_path / "t.csv"
    f.write_text(
        "arrived_at,num_prefill_tokens,num_decode_tokens,prefix_id,prefix_tokens\n0.0,100,5,3,64\n0.5,80,2,,\n"
    )
    assert read_trace(f) == [Request(0, 0, 100, 5, 3, 64), Request(1, 500_000_000, 80, 2, -1, 0)]


def test_bad_input_is_refused_clearly(tmp_path: Path) -> None:
    def trace(text: str) -> Path:
        f = tmp_path / "t.csv"
        f.write_text(text)
        return f

    with pytest.raises(InputError, match=r"t\.csv: header: missing column 'num_decode_tokens'"):
        read_trace(trace("arrived_at,num_prefill_tokens\n0,5\n"))
    with pytest.raises(InputError, match=r"row 2 \(line 3\), column num_prefill_tokens: .* got '-4'"):
        read_trace(trace("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,3\n1,-4,2\n"))
    with pytest.raises(InputError, match=r"row 1 \(line 2\), column num_decode_tokens: .* got '3.5'"):
        read_trace(trace("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,3.5\n"))
    with pytest.raises(InputError, match=r"row 2 \(line 3\), column arrived_at: .*time order"):
        read_trace(trace("arrived_at,num_prefill_tokens,num_decode_tokens\n2,5,3\n1,4,2\n"))
    with pytest.raises(InputError, match="did you mean 'vllm'"):
        make_scheduler("vlm")
    with pytest.raises(InputError, match="did you mean 'least-outstanding'"):
        make_router("least-outstandnig")
    with pytest.raises(InputError, match="did you mean 'prompt'"):
        parse_generator("poisson:3,promt=5")
    # 4000 + 200 tokens do not fit a 4096-token context
    with pytest.raises(InputError, match="more than the model's context of 4096"):
        _run([_req(0, 0, 4000, 200)], max_context=4096)
    # 100 + 20 tokens need 119 slots = 8 blocks of 16; the cache holds 7
    with pytest.raises(InputError, match="smaller than one request.*needs 8 blocks"):
        _run([_req(0, 0, 100, 20)], kv_blocks=7)


def test_cli_runs_and_refuses(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
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
                "50",
                "--replicas",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert len(d["requests"]) == 50 and {r["replica"] for r in d["requests"]} == {0, 1}
    assert "TTFT" in capsys.readouterr().out
    assert main(["serve-llm", "--model", "llama3-8b", "--workload", "poisson:5", "--scheduler", "orcca"]) == 2
    assert "did you mean 'orca'" in capsys.readouterr().err


# -- the real trace -------------------------------------------------------------------------------


@pytest.mark.conformance
def test_azure_conversation_trace() -> None:
    root = Path(os.environ.get("PODSIM_REFERENCE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    path = root / "llm-serving" / "azure_llm_2023_conv.csv"
    if not path.is_file():
        if os.environ.get("PODSIM_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"reference data required but {path} is missing")
        pytest.skip(f"the Azure LLM trace is not at {path} (set PODSIM_REFERENCE_DATA to shared/data)")
    reqs = read_trace(path)
    # the data README: 19,366 requests over one hour, median prompt 1020 and output 129 tokens
    assert len(reqs) == 19_366
    assert statistics.median(r.prompt_tokens for r in reqs) == 1020
    assert statistics.median(r.output_tokens for r in reqs) == 129
    assert reqs[0].arrival_ns == 0 and reqs[-1].arrival_ns < 3600e9
    r = simulate(
        reqs[:2000],
        LinearTimer(base_ns=15 * MS, per_token_ns=30_000, per_context_ns=50),
        ServeConfig(replicas=4, kv_blocks=20_000),
    )
    assert r.num_requests == 2000 and min(r.first_ns[i] - r.arrival_ns[i] for i in range(2000)) > 15 * MS
