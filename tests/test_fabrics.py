"""Fabric builders, cluster files, presets and SimAI topology files.

Expected counts are derived in the comments from each fabric's wiring rules.
"""

from __future__ import annotations

import numpy as np
import pytest

from podsim.errors import InputError
from podsim.formats.simai import read_topology, write_topology
from podsim.hardware.cluster import (
    build_fabric,
    cluster_from_dict,
    load_cluster,
    preset_names,
)
from podsim.network.fabric import LinkTier, NodeKind
from podsim.network.routing import Router


def spec(inter: dict, gpn: int = 8, intra: dict | None = None):
    return cluster_from_dict(
        {
            "name": "t",
            "gpus_per_node": gpn,
            "intra_node": intra or {"kind": "nvswitch", "bandwidth": "300 GB/s"},
            "inter_node": inter,
        }
    )


def cables(fab, tier: LinkTier) -> int:
    return int(np.sum(fab.link_tier == tier)) // 2


def test_presets_exist_with_the_issue_names() -> None:
    assert {"dgx-a100-superpod", "dgx-h100", "azure-nd-a100-v4", "gb200-nvl72"} <= set(preset_names())
    h100 = load_cluster("dgx-h100")
    assert h100.intra["bandwidth"] == 450.0  # 450 GB/s per GPU per direction
    assert h100.inter["nic_bandwidth"] == 50.0  # 400 Gb/s = 50 GB/s
    assert load_cluster("dgx-a100-superpod").intra["bandwidth"] == 300.0
    assert load_cluster("azure-nd-a100-v4").inter["nic_bandwidth"] == 25.0  # 200 Gb/s
    nvl = build_fabric(load_cluster("gb200-nvl72"), 72)
    assert nvl.num_servers == 1 and cables(nvl, LinkTier.NIC) == 0  # one NVLink domain


def test_nvswitch_server() -> None:
    # one server of 8 GPUs: 8 GPU-NVSwitch cables at 300 GB/s each way
    fab = build_fabric(spec({"kind": "none"}), 8)
    assert cables(fab, LinkTier.NVLINK) == 8
    assert set(fab.link_bw.tolist()) == {300.0}
    assert len(Router(fab).gpu_route(0, 5)) == 2


def test_two_tier_fat_tree() -> None:
    # radix 8, non-blocking: 4 down + 4 up per leaf; 32 GPUs -> 8 leaves, 4 spines;
    # cables: 32 NIC + 8 x 4 leaf-spine
    fab = build_fabric(spec({"kind": "fat_tree", "nic_bandwidth": "200 Gbps", "radix": 8}, gpn=4), 32)
    assert fab.meta["leaves"] == 8 and fab.meta["spines"] == 4
    assert cables(fab, LinkTier.NIC) == 32 and cables(fab, LinkTier.FABRIC) == 32
    # 64 GPUs need 16 leaves > radix 8: two tiers cannot hold them
    with pytest.raises(InputError, match="exceed a two-tier fat-tree of radix 8 \\(32 endpoints\\)"):
        build_fabric(spec({"kind": "fat_tree", "nic_bandwidth": "200 Gbps", "radix": 8}, gpn=4), 64)


def test_oversubscription() -> None:
    # radix 8 with 3:1: round(8 * 3/4) = 6 down, 2 up: leaf down/up bandwidth = 6/2 = 3
    fab = build_fabric(
        spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "oversubscription": 3}, gpn=4), 24
    )
    leaf = [i for i, n in enumerate(fab.node_name) if n == "leaf0"][0]
    down = fab.link_bw[(fab.link_src == leaf) & (fab.link_tier == LinkTier.NIC)].sum()
    up = fab.link_bw[(fab.link_src == leaf) & (fab.link_tier == LinkTier.FABRIC)].sum()
    assert down / up == 3.0


def test_three_tier_fat_tree_routes_through_core() -> None:
    # radix 4, 3 tiers: pods of 2 leaves x 2 down = 4 GPUs; 16 GPUs -> 4 pods, 4 cores;
    # GPU 0 to GPU 15 (other pod): nic, leaf-agg, agg-core, core-agg, agg-leaf, nic = 6 hops
    fab = build_fabric(
        spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 4, "tiers": 3}, gpn=1, intra={"kind": "pcie"}),
        16,
    )
    assert fab.meta["pods"] == 4 and fab.meta["cores"] == 4
    assert len(Router(fab).gpu_route(0, 15)) == 6


def test_rail_optimized() -> None:
    # 4 servers x 8 GPUs, 2 servers per segment: 2 segments x 8 rail leaves; local GPU k of
    # every server in a segment shares leaf (segment, k); spines = 2 (servers per segment)
    fab = build_fabric(spec({"kind": "rail_optimized", "nic_bandwidth": "200 Gbps", "servers_per_segment": 2}), 32)
    leaf_of = {}
    for i in np.flatnonzero(fab.link_tier == LinkTier.NIC):
        a, b = int(fab.link_src[i]), int(fab.link_dst[i])
        if fab.node_kind[a] == NodeKind.GPU:
            leaf_of[fab.node_name[a]] = fab.node_name[b]
    assert leaf_of["gpu3"] == leaf_of["gpu11"] == "seg0.rail3"  # servers 0 and 1, local 3
    assert leaf_of["gpu19"] == "seg1.rail3"  # server 2, local 3
    assert fab.meta["segments"] == 2 and fab.meta["rails"] == 8
    assert cables(fab, LinkTier.FABRIC) == 16 * 2
    # same rail, same segment: GPU -> leaf -> GPU
    assert len(Router(fab).gpu_route(3, 11)) == 2


def test_ecmp_seed_from_the_cluster_file() -> None:
    # 4 servers on a radix-8 fat-tree with 4 spines: routes between leaves spread over spines;
    # another seed gives another deterministic spread
    def routes(seed: int) -> list[tuple[int, ...]]:
        fab = build_fabric(
            spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "radix": 8, "ecmp_seed": seed}, gpn=4), 32
        )
        r = Router(fab)
        return [r.gpu_route(0, 31, label) for label in range(16)]

    assert routes(1) == routes(1) != routes(2)
    with pytest.raises(InputError, match="inter_node.ecmp_seed: expected an integer"):
        spec({"kind": "fat_tree", "nic_bandwidth": "100 Gbps", "ecmp_seed": "x"})


def test_simai_spectrum_x_counts_match_simai_generator() -> None:
    # SimAI's Rail_Opti_SingleToR_16g_8gps_200Gbps file: "34 8 2 16 96": 16 GPUs + 2
    # NVSwitches + 8 ToRs + 8 spines; 16 NVLink + 16 NIC + 8x8 ToR-spine cables
    fab = build_fabric(
        spec(
            {"kind": "spectrum-x", "nic_bandwidth": "200 Gbps", "spines": 8},
            intra={"kind": "nvswitch", "bandwidth": "900 Gbps"},
        ),
        16,
    )
    assert fab.num_nodes == 34 and fab.num_links // 2 == 96


def test_simai_hpn_dual_plane_and_dcn() -> None:
    # HPN dual ToR, dual plane, 16 GPUs: 2 banks x 8 rail ToRs; 120 spines split 60/60, each
    # ToR on the 60 of its plane: 16 x 60 fabric cables, 2 NIC cables per GPU
    fab = build_fabric(spec({"kind": "alibaba-hpn", "dual_plane": True}), 16)
    assert cables(fab, LinkTier.NIC) == 32 and cables(fab, LinkTier.FABRIC) == 16 * 60
    # DCN+ single ToR: 64 consecutive GPUs per ToR: 16 GPUs on one ToR, 8 spines
    dcn = build_fabric(spec({"kind": "dcn+"}), 16)
    assert dcn.meta["tors"] == 1 and cables(dcn, LinkTier.FABRIC) == 8
    with pytest.raises(InputError, match="exceed the capacity of one dcn\\+ pod \\(512\\)"):
        build_fabric(spec({"kind": "dcn+"}), 1024)
    with pytest.raises(InputError, match="dual_plane needs"):
        build_fabric(spec({"kind": "dcn+", "dual_plane": True}), 16)


def test_torus_and_optical_mesh() -> None:
    # 4x4x2 torus: sizes 4 wrap (2 cables per GPU per dim), size 2 does not: per GPU
    # 2 + 2 + 1 neighbours; cables = 32 x 5 / 2 = 80
    fab = build_fabric(spec({"kind": "torus", "dims": [4, 4, 2], "bandwidth": "50 GB/s"}, gpn=32), 32)
    assert cables(fab, LinkTier.FABRIC) == 80
    assert fab.forwards[fab.gpus].all()
    assert len(Router(fab).gpu_route(0, 2)) == 2  # two steps along dimension 0
    # TrioSim optical mesh 2 x 8: 2 x 7 row links + 8 column links, 64 GB/s, 20 ns per hop
    mesh = build_fabric(spec({"kind": "optical_mesh", "rows": 2}, gpn=16), 16)
    assert cables(mesh, LinkTier.OPTICAL) == 22
    assert set(mesh.link_bw.tolist()) == {64.0} and set(mesh.link_lat.tolist()) == {20.0}
    with pytest.raises(InputError, match="a 4x4 torus holds 16 GPUs, not 32"):
        build_fabric(spec({"kind": "torus", "dims": [4, 4]}, gpn=32), 32)


def test_cluster_file_errors(tmp_path) -> None:
    with pytest.raises(
        InputError, match="inter_node.nic_bandwith: unknown key 'nic_bandwith'; did you mean 'nic_bandwidth'"
    ):
        spec({"kind": "fat_tree", "nic_bandwith": "200 Gbps"})
    with pytest.raises(InputError, match="inter_node.kind: unknown kind 'fattree'; did you mean 'fat_tree'"):
        spec({"kind": "fattree"})
    with pytest.raises(InputError, match="unknown bandwidth unit"):
        spec({"kind": "fat_tree", "nic_bandwidth": "200 parsecs"})
    with pytest.raises(InputError, match="need more than one server"):
        build_fabric(spec({"kind": "none"}), 16)
    bad = tmp_path / "c.yaml"
    bad.write_text("name: x\ngpus_per_node: [8\n")
    with pytest.raises(InputError, match="c.yaml: line 3: not valid YAML"):
        load_cluster(str(bad))
    with pytest.raises(InputError, match="unknown cluster preset 'dgx-a100'; did you mean 'dgx-a100-superpod'"):
        load_cluster("dgx-a100")


def test_simai_topology_round_trip(tmp_path) -> None:
    fab = build_fabric(load_cluster("dgx-a100-superpod"), 16)
    path = tmp_path / "topo.txt"
    write_topology(fab, path)
    head = path.read_text().splitlines()[0].split()
    # 16 GPUs + 2 NVSwitches + 8 rail leaves + 2 spines (non-blocking: as many uplinks as the
    # 2 servers' downlinks per leaf); 16 NVLink + 16 NIC + 8 x 2 leaf-spine cables
    assert head == ["28", "8", "2", "10", "48", "A100-SXM4-80GB"]
    back = read_topology(path)
    assert back.num_gpus == 16 and back.num_links == fab.num_links
    assert sorted(back.link_bw.tolist()) == pytest.approx(sorted(fab.link_bw.tolist()))
    assert sorted(back.link_lat.tolist()) == pytest.approx(sorted(fab.link_lat.tolist()))


def test_simai_topology_reads_simai_units(tmp_path) -> None:
    # the head of SimAI's own file: 900 Gbps = 112.5 GB/s, 0.000025 ms = 25 ns
    p = tmp_path / "t.txt"
    p.write_text(
        "4 2 1 1 4 H100\n2 3\n0 2 900Gbps 0.000025ms 0\n1 2 900Gbps 0.000025ms 0\n"
        "0 3 200Gbps 0.0005ms 0\n1 3 200Gbps 0.0005ms 0\n"
    )
    fab = read_topology(p)
    assert fab.gpus.tolist() == [0, 1] and fab.gpu_type == "H100"
    nv = fab.link_tier == LinkTier.NVLINK
    assert set(fab.link_bw[nv].tolist()) == {112.5} and set(fab.link_lat[nv].tolist()) == {25.0}
    assert set(fab.link_bw[fab.link_tier == LinkTier.NIC].tolist()) == {25.0}
    # NVLink (50 ns) beats the NIC path (1000 ns) between the two GPUs
    assert [fab.link_name(i) for i in Router(fab).gpu_route(0, 1)] == ["gpu0->nvsw2", "nvsw2->gpu1"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("4 2 1 1\n", "line 1: expected '<nodes>"),
        ("4 2 1 1 4 H100\n2\n", "line 2: expected 2 ids"),
        ("4 2 1 1 2 H100\n2 3\n0 2 900Gbps 0.000025ms 0\n", "line 1: the header declares 2 links, the file has 1"),
        ("4 2 1 1 1 H100\n2 3\n0 2 900Gbits 0.000025ms 0\n", "line 3: bad rate '900Gbits'"),
        ("4 2 1 1 1 H100\n2 3\n0 2 900Gbps soon 0\n", "line 3: bad delay 'soon'"),
        ("4 2 1 1 1 H100\n2 3\n0 9 900Gbps 1ns 0\n", "line 3: node id 9 is outside 0..3"),
        ("4 2 1 1 1 H100\n2 3\n0 2 900Gbps 1ns\n", "line 3: expected '<src> <dst>"),
        ("4 2 1 1 1 H100\n2 3\n0 2 900Gbps 1ns 0\n", "disconnected: gpu0 cannot reach gpu1"),
    ],
)
def test_simai_topology_errors(tmp_path, text, message) -> None:
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError, match=message.replace("(", "\\(").replace(")", "\\)").replace(".", "\\.")):
        read_topology(p)


def test_cli_fabric_and_collective(tmp_path, capsys) -> None:
    from podsim.cli import main

    topo = tmp_path / "topo.txt"
    assert main(["fabric", "--cluster", "dgx-h100", "--gpus", "16", "--simai", str(topo)]) == 0
    out = capsys.readouterr().out
    assert "16 GPUs in 2 servers of 8" in out and "16 cables x 450 GB/s" in out
    assert topo.read_text().split("\n")[0].split()[:2] == ["28", "8"]
    # the written topology is a cluster too
    js = tmp_path / "ar.json"
    assert (
        main(
            [
                "collective",
                "all_reduce",
                "--cluster",
                str(topo),
                "--gpus",
                "16",
                "-b",
                "1K",
                "-e",
                "1M",
                "-f",
                "32",
                "--json",
                str(js),
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "#       size" in table and "busbw" in table
    import json

    rows = json.loads(js.read_text())["rows"]
    assert [r["bytes"] for r in rows] == [1024, 32768, 1048576]
    assert main(["collective", "all_reduce", "--cluster", "dgx-h100"]) == 2
    assert "missing --gpus" in capsys.readouterr().err
