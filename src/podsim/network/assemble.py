"""Assemble a cluster fabric: servers with an internal fabric, joined by a scale-out fabric.

Each server's GPUs are added in rank order, then wired inside the server (``intra``), then
every GPU's NIC port (one NIC per GPU) is attached to the scale-out fabric (``inter``).  The
section dicts are a cluster file's ``intra_node`` / ``inter_node`` sections with units already
converted (bytes per ns, ns); see :mod:`podsim.hardware.cluster`.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from .direct import attach_optical_mesh, attach_torus_cluster
from .fabric import FabricBuilder, LinkTier, NodeKind
from .templates import attach_simai_template

DEFAULT_NIC_LATENCY_NS = 500.0
DEFAULT_SWITCH_LATENCY_NS = 300.0


def cluster(b: FabricBuilder, num_gpus: int, gpus_per_node: int, intra: dict, inter: dict) -> None:
    """Add ``num_gpus`` GPUs in servers of ``gpus_per_node`` and wire them."""
    kind = inter["kind"]
    if kind in ("torus", "optical_mesh"):
        _direct(b, num_gpus, inter)
        return
    count = num_gpus // gpus_per_node
    if intra["kind"] == "nvswitch":
        servers = _nvswitch_servers(b, count, gpus_per_node, intra)
    else:
        rows = []
        for s in range(count):
            gpus = [b.add_gpu() for _ in range(gpus_per_node)]
            rows.append(gpus)
            add_intra(b, s, gpus, intra)
        servers = np.asarray(rows, dtype=np.int64).reshape(count, gpus_per_node)
    b.meta["intra_node"] = intra["kind"]
    b.meta["inter_node"] = kind
    b.meta["routing"] = inter.get("routing", "ecmp")
    b.meta["ecmp_seed"] = int(inter.get("ecmp_seed", 0))
    if kind == "none" or len(servers) == 1:
        return
    if kind == "fat_tree":
        attach_fat_tree(b, servers.ravel(), inter)
    elif kind == "rail_optimized":
        attach_rail_optimized(b, servers, inter)
    else:
        attach_simai_template(b, servers.tolist(), kind, inter)


def _nvswitch_servers(b: FabricBuilder, count: int, gpn: int, intra: dict) -> np.ndarray:
    """``count`` servers of ``gpn`` GPUs on NVSwitches, in arrays: the nodes and links
    :func:`add_intra` adds server by server (each server's GPUs, then its switches; every
    GPU's cable to every switch), in the same order.  Returns the GPUs' node ids per server."""
    k = int(intra.get("switches", 1))
    if k < 1:
        raise InputError(f"expected at least 1 NVSwitch, got {k}", where="intra_node.switches")
    lat = float(intra.get("latency", 100.0))
    bw = intra["bandwidth"] / k
    per = gpn + k
    kinds = np.tile(np.array([int(NodeKind.GPU)] * gpn + [int(NodeKind.NVSWITCH)] * k), count)
    rank0 = b.num_gpus
    if k == 1:
        names = [x for s in range(count) for x in [f"gpu{rank0 + s * gpn + j}" for j in range(gpn)] + [f"nvsw{s}"]]
    else:
        names = [
            x
            for s in range(count)
            for x in [f"gpu{rank0 + s * gpn + j}" for j in range(gpn)] + [f"nvsw{s}.{i}" for i in range(k)]
        ]
    ids = b.add_nodes(kinds, names).reshape(count, per)
    gpus, sws = ids[:, :gpn], ids[:, gpn:]
    a = np.broadcast_to(gpus[:, None, :], (count, k, gpn)).ravel()  # server, switch, GPU
    sw = np.broadcast_to(sws[:, :, None], (count, k, gpn)).ravel()
    b.add_duplexes(a, sw, bw, lat, LinkTier.NVLINK)
    return gpus


def add_intra(b: FabricBuilder, server: int, gpus: list[int], intra: dict) -> None:
    """Wire one server's GPUs (``nvswitch``, ``nvlink_mesh`` or ``pcie``)."""
    kind = intra["kind"]
    lat = float(intra.get("latency", 100.0))
    if kind == "nvswitch":
        count = int(intra.get("switches", 1))
        if count < 1:
            raise InputError(f"expected at least 1 NVSwitch, got {count}", where="intra_node.switches")
        bw = intra["bandwidth"] / count
        for k in range(count):
            sw = b.add_node(NodeKind.NVSWITCH, f"nvsw{server}" + (f".{k}" if count > 1 else ""))
            for g in gpus:
                b.add_duplex(g, sw, bw, lat, LinkTier.NVLINK)
    elif kind == "nvlink_mesh":
        link_bw = intra.get("link_bandwidth") or intra["bandwidth"] / max(len(gpus) - 1, 1)
        pairs = intra.get("pairs")
        if pairs is None:
            pairs = [(i, j, 1) for i in range(len(gpus)) for j in range(i + 1, len(gpus))]
        for p in pairs:
            i, j, n = (p + [1])[:3] if isinstance(p, list) else p
            if not (0 <= i < len(gpus) and 0 <= j < len(gpus)) or i == j:
                raise InputError(f"NVLink pair {p} names a GPU outside 0..{len(gpus) - 1}", where="intra_node.pairs")
            b.add_duplex(gpus[i], gpus[j], link_bw, lat, LinkTier.NVLINK, count=int(n))
    elif kind == "pcie":
        bw = intra.get("bandwidth", 32.0)
        per = int(intra.get("gpus_per_switch", 2))
        root = b.add_node(NodeKind.CPU, f"cpu{server}")
        for k in range(0, len(gpus), per):
            sw = b.add_node(NodeKind.NVSWITCH, f"pcisw{server}.{k // per}")
            b.add_duplex(sw, root, bw, lat, LinkTier.PCIE)
            for g in gpus[k : k + per]:
                b.add_duplex(g, sw, bw, lat, LinkTier.PCIE)
    else:  # validated by the cluster parser
        raise InputError(f"unknown intra_node kind {kind!r}")


def _latencies(inter: dict) -> tuple[float, float]:
    return (
        float(inter.get("nic_latency", DEFAULT_NIC_LATENCY_NS)),
        float(inter.get("switch_latency", DEFAULT_SWITCH_LATENCY_NS)),
    )


def attach_fat_tree(b: FabricBuilder, endpoints: list[int] | np.ndarray, inter: dict) -> None:
    """Two-tier leaf/spine Clos (``tiers: 2``) or a three-tier one with pods (``tiers: 3``).

    A leaf of radix ``k`` with oversubscription ``r`` has ``d = round(k r / (r + 1))``
    downlinks and ``k - d`` uplinks, each at the NIC bandwidth unless ``uplink_bandwidth`` is
    given.  Two tiers hold ``d x k`` endpoints (``k`` leaves, one cable from every leaf to each
    of ``k - d`` spines); three tiers hold ``d x k / 2 x k`` ... see ``_three_tier``.
    """
    nic_bw = inter["nic_bandwidth"]
    up_bw = inter.get("uplink_bandwidth", nic_bw)
    radix = int(inter.get("radix", 64))
    tiers = int(inter.get("tiers", 2))
    r = float(inter.get("oversubscription", 1.0))
    if r < 1:
        raise InputError(f"oversubscription must be >= 1, got {r}", where="inter_node.oversubscription")
    nic_lat, sw_lat = _latencies(inter)
    down = max(1, min(radix - 1, round(radix * r / (r + 1))))
    up = radix - down
    ends = np.asarray(endpoints, dtype=np.int64)
    n = len(ends)
    leaves_needed = math.ceil(n / down)
    if tiers == 3 and leaves_needed <= radix:
        tiers = 2  # as few switches as the endpoints need
    if tiers == 2:
        if leaves_needed > radix:
            raise InputError(
                f"{n} GPUs exceed a two-tier fat-tree of radix {radix} "
                f"({down * radix} endpoints); use tiers: 3 or a larger radix",
                where="inter_node.tiers",
            )
        leaves = _switches(b, [f"leaf{i}" for i in range(leaves_needed)])
        spines = _switches(b, [f"spine{i}" for i in range(up)])
        b.add_duplexes(ends, leaves[np.arange(n) // down], nic_bw, nic_lat, LinkTier.NIC)
        _every_pair(b, leaves, spines, up_bw, sw_lat)
        b.meta.update(leaves=len(leaves), spines=len(spines))
        return
    if tiers != 3:
        raise InputError(f"tiers must be 2 or 3, got {tiers}", where="inter_node.tiers")
    # pods of radix/2 leaves and radix/2 aggregation switches (leaf downlinks as above);
    # each aggregation switch has radix/2 core uplinks.
    half = radix // 2
    per_pod = down * half
    pods = math.ceil(n / per_pod)
    if pods > radix:
        raise InputError(
            f"{n} GPUs exceed a three-tier fat-tree of radix {radix} ({per_pod * radix} endpoints)",
            where="inter_node.radix",
        )
    cores = _switches(b, [f"core{i}" for i in range(half * half)])
    for p in range(pods):
        leaves = _switches(b, [f"pod{p}.leaf{i}" for i in range(half)])
        aggs = _switches(b, [f"pod{p}.agg{i}" for i in range(half)])
        mine = ends[p * per_pod : (p + 1) * per_pod]
        b.add_duplexes(mine, leaves[np.arange(len(mine)) // down], nic_bw, nic_lat, LinkTier.NIC)
        _every_pair(b, leaves, aggs, up_bw * up / half, sw_lat)
        # aggregation switch a: cores a * half .. a * half + half - 1
        b.add_duplexes(np.repeat(aggs, half), cores, up_bw * up / half, sw_lat, LinkTier.FABRIC)
    b.meta.update(pods=pods, cores=len(cores))


def attach_rail_optimized(b: FabricBuilder, servers: list[list[int]] | np.ndarray, inter: dict) -> None:
    """Two-tier rail-optimized fabric: local GPU ``k`` of every server of a segment is on rail
    leaf ``(segment, k)``; every leaf has one cable to each spine (spines also join the rails
    of one segment).  With ``servers_per_segment``
    ``s`` and oversubscription ``r`` a leaf has ``s`` downlinks and ``ceil(s / r)`` uplinks
    (one per spine, at ``uplink_bandwidth``, default the NIC bandwidth)."""
    nic_bw = inter["nic_bandwidth"]
    up_bw = inter.get("uplink_bandwidth", nic_bw)
    per_seg = int(inter.get("servers_per_segment", 32))
    r = float(inter.get("oversubscription", 1.0))
    if per_seg < 1 or r < 1:
        raise InputError("servers_per_segment must be >= 1 and oversubscription >= 1", where="inter_node")
    nic_lat, sw_lat = _latencies(inter)
    gpn = len(servers[0])
    segments = math.ceil(len(servers) / per_seg)
    spines_n = int(inter.get("spines", math.ceil(min(per_seg, len(servers)) / r)))
    leaves = _switches(b, [f"seg{s}.rail{k}" for s in range(segments) for k in range(gpn)]).reshape(segments, gpn)
    gpus = np.asarray(servers, dtype=np.int64)
    b.add_duplexes(gpus.ravel(), leaves[np.arange(len(gpus)) // per_seg].ravel(), nic_bw, nic_lat, LinkTier.NIC)
    # spines also carry cross-rail traffic inside one segment
    spines = _switches(b, [f"spine{i}" for i in range(spines_n)])
    _every_pair(b, leaves.ravel(), spines, up_bw, sw_lat)
    b.meta.update(segments=segments, rails=gpn)


def _switches(b: FabricBuilder, names: list[str]) -> np.ndarray:
    """Add network switches named ``names``, in order; their ids."""
    return b.add_nodes(np.full(len(names), int(NodeKind.SWITCH)), names)


def _every_pair(b: FabricBuilder, lower: np.ndarray, upper: np.ndarray, bw: float, lat: float) -> None:
    """A fabric cable from every switch of ``lower`` to every switch of ``upper`` (lower by
    lower, then upper by upper)."""
    b.add_duplexes(np.repeat(lower, len(upper)), np.tile(upper, len(lower)), bw, lat, LinkTier.FABRIC)


def _direct(b: FabricBuilder, num_gpus: int, inter: dict) -> None:
    """Tori and TrioSim's optical mesh: GPUs are the routers."""
    if inter["kind"] == "torus":
        dims = list(inter.get("dims") or [])
        attach_torus_cluster(b, num_gpus, dims, inter.get("bandwidth", 50.0), inter.get("latency", 100.0))
    else:
        attach_optical_mesh(
            b, num_gpus, int(inter.get("rows", 1)), inter.get("bandwidth", 64.0), inter.get("hop_latency", 20.0)
        )
