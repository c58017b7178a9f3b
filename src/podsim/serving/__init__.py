"""Inference serving on a cluster (DLSIM / AlpaServe): request workloads, model executables and
their profiles, placements of models on sub-meshes, and a discrete-event simulation of per-GPU
queues with a scheduler, reporting latency, SLO attainment and utilization."""

from .executable import Executable
from .placement import MeshExecutorSpec, Placement, read_placement
from .profiles import load_profiles
from .simulator import ServeResult, simulate_serving
from .workload import (
    ClosedLoop,
    ServeWorkload,
    generate_workload,
    read_workload,
    write_workload,
)

__all__ = [
    "ClosedLoop",
    "Executable",
    "MeshExecutorSpec",
    "Placement",
    "ServeResult",
    "ServeWorkload",
    "generate_workload",
    "load_profiles",
    "read_placement",
    "read_workload",
    "simulate_serving",
    "write_workload",
]
