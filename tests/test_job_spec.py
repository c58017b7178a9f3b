"""Each job parameter is declared once (podsim.params, podsim.jobs): the CLI's flags, the
sweep's parameters, the JSON echo and the docs' tables come from those declarations, so a
flag, a sweep parameter or a documented flag without a field, or a default or choice that
differs between them, fails here."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from podsim.cli import build_parser, main
from podsim.errors import InputError
from podsim.jobs.kinds import DOCS_PAGE, PARAMS_BY_COMMAND
from podsim.jobs.train import TrainJob
from podsim.llm.layout import Layout
from podsim.params import Param, build, cell_text, echo, params_of
from podsim.sweep.runs import RUNS

ROOT = Path(__file__).resolve().parents[1]
#: flags a subcommand has that are actions, not parameters of a job
ACTIONS = {"--help", "-h", "--list", "--list-clusters", "--debug"}


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _flag_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions of ``parser`` and of its own subcommands' parsers (``podsim serve-workload
    generate``'s flags live on ``generate``)."""
    out: list[argparse.Action] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for p in dict.fromkeys(a.choices.values()):
                out += _flag_actions(p)
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("command", sorted(PARAMS_BY_COMMAND))
def test_every_flag_is_a_declared_parameter(command: str) -> None:
    params = [p for p in PARAMS_BY_COMMAND[command] if p.cli]
    declared = {f: p for p in params for f in p.flags}
    actions = _flag_actions(_subparser(command))
    for action in actions:
        for flag in action.option_strings:
            if flag in ACTIONS:
                continue
            assert flag in declared, f"podsim {command} {flag} has no field in the job spec"
            p = declared[flag]
            if p.const is None:
                assert action.default == p.default, f"{flag}: CLI default {action.default!r} != {p.default!r}"
            if p.choices and p.kind != "name":  # a name is checked by its registry, not argparse
                assert tuple(action.choices) == p.choices, flag
    # and every declared spelling is a flag
    spellings = {f for a in actions for f in a.option_strings}
    assert set(declared) <= spellings


@pytest.mark.parametrize("command", sorted(c for c in PARAMS_BY_COMMAND if c in RUNS))
def test_sweep_parameters_are_the_declared_ones(command: str) -> None:
    params = {p.name: p for p in PARAMS_BY_COMMAND[command] if p.sweep}
    run = RUNS[command]
    assert set(run.names) == set(params)
    for p in run.params:
        assert p == params[p.name]  # the same declaration: same kind, default, choices, help
    # the declared aliases are the sweep's; a sweep may keep older spellings, of declared names
    declared = {a: p.name for p in params.values() for a in p.aliases if len(a) > 1 and a.replace("_", "-") != p.name}
    assert declared.items() <= run.aliases.items()
    assert set(run.aliases.values()) <= set(params)


@pytest.mark.parametrize("command", sorted(DOCS_PAGE))
def test_docs_tables_are_generated(command: str) -> None:
    spec = importlib.util.spec_from_file_location("docs_flags", ROOT / "scripts" / "docs_flags.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    text = (ROOT / DOCS_PAGE[command]).read_text()
    assert mod.render(text, command) == text, "run python scripts/docs_flags.py"
    for p in PARAMS_BY_COMMAND[command]:
        assert f"`--{p.name}`" in text or (p.positional or not p.cli) and cell_text(p.help) in text


def test_flag_values_become_field_values() -> None:
    # hand-derived: --no-flash-attention turns flash attention off, --fsdp is ZeRO stage 3,
    # --recompute-modules and --pipeline-layers are lists, an alias sets the same field
    args = build_parser().parse_args(
        [
            "llm",
            "--model",
            "gpt3-1.3b",
            "--gpus",
            "8",
            "--global-batch",
            "16",
            "--no-flash-attention",
            "--fsdp",
            "--recompute",
            "selective",
            "--recompute-modules",
            "core_attn, mlp",
            "--micro-batch-size",
            "2",
            "--pipeline-layers",
            "1,2",
        ]
    )
    job = TrainJob.from_values(vars(args))
    lay = job.layout
    assert (lay.flash_attention, lay.zero, lay.micro_batch) == (False, 3, 2)
    assert lay.recompute_modules == ("core_attn", "mlp") and lay.pipeline_layers == (1, 2)
    assert lay.overlap_grad_reduce and lay.overlap_param_gather  # the negated flags' defaults: on
    assert job.model.model == "gpt3-1.3b" and job.hardware.gpu == "a100-80gb"


def test_defaults_agree_with_a_plain_layout() -> None:
    # a job built from no flags but the required ones is the Layout's own defaults
    job = TrainJob.from_values({"gpus": 8, "global-batch": 4, "seq-len": 2048})
    assert job.layout == Layout(8, global_batch=4)


def test_echo_round_trips() -> None:
    job = TrainJob.from_values(
        {
            "gpus": 16,
            "tp": 2,
            "global-batch": 8,
            "model": "gpt3-1.3b",
            "zero": 3,
            "no-overlap-grad-reduce": True,
            "pipeline-layers": "3,3",
        }
    )
    flat = echo(job)
    assert flat["zero"] == 3 and flat["no-overlap-grad-reduce"] is True and flat["pipeline-layers"] == "3,3"
    assert "json" not in flat and "trace" not in flat  # outputs are not inputs
    assert build(TrainJob, flat) == job


def test_bad_list_item_names_the_flag() -> None:
    with pytest.raises(InputError, match=r"--pipeline-layers takes comma-separated layer counts.*'x'"):
        TrainJob.from_values({"gpus": 8, "pipeline-layers": "1,x"})


def test_a_new_knob_is_one_field() -> None:
    # a dataclass with one declared field gets its flag, with alias, default, choices and help
    @dataclasses.dataclass(frozen=True)
    class Knob:
        mode: str = dataclasses.field(
            default="a",
            metadata={"param": Param("mode", "choice", "a", ("a", "b"), help="the mode", aliases=("old-mode",))},
        )

    parser = argparse.ArgumentParser()
    from podsim.cli.options import add_params

    add_params(parser, params_of(Knob))
    assert build(Knob, vars(parser.parse_args(["--old-mode", "b"]))) == Knob("b")
    assert build(Knob, vars(parser.parse_args([]))) == Knob("a")
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])


def test_llm_json_echoes_its_inputs(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert (
        main(["llm", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--global-batch", "16", "--json", str(out)])
        == 0
    )
    inputs = json.loads(out.read_text())["inputs"]
    assert inputs["tp"] == 2 and inputs["gpus"] == 8 and inputs["global-batch"] == 16
    assert inputs["model"] == "gpt3-1.3b" and inputs["seq-len"] is None


@pytest.mark.parametrize(
    "argv, given",
    [
        (
            ["infer", "--model", "llama2-7b", "--gpu", "h100", "--batch", "4", "--prompt-tokens", "512"],
            {"model": "llama2-7b", "gpu": "h100", "batch": 4, "prompt-tokens": 512, "tp": 1},
        ),
        (
            ["collective", "all_gather", "--cluster", "dgx-h100", "--gpus", "16", "--max-bytes", "1M"],
            {"collective": "all_gather", "cluster": "dgx-h100", "gpus": 16, "backend": "analytical"},
        ),
        (
            ["serve-llm", "--model", "llama2-7b", "--gpu", "h100", "--workload", "poisson:2", "--requests", "20"],
            {"model": "llama2-7b", "gpu": "h100", "workload": "poisson:2", "requests": 20},
        ),
        (
            ["search", "--model", "gpt3-1.3b", "--gpu", "a100", "--gpus", "8", "--global-batch", "16", "--top", "2"],
            {"model": "gpt3-1.3b", "gpu": "a100", "global-batch": 16},
        ),
        (
            ["serve", "-n", "1", "-d", "2", "-c", "16", "-w", "{sx}/workload.csv", "-p", "{sx}/placement.json"],
            {"num-nodes": 1, "num-devices-per-node": 2},
        ),
        (
            ["simulate", "--workload", "{simai}", "--cluster", "dgx-h100", "--gpus", "8"],
            {"cluster": "dgx-h100", "gpus": 8, "backend": "analytical"},
        ),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_every_json_echoes_its_inputs(argv: list[str], given: dict, tmp_path: Path) -> None:
    """The --json of each job kind carries ``inputs``: the flag values the run was given, by
    parameter name, the defaults filled in (as ``podsim llm`` does)."""
    out = tmp_path / "r.json"
    if argv[0] == "serve":  # the serving example's inputs, written by podsim
        assert main(["example", "serving", "--write", str(tmp_path / "sx")]) == 0
        argv = [a.replace("{sx}", str(tmp_path / "sx")) for a in argv]
    if "{simai}" in argv:  # a SimAI workload of podsim's own writing
        wl = tmp_path / "w.txt"
        assert (
            main(
                ["llm", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--global-batch", "16"]
                + ["--simai", str(wl)]
            )
            == 0
        )
        argv = [str(wl) if a == "{simai}" else a for a in argv]
    if argv[0] == "infer":
        argv = [*argv, "--output-tokens", "8"]
    assert main([*argv, "--json", str(out)]) == 0
    inputs = json.loads(out.read_text())["inputs"]
    for k, v in given.items():
        assert inputs[k] == v, k
    assert "json" not in inputs  # outputs are not inputs


def test_a_simulations_json_counts_its_gpus(tmp_path: Path) -> None:
    """One name per concept: the result JSON says ``gpus`` (the 1 MiB all-reduce example runs on
    ASTRA-sim's 8 NPUs), and keeps ``num_ranks`` beside it for the scripts that read it."""
    out = tmp_path / "r.json"
    assert main(["example", "allreduce", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gpus"] == 8 and doc["num_ranks"] == 8
