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
