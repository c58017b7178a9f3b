"""The hardware a job asks for: a GPU (a key or alias of ``hardware/gpus.yaml``) and the
cluster around it (a preset name or a cluster YAML; default: the GPU's preset), with the
node size and NIC bandwidth a user may override."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..hardware.gpu import gpu_specs
from ..params import Param, param

#: the GPU a job runs on when it names none
DEFAULT_GPU = "a100-80gb"


#: ``--gpu`` and ``--cluster`` of the jobs that name a GPU (llm, infer, serve-llm, search)
GPU = Param(
    "gpu",
    "name",
    DEFAULT_GPU,
    metavar="NAME",
    help="a GPU key or alias (podsim llm --list): " + ", ".join(gpu_specs()),
)
CLUSTER = Param(
    "cluster",
    "name",
    metavar="PRESET_OR_YAML",
    help="the cluster (default: the preset for --gpu; presets: podsim collective --list)",
)
#: ``--gpus`` / ``-g``: how many GPUs (collective, fabric; simulate's says what it means there)
GPUS = Param("gpus", "count", metavar="N", aliases=("g",), help="number of GPUs")


@dataclass(frozen=True)
class Hardware:
    """GPU and cluster of a job (every job that simulates a cluster).  ``gpu`` and ``cluster`` may also hold typed specs
    (:class:`~podsim.hardware.gpu.GpuSpec`, :class:`~podsim.hardware.cluster.ClusterSpec`):
    a what-if overrides them with :func:`dataclasses.replace`."""

    gpu: Any = param(GPU)
    cluster: Any = param(CLUSTER)


@dataclass(frozen=True)
class ClusterOverrides:
    """What ``podsim llm`` may change of the cluster without a YAML of its own."""

    gpus_per_node: int | None = param(
        Param("gpus-per-node", "count", metavar="K", help="GPUs per node, overriding the cluster's")
    )
    nic_bandwidth: str | None = param(
        Param(
            "nic-bandwidth",
            "bandwidth",
            metavar="BW",
            unit="GB/s",
            help="per-GPU NIC bandwidth, e.g. 200Gbps (a number: GB/s)",
        )
    )
