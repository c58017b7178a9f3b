"""ASTRA-sim 1.0 text workloads: wiring per policy, checked against hand-derived times."""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.api import simulate
from podsim.errors import InputError
from podsim.examples import write_example
from podsim.formats.astra_sim.text_workload import read_text_workload
from podsim.workload import OpKind

LAYERS = [  # name, fwd, ig, wg, wg all-reduce bytes
    ("conv1", 1000, 900, 800, 1 << 20),
    ("conv2", 2000, 1900, 1800, 2 << 20),
    ("fc", 500, 400, 300, 4 << 20),
]


def _file(tmp_path: Path, policy: str, comm: bool = True, fwd_comm: str = "NONE") -> Path:
    rows = [
        f"{n} -1 {f} {fwd_comm} {1 << 20 if fwd_comm != 'NONE' else 0} {i} {fwd_comm} "
        f"{1 << 20 if fwd_comm != 'NONE' else 0} {w} {'ALLREDUCE' if comm else 'NONE'} {b} 100"
        for n, f, i, w, b in LAYERS
    ]
    p = tmp_path / f"{policy.lower()}.txt"
    p.write_text(f"{policy}\n{len(rows)}\n" + "\n".join(rows) + "\n")
    return p


def _run(tmp_path: Path, path: Path) -> int:
    ex = write_example("allreduce", tmp_path / "ex")  # 8 NPUs on a ring, 50 GB/s
    res = simulate(str(path), ex["system"], ex["network"])
    return max(r.finish_ns for r in res.ranks)


def test_data_parallel_critical_path(tmp_path: Path) -> None:
    # compute only: forward of every layer, then wg, ig per layer from the last, no ig for layer 0
    # (the compute-only oracle of the reference notes: sum fwd + sum wg + sum ig except layer 0)
    compute = (
        sum(f for _, f, _, _, _ in LAYERS) + sum(w for _, _, _, w, _ in LAYERS) + sum(i for _, _, i, _, _ in LAYERS[1:])
    )
    assert _run(tmp_path, _file(tmp_path, "DATA", comm=False)) == compute
    w = read_text_workload(_file(tmp_path, "DATA"), 8)
    p = w.programs[0]
    assert int((p.kind == int(OpKind.COMPUTE)).sum()) == 8 and int((p.kind == int(OpKind.COLLECTIVE)).sum()) == 3
    # with the all-reduces, the last one (layer 0's, issued last) ends after the compute
    assert _run(tmp_path, _file(tmp_path, "DATA")) > compute


def test_model_parallel_blocks_on_forward_collectives(tmp_path: Path) -> None:
    no_comm = _run(tmp_path, _file(tmp_path, "MODEL", comm=False))
    with_comm = _run(tmp_path, _file(tmp_path, "MODEL", comm=False, fwd_comm="ALLREDUCE"))
    # MODEL: all forward and backward compute in one chain (the wg of each layer beside its ig
    # collective); forward collectives block
    assert no_comm == sum(f + i + w for _, f, i, w, _ in LAYERS)
    assert with_comm > no_comm


@pytest.mark.parametrize(
    "text,message",
    [
        ("DATA\n2\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "declares 2 layers and has 1 layer lines"),
        ("DATA\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 BROADCAST 8 1\n", "comm type 'BROADCAST' is not one of NONE"),
        ("HYBRID_DLRM 2\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "policy 'HYBRID_DLRM' is not supported"),
        ("DATA\n1\nconv1 -1 x NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "forward compute must be an integer, got 'x'"),
    ],
)
def test_bad_text_workloads(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError, match=message):
        read_text_workload(p, 8)


def test_text_workload_on_a_cluster_needs_gpus(tmp_path: Path) -> None:
    p = tmp_path / "dp.txt"
    # on a cluster the file does not say how many GPUs run it
    p.write_text("DATA\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n")
    with pytest.raises(InputError, match="give --gpus"):
        simulate(str(p), cluster="dgx-a100-superpod")
    assert simulate(str(p), cluster="dgx-a100-superpod", gpus=8).ranks[0].finish_ns > 3


def test_hybrid_dimensions(tmp_path: Path) -> None:
    # HYBRID_DATA_MODEL: model-parallel collectives on dimension 0, data-parallel ones on 1..9
    p = read_text_workload(_file(tmp_path, "HYBRID_DATA_MODEL", fwd_comm="ALLGATHER"), 8).programs[0]
    coll = [(p.names[i], int(p.dims_mask[i])) for i in range(len(p)) if p.kind[i] == int(OpKind.COLLECTIVE)]
    assert {m for n, m in coll if " fwd " in n or " ig " in n} == {1}
    assert {m for n, m in coll if " wg " in n} == {0b1111111110}
    q = read_text_workload(_file(tmp_path, "HYBRID_MODEL_DATA", fwd_comm="ALLGATHER"), 8).programs[0]
    assert {
        int(q.dims_mask[i]) for i in range(len(q)) if q.kind[i] == int(OpKind.COLLECTIVE) and " wg " in q.names[i]
    } == {1}


def test_convert_to_chakra_and_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.cli import main

    src = tmp_path / "whole_us.txt"  # compute times in whole us survive Chakra's us exactly
    src.write_text(
        "DATA\n2\nconv1 -1 3000 NONE 0 2000 NONE 0 1000 ALLREDUCE 1048576 10\n"
        "fc -1 5000 NONE 0 4000 NONE 0 3000 ALLREDUCE 4194304 10\n"
    )
    ex = write_example("allreduce", tmp_path / "ex")
    direct = simulate(str(src), ex["system"], ex["network"])
    assert main(["convert", str(src), "--to", "chakra", str(tmp_path / "et" / "dp")]) == 2
    assert "give --gpus" in capsys.readouterr().err
    assert main(["convert", str(src), "--gpus", "8", "--to", "chakra", str(tmp_path / "et" / "dp")]) == 0
    assert "8 Chakra ET files" in capsys.readouterr().out
    assert not (tmp_path / "et" / "dp.comm_groups.json").exists()  # no groups: no file
    back = simulate(str(tmp_path / "et" / "dp"), ex["system"], ex["network"])
    assert [r.finish_ns for r in back.ranks] == [r.finish_ns for r in direct.ranks]
