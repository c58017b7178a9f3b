"""The Python API: ``podsim.simulate(...)`` returns a :class:`~podsim.report.Result`.

Example::

    import podsim
    res = podsim.simulate(
        workload="examples/all_reduce",            # Chakra ET prefix, or a Workload
        system="system.json", network="network.yml",
        remote_memory="remote_memory.json")        # optional
    print(res.finish_ns)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..engine import ComputeTiming, RemoteMemoryParams, SystemParams
from ..engine import simulate as _simulate
from ..errors import InputError, SimulationError
from ..formats.astra_sim import (
    RemoteMemoryConfig,
    SystemConfig,
    read_comm_groups,
    read_network,
    read_remote_memory,
    read_system,
)
from ..network.topology import Topology
from ..report.result import Result
from ..workload import Group, Workload

PathLike = str | os.PathLike[str]


def load_custom_collective(prefix: str) -> list:
    """The programs of a custom collective: ``<prefix>.<position>.et`` for every participant."""
    from ..formats.chakra import discover_ranks, rank_file, read_trace, trace_to_program

    n = discover_ranks(prefix)
    return [trace_to_program(read_trace(rank_file(prefix, pos)), rank=pos, num_ranks=n) for pos in range(n)]


def _per_node_custom(path: str, source: str) -> dict[int, list]:
    from ..formats.astra_sim.common import load_yaml

    data = load_yaml(path)
    out = {}
    for key, prefix in data.items():
        if isinstance(key, bool) or not isinstance(key, int) or not isinstance(prefix, str):
            raise InputError("expected 'node id: ET prefix' lines", path, str(key))
        out[key] = load_custom_collective(prefix)
    return out


def system_params(cfg: SystemConfig, queues_per_dim: int = 1, injection_scale: float = 1.0) -> SystemParams:
    """Engine settings from an ASTRA-sim system configuration (custom-collective ETs are read
    here)."""
    custom = {kind: load_custom_collective(prefix) for kind, prefix in cfg.custom_implementations.items()}
    per_node = {}
    if cfg.per_node_custom_implementation:
        per_node = _per_node_custom(cfg.per_node_custom_implementation, cfg.source)
    algos = dict(cfg.implementations)
    return SystemParams(
        scheduling_policy=cfg.scheduling_policy,
        collective_optimization=cfg.collective_optimization,
        active_chunks_per_dimension=cfg.active_chunks_per_dimension,
        preferred_dataset_splits=cfg.preferred_dataset_splits,
        # ASTRA-sim scales the delay only when the JSON sets it, and truncates to an integer
        endpoint_delay_ns=int(cfg.endpoint_delay_ns * injection_scale) if cfg.endpoint_delay_given
        else cfg.endpoint_delay_ns,
        local_mem_bw_GBps=cfg.local_mem_bw_GBps,
        queues_per_dim=queues_per_dim,
        algorithms=algos,
        custom=custom,
        custom_per_node=per_node,
        model_shared_bus=cfg.model_shared_bus,
        loggp=cfg.loggp,
        local_reduction_delay=cfg.local_reduction_delay,
    )


def simulate(workload: PathLike | Workload, system: PathLike | SystemConfig | None = None,
             network: PathLike | Topology | None = None,
             remote_memory: PathLike | RemoteMemoryConfig | None = None,
             comm_groups: PathLike | dict[str, tuple[int, ...]] | None = None,
             *, num_queues_per_dim: int = 1, injection_scale: float = 1.0, use_symmetry: bool = True,
             record_timeline: bool = True, progress: Callable[[int, int, int], None] | None = None,
             rendezvous: bool = False, cluster: str | None = None, backend: str = "analytical",
             gpus: int | None = None, execution_trace: PathLike | None = None, whole_trace: bool = False) -> Result:
    """Simulate a workload on an ASTRA-sim style machine description, or on a cluster.

    Args:
        workload: a Chakra ET prefix (``<prefix>.<rank>.et`` per rank) or a built Workload.
        system: ASTRA-sim system JSON (path or parsed); optional with ``cluster`` (its compute
            model settings are used when given).
        network: ASTRA-sim analytical network YAML (path or Topology); not used with ``cluster``.
        cluster: a cluster preset name or YAML file: rank ``r`` runs on GPU ``r`` of that
            cluster, collectives are NCCL-like (see docs/calibration.md).
        backend: with ``cluster``, ``analytical`` (no contention) or ``flow`` (max-min fair
            sharing of every link).
        gpus: with ``cluster``, how many GPUs run a workload file that does not say (SimAI:
            default its ``all_gpus``; ASTRA-sim 1.0 text: required; PyTorch trace: default 1).
        execution_trace, whole_trace: for a PyTorch (Kineto) trace: its execution trace, and
            whether to take the whole trace when no ``ProfilerStep`` marks a step.
        remote_memory: ASTRA-sim remote memory JSON, if the workload has memory ops.
        comm_groups: ASTRA-sim comm-group JSON ``{id: [ranks]}``.
        num_queues_per_dim, injection_scale: ASTRA-sim's CLI options of those names.
        use_symmetry: simulate equivalent ranks once (same results, much faster).
        record_timeline: keep per-op slices for traces.
        rendezvous: ASTRA-sim's ``--rendezvous-protocol`` (an 8 KiB handshake before each message).
        progress: called as ``progress(now_ns, ranks_finished, ranks_simulated)`` about once a
            second on long runs.

    Returns:
        The :class:`Result` (times in integer ns).
    """

    if cluster is not None:
        return _simulate_on_cluster(workload, system, cluster, backend, comm_groups, use_symmetry,
                                    record_timeline, progress, gpus, execution_trace, whole_trace, remote_memory)
    if system is None or network is None:
        raise InputError("need a system and a network configuration, or a cluster")
    sys_cfg = system if isinstance(system, SystemConfig) else read_system(system)
    topo = network if isinstance(network, Topology) else read_network(network)
    rm_cfg = None
    if remote_memory is not None:
        rm_cfg = remote_memory if isinstance(remote_memory, RemoteMemoryConfig) else read_remote_memory(remote_memory)
    wl, label = _load_workload(workload, topo.num_npus, comm_groups)
    params = system_params(sys_cfg, num_queues_per_dim, injection_scale)
    compute = ComputeTiming(sys_cfg.roofline_enabled, sys_cfg.local_mem_bw_GBps, sys_cfg.peak_perf_TFLOPS,
                           sys_cfg.replay_only)
    rm = None
    if rm_cfg is not None:
        rm = RemoteMemoryParams(rm_cfg.memory_type, rm_cfg.latency_ns, rm_cfg.bandwidth, rm_cfg.npus_per_node,
                                rm_cfg.num_nodes)
    try:
        result = _simulate(wl, topo, params, compute, rm, use_symmetry, record_timeline, progress, rendezvous)
    except InputError as e:
        raise _attribute(e, sys_cfg, rm_cfg, label, comm_groups) from None
    except SimulationError as e:   # a deadlock: name the workload whose ops wait forever
        raise SimulationError(f"{label}: {e}") from None
    result.info["podsim_version"] = __version__
    short = label if isinstance(workload, Workload) else Path(str(workload)).name
    result.info["title"] = f"{short} on {topo.num_npus} NPUs"
    result.info["workload"] = label
    result.info["network"] = describe_topology(topo)
    if wl.rank_labels is not None:
        result.info["rank_labels"] = list(wl.rank_labels)
    result.info["system"] = (f"{sys_cfg.scheduling_policy}, {sys_cfg.collective_optimization}, "
                             f"{sys_cfg.preferred_dataset_splits} splits, "
                             f"{sys_cfg.active_chunks_per_dimension} active chunks/dim")
    for key, val in sys_cfg.ignored.items():
        result.notes.append(f"{Path(sys_cfg.source).name}: key {key!r} = {val!r} is accepted but ignored, "
                            "as ASTRA-sim 2.x ignores it")
    return result


def load_workload(path: PathLike, gpus: int | None = None, execution_trace: PathLike | None = None,
                  whole_trace: bool = False) -> Workload:
    """Read a workload in any format podsim knows, by what ``path`` is:

    * a ``.json`` file: a PyTorch profiler (Kineto) trace, linked with ``execution_trace`` if
      given; its ``ProfilerStep`` (or, with ``whole_trace``, everything) on ``gpus`` ranks
      (default 1), all running the same step; or an execution trace alone: its collectives
      on ``gpus`` ranks (default 2);
    * a directory with ``trace.csv``: a TrioSim trace (one GPU);
    * a directory with ``kineto.json`` or ``kineto.<rank>.json``: a ``podsim trace`` folder, every
      rank of it; a rank-by-rank trace of a parallel job (``podsim trace --world-size N --layout
      ...``): the whole job, on its own world size or on ``gpus`` ranks (another data-parallel
      degree);
    * a ``.txt`` file: an ASTRA-sim 1.0 text workload (on ``gpus`` NPUs, required) or a
      SimAI/AICB workload (on ``gpus``, default its ``all_gpus``);
    * otherwise a Chakra ET prefix (``<path>.<rank>.et``; ``gpus`` default: the files found).

    Raises:
        InputError: for a missing ``gpus`` where the format does not say, or a bad file.
    """
    from ..formats.chakra import discover_ranks, read_workload

    p = Path(path)
    if str(path).endswith((".json", ".json.gz")) and p.is_file():
        from ..formats.pytorch_trace import (
            execution_trace_to_workload,
            is_execution_trace,
            pytorch_to_workload,
        )
        if is_execution_trace(p):
            return execution_trace_to_workload(p, gpus or 2)
        return pytorch_to_workload(p, execution_trace, whole_trace, gpus or 1)
    if (p / "trace.csv").is_file():
        from ..formats.triosim import read_triosim, triosim_to_workload
        return triosim_to_workload(read_triosim(p))
    from ..formats.rank_traces import compose, is_rank_trace
    if is_rank_trace(p):
        return compose(p, gpus)
    if _is_capture(p):
        from ..formats.pytorch_trace import capture_to_workload
        w = capture_to_workload(p)
        if gpus is not None and gpus != w.num_ranks:
            raise InputError(f"the capture has {w.num_ranks} ranks, not {gpus}: simulate it on its own ranks, or "
                             "scale its rank 0 with --pytorch DIR --gpus N --parallel ...", str(path))
        return w
    if str(path).endswith(".txt"):
        from ..formats.astra_sim.text_workload import (
            is_text_workload,
            read_text_workload,
        )
        from ..formats.simai import simai_to_workload
        if is_text_workload(path):
            if gpus is None:
                raise InputError("an ASTRA-sim 1.0 text workload does not say how many GPUs run it: give --gpus",
                                 str(path))
            return read_text_workload(path, gpus)
        return simai_to_workload(path, gpus)
    return read_workload(path, gpus or discover_ranks(path))


def _is_capture(p: Path) -> bool:
    return p.is_dir() and (any(p.glob("kineto.json*")) or any(p.glob("kineto.[0-9]*.json*")))


def _not_chakra(path: PathLike) -> bool:
    """Whether ``path`` names a workload file or folder :func:`load_workload` reads other than
    a Chakra prefix."""
    p = Path(path)
    return str(path).endswith((".txt", ".json", ".json.gz")) or (p / "trace.csv").is_file() or _is_capture(p)


def _load_workload(workload: PathLike | Workload, n: int,
                   comm_groups: PathLike | dict[str, tuple[int, ...]] | None) -> tuple[Workload, str]:
    """The workload (read from Chakra files if a prefix) with the comm groups applied, and its
    label for messages."""
    from ..formats.chakra import read_workload

    groups = None
    if comm_groups is None and not isinstance(workload, Workload):
        # `podsim llm --chakra PREFIX` / `podsim convert` write PREFIX.comm_groups.json beside the traces
        beside = Path(f"{workload}.comm_groups.json")
        if beside.is_file():
            comm_groups = beside
    if comm_groups is not None:
        groups = comm_groups if isinstance(comm_groups, dict) else read_comm_groups(comm_groups, n)
    if not isinstance(workload, Workload) and _not_chakra(workload):
        workload = load_workload(workload, n)
    if isinstance(workload, Workload):
        if groups:
            workload = Workload(workload.programs, workload.rank_program,
                                [Group(k, tuple(v)) for k, v in groups.items()], workload.name)
        return workload, workload.name
    label = str(workload) + (f" (groups: {comm_groups})" if isinstance(comm_groups, (str, os.PathLike)) else "")
    return read_workload(workload, n, groups), label


def _simulate_on_cluster(workload: PathLike | Workload, system: PathLike | SystemConfig | None, cluster: str,
                         backend: str, comm_groups: PathLike | dict[str, tuple[int, ...]] | None,
                         use_symmetry: bool, record_timeline: bool,
                         progress: Callable[[int, int, int], None] | None, gpus: int | None = None,
                         execution_trace: PathLike | None = None, whole_trace: bool = False,
                         remote_memory: PathLike | RemoteMemoryConfig | None = None) -> Result:
    from ..engine.cluster import simulate_cluster
    from ..formats.chakra import discover_ranks
    from ..hardware.cluster import build_fabric, load_cluster

    if backend not in ("analytical", "flow"):
        raise InputError(f"unknown backend {backend!r}; expected analytical or flow", where="--backend")
    spec = load_cluster(cluster)
    if not isinstance(workload, Workload) and _not_chakra(workload):
        workload = load_workload(workload, gpus, execution_trace, whole_trace)
    if isinstance(workload, Workload):
        n = workload.num_ranks
    else:
        n = discover_ranks(workload)
    wl, label = _load_workload(workload, n, comm_groups)
    fabric = build_fabric(spec, n)
    compute = ComputeTiming()
    if system is not None:
        sys_cfg = system if isinstance(system, SystemConfig) else read_system(system)
        compute = ComputeTiming(sys_cfg.roofline_enabled, sys_cfg.local_mem_bw_GBps, sys_cfg.peak_perf_TFLOPS,
                               sys_cfg.replay_only)
    rm = None
    if remote_memory is not None:
        rm_cfg = remote_memory if isinstance(remote_memory, RemoteMemoryConfig) else read_remote_memory(remote_memory)
        rm = RemoteMemoryParams(rm_cfg.memory_type, rm_cfg.latency_ns, rm_cfg.bandwidth, rm_cfg.npus_per_node,
                                rm_cfg.num_nodes)
    try:
        result = simulate_cluster(wl, fabric, spec.nccl, backend, compute, use_symmetry, record_timeline, progress,
                                  remote_memory=rm)
    except InputError as e:
        raise e.with_source(label) from None
    except SimulationError as e:   # a deadlock: name the workload whose ops wait forever
        raise SimulationError(f"{label}: {e}") from None
    result.info["podsim_version"] = __version__
    short = label if isinstance(workload, Workload) else Path(str(workload)).name
    result.info["title"] = f"{short} on {n} GPU{'s' if n != 1 else ''} of {spec.name} ({backend})"
    result.info["workload"] = label
    result.info["cluster"] = spec.description or spec.name
    if wl.rank_labels is not None:
        result.info["rank_labels"] = list(wl.rank_labels)
    return result


def _attribute(e: InputError, sys_cfg: SystemConfig, rm_cfg: RemoteMemoryConfig | None, workload: str,
               comm_groups: object) -> InputError:
    """Name the input file an engine-side input error is about."""
    if e.source:
        return e
    where = e.where or ""
    if where.endswith("implementation") or where.endswith("-custom") or where in ("local-mem-bw", "model-shared-bus"):
        return e.with_source(sys_cfg.source)
    if where in ("memory-type", "num-nodes") and rm_cfg is not None:
        return e.with_source(rm_cfg.source)
    if where == "pg_name" and isinstance(comm_groups, (str, os.PathLike)):
        return e.with_source(f"{workload} / {comm_groups}")
    return e.with_source(workload)


def describe_topology(topo: Topology) -> str:
    """One line: ``Ring(8) 50 GiB/s 500 ns x Switch(4) ...``."""
    parts = []
    for d in topo.dims:
        parts.append(f"{d.kind.value}({d.npus}) {d.bandwidth * 1e9 / 2**30:g} GiB/s {d.latency_ns:g} ns")
    return " x ".join(parts)
