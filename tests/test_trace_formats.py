"""The trace-format registry: each format sniffed from files podsim writes (or the smallest
file of the format), forcing a format, closest-name errors, one detection for workloads and
one-GPU steps, writing, and the generic ``--workload PATH`` door of ``podsim simulate``."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from podsim.api.convert import convert
from podsim.api.simulate import ParallelSpec, format_of, load_workload, simulate
from podsim.cli import main
from podsim.errors import InputError
from podsim.formats import registry
from podsim.formats.chakra import write_workload
from podsim.formats.one_gpu_step import OneGpuStep, StepOp, to_triosim
from podsim.formats.triosim_write import write_triosim
from podsim.parallelize import load_step
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

SIMAI_HEADER = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4 "
    "checkpoints: 0 checkpoint_initiates: 0\n"
)

#: a toy one-GPU step: two parametrized layers, their weight-gradient ops, an optimizer step (ns)
STEP_OPS = [
    StepOp("aten::linear", 100_000, "forward", param_bytes=4 << 20, tp_split=True, output_bytes=1 << 20),
    StepOp("aten::linear", 50_000, "forward", param_bytes=2 << 20, tp_split=True, output_bytes=1 << 20),
    StepOp("autograd::engine::evaluate_function: AddmmBackward0", 90_000, "backward", grad_bytes=2 << 20),
    StepOp("autograd::engine::evaluate_function: AddmmBackward0", 180_000, "backward", grad_bytes=4 << 20),
    StepOp("Optimizer.step#Adam.step", 10_000, "optimizer"),
]


def _chakra(tmp_path: Path) -> Path:
    b = ProgramBuilder("ar")
    b.add(OpKind.COLLECTIVE, "ar", collective=int(CollectiveKind.ALL_REDUCE), size_bytes=1 << 20, node_id=1)
    prefix = tmp_path / "chakra" / "ar"
    prefix.parent.mkdir()
    write_workload(Workload([b.build()], [0] * 4, name="ar"), prefix)
    return prefix


def _triosim(tmp_path: Path) -> Path:
    folder = tmp_path / "trio"
    write_triosim(to_triosim(OneGpuStep("toy", list(STEP_OPS))), folder)
    return folder


def _fixtures(tmp_path: Path) -> dict[str, Path]:
    """One path of each format, by the format's name."""
    et = tmp_path / "et.json"
    et.write_text(json.dumps({"schema": "1.0.1", "pid": 1, "nodes": []}))
    kineto = tmp_path / "kineto_trace.json"
    kineto.write_text(json.dumps({"traceEvents": []}))
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "kineto.json").write_text(json.dumps({"traceEvents": []}))
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "capture.json").write_text(json.dumps({"world_size": 2}))
    (ranks / "comms.0.json").write_text(json.dumps({"rank": 0, "calls": []}))
    (ranks / "kineto.0.json").write_text(json.dumps({"traceEvents": []}))
    text = tmp_path / "data.txt"
    text.write_text("DATA\n1\nconv1 -1 1000 NONE 0 1000 NONE 0 1000 ALLREDUCE 1048576 1\n")
    simai = tmp_path / "gpt.txt"
    simai.write_text(SIMAI_HEADER + "1\nx -1 1 ALLGATHER 100 1 NONE 0 1 NONE 0 1\n")
    return {
        "execution-trace": et,
        "pytorch": kineto,
        "pytorch (folder)": capture,
        "rank-traces": ranks,
        "triosim": _triosim(tmp_path),
        "astra-sim-text": text,
        "simai": simai,
        "chakra": _chakra(tmp_path),
    }


def test_each_format_is_sniffed_from_its_files(tmp_path) -> None:
    for expected, path in _fixtures(tmp_path).items():
        assert registry.trace_format(path).name == expected.split(" ")[0], path
        assert format_of(path).name == expected.split(" ")[0]
    # a path no format claims is read as a Chakra prefix, whose reader names the files it expected
    assert registry.sniffed(tmp_path / "nothing") is None
    with pytest.raises(InputError, match=r"nothing\.0\.et"):
        load_workload(tmp_path / "nothing")


def test_sniffing_order_is_the_documented_one() -> None:
    assert registry.SNIFF_ORDER == (
        "execution-trace",
        "triosim",
        "rank-traces",
        "pytorch",
        "astra-sim-text",
        "simai",
        "chakra",
    )
    doc = Path(__file__).parent.parent.joinpath("docs", "traces.md").read_text()
    for name in registry.SNIFF_ORDER:
        assert f"`{name}`" in doc, name


def test_forcing_a_format_and_its_aliases(tmp_path) -> None:
    fx = _fixtures(tmp_path)
    assert registry.trace_format(fx["simai"], "kineto").name == "pytorch"
    assert registry.trace_format(fx["chakra"], "aicb").name == "simai"
    # a forced format is read as that format, whatever the path looks like
    with pytest.raises(InputError, match=r"data\.txt\.0\.et"):
        load_workload(fx["astra-sim-text"], 4, trace_format="chakra")
    w = load_workload(fx["astra-sim-text"], 4, trace_format="text")
    assert w.num_ranks == 4


def test_unknown_format_names_the_closest(tmp_path) -> None:
    with pytest.raises(InputError, match=r"unknown trace format 'triosm'.*did you mean 'triosim'"):
        load_workload(tmp_path, trace_format="triosm")
    with pytest.raises(InputError, match="did you mean 'chakra'"):
        convert(tmp_path, "chakr", tmp_path / "out")


def test_load_workload_and_load_step_detect_alike(tmp_path, monkeypatch) -> None:
    seen: list[str] = []
    real = registry.trace_format

    def spy(path, name=None):  # type: ignore[no-untyped-def]
        f = real(path, name)
        seen.append(f.name)
        return f

    monkeypatch.setattr(registry, "trace_format", spy)
    trio = _triosim(tmp_path)
    w = load_workload(trio)
    step = load_step(path=trio)
    assert seen == ["triosim", "triosim"]
    # the same ops, times (ns) and order both ways
    prog = w.programs[0]
    assert [prog.names[i] for i in range(len(prog.names))] == [o.name for o in step.ops]
    assert sum(o.ns for o in step.ops) == sum(o.ns for o in STEP_OPS)
    seen.clear()
    with pytest.raises(InputError, match="holds no one-GPU training step"):
        load_step(path=_chakra(tmp_path))
    assert seen == ["chakra"]


def test_written_formats_read_back(tmp_path) -> None:
    trio = _triosim(tmp_path)
    c = convert(trio, "chakra", tmp_path / "et" / "toy")
    assert c.format == "chakra" and c.paths == (str(tmp_path / "et" / "toy.0.et"),)
    assert registry.trace_format(tmp_path / "et" / "toy").name == "chakra"
    back = convert(trio, "triosim", tmp_path / "again")
    assert back.ops == len(STEP_OPS) and registry.trace_format(tmp_path / "again").name == "triosim"
    assert [o.ns for o in load_step(path=tmp_path / "again").ops] == [o.ns for o in STEP_OPS]
    with pytest.raises(InputError, match="does not write"):
        registry.write(load_workload(trio), tmp_path / "x", "simai")


def test_one_gpu_pipeline_in_the_api(tmp_path) -> None:
    trio = _triosim(tmp_path)
    one = simulate(trio, parallel=ParallelSpec("ddp", gpus=1))
    # one GPU runs the step as traced: the sum of its op times, no communication
    assert one.finish_ns == sum(o.ns for o in STEP_OPS)
    assert any(n.startswith("one GPU (the trace): 0.430 ms") for n in one.notes)
    assert [r["layer"] for r in one.info["layers"]] and "layers" not in simulate(trio, cluster="dgx-h100").info
    four = simulate(trio, parallel=ParallelSpec("dp", gpus=4))
    # dp: the gradients' all-reduce after the backward comes on top of the step
    assert four.num_ranks == 4 and four.finish_ns > one.finish_ns
    with pytest.raises(InputError, match="more than its 0.00 GiB"):
        simulate(trio, parallel=ParallelSpec("ddp", gpus=2, gpu_memory_gib=1e-6))


def test_workload_door_on_the_command_line(tmp_path, capsys) -> None:
    trio = _triosim(tmp_path)
    base = ["simulate", "--gpus", "2", "--parallel", "ddp", "--cluster", "dgx-h100"]
    outs = []
    for door in (["--triosim", str(trio)], ["--workload", str(trio), "--format", "triosim"], ["--workload", str(trio)]):
        assert main(base + door + ["--json", str(tmp_path / "r.json")]) == 0
        outs.append(json.loads((tmp_path / "r.json").read_text())["finish_ns"])
        assert "per layer, rank 0" in capsys.readouterr().out
    assert outs[0] == outs[1] == outs[2]
    assert main(["simulate", "--workload", str(trio), "--format", "trisoim", "--cluster", "dgx-h100"]) == 2
    assert "did you mean 'triosim'" in capsys.readouterr().err
    assert main(["simulate", "--triosim", str(trio), "--format", "pytorch"]) == 2
    assert "--format" in capsys.readouterr().err


_TRACE_CLIS = ("simulate", "convert", "inspect", "trace", "example")


def _imports(path: Path, package: str) -> set[str]:
    """The podsim modules ``path`` (a module of ``package``) imports, as dotted names."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out |= {mod} if node.module else {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("podsim")}


def test_front_doors_and_trace_clis_import_what_the_plan_allows() -> None:
    src = Path(__file__).parent.parent / "src" / "podsim"
    for room in ("formats", "capture", "parallelize"):
        for f in (src / room).rglob("*.py"):
            pkg = ".".join(("podsim",) + f.relative_to(src).parent.parts)
            bad = {m for m in _imports(f, pkg) if m.startswith(("podsim.engine", "podsim.api"))}
            assert not bad, f"{f}: a front door imports {bad}"
    for name in _TRACE_CLIS:
        f = src / "cli" / f"{name}.py"
        allowed = ("podsim.api", "podsim.cli", "podsim.report", "podsim.errors")
        bad = {m for m in _imports(f, "podsim.cli") if not m.startswith(allowed)}
        assert not bad, f"{f}: imports {bad}"


def test_sweep_runs_the_one_gpu_pipeline(tmp_path) -> None:
    from podsim.sweep.runs import evaluate

    trio = str(_triosim(tmp_path))
    one = evaluate(("simulate", {"workload-configuration": trio, "parallel": "ddp", "gpus": 1}, {"name": "base"}, None))
    assert one["time_s"] == sum(o.ns for o in STEP_OPS) / 1e9 and one["num_ranks"] == 1
    four = evaluate(
        (
            "simulate",
            {"workload-configuration": trio, "format": "triosim", "parallel": "dp", "gpus": 4},
            {"name": "base"},
            None,
        )
    )
    assert four["num_ranks"] == 4 and four["time_s"] > one["time_s"]
