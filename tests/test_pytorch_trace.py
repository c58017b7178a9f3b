"""PyTorch profiler (Kineto) traces with execution traces: linking, one-GPU replay, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podsim.api import load_workload, simulate
from podsim.errors import InputError
from podsim.formats.pytorch_trace import (
    pytorch_to_workload,
    read_execution_trace,
    read_kineto,
)


def _capture(folder: Path, seed: int, steps: bool = True) -> tuple[Path, Path]:
    """Profile one training step of a small CNN on the CPU: Kineto + execution trace."""
    torch = pytest.importorskip("torch")
    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        schedule,
    )

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10)
    )
    opt = torch.optim.Adam(m.parameters())
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    kineto, et = folder / "kineto.json", folder / "et.json"
    obs = ExecutionTraceObserver().register_callback(str(et))
    kw = (
        dict(schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=lambda p: p.export_chrome_trace(str(kineto)))
        if steps
        else {}
    )
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, execution_trace_observer=obs, **kw) as p:
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            if steps:
                p.step()
    if not steps:
        p.export_chrome_trace(str(kineto))
    return kineto, et


def test_cpu_capture_replays_the_profiled_step(tmp_path: Path) -> None:
    kineto, et = _capture(tmp_path / "a", 0)
    step = next(a for a in read_kineto(kineto).annotations if a.name.startswith("ProfilerStep#"))
    res = simulate(str(kineto), cluster="dgx-h100", execution_trace=str(et))
    # the host's top-level ops back to back, gaps included: the measured step time
    assert res.ranks[0].finish_ns == pytest.approx(step.dur * 1000, rel=1e-3)
    names = load_workload(kineto, execution_trace=et).programs[0].names
    assert "aten::conv2d" in names and "autograd::engine::evaluate_function: ConvolutionBackward0" in names
    assert "aten::addcdiv_" in names  # Adam's update
    assert read_execution_trace(et).schema.endswith("chakra.0.0.4")


def test_mismatched_and_unannotated_traces(tmp_path: Path) -> None:
    k1, _e1 = _capture(tmp_path / "a", 0)
    _k2, e2 = _capture(tmp_path / "b", 1)
    # a second process-local session: record-function ids restart, so an ET from another run
    # may still overlap; a foreign ET with other ids must be refused
    et = json.loads(e2.read_text())
    for n in et["nodes"]:
        for a in n["attrs"]:
            if a["name"] == "rf_id":
                a["value"] += 10_000_000
    bad = tmp_path / "foreign_et.json"
    bad.write_text(json.dumps(et))
    with pytest.raises(InputError, match="come from different runs"):
        pytorch_to_workload(k1, bad)
    from podsim.parallelize import from_pytorch

    with pytest.raises(InputError, match="come from different runs"):
        from_pytorch(k1, bad)
    k3, _e3 = _capture(tmp_path / "c", 0, steps=False)
    with pytest.raises(InputError, match="no ProfilerStep annotation.*--whole-trace"):
        pytorch_to_workload(k3)
    assert pytorch_to_workload(k3, whole_trace=True).programs[0].names


def test_bad_files(tmp_path: Path) -> None:
    p = tmp_path / "et.json"
    p.write_text(json.dumps({"schema": "9.9.9", "nodes": []}))
    with pytest.raises(InputError, match="unknown execution-trace schema '9.9.9'; podsim reads 1.0.1"):
        read_execution_trace(p)
    q = tmp_path / "k.json"
    q.write_text(json.dumps({"nodes": []}))
    with pytest.raises(InputError, match="no traceEvents"):
        read_kineto(q)
    with pytest.raises(InputError, match="no such Kineto trace file"):
        read_kineto(tmp_path / "none.json")


@pytest.mark.conformance
def test_triosim_raw_vgg13(refdata) -> None:  # type: ignore[no-untyped-def]
    raw = refdata / "triosim" / "raw-pytorch-h100-vgg13"
    kineto = raw / "profiler" / "profiler_vgg13-iter41.json"
    et = raw / "graph" / "graph_vgg13-iter41.json"
    assert read_execution_trace(et).schema == "1.0.1"
    with pytest.raises(InputError, match="no ProfilerStep annotation"):
        pytorch_to_workload(kineto, et)
    w = pytorch_to_workload(kineto, et, whole_trace=True)
    assert any("linked to the execution trace by the order of each op name" in n for n in w.programs[0].notes)
    # linked by op order (its PyTorch wrote no record-function ids), the execution trace says
    # which ops read parameters: VGG13's 133,047,848 fp32 values (torchvision's count), and the
    # 26 ops TrioSim flags for tensor parallelism; at batch 128 those write what TrioSim's
    # processed batch-128 trace says they write; in-place ReLUs make no new activations (TrioSim
    # counts their outputs again)
    from podsim.parallelize import footprint, load_step

    raw = load_step(pytorch=kineto, execution_trace=et, whole_trace=True, traced_batch=512, simulated_batch=128)
    trio = load_step(triosim=refdata / "triosim" / "trace2-h100-bs128" / "vgg13")
    assert raw.gradient_bytes == sum(o.param_bytes for o in raw.ops) == 4 * 133_047_848
    assert sum(o.tp_split for o in raw.ops) == sum(o.tp_split for o in trio.ops) == 26
    split = [[o.output_bytes for o in st.ops if o.tp_split and o.stage == "forward"] for st in (raw, trio)]
    assert split[0] == split[1] and sum(split[0]) == 6_273_093_632
    in_place = sum(o.output_bytes for o in trio.ops if o.stage == "forward" and o.name == "aten::relu_")
    assert footprint(raw, "ddp", 4).activations == pytest.approx(
        footprint(trio, "ddp", 4).activations - in_place, rel=0.01
    )
    events = json.loads(kineto.read_text())["traceEvents"]
    gpu_us = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert gpu_us == pytest.approx(346_370, abs=1)  # one stream: the GPU's busy time
    res = simulate(str(kineto), cluster="dgx-h100", whole_trace=True)
    assert gpu_us * 1000 <= res.ranks[0].finish_ns <= 1.01 * gpu_us * 1000


CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"


def test_h100_captures_replay_their_step() -> None:
    for name in ("h100-resnet18-bs64", "h100-resnet50-bs128"):
        d = CAPTURES / name
        info = json.loads((d / "capture.json").read_text())
        res = simulate(str(d / "kineto.json.gz"), cluster="dgx-h100", execution_trace=str(d / "et.json.gz"))
        assert res.ranks[0].finish_ns == pytest.approx(info["step_ms"] * 1e6, rel=1e-4)
        assert info["device"] == "cuda" and info["batch_size"] in (64, 128)


@pytest.mark.conformance
def test_h100_resnet50_capture_matches_triosim(refdata) -> None:  # type: ignore[no-untyped-def]
    import csv

    from podsim.parallelize import from_pytorch

    ours = {
        k: v / 1000 for k, v in from_pytorch(CAPTURES / "h100-resnet50-bs128" / "kineto.json.gz").stage_ns().items()
    }
    with open(refdata / "triosim" / "trace2-h100-bs128" / "resnet50" / "trace.csv", newline="") as f:
        theirs: dict[str, float] = {}
        for r in csv.DictReader(f):
            theirs[r["stage"]] = theirs.get(r["stage"], 0) + int(r["Operator_cudatimenooverlap"])
    # the same model, batch, precision and GPU type, captured by two tools: within 2% per stage
    for stage in ("forward", "backward", "optimizer"):
        assert ours[stage] == pytest.approx(theirs[stage], rel=0.02), stage
    assert sum(ours.values()) == pytest.approx(sum(theirs.values()), rel=0.005)


@pytest.mark.conformance
def test_chakra_host_execution_trace(refdata, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Chakra's sample host ET (schema 1.0.2-chakra.0.0.4): two NCCL ranks all-gathering one
    # float ten times.  Alone (no Kineto trace) it is its collectives: all-gathers of the
    # gathered 2 x 4 B, as nccl-tests counts an all-gather's size
    import tarfile

    from podsim.formats.pytorch_trace import execution_trace_to_workload
    from podsim.workload import CollectiveKind, OpKind

    et = tmp_path / "1.0.2-chakra.0.0.4.json"
    with tarfile.open(refdata / "chakra" / "1.0.2-chakra.0.0.4.tgz") as t:
        member = t.extractfile("1.0.2-chakra.0.0.4.json")
        assert member is not None
        et.write_bytes(member.read())
    tr = read_execution_trace(et)
    assert tr.schema == "1.0.2-chakra.0.0.4"
    p = execution_trace_to_workload(et).programs[0]
    colls = [i for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
    assert len(colls) == 10
    assert all(int(p.collective[i]) == int(CollectiveKind.ALL_GATHER) and int(p.size_bytes[i]) == 8 for i in colls)
    res = simulate(str(et), cluster="dgx-h100")
    assert res.num_ranks == 2 and res.finish_ns > 0
    # a trace without collectives says what else to give
    (tmp_path / "plain.json").write_text(
        json.dumps(
            {
                "schema": "1.1.1-chakra.0.0.4",
                "nodes": [
                    {
                        "id": 1,
                        "name": "aten::mm",
                        "ctrl_deps": 0,
                        "inputs": {"values": []},
                        "outputs": {"values": []},
                        "attrs": [{"name": "rf_id", "value": 1}],
                    }
                ],
            }
        )
    )
    with pytest.raises(InputError, match="no c10d collectives"):
        load_workload(tmp_path / "plain.json")


def test_hand_written_update_without_optimizer(tmp_path: Path) -> None:
    # a step with no torch.optim: the update after the backward is the optimizer stage, and the
    # parameters are what both the forward and that update read
    torch = pytest.importorskip("torch")
    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        schedule,
    )

    from podsim.parallelize import from_pytorch, parallelize

    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    kineto, et = tmp_path / "k.json", tmp_path / "et.json"
    obs = ExecutionTraceObserver().register_callback(str(et))
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        execution_trace_observer=obs,
        schedule=schedule(wait=0, warmup=1, active=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(kineto)),
    ) as p:
        for _ in range(2):
            torch.nn.functional.cross_entropy(m(x), y).backward()
            with torch.no_grad():
                for w in m.parameters():
                    w.sub_(0.1 * w.grad)
                    w.grad = None
            p.step()
    step = from_pytorch(kineto, et)
    params = 4 * sum(w.numel() for w in m.parameters())
    assert step.gradient_bytes == params
    assert any(o.stage == "optimizer" for o in step.ops)
    assert all(o.stage != "forward" or "sub_" not in o.name for o in step.ops)
    assert sum(o.param_bytes for o in step.ops) == params
    # without the execution trace there are no gradient sizes to reduce: a clear error
    bare = from_pytorch(kineto)
    with pytest.raises(InputError, match="needs the gradients' sizes"):
        parallelize(bare, "ddp", 2)
    assert {o.layer for o in bare.ops} == {"(all)", "(optimizer)"}  # nothing is known to read parameters
