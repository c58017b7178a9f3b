"""The serving schedulers and routers as registries: lookups by name and alias, closest-name
errors, ``rr`` and ``round-robin`` as one scheduler, every CLI and sweep choice a registered
name, and a scheduler added without touching the simulation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from podsim.api.jobs import SERVE_PARAMS
from podsim.api.serve import ServeJob, serve
from podsim.cli import build_parser, main
from podsim.errors import InputError
from podsim.hardware.gpu import get_gpu
from podsim.report.serving import format_serve_summary, summarize
from podsim.serving import ServeWorkload, load_profiles, read_placement, simulate_serving
from podsim.serving.llm.router import ROUTERS, make_router
from podsim.serving.llm.schedulers import SCHEDULERS as LLM_SCHEDULERS
from podsim.serving.llm.schedulers import make_scheduler, scheduler_class
from podsim.serving.placement import ServeCluster
from podsim.serving.schedulers import SCHEDULERS, RoundRobinReplica
from podsim.sweep.runs import RUNS
from podsim.sweep.serving_search import CHUNKED

EXES = load_profiles()
CLUSTER = ServeCluster(1, 4, 16 * 10**9)


def _placement(tmp_path: Path) -> object:
    """Service a on GPUs 0 and 1, service b on GPUs 2 and 3 (Bert_125M, 18.93 ms a request)."""
    entry = {"model_name": "Bert_125M", "executable_name": "Bert_125M_1_device"}
    data = [
        dict(entry, service_name=s, mesh_group=[{"node_ids": [0], "devices": [[g]]}])
        for s, g in (("a", 0), ("a", 1), ("b", 2), ("b", 3))
    ]
    p = tmp_path / "placement.json"
    p.write_text(json.dumps(data))
    return read_placement(p)


def _workload(models: list[int], gap_s: float = 0.001) -> ServeWorkload:
    return ServeWorkload(models, [i * gap_s for i in range(len(models))], 2, 1.0, [0.5, 0.5], 10.0, [1.0, 1.0], "w")


def test_dlsim_schedulers_by_name_and_alias() -> None:
    assert SCHEDULERS.names() == ("fifo", "round-robin", "least-outstanding")
    assert SCHEDULERS.canonical("rr") == "round-robin" and SCHEDULERS.get("rr") is RoundRobinReplica
    assert SCHEDULERS.aliases("round-robin") == ("rr",)
    for name, cls in SCHEDULERS.items():
        assert cls.name == name and isinstance(cls.help, str)
    with pytest.raises(InputError, match="did you mean 'round-robin'"):
        SCHEDULERS.get("round-robn")


def test_rr_is_round_robin(tmp_path: Path) -> None:
    pl = _placement(tmp_path)
    w = _workload([0, 1, 0, 0, 1, 1, 0])
    rr = simulate_serving(w, pl, EXES, CLUSTER, scheduler="rr")
    canon = simulate_serving(w, pl, EXES, CLUSTER, scheduler="round-robin")
    # each model takes its own service's replicas in turn: model 0 entries 0, 1, 0, 1; model 1 2, 3, 2
    assert rr.executor_of == [0, 2, 1, 0, 3, 2, 1]
    assert (rr.finish_ns, rr.slices, rr.executor_of) == (canon.finish_ns, canon.slices, canon.executor_of)
    # the output echoes the name as asked for: what scripts written against rr read
    assert summarize(rr)["scheduler"] == "rr" and summarize(canon)["scheduler"] == "round-robin"
    assert "(rr scheduler)" in format_serve_summary(summarize(rr))


def test_unknown_scheduler_names_the_closest(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="did you mean 'least-outstanding'") as e:
        simulate_serving(_workload([0]), _placement(tmp_path), EXES, CLUSTER, scheduler="least-outstandng")
    assert "'least-outstandng'" in str(e.value) and "--scheduler" in str(e.value)


def test_cli_and_sweep_take_both_spellings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pl = _placement(tmp_path)
    w = tmp_path / "w.csv"
    w.write_text("model_id,arrival_s\n0,0.0\n1,0.001\n0,0.002\n0,0.003\n")
    docs = {}
    for name in ("rr", "round-robin"):
        out = tmp_path / f"{name}.json"
        assert (
            main(
                [
                    "serve",
                    "-w",
                    str(w),
                    "-p",
                    pl.source,
                    "-d",
                    "4",
                    "--slos",
                    "1",  # type: ignore[attr-defined]
                    "--scheduler",
                    name,
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        docs[name] = json.loads(out.read_text())
    assert [r["executor"] for r in docs["rr"]["requests"]] == [0, 2, 1, 0]
    assert docs["rr"]["requests"] == docs["round-robin"]["requests"]
    assert (docs["rr"]["scheduler"], docs["round-robin"]["scheduler"]) == ("rr", "round-robin")
    capsys.readouterr()
    assert main(["serve", "-w", str(w), "-p", pl.source, "--scheduler", "robin"]) == 2  # type: ignore[attr-defined]
    assert "unknown scheduler 'robin'; did you mean" in capsys.readouterr().err
    # the sweep's spec accepts both (a YAML value is checked against the registry's spellings)
    p = {p.name: p for p in RUNS["serve"].params}["scheduler"]
    assert set(p.choices) == set(SCHEDULERS.spellings()) and p.default == "fifo"


def test_api_serve_is_the_simulation(tmp_path: Path) -> None:
    pl = _placement(tmp_path)
    w = _workload([0, 1, 0, 0])
    direct = simulate_serving(w, pl, EXES, ServeCluster(1, 4, 16 * 10**9), scheduler="least-outstanding")
    job = ServeJob(placement=pl, workload=w, gpus_per_node=4, scheduler="least-outstanding")  # type: ignore[arg-type]
    via = serve(job)
    assert (via.finish_ns, via.executor_of, via.slices) == (direct.finish_ns, direct.executor_of, direct.slices)
    # overriding the SLOs leaves the caller's workload as it was
    tight = serve(ServeJob(placement=pl, workload=w, gpus_per_node=4, slos_s=(0.001,)))  # type: ignore[arg-type]
    assert w.slos_s == [1.0, 1.0] and tight.workload.slos_s == [0.001, 0.001]
    assert summarize(tight)["slo_attainment"] == 0.0
    with pytest.raises(InputError, match="one of them"):
        serve(ServeJob(placement=pl))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="need --duration"):
        serve(ServeJob(placement=pl, closed_loop=(1, 1)))  # type: ignore[arg-type]


def test_a_new_scheduler_is_one_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Last:
        name = "last"
        aliases = ()
        help = "the last replica"

        def choose(self, model: int, replicas: list[int], view: object) -> int:
            return replicas[-1]

    monkeypatch.setitem(SCHEDULERS._entries, "last", Last)  # as the scheduler decorator would register it
    r = simulate_serving(_workload([0, 1, 0]), _placement(tmp_path), EXES, CLUSTER, scheduler="last")
    assert r.executor_of == [1, 3, 1]


def test_llm_schedulers_and_routers_by_name() -> None:
    assert LLM_SCHEDULERS.names() == ("vllm", "vllm-v0", "sarathi", "orca", "static", "lightllm")
    assert ROUTERS.names() == ("round-robin", "least-outstanding", "jsq", "kv-aware")
    # one name per concept: serve's rr is serve-llm's round-robin, and both spellings work in both
    assert ROUTERS.canonical("rr") == "round-robin" == SCHEDULERS.canonical("rr")
    assert make_router("RR").name == "round-robin" and make_scheduler(" Sarathi ").name == "sarathi"
    for name, cls in LLM_SCHEDULERS.items():
        assert cls.name == name and make_scheduler(name).name == name
    for name, cls in ROUTERS.items():
        assert cls.name == name and make_router(name).name == name
    with pytest.raises(InputError, match="did you mean 'sarathi'"):
        make_scheduler("sarathy")
    with pytest.raises(InputError, match="did you mean 'kv-aware'"):
        make_router("kv-awar")


def test_llm_schedulers_declare_their_defaults() -> None:
    h100, a100 = get_gpu("h100"), get_gpu("a100")
    # vllm serve: 8192 tokens and 1024 sequences on GPUs of 70 GiB or more other than the A100
    assert scheduler_class("vllm").default_limits(h100, 4096) == (8192, 1024)
    assert scheduler_class("vllm").default_limits(a100, 4096) == (2048, 256)
    # vLLM V0 without chunked prefill: max(context, 2048) tokens, 256 sequences
    assert scheduler_class("vllm-v0").default_limits(h100, 4096) == (4096, 256)
    assert all(scheduler_class(n).default_limits(h100, 4096) is None for n in ("sarathi", "orca", "static", "lightllm"))
    # sarathi's budget is its chunk size, else the token budget, else 512
    assert make_scheduler("sarathi", chunk_size=64, max_batched_tokens=100).max_batched_tokens == 64
    assert make_scheduler("sarathi", max_batched_tokens=100).max_batched_tokens == 100
    assert make_scheduler("sarathi").max_batched_tokens == 512
    # what a serving search varies: the schedulers that declare the flag of their step budget
    assert CHUNKED == ("vllm", "sarathi")
    assert [scheduler_class(n).chunk_flag for n in CHUNKED] == ["max-batched-tokens", "chunk-size"]


def _choices(parser: argparse.ArgumentParser, command: str) -> dict[str, object]:
    """``--flag`` -> its choices (None for a free value) of a subcommand."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a.choices for a in sub.choices[command]._actions for o in a.option_strings}


def test_every_cli_and_sweep_choice_is_registered() -> None:
    parser = build_parser()
    registries = {
        ("serve", "--scheduler"): SCHEDULERS,
        ("serve-llm", "--scheduler"): LLM_SCHEDULERS,
        ("serve-llm", "--router"): ROUTERS,
        ("search", "--router"): ROUTERS,
    }
    for (command, flag), reg in registries.items():
        for name in _choices(parser, command)[flag] or ():  # type: ignore[union-attr]
            assert name in reg, (command, flag, name)
    # serve's --scheduler is generated from its declared parameter, which offers every spelling; the
    # registry checks a name given (its error names the closest), so argparse holds no choices of its own
    declared = {p.name: p for p in SERVE_PARAMS}["scheduler"]
    assert set(declared.choices) == set(SCHEDULERS.spellings()) and _choices(parser, "serve")["--scheduler"] is None
    sweep = {
        ("serve", "scheduler"): SCHEDULERS,
        ("serve-llm", "scheduler"): LLM_SCHEDULERS,
        ("serve-llm", "router"): ROUTERS,
    }
    for (run, name), reg in sweep.items():
        p = {p.name: p for p in RUNS[run].params}[name]
        assert p.choices and all(c in reg for c in p.choices), (run, name)
        assert set(reg.names()) <= set(p.choices), (run, name)
        assert p.default in reg.names()


def test_cli_serve_sits_on_the_api() -> None:
    # podsim serve parses, calls podsim.api.serve and prints a report/ formatter: nothing below
    import ast

    import podsim.cli.serve as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0}
    allowed = ("api", "report", "errors")
    assert all(m is None or m.split(".")[0] in allowed or m == "options" for m in modules), modules
