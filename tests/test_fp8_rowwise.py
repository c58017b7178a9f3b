"""torchao's rowwise fp8 recipe (``--precision fp8-rowwise``): podsim's model of its casts
against torchao's measured linear speedups on H100, and the published ordering of rowwise,
bf16 and tensorwise fp8 in torchtitan's async-TP benchmark."""

from __future__ import annotations

from importlib import resources

import pytest

from podsim.llm.stack import Stack
from podsim.validation.fp8_rowwise import Cell, errors_pct, fit_overhead, modelled_speedup, read_cells
from podsim.validation.predict import throughput
from podsim.validation.rows import read_rows


def test_the_shipped_overhead_reproduces_torchaos_measured_speedups() -> None:
    cells = read_cells()
    assert len(cells) == 216  # 6 x 6 x 6 shapes, M, K, N from 1,024 to 32,768
    shipped = Stack.for_gpu("h100-80gb").fp8_rowwise_overhead
    assert fit_overhead(cells) == pytest.approx(shipped, rel=0.01)  # llm/stack.yaml holds the fit
    errs = errors_pct(shipped, cells)
    assert sum(abs(e) for e in errs) / len(errs) < 12.0
    assert abs(sum(errs) / len(errs)) < 3.0  # not biased either way
    # without the casts' measured cost (the roofline's), podsim would promise far more
    naive = errors_pct(1.0, cells)
    assert sum(naive) / len(naive) > 20.0


def test_rowwise_loses_on_small_shapes_and_wins_on_large_ones() -> None:
    shipped = Stack.for_gpu("h100-80gb").fp8_rowwise_overhead
    # the measured corners: 0.42 at 1024^3, 1.42 at 16384^3
    assert modelled_speedup(Cell(1024, 1024, 1024, 0.42), shipped) < 0.7
    assert modelled_speedup(Cell(16384, 16384, 16384, 1.42), shipped) > 1.2


def test_torchtitan_async_tp_ordering_rowwise_below_bf16_below_tensorwise() -> None:
    rows = read_rows(str(resources.files("podsim.validation") / "reported_stacks.csv"), "reported")
    by = {r["row_id"]: r for r in rows}
    pre = "torchtitan_asynctp202506_llama3_8b_64gpu_"
    runs = {p: by[f"{pre}{p}_asynctp"] for p in ("fp8rw", "bf16", "fp8tw")}
    measured = {p: float(r["value"]) for p, r in runs.items()}
    assert measured["fp8rw"] < measured["bf16"] < measured["fp8tw"]  # 3,915 < 4,809 < 5,570
    predicted = {p: throughput(r) for p, r in runs.items()}
    assert predicted["fp8rw"] < predicted["bf16"] < predicted["fp8tw"]
    assert runs["fp8rw"]["precision"] == "fp8-rowwise"


def test_a_rowwise_answer_says_where_its_cast_overhead_was_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The overhead was fitted on an H100: elsewhere the result says so, unless the user's stack
    sets its own value (calibrated on their GPU)."""
    from podsim.api.train import simulate_training
    from podsim.llm.layout import Layout
    from podsim.llm.model import get_model
    from podsim.stacks.stack import load_stack

    model = get_model("llama3-8b")
    lay = Layout(8, tp=8, sequence_parallel=True, global_batch=8, seq_len=2048, precision="fp8-rowwise")
    note = "fitted to torchao's kernel measurements on the H100 only: untested on the B200"

    def notes(gpu: str, software=None) -> str:  # type: ignore[no-untyped-def]
        res = simulate_training(model, lay, gpu, record_timeline=False, software=software)
        return " ".join(res.to_dict()["notes"])

    assert note in notes("b200")
    assert "fp8_rowwise_overhead" not in notes("h100")
    own = tmp_path / "mine.yaml"
    own.write_text(
        "name: mine\nkind: training\nbase: torchtitan-compile\ntraining:\n  fp8_rowwise_overhead: 1.8\n"
        "sources:\n  fp8_rowwise_overhead: my B200 kernel measurements\n"
    )
    assert "fp8_rowwise_overhead" not in notes("b200", load_stack(str(own), "training"))
