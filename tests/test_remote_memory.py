"""Remote memory: private, per-node and pooled channels, timed by hand.

Transfer time: int(latency) + int(bytes / bandwidth); bandwidth 128 B/ns, latency 100 ns.
"""

import pytest

from helpers import params, topo
from podsim.engine import RemoteMemoryParams, simulate
from podsim.errors import InputError
from podsim.workload import OpKind, ProgramBuilder, Workload


def loads(n_ranks, count=2, size=128_000):
    b = ProgramBuilder("mem")
    prev = None
    for i in range(count):
        prev = b.add(
            OpKind.MEM_LOAD, f"ld{i}", size_bytes=size, node_id=i + 1, data_deps=[] if prev is None else [prev]
        )
    return Workload([b.build()], [0] * n_ranks)


T = 100 + 128_000 // 128  # 1100 ns per load


def test_per_npu_memory_has_no_contention():
    rm = RemoteMemoryParams("PER_NPU_MEMORY_EXPANSION", 100, 128.0)
    res = simulate(loads(4), topo(("Ring", 4, 50, 500)), params(), remote_memory=rm)
    assert [x.finish_ns for x in res.ranks] == [2 * T] * 4
    assert res.ranks[0].mem_ns == 2 * T


def test_memory_pool_serialises_everyone_first_come_first_served():
    # 4 ranks x 2 chained loads on one channel: rank 0's first load, then ranks 1, 2, 3 queued;
    # each completion lets the owner queue its second load behind the others.
    rm = RemoteMemoryParams("MEMORY_POOL", 100, 128.0)
    res = simulate(loads(4), topo(("Ring", 4, 50, 500)), params(), remote_memory=rm)
    assert sorted(x.finish_ns for x in res.ranks) == [5 * T, 6 * T, 7 * T, 8 * T]
    assert res.info["equivalent_ranks"] is False


def test_per_node_memory_has_one_channel_per_node():
    rm = RemoteMemoryParams("PER_NODE_MEMORY_EXPANSION", 100, 128.0, npus_per_node=2, num_nodes=2)
    res = simulate(loads(4, count=1), topo(("Ring", 4, 50, 500)), params(), remote_memory=rm)
    assert [x.finish_ns for x in res.ranks] == [T, 2 * T, T, 2 * T]


def test_memory_ops_without_remote_memory_are_an_error():
    with pytest.raises(InputError, match="NO_MEMORY_EXPANSION|remote memory"):
        simulate(loads(2), topo(("Ring", 2, 50, 500)), params())
