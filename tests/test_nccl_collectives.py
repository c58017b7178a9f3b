"""NCCL-like collectives against hand-derived times.

Latencies are set to zero where a test is about bandwidth, and bandwidth made irrelevant
where it is about latency, so each expected figure follows from a line of arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import podsim
from podsim.collectives.nccl import NcclTuning, Timer, bus_factor, communicator, select
from podsim.collectives.nccl.selector import build
from podsim.errors import InputError
from podsim.network.fabric import FabricBuilder, LinkTier, NodeKind

GB = 1e9


def zero_latency(t: NcclTuning, **kw) -> NcclTuning:
    base = {a: {p: 0.0 for p in d} for a, d in t.base_latency_ns.items()}
    hop = {c: {a: {p: 0.0 for p in d} for a, d in ad.items()} for c, ad in t.hop_latency_ns.items()}
    return replace(t, base_latency_ns=base, hop_latency_ns=hop, **kw)


def servers(k: int, gpn: int = 8, nv: float = 300.0, nic: float = 25.0, rail: bool = True):
    """``k`` NVSwitch servers; NICs (one per GPU) on rail leaves joined by one spine of
    ample capacity; every link latency 0."""
    b = FabricBuilder("test", gpn)
    gpus = []
    for s in range(k):
        g = [b.add_gpu() for _ in range(gpn)]
        sw = b.add_node(NodeKind.NVSWITCH, f"nvsw{s}")
        for x in g:
            b.add_duplex(x, sw, nv, 0.0, LinkTier.NVLINK)
        gpus.append(g)
    if k > 1:
        spine = b.add_node(NodeKind.SWITCH, "spine")
        leaves = [b.add_node(NodeKind.SWITCH, f"rail{j}") for j in range(gpn)]
        for g in gpus:
            for j, x in enumerate(g):
                b.add_duplex(x, leaves[j], nic, 0.0, LinkTier.NIC)
        for lf in leaves:
            b.add_duplex(lf, spine, 1000.0, 0.0, LinkTier.FABRIC)
    return b.build()


def run(fabric, tuning, collective, size, algo, proto="Simple", backend="analytical", ranks=None):
    comm = communicator(fabric, ranks)
    sched = build(comm, collective, size, algo, proto, tuning)
    return Timer(fabric, tuning, backend).time(sched).time_ns


@pytest.mark.parametrize("backend", ["analytical", "flow"])
def test_ring_all_reduce_busbw_equals_link_bandwidth(backend) -> None:
    # 8 GPUs on a 300 GB/s NVSwitch, 8 channels: every round each GPU sends S/(8*8) on each of
    # 8 channels through its 300 GB/s link; 14 rounds: t = 14 * S/8 / 300 = 1.75 S / 300;
    # S = 1.2e9 B -> 7,000,000 ns; busbw = 1.75 S / t = 300 GB/s exactly
    t = zero_latency(NcclTuning(channels=8))
    ns = run(servers(1), t, "all_reduce", 1_200_000_000, "ring", backend=backend)
    assert ns == 7_000_000
    assert bus_factor("all_reduce", 8) * 1.2e9 / ns == pytest.approx(300.0)


@pytest.mark.parametrize("backend", ["analytical", "flow"])
def test_two_server_ring_is_nic_bound(backend) -> None:
    # 16 GPUs, 8 channels, PXN: each channel crosses each server boundary once per round on
    # its own rail NIC (25 GB/s) with S/(16*8) bytes; 30 rounds: t = 30 S / (128 * 25);
    # S = 1.28e9 -> 12,000,000 ns; busbw = 1.875 S / t = 200 GB/s (8 NICs x 25)
    t = zero_latency(NcclTuning(channels=8))
    ns = run(servers(2), t, "all_reduce", 1_280_000_000, "ring", backend=backend)
    assert ns == 12_000_000
    assert bus_factor("all_reduce", 16) * 1.28e9 / ns == pytest.approx(200.0)


@pytest.mark.parametrize("backend", ["analytical", "flow"])
def test_two_server_tree_is_nvlink_bound(backend) -> None:
    # Tree, 16 GPUs, 8 channels, every edge carries S/8 both ways at once.  Per GPU and
    # direction on NVLink: head of 1 channel (1 flow), tail of 1 (1 flow), middle of 6
    # (2 flows): 14 flows x S/8 = 1.75 S at 300 GB/s.  NIC: one channel each, S/8 at 25 GB/s
    # = S/200 < 1.75 S/300.  S = 1.2e9: t = 7,000,000 ns
    t = zero_latency(NcclTuning(channels=8))
    assert run(servers(2), t, "all_reduce", 1_200_000_000, "tree", backend=backend) == 7_000_000
    # a per-channel cap of 5 GB/s binds instead: S/8 / 5 = 30,000,000 ns
    capped = replace(t, channel_bandwidth={"tree": 5.0})
    assert run(servers(2), capped, "all_reduce", 1_200_000_000, "tree", backend=backend) == 30_000_000


def test_ring_without_pxn_crosses_rails() -> None:
    # Without PXN, channel c leaves server k from local GPU c-1 (rail c-1) to local GPU c of
    # server k+1 (rail c): through the spine.  Make the leaf-spine links 10 GB/s.  Leaf
    # rail(c-1)'s uplink carries channel c's exits of BOTH servers (0 -> 1 and 1 -> 0): two
    # flows of S/(16*8); t = 30 rounds x 2 x S/128/10 with S = 1.28e9 -> 60 ms, where PXN
    # keeps traffic on the rails (12 ms at 25 GB/s NICs)
    fab = servers(2)
    import numpy as np

    bw = fab.link_bw.copy()
    bw[fab.link_tier == LinkTier.FABRIC] = 10.0
    slow = replace(fab, link_bw=bw)
    t = zero_latency(NcclTuning(channels=8, pxn=False))
    assert run(slow, t, "all_reduce", 1_280_000_000, "ring") == 60_000_000
    assert run(slow, replace(t, pxn=True), "all_reduce", 1_280_000_000, "ring") == 12_000_000
    assert np.all(fab.link_bw[fab.link_tier == LinkTier.FABRIC] == 1000.0)


def test_nvls_moves_each_byte_once_each_way() -> None:
    # NVLS: each GPU sends S to the switch and receives S: t = S / 450; busbw = 1.75 x 450
    t = zero_latency(NcclTuning(channels=8))
    fab = servers(1, nv=450.0)
    ns = run(fab, t, "all_reduce", 900_000_000, "nvls")
    assert ns == 2_000_000
    assert bus_factor("all_reduce", 8) * 9e8 / ns == pytest.approx(787.5)


def test_all_gather_and_reduce_scatter_take_n_minus_1_rounds() -> None:
    # 8 GPUs, 300 GB/s: 7 rounds of S/8 per GPU: t = 7 S / 2400; S = 2.4e9 -> 7,000,000
    t = zero_latency(NcclTuning(channels=8))
    for coll in ("all_gather", "reduce_scatter"):
        assert run(servers(1), t, coll, 2_400_000_000, "ring") == 7_000_000


def test_all_to_all_and_send_recv() -> None:
    t = zero_latency(NcclTuning(channels=8))
    # all-to-all on 8 GPUs: each GPU sends 7 x S/8 through its 300 GB/s link at once
    assert run(servers(1), t, "all_to_all", 2_400_000_000, "direct") == 7_000_000
    # one 3e9-byte transfer between two servers over a 25 GB/s NIC
    assert run(servers(2), t, "send_recv", 3_000_000_000, "p2p", ranks=[0, 8]) == 120_000_000


def test_latency_terms() -> None:
    # ring LL on 4 GPUs of one server, negligible bytes: base 5 us + 6 rounds x 1 us hop
    t = zero_latency(NcclTuning(channels=1))
    t.base_latency_ns["ring"]["LL"] = 5000.0
    t.hop_latency_ns["nvlink"]["ring"]["LL"] = 1000.0
    ns = run(servers(1, gpn=4), t, "all_reduce", 4, "ring", "LL")
    assert 11_000 <= ns <= 11_001
    # on two servers of 2 GPUs, 1 of 3 hops per pass crosses the network (net hop 10 us):
    # 6 rounds x (2/3 x 1 + 1/3 x 10) us = 24 us, plus base 5
    t.hop_latency_ns["net"]["ring"]["LL"] = 10_000.0
    ns = run(servers(2, gpn=2), t, "all_reduce", 4, "ring", "LL")
    assert 29_000 <= ns <= 29_001


def test_selector_shape() -> None:
    # NCCL's default constants: latency-bound small messages take LL, large ones Simple
    fab = servers(2)
    comm = communicator(fab)
    model = Timer(fab, NcclTuning())
    small, _ = select(comm, "all_reduce", 1024, NcclTuning(), model)
    large, _ = select(comm, "all_reduce", 1 << 30, NcclTuning(), model)
    assert small.protocol == "LL" and large.protocol == "Simple"


def test_bus_factors_follow_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == 1.75
    assert bus_factor("all_gather", 8) == 0.875
    assert bus_factor("reduce_scatter", 4) == 0.75
    assert bus_factor("broadcast", 8) == 1.0


def test_api_rows_and_errors() -> None:
    table = podsim.collective("all_reduce", "dgx-h100", 8, min_bytes="1K", max_bytes="1M", factor=4)
    assert [r.bytes for r in table.rows] == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert all(r.algbw_gbps == pytest.approx(r.bytes / (r.time_us * 1000)) for r in table.rows)
    with pytest.raises(InputError, match="unknown collective 'allreduce'"):
        podsim.collective("allreduce", "dgx-h100", 8)
    with pytest.raises(InputError, match="12 GPUs do not fill whole servers of 8"):
        podsim.collective("all_reduce", "dgx-h100", 12)
    with pytest.raises(InputError, match="nvls"):
        podsim.collective("all_reduce", "dgx-h100", 16, algorithm="nvls", max_bytes="1M")


@pytest.mark.parametrize("backend", ["analytical", "flow"])
def test_hierarchical_all_reduce(backend) -> None:
    # 2 servers x 8 GPUs, 8 channels.  Intra reduce-scatter: 7 rounds of S/64 per channel per
    # GPU over 300 GB/s (8 flows per GPU): 7 x S/8/300.  Inter all-reduce per rail of 2 GPUs:
    # 2 rounds, each GPU sends S/(8 x 2 x 8) on each of 8 channels through its 25 GB/s NIC:
    # 2 x S/16/25.  Intra all-gather: as the reduce-scatter.  S = 2.4e9:
    # 7,000,000 + 12,000,000 + 7,000,000 ns
    t = zero_latency(NcclTuning(channels=8))
    assert run(servers(2), t, "all_reduce", 2_400_000_000, "hierarchical", backend=backend) == 26_000_000


def test_broadcast_is_a_pipelined_chain() -> None:
    # chain 0 -> 1 -> ... -> 7, 8 channels of S/8 each, all hops at once: every GPU sends S
    # through its 300 GB/s link: S / 300; latency: 7 hops of 2 us -> S = 3e8: 1,000,000 + 14,000
    t = zero_latency(NcclTuning(channels=8))
    t.hop_latency_ns["nvlink"]["ring"]["Simple"] = 2000.0
    assert run(servers(1), t, "broadcast", 300_000_000, "ring") == 1_014_000


def test_nvlink_mesh_server() -> None:
    # 4 GPUs fully meshed, one 50 GB/s link per pair, no switch: a ring all-reduce of S on 4
    # GPUs with 1 channel sends S/4 per round to the next GPU over its own link: 6 rounds x
    # S/4/50; S = 2e8 -> 6,000,000 ns
    from podsim.hardware.cluster import build_fabric, cluster_from_dict

    spec = cluster_from_dict(
        {
            "name": "mesh",
            "gpus_per_node": 4,
            "intra_node": {"kind": "nvlink_mesh", "link_bandwidth": "50 GB/s", "latency": "0 ns"},
        }
    )
    fab = build_fabric(spec, 4)
    assert fab.num_links == 12 and not fab.forwards.any()
    assert run(fab, zero_latency(NcclTuning(channels=1)), "all_reduce", 200_000_000, "ring") == 6_000_000
