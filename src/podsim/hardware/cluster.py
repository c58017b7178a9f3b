"""Cluster files: a YAML description of servers, their internal fabric, the scale-out fabric,
and the NCCL tuning that fits the machine.  Presets are such files shipped in
``podsim/hardware/presets/``.

Example (every bandwidth is per direction; "GB/s" = 10^9 B/s, "Gbps" = 10^9 bit/s)::

    name: dgx-a100-superpod
    gpu: A100-SXM4-80GB
    gpus_per_node: 8
    intra_node: {kind: nvswitch, bandwidth: 300 GB/s, latency: 150 ns}
    inter_node: {kind: rail_optimized, nic_bandwidth: 200 Gbps, servers_per_segment: 20,
                 nic_latency: 600 ns, switch_latency: 300 ns}
    nccl: {channels: 16, ...}

``intra_node.kind``: ``nvswitch`` | ``nvlink_mesh`` | ``pcie``.  ``inter_node.kind``:
``none`` | ``fat_tree`` | ``rail_optimized`` | ``spectrum-x`` | ``alibaba-hpn`` | ``dcn+`` |
``torus`` | ``optical_mesh``.  Instead of both, ``topology_file: <SimAI topology file>`` fixes
the whole fabric (a bare ``.txt`` path works too).  :func:`build_fabric` turns a spec plus a
GPU count into a :class:`~podsim.network.fabric.Fabric`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from ..collectives.nccl.tuning import NcclTuning, tuning_from_dict
from ..errors import InputError, unknown_key_error, yaml_error
from ..fileio import load_yaml, read_text
from ..formats.simai import read_topology
from ..network.assemble import cluster as assemble
from ..network.fabric import Fabric, FabricBuilder
from ..registry import Registry
from ..units import parse_bandwidth, parse_time_ns
from .gpu import get_gpu

INTRA_KINDS = ("nvswitch", "nvlink_mesh", "pcie")
INTER_KINDS = ("none", "fat_tree", "rail_optimized", "spectrum-x", "alibaba-hpn", "dcn+", "torus", "optical_mesh")
_TOP_KEYS = {
    "name",
    "description",
    "gpu",
    "gpus_per_node",
    "gpus_per_tray",
    "max_gpus",
    "intra_node",
    "inter_node",
    "nccl",
    "topology_file",
}
_INTRA_KEYS = {"kind", "bandwidth", "latency", "switches", "link_bandwidth", "pairs", "gpus_per_switch"}
_INTER_KEYS = {
    "kind",
    "nic_bandwidth",
    "nic_latency",
    "switch_latency",
    "radix",
    "tiers",
    "oversubscription",
    "uplink_bandwidth",
    "servers_per_segment",
    "spines",
    "dual_plane",
    "dual_tor",
    "dims",
    "rows",
    "cols",
    "hop_latency",
    "bandwidth",
    "latency",
    "routing",
    "nics_per_switch",
    "ecmp_seed",
}


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed cluster file.  Bandwidths in bytes per ns (GB/s), latencies in ns."""

    name: str
    gpu: str
    gpus_per_node: int
    intra: dict  #: intra_node section, units converted
    inter: dict  #: inter_node section, units converted
    nccl: NcclTuning = field(default_factory=NcclTuning)
    description: str = ""
    max_gpus: int | None = None
    source: str | None = None
    topology_file: str | None = None  #: a SimAI topology file that fixes the whole fabric
    #: rack-scale NVLink domains (NVL72) are built of compute trays of this many GPUs; a job
    #: that does not fill whole domains is spread over the fewest domains in whole trays
    #: (:func:`domain_size`).  None: servers, which a job fills whole.
    gpus_per_tray: int | None = None

    @property
    def gpu_memory_bytes(self) -> float | None:
        """Memory of one of its GPUs (bytes), or None when the cluster names no GPU type."""
        return get_gpu(self.gpu).memory_bytes if self.gpu else None


@lru_cache(maxsize=1)
def preset_registry() -> Registry[str]:
    """The shipped cluster presets (``hardware/presets/<name>.yaml``) by name -> the file's
    name.  Adding a preset is one YAML file there."""
    reg: Registry[str] = Registry("cluster preset", flag="--cluster")
    root = resources.files("podsim.hardware") / "presets"
    for name in sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml")):
        reg.register(name, f"{name}.yaml")
    return reg


def preset_names() -> list[str]:
    """Names of the shipped presets."""
    return list(preset_registry().names())


def load_cluster(name_or_path: str | ClusterSpec) -> ClusterSpec:
    """Load a preset by name, or a cluster YAML file by path; a :class:`ClusterSpec` (a what-if's
    cluster, already overridden) is returned as it is.

    Raises:
        InputError: for an unknown preset, a missing file or a malformed one.
    """
    if isinstance(name_or_path, ClusterSpec):
        return name_or_path
    path = Path(name_or_path)
    if path.suffix == ".txt" or (path.exists() and path.suffix not in (".yaml", ".yml", ".json")):
        return ClusterSpec(
            name=path.stem,
            gpu="",
            gpus_per_node=1,
            intra={"kind": "nvswitch"},
            inter={"kind": "none"},
            source=str(path),
            topology_file=str(path),
        )
    data, source = cluster_document(name_or_path)
    return cluster_from_dict(data, source)


@lru_cache(maxsize=None)
def _preset_document(file: str) -> object:
    """The parsed YAML of a shipped preset file, read once (validation runs hundreds of rows)."""
    return yaml.safe_load((resources.files("podsim.hardware") / "presets" / file).read_text())


def cluster_document(name_or_path: str) -> tuple[object, str]:
    """The parsed YAML of a cluster preset (by name) or file (by path), before it is checked,
    and where it came from (``preset NAME`` or the path).

    Raises:
        InputError: for an unknown preset (with the closest names), a missing file or bad YAML.
    """
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists():
            raise InputError("no such cluster file", str(path))
        text = read_text(path, "cluster file")
        source = str(path)
    else:
        presets = preset_registry()
        if name_or_path not in presets:
            raise unknown_key_error(name_or_path, presets.names(), None, what="cluster preset")
        source = f"preset {name_or_path}"
        try:  # a copy: the caller may change it
            return copy.deepcopy(_preset_document(presets.get(name_or_path))), source
        except yaml.YAMLError as e:
            raise yaml_error(e, source, column=False) from None
    try:
        return load_yaml(text), source
    except yaml.YAMLError as e:
        raise yaml_error(e, source, column=False) from None


def cluster_from_dict(data: object, source: str | None = None) -> ClusterSpec:
    """Validate and convert a cluster mapping (see the module docstring)."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping with name, gpus_per_node, intra_node, inter_node", source)
    for k in data:
        if k not in _TOP_KEYS:
            raise unknown_key_error(str(k), _TOP_KEYS, source)
    topo = data.get("topology_file")
    if topo is not None:
        base = Path(source).parent if source and Path(source).exists() else Path(".")
        return ClusterSpec(
            name=str(data.get("name", Path(str(topo)).stem)),
            gpu=str(data.get("gpu", "")),
            gpus_per_node=1,
            intra={"kind": "nvswitch"},
            inter={"kind": "none"},
            nccl=tuning_from_dict(data.get("nccl"), source),
            source=source,
            topology_file=str(base / str(topo)),
        )
    if data.get("gpu") not in (None, ""):
        try:
            get_gpu(str(data["gpu"]))
        except InputError as e:
            raise InputError(e.message, source, "gpu") from None
    for k in ("name", "gpus_per_node", "intra_node"):
        if k not in data:
            raise InputError(f"missing required field {k!r}", source, k)
    gpn = data["gpus_per_node"]
    if not isinstance(gpn, int) or isinstance(gpn, bool) or gpn < 1:
        raise InputError(f"expected a positive integer, got {gpn!r}", source, "gpus_per_node")
    tray = data.get("gpus_per_tray")
    if tray is not None and (not isinstance(tray, int) or isinstance(tray, bool) or tray < 1 or gpn % tray):
        raise InputError(
            f"expected a positive integer that divides gpus_per_node ({gpn}), got {tray!r}", source, "gpus_per_tray"
        )
    max_gpus = data.get("max_gpus")
    if max_gpus is not None and (not isinstance(max_gpus, int) or isinstance(max_gpus, bool) or max_gpus < 1):
        raise InputError(f"expected a positive integer, got {max_gpus!r}", source, "max_gpus")
    intra = _section(data["intra_node"], _INTRA_KEYS, INTRA_KINDS, source, "intra_node")
    inter = _section(data.get("inter_node") or {"kind": "none"}, _INTER_KEYS, INTER_KINDS, source, "inter_node")
    if intra["kind"] != "pcie" and "bandwidth" not in intra and "link_bandwidth" not in intra:
        raise InputError("missing 'bandwidth' (per GPU, per direction, e.g. '300 GB/s')", source, "intra_node")
    seed = inter.get("ecmp_seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InputError(f"expected an integer, got {seed!r}", source, "inter_node.ecmp_seed")
    if inter.get("routing", "ecmp") not in ("ecmp", "adaptive"):
        raise InputError(f"expected ecmp or adaptive, got {inter['routing']!r}", source, "inter_node.routing")
    if inter["kind"] in ("fat_tree", "rail_optimized") and "nic_bandwidth" not in inter:
        raise InputError("missing 'nic_bandwidth' (per NIC, per direction, e.g. '200 Gbps')", source, "inter_node")
    return ClusterSpec(
        name=str(data["name"]),
        gpu=str(data.get("gpu", "")),
        gpus_per_node=gpn,
        intra=intra,
        inter=inter,
        nccl=tuning_from_dict(data.get("nccl"), source),
        description=str(data.get("description", "")),
        max_gpus=max_gpus,
        source=source,
        gpus_per_tray=tray,
    )


_BW_KEYS = {"bandwidth", "link_bandwidth", "nic_bandwidth", "uplink_bandwidth"}
_TIME_KEYS = {"latency", "nic_latency", "switch_latency", "hop_latency"}
#: counts of switches, ports, tiers, rows...: positive integers, at most this
_COUNT_KEYS = {
    "switches": 1 << 10,
    "gpus_per_switch": 1 << 10,
    "radix": 1 << 16,
    "tiers": 3,
    "servers_per_segment": 1 << 20,
    "spines": 1 << 16,
    "rows": 1 << 20,
    "cols": 1 << 20,
    "nics_per_switch": 1 << 16,
}
_BOOL_KEYS = {"dual_plane", "dual_tor"}


def _count(v: object, source: str | None, where: str, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
        raise InputError(f"expected an integer from 1 to {hi:,}, got {v!r}", source, where)
    return v


def _typed(k: str, v: object, source: str | None, where: str) -> object:
    """A section value that is not a bandwidth or a time, checked for its type and range."""
    if k in _COUNT_KEYS:
        return _count(v, source, where, _COUNT_KEYS[k])
    if k in _BOOL_KEYS:
        if not isinstance(v, bool):
            raise InputError(f"expected true or false, got {v!r}", source, where)
        return v
    if k == "oversubscription":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v <= 1 << 10:
            raise InputError(f"expected a number from 1 to 1024 (downlinks per uplink), got {v!r}", source, where)
        return float(v)
    if k == "dims":
        if not isinstance(v, list) or not v:
            raise InputError(f"expected a list of sizes such as [4, 4], got {v!r}", source, where)
        return [_count(x, source, where, 1 << 20) for x in v]
    if k == "pairs":
        if not isinstance(v, list) or not all(
            isinstance(p, list)
            and len(p) in (2, 3)
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 1 << 10 for x in p)
            for p in v
        ):
            raise InputError(f"expected a list of [gpu, gpu] or [gpu, gpu, links] pairs, got {v!r:.80}", source, where)
        return v
    if k in ("kind", "routing") and not isinstance(v, str):
        raise InputError(f"expected a name, got {v!r}", source, where)
    return v


def _section(sec: object, keys: set[str], kinds: tuple[str, ...], source: str | None, name: str) -> dict:
    if not isinstance(sec, dict):
        raise InputError(f"expected a mapping with 'kind' ({', '.join(kinds)})", source, name)
    out: dict = {}
    for k, v in sec.items():
        where = f"{name}.{k}"
        if k not in keys:
            e = unknown_key_error(str(k), keys, source)
            raise InputError(e.message, source, where)
        if k in _BW_KEYS:
            out[k] = parse_bandwidth(v, source, where)
            if out[k] <= 0:
                raise InputError(f"expected a positive bandwidth, got {v!r}", source, where)
        elif k in _TIME_KEYS:
            out[k] = float(parse_time_ns(v, source, where))
        else:
            out[k] = _typed(k, v, source, where)
    kind = out.get("kind")
    if kind not in kinds:
        if kind is None:
            raise InputError(f"missing 'kind' (one of {', '.join(kinds)})", source, name)
        e = unknown_key_error(str(kind), kinds, source, what="kind")
        raise InputError(e.message, source, f"{name}.kind")
    return out


def domain_size(spec: ClusterSpec, num_gpus: int) -> int:
    """GPUs per NVLink domain (server) that a job of ``num_gpus`` occupies: ``gpus_per_node``
    (all of them when fewer),
    or on rack-scale domains (``gpus_per_tray`` set) a job that does not fill whole domains
    spread evenly over the fewest that hold it in whole trays (256 GPUs on NVL72: 4 racks of
    64, as NVIDIA schedules 16 of a rack's 18 trays).  The fabric's and the rank placement's
    server size."""
    gpn, tray = spec.gpus_per_node, spec.gpus_per_tray
    if num_gpus <= gpn:
        return max(num_gpus, 1)
    if tray is None or num_gpus % gpn == 0:
        return gpn
    for k in range(-(-num_gpus // gpn), num_gpus // tray + 1):
        if num_gpus % k == 0 and (num_gpus // k) % tray == 0:
            return num_gpus // k
    return gpn


#: the most GPUs a simulated cluster may have (2^20): beyond, building the fabric alone would
#: take minutes and gigabytes
MAX_GPUS = 1 << 20


_SHARED: dict[tuple[str, int], Fabric] = {}


def shared_fabric(spec: ClusterSpec, num_gpus: int) -> Fabric:
    """:func:`build_fabric`, keeping the last fabric built this way for the next call with the
    same cluster and GPU count: a search simulates many layouts on one fabric, whose routing
    tables and collective plans (kept with it) then serve them all.  Fabrics are immutable."""
    if spec.topology_file is not None:  # a file read afresh each time (it may have changed)
        return build_fabric(spec, num_gpus)
    key = (repr(spec), num_gpus)
    fab = _SHARED.get(key)
    if fab is None:
        fab = build_fabric(spec, num_gpus)
        _SHARED.clear()
        _SHARED[key] = fab
    return fab


def build_fabric(spec: ClusterSpec, num_gpus: int) -> Fabric:
    """The fabric of ``num_gpus`` GPUs of this cluster: full servers of ``gpus_per_node``
    (fewer GPUs than one server fill part of one server).

    Raises:
        InputError: when the cluster cannot hold ``num_gpus``.
    """

    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or not 1 <= num_gpus <= MAX_GPUS:
        raise InputError(f"expected a GPU count from 1 to {MAX_GPUS:,}, got {num_gpus!r}", where="--gpus")
    gpn = domain_size(spec, num_gpus)
    where = spec.source or spec.name
    if spec.topology_file is not None:
        fab = read_topology(spec.topology_file)
        if num_gpus != fab.num_gpus:
            raise InputError(f"the topology file has {fab.num_gpus} GPUs; asked for {num_gpus}", spec.topology_file)
        return fab
    if num_gpus < 1:
        raise InputError(f"need at least 1 GPU, got {num_gpus}", where)
    if spec.max_gpus is not None and num_gpus > spec.max_gpus:
        raise InputError(f"{num_gpus} GPUs exceed this cluster's {spec.max_gpus}", where, "max_gpus")
    if num_gpus > gpn and num_gpus % gpn:
        hint = (
            f" (or a multiple of {spec.gpus_per_tray} that some number of domains share evenly)"
            if spec.gpus_per_tray
            else ""
        )
        raise InputError(
            f"{num_gpus} GPUs do not fill whole servers of {gpn} GPUs; use a multiple of {gpn}{hint}",
            where,
            "gpus_per_node",
        )
    if num_gpus > gpn and spec.inter["kind"] == "none":
        raise InputError(
            f"{num_gpus} GPUs need more than one server, and this cluster has no inter_node fabric", where, "inter_node"
        )
    b = FabricBuilder(f"{spec.name}-{num_gpus}", min(gpn, num_gpus), spec.source)
    try:
        assemble(b, num_gpus, min(gpn, num_gpus), spec.intra, spec.inter)
    except InputError as e:
        raise e.with_source(where) from None
    return b.build(spec.gpu)
