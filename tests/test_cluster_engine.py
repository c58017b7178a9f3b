"""Workloads on cluster fabrics (``podsim simulate --cluster``), against hand-derived times."""

from __future__ import annotations

import json

import pytest
import yaml

import podsim
from podsim.cli import main
from podsim.formats.chakra import write_workload
from podsim.workload import CollectiveKind, Group, OpKind, ProgramBuilder, Workload

NO_LATENCY = {
    "channels": 8,
    "algorithms": ["ring"],
    "protocols": ["Simple"],
    "base_latency": {"ring": {"Simple": "0 ns"}},
    "hop_latency": {"nvlink": {"ring": {"Simple": "0 ns"}}, "net": {"ring": {"Simple": "0 ns"}}},
}


def cluster_file(tmp_path, inter: dict, nccl: dict | None = None, gpn: int = 8) -> str:
    doc = {
        "name": "test",
        "gpus_per_node": gpn,
        "intra_node": {"kind": "nvswitch", "bandwidth": "300 GB/s", "latency": "0 ns"},
        "inter_node": inter,
        "nccl": nccl or NO_LATENCY,
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


RAIL = {
    "kind": "rail_optimized",
    "nic_bandwidth": "25 GB/s",
    "servers_per_segment": 2,
    "nic_latency": "0 ns",
    "switch_latency": "0 ns",
}


def compute_then_allreduce(n: int, size: int, group: str | None = None) -> Workload:
    b = ProgramBuilder("step")
    c = b.add(OpKind.COMPUTE, "fwd", duration_ns=1000, node_id=1)
    b.add(
        OpKind.COLLECTIVE,
        "grads",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=size,
        node_id=2,
        data_deps=[c],
        group=group,
    )
    return Workload([b.build()], [0] * n, name="step")


@pytest.mark.parametrize("backend", ["analytical", "flow"])
def test_compute_then_ring_all_reduce(tmp_path, backend) -> None:
    # 1000 ns of compute, then the 16-GPU ring all-reduce of 1.28e9 B bounded by the 25 GB/s
    # NICs: 30 rounds x 1.28e9 / 128 / 25 = 12,000,000 ns (see test_nccl_collectives)
    res = podsim.simulate(
        compute_then_allreduce(16, 1_280_000_000), cluster=cluster_file(tmp_path, RAIL), backend=backend
    )
    assert res.finish_ns == 1000 + 12_000_000
    assert all(r.exposed_comm_ns == 12_000_000 for r in res.ranks)


def test_groups_map_onto_gpus(tmp_path) -> None:
    # pg "tp" = each server's 8 GPUs (NVLink, 300 GB/s): 14 rounds x S/64 at 300/8 per
    # channel -> 1.75 S / 300; S = 1.2e9 -> 7,000,000 ns.  pg "dp" = GPUs {k, k+8} across
    # servers on rail k: a 2-GPU ring has 2 rounds; in each, all 8 channels send S/16 through
    # the same 25 GB/s NIC: 2 x S/2 / 25 = S/25 -> 48,000,000 ns
    path = cluster_file(tmp_path, RAIL)
    tp = [Group("tp", tuple(range(8))), Group("tp", tuple(range(8, 16)))]
    dp = [Group("dp", (k, k + 8)) for k in range(8)]
    w_tp = compute_then_allreduce(16, 1_200_000_000, "tp")
    w_tp = Workload(w_tp.programs, w_tp.rank_program, tp, "tp")
    w_dp = compute_then_allreduce(16, 1_200_000_000, "dp")
    w_dp = Workload(w_dp.programs, w_dp.rank_program, dp, "dp")
    for backend in ("analytical", "flow"):
        assert podsim.simulate(w_tp, cluster=path, backend=backend).finish_ns == 1000 + 7_000_000
        assert podsim.simulate(w_dp, cluster=path, backend=backend).finish_ns == 1000 + 48_000_000


def test_flow_backend_sees_contention_analytical_does_not(tmp_path) -> None:
    # A fat-tree of radix 4 with 3:1 oversubscription: each leaf has 3 down and 1 up
    # (25 GB/s); 6 single-GPU servers fill two leaves.
    inter = {
        "kind": "fat_tree",
        "nic_bandwidth": "25 GB/s",
        "radix": 4,
        "oversubscription": 3,
        "nic_latency": "0 ns",
        "switch_latency": "0 ns",
    }
    path = cluster_file(tmp_path, inter, gpn=1)
    # 6 GPUs, leaves hold 3 each: senders 0, 1 (leaf 0) -> receivers 3, 4 (leaf 1) share the
    # single 25 GB/s uplink: 12.5 GB/s each -> 1e9 B in 80,000,000 ns; without contention
    # (analytical) each takes 1e9 / 25 = 40,000,000 ns
    progs, rank_prog = [], []
    for r in range(6):
        b = ProgramBuilder(f"r{r}")
        if r in (0, 1):
            b.add(OpKind.SEND, "send", peer=r + 3, size_bytes=1_000_000_000, tag=r, node_id=1)
        elif r in (3, 4):
            b.add(OpKind.RECV, "recv", peer=r - 3, size_bytes=1_000_000_000, tag=r - 3, node_id=1)
        else:
            b.add(OpKind.COMPUTE, "idle", duration_ns=1, node_id=1)
        progs.append(b.build())
        rank_prog.append(r)
    w = Workload(progs, rank_prog, [], "p2p")
    assert podsim.simulate(w, cluster=path, backend="analytical").finish_ns == 40_000_000
    res = podsim.simulate(w, cluster=path, backend="flow")
    assert res.finish_ns == 80_000_000
    up = next(x for x in res.links if x.name == "leaf0->spine0")
    assert up.peak_flows == 2 and up.bytes == 2e9


def test_cli_cluster_run_with_trace_counters(tmp_path, capsys) -> None:
    w = compute_then_allreduce(16, 64 << 20)
    prefix = tmp_path / "ar"
    write_workload(w, str(prefix))
    trace, out = tmp_path / "t.json", tmp_path / "r.json"
    rc = main(
        [
            "simulate",
            "--workload-configuration",
            str(prefix),
            "--cluster",
            "dgx-a100-superpod",
            "--backend",
            "flow",
            "--trace",
            str(trace),
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "busiest links" in text and "16 GPUs of dgx-a100-superpod" in text
    events = json.loads(trace.read_text())["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert "gpu0->seg0.rail0" in counters and "gpu0->nvsw0" in counters
    doc = json.loads(out.read_text())
    assert doc["links"][0]["bytes"] > 0 and doc["info"]["collectives"] == 1


def test_cli_errors(tmp_path, capsys) -> None:
    w = compute_then_allreduce(12, 1024)
    prefix = tmp_path / "ar"
    write_workload(w, str(prefix))
    assert main(["simulate", "--workload-configuration", str(prefix), "--cluster", "dgx-h100"]) == 2
    assert "12 GPUs do not fill whole servers of 8" in capsys.readouterr().err
    assert main(["simulate", "--workload-configuration", str(prefix)]) == 2
    assert "missing --system-configuration (or give --cluster)" in capsys.readouterr().err


def interfering_workload(n: int = 16, send: bool = True) -> Workload:
    """Ranks other than 7 and 15 all-reduce 256 MiB (group "g": 7 GPUs per server, so rail GPUs
    0 and 8 carry two of the 8 channels: their NICs are the ring's bottleneck); meanwhile rank
    7 computes 1 ms then sends 8 MiB to rank 8, into GPU 8's NIC."""
    progs, rank_prog = [], []
    for r in range(n):
        b = ProgramBuilder(f"r{r}")
        if r not in (7, 15):
            b.add(
                OpKind.COLLECTIVE,
                "ar",
                collective=int(CollectiveKind.ALL_REDUCE),
                size_bytes=256 << 20,
                node_id=1,
                group="g",
            )
        else:
            c = b.add(OpKind.COMPUTE, "c", duration_ns=1_000_000, node_id=2)
            if r == 7 and send:
                b.add(OpKind.SEND, "s", peer=8, size_bytes=8 << 20, tag=7, node_id=3, data_deps=[c])
        if r == 8 and send:
            b.add(OpKind.RECV, "r", peer=7, size_bytes=8 << 20, tag=7, node_id=3)
        progs.append(b.build())
        rank_prog.append(r)
    group = Group("g", tuple(r for r in range(n) if r not in (7, 15)))
    return Workload(progs, rank_prog, [group], "interfere")


def test_fast_forward_is_exact() -> None:
    # skipping identical rounds that nothing can disturb gives the same answer as simulating
    # every round, with and without interference
    from dataclasses import replace

    from podsim.engine.cluster import simulate_cluster
    from podsim.hardware.cluster import build_fabric, load_cluster

    spec = load_cluster("dgx-a100-superpod")
    fab = build_fabric(spec, 16)
    ring = replace(spec.nccl, algorithms=("ring",))  # 30 rounds per all-reduce
    for w in (interfering_workload(), compute_then_allreduce(16, 256 << 20)):
        fast = simulate_cluster(w, fab, ring, "flow", use_symmetry=False, record_timeline=False)
        slow = simulate_cluster(w, fab, ring, "flow", use_symmetry=False, record_timeline=False, fast_forward=False)
        assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]
        assert fast.info["rounds_fast_forwarded"] > 0 and slow.info["rounds_fast_forwarded"] == 0
        assert [(x.name, round(x.bytes)) for x in fast.links] == [(x.name, round(x.bytes)) for x in slow.links]
    # the send really interferes: without it the all-reduce (rank 5 only all-reduces) ends
    # sooner, and only the rounds before the send starts are fast-forwarded
    alone = simulate_cluster(
        interfering_workload(send=False), fab, ring, "flow", use_symmetry=False, record_timeline=False
    )
    mixed = simulate_cluster(interfering_workload(), fab, ring, "flow", use_symmetry=False, record_timeline=False)
    assert alone.ranks[5].finish_ns < mixed.ranks[5].finish_ns
    assert 0 < mixed.info["rounds_fast_forwarded"] < alone.info["rounds_fast_forwarded"]


def test_bulk_granularity() -> None:
    # a collective running alone: its rounds as one set of flows take exactly as long (bytes
    # per link and per-round latency summed); with interference bulk is an approximation that
    # still sees the contention
    from dataclasses import replace

    from podsim.engine.cluster import simulate_cluster
    from podsim.errors import SimulationError
    from podsim.hardware.cluster import build_fabric, load_cluster

    spec = load_cluster("dgx-a100-superpod")
    fab = build_fabric(spec, 16)
    ring = replace(spec.nccl, algorithms=("ring",))
    w = compute_then_allreduce(16, 256 << 20)
    rounds = simulate_cluster(w, fab, ring, "flow", use_symmetry=False, record_timeline=False)
    bulk = simulate_cluster(w, fab, ring, "flow", use_symmetry=False, record_timeline=False, granularity="bulk")
    assert bulk.ranks[0].finish_ns == pytest.approx(rounds.ranks[0].finish_ns, abs=64)
    every = simulate_cluster(w, fab, ring, "flow", use_symmetry=False, record_timeline=False, fast_forward=False)
    assert bulk.info["flows"] * 10 < every.info["flows"]
    alone = simulate_cluster(
        interfering_workload(send=False),
        fab,
        ring,
        "flow",
        use_symmetry=False,
        record_timeline=False,
        granularity="bulk",
    )
    mixed = simulate_cluster(
        interfering_workload(), fab, ring, "flow", use_symmetry=False, record_timeline=False, granularity="bulk"
    )
    exact = simulate_cluster(interfering_workload(), fab, ring, "flow", use_symmetry=False, record_timeline=False)
    assert alone.ranks[5].finish_ns < mixed.ranks[5].finish_ns
    assert mixed.ranks[5].finish_ns == pytest.approx(exact.ranks[5].finish_ns, rel=0.05)
    with pytest.raises(SimulationError, match="granularity"):
        simulate_cluster(w, fab, ring, "flow", granularity="coarse")
