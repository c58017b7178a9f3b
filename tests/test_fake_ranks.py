"""podsim trace --world-size N --layout ... --fake-ranks: a parallel job traced rank by rank on one
device, against the same job run for real over gloo; composition, pipelines, rescaling, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import importable_module
from podsim.capture.parallel import parse_layout
from podsim.errors import InputError
from podsim.formats.rank_traces import _translate_group

# --- the layout (no torch needed) -------------------------------------------------------------


def test_a_64_rank_tp4_pp2_job_is_8_traces() -> None:
    lay = parse_layout("tp=4,pp=2,fsdp", 64)
    assert (lay.tp, lay.pp, lay.cp, lay.dp, lay.fsdp) == (4, 2, 1, 8, True)
    # rank = ((pp * DP + dp) * CP + cp) * TP + tp: stage 1 starts at 1 * 8 * 4 = 32
    assert lay.distinct_ranks() == [0, 1, 2, 3, 32, 33, 34, 35]
    assert lay.coords(37) == {"pp": 1, "dp": 1, "cp": 0, "tp": 1}
    assert lay.representative(37) == 33 and lay.representative(30) == 2
    assert parse_layout("tp=2,cp=2", 16).distinct_ranks() == [0, 1]  # cp replicas are traced once too


@pytest.mark.parametrize(
    "spec, world, message",
    [
        ("tp=3", 64, "needs a multiple of tp x pp x cp = 3 ranks; the world size is 64"),
        ("tp=4,pp=4", 24, "needs a multiple of tp x pp x cp = 16 ranks"),
        ("xp=2", 8, "unknown layout part 'xp=2'"),
        ("tp=0", 8, "tp must be a whole number >= 1"),
        ("tp=two", 8, "tp must be a whole number >= 1"),
    ],
)
def test_layout_errors(spec: str, world: int, message: str) -> None:
    with pytest.raises(InputError, match="--layout") as e:
        parse_layout(spec, world)
    assert message in str(e.value)


def test_groups_follow_a_new_data_parallel_degree() -> None:
    old, new = parse_layout("tp=2,fsdp", 4), parse_layout("tp=2,fsdp", 16)
    # rank 1's data-parallel group in the traced job is {1, 3}; in a 16-rank job rank 5 (dp=2,
    # tp=1) is in {1, 3, 5, ..., 15} and its tensor-parallel group is {4, 5}
    assert _translate_group((1, 3), 5, old, new, 1) == (1, 3, 5, 7, 9, 11, 13, 15)
    assert _translate_group((0, 1), 5, old, new, 1) == (4, 5)
    assert _translate_group((0, 1, 2, 3), 5, old, new, 1) == tuple(range(16))


# --- tracing (torch) ---------------------------------------------------------------------------

JOBS = """
import torch
import torch.distributed as dist


def lonely(batch_size, parallel):
    m = torch.nn.Linear(8, 8)
    x = torch.randn(batch_size, 8)
    return m, x, x, lambda m, a, b: (m(a) - b).pow(2).mean()


def forever(batch_size, parallel):
    import time
    from podsim.capture import TrainingStep
    m = torch.nn.Linear(8, 8)
    return TrainingStep(lambda: time.sleep(3600), list(m.parameters()))


def uneven(batch_size, parallel):
    from podsim.capture import TrainingStep
    m = torch.nn.Linear(8, 8)
    x = torch.randn(batch_size, 8)
    tp = parallel.mesh["tp"].get_group()

    def step():
        (m(x) - x).pow(2).mean().backward()
        dist.all_reduce(m.weight.grad, group=tp)
        if parallel.coords["tp"] == 1:
            dist.all_reduce(m.bias.grad, group=tp)   # only tp rank 1: the job would hang
    return TrainingStep(step, list(m.parameters()))
"""


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    pytest.importorskip("torch")
    return importable_module(tmp_path, monkeypatch, "fake_rank_jobs", JOBS)


def _calls(folder: Path, rank: int) -> list[dict]:
    return json.loads((folder / f"comms.{rank}.json").read_text())["calls"]


def _shifted(ranks: list[int], old: int, new: int, size: int) -> list[int]:
    """A group of rank ``old`` as rank ``new`` (its data-parallel replica) sees it."""
    return sorted((r - old + new) % size if len(ranks) < size else r for r in ranks)


@pytest.mark.parametrize("job, world, layout, batch", [("mlp", 4, "tp=2,fsdp", 2), ("mlp", 2, "pp=2", 2)])
def test_fake_ranks_list_the_calls_a_real_job_makes(
    tmp_path: Path, job: str, world: int, layout: str, batch: int
) -> None:
    pytest.importorskip("torch")
    from podsim.capture import trace_ranks

    fake = trace_ranks(f"podsim.examples.jobs:{job}", batch, tmp_path / "fake", world, layout, steps=1)
    real = trace_ranks(f"podsim.examples.jobs:{job}", batch, tmp_path / "real", world, layout, steps=1, nproc=world)
    lay = parse_layout(layout, world)
    assert fake.ranks_traced == lay.distinct_ranks() and real.ranks_traced == list(range(world))
    info = json.loads((fake.folder / "capture.json").read_text())
    assert info["world_size"] == world and info["layout"]["spec"] == lay.spec()
    assert info["ranks_traced"] == lay.distinct_ranks() and info["fake_ranks"] is True
    for r in range(world):
        rep = lay.representative(r)
        got, want = _calls(fake.folder, rep), _calls(real.folder, r)
        assert [(c["kind"], c["bytes"]) for c in got] == [(c["kind"], c["bytes"]) for c in want], f"rank {r}"
        # the same groups, up to the data-parallel shift of the replica, and the same peers
        shift = r - rep
        assert [_shifted(c["ranks"], rep, r, world) if shift else c["ranks"] for c in got] == [c["ranks"] for c in want]
        assert [c.get("peer") if c.get("peer") is None else c["peer"] + shift for c in got] == [
            c.get("peer") for c in want
        ]
    kinds = {c["kind"] for r in range(world) for c in _calls(real.folder, r)}
    assert kinds == ({"all_gather", "all_reduce", "reduce_scatter"} if "tp" in layout else {"send", "recv"})


def test_a_composed_pipeline_runs_the_hand_derived_1f1b_schedule(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from podsim.api import load_workload, simulate
    from podsim.capture import trace_ranks
    from podsim.examples.jobs import BACKWARD_S, FORWARD_S
    from podsim.workload import OpKind

    steps, per_batch = {}, {}
    for m in (2, 4):
        c = trace_ranks("podsim.examples.jobs:fixed_time_pipeline", m, tmp_path / f"pp{m}", 2, "pp=2", steps=1)
        w = load_workload(c.folder)
        assert w.num_ranks == 2 and len(w.programs) == 2
        res = simulate(w, cluster="dgx-h100")  # finishes: no deadlock
        steps[m] = max(r.finish_ns for r in res.ranks) / 1e6
        # F + B as traced on each stage: its compute over its micro-batches (the sleeps plus the
        # pipeline's Python, which grows when the host is busy)
        per_batch[m] = [
            sum(int(d) for k, d in zip(p.kind, p.duration_ns) if k == int(OpKind.COMPUTE)) / 1e6 / m
            for p in (w.program_of(0), w.program_of(1))
        ]
    fb = (FORWARD_S + BACKWARD_S) * 1e3  # 60 ms of sleep a micro-batch on a stage
    for m, got in steps.items():
        # 1F1B on P = 2 stages: (M + P - 1) * (F + B), with F + B the slept or the traced time
        # (running the micro-batches one after another would take 2M (F + B))
        lo, hi = min(per_batch[m]), max(per_batch[m])
        assert (m + 1) * fb <= got, (m, got)
        assert (m + 1) * lo * 0.97 <= got <= (m + 1) * hi * 1.03, (m, got, per_batch[m])
    # the stages overlap: the micro-batches do not run one after another on the two stages, which
    # would take 2 M (F + B) (the bounds above rest on the traced times themselves, so a busy host,
    # which stretches them, cannot fail this test)
    for m, got in steps.items():
        assert got < 2 * m * min(per_batch[m]), (m, got, per_batch[m])


def test_rescale_a_traced_job_to_more_gpus(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from podsim.api import load_workload, simulate
    from podsim.capture import trace_ranks

    c = trace_ranks("podsim.examples.jobs:mlp", 2, tmp_path / "t", 4, "tp=2,fsdp", steps=1)
    w4, w16 = load_workload(c.folder), load_workload(c.folder, gpus=16)
    assert w16.num_ranks == 16 and len(w16.programs) == len(w4.programs) == 2
    dp_key = next(g.name for g in w4.groups if g.name.startswith("mesh_dp"))
    assert w4.group_of(dp_key, 3).ranks == (1, 3)
    assert w16.group_of(dp_key, 5).ranks == (1, 3, 5, 7, 9, 11, 13, 15)
    assert list(w16.representatives) == [0, 1] * 8
    res4, res16 = simulate(w4, cluster="dgx-h100"), simulate(w16, cluster="dgx-h100")
    assert res16.num_ranks == 16
    # FSDP's all-gathers and reduce-scatters move the same bytes over 8 ranks of two servers
    # instead of 2 ranks of one: they take longer (the CPU-timed compute hides them either way)
    assert res16.ranks[1].comm_ns > res4.ranks[1].comm_ns
    with pytest.raises(InputError, match="needs a multiple of tp x pp x cp = 2 ranks; the world size is 5"):
        load_workload(c.folder, gpus=5)


def test_trace_errors(tmp_path: Path, jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.cli import main

    base = ["trace", "--batch-size", "2", "--steps", "1"]
    cases = [
        (
            [f"--model={jobs}:lonely", "--world-size", "2", "--layout", "dp", "--fake-ranks"],
            "issued no collective or send/receive in its training step on rank 0 of 2",
        ),
        (
            ["--model=podsim.examples.jobs:mlp", "--world-size", "6", "--layout", "tp=4", "--fake-ranks"],
            "needs a multiple of tp x pp x cp = 4 ranks; the world size is 6",
        ),
        (["--model=podsim.examples.jobs:mlp", "--world-size", "4", "--fake-ranks"], "--layout"),
        (["--model=podsim.examples.jobs:mlp", "--world-size", "4", "--layout", "tp=2"], "--fake-ranks"),
        (
            ["--model=torchvision:resnet18", "--world-size", "4", "--layout", "tp=2", "--fake-ranks"],
            "a parallel job needs a builder",
        ),
    ]
    for i, (args, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        assert main(base + args + ["--out", str(out)]) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert not out.exists()  # no half-written output folder
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".out{i}")]


def test_ranks_that_issue_different_calls_are_named(tmp_path: Path, jobs: str) -> None:
    from podsim.capture import trace_ranks

    with pytest.raises(InputError) as e:
        trace_ranks(f"{jobs}:uneven", 2, tmp_path / "t", 4, "tp=2", steps=1)
    msg = str(e.value)
    assert "ranks 0 and 1 issue different calls on group mesh_tp" in msg
    assert "call 2 is nothing on rank 0 but all_reduce of 32 B at fake_rank_jobs.py:29 on rank 1" in msg
    assert not (tmp_path / "t").exists()


def test_cli_traces_and_simulates_the_whole_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from podsim.cli import main

    out, js = tmp_path / "job", tmp_path / "job.json"
    assert (
        main(
            [
                "trace",
                "--model",
                "podsim.examples.jobs:mlp",
                "--batch-size",
                "2",
                "--steps",
                "1",
                "--world-size",
                "16",
                "--layout",
                "tp=2,fsdp",
                "--fake-ranks",
                "--out",
                str(out),
                "--json",
                str(js),
            ]
        )
        == 0
    )
    said = capsys.readouterr().out
    assert "traced 2 of 16 ranks on the fake process group" in said
    info = json.loads(js.read_text())
    assert (info["world_size"], info["ranks_traced"], info["ranks_traced_count"]) == (16, [0, 1], 2)
    assert sorted(p.name for p in out.iterdir()) == [
        "capture.json",
        "comms.0.json",
        "comms.1.json",
        "kineto.0.json",
        "kineto.1.json",
    ]
    assert (
        main(
            [
                "simulate",
                "--workload-configuration",
                str(out),
                "--cluster",
                "dgx-h100",
                "--json",
                str(tmp_path / "res.json"),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "res.json").read_text())
    assert len(res["ranks"]) == 16


def test_a_step_that_never_ends_is_stopped(tmp_path: Path, jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.cli import main

    out = tmp_path / "t"
    assert (
        main(
            [
                "trace",
                "--model",
                f"{jobs}:forever",
                "--batch-size",
                "1",
                "--steps",
                "1",
                "--world-size",
                "2",
                "--layout",
                "dp",
                "--fake-ranks",
                "--rank-timeout",
                "3",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "--rank-timeout: stopped after 3 s: rank 0 had not finished" in capsys.readouterr().err
    assert not out.exists()


LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}


def test_hf_llama_under_fsdp2_tp_and_pipelining(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from podsim.api import load_workload, simulate
    from podsim.capture import trace_ranks

    cfg = tmp_path / "llama" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(LLAMA))
    c = trace_ranks(f"hf:{cfg}", 4, tmp_path / "t", 8, "tp=2,pp=2,fsdp", steps=1, seq_len=16)
    assert c.ranks_traced == [0, 1, 4, 5]  # (pp, tp) at dp = 0: stage 1 starts at 1 x 2 x 2
    calls = {r: _calls(c.folder, r) for r in c.ranks_traced}
    for r, cs in calls.items():
        by_desc = {(x["kind"], x["group_desc"]) for x in cs}
        # FSDP2 gathers and reduces over dp, DTensor's row-parallel outputs are all-reduced over tp
        assert {("all_gather", "mesh_dp"), ("reduce_scatter", "mesh_dp"), ("all_reduce", "mesh_tp")} <= by_desc
        p2p = [x for x in cs if x["kind"] in ("send", "recv")]
        # 4 micro-batches: stage 0 sends 4 activations and receives 4 gradients, stage 1 the reverse
        peer = r + 4 if r < 4 else r - 4
        assert len(p2p) == 8 and {x["peer"] for x in p2p} == {peer}
        assert sum(x["kind"] == "send" for x in p2p) == 4
        # an activation of one micro-batch: 1 x 16 tokens x 64 hidden x 4 bytes
        assert {x["bytes"] for x in p2p} == {1 * 16 * 64 * 4}
    w = load_workload(c.folder)
    assert w.num_ranks == 8 and len(w.programs) == 4
    res = simulate(w, cluster="dgx-h100")
    assert all(r.finish_ns > 0 for r in res.ranks)
    with pytest.raises(InputError, match="tp=3 must divide the attention heads"):
        trace_ranks(f"hf:{cfg}", 4, tmp_path / "bad", 6, "tp=3", steps=1, seq_len=16)


# --- composition of hand-written rank traces (no torch) ----------------------------------------


def _write_rank(
    folder: Path,
    rank: int,
    ops: list[tuple[str, float, float]],
    marks: list[tuple[str, float, float]],
    calls: list[dict],
) -> None:
    """A rank's Kineto trace (times in us: a 100,000 us ProfilerStep, host ``ops`` and ``podsim::``
    marks as (name, ts, dur)) and its comms file."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100_000, "tid": 1}]
    ev += [{"ph": "X", "cat": "cpu_op", "name": n, "ts": ts, "dur": dur, "tid": 1} for n, ts, dur in ops]
    ev += [{"ph": "X", "cat": "user_annotation", "name": n, "ts": ts, "dur": dur, "tid": 1} for n, ts, dur in marks]
    (folder / f"kineto.{rank}.json").write_text(json.dumps({"traceEvents": ev}))
    (folder / f"comms.{rank}.json").write_text(json.dumps({"rank": rank, "calls": calls}))


def _job(folder: Path, world: int = 2, layout: str = "tp=2", traced: list[int] | None = None) -> Path:
    folder.mkdir()
    lay = parse_layout(layout, world)
    (folder / "capture.json").write_text(
        json.dumps(
            {
                "world_size": world,
                "layout": lay.to_json(),
                "fake_ranks": True,
                "ranks_traced": traced or lay.distinct_ranks(),
            }
        )
    )
    return folder


def _all_reduce(seq: int, site: str = "job.py:7") -> dict:
    return {
        "seq": seq,
        "kind": "all_reduce",
        "bytes": 1 << 20,
        "group": "3",
        "group_desc": "mesh_tp",
        "ranks": [0, 1],
        "site": site,
        "waited": True,
    }


def test_a_wait_holds_the_host_until_its_call_ends(tmp_path: Path) -> None:
    from podsim.api import load_workload, simulate

    d = _job(tmp_path / "job")
    # rank 0 computes 10 ms, issues a 1 MiB all-reduce, computes 5 ms, waits 1 ms (traced alone:
    # at once), computes 4 ms; rank 1 computes 30 ms before the same all-reduce, then waits
    _write_rank(
        d,
        0,
        [("aten::mm", 0, 10_000), ("aten::relu", 10_000, 5_000), ("aten::add", 16_000, 4_000)],
        [("podsim::all_reduce#5", 10_000, 10), ("podsim::wait#5", 15_000, 1_000)],
        [_all_reduce(5)],
    )
    _write_rank(
        d,
        1,
        [("aten::mm", 0, 30_000), ("aten::add", 30_000, 2_000)],
        [("podsim::all_reduce#9", 30_000, 10), ("podsim::wait#9", 30_000, 10)],
        [_all_reduce(9)],
    )
    res = simulate(load_workload(d), cluster="dgx-h100", use_symmetry=False)
    # a piece of host time lasts until the next cut (the step's end after the last op): rank 1 is
    # 30 ms, the all-reduce, then 100 - 30.01 ms (its 10 us in the wait are dropped)
    ar = res.ranks[1].finish_ns - 30_000_000 - 69_990_000
    assert 0 < ar < 1_000_000  # 1 MiB over NVLink: tens of microseconds
    # rank 0: 10 ms, then 5 ms while the all-reduce waits for rank 1 (issued at 30 ms); its 1 ms
    # in the wait is dropped, and the rest (84 ms from 16 ms) starts when the all-reduce ends
    assert res.ranks[0].finish_ns == 30_000_000 + ar + 84_000_000
    assert res.ranks[0].comm_ns >= ar


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: (d / "capture.json").write_text('{"world_size": "two"}'), "world_size: expected a world size >= 1"),
        (
            lambda d: (d / "capture.json").write_text(
                json.dumps({"world_size": 2, "layout": {"spec": "tp=2"}, "ranks_traced": [0, 5]})
            ),
            "ranks_traced: expected",
        ),
        (
            lambda d: (d / "capture.json").write_text(
                json.dumps({"world_size": 2, "layout": {"spec": "tp=4"}, "ranks_traced": [0]})
            ),
            "needs a multiple of",
        ),
        (
            lambda d: (d / "comms.1.json").write_text('{"calls": [{"seq": 1, "kind": "allreduce"}]}'),
            "calls[0].kind: unknown kind 'allreduce'",
        ),
        (
            lambda d: (d / "comms.1.json").write_text(
                '{"calls": [{"seq": 1, "kind": "send", "bytes": 4, "ranks": [0, 1]}]}'
            ),
            "calls[0].peer: a send needs a peer rank",
        ),
        (
            lambda d: (d / "comms.1.json").write_text('{"calls": [{"seq": 1, "kind": "barrier", "bytes": -4}]}'),
            "calls[0].bytes: expected a whole number >= 0",
        ),
        (lambda d: (d / "kineto.1.json").unlink(), "the trace of rank 1 is missing"),
        (
            lambda d: (d / "comms.1.json").write_text(json.dumps({"calls": [_all_reduce(7)]})),
            "calls [7] of the comms file are not marked in the trace",
        ),
        (
            lambda d: (d / "comms.1.json").write_text(json.dumps({"calls": [_all_reduce(9) | {"bytes": 64}]})),
            "call 1 is all_reduce of 1,048,576 B at job.py:7 on rank 0 but all_reduce of 64 B at job.py:7 on rank 1",
        ),
    ],
)
def test_bad_rank_traces(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    from podsim.api import load_workload

    d = _job(tmp_path / "job")
    _write_rank(d, 0, [("aten::mm", 0, 10_000)], [("podsim::all_reduce#5", 10_000, 10)], [_all_reduce(5)])
    _write_rank(d, 1, [("aten::mm", 0, 10_000)], [("podsim::all_reduce#9", 10_000, 10)], [_all_reduce(9)])
    load_workload(d)  # well formed
    edit(d)
    with pytest.raises(InputError) as e:
        load_workload(d)
    assert message in str(e.value), str(e.value)


def test_rank_lists_stay_short() -> None:
    from podsim.report.summary import rank_ranges

    assert rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert rank_ranges(list(range(0, 512, 2))) == "0,2,...,510"
    assert rank_ranges([r for r in range(1024) if r % 4 < 2]) == "0-1,4-5,8-9,...,1020-1021 (512 ranks)"
    assert rank_ranges([0, 2, 4]) == "0,2,4"


def test_megatron_core_says_what_it_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import importlib.util

    from podsim.cli import main

    cfg = tmp_path / "gpt" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(LLAMA))
    out = tmp_path / "t"
    assert (
        main(
            [
                "trace",
                "--model",
                f"megatron:{cfg}",
                "--batch-size",
                "2",
                "--seq-len",
                "16",
                "--steps",
                "1",
                "--world-size",
                "2",
                "--layout",
                "tp=2",
                "--fake-ranks",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    # (find_spec of a submodule raises when its parent package is missing)
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        # the optional extra is not installed
        assert "pip install megatron-core" in err, err
    else:  # installed: its forward pass needs CUDA, which a CPU-only torch does not have
        assert "this model needs a GPU (CUDA); trace it with --device cuda" in err, err
    assert "Traceback" not in err and not out.exists()


def test_on_a_cuda_trace_calls_follow_the_stream_not_the_host(tmp_path: Path) -> None:
    from podsim.api import load_workload, simulate

    d = _job(tmp_path / "job")
    for rank in (0, 1):
        # the host launches kernel A (10 ms) at 0 ms, issues an all-reduce at 1 ms, waits for it at
        # 2 ms (NCCL: the stream waits, the host goes on) and launches kernel B (5 ms) at 3 ms; the
        # step's host part ends at 12 ms
        _write_rank(
            d,
            rank,
            [("aten::mm", 0, 500), ("aten::add", 3_000, 500)],
            [("podsim::all_reduce#5", 1_000, 10), ("podsim::wait#5", 2_000, 10)],
            [_all_reduce(5)],
        )
        trace = json.loads((d / f"kineto.{rank}.json").read_text())
        trace["traceEvents"][0]["dur"] = 12_000
        for corr, (ts, dur) in enumerate([(0, 10_000), (3_000, 5_000)]):
            trace["traceEvents"] += [
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": ts + 100,
                    "dur": 5,
                    "tid": 1,
                    "args": {"correlation": corr},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"kernel {'AB'[corr]}",
                    "ts": ts + 200,
                    "dur": dur,
                    "tid": 7,
                    "args": {"correlation": corr, "stream": 7},
                },
            ]
        (d / f"kineto.{rank}.json").write_text(json.dumps(trace))
    res = simulate(load_workload(d), cluster="dgx-h100", use_symmetry=False)
    for r in res.ranks:
        # the all-reduce waits for kernel A (its input), kernel B for the all-reduce: 10 + ar + 5 ms,
        # while the host (12 ms, not held by the wait) finishes first
        assert 0 < r.comm_ns < 1_000_000
        assert r.finish_ns == 15_000_000 + r.comm_ns
