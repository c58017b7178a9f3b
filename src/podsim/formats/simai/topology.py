"""SimAI's ns-3 topology files (``gen_Topo_Template.py`` output), read and written.

Format::

    <total_nodes> <gpus_per_server> <nvswitch_num> <switch_num> <link_num> <gpu_type>
    <nvswitch ids ...> <switch ids ...>
    <src> <dst> <rate> <delay> <error_rate>        # link_num lines, full-duplex

Ids not listed on line 2 are GPUs (ranks in ascending id order).  ``rate`` is an ns-3 DataRate
(``400Gbps``, ``2400Gbps``, ``100GBps``...), ``delay`` an ns-3 Time (``0.0005ms``, ``25ns``).
GPU-NVSwitch links are NVLink, GPU-switch links NIC links, the rest fabric links.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ...errors import InputError
from ...fileio import atomic_write_text, read_text
from ...network.fabric import Fabric, FabricBuilder, LinkTier, NodeKind

_RATE_UNITS = {
    "bps": 1e-9 / 8,
    "kbps": 1e-6 / 8,
    "mbps": 1e-3 / 8,
    "gbps": 1 / 8,
    "tbps": 1e3 / 8,
    "bps_b": 1e-9,
    "kbps_b": 1e-6,
    "mbps_b": 1e-3,
    "gbps_b": 1.0,
    "tbps_b": 1e3,
}
_TIME_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3}
MAX_NODES = 1 << 22  #: GPUs and switches a topology file may have
_NUM = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([A-Za-z/]+)$")


def parse_rate(text: str) -> float:
    """An ns-3 DataRate string to bytes per ns ("400Gbps" -> 50.0; "100GBps" -> 100.0)."""
    m = _NUM.match(text)
    if not m:
        raise ValueError(text)
    value, unit = float(m.group(1)), m.group(2).replace("/s", "ps")
    key = unit.lower() + ("_b" if len(unit) > 1 and unit[-3] == "B" else "")
    if key not in _RATE_UNITS:
        raise ValueError(text)
    return value * _RATE_UNITS[key]


def parse_delay(text: str) -> float:
    """An ns-3 Time string to ns ("0.0005ms" -> 500.0)."""
    m = _NUM.match(text)
    if not m or m.group(2) not in _TIME_UNITS:
        raise ValueError(text)
    return float(m.group(1)) * _TIME_UNITS[m.group(2)]


def read_topology(path: str | Path) -> Fabric:
    """Read a SimAI topology file into a :class:`Fabric`.

    Raises:
        InputError: naming the file and line for malformed headers, ids, rates and delays, a
            link count that does not match, or a disconnected topology.
    """
    src = str(path)
    lines = read_text(path, "topology file").splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 6:
        raise InputError(
            "expected '<nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>'", src, "line 1"
        )
    try:
        total, gps, n_nv, n_sw, n_links = (int(x) for x in head[:5])
    except ValueError:
        raise InputError(f"expected five integers then the GPU type, got {lines[0]!r}", src, "line 1") from None
    if min(total, gps, n_nv, n_sw, n_links) < 0 or gps < 1:
        raise InputError("counts must be non-negative and gpus_per_server >= 1", src, "line 1")
    if total > MAX_NODES:
        raise InputError(f"{total} nodes is absurd (at most {MAX_NODES:,})", src, "line 1")
    ids_line = lines[1].split() if len(lines) > 1 else []
    try:
        special = [int(x) for x in ids_line]
    except ValueError:
        raise InputError("expected the NVSwitch and switch ids (integers)", src, "line 2") from None
    if len(special) != n_nv + n_sw:
        raise InputError(
            f"expected {n_nv + n_sw} ids ({n_nv} NVSwitches + {n_sw} switches), got {len(special)}", src, "line 2"
        )
    for x in special:
        if not 0 <= x < total:
            raise InputError(f"id {x} is outside 0..{total - 1}", src, "line 2")
    kind = {x: NodeKind.NVSWITCH for x in special[:n_nv]}
    kind.update({x: NodeKind.SWITCH for x in special[n_nv:]})
    b = FabricBuilder(Path(path).name, gps, src)
    node = {}
    for i in range(total):  # GPUs first, in id order, so that ranks follow ids
        if i not in kind:
            node[i] = b.add_gpu(f"gpu{i}")
    for i in range(total):
        if i in kind:
            prefix = "nvsw" if kind[i] == NodeKind.NVSWITCH else "sw"
            node[i] = b.add_node(kind[i], f"{prefix}{i}")
    body = [(n, ln) for n, ln in enumerate(lines[2:], 3) if ln.strip()]
    if len(body) != n_links:
        raise InputError(f"the header declares {n_links} links, the file has {len(body)} link lines", src, "line 1")
    for lineno, ln in body:
        f = ln.split()
        where = f"line {lineno}"
        if len(f) != 5:
            raise InputError(f"expected '<src> <dst> <rate> <delay> <error_rate>', got {ln.strip()!r}", src, where)
        try:
            a, c = int(f[0]), int(f[1])
        except ValueError:
            raise InputError(f"node ids must be integers, got {f[0]!r} {f[1]!r}", src, where) from None
        for x in (a, c):
            if not 0 <= x < total:
                raise InputError(f"node id {x} is outside 0..{total - 1}", src, where)
        try:
            rate = parse_rate(f[2])
        except ValueError:
            raise InputError(f"bad rate {f[2]!r}; expected an ns-3 DataRate such as 400Gbps", src, where) from None
        try:
            delay = parse_delay(f[3])
        except ValueError:
            raise InputError(f"bad delay {f[3]!r}; expected an ns-3 Time such as 0.0005ms", src, where) from None
        try:
            err = float(f[4])
        except ValueError:
            err = math.nan
        if not 0 <= err <= 1:
            raise InputError(f"bad error rate {f[4]!r}; expected a probability from 0 to 1", src, where)
        ka, kc = kind.get(a, NodeKind.GPU), kind.get(c, NodeKind.GPU)
        if NodeKind.NVSWITCH in (ka, kc) or ka == kc == NodeKind.GPU:
            tier = LinkTier.NVLINK
        elif NodeKind.GPU in (ka, kc):
            tier = LinkTier.NIC
        else:
            tier = LinkTier.FABRIC
        try:
            b.add_duplex(node[a], node[c], rate, delay, tier)
        except InputError as e:
            raise InputError(e.message, src, where) from None
    b.meta["simai_ids"] = {v: k for k, v in node.items()}
    return b.build(head[5])


def _rate_text(bw: float) -> str:
    gbps = bw * 8
    return f"{gbps:.12g}Gbps"


def _delay_text(ns: float) -> str:
    return f"{ns:.12g}ns"


def write_topology(fabric: Fabric, path: str | Path) -> None:
    """Write ``fabric`` in SimAI's format (GPUs first, then NVSwitches, then switches; one line
    per full-duplex pair of links).

    Raises:
        InputError: when a directed link has no reverse partner of equal rate and delay.
    """
    order = [int(g) for g in fabric.gpus]
    nv = [i for i in range(fabric.num_nodes) if fabric.node_kind[i] == NodeKind.NVSWITCH]
    sw = [i for i in range(fabric.num_nodes) if fabric.node_kind[i] not in (NodeKind.GPU, NodeKind.NVSWITCH)]
    order += nv + sw
    new_id = {old: new for new, old in enumerate(order)}
    pending: dict[tuple[int, int, float, float], int] = {}
    pairs = []
    for i in range(fabric.num_links):
        a, c = int(fabric.link_src[i]), int(fabric.link_dst[i])
        bw, lat = float(fabric.link_bw[i]), float(fabric.link_lat[i])
        rev = (c, a, bw, lat)
        if pending.get(rev, 0):
            pending[rev] -= 1
            pairs.append((new_id[c], new_id[a], bw, lat))
        else:
            pending[(a, c, bw, lat)] = pending.get((a, c, bw, lat), 0) + 1
    if any(pending.values()):
        (a, c, _, _), _n = next((k, v) for k, v in pending.items() if v)
        raise InputError(
            f"link {fabric.node_name[a]}->{fabric.node_name[c]} has no reverse link of equal "
            "rate and delay; SimAI links are full-duplex"
        )
    gpu_type = fabric.gpu_type or "NONE"
    lines = [
        f"{fabric.num_nodes} {fabric.gpus_per_node} {len(nv)} {len(sw)} {len(pairs)} {gpu_type}",
        " ".join(str(new_id[x]) for x in nv + sw),
    ]
    lines += [f"{a} {c} {_rate_text(bw)} {_delay_text(lat)} 0" for a, c, bw, lat in pairs]
    atomic_write_text(path, "\n".join(lines) + "\n")
