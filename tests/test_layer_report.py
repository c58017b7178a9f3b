"""Per-layer breakdown of a parallelized step (podsim.report.layers)."""

from __future__ import annotations

import csv

import pytest

from podsim.cli import main
from podsim.engine.cluster import simulate_cluster
from podsim.errors import InputError
from podsim.hardware.cluster import build_fabric, load_cluster
from podsim.parallelize import OneGpuStep, StepOp, data_parallel, label_layers, tensor_parallel
from podsim.report.layers import format_layers, layer_breakdown

MS = 1_000_000


def _toy() -> OneGpuStep:
    # two layers (a linear layer and a parameter-free activation after it, then a second linear
    # layer), their backward ops in reverse, one optimizer op over all parameters
    ops = [
        StepOp("aten::linear", 4 * MS, "forward", param_bytes=64 << 20, tp_split=True, output_bytes=32 << 20),
        StepOp("aten::relu", 1 * MS, "forward"),
        StepOp("aten::linear", 2 * MS, "forward", param_bytes=32 << 20, tp_split=True, output_bytes=16 << 20),
        StepOp("AddmmBackward0", 4 * MS, "backward", grad_bytes=32 << 20, tp_split=True, output_bytes=32 << 20),
        StepOp("ReluBackward0", 1 * MS, "backward"),
        StepOp("AddmmBackward0", 8 * MS, "backward", grad_bytes=64 << 20),
        StepOp("adam", 3 * MS, "optimizer"),
    ]
    return OneGpuStep("toy", label_layers(ops, {3: 2, 4: 0, 5: 0}, {}))


def _simulate(workload, gpus):  # type: ignore[no-untyped-def]
    spec = load_cluster("dgx-h100")
    return simulate_cluster(workload, build_fabric(spec, gpus), spec.nccl, "analytical", record_timeline=True)


def test_layers_are_labelled_by_their_parametrized_op() -> None:
    assert [o.layer for o in _toy().ops] == [
        "L0 linear",
        "L0 linear",
        "L1 linear",
        "L1 linear",
        "L0 linear",
        "L0 linear",
        "(optimizer)",
    ]


def test_data_parallel_breakdown_by_hand() -> None:
    res = _simulate(data_parallel(_toy(), 4, "ddp", 1), 4)
    rows = {r.layer: r for r in layer_breakdown(res, 0)}
    l0, l1 = rows["L0 linear"], rows["L1 linear"]
    assert (l0.forward_ns, l0.backward_ns, l0.optimizer_ns) == (5 * MS, 9 * MS, 0)
    assert (l1.forward_ns, l1.backward_ns) == (2 * MS, 4 * MS)
    assert rows["(optimizer)"].optimizer_ns == 3 * MS
    # two buckets of one layer each; the first (32 MiB, L1's gradients) runs under the 9 ms of
    # backward after it, the second only partly under nothing: the optimizer waits for it
    b0, b1 = rows["ddp bucket 0 (L1 linear)"], rows["ddp bucket 1 (L0 linear)"]
    assert b0.exposed_comm_ns == 0 < b0.comm_ns < 9 * MS
    assert b1.exposed_comm_ns == b1.comm_ns > 0
    # the layers' exposed communication is what the rank adds to its compute
    assert sum(r.exposed_comm_ns for r in rows.values()) == res.ranks[0].exposed_comm_ns
    assert sum(r.compute_ns for r in rows.values()) == 23 * MS == res.ranks[0].compute_ns


def test_tensor_parallel_breakdown_by_hand() -> None:
    res = _simulate(tensor_parallel(_toy(), 2), 2)
    rows = {r.layer: r for r in layer_breakdown(res, 0)}
    # split ops run for half their time; each split op's output all-reduce blocks the next op
    assert rows["L0 linear"].forward_ns == 2 * MS + 1 * MS
    assert rows["L1 linear"].backward_ns == 2 * MS
    assert rows["L0 linear"].backward_ns == 1 * MS + 8 * MS
    for r in (rows["L0 linear"], rows["L1 linear"]):
        assert r.comm_ns == r.exposed_comm_ns > 0
    assert sum(r.exposed_comm_ns for r in rows.values()) == res.ranks[0].exposed_comm_ns
    text = format_layers(list(rows.values()))
    assert "L0 linear" in text and "all 3 layers" in text


def test_needs_a_timeline_with_layers() -> None:
    spec = load_cluster("dgx-h100")
    res = simulate_cluster(
        data_parallel(_toy(), 2), build_fabric(spec, 2), spec.nccl, "analytical", record_timeline=False
    )
    with pytest.raises(InputError, match="no timeline"):
        layer_breakdown(res, 0)


def test_cli_writes_the_layers_of_vgg13(refdata, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "layers.csv"
    d = str(refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    assert main(["simulate", "--triosim", d, "--gpus", "4", "--parallel", "ddp", "--layers", str(out)]) == 0
    text = capsys.readouterr().out
    assert "per layer, rank 0" in text
    rows = list(csv.DictReader(out.open()))
    # VGG13: 10 convolutions and 3 linear layers, the optimizer, and the gradient buckets
    names = [r["layer"] for r in rows]
    assert sum(n.endswith("conv2d") for n in names) == 10 and sum(n.endswith("linear") for n in names) == 3
    # the stages add up to the trace's 28.105 / 62.365 / 3.568 ms
    assert sum(int(r["forward_ns"]) for r in rows) == 28_105_000
    assert sum(int(r["backward_ns"]) for r in rows) == 62_365_000
    assert sum(int(r["optimizer_ns"]) for r in rows) == 3_568_000
    assert main(["simulate", "--triosim", d, "--gpus", "4", "--parallel", "pp", "--layers", str(out)]) == 0
    capsys.readouterr()
    assert "pp stages 0-1 transfers" in [r["layer"] for r in csv.DictReader(out.open())]
    assert main(["simulate", "--triosim", d, "--gpus", "2", "--trace", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    for bad, message in (
        (["--layers", str(tmp_path)], "give the CSV file"),
        (["--plot", str(tmp_path)], "is a folder"),
        (["--plot", str(tmp_path / "p.png"), "--plot-ranks", "0"], "--plot-ranks: expected a positive integer"),
    ):
        assert main(["simulate", "--triosim", d, "--gpus", "2"] + bad) == 2, bad
        assert message in capsys.readouterr().err, bad


def test_timeline_plot(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    from podsim.report.plot import plot_timeline

    res = _simulate(tensor_parallel(_toy(), 2), 2)
    out = tmp_path / "t.png"
    assert plot_timeline(res, out, max_ranks=1) == 1
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res.timelines.clear()
    with pytest.raises(InputError, match="no timeline"):
        plot_timeline(res, tmp_path / "u.png")
    assert not (tmp_path / "u.png").exists()
    assert main(["example", "--plot", str(tmp_path / "ex.png")]) == 0
    assert (tmp_path / "ex.png").read_bytes()[:4] == b"\x89PNG"


def test_pipeline_layers_over_all_stages(refdata) -> None:  # type: ignore[no-untyped-def]
    # every op runs on exactly one stage, once per micro-batch for 1/M of its time (rounded up
    # to the ns): over all ranks, the layers' forward and backward add up to the trace's
    from podsim.formats.triosim import read_triosim
    from podsim.parallelize import from_triosim, pipeline_parallel

    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    m = 8
    res = _simulate(pipeline_parallel(step, 4, m), 4)
    rows = [r for rank in range(4) for r in layer_breakdown(res, rank)]
    n_fwd = sum(1 for o in step.ops if o.stage == "forward")
    n_bwd = sum(1 for o in step.ops if o.stage == "backward")
    assert 28_105_000 <= sum(r.forward_ns for r in rows) <= 28_105_000 + m * n_fwd
    assert 62_365_000 <= sum(r.backward_ns for r in rows) <= 62_365_000 + m * n_bwd
    # a stage sends and receives at once: its layers' exposed time is the rank's at most
    for rank in range(4):
        assert sum(r.exposed_comm_ns for r in layer_breakdown(res, rank)) <= res.ranks[rank].exposed_comm_ns
    # the inner stages send and receive on both sides
    assert {r.layer for r in layer_breakdown(res, 1)} >= {"pp stages 0-1 transfers", "pp stages 1-2 transfers"}
