"""Exports of generated iterations: SimAI .txt read back by podsim's SimAI reader, Chakra ET
with comm groups replayed by podsim simulate."""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.api import simulate
from podsim.api.train import simulate_training
from podsim.cli import main
from podsim.compute.model import ComputeModel
from podsim.errors import InputError
from podsim.formats.chakra import write_workload_with_groups
from podsim.formats.simai import read_simai_workload
from podsim.hardware.gpu import get_gpu
from podsim.llm import get_model
from podsim.llm.export import simai_text, write_simai
from podsim.llm.generate import generate
from podsim.llm.layout import Layout

CM = ComputeModel.for_gpu(get_gpu("a100-80gb"))


def _finish(res) -> int:  # type: ignore[no-untyped-def]
    return max(r.finish_ns for r in res.ranks)


def test_simai_header_and_rows(tmp_path: Path) -> None:
    m = get_model("llama2-7b")
    lay = Layout(
        64,
        tp=4,
        pp=2,
        global_batch=32,
        seq_len=4096,
        sequence_parallel=True,
        distributed_optimizer=True,
        tp_overlap="none",
    )
    p = tmp_path / "w.txt"
    write_simai(m, lay, CM, p)
    hdr, layers = read_simai_workload(p)
    assert (hdr.tp, hdr.pp, hdr.vpp, hdr.ga, hdr.all_gpus) == (4, 2, 16, 4, 64)
    assert hdr.pp_comm == 1 * 4096 * 4096 * 2 // 4  # b s h bytes / TP (sequence parallel)
    # optimizer row, then per micro-batch (stage 0: no output layer): the embedding (2 rows:
    # lookup + reduce-scatter; gradient all-gather + dense gradient) and 16 layers x 7 rows: the
    # backward's SP collectives per block are the incoming gradient's all-gather, the input
    # re-gather for wgrad and dgrad's reduce-scatter (3 x 2 + the tail); the forward has 5:
    # norm | all-gather, attention | reduce-scatter, norm | all-gather, MLP | reduce-scatter, add
    assert len(layers) == 1 + 4 * (2 + 16 * 7)
    assert layers[0].name == "optimizer_0" and layers[0].wg_comm == "ALLGATHER"
    rows = [x for x in layers if x.name.startswith("mb0_layer0_")]
    assert [r.fwd_comm for r in rows] == ["ALLGATHER", "REDUCESCATTER"] * 2 + ["NONE"] * 3
    assert [r.ig_comm for r in rows][::-1] == ["ALLGATHER", "ALLGATHER", "REDUCESCATTER"] * 2 + ["NONE"]
    assert all(r.fwd_ns > 0 for r in rows[:5]) and all(r.fwd_bytes == 4096 * 4096 * 2 for r in rows[:4])
    # each layer's DP reduce-scatter once, in micro-batch 0: layer params / TP x 4 B
    dp = [x for x in layers if x.wg_comm == "REDUCESCATTER"]
    assert len(dp) == 16 and all(x.wg_bytes == m.layer_params(0) // 4 * 4 for x in dp)
    with pytest.raises(InputError, match="no context-parallel group"):
        simai_text(m, Layout(64, tp=4, cp=2, global_batch=32, seq_len=4096), CM)


def test_simai_round_trip_matches_podsim(tmp_path: Path) -> None:
    # no data parallelism: SimAI's order (all forwards, then all backwards) and podsim's 1F1B
    # run the same kernels and TP collectives; only SimAI's 100 ns update delays differ
    m = get_model("llama2-7b")
    lay = Layout(4, tp=4, global_batch=2, seq_len=4096, recompute="full", tp_overlap="none")
    p = tmp_path / "w.txt"
    write_simai(m, lay, CM, p)
    back = _finish(simulate(str(p), cluster="dgx-a100-superpod", backend="analytical"))
    own = simulate_training(m, lay, "a100-80gb", "dgx-a100-superpod", "analytical").result.finish_ns
    delays = 100 * sum(1 for x in read_simai_workload(p)[1] for c in (x.fwd_comm, x.ig_comm) if c != "NONE")
    assert back == pytest.approx(own + delays, rel=1e-4)
    # with DP the optimizer waits for the reduced gradients in podsim, not in SimAI: SimAI is faster
    lay = Layout(32, tp=4, global_batch=16, seq_len=4096, recompute="full", tp_overlap="none")
    write_simai(m, lay, CM, p)
    back = _finish(simulate(str(p), cluster="dgx-a100-superpod", backend="analytical"))
    own = simulate_training(m, lay, "a100-80gb", "dgx-a100-superpod", "analytical").result.finish_ns
    assert 0.85 * own < back < own


def test_chakra_export_replays(tmp_path: Path) -> None:
    m = get_model("gpt3-1.3b")
    lay = Layout(16, tp=2, pp=2, global_batch=8)
    w = generate(m, lay, CM)
    paths, cg = write_workload_with_groups(w, tmp_path / "et" / "llm")
    assert len(paths) == 16
    import json

    groups = json.loads(Path(cg).read_text())
    assert "0" not in groups and sorted(map(len, groups.values())) == sorted(len(g.ranks) for g in w.groups)
    res = simulate(str(tmp_path / "et" / "llm"), cluster="dgx-a100-superpod", backend="analytical", comm_groups=cg)
    own = simulate_training(m, lay, "a100-80gb", "dgx-a100-superpod", "analytical")
    # same kernels (durations rounded to us in Chakra); ASTRA-sim's semantics give each GPU one
    # communication slot, so TP, DP and pipeline transfers serialize: never faster
    stage0 = w.program_of(0)
    comp = sum(round(int(x) / 1000) * 1000 for x in stage0.duration_ns[stage0.kind == 0])
    assert res.ranks[0].compute_ns == pytest.approx(comp, rel=1e-4)
    assert own.result.finish_ns <= _finish(res) < 1.2 * own.result.finish_ns


def test_cli_exports(tmp_path: Path) -> None:
    assert (
        main(
            [
                "llm",
                "--model",
                "gpt3-1.3b",
                "--gpus",
                "8",
                "--tp",
                "2",
                "--pp",
                "2",
                "--global-batch",
                "4",
                "--simai",
                str(tmp_path / "w.txt"),
                "--chakra",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    assert read_simai_workload(tmp_path / "w.txt")[0].pp == 2
    assert (tmp_path / "c.7.et").exists() and (tmp_path / "c.comm_groups.json").exists()
