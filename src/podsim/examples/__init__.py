"""Built-in examples, generated with podsim's own writers (no data files needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..formats.chakra import write_workload
from ..serving import generate_workload
from ..serving import write_workload as write_serve_workload
from ..workload import CollectiveKind, OpKind, ProgramBuilder, Workload

EXAMPLES = {
    "allreduce": "1 MiB ring all-reduce on 8 NPUs (ASTRA-sim's regression test: 117,780 ns)",
    "layers": "4 layers of 200 us compute + 4 MiB all-reduce, overlapped, on a 2-D 4x4 torus of 16 NPUs",
    "cluster": "64 MiB all-reduce on 16 GPUs (two DGX A100 servers), NCCL-like, flow backend, link counters",
    "serving": "DLSIM-style serving: 2 Bert 2.6B services on 2 GPUs (intra-op), 20 s of Poisson arrivals, 80/20",
}

#: examples that run ``podsim serve`` on the files they write: name -> its command-line flags
SERVE_EXAMPLES = {"serving": ["-n", "1", "-d", "2", "-c", "16"]}

#: examples that run on a cluster preset instead of ASTRA-sim files: name -> (preset, backend)
CLUSTER_EXAMPLES = {"cluster": ("dgx-a100-superpod", "flow")}


def _allreduce_workload() -> Workload:
    b = ProgramBuilder("all_reduce")
    b.add(
        OpKind.COLLECTIVE,
        "all_reduce_8npus_1MB",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=1 << 20,
        node_id=1,
    )
    return Workload([b.build()], [0] * 8, name="all_reduce")


def _layers_workload() -> Workload:
    b = ProgramBuilder("layers")
    prev = None
    for layer in range(4):
        c = b.add(
            OpKind.COMPUTE,
            f"layer{layer}.compute",
            duration_ns=200_000,
            node_id=2 * layer + 1,
            data_deps=[] if prev is None else [prev],
        )
        b.add(
            OpKind.COLLECTIVE,
            f"layer{layer}.grad_all_reduce",
            collective=int(CollectiveKind.ALL_REDUCE),
            size_bytes=4 << 20,
            node_id=2 * layer + 2,
            data_deps=[c],
        )
        prev = c
    return Workload([b.build()], [0] * 16, name="layers")


def write_example(name: str, folder: str | os.PathLike[str]) -> dict[str, str]:
    """Write example ``name`` into ``folder``; returns the paths of its inputs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"],
        "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"],
        "collective-optimization": "localBWAware",
        "local-mem-bw": 50,
    }
    if name == "serving":
        return _write_serving(folder)
    if name == "allreduce":
        wl = _allreduce_workload()
        network = (
            "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]  # GB/s (ASTRA-sim: 2^30 B)\n"
            "latency: [ 500.0 ]  # ns\n"
        )
    elif name == "cluster":
        b = ProgramBuilder("all_reduce_16gpus")
        b.add(
            OpKind.COLLECTIVE,
            "all_reduce_64MiB",
            collective=int(CollectiveKind.ALL_REDUCE),
            size_bytes=64 << 20,
            node_id=1,
        )
        wl = Workload([b.build()], [0] * 16, name="all_reduce_16gpus")
        network = ""
    elif name == "layers":
        wl = _layers_workload()
        system["all-reduce-implementation"] = ["ring", "ring"]
        system["local-mem-bw"] = 1600
        network = (
            "topology: [ Ring, Ring ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 200.0, 50.0 ]  # GB/s\n"
            "latency: [ 500.0, 1000.0 ]  # ns\n"
        )
    else:
        raise KeyError(name)
    prefix = folder / wl.name
    write_workload(wl, prefix)
    (folder / "system.json").write_text(json.dumps(system, indent=2) + "\n")
    (folder / "network.yml").write_text(network)
    (folder / "remote_memory.json").write_text('{"memory-type": "NO_MEMORY_EXPANSION"}\n')
    return {
        "workload": str(prefix),
        "system": str(folder / "system.json"),
        "network": str(folder / "network.yml"),
        "remote_memory": str(folder / "remote_memory.json"),
    }


def _write_serving(folder: Path) -> dict[str, str]:
    """A DLSIM-format workload (podsim's generator, DLSIM's test_workload_8to2_6.667Hz_20s
    parameters) and an intra-op placement of two Bert 2.6B services sharing GPUs 0-1 of node 0."""

    w = generate_workload(2, 6.667, 20.0, proportions=[0.8, 0.2], slos_s=[0.25, 0.25], seed=0, name="workload.csv")
    write_serve_workload(w, folder / "workload.csv")
    mesh = [{"node_ids": [0], "devices": [[0, 1]]}]
    placement = [
        {
            "service_name": f"Bert_2.6B_{i}",
            "model_name": "Bert_2.6B",
            "executable_name": "Bert_2.6B_2_device_intra",
            "mesh_group": mesh,
        }
        for i in range(2)
    ]
    (folder / "placement.json").write_text(json.dumps(placement, indent=2) + "\n")
    return {"workload": str(folder / "workload.csv"), "placement": str(folder / "placement.json")}
