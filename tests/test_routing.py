"""The router (issue #29: distances per twin class, routes in arrays) takes exactly the routes
of the brute-force reference router (tests/routing_reference.py: all-pairs distances, every
out-link scanned), on presets, every builder's fabrics, direct-connect fabrics, SimAI topology
files and random irregular fabrics (parallel links, ties, forwarding GPUs, unreachable pairs),
with ECMP and adaptive routing; one route at a time and in batches."""

from __future__ import annotations

import random

import numpy as np
import pytest

from podsim.errors import InputError
from podsim.formats.simai import read_topology, write_topology
from podsim.hardware.cluster import build_fabric, cluster_from_dict, load_cluster
from podsim.network.fabric import FabricBuilder, LinkTier, NodeKind
from podsim.network.route_arrays import mix64_array
from podsim.network.routing import Router, mix64, routing_tables
from routing_reference import ReferenceRouter


def spec(inter: dict, gpn: int = 8, intra: dict | None = None):
    return cluster_from_dict(
        {
            "name": "t",
            "gpus_per_node": gpn,
            "intra_node": intra or {"kind": "nvswitch", "bandwidth": "300 GB/s"},
            "inter_node": inter,
        }
    )


def _route_or_error(r, a: int, b: int, label: int, load=None):
    try:
        return r.route(a, b, label, load)
    except InputError as e:
        return str(e)


def same_routes(fab, pairs: list[tuple[int, int]], seeds=(0, 7), adaptive=None, labels=(0, 1, 6)) -> None:
    """Every route, adaptive read set, distance vector and batch agrees with the reference."""
    rnd = random.Random(len(pairs))
    for seed in seeds:
        ref = ReferenceRouter(fab, seed=seed, adaptive=adaptive)
        new = Router(fab, seed=seed, adaptive=adaptive)
        for a, b in pairs:
            for label in labels:
                assert _route_or_error(new, a, b, label) == _route_or_error(ref, a, b, label), (fab.name, a, b)
            try:
                want = ref.adaptive_reads(a, b)
            except InputError:
                continue
            assert new.adaptive_reads(a, b) == want
        if new.adaptive:  # adaptive choices against random flow counts
            load = [rnd.randrange(4) for _ in range(fab.num_links)]
            for a, b in pairs[:100]:
                assert _route_or_error(new, a, b, 3, load) == _route_or_error(ref, a, b, 3, load)
        for d in sorted({b for _, b in pairs})[:6]:
            assert np.array_equal(new.distances_to(d), ref.distances_to(d))
        ok = [(a, b) for a, b in pairs if not isinstance(_route_or_error(ref, a, b, 0), str)]
        if not ok:
            continue
        src = np.array([a for a, _ in ok] * 3)
        dst = np.array([b for _, b in ok] * 3)
        labels_ = np.array([rnd.randrange(9) for _ in range(len(src))])
        want = ReferenceRouter(fab, seed=seed, adaptive=adaptive).batch_paths(src, dst, labels_)
        got = Router(fab, seed=seed, adaptive=adaptive).batch_paths(src, dst, labels_)
        assert np.array_equal(got[0], want[0])  # the padded route matrix, its width too
        assert np.array_equal(got[1], want[1])
        assert np.array_equal(got[2], want[4])  # which flows choose adaptively
        assert got[3].tolist() == sorted(want[5])  # the links those choices read


def some_pairs(fab, k: int = 150, seed: int = 1) -> list[tuple[int, int]]:
    rnd = random.Random(seed)
    g = fab.gpus.tolist()
    return [(rnd.choice(g), rnd.choice(g)) for _ in range(k)]


@pytest.mark.parametrize(
    "preset, gpus",
    [
        ("dgx-h100", 128),  # rails over 16 servers (one segment), adaptive
        ("dgx-a100-superpod", 48),
        ("azure-nd-a100-v4", 32),
        ("gb200-nvl72", 144),
        ("mi300x-platform", 32),  # NVLink-style direct GPU mesh inside the server
        ("mi300x-platform", 8),  # one server: no node forwards at all
        ("pcie-h100", 8),
        ("aws-g6e", 32),  # PCIe switches under a CPU root
    ],
)
def test_presets_route_as_the_reference(preset: str, gpus: int) -> None:
    fab = build_fabric(load_cluster(preset), gpus)
    same_routes(fab, some_pairs(fab))
    same_routes(fab, some_pairs(fab, 60, 2), seeds=(3,), adaptive=not Router(fab).adaptive)


def test_rails_over_many_segments_route_as_the_reference() -> None:
    # 2 servers per segment: 4 segments of 8 rail leaves, 2 spines; ECMP and adaptive
    fab = build_fabric(spec({"kind": "rail_optimized", "nic_bandwidth": "200 Gbps", "servers_per_segment": 2}), 64)
    g = fab.gpus.tolist()
    pairs = [(a, b) for a in g[::5] for b in g[::3]]
    same_routes(fab, pairs, seeds=(0,))
    same_routes(fab, pairs[:200], seeds=(5,), adaptive=True)


@pytest.mark.parametrize(
    "inter, gpn, intra, gpus",
    [
        ({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 4, "tiers": 3}, 1, {"kind": "pcie"}, 16),
        ({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "tiers": 3, "oversubscription": 3}, 2, None, 64),
        ({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "routing": "adaptive"}, 4, None, 32),
        ({"kind": "spectrum-x", "nic_bandwidth": "200 Gbps", "spines": 8}, 8, None, 16),
        ({"kind": "alibaba-hpn", "dual_plane": True, "spines": 6}, 8, None, 32),
        ({"kind": "alibaba-hpn", "nics_per_switch": 2, "spines": 3}, 4, None, 32),
        ({"kind": "dcn+", "dual_tor": True, "nics_per_switch": 4, "spines": 3}, 4, None, 32),
        ({"kind": "torus", "dims": [4, 4, 2], "bandwidth": "50 GB/s"}, 32, None, 32),
        ({"kind": "torus", "dims": [5, 3], "bandwidth": "50 GB/s"}, 15, None, 15),
        ({"kind": "optical_mesh", "rows": 2}, 16, None, 16),
        (
            {"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8},
            4,
            {"kind": "nvswitch", "bandwidth": "300 GB/s", "switches": 3},
            32,
        ),
    ],
)
def test_builders_route_as_the_reference(inter: dict, gpn: int, intra: dict | None, gpus: int) -> None:
    fab = build_fabric(spec(inter, gpn, intra), gpus)
    g = fab.gpus.tolist()
    pairs = [(a, b) for a in g for b in g] if gpus <= 16 else some_pairs(fab, 200)
    same_routes(fab, pairs)
    same_routes(fab, pairs[:80], seeds=(2,), adaptive=True)


def test_simai_topology_file_routes_as_the_reference(tmp_path) -> None:
    path = tmp_path / "topo.txt"
    write_topology(build_fabric(load_cluster("dgx-a100-superpod"), 32), path)
    fab = read_topology(path)
    same_routes(fab, some_pairs(fab, 120))


def random_fabric(seed: int, forwarding_gpus: bool = False):
    """An irregular fabric: GPUs on random switches, random switch links with latencies drawn
    from a few values (ties), parallel links, one-way links; possibly forwarding GPUs."""
    rnd = random.Random(seed)
    b = FabricBuilder(f"random{seed}", 1)
    gpus = [b.add_gpu(forwards=forwarding_gpus and rnd.random() < 0.5) for _ in range(rnd.randrange(6, 14))]
    sw = [b.add_node(NodeKind.SWITCH, f"s{i}") for i in range(rnd.randrange(3, 9))]
    lats = [0.0, 100.0, 100.4, 200.0, 300.0]
    for g in gpus:
        for s in rnd.sample(sw, rnd.choice((1, 1, 2))):
            b.add_duplex(g, s, 1.0, rnd.choice(lats), LinkTier.NIC)
    for _ in range(rnd.randrange(len(sw), 3 * len(sw))):
        x, y = rnd.sample(sw, 2)
        if rnd.random() < 0.2:
            b.add_link(x, y, 1.0, rnd.choice(lats), LinkTier.FABRIC)  # one way
        else:
            b.add_duplex(x, y, 1.0, rnd.choice(lats), LinkTier.FABRIC, count=rnd.choice((1, 2)))
        if rnd.random() < 0.15:
            b.add_link(x, y, 2.0, rnd.choice(lats), LinkTier.FABRIC)  # a parallel link
    for _ in range(rnd.randrange(3)):
        x, y = rnd.sample(gpus, 2)
        b.add_duplex(x, y, 1.0, rnd.choice(lats), LinkTier.NVLINK)
    return b.build(check_connected=False)


def wide_fabric(seed: int):
    """Leaves with GPUs under 16 spines, each leaf on a random 14 to 16 of them (mostly at
    100 ns, some at 200: wide equal-cost choices of spines that are and are not twins), a few
    GPUs on two leaves, a spine with a GPU of its own."""
    rnd = random.Random(seed)
    b = FabricBuilder(f"wide{seed}", 1)
    gpus = [b.add_gpu() for _ in range(10)]
    leaves = [b.add_node(NodeKind.SWITCH, f"l{i}") for i in range(5)]
    spines = [b.add_node(NodeKind.SWITCH, f"s{i}") for i in range(16)]
    for g in gpus:
        for lf in rnd.sample(leaves, rnd.choice((1, 1, 2))):
            b.add_duplex(g, lf, 1.0, 100.0, LinkTier.NIC)
    for lf in leaves:
        for sp in rnd.sample(spines, rnd.randrange(14, 17)):
            b.add_duplex(lf, sp, 1.0, 200.0 if rnd.random() < 0.1 else 100.0, LinkTier.FABRIC)
    b.add_duplex(gpus[0], spines[3], 1.0, 100.0, LinkTier.NIC)
    return b.build(check_connected=False)


@pytest.mark.parametrize("seed", range(4))
def test_wide_choices_route_as_the_reference(seed: int) -> None:
    fab = wide_fabric(seed)
    g = fab.gpus.tolist()
    pairs = [(a, b) for a in g for b in g]
    same_routes(fab, pairs, seeds=(seed,), adaptive=True, labels=(1,))
    same_routes(fab, pairs[::2], seeds=(seed,), adaptive=False, labels=(0, 3))


@pytest.mark.parametrize("seed", range(12))
def test_random_fabrics_route_as_the_reference(seed: int) -> None:
    fab = random_fabric(seed, forwarding_gpus=seed % 3 == 2)
    g = fab.gpus.tolist()
    same_routes(fab, [(a, b) for a in g for b in g], seeds=(seed,), labels=(0, 4))
    same_routes(fab, [(a, b) for a in g for b in g][::3], seeds=(seed + 1,), adaptive=True, labels=(2,))


def test_regular_fabrics_have_few_twin_classes() -> None:
    # DGX H100 rails at 1,024 GPUs: every NVSwitch (no forwarding neighbour), every rail leaf
    # (one link to each of the 32 spines), every spine: 3 classes for 128 + 32 + 32 switches
    t = routing_tables(build_fabric(load_cluster("dgx-h100"), 1024))
    assert t.num_classes == 3
    # three tiers, radix 8 (4 down, 4 up): 4 pods of 4 leaves, 4 aggregation switches and 16
    # cores in 4 groups; the leaves of a pod are twins, an aggregation switch is alone (its
    # pod's leaves, its core group), the cores of a group are twins: 4 + 16 + 4 classes, and
    # each GPU's NIC... GPUs do not forward (no class)
    fab = build_fabric(spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "tiers": 3}, 1), 64)
    assert routing_tables(fab).num_classes == 4 + 16 + 4 + 1  # + the servers' NVSwitches


def test_mix64_array_is_bit_identical() -> None:
    rnd = random.Random(5)
    cols = [[rnd.randrange(-(2**63), 2**63) for _ in range(200)] for _ in range(4)]
    seed = 2**70 + 3  # a seed beyond 64 bits hashes as its low 64 bits
    want = [mix64(a, b, c, seed, d) for a, b, c, d in zip(*cols)]
    got = mix64_array(*(np.array(c, dtype=np.int64) for c in cols[:3]), seed, np.array(cols[3], dtype=np.int64))
    assert got.tolist() == want


def test_routes_in_blocks_are_the_same(monkeypatch) -> None:
    # the batch router walks its rows, and explores adaptive read sets, in blocks of rows (at a
    # million GPUs), and routes small batches one by one: blocks of 7 and 5 rows, batches of up
    # to 3 rows one by one, give the reference's routes and read sets
    import podsim.network.route_arrays as route_arrays
    import podsim.network.routing as routing

    monkeypatch.setattr(routing, "_WALK_BLOCK", 7)
    monkeypatch.setattr(routing, "_SCALAR_ROWS", 3)
    monkeypatch.setattr(route_arrays, "_READS_BLOCK", 5)
    fab = build_fabric(spec({"kind": "rail_optimized", "nic_bandwidth": "200 Gbps", "servers_per_segment": 2}), 64)
    same_routes(fab, some_pairs(fab, 120), seeds=(0,), adaptive=True)
    same_routes(fab, some_pairs(fab, 120), seeds=(4,), adaptive=False)


def test_arrays_and_one_by_one_take_the_same_routes(monkeypatch) -> None:
    # the same batches routed all in arrays (no batch is small) and all one by one
    import podsim.network.routing as routing

    fab = build_fabric(spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "tiers": 3}, 2), 64)
    for rows in (0, 10_000):
        monkeypatch.setattr(routing, "_SCALAR_ROWS", rows)
        same_routes(fab, some_pairs(fab, 150), seeds=(1,), adaptive=True)
        same_routes(fab, some_pairs(fab, 150), seeds=(2,), adaptive=False)
