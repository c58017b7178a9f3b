"""``podsim fabric`` as a Python call: the fabric of a number of GPUs of a cluster (servers,
switches, NICs and the cables between them), to summarize or to write as a SimAI topology.
The parameters of ``podsim fabric`` are :class:`FabricJob`'s (its flags: :data:`FABRIC_PARAMS`).

Example::

    from podsim.api.fabric import fabric
    from podsim.report.fabric import format_fabric
    print(format_fabric(fabric("dgx-h100", 64)))

Units: bandwidths in GB/s (10^9 B/s) per direction, latencies in ns.
"""

from __future__ import annotations

import os

from ..formats.simai import write_topology
from ..hardware.cluster import ClusterSpec, build_fabric, load_cluster
from ..jobs.fabric import FABRIC_PARAMS, FabricJob
from ..network.fabric import Fabric

__all__ = ["FABRIC_PARAMS", "Fabric", "FabricJob", "fabric", "write_simai_topology"]


def fabric(cluster: str | ClusterSpec, gpus: int) -> Fabric:
    """The fabric of ``gpus`` GPUs of ``cluster`` (a preset name, a cluster YAML, a SimAI
    topology file or a :class:`ClusterSpec`): full servers, fewer GPUs than one server filling
    part of one.

    Raises:
        InputError: an unknown preset, a bad file, or a GPU count the cluster cannot hold."""
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster)
    return build_fabric(spec, gpus)


def write_simai_topology(fab: Fabric, path: str | os.PathLike[str]) -> None:
    """Write ``fab`` as a SimAI / ns-3 topology file at ``path``.

    Raises:
        InputError: a directed link with no reverse partner of equal rate and delay."""
    write_topology(fab, path)
