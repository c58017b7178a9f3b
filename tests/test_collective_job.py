"""podsim collective's job spec (podsim.jobs.collective): the command line's spellings build the
same job, the sweep's one ``size`` times the same collective as the command line's range of one
size, and the sweep refuses a value of the wrong type with the names it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.api.collective import collective, run_job
from podsim.cli import build_parser, main
from podsim.jobs.collective import CollectiveJob
from podsim.sweep.runs import run_collective


def _job(argv: list[str]) -> CollectiveJob:
    return CollectiveJob.from_values(vars(build_parser().parse_args(["collective", *argv])))


def test_short_and_long_flags_build_the_same_job() -> None:
    long = _job(
        [
            "all_gather",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "16",
            "--min-bytes",
            "4K",
            "--max-bytes",
            "16M",
            "--factor",
            "4",
            "--dtype",
            "half",
            "--algo",
            "ring",
            "--proto",
            "LL128",
            "--json",
            "o.json",
        ]
    )
    short = _job(
        [
            "all_gather",
            "--cluster",
            "dgx-h100",
            "-g",
            "16",
            "-b",
            "4K",
            "-e",
            "16M",
            "-f",
            "4",
            "-d",
            "half",
            "--algo",
            "ring",
            "--proto",
            "LL128",
            "--json",
            "o.json",
        ]
    )
    assert long == short
    o = long.options
    assert (o.collective, o.cluster, o.gpus, o.min_bytes, o.max_bytes, o.factor) == (
        "all_gather",
        "dgx-h100",
        16,
        "4K",
        "16M",
        4,
    )
    assert (o.dtype, o.algo, o.proto, o.size, long.outputs.json) == ("half", "ring", "LL128", None, "o.json")
    # nothing given: nccl-tests' defaults (1K to 1G by 2, float, analytical)
    d = _job([]).options
    assert (d.collective, d.cluster, d.gpus, d.min_bytes, d.max_bytes, d.factor, d.dtype, d.backend) == (
        None,
        None,
        None,
        "1K",
        "1G",
        2,
        "float",
        "analytical",
    )


def test_a_sweep_point_times_what_the_command_line_times_for_one_size() -> None:
    one = collective("all_reduce", "dgx-h100", 16, min_bytes=1 << 20, max_bytes=1 << 20, algorithm="tree")
    row = one.rows[0]
    got = run_collective(
        {
            "collective": "all_reduce",
            "cluster": "dgx-h100",
            "gpus": 16,
            "size": "1M",
            "backend": "analytical",
            "dtype": "float",
            "algo": "tree",
            "proto": None,
        },
        {},
        None,
    )
    assert (got["bytes"], got["time_us"], got["busbw_gbps"], got["algorithm"], got["servers"]) == (
        1 << 20,
        row.time_us,
        row.busbw_gbps,
        "tree",
        one.servers,
    )
    # a size given to the job wins over the range
    job = CollectiveJob.from_values(
        {"collective": "all_reduce", "cluster": "dgx-h100", "gpus": 16, "size": 1 << 20, "algo": "tree"}
    )
    assert [r.time_us for r in run_job(job).rows] == [row.time_us]


def test_missing_inputs_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collective", "all_reduce", "--gpus", "8"]) == 2
    assert "missing --cluster" in capsys.readouterr().err


def test_sweep_refuses_a_number_where_a_name_goes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("run: collective\nfixed: {collective: all_reduce, cluster: dgx-h100, gpus: 8, size: 1M, algo: 5}\n")
    assert main(["sweep", str(spec), "--store", str(tmp_path / "s.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "fixed.algo: expected one of ring, tree," in err and "got 5" in err
