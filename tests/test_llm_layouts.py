"""Pipeline splits as Megatron-Core writes them, and ZeRO-3 / FSDP memory sharding.

Every expectation below is derived by hand from the rules in ``podsim.llm.layout``'s
docstring (Megatron-Core's ``get_num_layers_to_build`` / layer offsets): virtual stage
``g = chunk * pp + rank`` holds a contiguous run of layers, in that order.
"""

from __future__ import annotations

import pytest

from podsim.cli import build_parser
from podsim.cli.llm import _pipeline_layers
from podsim.errors import InputError
from podsim.llm import get_model
from podsim.llm.layout import Layout
from podsim.llm.memory import peak_activations, stage_memory, stage_params
from podsim.llm.model import ModelConfig

#: 6 GPT-style layers, h 64, 4 heads, MLP 256, vocabulary 128, 16 tokens.  Per layer: attention
#: 4 h^2 + 4 h = 16,640, MLP 2 h f + f + h = 33,088, two LayerNorms 4 h = 256: 49,984
#: parameters.  Embedding V h + s h = 8,192 + 1,024 = 9,216; final norm 2 h = 128 (tied output).
TINY = ModelConfig("tiny", 6, 64, 4, 256, 128, 16)
TINY_LAYER = 49_984


def ranges(lay: Layout, m: ModelConfig, rank: int) -> list[tuple[int, int]]:
    return [(r.start, r.stop) for r in (lay.chunk_layers(m, rank, c) for c in range(lay.vpp))]


# -- Llama 3.1 405B, PP 8 x VPP 8, embedding and loss counted in the split -------------------

LLAMA_PP8_VPP8 = dict(
    gpus=8192,
    tp=8,
    pp=8,
    vpp=8,
    global_batch=2048,
    seq_len=8192,
    sequence_parallel=True,
    distributed_optimizer=True,
    account_for_embedding=True,
    account_for_loss=True,
)


def test_llama405b_pp8_vpp8_split() -> None:
    # 126 + 1 (embedding) + 1 (loss) = 128 = 8 ranks x 8 chunks x 2.  Virtual stage g holds
    # "layers" 2g, 2g+1 of the 128; minus the embedding that is layers 2g-1, 2g of the 126,
    # except virtual stage 0 (only layer 0 besides the embedding) and 63 (only layer 125
    # besides the loss).  Rank r, chunk c is virtual stage 8c + r: layers [16c + 2r - 1, 16c + 2r + 1).
    m = get_model("llama3-405b")
    lay = Layout(**LLAMA_PP8_VPP8)
    lay.check(m)
    expected = {
        0: [(0, 1), (15, 17), (31, 33), (47, 49), (63, 65), (79, 81), (95, 97), (111, 113)],
        1: [(1, 3), (17, 19), (33, 35), (49, 51), (65, 67), (81, 83), (97, 99), (113, 115)],
        2: [(3, 5), (19, 21), (35, 37), (51, 53), (67, 69), (83, 85), (99, 101), (115, 117)],
        3: [(5, 7), (21, 23), (37, 39), (53, 55), (69, 71), (85, 87), (101, 103), (117, 119)],
        4: [(7, 9), (23, 25), (39, 41), (55, 57), (71, 73), (87, 89), (103, 105), (119, 121)],
        5: [(9, 11), (25, 27), (41, 43), (57, 59), (73, 75), (89, 91), (105, 107), (121, 123)],
        6: [(11, 13), (27, 29), (43, 45), (59, 61), (75, 77), (91, 93), (107, 109), (123, 125)],
        7: [(13, 15), (29, 31), (45, 47), (61, 63), (77, 79), (93, 95), (109, 111), (125, 126)],
    }
    for rank, want in expected.items():
        assert ranges(lay, m, rank) == want, rank
    assert lay.virtual_stage_layer_counts(m) == [1] + [2] * 62 + [1]
    assert lay.stage_layer_counts(m) == [15, 16, 16, 16, 16, 16, 16, 15]
    # every layer exactly once
    seen = sorted(i for r in range(8) for c in range(8) for i in lay.chunk_layers(m, r, c))
    assert seen == list(range(126))


def test_llama405b_pp16_vpp8_has_empty_edge_stages() -> None:
    # 128 / (16 x 8) = 1 layer per virtual stage: the first holds only the embedding, the last
    # only the loss; rank r, chunk c holds layer 16c + r - 1
    m = get_model("llama3-405b")
    lay = Layout(
        8192, tp=8, pp=16, vpp=8, global_batch=2048, seq_len=8192, account_for_embedding=True, account_for_loss=True
    )
    lay.check(m)
    assert list(lay.chunk_layers(m, 0, 0)) == []
    assert list(lay.chunk_layers(m, 0, 1)) == [15]
    assert list(lay.chunk_layers(m, 1, 0)) == [0]
    assert list(lay.chunk_layers(m, 15, 6)) == [110]
    assert list(lay.chunk_layers(m, 15, 7)) == []
    assert lay.stage_layer_counts(m) == [7] + [8] * 14 + [7]


def test_account_for_one_of_them_and_without_vpp() -> None:
    # PP 16, no VPP: 126 + 2 = 128 = 16 x 8 -> 7, 8 x 14, 7 (the Llama 3 paper's split)
    m = get_model("llama3-405b")
    lay = Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192, account_for_embedding=True, account_for_loss=True)
    lay.check(m)
    assert lay.stage_layer_counts(m) == [7] + [8] * 14 + [7]
    assert ranges(lay, m, 15) == [(119, 126)]
    # only the loss counted: 5 + 1 = 6 over PP 3 -> 2, 2, 1; only the embedding: 1, 2, 2
    five = ModelConfig("five", 5, 64, 4, 256, 128, 16)
    lay = Layout(3, pp=3, global_batch=3, seq_len=16, account_for_loss=True)
    lay.check(five)
    assert [ranges(lay, five, r) for r in range(3)] == [[(0, 2)], [(2, 4)], [(4, 5)]]
    lay = Layout(3, pp=3, global_batch=3, seq_len=16, account_for_embedding=True)
    assert [ranges(lay, five, r) for r in range(3)] == [[(0, 1)], [(1, 3)], [(3, 5)]]


def test_first_last_stage_layers_with_vpp() -> None:
    # Megatron: --decoder-first/last-pipeline-num-layers set a whole pipeline rank's layers,
    # split evenly over its VPP chunks.  30 layers, PP 4, VPP 2, first 4, last 2: the middle
    # ranks share 24 -> 12 each, 6 per chunk.  Chunk row 0: 2 | 6 | 6 | 1, row 1 the same.
    m = ModelConfig("thirty", 30, 64, 4, 256, 128, 16)
    lay = Layout(4, pp=4, vpp=2, global_batch=4, seq_len=16, first_stage_layers=4, last_stage_layers=2)
    lay.check(m)
    assert lay.virtual_stage_layer_counts(m) == [2, 6, 6, 1, 2, 6, 6, 1]
    assert lay.stage_layer_counts(m) == [4, 12, 12, 2]
    assert ranges(lay, m, 0) == [(0, 2), (15, 17)]
    assert ranges(lay, m, 1) == [(2, 8), (17, 23)]
    assert ranges(lay, m, 2) == [(8, 14), (23, 29)]
    assert ranges(lay, m, 3) == [(14, 15), (29, 30)]
    # VPP 1 stays as before: Llama 3 405B 7 + 14 x 8 + 7
    big = get_model("llama3-405b")
    lay = Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192, first_stage_layers=7, last_stage_layers=7)
    assert ranges(lay, big, 1) == [(7, 15)]


def test_explicit_pipeline_layers() -> None:
    # 10 layers, PP 2, VPP 2, "1,3,4,2": virtual stages 0 (rank 0, chunk 0) = [0, 1),
    # 1 (rank 1, chunk 0) = [1, 4), 2 (rank 0, chunk 1) = [4, 8), 3 (rank 1, chunk 1) = [8, 10)
    m = ModelConfig("ten", 10, 64, 4, 256, 128, 16)
    lay = Layout(2, pp=2, vpp=2, global_batch=2, seq_len=16, pipeline_layers=_pipeline_layers("1, 3,4,2"))
    lay.check(m)
    assert lay.pipeline_layers == (1, 3, 4, 2)
    assert ranges(lay, m, 0) == [(0, 1), (4, 8)]
    assert ranges(lay, m, 1) == [(1, 4), (8, 10)]
    assert lay.stage_layer_counts(m) == [5, 5]
    # a list is kept as a tuple (the layout stays hashable); the edge stages may be empty
    lay = Layout(2, pp=2, vpp=2, global_batch=2, seq_len=16, pipeline_layers=[0, 5, 5, 0])
    lay.check(m)
    assert hash(lay) and ranges(lay, m, 0) == [(0, 0), (5, 10)] and ranges(lay, m, 1) == [(0, 5), (10, 10)]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(pipeline_layers=(1, 3, 4, 3)), r"--pipeline-layers sums to 11 layers; ten has 10"),
        (dict(pipeline_layers=(5, 5)), r"--pipeline-layers needs PP x VPP = 2 x 2 = 4 numbers .* got 2"),
        (dict(pipeline_layers=(4, -1, 4, 3)), r"virtual stage 1 has -1 layers; expected an integer >= 0"),
        (dict(pipeline_layers=(5, 0, 5, 0)), r"virtual stage 1 \(rank 1, chunk 0\) has no layers; only the first"),
        (dict(pipeline_layers=(1, 3, 4, 2), account_for_loss=True), r"choose one uneven pipeline split"),
        (dict(first_stage_layers=3), r"--first-stage-layers 3 must be a multiple of VPP 2"),
        (
            dict(first_stage_layers=2, last_stage_layers=4),
            r"an uneven split \(first 2, last 4\) of the 10 layers of ten leaves 4 for the other 0 "
            r"pipeline ranks; expected none",
        ),
        (dict(first_stage_layers=4, account_for_embedding=True), r"choose one uneven pipeline split"),
        (
            dict(account_for_embedding=True),
            r"with the embedding counted as layers, PP x VPP = 4 does not divide "
            r"the 11 \(= 10 \+ 1\) layers of ten",
        ),
    ],
)
def test_bad_splits(kw: dict, message: str) -> None:
    m = ModelConfig("ten", 10, 64, 4, 256, 128, 16)
    with pytest.raises(InputError, match=message):
        Layout(2, pp=2, vpp=2, global_batch=2, seq_len=16, **kw).check(m)


def test_bad_split_errors_name_the_way_out() -> None:
    m = get_model("llama3-405b")
    with pytest.raises(
        InputError,
        match=r"PP x VPP = 64 does not divide the 126 layers of llama3-405b \(give an "
        r"uneven split: --account-for-embedding-in-pipeline-split "
        r"--account-for-loss-in-pipeline-split \(126 \+ 2 = 128 layers, 2 per "
        r"virtual stage\); or --pipeline-layers with 64 numbers\)",
    ):
        Layout(8192, tp=8, pp=8, vpp=8, global_batch=2048, seq_len=8192).check(m)
    with pytest.raises(InputError, match=r"--first-stage-layers 7 --last-stage-layers 7"):
        Layout(16384, tp=8, pp=16, global_batch=2048, seq_len=8192).check(m)
    with pytest.raises(InputError, match=r"leaves 9 layers on each other pipeline rank, not a multiple of VPP 2"):
        # 30 layers, PP 4, VPP 2: first 6 and last 6 leave 18 = 9 + 9
        Layout(4, pp=4, vpp=2, global_batch=4, seq_len=16, first_stage_layers=6, last_stage_layers=6).check(
            ModelConfig("thirty", 30, 64, 4, 256, 128, 16)
        )
    with pytest.raises(InputError, match=r"--pipeline-layers takes comma-separated layer counts.*'x'"):
        _pipeline_layers("1,x,2")


def test_cli_flags() -> None:
    a = build_parser().parse_args(
        [
            "llm",
            "--model",
            "llama3-405b",
            "--gpus",
            "8192",
            "--tp",
            "8",
            "--pp",
            "8",
            "--vpp",
            "8",
            "--account-for-embedding-in-pipeline-split",
            "--account-for-loss-in-pipeline-split",
            "--global-batch",
            "2048",
            "--fsdp",
        ]
    )
    assert a.account_for_embedding_in_pipeline_split and a.account_for_loss_in_pipeline_split and a.zero == 3
    a = build_parser().parse_args(
        [
            "llm",
            "--model",
            "x",
            "--decoder-first-pipeline-num-layers",
            "7",
            "--decoder-last-pipeline-num-layers",
            "7",
            "--pipeline-layers",
            "1,2",
        ]
    )
    assert (a.first_stage_layers, a.last_stage_layers, a.pipeline_layers) == (7, 7, "1,2")
    with pytest.raises(SystemExit):  # --fsdp is --zero 3: not with the distributed optimizer
        build_parser().parse_args(["llm", "--fsdp", "--distributed-optimizer"])


# -- memory per stage, by hand ------------------------------------------------------------------


def test_memory_per_stage_of_an_uneven_interleaved_split() -> None:
    # TINY, PP 2, VPP 2, embedding and loss counted: (6 + 2) / 4 = 2 per virtual stage ->
    # rank 0: chunk 0 = [0] (+ embedding), chunk 1 = [3, 4]; rank 1: chunk 0 = [1, 2],
    # chunk 1 = [5] (+ output layer and loss)
    lay = Layout(2, pp=2, vpp=2, global_batch=4, seq_len=16, account_for_embedding=True, account_for_loss=True)
    lay.check(TINY)
    assert ranges(lay, TINY, 0) == [(0, 1), (3, 5)] and ranges(lay, TINY, 1) == [(1, 3), (5, 6)]
    # parameters: 3 layers each; rank 0 + embedding 9,216; rank 1 + final norm 128 + its own
    # copy of the tied embedding matrix 8,192
    assert stage_params(TINY, lay, 0) == 3 * TINY_LAYER + 9_216 == 159_168
    assert stage_params(TINY, lay, 1) == 3 * TINY_LAYER + 128 + 8_192 == 158_272
    m0 = stage_memory(TINY, lay, 0)
    assert (m0.weights, m0.gradients, m0.optimizer) == (2 * 159_168, 4 * 159_168, 12 * 159_168)
    # activations per layer and micro-batch (Korthikanti, flash attention, TP 1):
    # s b h (10 + 24) = 16 x 64 x 34 = 34,816 B; embedding output s b h = 1,024 B.
    # Rank 0, 4 micro-batches, interleaved: warm-up 2 (p - 1) + (v - 1) p = 4 forwards
    # (mb0 c0, mb1 c0, mb0 c1, mb1 c1), then mb2 c0: in flight 3 x chunk 0 (1 layer) + 2 x chunk 1
    # (2 layers) = 7 layers and 3 embedding outputs (an even split would give 7.5 layers)
    assert peak_activations(TINY, lay, 0) == (7 * 34_816, 3 * 1_024)
    assert m0.activations_layers == 7 * 34_816 and m0.activations_other == 3 * 1_024
    # Rank 1: warm-up 2 (mb0 c0, mb1 c0), then F mb0 c1 / B mb0 c1, F mb1 c1 / B mb1 c1,
    # F mb2 c0: 3 x chunk 0 (2 layers) = 6 layers; plus the output layer's input and fp32
    # logits 4 s b h + 4 s b V = 4,096 + 8,192
    m1 = stage_memory(TINY, lay, 1)
    assert m1.activations_layers == 6 * 34_816 and m1.activations_other == 4_096 + 8_192
    assert m1.total == 18 * 158_272 + 6 * 34_816 + 12_288


def test_interleaved_even_split_keeps_korthikanti() -> None:
    # even split, first stage: L (1 + (p - 1) / (p v)) layers' activations: 8 layers, PP 2,
    # VPP 2 -> 8 x 1.25 = 10 layers = 348,160 B
    m = ModelConfig("eight", 8, 64, 4, 256, 128, 16)
    lay = Layout(2, pp=2, vpp=2, global_batch=4, seq_len=16)
    assert stage_memory(m, lay, 0).activations_layers == 10 * 34_816
    # 1F1B: stage s holds p - s micro-batches of its 4 layers
    lay = Layout(2, pp=2, global_batch=4, seq_len=16)
    assert [stage_memory(m, lay, s).activations_layers for s in (0, 1)] == [8 * 34_816, 4 * 34_816]


# -- ZeRO-3 / FSDP ----------------------------------------------------------------------------


def test_zero3_memory_sharding_tiny() -> None:
    # DP 4, ZeRO-3: all 6 x 49,984 + 9,216 + 128 = 309,248 parameters sharded over DP:
    # weights 2/4, gradients 2/4, optimizer 12/4 B per parameter; buffers: the gathered bf16
    # weights of two layers (the largest units: a layer beats the 9,216-parameter embedding)
    lay = Layout(4, global_batch=4, seq_len=16, zero=3)
    lay.check(TINY)
    p = 6 * TINY_LAYER + 9_216 + 128
    assert stage_params(TINY, lay, 0) == p == 309_248
    mem = stage_memory(TINY, lay, 0)
    assert (mem.weights, mem.gradients, mem.optimizer) == (p / 2, p / 2, 3 * p)
    assert mem.buffers == 2 * 2 * TINY_LAYER
    # --fsdp at DP 1 shards nothing and gathers nothing
    one = stage_memory(TINY, Layout(1, global_batch=4, seq_len=16, zero=3), 0)
    assert (one.weights, one.gradients, one.optimizer, one.buffers) == (2 * p, 2 * p, 12 * p, 0)


def test_zero3_memory_llama3_8b() -> None:
    # Llama 3 8B on 8 H100s, FSDP: 8,030,261,248 parameters; per GPU 2/8 + 2/8 + 12/8 B each.
    # The largest units are the untied output layer (128,256 x 4,096 + a 4,096 norm) and the
    # embedding (128,256 x 4,096): 2 B x (525,340,672 + 525,336,576) of gathered weights
    m = get_model("llama3-8b")
    lay = Layout(8, global_batch=32, seq_len=8192, zero=3)
    lay.check(m)
    p = m.total_params()
    assert p == 8_030_261_248
    mem = stage_memory(m, lay, 0)
    assert mem.weights == mem.gradients == 2 * p / 8
    assert mem.optimizer == 12 * p / 8
    assert mem.buffers == 2 * (525_340_672 + 525_336_576)
    # 1,024 GPUs: 64x less of the states, the same activations and buffers
    big = stage_memory(m, Layout(1024, global_batch=1024, seq_len=8192, zero=3), 0)
    assert big.states == pytest.approx(mem.states / 128)
    assert big.activations == mem.activations and big.buffers == mem.buffers


def test_generated_programs_follow_the_split() -> None:
    # generate() runs chunk_layers(stage, chunk) for every pass: with PP 2, VPP 2 and both edges
    # counted, rank 0 runs the embedding and layers 0, 3, 4; rank 1 layers 1, 2, 5 and the output
    import re

    from podsim.compute.model import ComputeModel
    from podsim.hardware.gpu import get_gpu
    from podsim.llm.generate import generate

    lay = Layout(2, pp=2, vpp=2, global_batch=4, seq_len=16, account_for_embedding=True, account_for_loss=True)
    w = generate(TINY, lay, ComputeModel.for_gpu(get_gpu("h100-80gb")))
    layers = [sorted({int(x) for n in p.names for x in re.findall(r"\bL(\d+)\b", n)}) for p in w.programs]
    assert layers == [[0, 3, 4], [1, 2, 5]]
    assert any("embedding" in n for n in w.programs[0].names)
    assert not any("embedding" in n for n in w.programs[1].names)
