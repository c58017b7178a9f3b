"""Issue 13's newcomer bugs, each pinned: what a first-hour user ran into, and what they get now."""

from __future__ import annotations

import json

import pytest

from podsim.api import simulate
from podsim.cli import main
from podsim.report.result import RankResult, Result
from podsim.report.summary import format_summary
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload


def _coll(kind: CollectiveKind, size: int, duration_ns: int | None = None) -> Workload:
    b = ProgramBuilder("w")
    extra = {} if duration_ns is None else {"duration_ns": duration_ns}
    b.add(OpKind.COLLECTIVE, "c", collective=int(kind), size_bytes=size, node_id=1, **extra)
    return Workload([b.build()], [0] * 8, name="w")


def test_untraced_broadcast_is_timed_as_an_all_gather() -> None:
    # a traced c10d broadcast loads with duration -1: it used to be scheduled in the past
    size = 64 << 20
    bc = simulate(_coll(CollectiveKind.BROADCAST, size, -1), cluster="dgx-h100").finish_ns
    ag = simulate(_coll(CollectiveKind.ALL_GATHER, size), cluster="dgx-h100").finish_ns
    assert bc == ag > 0
    # a recorded duration is replayed as is, as ASTRA-sim does
    assert simulate(_coll(CollectiveKind.BROADCAST, size, 12_345), cluster="dgx-h100").finish_ns == 12_345


def test_missing_trace_folder_is_one_line(capsys) -> None:
    assert main(["simulate", "--pytorch", "no/such/folder"]) == 2
    err = capsys.readouterr().err
    assert "--pytorch" in err and "no/such/folder" in err and "Traceback" not in err and err.count("\n") == 1


def test_output_to_a_folder_is_refused_before_running(tmp_path, capsys) -> None:
    assert main(["llm", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "8", "--json", str(tmp_path)]) == 2
    io = capsys.readouterr()
    assert "--json" in io.err and "folder" in io.err and io.out == ""  # nothing ran
    (tmp_path / "f").write_text("")
    assert (
        main(
            [
                "llm",
                "--model",
                "gpt3-1.3b",
                "--gpus",
                "8",
                "--global-batch",
                "8",
                "--trace",
                str(tmp_path / "f" / "t.json"),
            ]
        )
        == 2
    )
    assert "is a file, not a folder" in capsys.readouterr().err


def test_internal_errors_are_one_line_unless_debug(monkeypatch, capsys) -> None:
    import podsim.cli.inspect as cli_inspect

    def boom(args):  # type: ignore[no-untyped-def]
        raise ValueError("a bug")

    monkeypatch.setattr(cli_inspect, "_run_inspect", boom)
    assert main(["inspect", "x"]) == 70
    err = capsys.readouterr().err
    assert "internal error: ValueError: a bug" in err and "--debug" in err and "Traceback" not in err
    with pytest.raises(ValueError):
        main(["inspect", "x", "--debug"])


def test_llm_chakra_traces_replay_without_naming_their_groups(tmp_path, capsys) -> None:
    prefix = str(tmp_path / "et" / "gpt")
    assert (
        main(["llm", "--model", "gpt3-1.3b", "--gpus", "16", "--tp", "2", "--global-batch", "16", "--chakra", prefix])
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "simulate",
                "--workload-configuration",
                prefix,
                "--cluster",
                "dgx-h100",
                "--json",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "gpt.comm_groups.json" in out
    assert json.loads((tmp_path / "r.json").read_text())["num_ranks"] == 16
    # without the file beside them, the error says how to give the groups
    (tmp_path / "et" / "gpt.comm_groups.json").rename(tmp_path / "groups.json")
    assert main(["simulate", "--workload-configuration", prefix, "--cluster", "dgx-h100"]) == 2
    assert "--comm-group-configuration" in capsys.readouterr().err
    assert (
        main(
            [
                "simulate",
                "--workload-configuration",
                prefix,
                "--cluster",
                "dgx-h100",
                "--comm-group-configuration",
                str(tmp_path / "groups.json"),
            ]
        )
        == 0
    )


def test_inspect_writes_json_with_units(tmp_path, capsys) -> None:
    prefix = str(tmp_path / "gpt")
    main(["llm", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--global-batch", "8", "--chakra", prefix])
    assert main(["inspect", prefix, "--ranks", "2", "--json", str(tmp_path / "s.json")]) == 0
    d = json.loads((tmp_path / "s.json").read_text())
    assert d["rank_files"] == 8 and len(d["summarized"]) == 2
    s = d["summarized"][0]
    assert s["nodes"] == sum(s["by_type"].values()) and s["total_duration_us"] > 0 and s["comm_bytes"] > 0


def test_cpu_capture_summary_shows_host_time() -> None:
    r = Result(ranks=[RankResult(0, 100, 0, 10, 100, cpu_ns=90)])
    text = format_summary(r)
    assert "cpu (ns)" in text and "90" in text and "ran their compute on the host" in text
    gpu = Result(ranks=[RankResult(0, 100, 80, 10, 20)])
    assert "cpu (ns)" not in format_summary(gpu)


def test_triosim_export_reads_back(tmp_path) -> None:
    from podsim.formats.triosim import read_triosim
    from podsim.formats.triosim_write import write_triosim
    from podsim.parallelize import OneGpuStep, StepOp, from_triosim, to_triosim

    ops = [
        StepOp("aten::conv2d", 120_000, "forward", param_bytes=4096, tp_split=True, output_bytes=8192),
        StepOp("aten::relu", 30_000, "forward", output_bytes=8192),
        StepOp("aten::linear", 50_000, "forward", param_bytes=2048, tp_split=True, output_bytes=400),
        StepOp("autograd::engine::evaluate_function: AddmmBackward0", 90_000, "backward", grad_bytes=2048),
        StepOp("autograd::engine::evaluate_function: ReluBackward0", 40_000, "backward"),
        StepOp("autograd::engine::evaluate_function: ConvolutionBackward0", 200_000, "backward", grad_bytes=4096),
        StepOp("Optimizer.step#Adam.step", 10_000, "optimizer"),
    ]
    write_triosim(to_triosim(OneGpuStep("toy", ops)), tmp_path / "t")
    back = from_triosim(read_triosim(tmp_path / "t"))
    assert [(o.name, o.ns, o.stage, o.param_bytes, o.grad_bytes, o.output_bytes, o.tp_split) for o in back.ops] == [
        (o.name, o.ns, o.stage, o.param_bytes, o.grad_bytes, o.output_bytes, o.tp_split) for o in ops
    ]
    assert back.stage_ns() == {"forward": 200_000, "backward": 330_000, "optimizer": 10_000}


def test_example_write_says_what_it_wrote_and_serving_runs(tmp_path, capsys) -> None:
    assert main(["example", "--write", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "all_reduce.<rank>.et" in out and "system.json" in out and "117,780" in out
    assert sorted(p.name for p in (tmp_path / "a").iterdir())[:2] == ["all_reduce.0.et", "all_reduce.1.et"]
    assert main(["example", "serving", "--write", str(tmp_path / "s"), "--json", str(tmp_path / "s.json")]) == 0
    assert "placement.json, workload.csv" in capsys.readouterr().out
    doc = json.loads((tmp_path / "s.json").read_text())
    # DLSIM's generator: 6.667 req/s over 20 s (about 133, seeded), two services on GPUs 0-1
    assert 100 < doc["num_requests"] < 170 and doc["num_requests"] == doc["completed"] + doc["dropped"]


def test_large_traces_are_announced_and_ranks_limited(tmp_path, monkeypatch, capsys) -> None:
    import podsim.report.perfetto as perfetto

    monkeypatch.setattr(perfetto, "LARGE_TRACE_BYTES", 10_000)  # a small run stands for a big one
    argv = ["llm", "--model", "gpt3-1.3b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "16"]
    assert main(argv + ["--trace", str(tmp_path / "t.json"), "--trace-ranks", "2"]) == 0
    io = capsys.readouterr()
    assert "MB trace" in io.err and "--trace-ranks" in io.err  # said before writing
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["otherData"]["ranks_in_trace"] == 2
    assert len({e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X"}) <= 2


def test_capture_env_quiets_torch_unless_debug(tmp_path) -> None:
    import subprocess
    import sys

    probe = (
        "import os, sys, podsim.capture as cap, podsim.cli as cli\n"
        "def fake(*a, **k):\n"
        "    print(os.environ.get('TORCH_CPP_LOG_LEVEL'), os.environ.get('KINETO_LOG_LEVEL'), 'torch' in sys.modules)\n"
        "    raise SystemExit(0)\n"
        "cap.capture = fake\n"
        "cli.main(['trace', '--model', 'm:f', '--batch-size', '1', '--out', 'x'] + sys.argv[1:])\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("TORCH_CPP_LOG_LEVEL", "KINETO_LOG_LEVEL")}
    quiet = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert quiet.stdout.split() == ["ERROR", "6", "False"], quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-c", probe, "--debug"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert loud.stdout.split() == ["None", "None", "False"], loud.stderr


def test_one_vocabulary_across_subcommands() -> None:
    import argparse

    from podsim.api.jobs import SearchCommand
    from podsim.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    seen: dict[str, dict[str, tuple]] = {}
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.option_strings:
                seen.setdefault(a.option_strings[0], {})[name] = (a.type, a.choices and tuple(a.choices), a.metavar)
    # a shared idea is spelled, typed and offered the same way wherever it appears
    for flag in ("--backend", "--cluster", "--trace-ranks", "--json", "--gpus", "--seq-len", "--micro-batch"):
        # search takes several GPU counts (--gpus N[,N...]): one is any other's N
        variants = {v for cmd, v in seen.get(flag, {}).items() if not (cmd == "search" and flag == "--gpus")}
        assert len(variants) == 1, (flag, seen.get(flag))
    # its flag value becomes the job's GPU counts where every flag value does, in the declared parameter
    args = build_parser().parse_args(["search", "--model", "m", "--gpus", "8,16", "--global-batch", "8"])
    assert SearchCommand.from_values(vars(args)).job.gpus == (8, 16)
    assert len(seen["--backend"]) >= 4 and len(seen["--cluster"]) >= 5
    # the peers' and older spellings are aliases only, never an option's own name
    for alias in ("--chrome-trace", "--chrome_trace", "--micro-batch-size", "--pipeline-schedule", "--list-clusters"):
        assert alias not in seen, alias
