"""TrioSim's processed traces (trace.csv + tensor.csv): reading, one-GPU replay, bad input."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from podsim.api import simulate
from podsim.cli import main
from podsim.errors import InputError
from podsim.formats.triosim import (
    TENSOR_COLUMNS,
    TRACE_COLUMNS,
    read_triosim,
    triosim_to_workload,
)


@pytest.mark.conformance
@pytest.mark.parametrize(
    "model,fwd,bwd,opt,ops", [("vgg13", 28105, 62365, 3568, 77), ("resnet50", 23901, 45977, 845, 396)]
)
def test_shipped_traces_replay_exactly(refdata, model, fwd, bwd, opt, ops) -> None:  # type: ignore[no-untyped-def]
    # per-stage sums of Operator_cudatimenooverlap as the reference notes tabulate them
    d = refdata / "triosim" / "trace2-h100-bs128" / model
    t = read_triosim(d)
    assert len(t.ops) == ops
    assert (t.kernel_us("forward"), t.kernel_us("backward"), t.kernel_us("optimizer")) == (fwd, bwd, opt)
    with open(d / "trace.csv", newline="") as f:
        assert sum(int(r["Operator_cudatimenooverlap"]) for r in csv.DictReader(f)) == fwd + bwd + opt
    res = simulate(str(d), cluster="dgx-h100")
    assert res.ranks[0].finish_ns == (fwd + bwd + opt) * 1000
    assert triosim_to_workload(t).programs[0].names[0] == "aten::conv2d"


def _write(d: Path, trace_rows: list[list[str]], header: tuple[str, ...] = TRACE_COLUMNS) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "trace.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(trace_rows)
    with open(d / "tensor.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TENSOR_COLUMNS)
        w.writerow(["0", "4", "[2, 3]", "6", "4", "input", "5", "0"])
        w.writerow(["1", "5", "[2, 3]", "6", "4", "output", "6", "0"])
    return d


def test_small_trace_and_span_time(tmp_path: Path) -> None:
    d = _write(
        tmp_path / "t",
        [
            ["1", "aten::linear", "[4]", "[5]", "12", "10", "[6]", "[6]", "0", "forward", "1"],
            ["2", "autograd::LinearBackward0", "[5]", "[4]", "30", "25", "[6]", "[6]", "0", "backward", "1"],
        ],
    )
    t = read_triosim(d)
    assert [o.name for o in t.ops] == ["aten::linear", "autograd::LinearBackward0"] and t.ops[0].tp_split
    p = triosim_to_workload(t).programs[0]
    assert p.duration_ns.tolist() == [10_000, 25_000] and p.size_bytes.tolist() == [48, 48]
    assert triosim_to_workload(t, "span").programs[0].duration_ns.tolist() == [12_000, 30_000]
    assert p.extras[1]["stage"] == "backward"


def test_bad_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _write(
        tmp_path / "a",
        [["1", "x", "[4]", "[5]", "1", "1", "[6]", "[6]", "0", "forward", "0"]],
        header=TRACE_COLUMNS[:-1],
    )
    with pytest.raises(InputError, match="missing column.*tpflag"):
        read_triosim(d)
    d = _write(tmp_path / "b", [["1", "x", "4", "[5]", "1", "1", "[6]", "[6]", "0", "forward", "0"]])
    with pytest.raises(InputError, match=r"row 2, column Operator_input.*expected a list like \[1; 2\]"):
        read_triosim(d)
    d = _write(tmp_path / "c", [["1", "x", "[4]", "[5]", "1", "1", "[6]", "[6]", "0", "sideways", "0"]])
    with pytest.raises(InputError, match="stage 'sideways' is not one of forward, backward, optimizer"):
        read_triosim(d)
    with pytest.raises(InputError, match="no such file"):
        read_triosim(tmp_path / "nothing")
    assert main(["simulate", "--workload-configuration", str(tmp_path / "c"), "--cluster", "dgx-h100"]) == 2
    assert "sideways" in capsys.readouterr().err
