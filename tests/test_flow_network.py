"""The flow backend against hand-derived max-min cases.

Every expected figure is derived in the comment next to it from the max-min definition
(progressive filling) and ``time = latency + bytes / rate``; none comes from running podsim.
"""

from __future__ import annotations

import numpy as np
import pytest

from podsim.engine.events import EventQueue
from podsim.errors import InputError
from podsim.network.fabric import FabricBuilder, LinkTier, NodeKind
from podsim.network.flow import FlowNetwork, max_min_rates
from podsim.network.routing import Router, mix64


def csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.cumsum([0] + [len(p) for p in paths])
    links = np.asarray([x for p in paths for x in p], dtype=np.int64)
    return indptr, links


# ---- the solver alone --------------------------------------------------------------------


def test_equal_share_on_one_link() -> None:
    # three flows on one link of capacity 3: each gets 1
    rates = max_min_rates(*csr([[0], [0], [0]]), np.array([3.0]))
    assert rates.tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_textbook_two_links() -> None:
    # L0 cap 1 carries A and B; L1 cap 2 carries B and C.  Filling: level 0.5 fills L0
    # (A, B frozen at 0.5); L1 then has 2 - 0.5 = 1.5 left for C alone.
    rates = max_min_rates(*csr([[0], [0, 1], [1]]), np.array([1.0, 2.0]))
    assert rates.tolist() == pytest.approx([0.5, 0.5, 1.5])


def test_three_levels() -> None:
    # L0 cap 1: A, B, C.  L1 cap 3: C, D.  L2 cap 10: D, E.
    # level 1/3 fills L0 (A, B, C = 1/3); L1 has 3 - 1/3 = 8/3 for D; L2 gives E 10 - 8/3.
    rates = max_min_rates(*csr([[0], [0], [0, 1], [1, 2], [2]]), np.array([1.0, 3.0, 10.0]))
    assert rates.tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 8 / 3, 22 / 3])


def test_per_flow_cap() -> None:
    # one link of 4 shared by two flows, one capped at 1: the other gets 3
    rates = max_min_rates(*csr([[0], [0]]), np.array([4.0]), np.array([1.0, np.inf]))
    assert rates.tolist() == pytest.approx([1.0, 3.0])


def test_the_small_solver_gives_the_same_floats() -> None:
    # the plain-Python solver for small components must give the numpy solver's floats exactly
    # (the array network's answers equal the per-flow network's to the ns): the hand-derived
    # cases above, then random components with shared links, caps and unrouted flows
    from podsim.network.flow.maxmin import max_min_rates_small

    cases = [
        ([[0], [0], [0]], [3.0], None),
        ([[0], [0, 1], [1]], [1.0, 2.0], None),
        ([[0], [0], [0, 1], [1, 2], [2]], [1.0, 3.0, 10.0], None),
        ([[0], [0]], [4.0], [1.0, np.inf]),
    ]
    expected = [[1.0, 1.0, 1.0], [0.5, 0.5, 1.5], [1 / 3, 1 / 3, 1 / 3, 8 / 3, 22 / 3], [1.0, 3.0]]
    for (paths, cap, fc), want in zip(cases, expected):
        indptr, links = csr(paths)
        assert max_min_rates_small(indptr.tolist(), links.tolist(), cap, fc) == pytest.approx(want)
    rng = np.random.default_rng(3)
    for _ in range(3000):
        nf, nl = int(rng.integers(1, 17)), int(rng.integers(1, 12))
        paths = [rng.choice(nl, size=int(rng.integers(0, min(nl, 5) + 1)), replace=False).tolist() for _ in range(nf)]
        cap = rng.choice([100.0, 50.0, 25.0, 400.0 / 3, 0.1], size=nl)
        fc = rng.choice([np.inf, 10.0, 30.0, 100.0 / 3], size=nf) if rng.random() < 0.4 else None
        indptr, links = csr(paths)
        want = max_min_rates(indptr, links, cap, fc).tolist()
        assert (
            max_min_rates_small(indptr.tolist(), links.tolist(), cap.tolist(), None if fc is None else fc.tolist())
            == want
        )


# ---- fabrics built by hand -----------------------------------------------------------------


def star(n: int, bw: float = 1.0, lat: float = 0.0, up_bw: float | None = None):
    """``n`` GPUs on one switch; GPU uplinks ``up_bw`` (default ``bw``), downlinks ``bw``."""
    b = FabricBuilder("star", gpus_per_node=1)
    gpus = [b.add_gpu() for _ in range(n)]
    sw = b.add_node(NodeKind.SWITCH, "sw")
    for g in gpus:
        b.add_link(g, sw, up_bw or bw, lat, LinkTier.NIC)
        b.add_link(sw, g, bw, lat, LinkTier.NIC)
    return b.build()


def run_flows(fabric, flows, **kw):
    """Start ``(t_start, src, dst, size)`` flows; return each one's arrival time."""
    q = EventQueue()
    net = FlowNetwork(fabric, q, **kw)
    done: dict[int, int] = {}
    for i, (t, s, d, size) in enumerate(flows):

        def go(_a, i=i, s=s, d=d, size=size):
            net.start(s, d, size, lambda i=i: done.__setitem__(i, q.now))

        q.schedule(t, go)
    q.run()
    return [done[i] for i in range(len(flows))], net


def test_lone_flow_latency_plus_size_over_bandwidth() -> None:
    # 2 hops of 100 ns each, 1 byte/ns: 1000 bytes arrive at 200 + 1000
    times, _ = run_flows(star(2, bw=1.0, lat=100.0), [(0, 0, 1, 1000)])
    assert times == [1200]


def test_incast() -> None:
    # 4 senders to GPU 4: its downlink (1 B/ns) is shared 4 ways -> 0.25 B/ns each;
    # 1000 bytes take 4000 ns
    times, net = run_flows(star(5), [(0, s, 4, 1000) for s in range(4)])
    assert times == [4000] * 4
    stats = net.link_stats()
    down = [i for i in range(net.fabric.num_links) if net.fabric.link_name(i) == "sw->gpu4"][0]
    assert stats.peak_flows[down] == 4
    assert stats.bytes[down] == 4000
    assert stats.busy_ns[down] == 4000


def test_unequal_sizes_release_bandwidth() -> None:
    # two flows share a 1 B/ns downlink: 0.5 each.  The 1000-byte one ends at 2000; the
    # 3000-byte one has 2000 left and then runs at 1 B/ns: ends at 4000
    times, _ = run_flows(star(3), [(0, 0, 2, 1000), (0, 1, 2, 3000)])
    assert times == [2000, 4000]


def test_late_arrival() -> None:
    # A (10 kB) alone from 0 to 4000 sends 4000 B; B (2 kB) joins at 4000, both at 0.5 B/ns;
    # B ends at 8000; A has 10000 - 4000 - 2000 = 4000 left at 1 B/ns: ends at 12000
    times, _ = run_flows(star(3), [(0, 0, 2, 10_000), (4000, 1, 2, 2000)])
    assert times == [12_000, 8000]


def test_full_duplex_links_do_not_contend() -> None:
    # 0->1 and 1->0 use opposite directions of the same cables: each runs at full speed
    times, _ = run_flows(star(2), [(0, 0, 1, 1000), (0, 1, 0, 1000)])
    assert times == [1000, 1000]


def test_bottleneck_is_the_slower_hop() -> None:
    # uplinks 0.5 B/ns, downlinks 1 B/ns: a lone flow runs at 0.5
    times, _ = run_flows(star(2, bw=1.0, up_bw=0.5), [(0, 0, 1, 1000)])
    assert times == [2000]


def two_leaf(hosts_per_leaf: int, spines: int, host_bw: float, up_bw: float):
    """Two leaves, each with hosts; each leaf has one cable to each spine."""
    b = FabricBuilder("leafspine", gpus_per_node=1)
    gpus = [b.add_gpu() for _ in range(2 * hosts_per_leaf)]
    leaves = [b.add_node(NodeKind.SWITCH, f"leaf{i}") for i in range(2)]
    sp = [b.add_node(NodeKind.SWITCH, f"spine{i}") for i in range(spines)]
    for i, g in enumerate(gpus):
        b.add_duplex(g, leaves[i // hosts_per_leaf], host_bw, 0.0, LinkTier.NIC)
    for lf in leaves:
        for s in sp:
            b.add_duplex(lf, s, up_bw, 0.0, LinkTier.FABRIC)
    return b.build()


def test_shared_uplink() -> None:
    # 4 hosts on leaf 0 each send to a distinct host on leaf 1 through ONE spine whose
    # uplink carries 2 B/ns: 4 flows share it -> 0.5 each (< host links of 1):
    # 1000 bytes take 2000 ns
    fab = two_leaf(4, 1, 1.0, 2.0)
    times, net = run_flows(fab, [(0, i, 4 + i, 1000) for i in range(4)])
    assert times == [2000] * 4
    up = [i for i in range(fab.num_links) if fab.link_name(i) == "leaf0->spine0"][0]
    assert net.link_stats().peak_flows[up] == 4


def test_two_rings_crossing_one_spine() -> None:
    # Hosts 0..3 on leaf 0, 4..7 on leaf 1, one spine, uplinks 1 B/ns, host links 4 B/ns.
    # Ring A = (0, 4) both ways, ring B = (1, 5) both ways: flows 0->4 and 1->5 share
    # leaf0->spine0 and spine0->leaf1 (0.5 each); 4->0 and 5->1 share the opposite
    # direction (0.5 each).  A third intra-leaf ring (2, 3) crosses no spine: it runs at 4.
    fab = two_leaf(4, 1, 4.0, 1.0)
    flows = [(0, 0, 4, 1000), (0, 4, 0, 1000), (0, 1, 5, 1000), (0, 5, 1, 1000), (0, 2, 3, 1000), (0, 3, 2, 1000)]
    times, _ = run_flows(fab, flows)
    assert times == [2000, 2000, 2000, 2000, 250, 250]


# ---- routing -------------------------------------------------------------------------------


def test_ecmp_spreads_labels_and_is_deterministic() -> None:
    fab = two_leaf(1, 8, 1.0, 1.0)
    r = Router(fab, seed=0)
    spines = {fab.link_dst[r.gpu_route(0, 1, label)[1]] for label in range(64)}
    assert len(spines) >= 6  # 64 labels over 8 equal paths reach (almost) all of them
    again = Router(fab, seed=0)
    assert [r.gpu_route(0, 1, k) for k in range(16)] == [again.gpu_route(0, 1, k) for k in range(16)]
    other = Router(fab, seed=1)
    assert [r.gpu_route(0, 1, k) for k in range(16)] != [other.gpu_route(0, 1, k) for k in range(16)]
    assert mix64(1, 2, 3) == mix64(1, 2, 3) != mix64(1, 2, 4)


def test_gpus_are_not_transit_hops() -> None:
    # gpu0 - gpu1 - gpu2 in a line of direct links: gpu1 does not forward, so 0 cannot reach 2
    b = FabricBuilder("line", gpus_per_node=1)
    g = [b.add_gpu() for _ in range(3)]
    b.add_duplex(g[0], g[1], 1.0, 0.0, LinkTier.NVLINK)
    b.add_duplex(g[1], g[2], 1.0, 0.0, LinkTier.NVLINK)
    with pytest.raises(InputError, match="disconnected"):
        b.build()
    fab = b.build(check_connected=False)
    with pytest.raises(InputError, match="no route from gpu0 to gpu2"):
        Router(fab).gpu_route(0, 2)


def test_forwarding_gpus_route_through_each_other() -> None:
    b = FabricBuilder("line", gpus_per_node=1)
    g = [b.add_gpu(forwards=True) for _ in range(3)]
    b.add_duplex(g[0], g[1], 1.0, 10.0, LinkTier.NVLINK)
    b.add_duplex(g[1], g[2], 1.0, 10.0, LinkTier.NVLINK)
    fab = b.build()
    assert len(Router(fab).gpu_route(0, 2)) == 2
    times, _ = run_flows(fab, [(0, 0, 2, 100)])
    assert times == [120]


def test_load_samples_record_rise_and_fall() -> None:
    # one flow of 1000 B at 1 B/ns on 2 links: load 1.0 from 0, back to 0 at 1000
    _times, net = run_flows(star(2), [(0, 0, 1, 1000)], record_load=True)
    by_link: dict[int, list[tuple[int, float]]] = {}
    for t, link, load in net.load_samples:
        by_link.setdefault(link, []).append((t, load))
    assert sorted(by_link.values()) == [[(0, 1.0), (1000, 0.0)]] * 2
