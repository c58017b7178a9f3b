"""Memory per GPU of a parallelized step and offloading to remote memory (podsim.parallelize.memory)."""

from __future__ import annotations

import pytest

from podsim.api import simulate
from podsim.cli import main
from podsim.errors import InputError
from podsim.formats.astra_sim.remote_memory import RemoteMemoryConfig
from podsim.parallelize import (
    OneGpuStep,
    StepOp,
    data_parallel,
    extrapolate,
    fit_memory,
    footprint,
    label_layers,
    load_step,
)

MIB, MS = 1 << 20, 1_000_000
VGG13_PARAMS = 133_047_848


def _toy(f2_ms: int, b2_ms: int) -> OneGpuStep:
    ops = [
        StepOp("aten::linear", 10 * MS, "forward", param_bytes=MIB, output_bytes=64 * MIB),
        StepOp("aten::linear", f2_ms * MS, "forward", param_bytes=MIB, output_bytes=64 * MIB),
        StepOp("AddmmBackward0", b2_ms * MS, "backward", grad_bytes=MIB),
        StepOp("AddmmBackward0", 10 * MS, "backward", grad_bytes=MIB),
        StepOp("sgd", 1 * MS, "optimizer"),
    ]
    return OneGpuStep("toy", label_layers(ops, {2: 1, 3: 0}, {}), optimizer_states=0)


def _run_offloaded(step: OneGpuStep, capacity: int, gb_per_s: float) -> int:
    step, fp = fit_memory(step, "ddp", 1, capacity, offload=True)
    assert fp.total == 2 * MIB + 2 * MIB + 128 * MIB
    rm = RemoteMemoryConfig("PER_NODE_MEMORY_EXPANSION", 0.0, gb_per_s, None, 1)
    return simulate(data_parallel(step, 1), cluster="dgx-h100", remote_memory=rm).finish_ns


def test_offload_by_hand() -> None:
    # 4 MiB of weights and gradients + 128 MiB of activations in 100 MiB: the first layer's
    # output keeps 32 MiB in remote memory; at 1 GB/s (1 B/ns) a store or load takes 33,554,432 ns
    t = 32 * MIB
    # the store (10 ms .. 43.55 ms) outlasts the second forward op (10 ms): the prefetched load
    # waits for it and the first layer's backward for the load
    assert _run_offloaded(_toy(10, 10), 100 * MIB, 1.0) == 10 * MS + t + t + 10 * MS + 1 * MS
    # long enough ops hide both: the store under the second forward op, the load (prefetched
    # when the backward starts) under the second layer's backward
    assert _run_offloaded(_toy(50, 50), 100 * MIB, 1.0) == (10 + 50 + 50 + 10 + 1) * MS
    # everything fits: no memory ops
    step, _ = fit_memory(_toy(10, 10), "ddp", 1, 200 * MIB, offload=True)
    assert not any(o.offload_bytes for o in step.ops)


def test_does_not_fit_errors() -> None:
    with pytest.raises(InputError, match="--remote-bandwidth"):
        fit_memory(_toy(10, 10), "ddp", 1, 100 * MIB)
    with pytest.raises(InputError, match="even with every activation offloaded"):
        fit_memory(_toy(10, 10), "ddp", 1, 3 * MIB, offload=True)


def test_vgg13_footprint(refdata) -> None:  # type: ignore[no-untyped-def]
    step = load_step(triosim=refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    fp = footprint(step, "ddp", 4)
    # torchvision's VGG13 parameters in fp32, Adam's two moments
    assert fp.weights == fp.gradients == 4 * VGG13_PARAMS and fp.optimizer == 8 * VGG13_PARAMS
    # twice the batch: twice the activations, the same weights (TrioSim would double those too)
    fp2 = footprint(extrapolate(step, 128, 256), "ddp", 4)
    assert fp2.activations == 2 * fp.activations and fp2.weights == fp.weights
    # tensor parallelism holds 1/N of the split layers' weights: all of VGG13's are in them
    assert footprint(step, "tp", 4).weights == 4 * VGG13_PARAMS // 4


def test_cli_memory_flags(refdata, capsys) -> None:  # type: ignore[no-untyped-def]
    d = str(refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    base = ["simulate", "--triosim", d, "--gpus", "2", "--parallel", "ddp"]
    assert main(base) == 0
    assert "of 79.60 GiB (H100-SXM5-80GB)" in capsys.readouterr().out
    assert main(base + ["--gpu-memory", "8"]) == 2
    assert "more than its 8.00 GiB" in capsys.readouterr().err
    assert main(base + ["--gpu-memory", "8", "--remote-bandwidth", "64"]) == 0
    out = capsys.readouterr().out
    assert "offloaded at 64 GB/s" in out
    assert main(base + ["--remote-bandwidth", "0"]) == 2
    assert "--remote-bandwidth: expected a finite number > 0" in capsys.readouterr().err
