"""Hardware what-ifs of a sweep: overrides of the GPU's data and of the cluster's, each a named
variant crossed with every point of the sweep (``what-if:`` in a sweep spec, docs/sweep.md).

A what-if is ``{name: ..., gpu: {...}, cluster: {...}}``:

``gpu`` (applies to the GPU a run computes with: ``podsim llm``'s ``--gpu``; the memory also to
``serve``):

* ``peak_scale``: every dtype's dense peak (TFLOP/s) times this factor;
* ``peak_tflops``: ``{dtype: TFLOP/s}``, peaks replaced (before ``peak_scale``);
* ``hbm_bandwidth``: HBM bandwidth ("4.8 TB/s"; a bare number is GB/s = 10^9 B/s);
* ``hbm_bandwidth_scale``: HBM bandwidth times this factor (after ``hbm_bandwidth``);
* ``memory_gib``: HBM capacity in GiB (2^30 B).

``cluster`` (applies to the cluster a run uses: its ``cluster`` parameter, or for ``llm`` the
preset that matches the GPU):

* ``preset``: another cluster, a preset name or a cluster YAML file (another fabric);
* ``gpus_per_node``: GPUs per server;
* ``nic_bandwidth``: each NIC's bandwidth ("200 Gbps"; a bare number is GB/s);
* ``nic_bandwidth_scale``: each NIC's bandwidth times this factor (after ``nic_bandwidth``);
* ``intra_bandwidth_scale``: the scale-up (NVLink / NVSwitch) bandwidth times this factor;
* ``intra_node``, ``inter_node``, ``nccl``: fields of the cluster file's sections (as in
  docs/hardware.md, with units), merged over the cluster's own.

The fields act on the cluster file's mapping before it is parsed, so everything the cluster
parser checks is checked here too, naming the what-if; the scales then multiply the parsed
spec's bandwidths (:func:`scale_cluster`, a ``dataclasses.replace``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import InputError, unknown_key_error
from ..hardware.cluster import ClusterSpec, cluster_document, cluster_from_dict, load_cluster
from ..hardware.gpu import DTYPES, GpuSpec
from ..units import parse_bandwidth

#: the fields of a what-if's ``gpu`` mapping
GPU_FIELDS = ("peak_scale", "peak_tflops", "hbm_bandwidth", "hbm_bandwidth_scale", "memory_gib")
#: the fields of a what-if's ``cluster`` mapping
CLUSTER_FIELDS = (
    "preset",
    "gpus_per_node",
    "nic_bandwidth",
    "nic_bandwidth_scale",
    "intra_bandwidth_scale",
    "intra_node",
    "inter_node",
    "nccl",
)
#: the fields of a what-if
WHATIF_FIELDS = ("name", "gpu", "cluster")
_SECTIONS = ("intra_node", "inter_node", "nccl")
#: the largest scale factor a what-if may give
MAX_SCALE = 1e6


def _positive(v: object, where: str, source: str | None, hi: float = MAX_SCALE) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 < v <= hi):
        raise InputError(f"expected a number > 0 (at most {hi:g}), got {v!r}", source, where)
    return float(v)


def check_whatif(w: object, source: str | None, where: str) -> dict[str, Any]:
    """A what-if checked for its fields and their types (a mapping with ``name`` and optional
    ``gpu`` and ``cluster``); returns it with plain values.  Whether the overrides fit the
    cluster they change is checked by :func:`apply_cluster`.

    Raises:
        InputError: naming ``where`` (``what-if[2].gpu.peak_scale``) for an unknown field (with
            the closest name) or a bad value.
    """
    if not isinstance(w, dict):
        raise InputError(
            f"expected a mapping such as {{name: 2x peak, gpu: {{peak_scale: 2}}}}, got {w!r:.60}", source, where
        )
    for k in w:
        if k not in WHATIF_FIELDS:
            raise InputError(
                unknown_key_error(str(k), WHATIF_FIELDS, None, "what-if field").message, source, f"{where}.{k}"
            )
    name = w.get("name")
    if not isinstance(name, (str, int, float)) or isinstance(name, bool) or not str(name).strip():
        raise InputError("every what-if needs a name (a short label such as 'half NIC')", source, f"{where}.name")
    out: dict[str, Any] = {"name": str(name).strip()}
    for part, fields in (("gpu", GPU_FIELDS), ("cluster", CLUSTER_FIELDS)):
        if w.get(part) is None:
            continue
        ov = w[part]
        if not isinstance(ov, dict) or not ov:
            raise InputError(f"expected a mapping of overrides ({', '.join(fields)})", source, f"{where}.{part}")
        for k in ov:
            if k not in fields:
                e = unknown_key_error(str(k), fields, None, f"{part} what-if field")
                raise InputError(e.message, source, f"{where}.{part}.{k}")
        out[part] = {k: _check_field(part, str(k), v, source, f"{where}.{part}.{k}") for k, v in ov.items()}
    return out


def _check_field(part: str, k: str, v: object, source: str | None, where: str) -> object:
    if k.endswith("_scale"):
        return _positive(v, where, source)
    if k == "memory_gib":
        return _positive(v, where, source, 1e9)
    if k == "gpus_per_node":
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 20:
            raise InputError(f"expected a positive integer, got {v!r}", source, where)
        return v
    if k in ("hbm_bandwidth", "nic_bandwidth"):
        parse_bandwidth(v, source, where)
        return v
    if k == "peak_tflops":
        if not isinstance(v, dict) or not v:
            raise InputError("expected a mapping dtype -> TFLOP/s, such as {bf16: 1979}", source, where)
        for dt, x in v.items():
            if dt not in DTYPES:
                raise InputError(unknown_key_error(str(dt), DTYPES, None, "dtype").message, source, f"{where}.{dt}")
            _positive(x, f"{where}.{dt}", source, 1e9)
        return {str(dt): float(x) for dt, x in v.items()}
    if k == "preset":
        if not isinstance(v, str) or not v.strip():
            raise InputError(f"expected a cluster preset name or a cluster YAML file, got {v!r}", source, where)
        return v
    if k in _SECTIONS:
        if not isinstance(v, dict) or not v:
            raise InputError(
                f"expected a mapping of {k} fields (as in a cluster file, docs/hardware.md)", source, where
            )
        return dict(v)
    return v  # pragma: no cover - every field is handled above


def apply_gpu(gpu: GpuSpec, ov: dict[str, Any] | None) -> GpuSpec:
    """``gpu`` with a what-if's ``gpu`` overrides (see the module docstring); the key stays, so
    the compute model keeps the GPU's fitted efficiency."""
    if not ov:
        return gpu
    peaks = dict(gpu.peak_tflops)
    peaks.update(ov.get("peak_tflops") or {})
    s = ov.get("peak_scale", 1.0)
    peaks = {k: v * s for k, v in peaks.items()}
    hbm = parse_bandwidth(ov["hbm_bandwidth"]) if "hbm_bandwidth" in ov else gpu.hbm_bandwidth
    hbm *= ov.get("hbm_bandwidth_scale", 1.0)
    return replace(gpu, peak_tflops=peaks, hbm_bandwidth=hbm, memory_gib=float(ov.get("memory_gib", gpu.memory_gib)))


def _is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json", ".txt")) or "/" in name or "\\" in name


def raw_cluster(name_or_path: str, base: str | None = None) -> tuple[dict[str, Any], str]:
    """The mapping of a cluster preset or YAML file (relative paths against ``base``), before
    parsing, and its label.

    Raises:
        InputError: for an unknown preset (with the closest name), a missing or malformed file,
            or a SimAI topology file (whose fabric a what-if cannot change).
    """
    target = name_or_path
    if _is_path(name_or_path) or Path(name_or_path).exists():
        p = Path(name_or_path)
        if base and not p.is_absolute():
            p = Path(base) / p
        if p.suffix == ".txt":
            raise InputError("a SimAI topology file fixes the whole fabric: a cluster what-if cannot change it", str(p))
        target = str(p)
    data, source = cluster_document(target)
    if not isinstance(data, dict):
        raise InputError("expected a mapping with name, gpus_per_node, intra_node, inter_node", source)
    if data.get("topology_file") is not None:
        raise InputError("its topology_file fixes the whole fabric: a cluster what-if cannot change it", source)
    return data, source


def cluster_doc(name_or_path: str, ov: dict[str, Any], whatif: str, base: str | None = None) -> dict[str, Any]:
    """The cluster file's mapping with the fields a what-if's ``cluster`` gives merged in
    (``preset``, ``gpus_per_node``, ``nic_bandwidth`` and the sections, each as the user wrote
    it): what :func:`apply_cluster` parses before it applies the scales to the parsed spec.

    Raises:
        InputError: for an unknown preset or a file that cannot be read.
    """
    doc, source = raw_cluster(ov.get("preset", name_or_path), base)
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    doc["name"] = f"{doc.get('name', 'cluster')} ({whatif})"
    if "gpus_per_node" in ov:
        doc["gpus_per_node"] = ov["gpus_per_node"]
        tray = doc.get("gpus_per_tray")
        if isinstance(tray, int) and ov["gpus_per_node"] % tray:
            doc.pop("gpus_per_tray")  # rack-scale trays no longer divide the server

    def section(sec: str) -> dict[str, Any]:
        got = doc.get(sec)
        return dict(got) if isinstance(got, dict) else {}

    for sec in _SECTIONS:
        if sec in ov:
            doc[sec] = {**section(sec), **ov[sec]}
    if "nic_bandwidth" in ov:
        doc["inter_node"] = {**section("inter_node"), "nic_bandwidth": ov["nic_bandwidth"]}
    return doc


def scale_cluster(spec: ClusterSpec, ov: dict[str, Any], whatif: str) -> ClusterSpec:
    """``spec`` with a what-if's bandwidth scales (``nic_bandwidth_scale``,
    ``intra_bandwidth_scale``) applied to its parsed bandwidths (GB/s): a new spec, made with
    :func:`dataclasses.replace`.

    Raises:
        InputError: naming the what-if, for a cluster that lacks the bandwidth a scale multiplies.
    """
    inter, intra = dict(spec.inter), dict(spec.intra)
    if "nic_bandwidth_scale" in ov:
        if "nic_bandwidth" not in inter:
            raise InputError(
                f"what-if {whatif!r}: the cluster has no inter_node.nic_bandwidth to scale "
                f"(its inter_node kind is {inter.get('kind', 'none')!r})",
                spec.source,
            )
        inter["nic_bandwidth"] = inter["nic_bandwidth"] * ov["nic_bandwidth_scale"]
    if "intra_bandwidth_scale" in ov:
        scaled = [k for k in ("bandwidth", "link_bandwidth") if k in intra]
        if not scaled:
            raise InputError(f"what-if {whatif!r}: the cluster has no intra_node bandwidth to scale", spec.source)
        for k in scaled:
            intra[k] = intra[k] * ov["intra_bandwidth_scale"]
    return replace(spec, intra=intra, inter=inter)


def apply_cluster(name_or_path: str, ov: dict[str, Any] | None, whatif: str, base: str | None = None) -> ClusterSpec:
    """The cluster ``name_or_path`` (a preset or a YAML file, relative to ``base``) with a
    what-if's ``cluster`` overrides, parsed and checked.

    Raises:
        InputError: naming the what-if, for overrides the cluster parser refuses (an unknown
            field, with the closest name; a bad unit) or a cluster that lacks what a scale
            multiplies.
    """
    if not ov:
        p = Path(name_or_path)
        return load_cluster(
            str(Path(base) / p) if base and _is_path(name_or_path) and not p.is_absolute() else name_or_path
        )
    doc = cluster_doc(name_or_path, ov, whatif, base)
    return scale_cluster(cluster_from_dict(doc, f"{name_or_path} with what-if {whatif!r}"), ov, whatif)
