"""Engine behaviour: overlap of compute and communication, resource rules, deadlocks."""

import pytest

from helpers import GIB, params, topo
from podsim.engine import simulate
from podsim.errors import SimulationError
from podsim.workload import CollectiveKind as CK
from podsim.workload import Group, OpKind, ProgramBuilder, Workload

B = 10


def h(d, m, lat=500.0, bw=50.0):
    return int(d * lat + m / (bw * GIB))


def r(m):
    return 3 * int(m / 50e9 * 1e9)


def ring_ar(n, size):
    m = size // n
    return (2 * n - 1) * B + (2 * n - 2) * h(1, m) + (n - 1) * r(m)


def layered(compute_ns, size, layers=2):
    """compute -> (all-reduce, next compute); the next compute depends only on the compute."""
    b = ProgramBuilder("layers")
    prev = None
    nid = 1
    for _ in range(layers):
        c = b.add(OpKind.COMPUTE, "c", duration_ns=compute_ns, node_id=nid, data_deps=[] if prev is None else [prev])
        b.add(OpKind.COLLECTIVE, "ar", collective=int(CK.ALL_REDUCE), size_bytes=size, node_id=nid + 1, data_deps=[c])
        prev = c
        nid += 2
    return b.build()


@pytest.mark.parametrize("compute_ns", [10_000, 50_000, 200_000])
def test_compute_overlaps_communication(compute_ns):
    # t=0 compute 1; at C: all-reduce 1 and compute 2 start together; all-reduce 2 can start
    # when compute 2 ends (2C) and all-reduce 1 has released the communication resource.
    n, size = 8, 1 << 20
    t_ar = ring_ar(n, size)
    res = simulate(Workload([layered(compute_ns, size)], [0] * n), topo(("Ring", n, 50, 500)), params())
    start2 = max(2 * compute_ns, compute_ns + t_ar)
    finish = start2 + t_ar
    for x in res.ranks:
        assert x.finish_ns == finish
        assert x.compute_ns == 2 * compute_ns
        assert x.exposed_comm_ns == finish - 2 * compute_ns
        assert x.comm_ns == 2 * t_ar  # the two all-reduces never overlap each other


def test_zero_duration_compute_takes_one_ns():
    b = ProgramBuilder()
    b.add(OpKind.COMPUTE, "z", duration_ns=0, node_id=1)
    res = simulate(Workload([b.build()], [0] * 4), topo(("Ring", 4, 50, 500)), params())
    assert res.finish_ns == 1


def test_independent_compute_ops_are_serialised_on_the_gpu():
    b = ProgramBuilder()
    for i in range(3):
        b.add(OpKind.COMPUTE, f"k{i}", duration_ns=1000, node_id=i + 1)
    b.add(OpKind.COMPUTE, "cpu", duration_ns=2500, node_id=9, is_cpu=True)
    res = simulate(Workload([b.build()], [0] * 2), topo(("Ring", 2, 50, 500)), params())
    assert res.finish_ns == 3000  # the CPU op runs beside the GPU ops
    assert res.ranks[0].cpu_ns == 2500


def test_send_recv_between_ranks():
    # rank 0 sends 1 MB to rank 2 on a Ring(4): 2 hops; the receive completes on arrival
    s = ProgramBuilder("s")
    s.add(OpKind.SEND, "send", peer=2, size_bytes=1_000_000, tag=5, node_id=1)
    rv = ProgramBuilder("r")
    rv.add(OpKind.RECV, "recv", peer=0, size_bytes=1_000_000, tag=5, node_id=1)
    idle = ProgramBuilder("i")
    wl = Workload([s.build(), rv.build(), idle.build()], [0, 2, 1, 2])
    res = simulate(wl, topo(("Ring", 4, 50, 500)), params())
    t = h(2, 1_000_000)
    assert res.ranks[0].finish_ns == t and res.ranks[2].finish_ns == t
    assert res.info["equivalent_ranks"] is False


def test_unmatched_send_is_reported_not_hung():
    s = ProgramBuilder("s")
    s.add(OpKind.SEND, "send", peer=1, size_bytes=1000, tag=1, node_id=1)
    wl = Workload([s.build(), ProgramBuilder("e").build()], [0, 1])
    wl2 = Workload([ProgramBuilder("e").build(), _recv_from(0, tag=2)], [0, 1])
    with pytest.raises(
        SimulationError,
        match=r"rank 1 waits on recv node 1 \(recv\); message rank 0 -> rank 1 "
        r"\(1000 B, tag 2\) has no matching send",
    ):
        simulate(wl2, topo(("Ring", 2, 50, 500)), params())
    # a send with no receiver completes (ASTRA-sim: the send handler fires on arrival)
    assert simulate(wl, topo(("Ring", 2, 50, 500)), params()).ranks[0].finish_ns == h(1, 1000)


def _recv_from(src, tag):
    b = ProgramBuilder("r")
    b.add(OpKind.RECV, "recv", peer=src, size_bytes=1000, tag=tag, node_id=1)
    return b.build()


def test_collective_issued_by_part_of_a_group_is_a_deadlock():
    a = ProgramBuilder("a")
    a.add(OpKind.COLLECTIVE, "ar", collective=int(CK.ALL_REDUCE), size_bytes=4096, node_id=1)
    wl = Workload([a.build(), ProgramBuilder("idle").build()], [0, 0, 0, 1])
    with pytest.raises(SimulationError, match=r"ranks 0-2 wait on collective node 1 \(ar\), which rank 3 never issued"):
        simulate(wl, topo(("Ring", 4, 50, 500)), params())


def test_subgroup_collective_runs_on_its_members_only():
    # group "1" = ranks {0, 2}: a 2-member ring; messages between 0 and 2 take 2 hops on Ring(4)
    b = ProgramBuilder("g")
    b.add(OpKind.COLLECTIVE, "ar", collective=int(CK.ALL_REDUCE), size_bytes=1 << 20, node_id=1, group="1")
    wl = Workload([b.build(), ProgramBuilder("idle").build()], [0, 1, 0, 1], [Group("1", (0, 2))])
    res = simulate(wl, topo(("Ring", 4, 50, 500)), params())
    # chunk = 1 MiB, message 512 KiB; group rings use the fixed 10 ns bus
    m = (1 << 20) // 2
    expect = 3 * 10 + 2 * h(2, m) + 1 * r(m)
    assert res.ranks[0].finish_ns == res.ranks[2].finish_ns == expect
    assert res.ranks[1].finish_ns == 0


def test_same_inputs_same_outputs():
    wl = Workload([layered(30_000, 1 << 20, layers=3)], [0] * 8)
    a = simulate(wl, topo(("Ring", 8, 50, 500)), params(splits=4, active=2), use_symmetry=False)
    b = simulate(wl, topo(("Ring", 8, 50, 500)), params(splits=4, active=2), use_symmetry=False)
    assert [x.as_dict() for x in a.ranks] == [x.as_dict() for x in b.ranks]


def test_rendezvous_adds_a_handshake_before_each_message():
    # one 1 MB message rank 0 -> rank 2 (2 hops): first the receiver's 8 KiB handshake 2 -> 0,
    # then the data; the receive completes when the data arrives.
    s = ProgramBuilder("s")
    s.add(OpKind.SEND, "send", peer=2, size_bytes=1_000_000, tag=5, node_id=1)
    rv = ProgramBuilder("r")
    rv.add(OpKind.RECV, "recv", peer=0, size_bytes=1_000_000, tag=5, node_id=1)
    wl = Workload([s.build(), rv.build(), ProgramBuilder("i").build()], [0, 2, 1, 2])
    res = simulate(wl, topo(("Ring", 4, 50, 500)), params(), rendezvous=True)
    assert res.ranks[2].finish_ns == h(2, 8192) + h(2, 1_000_000)
    # a ring all-reduce step then costs a handshake too: (2N-2) handshakes on the critical path
    n, size = 8, 1 << 20
    base = simulate(_one_ar(n, size), topo(("Ring", n, 50, 500)), params())
    rdv = simulate(_one_ar(n, size), topo(("Ring", n, 50, 500)), params(), rendezvous=True)
    assert rdv.finish_ns - base.finish_ns == (2 * n - 2) * h(1, 8192)


def _one_ar(n, size):
    from helpers import one_collective

    return one_collective(n, CK.ALL_REDUCE, size)


def test_control_dependencies_order_ops_like_data_dependencies(tmp_path):
    # FeederV3 (ASTRA-sim HEAD) waits on control dependencies too: b starts after a
    from podsim.formats.chakra import Node, NodeType, read_workload, write_trace

    a = Node(id=1, type=NodeType.COMP_NODE, duration_micros=5)
    b = Node(id=2, type=NodeType.COMP_NODE, duration_micros=5, ctrl_deps=[1])
    c = Node(id=3, type=NodeType.COMP_NODE, duration_micros=5)
    c.set_attr("is_cpu_op", True, "bool")
    c.ctrl_deps = [2]
    for r in range(2):
        write_trace(tmp_path / f"w.{r}.et", [a, b, c])
    wl = read_workload(tmp_path / "w")
    res = simulate(wl, topo(("Ring", 2, 50, 500)), params())
    assert res.finish_ns == 15_000  # the CPU op could run beside the GPU ops, but waits on b
    res = simulate(wl, topo(("Ring", 2, 50, 500)), params(), use_ctrl_deps=False)
    assert res.finish_ns == 10_000


def test_control_dependency_cycles_fall_back_to_data_order(tmp_path):
    from podsim.formats.chakra import Node, NodeType, read_workload, write_trace

    a = Node(id=1, type=NodeType.COMP_NODE, duration_micros=5, ctrl_deps=[2])
    b = Node(id=2, type=NodeType.COMP_NODE, duration_micros=5, data_deps=[1])
    for r in range(2):
        write_trace(tmp_path / f"w.{r}.et", [a, b])
    wl = read_workload(tmp_path / "w")
    assert any("control dependencies form cycles" in n for n in wl.programs[0].notes)
    assert simulate(wl, topo(("Ring", 2, 50, 500)), params()).finish_ns == 10_000


def test_metadata_node_waits_for_the_communication_slot():
    # a GPU metadata node that becomes ready while a collective runs is issued only when the
    # collective has released the communication slot; the compute after it waits with it.
    # (ASTRA-sim's HardwareResource source; its binary aborts in Statistics on metadata nodes,
    # so this rule cannot be checked against it.)
    n, size = 4, 1 << 20
    b = ProgramBuilder()
    b.add(OpKind.COLLECTIVE, "ar", collective=int(CK.ALL_REDUCE), size_bytes=size, node_id=1)
    c = b.add(OpKind.COMPUTE, "c", duration_ns=1000, node_id=2)
    m = b.add(OpKind.NOOP, "meta", node_id=3, data_deps=[c])
    b.add(OpKind.COMPUTE, "after", duration_ns=1000, node_id=4, data_deps=[m])
    res = simulate(Workload([b.build()], [0] * n), topo(("Ring", n, 50, 500)), params())
    assert res.finish_ns == ring_ar(n, size) + 1000


def test_deadlock_in_a_subgroup_names_the_missing_member_only():
    a = ProgramBuilder("a")
    a.add(OpKind.COLLECTIVE, "tp_ar", collective=int(CK.ALL_REDUCE), size_bytes=4096, node_id=5, group="1")
    wl = Workload([a.build(), ProgramBuilder("idle").build()], [0, 1, 1, 1], [Group("1", (0, 2))])
    with pytest.raises(
        SimulationError,
        match=r"^simulation cannot finish: rank 0 waits on collective node 5 "
        r"\(tp_ar\), which rank 2 never issued$",
    ):
        simulate(wl, topo(("Ring", 4, 50, 500)), params())
