"""KV-cache transfers between prefill and decode replicas on the fabric (issue #16, P/D
disaggregation): one transfer takes bytes / NIC bandwidth; two into the same replica share its
NIC (flow backend) or do not see each other (analytical)."""

from __future__ import annotations

import pytest

from podsim.engine.events import EventQueue
from podsim.hardware.cluster import cluster_from_dict
from podsim.serving.llm.transfer import KVTransfers

# one GPU per server, one 400 Gb/s = 50 GB/s NIC each, a rail-optimized fabric
CLUSTER = cluster_from_dict(
    {
        "name": "one-gpu-servers",
        "gpu": "H100-SXM5-80GB",
        "gpus_per_node": 1,
        "intra_node": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "150 ns"},
        "inter_node": {
            "kind": "rail_optimized",
            "nic_bandwidth": "400 Gbps",
            "servers_per_segment": 32,
            "nic_latency": "600 ns",
            "switch_latency": "300 ns",
        },
    },
    "test",
)
GB = 10**9


def _run(backend: str, sends: list[tuple[int, int]]) -> list[int]:
    clock = EventQueue()
    kv = KVTransfers(CLUSTER, 3, 1, clock, backend)
    done: list[int] = [0] * len(sends)
    for i, (a, b) in enumerate(sends):
        kv.start(GB, a, b, lambda i=i: done.__setitem__(i, clock.now))
    clock.run()
    assert kv.transfers == len(sends) and kv.bytes == GB * len(sends)
    return done


@pytest.mark.parametrize("backend", ["flow", "analytical"])
def test_one_transfer_takes_its_bytes_over_the_nic(backend: str) -> None:
    (t,) = _run(backend, [(0, 1)])
    # 10^9 B at 50 B/ns = 20 ms, plus a few microseconds of latency
    assert 20e6 <= t <= 20e6 + 10_000


def test_two_transfers_into_one_replica_share_its_nic() -> None:
    both = _run("flow", [(0, 2), (1, 2)])
    # max-min fair: 25 B/ns each on replica 2's NIC, so 40 ms for both
    assert both == [pytest.approx(40e6, abs=10_000)] * 2
    assert _run("analytical", [(0, 2), (1, 2)]) == [pytest.approx(20e6, abs=10_000)] * 2  # no contention
