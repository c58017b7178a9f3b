"""The array flow network against the per-flow reference network (issue #17).

:class:`~podsim.network.flow.network.FlowNetwork` keeps flows in arrays and starts and ends
them in batches; :class:`~podsim.network.flow.reference.ReferenceFlowNetwork` is the network
it replaced, one Python object per flow.  They must give the same times to the nanosecond and
the same link statistics, under adaptive and hashed (ECMP) routing, rate caps, zero-byte
flows, flows that start and end at the same instants, and whole cluster runs.  The reference
is independent code: it routes, counts and schedules flow by flow.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from podsim.engine.cluster import simulate_cluster
from podsim.engine.events import EventQueue
from podsim.hardware.cluster import build_fabric, cluster_from_dict, load_cluster
from podsim.network.flow import FlowNetwork
from podsim.network.flow.reference import ReferenceFlowNetwork
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload
from podsim.workload.workload import Group


def small_cluster(routing: str, kind: str = "rail_optimized") -> dict:
    """4-GPU servers, 2 servers per segment: traffic between segments crosses spines, where
    adaptive routing has choices."""
    return {
        "name": f"small-{kind}-{routing}",
        "gpu": "H100-SXM5-80GB",
        "gpus_per_node": 4,
        "intra_node": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "150 ns"},
        "inter_node": {
            "kind": kind,
            "routing": routing,
            "nic_bandwidth": "400 Gbps",
            "servers_per_segment": 2,
            "nic_latency": "600 ns",
            "switch_latency": "300 ns",
        },
        "nccl": {"channels": 4, "algorithms": ["ring", "tree"]},
    }


FABRICS = {
    "rail-adaptive": lambda: build_fabric(cluster_from_dict(small_cluster("adaptive")), 32),
    "rail-ecmp": lambda: build_fabric(cluster_from_dict(small_cluster("ecmp")), 32),
    "spectrum-x": lambda: build_fabric(cluster_from_dict(small_cluster("adaptive", "spectrum-x")), 32),
    "alibaba-hpn": lambda: build_fabric(cluster_from_dict(small_cluster("adaptive", "alibaba-hpn")), 32),
    "fat-tree": lambda: build_fabric(cluster_from_dict(small_cluster("ecmp", "fat_tree")), 32),
}


def random_traffic(fabric, seed: int, batches: int = 40):  # type: ignore[no-untyped-def]
    """Batches ``(t_ns, src nodes, dst nodes, bytes, labels, cap)``: several batches at one
    instant, repeated pairs, zero-byte flows, self-sends, capped and uncapped."""
    rng = random.Random(seed)
    gpus = fabric.gpus.tolist()
    out = []
    t = 0
    for _ in range(batches):
        t += rng.choice([0, 0, 50, 700, 3_000, 20_000])
        k = rng.choice([1, 2, 5, 16, 40])
        src = [rng.choice(gpus) for _ in range(k)]
        dst = [rng.choice(gpus) if rng.random() < 0.9 else s for s in src]
        size = [rng.choice([0, 1, 4096, 65_536, 1 << 20, 3_333_333]) for _ in range(k)]
        lab = [rng.randrange(4) for _ in range(k)]
        cap = rng.choice([np.inf, np.inf, 20.0, 3.5])
        out.append((t, src, dst, size, lab, cap))
    return out


def run(network, fabric, traffic, record_load: bool = False):  # type: ignore[no-untyped-def]
    q = EventQueue()
    net = network(fabric, q, record_load=record_load)
    arrived: dict[tuple[int, int], int] = {}
    for b, (t, src, dst, size, lab, cap) in enumerate(traffic):

        def go(_a, b=b, src=src, dst=dst, size=size, lab=lab, cap=cap):  # type: ignore[no-untyped-def]
            net.start_batch(
                np.array(src),
                np.array(dst),
                np.array(size),
                np.array(lab),
                lambda i, b=b: arrived.__setitem__((b, i), q.now),
                cap,
                each=True,
            )

        q.schedule(t, go)
    q.run()
    return arrived, net


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_batches_arrive_as_in_the_reference(name: str, seed: int) -> None:
    fabric = FABRICS[name]()
    traffic = random_traffic(fabric, seed)
    fast, net = run(FlowNetwork, fabric, traffic, record_load=True)
    slow, ref = run(ReferenceFlowNetwork, fabric, traffic, record_load=True)
    assert len(fast) == sum(len(b[1]) for b in traffic)
    assert fast == slow
    a, b = net.link_stats(), ref.link_stats()
    assert a.bytes.tolist() == b.bytes.tolist()
    assert a.busy_ns.tolist() == b.busy_ns.tolist()
    assert a.peak_flows.tolist() == b.peak_flows.tolist()
    assert (net.flows_started, net.solves, net.solved_flows) == (ref.flows_started, ref.solves, ref.solved_flows)
    # the load counters: the same changes at the same instants (sums may differ in the last bit)
    fa, fb = sorted(net.load_samples, key=lambda x: x[:2]), sorted(ref.load_samples, key=lambda x: x[:2])
    assert [x[:2] for x in fa] == [x[:2] for x in fb]
    assert [s[2] for s in fa] == pytest.approx([s[2] for s in fb], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["rail-adaptive", "rail-ecmp"])
def test_point_to_point_flows_one_by_one(name: str) -> None:
    # single flows (the element-by-element path), at random instants, some at the same one
    fabric = FABRICS[name]()
    rng = random.Random(7)
    gpus = fabric.gpus.tolist()
    msgs = [
        (
            rng.randrange(0, 2_000_000, 1_000),
            rng.randrange(len(gpus)),
            rng.randrange(len(gpus)),
            rng.choice([0, 4096, 1 << 20]),
            rng.randrange(4),
        )
        for _ in range(400)
    ]
    out = []
    for network in (FlowNetwork, ReferenceFlowNetwork):
        q = EventQueue()
        net = network(fabric, q)
        done: dict[int, int] = {}
        for i, (t, a, b, x, lab) in enumerate(msgs):
            q.schedule(
                t,
                lambda _a, i=i, a=a, b=b, x=x, lab=lab, net=net, q=q, done=done: net.start(
                    a, b, x, lambda i=i: done.__setitem__(i, q.now), lab
                ),
            )
        q.run()
        st = net.link_stats()
        out.append((done, st.bytes.tolist(), st.busy_ns.tolist(), st.peak_flows.tolist(), net.solves))
    assert len(out[0][0]) == len(msgs)
    assert out[0] == out[1]


def test_adaptive_choices_see_the_flows_started_before_them() -> None:
    # One batch of cross-segment flows with many choices: placed one by one, they spread over
    # the spines exactly as the reference places them.  The same batch again while the first
    # and a few others still run sees other counts and chooses otherwise; once all is quiet, it chooses as
    # the first time (the remembered choices), as the reference's fresh choices do.
    fabric = FABRICS["rail-adaptive"]()
    g = fabric.gpus.tolist()
    src = [g[i] for i in range(8)] * 4  # segment 0 ...
    dst = [g[16 + i] for i in range(8)] * 4  # ... to segment 1
    lab = [i // 8 for i in range(32)]
    traffic = [
        (0, src, dst, [1 << 20] * 32, lab, np.inf),
        (500, src[:3], dst[:3], [1 << 20] * 3, lab[:3], np.inf),
        (1_000, src, dst, [1 << 20] * 32, lab, np.inf),
        (10_000_000, src, dst, [1 << 20] * 32, lab, np.inf),
        (10_000_000, src[:5], dst[:5], [0, 1 << 16, 0, 1 << 16, 1], lab[:5], np.inf),
    ]
    fast, net = run(FlowNetwork, fabric, traffic)
    slow, ref = run(ReferenceFlowNetwork, fabric, traffic)
    assert fast == slow
    a, b = net.link_stats(), ref.link_stats()
    assert a.bytes.tolist() == b.bytes.tolist()  # the same links chosen
    assert a.peak_flows.tolist() == b.peak_flows.tolist()


def two_level_workload(servers: int, gpus: int) -> Workload:
    """Every GPU computes (longer on odd ranks), then a TP all-reduce in its server and a DP
    all-reduce across servers, concurrent; rank 1 also sends rank ``gpus + 1`` a message."""
    progs = []
    for kind in range(3):
        b = ProgramBuilder(f"p{kind}")
        c = b.add(OpKind.COMPUTE, "c", duration_ns=13_000 if kind else 10_000, node_id=1)
        b.add(
            OpKind.COLLECTIVE,
            "tp",
            collective=int(CollectiveKind.ALL_REDUCE),
            size_bytes=4 << 20,
            node_id=2,
            data_deps=[c],
            group="tp",
            stream="tp",
        )
        b.add(
            OpKind.COLLECTIVE,
            "dp",
            collective=int(CollectiveKind.ALL_REDUCE),
            size_bytes=6 << 20,
            node_id=3,
            data_deps=[c],
            group="dp",
            stream="dp",
        )
        if kind == 2:
            b.add(OpKind.SEND, "s", peer=gpus + 1, size_bytes=2 << 20, tag=5, node_id=4, data_deps=[c], stream="p2p")
        progs.append(b.build())
    recv = ProgramBuilder("recv")
    c = recv.add(OpKind.COMPUTE, "c", duration_ns=10_000, node_id=1)
    recv.add(
        OpKind.COLLECTIVE,
        "tp",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=4 << 20,
        node_id=2,
        data_deps=[c],
        group="tp",
        stream="tp",
    )
    recv.add(
        OpKind.COLLECTIVE,
        "dp",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=6 << 20,
        node_id=3,
        data_deps=[c],
        group="dp",
        stream="dp",
    )
    recv.add(OpKind.RECV, "r", peer=1, size_bytes=2 << 20, tag=5, node_id=4, stream="p2p")
    progs.append(recv.build())
    n = servers * gpus
    which = [r % 2 for r in range(n)]
    which[1], which[gpus + 1] = 2, 3
    groups = [Group("tp", tuple(range(gpus * i, gpus * i + gpus))) for i in range(servers)]
    groups += [Group("dp", tuple(range(j, n, gpus))) for j in range(gpus)]
    return Workload(progs, which, groups, "two-level")


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_cluster_runs_match_the_reference(name: str) -> None:
    fabric = FABRICS[name]()
    spec = cluster_from_dict(small_cluster("adaptive"))
    wl = two_level_workload(8, 4)
    for kw in ({}, {"fast_forward": False}, {"granularity": "bulk"}):
        fast = simulate_cluster(wl, fabric, spec.nccl, "flow", use_symmetry=False, record_timeline=True, **kw)
        slow = simulate_cluster(
            wl, fabric, spec.nccl, "flow", use_symmetry=False, record_timeline=True, reference_flows=True, **kw
        )
        assert [(r.finish_ns, r.comm_ns, r.exposed_comm_ns) for r in fast.ranks] == [
            (r.finish_ns, r.comm_ns, r.exposed_comm_ns) for r in slow.ranks
        ]
        assert (fast.info["flows"], fast.info["flow_solves"]) == (slow.info["flows"], slow.info["flow_solves"])
        assert [(x.name, x.bytes, x.busy_ns, x.peak_flows) for x in fast.links] == [
            (x.name, x.bytes, x.busy_ns, x.peak_flows) for x in slow.links
        ]
        assert sorted((s.name, s.start_ns, s.end_ns) for t in fast.timelines.values() for s in t) == sorted(
            (s.name, s.start_ns, s.end_ns) for t in slow.timelines.values() for s in t
        )


def test_dgx_h100_every_rank_matches_the_reference() -> None:
    # the benchmark's shape at 8 servers: 8-GPU TP rings and 8 DP rings, adaptive routing
    spec = load_cluster("dgx-h100")
    fabric = build_fabric(spec, 64)
    wl = two_level_workload(8, 8)
    fast = simulate_cluster(wl, fabric, spec.nccl, "flow", use_symmetry=False, record_timeline=False)
    slow = simulate_cluster(
        wl, fabric, spec.nccl, "flow", use_symmetry=False, record_timeline=False, reference_flows=True
    )
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in slow.ranks]
    assert fast.info["flows"] == slow.info["flows"] > 10_000
