"""The search space of training layouts: what is kept, what is rejected and why (issue #15)."""

from __future__ import annotations

import pytest

from podsim.errors import InputError
from podsim.llm.model import get_model
from podsim.sweep import Space, enumerate_layouts

ONE = dict(vpp=(1,), cp=(1,), ep=(1,), recompute=("none",), sequence_parallel=(False,), distributed_optimizer=(False,))


def test_a_small_space_counted_by_hand() -> None:
    model = get_model("llama3-8b")  # 32 layers, 32 heads, 8 KV heads
    space = Space(gpus=(8,), global_batch=8, seq_len=2048, tp=(1, 2, 4, 8), pp=(1, 2, 4, 8), micro_batch=(1, 2), **ONE)
    e = enumerate_layouts(model, space, gpu_memory_gib=1e6)
    # TP x PP must divide 8: 10 of the 16 pairs; with micro-batch 2 the global batch of 8 needs
    # DP <= 4, which removes TP = PP = 1 (DP 8)
    assert len(e.layouts) == 10 * 2 - 1 and e.considered == 32
    assert e.rejected == {
        "N GPUs are not divisible by TP x PP x CP = N x N x N = N": 12,
        "the global batch N is not a multiple of DP x micro-batch = N x N": 1,
    }
    assert {(x.tp, x.pp, x.micro_batch) for x in e.layouts} >= {(8, 1, 2), (1, 8, 1), (2, 4, 2)}


def test_layouts_that_do_not_fit_are_rejected() -> None:
    model = get_model("llama3-70b")
    space = Space(gpus=(64,), global_batch=64, seq_len=4096, tp=(1, 8), pp=(1, 8), micro_batch=(1,), **ONE)
    e = enumerate_layouts(model, space, gpu_memory_gib=80)
    # 70B parameters with Adam (16 bytes each) are 1.1 TB: no GPU of 80 GiB holds them unsplit,
    # TP 8 x PP 8 leaves 17.5 GB of states per GPU
    assert [(x.tp, x.pp) for x in e.layouts] == [(8, 8)]
    assert e.rejected == {"does not fit in 80 GiB per GPU": 3}
    assert 0 < e.memory_gib[0] <= 80


def test_an_empty_space_says_what_emptied_it() -> None:
    model = get_model("llama3-8b")
    space = Space(gpus=(64,), global_batch=64, seq_len=2048, tp=(64,), pp=(1,), micro_batch=(1,), **ONE)
    with pytest.raises(
        InputError,
        match=r"no layout is left of 1 for llama3-8b on 64 GPUs: "
        r"1 x TP N does not divide the N attention heads of the model",
    ):
        enumerate_layouts(model, space, gpu_memory_gib=80)


def test_expert_tp_is_a_dimension_of_moe_layouts_only() -> None:
    """``--etp-values``: Megatron-Core's expert TP, tried where it is one (issue #28)."""
    moe = get_model("qwen3-30b-a3b")  # 128 experts, 32 heads, 4 KV heads
    common = dict(gpus=(16,), global_batch=64, seq_len=2048, pp=(1,), micro_batch=(1,), **{**ONE, "ep": (8,)})
    space = Space(tp=(1, 2), etp=(None, 1, 2), **common)
    e = enumerate_layouts(moe, space, gpu_memory_gib=1e6)
    # TP 1: ETP 1 is TP's (the default) and ETP 2 another; TP 2: ETP 2 is TP's, ETP 1 another.
    # Each pair's ETP x EP must divide TP x DP = 16: 1 x 8 and 2 x 8 both do; TP 2 with MoE
    # layers needs sequence parallelism (ONE turns it off): those two are rejected
    assert [(x.tp, x.etp) for x in e.layouts] == [(1, None), (1, 2)]
    assert sum(e.rejected.values()) == 2 and all("sequence-parallel" in r for r in e.rejected)
    # ETP x EP = 4 x 8 = 32 does not divide the 16 ranks of a stage
    with pytest.raises(InputError, match=r"1 x ETP x EP = N x N = N must divide the N ranks of a pipeline stage"):
        enumerate_layouts(moe, Space(tp=(1,), etp=(4,), **common), gpu_memory_gib=1e6)


def test_expert_tp_values_leave_a_dense_model_alone() -> None:
    dense = get_model("llama3-8b")
    space = Space(gpus=(8,), global_batch=8, seq_len=2048, tp=(1, 2), pp=(1,), micro_batch=(1,), etp=(1, 2), **ONE)
    e = enumerate_layouts(dense, space, gpu_memory_gib=1e6)
    # a dense model has no experts: every ETP value is the default, each layout once
    assert [(x.tp, x.etp) for x in e.layouts] == [(1, None), (2, None)]


def test_sequence_parallelism_on_only_rejects_the_tp_1_points_and_says_so() -> None:
    model = get_model("llama3-8b")
    sp = {**ONE, "sequence_parallel": (True,)}
    e = enumerate_layouts(
        model, Space(gpus=(8,), global_batch=8, seq_len=2048, tp=(1, 2), pp=(1,), micro_batch=(1,), **sp), 1e6
    )
    # TP 2 takes it; TP 1 has no tensor-parallel ranks to shard over (podsim llm refuses --tp 1
    # --sequence-parallel): one point, counted as rejected, no error
    assert [(x.tp, x.sequence_parallel) for x in e.layouts] == [(2, True)]
    assert e.rejected == {"--sequence-parallel-values on: sequence parallelism needs TP > 1": 1}
    both = {**ONE, "sequence_parallel": (True, False)}
    e = enumerate_layouts(
        model, Space(gpus=(8,), global_batch=8, seq_len=2048, tp=(1, 2), pp=(1,), micro_batch=(1,), **both), 1e6
    )
    # on and off: TP 1 once (off), TP 2 twice, nothing rejected
    assert sorted((x.tp, x.sequence_parallel) for x in e.layouts) == [(1, False), (2, False), (2, True)]
    assert not e.rejected


def test_fits_is_at_most_the_gpus_gib() -> None:
    from podsim.llm.memory import GIB, StageMemory, fits

    # 60 + 15 + 4.6 GiB = 79.6 GiB: an H100's memory exactly fits; one byte more does not
    exact = StageMemory(0, 20 * GIB, 20 * GIB, 20 * GIB, 15 * GIB, 0.0, 4.6 * GIB)
    assert fits(exact, 79.6) and not fits(StageMemory(0, 20 * GIB, 20 * GIB, 20 * GIB, 15 * GIB, 1.0, 4.6 * GIB), 79.6)


#: Llama 3 8B on 8 H100s (79.6 GiB), global batch 32 of 8,192 tokens, no distributed optimizer:
#: layouts a few GiB either side of the memory limit (model states of 16 or 8 of the 32 layers,
#: 8.03e9 x 18 B / PP / TP, plus the activations of PP micro-batches in flight)
NEAR_THE_LIMIT = [
    "--tp 1 --pp 2 --micro-batch 2 --recompute full",
    "--tp 2 --pp 2 --micro-batch 2 --recompute none",
    "--tp 4 --pp 1 --micro-batch 4 --recompute none --sequence-parallel",
    "--tp 2 --pp 1 --micro-batch 2 --recompute full",
    "--tp 2 --pp 1 --micro-batch 4 --recompute full --sequence-parallel",
    "--tp 1 --pp 4 --micro-batch 1 --recompute none",
]


def test_the_screen_admits_the_layouts_podsim_llm_runs_and_no_other(capsys) -> None:
    """One memory test (podsim.llm.memory.fits) for ``podsim llm`` and the search's screen: on
    layouts near the limit, a layout the screen keeps runs, one it rejects for its memory is
    refused with the memory named (issue 29)."""
    from podsim.cli import main
    from podsim.hardware.gpu import get_gpu
    from podsim.llm.memory import GIB, memory
    from podsim.stacks.stack import DEFAULT_TRAINING, load_stack

    model, gpu = get_model("llama3-8b"), get_gpu("h100")
    stack = load_stack(DEFAULT_TRAINING, "training")
    fixed = ["llm", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "8", "--global-batch", "32", "--seq-len", "8192"]
    verdicts = []
    for flags in NEAR_THE_LIMIT:
        f = flags.split()
        tp, pp, mb, rc = (f[f.index(k) + 1] for k in ("--tp", "--pp", "--micro-batch", "--recompute"))
        sp = "--sequence-parallel" in f
        point = Space(
            gpus=(8,),
            global_batch=32,
            seq_len=8192,
            tp=(int(tp),),
            pp=(int(pp),),
            vpp=(1,),
            micro_batch=(int(mb),),
            recompute=(rc,),
            sequence_parallel=(sp,),
            distributed_optimizer=(False,),
            stack=stack,
        )
        lay = enumerate_layouts(model, point, 1e6).layouts[0]  # the rules take it, whatever its memory
        peak = max(s.total for s in memory(model, lay)) / GIB
        assert abs(peak - gpu.memory_gib) < 6, (flags, peak)  # near the limit
        try:
            kept = enumerate_layouts(model, point, gpu.memory_gib).layouts == [lay]
        except InputError as e:
            assert "does not fit in 79.6 GiB per GPU" in str(e)
            kept = False
        code = main([*fixed, *f])
        err = capsys.readouterr().err
        assert code in (0, 2) and (code == 2) == ("the layout does not fit" in err), (flags, err)
        assert kept == (code == 0), (flags, peak, err)
        verdicts.append(kept)
    assert 2 <= sum(verdicts) <= len(verdicts) - 2  # both sides of the limit are tried
