"""Placements: which models run where.  DLSIM's placement JSON (or the same structure in YAML):
a list of mesh executors, each ``{service_name, model_name, executable_name, mesh_group}``
where ``mesh_group[i]`` is the sub-mesh of pipeline stage i, ``{node_ids: [n, ...], devices:
[[gpu, ...], ...]}`` (``devices[j]`` are GPU ids on node ``node_ids[j]``).  Entries that repeat a
service name are replicas of one service.

:func:`check_placement` validates a placement against the executables and the cluster: known
executables of the named model, stage shapes that match, GPUs that exist, and memory: each GPU
holds the weights of every stage placed on it (a stage's share of its model, split over the
stage's GPUs), which must fit in the GPU's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import InputError, yaml_error
from ..fileio import load_json, load_yaml
from ..hardware.cluster import load_cluster
from .executable import Executable

#: what :func:`check_placement` does with weights over a GPU's memory (``--memory-check``)
MEMORY_CHECKS = ("error", "warn", "off")


@dataclass(frozen=True)
class ServeCluster:
    """GPUs for serving: ``num_nodes`` nodes of ``gpus_per_node``, each with ``memory_bytes``."""

    num_nodes: int
    gpus_per_node: int
    memory_bytes: int

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    def gpu_index(self, node: int, gpu: int) -> int:
        return node * self.gpus_per_node + gpu


def serve_cluster(
    placement: Placement | None = None,
    preset: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    memory_gb: float | None = None,
) -> ServeCluster:
    """The GPUs to serve on: DLSIM's defaults (1 node of 2 GPUs of 16 GB), or a cluster preset
    or YAML's GPUs per node and GPU memory with as many nodes as ``placement`` uses; each given
    value overrides.

    Raises:
        InputError: for a count or memory that is not a finite positive number.
    """
    if preset is not None:
        spec = load_cluster(preset)
        used = (
            1 + max((n for e in placement.executors for st in e.stages for n, _ in st), default=0)
            if placement is not None
            else 1
        )
        mem = spec.gpu_memory_bytes
        defaults = (used, spec.gpus_per_node, mem / 1e9 if mem is not None else 16.0)
    else:
        defaults = (1, 2, 16.0)
    values = [v if v is not None else d for v, d in zip((nodes, gpus_per_node, memory_gb), defaults)]
    for flag, v in zip(("--num-nodes", "--num-devices-per-node", "--memory-capacity"), values):
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"must be a finite positive number, got {v:g}", where=flag)
    return ServeCluster(int(values[0]), int(values[1]), int(values[2] * 1e9))


@dataclass(frozen=True)
class MeshExecutorSpec:
    """One placed executor: ``stages[i]`` is the (node, gpu) pairs of stage i's sub-mesh."""

    service: str
    model: str
    executable: str
    stages: tuple[tuple[tuple[int, int], ...], ...]
    mesh_shapes: tuple[tuple[int, int], ...]  #: (nodes, GPUs per node) of each stage's mesh as written


@dataclass
class Placement:
    source: str
    executors: list[MeshExecutorSpec]

    def services(self) -> list[str]:
        """Service names in order of first appearance (model id i serves ``services()[i]``)."""
        out: list[str] = []
        for e in self.executors:
            if e.service not in out:
                out.append(e.service)
        return out


#: node and GPU ids a placement may name: 0 to this
MAX_ID = (1 << 20) - 1


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_id(x: object) -> bool:
    return _is_int(x) and 0 <= x <= MAX_ID  # type: ignore[operator]


def read_placement(path: str | Path) -> Placement:
    """Read a placement (JSON as DLSIM writes it, or YAML).

    Raises:
        InputError: for a malformed file or entry, naming the entry and field.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("no such placement file", str(p))
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", str(p)) from None
    try:
        data = load_yaml(text) if p.suffix in (".yaml", ".yml") else load_json(text, str(p))
    except yaml.YAMLError as e:
        raise yaml_error(e, str(p)) from None
    if isinstance(data, dict) and "executors" in data:
        data = data["executors"]
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of mesh executors", str(p))
    out = []
    for k, e in enumerate(data):
        where = f"entry {k}"
        if not isinstance(e, dict):
            raise InputError("expected {service_name, model_name, executable_name, mesh_group}", str(p), where)
        for key in ("service_name", "model_name", "executable_name", "mesh_group"):
            if key not in e:
                raise InputError(f"missing {key!r}", str(p), where)
        mg = e["mesh_group"]
        if not isinstance(mg, list) or not mg:
            raise InputError("mesh_group must be a non-empty list of {node_ids, devices}", str(p), where)
        stages, shapes = [], []
        for s, mesh in enumerate(mg):
            w = f"{where} mesh_group[{s}]"
            nodes, devs = (mesh.get("node_ids"), mesh.get("devices")) if isinstance(mesh, dict) else (None, None)
            if not isinstance(nodes, list) or not isinstance(devs, list) or len(nodes) != len(devs) or not nodes:
                raise InputError(
                    "expected node_ids: [n, ...] and devices: [[gpu, ...], ...] of the same length", str(p), w
                )
            pairs = []
            for n, ds in zip(nodes, devs):
                if not _is_id(n) or not isinstance(ds, list) or not ds or not all(_is_id(d) for d in ds):
                    raise InputError(
                        f"node {n!r} with devices {ds!r}: expected a node id and a non-empty list of GPU "
                        f"ids (integers from 0 to {MAX_ID:,})",
                        str(p),
                        w,
                    )
                pairs.extend((n, d) for d in ds)
            if len(set(pairs)) != len(pairs):
                raise InputError("a GPU appears twice in one sub-mesh", str(p), w)
            stages.append(tuple(pairs))
            per_node = {len(ds) for ds in devs}
            shapes.append((len(nodes), per_node.pop() if len(per_node) == 1 else -1))
        out.append(
            MeshExecutorSpec(
                str(e["service_name"]), str(e["model_name"]), str(e["executable_name"]), tuple(stages), tuple(shapes)
            )
        )
    return Placement(str(p), out)


def check_placement(
    placement: Placement, executables: dict[str, Executable], cluster: ServeCluster, memory: str = "error"
) -> list[str]:
    """Validate ``placement``; returns warnings (memory over capacity when ``memory`` is
    ``"warn"``; ``"off"`` skips the memory check).

    Raises:
        InputError: for an unknown executable, one of another model, a stage-shape mismatch, a
            GPU that does not exist, or (``memory="error"``) a GPU whose weights do not fit.
    """
    src = placement.source
    used: dict[int, int] = {}
    holders: dict[int, list[str]] = {}
    for k, e in enumerate(placement.executors):
        where = f"entry {k} ({e.service})"
        ex = executables.get(e.executable)
        if ex is None:
            raise InputError(
                f"unknown executable {e.executable!r}; the profiles have {', '.join(sorted(executables))}", src, where
            )
        if ex.model != e.model:
            raise InputError(f"executable {e.executable!r} runs model {ex.model!r}, not {e.model!r}", src, where)
        if len(e.stages) != ex.num_stages:
            raise InputError(
                f"{e.executable} has {ex.num_stages} stage(s) but mesh_group has {len(e.stages)}", src, where
            )
        for s, (shape, want) in enumerate(zip(e.mesh_shapes, ex.stage_shapes)):
            if shape != want:
                raise InputError(
                    f"stage {s}: {e.executable} needs a ({want[0]} node, {want[1]} GPU) mesh, the "
                    f"placement gives {shape[0]} node(s) x {shape[1] if shape[1] >= 0 else 'uneven'} "
                    "GPU(s)",
                    src,
                    where,
                )
            for n, d in e.stages[s]:
                if not 0 <= n < cluster.num_nodes or not 0 <= d < cluster.gpus_per_node:
                    raise InputError(
                        f"stage {s} names GPU {d} of node {n}, but the cluster has {cluster.num_nodes} "
                        f"node(s) of {cluster.gpus_per_node} GPU(s)",
                        src,
                        where,
                    )
                g = cluster.gpu_index(n, d)
                used[g] = used.get(g, 0) + ex.weight_bytes_per_gpu(s)
                holders.setdefault(g, []).append(e.service)
    warnings = []
    if memory != "off":
        for g, b in sorted(used.items()):
            if b > cluster.memory_bytes:
                msg = (
                    f"GPU {g % cluster.gpus_per_node} of node {g // cluster.gpus_per_node} holds "
                    f"{b / 1e9:.2f} GB of weights ({', '.join(holders[g])}), more than its "
                    f"{cluster.memory_bytes / 1e9:.2f} GB"
                )
                if memory == "error":
                    raise InputError(msg + " (--memory-check warn to simulate anyway)", src)
                warnings.append(msg)
    return warnings
