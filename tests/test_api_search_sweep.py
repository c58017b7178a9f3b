"""The API calls behind podsim search, sweep, kernels, validate and fabric: the job's defaults
are the command line's, the API refuses what the command line refuses, and what it returns is
what the command line prints and writes."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path

import pytest

from podsim.api import SearchJob, collective, fabric, sweep, validate
from podsim.api.jobs import SearchCommand
from podsim.api.search import SERVING_ONLY, TRAINING_ONLY, check_kind
from podsim.api.sweep import example_spec, sweep_examples, write_example
from podsim.cli import build_parser, main
from podsim.errors import InputError
from podsim.report.fabric import format_fabric
from podsim.report.sweep import cell, format_sweep, sweep_csv
from podsim.report.validate import format_validation


def test_a_search_jobs_defaults_are_the_flags_defaults() -> None:
    args = build_parser().parse_args(["search", "--model", "m", "--gpus", "1"])
    job = SearchCommand.from_values(vars(args)).job  # the flags' values as the job's fields hold them
    for f in fields(SearchJob):
        if f.name in ("gpus", "model"):
            continue
        assert getattr(job, f.name) == f.default, f.name
    # every option only one kind of search takes is a field of the job
    assert set(TRAINING_ONLY) | set(SERVING_ONLY) <= {f.name for f in fields(SearchJob)}


def test_a_search_refuses_the_other_kinds_options() -> None:
    with pytest.raises(InputError, match="--vpp-values, --store are for a training search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", workload="poisson:2", vpp_values=(1,), store="x.db"))
    with pytest.raises(InputError, match="--report is for a training search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", workload="poisson:2"), ["--report"])
    with pytest.raises(InputError, match="--slo-ttft is for a serving search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", global_batch=8, slo_ttft=1.0))
    with pytest.raises(InputError, match="needs --global-batch"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b"))
    check_kind(SearchJob(gpus=(8,), model="llama3-8b", global_batch=8))  # a whole training search


def test_the_built_in_sweep_through_the_api(tmp_path: Path) -> None:
    spec = example_spec("collective")
    res = sweep(spec, workers=1)
    sizes = spec.grid["size"]
    assert res.points == len(sizes) and len(res.rows) == len(sizes) * len(spec.whatifs)
    assert res.evaluated == len(res.rows) and res.reused == 0 and res.failed == 0 and res.store is None
    # the baseline rows are podsim collective's own rows (the sweep adds nothing of its own)
    base = {r["size"]: r for r in res.rows if r["what_if"] == "baseline"}
    for size in sizes:
        row = collective("all_reduce", "dgx-h100", 16, min_bytes=size, max_bytes=size, algorithm="ring").rows[0]
        assert base[size]["bytes"] == row.bytes and base[size]["busbw_gbps"] == pytest.approx(row.busbw_gbps)
    # the JSON document and the CSV hold the same rows
    doc = res.to_dict()
    assert doc["runs"] == len(res.rows) and doc["columns"] == res.columns and doc["rows"] == res.rows
    table = list(csv.DictReader(sweep_csv(res).splitlines()))
    assert [r["key"] for r in table] == [r["key"] for r in res.rows]
    assert format_sweep(res).startswith(f"podsim sweep: {spec.name} (collective, {len(sizes)} points x 4 what-ifs")
    # the command line prints and writes the same
    out = tmp_path / "c.json"
    assert main(["sweep", "--example", "collective", "--workers", "1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"] == res.rows


def test_built_in_specs_are_listed_and_written(tmp_path: Path) -> None:
    assert {"collective", "llm", "serve-llm"} <= set(sweep_examples())
    write_example("llm", tmp_path / "llm.yaml")
    assert (tmp_path / "llm.yaml").read_text().count("run: llm") == 1
    with pytest.raises(InputError, match="unknown example 'lm'"):
        example_spec("lm")


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "-"),
        (True, "yes"),
        (1234567, "1,234,567"),
        (2048.4, "2,048"),
        (0.0, "0"),
        (1.2e-5, "1.200e-05"),
        (12.3456, "12.35"),
        (0.5, "0.5000"),
        ("ring", "ring"),
    ],
)
def test_a_sweep_cell(value: object, text: str) -> None:
    assert cell(value) == text


def test_a_fabric_through_the_api() -> None:
    fab = fabric("dgx-h100", 16)
    assert (fab.num_gpus, fab.num_servers, fab.gpus_per_node) == (16, 2, 8)
    assert format_fabric(fab).splitlines()[0] == f"fabric {fab.name}: 16 GPUs in 2 servers of 8"


def test_validate_through_the_api() -> None:
    v = validate(only="korthikanti_fig1", sets=("fitted",), jobs=1)
    assert v.checks and all(c.row_id.startswith("korthikanti_fig1") and c.set == "fitted" for c in v.checks)
    doc = v.to_dict()
    assert [r["row_id"] for r in doc["rows"]] == [c.row_id for c in v.checks] and doc["skipped"] == v.skipped
    assert f"{len(v.checks)} rows compared" in format_validation(v)
