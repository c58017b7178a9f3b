"""Distributed PyTorch traces: c10d collectives as collectives, host waits on them, NCCL
kernels, and a real 2-process DDP capture over gloo on the CPU (podsim trace --nproc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import importable_module
from podsim.api import load_workload, simulate
from podsim.cli import main
from podsim.formats.pytorch_trace import capture_to_workload
from podsim.workload import CollectiveKind, OpKind

MIB = 1 << 20


def _cpu_op(name: str, ts: float, dur: float, rf: int, tid: int = 1) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"Record function id": rf, "External id": rf},
    }


def _et_node(i: int, name: str, rf: int, inputs: list) -> dict:
    return {
        "id": i,
        "name": name,
        "ctrl_deps": 1,
        "inputs": {"values": inputs, "shapes": [], "types": []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": [{"name": "rf_id", "type": "uint64", "value": rf}, {"name": "seq_id", "type": "int64", "value": -1}],
    }


def _write_rank(folder: Path, rank: int, nccl: bool = False, group: tuple[str, list[int]] | None = None) -> None:
    """One rank of a hand-made DDP step (times in us): matmul 0-100, an all-reduce of 1 MiB
    issued at 100, an add 110-200, the host idle until the collective ends (gloo: at 640), the
    bucket copy 650-700, the optimizer 700-1000."""
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 1000,
            "args": {},
        },
        _cpu_op("aten::mm", 0, 100, 1),
        _cpu_op("c10d::allreduce_", 100, 10, 2),
        _cpu_op("aten::add", 110, 90, 4),
        _cpu_op("torch.distributed.ddp.reducer::copy_bucket_to_grad", 650, 50, 5),
        _cpu_op("aten::add_", 700, 300, 6),
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "Optimizer.step#Adam.step",
            "pid": 1,
            "tid": 1,
            "ts": 700,
            "dur": 300,
            "args": {},
        },
    ]
    if nccl:
        ev += [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 105,
                "dur": 3,
                "args": {"correlation": 77},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                "pid": 0,
                "tid": 20,
                "ts": 120,
                "dur": 500,
                "args": {"correlation": 77, "stream": 20},
            },
        ]
        if group is not None:  # NCCL's record_param_comms names the process group
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "record_param_comms",
                    "pid": 1,
                    "tid": 1,
                    "ts": 101,
                    "dur": 8,
                    "args": {
                        "Process Group Name": group[0],
                        "Process Group Ranks": str(group[1]),
                        "Group size": len(group[1]),
                        "Collective name": "allreduce",
                    },
                }
            )
    else:
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "pid": 1,
                "tid": 9,
                "ts": 110,
                "dur": 530,
                "args": {"Record function id": 3},
            }
        )
    (folder / f"kineto.{rank}.json").write_text(json.dumps({"traceEvents": ev}))
    nodes = [
        _et_node(2, "aten::mm", 1, []),
        _et_node(3, "c10d::allreduce_", 2, [[[7, 8, 0, MIB // 4, 4, "cpu"]]]),
        _et_node(4, "aten::add", 4, []),
        _et_node(5, "torch.distributed.ddp.reducer::copy_bucket_to_grad", 5, []),
        _et_node(6, "aten::add_", 6, []),
    ]
    (folder / f"et.{rank}.json").write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes}))


def test_host_waits_for_the_collective_not_for_the_traced_idle_time(tmp_path: Path) -> None:
    for r in (0, 1):
        _write_rank(tmp_path, r)
    w = capture_to_workload(tmp_path)
    p = w.programs[0]
    colls = [i for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
    assert w.num_ranks == 2 and len(colls) == 1
    assert int(p.collective[colls[0]]) == int(CollectiveKind.ALL_REDUCE) and int(p.size_bytes[colls[0]]) == MIB
    # replayed with the all-reduce for its traced time (issued with the op that issued it, at
    # 100 us, ending at 640) the step is the measured one: the copy waits for it and the host
    # resumes 10 us after it ends, as traced
    measured = simulate(capture_to_workload(tmp_path, "measured"), cluster="dgx-h100")
    assert measured.finish_ns == 1_000_000
    # on two NVLink GPUs a 1 MiB all-reduce (tens of us) ends while the add runs: the host no
    # longer waits, 440 us of idle time go (100 mm + 10 + 90 add + 10 resume + 50 copy + 300 optimizer)
    res = simulate(str(tmp_path), cluster="dgx-h100")
    assert res.finish_ns == 560_000
    # a slow network brings the wait back: on 1 Gb/s Ethernet between two servers the copy
    # starts when the all-reduce (issued when the matmul ends, at 100 us) ends
    (tmp_path / "slow.yaml").write_text(
        "name: slow\ngpu: H100-SXM5-80GB\ngpus_per_node: 1\nintra_node:\n"
        "  kind: nvswitch\n  bandwidth: 300 GB/s\ninter_node:\n  kind: fat_tree\n"
        "  nic_bandwidth: 1 Gbps\n"
    )
    slow = simulate(str(tmp_path), cluster=str(tmp_path / "slow.yaml"), record_timeline=True)
    ar = next(s for s in slow.timelines[0] if s.name == "c10d::allreduce_" and s.category == "comm")
    assert ar.start_ns == 100_000 and ar.end_ns - ar.start_ns > 8_000_000  # 1 MiB at 125 MB/s: 8.4 ms
    assert slow.finish_ns == ar.end_ns + 10_000 + 50_000 + 300_000


def test_nccl_kernels_become_the_collectives(tmp_path: Path) -> None:
    for r in (0, 1):
        _write_rank(tmp_path, r, nccl=True)
    p = capture_to_workload(tmp_path).programs[0]
    colls = [i for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
    assert len(colls) == 1 and int(p.size_bytes[colls[0]]) == MIB
    assert p.streams[int(p.stream[colls[0]])] == "cuda stream 20"
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL" not in p.names
    # measured: the kernel itself, for its traced 500 us
    pm = capture_to_workload(tmp_path, "measured").programs[0]
    k = pm.names.index("ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    assert int(pm.duration_ns[k]) == 500_000


def test_nccl_process_groups(tmp_path: Path) -> None:
    # 4 ranks in two data-parallel pairs: each all-reduce runs over its pair
    for r in range(4):
        _write_rank(tmp_path, r, nccl=True, group=("1", [0, 1]) if r < 2 else ("2", [2, 3]))
    w = capture_to_workload(tmp_path)
    assert sorted((g.name, g.ranks) for g in w.groups) == [("pg 1", (0, 1)), ("pg 2", (2, 3))]
    res = simulate(w, cluster="dgx-h100", record_timeline=True)
    chunks = [s for s in res.timelines[3] if s.category == "chunk"]
    assert chunks and all(s.args["ranks"] == 2 for s in chunks)
    # one rank's trace alone cannot say what its group's other ranks do, unless the group is all
    # the ranks it is simulated on (NCCL names the default group too)
    with pytest.raises(Exception, match="process groups"):
        load_workload(tmp_path / "kineto.0.json", execution_trace=tmp_path / "et.0.json")
    w2 = load_workload(tmp_path / "kineto.0.json", 2, execution_trace=tmp_path / "et.0.json")
    assert [(g.name, g.ranks) for g in w2.groups] == [("pg 1", (0, 1))]
    assert simulate(w2, cluster="dgx-h100").num_ranks == 2


def test_missing_rank(tmp_path: Path) -> None:
    _write_rank(tmp_path, 0)
    _write_rank(tmp_path, 2)
    with pytest.raises(Exception, match=r"ranks \[1\] are missing"):
        load_workload(tmp_path)


MLP = """
import torch

def mlp(batch_size):
    m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()) for _ in range(3)],
                            torch.nn.Linear(256, 10))
    return m, torch.randn(batch_size, 256), torch.randint(0, 10, (batch_size,))
"""
MLP_PARAMS = 3 * (256 * 256 + 256) + 256 * 10 + 10


@pytest.fixture
def mlp_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable module with the MLP (torch needed)."""
    pytest.importorskip("torch")
    return importable_module(tmp_path, monkeypatch, "ddp_models", MLP) + ":mlp"


def test_two_process_ddp_capture_over_gloo(tmp_path: Path, mlp_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ddp"
    assert (
        main(
            [
                "trace",
                "--model",
                mlp_module,
                "--batch-size",
                "16",
                "--steps",
                "2",
                "--nproc",
                "2",
                "--bucket-mb",
                "0.25",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "x 2 processes (DDP)" in capsys.readouterr().out
    info = json.loads((out / "capture.json").read_text())
    assert info["nproc"] == 2 and len(info["step_ms_per_rank"]) == 2
    for name in ("kineto.0.json", "kineto.1.json", "et.0.json", "et.1.json", "workload.0.et", "workload.1.et"):
        assert (out / name).is_file(), name
    w = capture_to_workload(out)
    sizes = []
    for p in w.programs:
        colls = [i for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
        sizes.append([int(p.size_bytes[i]) for i in colls])
    # DDP's buckets hold every parameter once, in fp32; both ranks reduce the same buckets
    assert sum(sizes[0]) == 4 * MLP_PARAMS and sizes[0] == sizes[1] and len(sizes[0]) > 1
    # replayed with each all-reduce for the time gloo took, each rank's step is its measured one
    measured = simulate(capture_to_workload(out, "measured"), cluster="dgx-h100")
    for r, ms in enumerate(info["step_ms_per_rank"]):
        assert measured.ranks[r].finish_ns == pytest.approx(ms * 1e6, rel=0.05)
    # simulated on NVLink the all-reduces take microseconds, not gloo's milliseconds; the ranks
    # start together (the traces' steps did not quite), so a rank may wait a little for the
    # other at a collective, but the step is no longer than the slowest traced one (10% slack)
    res = simulate(str(out), cluster="dgx-h100")
    assert res.finish_ns <= 1.1 * max(info["step_ms_per_rank"]) * 1e6
    # the Chakra files it wrote hold the same collectives
    chakra = load_workload(str(out / "workload"))
    assert chakra.num_ranks == 2
    # rank 0 scaled to 4 GPUs: the same gradient bytes, reduced in 25 MiB buckets (one)
    assert main(["simulate", "--pytorch", str(out), "--gpus", "4", "--parallel", "ddp"]) == 0
    text = capsys.readouterr().out
    assert "ddp bucket 0" in text


def test_a_reused_capture_folder_holds_one_capture(
    tmp_path: Path, mlp_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap"
    base = ["trace", "--model", mlp_module, "--batch-size", "4", "--steps", "1", "--out", str(out)]
    assert main(base) == 0
    assert main(base + ["--nproc", "2"]) == 0  # the single-process files go before the workload is built
    assert sorted(f.name for f in out.glob("workload.*")) == ["workload.0.et", "workload.1.et"]
    assert capture_to_workload(out).num_ranks == 2
    (out / "kineto.3.json.tmp").write_text("{")  # a killed process's leftover is not a rank
    assert capture_to_workload(out).num_ranks == 2
    assert main(base) == 0
    capsys.readouterr()
    assert sorted(f.name for f in out.iterdir()) == ["capture.json", "et.json", "kineto.json", "workload.0.et"]
    assert capture_to_workload(out).num_ranks == 1
