"""podsim sweep (issue #15): a spec's points and what-ifs, the table against podsim's API run
directly and hand-derived figures, a sweep killed with SIGKILL and resumed, and bad specs
(one line, exit 2, the closest name)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from podsim.api import collective
from podsim.cli import main
from podsim.sweep.spec import load_spec, spec_from_text
from podsim.sweep.sweep import run_sweep
from podsim.sweep.whatif import apply_cluster

duckdb = pytest.importorskip("duckdb")


def _spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- (a) the table against the API and against hand-derived figures -------------------------------

COLLECTIVE_SPEC = """\
run: collective
fixed: {collective: all_reduce, cluster: dgx-h100, algo: ring}
grid: {gpus: [8, 16], size: [1M, 64M, 4G]}
"""


def test_collective_rows_are_what_the_api_gives(tmp_path: Path) -> None:
    res = run_sweep(load_spec(_spec(tmp_path, COLLECTIVE_SPEC)), workers=2)
    assert len(res.rows) == 6 and res.evaluated == 6 and res.failed == 0
    sizes = {"1M": 1 << 20, "64M": 64 << 20, "4G": 4 << 30}
    for r in res.rows:
        n = sizes[r["size"]]
        t = collective("all_reduce", "dgx-h100", r["gpus"], min_bytes=n, max_bytes=n, algorithm="ring")
        direct = t.rows[0]
        assert r["bytes"] == n and r["servers"] == r["gpus"] // 8
        assert (r["time_us"], r["busbw_gbps"], r["algorithm"]) == (direct.time_us, direct.busbw_gbps, "ring")
        # nccl-tests' definitions, by hand: algbw = bytes / time; busbw = algbw x 2(n-1)/n
        assert r["algbw_gbps"] == pytest.approx(n / (r["time_us"] * 1e-6) / 1e9, rel=1e-9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (r["gpus"] - 1) / r["gpus"], rel=1e-9)


def test_nic_what_ifs_move_a_nic_bound_ring_by_hand(tmp_path: Path) -> None:
    # one GPU per server: every ring hop crosses a NIC.  A DGX H100 NIC is 400 Gbps = 50 GB/s,
    # and the preset's NCCL link efficiency over a NIC is 0.94 (dgx-h100.yaml), so a large
    # ring all-reduce's bus bandwidth is 0.94 x 50 = 47 GB/s, 23.5 at half and 94 at twice the
    # NIC speed, and its time 2(n-1)/n x S / busbw.
    spec = load_spec(
        _spec(
            tmp_path,
            """\
run: collective
fixed: {collective: all_reduce, cluster: dgx-h100, gpus: 4, algo: ring, size: 4G}
what-if:
  - {name: one GPU a server, cluster: {gpus_per_node: 1}}
  - {name: half NIC, cluster: {gpus_per_node: 1, nic_bandwidth_scale: 0.5}}
  - {name: 2x NIC, cluster: {gpus_per_node: 1, inter_node: {nic_bandwidth: 800 Gbps}}}
""",
        )
    )
    res = run_sweep(spec, workers=1)
    by = {r["what_if"]: r for r in res.rows}
    size = 4 << 30
    for name, nic_gbs in (("one GPU a server", 50), ("half NIC", 25), ("2x NIC", 100)):
        r = by[name]
        assert r["servers"] == 4
        assert r["busbw_gbps"] == pytest.approx(0.94 * nic_gbs, rel=0.01)
        assert r["time_us"] * 1e-6 == pytest.approx(2 * 3 / 4 * size / (0.94 * nic_gbs * 1e9), rel=0.01)
    assert by["half NIC"]["time_us"] / by["one GPU a server"]["time_us"] == pytest.approx(2, rel=0.01)


def test_gpu_peak_what_if_on_an_llm_step(tmp_path: Path) -> None:
    spec = load_spec(
        _spec(
            tmp_path,
            """\
run: llm
fixed: {model: llama3-8b, gpu: h100, gpus: 8, tp: 2, sequence_parallel: true, global_batch: 64, seq_len: 4096}
what-if:
  - {name: baseline}
  - {name: 2x peak, gpu: {peak_scale: 2}}
  - {name: fp8 peak only, gpu: {peak_tflops: {fp8: 4000}}}
""",
        )
    )
    base, fast, fp8 = run_sweep(spec, workers=1).rows
    # the same FLOPs: compute can at most halve (memory-bound kernels and launches do not
    # shrink), the exposed communication is untouched, and the step is faster
    assert fast["compute_s"] < base["compute_s"] and fast["compute_s"] >= base["compute_s"] / 2
    assert base["iteration_time_s"] - base["compute_s"] / 2 <= fast["iteration_time_s"] < base["iteration_time_s"]
    assert fast["exposed_comm_s"] == pytest.approx(base["exposed_comm_s"], rel=0.02)
    # GEMMs and attention dominate an 8B step at 4k tokens: well over half of the compute halves
    assert fast["compute_s"] < 0.75 * base["compute_s"]
    # MFU is over the what-if's peak: H100 bf16 989.4 TFLOP/s (gpus.yaml) doubled
    assert fast["mfu"] == pytest.approx(fast["model_tflops_per_gpu"] / (2 * 989.4), rel=1e-3)
    assert base["mfu"] == pytest.approx(base["model_tflops_per_gpu"] / 989.4, rel=1e-3)
    # a bf16 run does not use the fp8 peak
    assert fp8["iteration_time_s"] == base["iteration_time_s"]


def test_runtime_refusals_are_rows_and_the_sweep_goes_on(tmp_path: Path) -> None:
    spec = load_spec(
        _spec(
            tmp_path,
            """\
run: llm
fixed: {model: llama3-8b, gpu: h100, gpus: 8, global-batch: 16, seq-len: 2048}
grid: {tp: [3, 2]}
""",
        )
    )
    bad, good = run_sweep(spec, workers=1).rows
    assert bad["error"] and "tp" in bad["error"].lower() and bad["iteration_time_s"] is None
    assert good["error"] is None and good["iteration_time_s"] > 0


def test_simulate_and_serve_rows_are_what_the_api_gives(tmp_path: Path) -> None:
    from importlib import resources

    from podsim.api import simulate
    from podsim.examples import write_example
    from podsim.serving import load_profiles, read_placement, simulate_serving
    from podsim.serving.placement import serve_cluster
    from podsim.serving.stats import summarize
    from podsim.serving.workload import read_any_workload

    chakra = write_example("cluster", tmp_path / "c")["workload"]  # a 64 MiB all-reduce on 16 GPUs
    # the half-NIC what-if by hand: the preset's file with its 200 Gbps NICs written as 100 Gbps
    preset = (resources.files("podsim.hardware") / "presets" / "dgx-a100-superpod.yaml").read_text()
    assert "nic_bandwidth: 200 Gbps" in preset
    (tmp_path / "half.yaml").write_text(preset.replace("nic_bandwidth: 200 Gbps", "nic_bandwidth: 100 Gbps"))
    spec = load_spec(
        _spec(
            tmp_path,
            f"""\
run: simulate
fixed: {{workload-configuration: {chakra}, cluster: dgx-a100-superpod}}
grid: {{backend: [analytical, flow]}}
what-if: [{{name: baseline}}, {{name: half NIC, cluster: {{nic_bandwidth_scale: 0.5}}}}]
""",
        )
    )
    rows = run_sweep(spec, workers=1).rows
    for r in rows:
        cluster = "dgx-a100-superpod" if r["what_if"] == "baseline" else str(tmp_path / "half.yaml")
        direct = simulate(chakra, cluster=cluster, backend=r["backend"], record_timeline=False)
        assert (r["time_s"], r["num_ranks"]) == (direct.finish_ns / 1e9, 16), r
    assert rows[1]["time_s"] > rows[0]["time_s"]

    files = write_example("serving", tmp_path / "s")
    spec = load_spec(
        _spec(
            tmp_path,
            f"""\
run: serve
fixed: {{workload: {files["workload"]}, placement: {files["placement"]}, num-nodes: 1, num_devices_per_node: 2,
        memory-capacity: 16}}
grid: {{scheduler: [fifo, rr]}}
what-if: [{{name: baseline}}, {{name: 4 GiB GPUs, gpu: {{memory_gib: 4}}}}]
""",
            "serve.yaml",
        )
    )
    rows = run_sweep(spec, workers=1).rows
    assert [(r["scheduler"], r["what_if"]) for r in rows] == [
        ("fifo", "baseline"),
        ("fifo", "4 GiB GPUs"),
        ("rr", "baseline"),
        ("rr", "4 GiB GPUs"),
    ]
    for r in rows[0::2]:
        placement = read_placement(files["placement"])
        doc = summarize(
            simulate_serving(
                read_any_workload(files["workload"]),
                placement,
                load_profiles(None),
                serve_cluster(placement, None, 1, 2, 16),
                scheduler=r["scheduler"],
            )
        )
        assert r["error"] is None and r["throughput_rps"] == doc["throughput_rps"]
        assert (r["latency_p99_s"], r["num_requests"]) == (doc["latency_p99_s"], doc["num_requests"])
    for r in rows[1::2]:  # two 2.6 GB models do not fit in a 4 GiB (4.29 GB) GPU
        assert r["error"] and "4.29 GB" in r["error"] and r["throughput_rps"] is None


# -- (b) the points: the product, the list, both ------------------------------------------------


def test_grid_points_and_what_ifs_expand_as_documented() -> None:
    head = "run: llm\nfixed: {model: llama3-8b, gpus: 16, global-batch: 32}\n"
    grid = spec_from_text(head + "grid: {tp: [1, 2, 4], pp: [1, 2]}\n", "t", None)
    assert len(grid.expand()) == 3 * 2
    assert [(p.params["tp"], p.params["pp"]) for p in grid.expand()] == [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2)]
    listed = spec_from_text(head + "points: [{tp: 8, pp: 2}, {tp: 4}, {tp: 8, pp: 2}]\n", "t", None)
    assert [p.params.get("pp") for p in listed.expand()] == [2, None]  # the same point once
    both = spec_from_text(
        head + "grid: {seq-len: [1024, 2048]}\npoints: [{tp: 8}, {tp: 4, cp: 2}]\n"
        "what-if: [{name: a}, {name: b, gpu: {peak_scale: 2}}]\n",
        "t",
        None,
    )
    pts = both.expand()
    assert len(pts) == 2 * 2 * 2
    assert pts[0].params == {"model": "llama3-8b", "gpus": 16, "global-batch": 32, "seq-len": 1024, "tp": 8}
    assert [p.whatif["name"] for p in pts[:2]] == ["a", "b"] and len({p.key for p in pts}) == 8
    assert both.swept == ["seq-len", "tp", "cp"]
    # a default given explicitly is the same point (and key) as one left out
    same = spec_from_text(head + "points: [{tp: 1}, {}]\n", "t", None)
    assert len(same.expand()) == 1


def test_parameters_are_the_subcommands_flags() -> None:
    from podsim.cli import build_parser
    from podsim.sweep.runs import RUNS

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    sweep_only = {("collective", "collective"), ("collective", "size")}  # NAME and one size of -b/-e
    for name, run in RUNS.items():
        flags = {o.lstrip("-") for a in sub.choices[name]._actions for o in a.option_strings}
        for p in run.params:
            assert p.name in flags or (name, p.name) in sweep_only, (name, p.name)


# -- (c) a sweep killed halfway resumes ---------------------------------------------------------

SLOW_SPEC = """\
name: resume
run: llm
fixed: {model: llama3-8b, gpu: h100, global-batch: 128, seq-len: 2048, backend: flow}
grid: {gpus: [16, 32], tp: [1, 2, 4, 8], pp: [1, 2]}
what-if: [{name: baseline}, {name: half NIC, cluster: {nic_bandwidth_scale: 0.5}}]
"""


def test_a_killed_sweep_resumes_without_evaluating_a_point_twice(tmp_path: Path) -> None:
    spec_path = _spec(tmp_path, SLOW_SPEC)
    store = tmp_path / "s.duckdb"
    total = len(load_spec(spec_path).expand())
    assert total == 32
    cmd = [sys.executable, "-m", "podsim", "sweep", str(spec_path), "--store", str(store), "--workers", "1"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=dict(os.environ)
    )
    seen = 0
    assert proc.stderr is not None
    for line in proc.stderr:  # the progress lines: "evaluated 12/32 points [...] 9.1/s, 3 s left"
        m = re.search(r"evaluated (\d+)/(\d+) points", line)
        if m and int(m.group(1)) * 3 >= total:
            seen = int(m.group(1))
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL and total / 3 <= seen < total, (proc.returncode, seen)
    with duckdb.connect(str(store)) as db:
        kept = db.execute("select count(*) from sweep").fetchone()[0]
    assert seen <= kept < total  # every point reported done was committed; at most one more

    again = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert again.returncode == 0, again.stderr
    m = re.search(r"(\d+) evaluated, (\d+) taken from", again.stdout)
    assert m and (int(m.group(1)), int(m.group(2))) == (total - kept, kept), again.stdout

    clean = run_sweep(load_spec(spec_path), workers=2)  # no store: every point evaluated
    metrics = [m for m in clean.spec.run.metrics]
    with duckdb.connect(str(store)) as db:
        keys = [k for (k,) in db.execute("select key from sweep").fetchall()]
        rows = {r[0]: r[1:] for r in db.execute(f"select key, {', '.join(metrics)} from sweep").fetchall()}
    assert len(keys) == len(set(keys)) == total
    assert set(keys) == {r["key"] for r in clean.rows}
    for r in clean.rows:
        assert rows[r["key"]] == tuple(r[m] for m in metrics), r["key"]
    # and a third run evaluates nothing
    third = run_sweep(load_spec(spec_path), str(store), workers=1)
    assert (third.evaluated, third.reused) == (0, total)
    assert [r["key"] for r in third.rows] == [r["key"] for r in clean.rows]


def test_the_store_loads_as_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, COLLECTIVE_SPEC)
    store = tmp_path / "c.duckdb"
    out_json, out_csv = tmp_path / "t.json", tmp_path / "t.csv"
    assert (
        main(
            [
                "sweep",
                str(spec),
                "--store",
                str(store),
                "--workers",
                "1",
                "--json",
                str(out_json),
                "--csv",
                str(out_csv),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "6 evaluated, 0 taken from" in printed and "busbw_gbps" in printed and "time_us" in printed
    with duckdb.connect(str(store)) as db:
        types = dict(db.execute("select column_name, column_type from (describe sweep)").fetchall())
        got = db.execute("select gpus, size, busbw_gbps, row from sweep order by gpus, bytes").fetchall()
    assert types["gpus"] == "BIGINT" and types["busbw_gbps"] == "DOUBLE" and types["size"] == "VARCHAR"
    assert [(g, s) for g, s, *_ in got] == [(8, "1M"), (8, "64M"), (8, "4G"), (16, "1M"), (16, "64M"), (16, "4G")]
    assert all(json.loads(row)["busbw_gbps"] == bw for *_, bw, row in got)
    doc = json.loads(out_json.read_text())
    assert doc["evaluated"] == 6 and len(doc["rows"]) == 6 and "busbw_gbps" in doc["columns"]
    lines = out_csv.read_text().splitlines()
    assert lines[0].split(",")[:4] == ["key", "sweep", "run", "what_if"] and len(lines) == 7


def test_the_built_in_example_and_its_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "--example", "collective", "--write", "c.yaml"]) == 0
    out = capsys.readouterr().out
    assert "half NIC" in out and "16 runs" in out
    assert load_spec(tmp_path / "c.yaml").name == "allreduce-what-if"
    assert main(["sweep", "--list"]) == 0 and "llm" in capsys.readouterr().out


# -- (d) bad input --------------------------------------------------------------------------------

BAD = {
    "unknown parameter": (
        "run: llm\nfixed: {model: llama3-8b, gpus: 8, global-batch: 8}\ngrid: {tpp: [1, 2]}\n",
        "grid.tpp: unknown parameter 'tpp' for run: llm; did you mean 'tp'?",
    ),
    "unknown run": (
        "run: colective\nfixed: {gpus: 8}\n",
        "run: unknown run kind 'colective'; did you mean 'collective'?",
    ),
    "unknown what-if field": (
        (
            "run: collective\nfixed: {collective: all_reduce, cluster: dgx-h100, gpus: 16, size: 1M}\n"
            "what-if: [{name: x, cluster: {nic_bandwith_scale: 0.5}}]\n"
        ),
        (
            "what-if[0].cluster.nic_bandwith_scale: unknown cluster what-if field 'nic_bandwith_scale'; did you mean "
            "'nic_bandwidth_scale'?"
        ),
    ),
    "unknown cluster field": (
        (
            "run: collective\nfixed: {collective: all_reduce, cluster: dgx-h100, gpus: 16, size: 1M}\n"
            "what-if: [{name: x, cluster: {inter_node: {nic_bandwith: 100 Gbps}}}]\n"
        ),
        "what-if[0] (x): inter_node.nic_bandwith: unknown key 'nic_bandwith'; did you mean 'nic_bandwidth'?",
    ),
    "what-if for another run": (
        (
            "run: collective\nfixed: {collective: all_reduce, cluster: dgx-h100, gpus: 8, size: 1M}\n"
            "what-if: [{name: x, gpu: {peak_scale: 2}}]\n"
        ),
        "what-if[0].gpu.peak_scale: 'peak_scale' does not apply to run: collective",
    ),
    "empty grid": (
        "run: llm\nfixed: {model: llama3-8b, gpus: 8, global-batch: 8}\ngrid: {tp: []}\n",
        "grid.tp: the list is empty",
    ),
    "YAML error": ("run: llm\nfixed: {model: llama3-8b, gpus: 8\ngrid: {tp: [1]}\n", "line 3 column 5: not valid YAML"),
    "wrong type": (
        "run: llm\nfixed: {model: llama3-8b, gpus: eight, global-batch: 8}\n",
        "fixed.gpus: expected a positive integer, got 'eight'",
    ),
    "unknown model": (
        "run: llm\nfixed: {model: llama3-8c, gpus: 8, global-batch: 8}\n",
        "fixed.model: unknown model 'llama3-8c'; did you mean 'llama3-8b'?",
    ),
    "missing parameter": (
        "run: llm\nfixed: {model: llama3-8b, global-batch: 8}\ngrid: {tp: [1, 2]}\n",
        "missing parameter 'gpus'",
    ),
    "unknown key": ("runs: llm\n", "runs: unknown key 'runs'; did you mean 'run'?"),
    "a scalar grid": (
        "run: llm\nfixed: {model: llama3-8b, global-batch: 8}\ngrid: {gpus: 8}\n",
        "grid.gpus: expected a list of values",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_specs_stop_before_any_run_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD[case]
    spec = _spec(tmp_path, text)
    store = tmp_path / "s.duckdb"
    assert main(["sweep", str(spec), "--store", str(store)]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert err == f"podsim: error: {spec}: {expected}" or err.startswith(f"podsim: error: {spec}: {expected}"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and cap.out == ""
    assert not store.exists()  # nothing ran


def test_other_bad_invocations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep"]) == 2
    assert "give a sweep spec" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "none.yaml")]) == 2
    assert "no such sweep spec" in capsys.readouterr().err
    assert main(["sweep", "--example", "colective"]) == 2
    assert "did you mean 'collective'" in capsys.readouterr().err
    spec = _spec(tmp_path, COLLECTIVE_SPEC)
    assert main(["sweep", str(spec), "--store", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_cluster_what_if_scales_the_parsed_spec() -> None:
    """A bandwidth scale multiplies the parsed cluster's numbers (GB/s), no unit string made
    and read again: dgx-h100's NICs are 400 Gbps = 50 GB/s, its NVLink 450 GB/s per GPU."""
    spec = apply_cluster("dgx-h100", {"nic_bandwidth_scale": 0.5, "intra_bandwidth_scale": 2.0}, "what-if")
    assert spec.inter["nic_bandwidth"] == pytest.approx(25.0)
    assert spec.intra["bandwidth"] == pytest.approx(900.0)
    assert spec.name == "dgx-h100 (what-if)"
    # a NIC bandwidth given in units replaces the preset's before the scale
    spec = apply_cluster("dgx-h100", {"nic_bandwidth": "800 Gbps", "nic_bandwidth_scale": 0.25}, "w")
    assert spec.inter["nic_bandwidth"] == pytest.approx(25.0)
