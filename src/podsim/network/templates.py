"""SimAI's datacenter templates (``gen_Topo_Template.py`` wiring rules, re-implemented).

* ``spectrum-x``: rail-optimized, single ToR, single plane.
* ``alibaba-hpn``: rail-optimized, dual ToR (each NIC's two ports on two ToRs of two banks);
  ``dual_plane: true`` splits the ToRs and spines into two planes.
* ``dcn+``: not rail-optimized (each run of ``nics_per_switch`` consecutive GPUs shares a
  ToR); ``dual_tor: true`` adds the second ToR bank.

Rail-optimized: local GPU ``k`` of each server goes to ToR ``k`` of its segment; a segment
holds ``gpus_per_node x nics_per_switch`` GPUs.  Every ToR connects to every spine (to every
spine of its plane when dual-plane).  One pod only.

Cluster-file keys (``inter_node``): ``nic_bandwidth`` (SimAI ``-bw``), ``uplink_bandwidth``
(``-apbw``), ``nics_per_switch`` (``-npa``), ``spines`` (``-psn``), ``dual_plane``,
``dual_tor``, ``nic_latency``, ``switch_latency``.  Defaults follow SimAI's generator for each
template (Spectrum-X: 400 Gbps, 64 NICs per ToR, 64 spines; HPN: 200 Gbps, 128 per ToR, 120
spines; DCN+: 400 Gbps, 64 per ToR, 8 spines; dual ToR DCN+: 200 Gbps, 128 per ToR).
"""

from __future__ import annotations

import math

from ..errors import InputError
from .fabric import FabricBuilder, LinkTier, NodeKind

GBPS = 0.125  # 1 Gb/s in bytes per ns

_DEFAULTS = {
    "spectrum-x": {"nic_bandwidth": 400 * GBPS, "nics_per_switch": 64, "spines": 64, "rail": True, "dual_tor": False},
    "alibaba-hpn": {"nic_bandwidth": 200 * GBPS, "nics_per_switch": 128, "spines": 120, "rail": True, "dual_tor": True},
    "dcn+": {"nic_bandwidth": 400 * GBPS, "nics_per_switch": 64, "spines": 8, "rail": False, "dual_tor": False},
}
POD_GPUS = {"spectrum-x": 4096, "alibaba-hpn": 15360, "dcn+": 512}


def attach_simai_template(b: FabricBuilder, servers: list[list[int]], template: str, inter: dict) -> None:
    """Wire ``servers`` (GPU node ids per server) into one of SimAI's templates."""
    if template not in _DEFAULTS:
        raise InputError(
            f"unknown template {template!r}; expected one of {', '.join(_DEFAULTS)}", where="inter_node.kind"
        )
    d = dict(_DEFAULTS[template])
    dual_tor = bool(inter.get("dual_tor", d["dual_tor"]))
    dual_plane = bool(inter.get("dual_plane", False))
    if template == "dcn+" and dual_tor:
        d.update(nic_bandwidth=200 * GBPS, nics_per_switch=128)
    if dual_plane and not (d["rail"] and dual_tor):
        raise InputError(
            "dual_plane needs a rail-optimized dual-ToR template (alibaba-hpn)", where="inter_node.dual_plane"
        )
    nic_bw = inter.get("nic_bandwidth", d["nic_bandwidth"])
    up_bw = inter.get("uplink_bandwidth", nic_bw)
    npa = int(inter.get("nics_per_switch", d["nics_per_switch"]))
    spines_n = int(inter.get("spines", d["spines"]))
    nic_lat = float(inter.get("nic_latency", 1000.0))
    sw_lat = float(inter.get("switch_latency", 1000.0))
    gpus = [g for s in servers for g in s]
    gpn = len(servers[0])
    cap = POD_GPUS[template] if "nics_per_switch" not in inter else None
    if cap is not None and len(gpus) > cap:
        raise InputError(f"{len(gpus)} GPUs exceed the capacity of one {template} pod ({cap})", where="inter_node.kind")
    banks = 2 if dual_tor else 1  # dual ToR: each NIC has one port (at nic_bandwidth) per bank
    tors: dict[tuple[int, int, int], int] = {}

    def tor(bank: int, seg: int, idx: int) -> int:
        key = (bank, seg, idx)
        if key not in tors:
            tors[key] = b.add_node(NodeKind.SWITCH, f"asw{bank}.{seg}.{idx}")
        return tors[key]

    for i, g in enumerate(gpus):
        server, local = divmod(i, gpn)
        for bank in range(banks):
            if d["rail"]:
                sw = tor(bank, server // npa, local)
            else:
                sw = tor(bank, i // npa, 0)
            b.add_duplex(g, sw, nic_bw, nic_lat, LinkTier.NIC)
    planes = 2 if dual_plane else 1
    per_plane = math.ceil(spines_n / planes)
    spines = [[b.add_node(NodeKind.SWITCH, f"psw{p}.{j}") for j in range(per_plane)] for p in range(planes)]
    for (bank, _seg, _idx), sw in sorted(tors.items()):
        plane = bank if dual_plane else 0
        for sp in spines[plane]:
            b.add_duplex(sw, sp, up_bw, sw_lat, LinkTier.FABRIC)
    b.meta.update(template=template, tors=len(tors), spines=planes * per_plane)
