"""Data and tensor parallelism and batch extrapolation from a one-GPU trace (TrioSim's VGG13 /
ResNet-50 on an H100)."""

from __future__ import annotations

import pytest

from podsim.cli import main
from podsim.engine.cluster import simulate_cluster
from podsim.errors import InputError
from podsim.formats.triosim import read_triosim
from podsim.hardware.cluster import build_fabric, load_cluster
from podsim.parallelize import OneGpuStep, StepOp, data_parallel, from_triosim
from podsim.workload import OpKind

pytestmark = pytest.mark.conformance

# torchvision's parameter counts (weights and biases), fp32 gradients
PARAMS = {"vgg13": 133_047_848, "resnet50": 25_557_032}


def _run(step, gpus, mode, bucket=25 << 20, cluster="dgx-h100"):  # type: ignore[no-untyped-def]
    spec = load_cluster(cluster)
    return simulate_cluster(
        data_parallel(step, gpus, mode, bucket),
        build_fabric(spec, gpus),
        spec.nccl,
        "analytical",
        record_timeline=False,
    ).ranks[0]


@pytest.mark.parametrize("model", ["vgg13", "resnet50"])
def test_gradients_are_the_models_parameters(refdata, model) -> None:  # type: ignore[no-untyped-def]
    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / model))
    assert step.gradient_bytes == 4 * PARAMS[model] and not step.notes
    # autograd makes the classifier's gradients ready first
    first = next(o for o in step.ops if o.grad_bytes)
    assert "AddmmBackward" in first.name


def test_ddp_iteration_is_one_gpu_time_plus_exposed_communication(refdata) -> None:  # type: ignore[no-untyped-def]
    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    one = _run(step, 1, "ddp").finish_ns
    assert one == step.total_ns == 94_038_000
    for gpus in (2, 4):
        exposed = []
        for mode, bucket in (("dp", 1), ("ddp", 100 << 20), ("ddp", 25 << 20), ("ddp", 4 << 20)):
            r = _run(step, gpus, mode, bucket)
            assert r.finish_ns >= one
            assert r.finish_ns == one + r.exposed_comm_ns
            exposed.append(r.exposed_comm_ns)
        # more overlap (smaller buckets, starting earlier in the backward) hides more of it
        assert exposed == sorted(exposed, reverse=True) and exposed[0] > 3 * exposed[-1] > 0


def test_ddp_on_ranks_in_different_servers_costs_more(refdata) -> None:  # type: ignore[no-untyped-def]
    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "resnet50"))
    inside = _run(step, 8, "dp")
    across = _run(step, 16, "dp")
    assert across.exposed_comm_ns > inside.exposed_comm_ns


def test_small_step_and_errors(capsys) -> None:  # type: ignore[no-untyped-def]
    step = OneGpuStep(
        "toy",
        [
            StepOp("fwd", 1000, "forward"),
            StepOp("bwd2", 1000, "backward", grad_bytes=8 << 20),
            StepOp("bwd1", 1000, "backward", grad_bytes=8 << 20),
            StepOp("adam", 500, "optimizer"),
        ],
    )
    p = data_parallel(step, 4, "ddp", 8 << 20).programs[0]
    colls = [i for i in range(len(p)) if p.kind[i] == 1]
    assert [int(p.size_bytes[i]) for i in colls] == [8 << 20, 8 << 20]
    adam = p.names.index("adam")
    assert set(colls) <= set(p.data_deps(adam).tolist())  # the optimizer waits for every bucket
    assert data_parallel(step, 1, "ddp").programs[0].kind.tolist().count(1) == 0
    with pytest.raises(InputError, match="'dp' or 'ddp'"):
        data_parallel(step, 2, "zero")
    with pytest.raises(InputError, match="at least 1"):
        data_parallel(step, 0, "dp")
    assert main(["simulate", "--triosim", "/nonexistent", "--gpus", "2"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_batch_extrapolation_scales_activation_work_only(refdata, capsys) -> None:  # type: ignore[no-untyped-def]
    from podsim.parallelize import extrapolate

    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    big = extrapolate(step, 128, 256)
    # forward 28,105 us and backward 62,365 us double; the optimizer's 3,568 us and the
    # gradients do not (TrioSim would scale them too)
    assert big.total_ns == (2 * (28_105 + 62_365) + 3_568) * 1000
    assert big.gradient_bytes == step.gradient_bytes
    assert _run(big, 1, "ddp").finish_ns == big.total_ns
    with pytest.raises(InputError, match="at least 1"):
        extrapolate(step, 0, 4)
    d = str(refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    assert main(["simulate", "--triosim", d, "--batch-size-sim", "128"]) == 2
    assert "--batch-size-sim needs --batch-size" in capsys.readouterr().err


def test_tensor_parallel_splits_flagged_ops(refdata) -> None:  # type: ignore[no-untyped-def]
    from podsim.parallelize import tensor_parallel

    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    # the reference notes: 26 flagged ops (10 convolutions, 3 linear layers and their backward)
    # totalling 68.09 ms of the 94.038 ms
    import csv

    with open(refdata / "triosim" / "trace2-h100-bs128" / "vgg13" / "trace.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["tpflag"] == "1"]
    flagged_ns = 1000 * sum(int(r["Operator_cudatimenooverlap"]) for r in rows)
    assert len(rows) == 26 and flagged_ns == pytest.approx(68.09e6, abs=0.01e6)
    assert [o.name for o in step.ops if o.tp_split] == [r["OperatorName"] for r in rows]
    spec = load_cluster("dgx-h100")
    for gpus in (1, 2, 4):
        w = tensor_parallel(step, gpus)
        r = simulate_cluster(w, build_fabric(spec, gpus), spec.nccl, "analytical", record_timeline=False).ranks[0]
        assert r.compute_ns == pytest.approx(94_038_000 - flagged_ns * (1 - 1 / gpus), abs=26)
        assert int((w.programs[0].kind == 1).sum()) == (26 if gpus > 1 else 0)
        assert r.finish_ns == r.compute_ns + r.exposed_comm_ns  # every all-reduce blocks


def test_pipeline_parallel_hand_derived() -> None:
    from podsim.parallelize import partition, pipeline_parallel

    ms = 1_000_000
    ops = [StepOp(f"f{i}", 4 * ms, "forward", param_bytes=100, output_bytes=1) for i in range(4)]
    ops += [StepOp(f"b{i}", 8 * ms, "backward") for i in range(4)]
    ops += [StepOp("adam", 1 * ms, "optimizer")]
    step = OneGpuStep("toy", ops)
    f, b = partition(step, 2)
    assert [[o.name for o in x] for x in f] == [["f0", "f1"], ["f2", "f3"]]
    assert [[o.name for o in x] for x in b] == [["b2", "b3"], ["b0", "b1"]]  # autograd's mirror
    spec = load_cluster("dgx-h100")
    for kind in ("gpipe", "1f1b"):
        w = pipeline_parallel(step, 2, 4, kind)
        r = simulate_cluster(w, build_fabric(spec, 2), spec.nccl, "analytical", record_timeline=False)
        # per micro-batch a stage's forward is 2 ms and backward 4 ms; (M + P - 1) slots of
        # each, then half the optimizer (half the parameters): 5 x 2 + 5 x 4 + 0.5 = 30.5 ms
        # plus a few microseconds of 1-byte transfers
        assert max(x.finish_ns for x in r.ranks) == pytest.approx(30.5 * ms, rel=2e-3)
    with pytest.raises(InputError, match="at least 5 forward ops"):
        pipeline_parallel(step, 5, 2)
    with pytest.raises(InputError, match="'gpipe' or '1f1b'"):
        pipeline_parallel(step, 2, 2, "zero-bubble")


def test_pipeline_parallel_vgg13(refdata, capsys) -> None:  # type: ignore[no-untyped-def]
    from podsim.parallelize import pipeline_parallel

    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    spec = load_cluster("dgx-h100")
    times = []
    for m in (1, 8, 32):
        w = pipeline_parallel(step, 4, m)
        r = simulate_cluster(w, build_fabric(spec, 4), spec.nccl, "analytical", record_timeline=False)
        times.append(max(x.finish_ns for x in r.ranks))
    # one micro-batch: no overlap between stages, slower than one GPU (activations move);
    # more micro-batches fill the pipeline
    assert times[0] > step.total_ns and times[0] > times[1] > times[2] > step.total_ns / 4
    d = str(refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    assert main(["simulate", "--triosim", d, "--gpus", "4", "--parallel", "pp", "--micro-batch-size", "16"]) == 2
    assert "needs the batch" in capsys.readouterr().err
    assert (
        main(
            [
                "simulate",
                "--triosim",
                d,
                "--gpus",
                "4",
                "--parallel",
                "pp",
                "--batch-size",
                "128",
                "--micro-batch-size",
                "48",
            ]
        )
        == 2
    )
    assert "does not divide the batch 128" in capsys.readouterr().err


def test_ddp_from_an_h100_pytorch_capture(capsys) -> None:  # type: ignore[no-untyped-def]
    # podsim's own capture (data/captures): AccumulateGrad ops make each parameter's gradient
    # ready; together they are ResNet-50's parameters
    from pathlib import Path

    from podsim.parallelize import from_pytorch

    d = Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-resnet50-bs128"
    step = from_pytorch(d / "kineto.json.gz", d / "et.json.gz")
    assert step.gradient_bytes == 4 * PARAMS["resnet50"]
    one = _run(step, 1, "ddp").finish_ns
    assert one == step.total_ns
    for gpus in (2, 4):
        exposed = []
        for mode, bucket in (("dp", 1), ("ddp", 25 << 20), ("ddp", 1 << 20)):
            r = _run(step, gpus, mode, bucket)
            assert r.finish_ns == one + r.exposed_comm_ns >= one
            exposed.append(r.exposed_comm_ns)
        assert exposed == sorted(exposed, reverse=True) and exposed[0] > exposed[-1]
    # the capture says its batch (128): extrapolation needs only the target, a wrong traced batch is refused
    from podsim.parallelize import load_step

    twice = load_step(pytorch=d, simulated_batch=256)
    assert twice.batch == 256
    assert sum(o.ns for o in twice.ops if o.stage == "forward") == pytest.approx(
        2 * step.stage_ns()["forward"], abs=sum(1 for o in step.ops if o.stage == "forward")
    )
    assert main(["simulate", "--pytorch", str(d), "--gpus", "2", "--batch-size", "64"]) == 2
    assert "taken at batch 128 (capture.json), not 64" in capsys.readouterr().err
    assert main(["simulate", "--pytorch", str(d.parent), "--gpus", "2"]) == 2
    assert "no kineto.json" in capsys.readouterr().err


def test_cli_reports_one_gpu_against_simulated(refdata, capsys) -> None:  # type: ignore[no-untyped-def]
    d = str(refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    assert main(["simulate", "--triosim", d, "--gpus", "4", "--parallel", "dp"]) == 0
    out = capsys.readouterr().out
    assert "one GPU (the trace): 94.038 ms = forward 28.105 + backward 62.365 + optimizer 3.568 ms" in out
    assert "simulated on 4 GPUs (dp)" in out


def test_pytorch_capture_knows_parameters_and_split_ops_as_triosim(refdata) -> None:  # type: ignore[no-untyped-def]
    # the execution trace says which ops read parameters: ResNet-50's 25,557,032 fp32 values
    # (torchvision's count), read by 107 layers (53 convolutions, 53 batch norms, 1 linear);
    # tensor parallelism splits the convolutions, the linear layer and their weight-gradient ops:
    # 108 ops, as TrioSim flags in its own H100 trace of the same model and batch, whose forward
    # ops write the same bytes
    from pathlib import Path

    from podsim.parallelize import from_pytorch, load_step

    d = Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-resnet50-bs128"
    step = from_pytorch(d / "kineto.json.gz", d / "et.json.gz")
    trio = load_step(triosim=refdata / "triosim" / "trace2-h100-bs128" / "resnet50")
    assert sum(o.param_bytes for o in step.ops) == 4 * PARAMS["resnet50"]
    layers = {o.layer for o in step.ops}
    assert len(layers - {"(optimizer)"}) == 107
    assert sum(1 for x in layers if x.endswith("conv2d")) == 53 and sum(1 for x in layers if x.endswith("linear")) == 1
    for s in (step, trio):
        assert sum(o.tp_split for o in s.ops) == 108
    split_fwd = [sum(o.output_bytes for o in s.ops if o.tp_split and o.stage == "forward") for s in (step, trio)]
    assert split_fwd[0] == split_fwd[1]
    # the split ops' GPU time agrees within 3% (two runs on two H100s)
    split_ns = [sum(o.ns for o in s.ops if o.tp_split) for s in (step, trio)]
    assert split_ns[0] == pytest.approx(split_ns[1], rel=0.03)
    # every backward op belongs to a forward layer
    assert all(o.layer in layers - {"(optimizer)"} for o in step.ops if o.stage == "backward")


def test_pipelines_in_data_parallel(refdata) -> None:  # type: ignore[no-untyped-def]
    # 2 pipelines of 4 stages on one DGX H100: each stage's replicas all-reduce its gradients
    # (the stage's parameter bytes) before its optimizer; the pipelines themselves run as one
    from podsim.parallelize import partition, pipeline_parallel

    step = from_triosim(read_triosim(refdata / "triosim" / "trace2-h100-bs128" / "vgg13"))
    one = pipeline_parallel(step, 4, 8)
    two = pipeline_parallel(step, 4, 8, replicas=2)
    assert two.num_ranks == 8 and [g.ranks for g in two.groups] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    f_parts, _ = partition(step, 4)
    for s, part in enumerate(f_parts):
        p = two.programs[s]
        ar = [i for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
        want = sum(o.param_bytes for o in part)
        assert [int(p.size_bytes[i]) for i in ar] == ([want] if want else [])
    spec = load_cluster("dgx-h100")
    t1 = simulate_cluster(one, build_fabric(spec, 4), spec.nccl, "analytical", record_timeline=False)
    t2 = simulate_cluster(two, build_fabric(spec, 8), spec.nccl, "analytical", record_timeline=False)
    assert t2.finish_ns > t1.finish_ns  # the all-reduces come on top
    assert [r.finish_ns for r in t2.ranks[0::2]] == [r.finish_ns for r in t2.ranks[1::2]]  # replicas alike
    with pytest.raises(InputError, match="must divide"):
        from podsim.parallelize import parallelize

        parallelize(step, "pp", 6, pp_replicas=4)
    with pytest.raises(InputError, match="is for --parallel pp"):
        parallelize(step, "ddp", 4, pp_replicas=2)
    with pytest.raises(InputError, match="is for --parallel pp"):
        parallelize(step, "tp", 4, pp_replicas=2)
    # replicas that straddle servers (6 per stage, 8 GPUs per server) do not run alike: every
    # rank is simulated, as when symmetry is off
    six = pipeline_parallel(step, 4, 8, replicas=6)
    fab = build_fabric(spec, 24)
    a = simulate_cluster(six, fab, spec.nccl, "analytical", record_timeline=False)
    b = simulate_cluster(six, fab, spec.nccl, "analytical", use_symmetry=False, record_timeline=False)
    assert [r.finish_ns for r in a.ranks] == [r.finish_ns for r in b.ranks]


def test_pipeline_stages_hand_over_their_activation() -> None:
    # a stage ending on an in-place op (ReLU, a residual add) or a batch norm's step counter
    # still hands the next stage the activation it computed, not a byte
    from pathlib import Path

    from podsim.parallelize import load_step, pipeline_parallel

    d = Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-resnet50-bs128"
    step = load_step(pytorch=d)
    w = pipeline_parallel(step, 4, 4)
    for s in range(3):
        p = w.programs[s]
        sends = {
            int(p.size_bytes[i]) for i in range(len(p)) if p.kind[i] == int(OpKind.SEND) and "activation" in p.names[i]
        }
        # one micro-batch (32 images) of a ResNet-50 activation: at least 32 x 2048 x 7 x 7 fp32
        assert len(sends) == 1 and sends.pop() >= 32 * 2048 * 7 * 7 * 4
