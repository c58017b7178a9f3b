"""podsim simulate's job spec: the command line and the sweep build the same SimulateJob and
give what podsim.api.simulate gives for the same inputs, ASTRA-sim's flags included."""

import argparse
import contextlib
import io

import pytest

from podsim.api.simulate import simulate
from podsim.cli import build_parser, main
from podsim.errors import InputError
from podsim.examples import write_example
from podsim.jobs.simulate import SIMULATE_PARAMS, SimulateJob, truth
from podsim.params import Param, add_arguments, build
from podsim.sweep.runs import RUNS, evaluate


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def test_a_bool_with_a_parse_takes_a_value() -> None:
    p = Param("rendezvous-protocol", "bool", False, metavar="BOOL", parse=truth, field="on")
    parser = argparse.ArgumentParser()
    add_arguments(parser, [p], {})
    assert vars(parser.parse_args([])) == {"rendezvous_protocol": False}
    values = vars(parser.parse_args(["--rendezvous-protocol", "TRUE"]))
    assert build(SimulateJob, values).machine.rendezvous is True
    assert build(SimulateJob, {"rendezvous-protocol": "0"}).machine.rendezvous is False
    assert build(SimulateJob, {"rendezvous-protocol": True}).machine.rendezvous is True  # a sweep's YAML bool
    with pytest.raises(InputError, match="expected true or false"):
        build(SimulateJob, {"rendezvous-protocol": "maybe"})


def test_hidden_flags_are_accepted_and_not_shown() -> None:
    hidden = {p.name for p in SIMULATE_PARAMS if p.hidden}
    assert hidden == {"compute-scale", "logging-configuration", "logging-folder"}
    parser = _subparser("simulate")
    shown = parser.format_help()
    assert all(f"--{name}" not in shown for name in hidden)
    args = parser.parse_args(["--logging-folder", "log", "--logging-configuration", "x.json", "--compute-scale", "2"])
    job = SimulateJob.from_values(vars(args))
    assert (job.machine.logging_folder, job.machine.compute_scale) == ("log", 2.0)
    assert not {p.name for p in RUNS["simulate"].params} & hidden  # no sweep parameters


def test_cli_sweep_and_api_agree_on_astra_sim_options(tmp_path) -> None:
    ex = write_example("allreduce", tmp_path / "ex")
    direct = simulate(
        ex["workload"],
        ex["system"],
        ex["network"],
        num_queues_per_dim=2,
        injection_scale=3.0,
        rendezvous=True,
        record_timeline=False,
    )
    plain = simulate(ex["workload"], ex["system"], ex["network"], record_timeline=False)
    assert direct.finish_ns != plain.finish_ns  # the options matter here
    point = {
        "workload-configuration": ex["workload"],
        "system-configuration": ex["system"],
        "network-configuration": ex["network"],
        "num-queues-per-dim": 2,
        "injection-scale": 3.0,
        "rendezvous-protocol": True,
    }
    swept = evaluate(("simulate", point, {"name": "baseline"}, None))
    assert swept["time_s"] == direct.finish_ns / 1e9 and swept["num_ranks"] == direct.num_ranks
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "simulate",
                f"--workload-configuration={ex['workload']}",
                f"--system-configuration={ex['system']}",
                f"--network-configuration={ex['network']}",
                "--num-queues-per-dim=2",
                "--injection-scale=3",
                "--rendezvous-protocol=true",
                "--json",
                str(tmp_path / "r.json"),
            ]
        )
    assert code == 0
    assert f'"finish_ns": {direct.finish_ns},' in (tmp_path / "r.json").read_text()
