"""The podsim command: examples, outputs, and bad input (exit 2, one line, no traceback,
no output file left behind)."""

import json
import os
import subprocess
import sys

import pytest

from podsim.cli import main
from podsim.examples import write_example
from podsim.formats.chakra import Node, NodeType, write_trace


def run_cli(*args, cwd=None):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "podsim", *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_example_runs_and_prints_summary(tmp_path):
    out = tmp_path / "r.json"
    tr = tmp_path / "t.json"
    p = run_cli("example", "--json", str(out), "--trace", str(tr))
    assert p.returncode == 0, p.stderr
    assert "117.78 us (117780 ns) on 8 ranks" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["finish_ns"] == 117780 and len(doc["ranks"]) == 8
    assert set(doc["ranks"][0]) >= {"rank", "finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns"}
    trace = json.loads(tr.read_text())
    procs = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == set(range(8))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    colls = [e for e in slices if e["cat"] == "comm"]
    assert len(colls) == 8 and all(e["dur"] == pytest.approx(117.78) for e in colls)
    # each rank's 4 chunks run back to back, 29,445 ns each (15 bus + 14 hops + 7 reductions)
    chunks = sorted((e["ts"], e["dur"]) for e in slices if e["cat"] == "chunk" and e["pid"] == 0)
    assert [round(ts * 1000) for ts, _ in chunks] == [0, 29445, 58890, 88335]
    assert all(d == pytest.approx(29.445) for _, d in chunks)


def test_simulate_accepts_astra_sim_flags(tmp_path):
    paths = write_example("layers", tmp_path / "ex")
    p = run_cli(
        "simulate",
        f"--workload-configuration={paths['workload']}",
        f"--system-configuration={paths['system']}",
        f"--network-configuration={paths['network']}",
        f"--remote-memory-configuration={paths['remote_memory']}",
        "--comm-group-configuration=empty",
        "--num-queues-per-dim=1",
        "--injection-scale=1",
        "--comm-scale=1",
        "--logging-folder=log",
    )
    assert p.returncode == 0, p.stderr
    assert "on 16 ranks" in p.stdout


def _bad(tmp_path, args, out_name="out.json"):
    out = tmp_path / out_name
    p = run_cli(*args, "--json", str(out))
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("podsim: "), p.stderr
    assert "Traceback" not in p.stderr
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".out.json")]
    return lines[0]


def _machine(tmp_path, network="topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n"):
    (tmp_path / "n.yml").write_text(network)
    (tmp_path / "s.json").write_text('{"preferred-dataset-splits": 1, "local-mem-bw": 50}')
    return ["--system-configuration", str(tmp_path / "s.json"), "--network-configuration", str(tmp_path / "n.yml")]


def test_truncated_et(tmp_path):
    nd = Node(id=1, type=NodeType.COMP_NODE, duration_micros=3, name="x" * 40)
    write_trace(tmp_path / "w.0.et", [nd])
    data = (tmp_path / "w.0.et").read_bytes()
    (tmp_path / "w.0.et").write_bytes(data[:-10])
    (tmp_path / "w.1.et").write_bytes(data)
    msg = _bad(tmp_path, ["simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path)])
    assert "w.0.et" in msg and "truncated" in msg


def test_missing_rank_file(tmp_path):
    write_trace(tmp_path / "w.0.et", [Node(id=1, type=NodeType.COMP_NODE, duration_micros=3)])
    msg = _bad(tmp_path, ["simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path)])
    assert "w.1.et" in msg and "missing" in msg


def test_cycle(tmp_path):
    for r in range(2):
        write_trace(
            tmp_path / f"w.{r}.et",
            [
                Node(id=1, type=4, duration_micros=1, data_deps=[2]),
                Node(id=2, type=4, duration_micros=1, data_deps=[1]),
            ],
        )
    msg = _bad(tmp_path, ["simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path)])
    assert "cycle among nodes" in msg


@pytest.mark.parametrize(
    "network,match",
    [
        ("topology: [Ring, Ring]\nnpus_count: [2]\nbandwidth: [50, 50]\nlatency: [500, 500]\n", "disagree in length"),
        ("topology: [Ring]\nnpus_count: [2]\nbandwidth: [0]\nlatency: [500]\n", "bandwidth must be > 0"),
        ("topology: [Ring]\nnpus_count: [2]\nbandwith: [50]\nlatency: [500]\n", "did you mean 'bandwidth'"),
        ("topology: [Ring\n", "invalid YAML"),
    ],
)
def test_bad_network(tmp_path, network, match):
    for r in range(2):
        write_trace(tmp_path / f"w.{r}.et", [Node(id=1, type=4, duration_micros=1)])
    msg = _bad(tmp_path, ["simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path, network)])
    assert "n.yml" in msg and match in msg


def test_deadlock_is_reported(tmp_path):
    rv = Node(id=1, type=NodeType.COMM_RECV_NODE)
    rv.set_attr("comm_src", 0, "int32")
    rv.set_attr("comm_dst", 1, "int32")
    rv.set_attr("comm_size", 64, "int64")
    write_trace(tmp_path / "w.0.et", [Node(id=1, type=4, duration_micros=1)])
    write_trace(tmp_path / "w.1.et", [rv])
    msg = _bad(tmp_path, ["simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path)])
    assert "simulation cannot finish" in msg and "rank 1" in msg


def test_debug_shows_traceback(tmp_path):
    args = ["simulate", "--workload-configuration", str(tmp_path / "nope"), *_machine(tmp_path), "--debug"]
    p = run_cli(*args)
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "simulate" in capsys.readouterr().out


def test_trace_has_flow_arrows_for_point_to_point(tmp_path):
    def p2p(kind, attrs):
        nd = Node(id=1, type=kind)
        for k, v in attrs.items():
            nd.set_attr(k, v, "int32" if k != "comm_size" else "int64")
        return nd

    write_trace(
        tmp_path / "w.0.et",
        [p2p(NodeType.COMM_SEND_NODE, {"comm_src": 0, "comm_dst": 1, "comm_tag": 3, "comm_size": 1000})],
    )
    write_trace(
        tmp_path / "w.1.et",
        [p2p(NodeType.COMM_RECV_NODE, {"comm_src": 0, "comm_dst": 1, "comm_tag": 3, "comm_size": 1000})],
    )
    tr = tmp_path / "t.json"
    p = run_cli("simulate", "--workload-configuration", str(tmp_path / "w"), *_machine(tmp_path), "--trace", str(tr))
    assert p.returncode == 0, p.stderr
    ev = json.loads(tr.read_text())["traceEvents"]
    starts = [e for e in ev if e["ph"] == "s"]
    ends = [e for e in ev if e["ph"] == "f"]
    assert len(starts) == len(ends) == 1
    assert starts[0]["pid"] == 0 and ends[0]["pid"] == 1 and ends[0]["ts"] > starts[0]["ts"]


def test_engine_side_errors_name_the_config_file(tmp_path):
    paths = write_example("allreduce", tmp_path / "ex")
    cfg = json.loads(open(paths["system"]).read())
    cfg["all-reduce-implementation"] = ["doubleBinaryTree"]
    cfg["all-to-all-implementation"] = ["halvingDoubling"]
    open(paths["system"], "w").write(json.dumps(cfg))
    wl = tmp_path / "w"
    from podsim.formats.chakra import write_workload
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    b = ProgramBuilder()
    b.add(OpKind.COLLECTIVE, "a2a", collective=int(CollectiveKind.ALL_TO_ALL), size_bytes=4096, node_id=1)
    write_workload(Workload([b.build()], [0] * 8), wl)
    msg = _bad(
        tmp_path,
        [
            "simulate",
            f"--workload-configuration={wl}",
            f"--system-configuration={paths['system']}",
            f"--network-configuration={paths['network']}",
        ],
    )
    assert "system.json" in msg and "halvingDoubling does not implement all-to-all" in msg


def test_comm_group_file(tmp_path):
    from podsim.formats.chakra import write_workload
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    b = ProgramBuilder()
    b.add(OpKind.COLLECTIVE, "ar", collective=int(CollectiveKind.ALL_REDUCE), size_bytes=1 << 20, node_id=1, group="1")
    write_workload(Workload([b.build()], [0] * 4), tmp_path / "w")
    (tmp_path / "g.json").write_text('{"1": [0, 1, 2, 3]}')
    (tmp_path / "n.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "s.json").write_text(
        '{"preferred-dataset-splits": 1, "local-mem-bw": 50, "all-reduce-implementation": ["ring"]}'
    )
    out = tmp_path / "r.json"
    p = run_cli(
        "simulate",
        f"--workload-configuration={tmp_path / 'w'}",
        f"--system-configuration={tmp_path / 's.json'}",
        f"--network-configuration={tmp_path / 'n.yml'}",
        f"--comm-group-configuration={tmp_path / 'g.json'}",
        "--json",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    # a group of all 4 ranks uses the whole-network plan: ring all-reduce of 1 MiB on 4 NPUs
    m = (1 << 20) // 4
    h = int(500 + m / (50 * 2**30 / 1e9))
    r = 3 * int(m / 50e9 * 1e9)
    assert json.loads(out.read_text())["finish_ns"] == 7 * 10 + 6 * h + 3 * r
    # a group that names a rank the network does not have is an input error
    (tmp_path / "g.json").write_text('{"1": [0, 1, 2, 9]}')
    msg = _bad(
        tmp_path,
        [
            "simulate",
            f"--workload-configuration={tmp_path / 'w'}",
            f"--system-configuration={tmp_path / 's.json'}",
            f"--network-configuration={tmp_path / 'n.yml'}",
            f"--comm-group-configuration={tmp_path / 'g.json'}",
        ],
        out_name="r2.json",
    )
    assert "g.json" in msg and "rank 9" in msg


def test_outputs_follow_the_umask(tmp_path):
    import stat

    out = tmp_path / "r.json"
    old = os.umask(0o022)
    try:
        assert run_cli("example", "--json", str(out)).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
