"""The Python API for traces: ``podsim.simulate(...)`` returns a :class:`~podsim.report.Result`.

A workload is a :class:`~podsim.workload.Workload` or a path in any trace format podsim reads
(:mod:`podsim.formats.registry`: sniffed, or named by ``trace_format``).  With ``parallel`` (a
:class:`ParallelSpec`), the path's one-GPU training step is taken to many GPUs first: read
(``load_step``), checked against the GPU's memory (``fit_memory``, offloading what does not fit
when a remote bandwidth is given), parallelized (``parallelize``) and simulated.

Example::

    import podsim
    res = podsim.simulate(
        workload="examples/all_reduce",            # Chakra ET prefix, or a Workload
        system="system.json", network="network.yml",
        remote_memory="remote_memory.json")        # optional
    print(res.finish_ns)

    res = podsim.simulate("traces/resnet50", cluster="dgx-h100",
                          parallel=podsim.api.ParallelSpec("ddp", gpus=8))
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..engine import ComputeTiming, RemoteMemoryParams, SystemParams
from ..engine import simulate as _simulate
from ..engine.cluster import simulate_cluster
from ..engine.faults import FaultSpec, degraded_fabric, resolve_faults
from ..errors import InputError, SimulationError
from ..formats.astra_sim import (
    RemoteMemoryConfig,
    SystemConfig,
    read_comm_groups,
    read_network,
    read_remote_memory,
    read_system,
)
from ..formats.astra_sim.common import load_yaml
from ..formats.chakra import discover_ranks, rank_file, read_trace, trace_to_program
from ..formats.one_gpu_step import OneGpuStep, capture_info
from ..formats.registry import TRACE_FORMATS, ReadOptions, TraceFormat, with_groups
from ..formats.registry import to_workload as _to_workload
from ..formats.registry import trace_format as find_format
from ..hardware.cluster import ClusterSpec, build_fabric, load_cluster
from ..hardware.gpu import get_gpu, gpu_of_device
from ..jobs.simulate import SimulateJob
from ..network.topology import Topology
from ..parallelize import MODES, fit_memory, load_step, parallelize, summary
from ..parallelize.plan import micro_batches
from ..parallelize.retime import AS_CAPTURED, retime
from ..report.layers import layer_breakdown
from ..report.result import Result
from ..workload import Workload
from .faults import run_with_faults

PathLike = str | os.PathLike[str]


def load_custom_collective(prefix: str) -> list:
    """The programs of a custom collective: ``<prefix>.<position>.et`` for every participant."""
    n = discover_ranks(prefix)
    return [trace_to_program(read_trace(rank_file(prefix, pos)), rank=pos, num_ranks=n) for pos in range(n)]


def _per_node_custom(path: str, source: str) -> dict[int, list]:
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
        endpoint_delay_ns=int(cfg.endpoint_delay_ns * injection_scale)
        if cfg.endpoint_delay_given
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


@dataclass(frozen=True)
class ParallelSpec:
    """How a one-GPU trace's training step runs on many GPUs (``podsim simulate --parallel``).

    Attributes:
        mode: ``dp`` (one all-reduce after the backward), ``ddp`` (bucketed, overlapped), ``tp``
            (split convolutions / linear layers, all-reduce their outputs) or ``pp`` (one
            pipeline stage per GPU).
        gpus: GPUs in all.
        micro_batch: pp: samples per micro-batch (default: one micro-batch per stage).
        pipeline_schedule: pp: ``1f1b`` or ``gpipe``.
        dp: pp: data-parallel pipelines of ``gpus / dp`` stages each.
        bucket_mb: ddp: gradient bucket size, MiB.
        batch_size: the batch the trace was taken at (a ``podsim trace`` folder says it).
        batch_size_sim: the batch per GPU to simulate (forward and backward scale with it).
        gpu_memory_gib: memory per GPU, GiB (default: the cluster's GPU).
        remote_bandwidth_gbps: offload activations that do not fit to remote memory of this
            bandwidth per GPU, GB/s (10^9 B/s); None: a step that does not fit is an error.
        retime: a GPU to time the captured ops on (:mod:`podsim.parallelize.retime`), ``off`` to
            keep the captured times; None: the cluster's GPU when the capture ran on the CPU.
    """

    mode: str = "ddp"
    gpus: int = 1
    micro_batch: int | None = None
    pipeline_schedule: str = "1f1b"
    dp: int = 1
    bucket_mb: float = 25.0
    batch_size: int | None = None
    batch_size_sim: int | None = None
    gpu_memory_gib: float | None = None
    remote_bandwidth_gbps: float | None = None
    retime: str | None = None


#: how a one-GPU step can run on many GPUs (:attr:`ParallelSpec.mode`)
PARALLEL_MODES = MODES

#: the cluster a one-GPU trace runs on when none is named
DEFAULT_PARALLEL_CLUSTER = "dgx-h100"


def simulate(
    workload: PathLike | Workload | OneGpuStep,
    system: PathLike | SystemConfig | None = None,
    network: PathLike | Topology | None = None,
    remote_memory: PathLike | RemoteMemoryConfig | None = None,
    comm_groups: PathLike | dict[str, tuple[int, ...]] | None = None,
    *,
    num_queues_per_dim: int = 1,
    injection_scale: float = 1.0,
    use_symmetry: bool = True,
    record_timeline: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    rendezvous: bool = False,
    cluster: str | ClusterSpec | None = None,
    backend: str = "analytical",
    gpus: int | None = None,
    execution_trace: PathLike | None = None,
    whole_trace: bool = False,
    trace_format: str | None = None,
    parallel: ParallelSpec | None = None,
    faults: FaultSpec | None = None,
) -> Result:
    """Simulate a workload on an ASTRA-sim style machine description, or on a cluster.

    Args:
        workload: a path in any trace format (:mod:`podsim.formats.registry`; a Chakra ET
            prefix ``<prefix>.<rank>.et``, a TrioSim or ``podsim trace`` folder, a Kineto
            ``.json``, an ASTRA-sim 1.0 or SimAI ``.txt``), a built Workload, or (with
            ``parallel``) a one-GPU step.
        system: ASTRA-sim system JSON (path or parsed); optional with ``cluster`` (its compute
            model settings are used when given).
        network: ASTRA-sim analytical network YAML (path or Topology); not used with ``cluster``.
        cluster: a cluster preset name or YAML file: rank ``r`` runs on GPU ``r`` of that
            cluster, collectives are NCCL-like (see docs/calibration.md).  With ``parallel``
            the default is ``dgx-h100``.
        backend: with ``cluster``, ``analytical`` (no contention) or ``flow`` (max-min fair
            sharing of every link).
        gpus: with ``cluster``, how many GPUs run a workload file that does not say (SimAI:
            default its ``all_gpus``; ASTRA-sim 1.0 text: required; PyTorch trace: default 1).
        execution_trace, whole_trace: for a PyTorch (Kineto) trace: its execution trace, and
            whether to take the whole trace when no ``ProfilerStep`` marks a step.
        trace_format: the format of a workload path (a name of
            :data:`~podsim.formats.registry.TRACE_FORMATS`); default: sniffed.
        parallel: take the workload's one-GPU training step to ``parallel.gpus`` GPUs (see
            :class:`ParallelSpec`); the result's ``info["layers"]`` breaks rank 0 down by layer.
        remote_memory: ASTRA-sim remote memory JSON, if the workload has memory ops.
        comm_groups: ASTRA-sim comm-group JSON ``{id: [ranks]}``.
        num_queues_per_dim, injection_scale: ASTRA-sim's CLI options of those names.
        use_symmetry: simulate equivalent ranks once (same results, much faster).
        record_timeline: keep per-op slices for traces (always with ``parallel``).
        rendezvous: ASTRA-sim's ``--rendezvous-protocol`` (an 8 KiB handshake before each message).
        progress: called as ``progress(now_ns, ranks_finished, ranks_simulated)`` about once a
            second on long runs.
        faults: slow GPUs, NICs, links and a host hiccup to inject (:mod:`podsim.engine.faults`;
            on a cluster only): the step is also simulated without them, and the result's
            ``faults`` says what they cost and who waited on whom.

    Returns:
        The :class:`Result` (times in integer ns).
    """
    if parallel is not None:
        return _simulate_parallel(
            workload,
            parallel,
            system,
            network,
            remote_memory,
            comm_groups,
            num_queues_per_dim=num_queues_per_dim,
            injection_scale=injection_scale,
            use_symmetry=use_symmetry,
            progress=progress,
            rendezvous=rendezvous,
            cluster=cluster,
            backend=backend,
            execution_trace=execution_trace,
            whole_trace=whole_trace,
            trace_format=trace_format,
            faults=faults,
        )
    if isinstance(workload, OneGpuStep):
        raise InputError("a one-GPU step runs on many GPUs with parallel=ParallelSpec(...)")
    read = ReadOptions(gpus, execution_trace, whole_trace)
    if cluster is not None:
        return _simulate_on_cluster(
            workload,
            system,
            cluster,
            backend,
            comm_groups,
            use_symmetry,
            record_timeline,
            progress,
            read,
            trace_format,
            remote_memory,
            faults,
        )
    if faults:
        raise InputError(
            "faults are injected on a cluster (the NCCL-like engine): give --cluster", where=f"--{faults.items()[0][0]}"
        )
    if system is None or network is None:
        raise InputError("need a system and a network configuration, or a cluster")
    sys_cfg = system if isinstance(system, SystemConfig) else read_system(system)
    topo = network if isinstance(network, Topology) else read_network(network)
    rm_cfg = None
    if remote_memory is not None:
        rm_cfg = remote_memory if isinstance(remote_memory, RemoteMemoryConfig) else read_remote_memory(remote_memory)
    wl, label = _load_workload(
        workload, topo.num_npus, comm_groups, trace_format, ReadOptions(topo.num_npus, execution_trace, whole_trace)
    )
    params = system_params(sys_cfg, num_queues_per_dim, injection_scale)
    compute = ComputeTiming(
        sys_cfg.roofline_enabled, sys_cfg.local_mem_bw_GBps, sys_cfg.peak_perf_TFLOPS, sys_cfg.replay_only
    )
    rm = None
    if rm_cfg is not None:
        rm = RemoteMemoryParams(
            rm_cfg.memory_type, rm_cfg.latency_ns, rm_cfg.bandwidth, rm_cfg.npus_per_node, rm_cfg.num_nodes
        )
    try:
        result = _simulate(wl, topo, params, compute, rm, use_symmetry, record_timeline, progress, rendezvous)
    except InputError as e:
        raise _attribute(e, sys_cfg, rm_cfg, label, comm_groups) from None
    except SimulationError as e:  # a deadlock: name the workload whose ops wait forever
        raise SimulationError(f"{label}: {e}") from None
    result.info["podsim_version"] = __version__
    short = label if isinstance(workload, Workload) else Path(str(workload)).name
    result.info["title"] = f"{short} on {topo.num_npus} NPUs"
    result.info["workload"] = label
    result.info["network"] = describe_topology(topo)
    if wl.rank_labels is not None:
        result.info["rank_labels"] = list(wl.rank_labels)
    result.info["system"] = (
        f"{sys_cfg.scheduling_policy}, {sys_cfg.collective_optimization}, "
        f"{sys_cfg.preferred_dataset_splits} splits, "
        f"{sys_cfg.active_chunks_per_dimension} active chunks/dim"
    )
    for key, val in sys_cfg.ignored.items():
        result.notes.append(
            f"{Path(sys_cfg.source).name}: key {key!r} = {val!r} is accepted but ignored, as ASTRA-sim 2.x ignores it"
        )
    return result


def load_workload(
    path: PathLike,
    gpus: int | None = None,
    execution_trace: PathLike | None = None,
    whole_trace: bool = False,
    trace_format: str | None = None,
) -> Workload:
    """Read a workload in any format podsim knows (``trace_format``, or sniffed from ``path`` in
    the order of :data:`podsim.formats.registry.SNIFF_ORDER`):

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
        InputError: for an unknown format, a missing ``gpus`` where the format does not say, or a
            bad file.
    """
    return _to_workload(path, trace_format, ReadOptions(gpus, execution_trace, whole_trace))


def format_of(path: PathLike, trace_format: str | None = None) -> TraceFormat:
    """The trace format of ``path``: the one named ``trace_format``, else the sniffed one.

    Raises:
        InputError: for an unknown format name (with the closest one).
    """
    return find_format(path, trace_format)


def trace_formats() -> tuple[str, ...]:
    """The names of the trace formats podsim reads, in sniffing order."""
    return TRACE_FORMATS.names()


def _comm_groups(
    workload: PathLike | Workload, comm_groups: PathLike | dict[str, tuple[int, ...]] | None, n: int
) -> tuple[PathLike | dict[str, tuple[int, ...]] | None, dict[str, tuple[int, ...]] | None]:
    """(the comm-group configuration in effect, its groups): ``comm_groups``, or for a path the
    ``<path>.comm_groups.json`` beside it."""
    if comm_groups is None and not isinstance(workload, Workload):
        # `podsim llm --chakra PREFIX` / `podsim convert` write PREFIX.comm_groups.json beside the traces
        beside = Path(f"{workload}.comm_groups.json")
        if beside.is_file():
            comm_groups = beside
    if comm_groups is None:
        return None, None
    return comm_groups, comm_groups if isinstance(comm_groups, dict) else read_comm_groups(comm_groups, n)


def _load_workload(
    workload: PathLike | Workload,
    n: int,
    comm_groups: PathLike | dict[str, tuple[int, ...]] | None,
    fmt_name: str | None = None,
    read: ReadOptions | None = None,
) -> tuple[Workload, str]:
    """The workload (read with ``read`` in its format if a path; ``n`` ranks for a rank-file
    prefix) with the comm groups applied, and its label for messages."""
    comm_groups, groups = _comm_groups(workload, comm_groups, n)
    if isinstance(workload, Workload):
        return (with_groups(workload, groups) if groups else workload), workload.name
    fmt = find_format(workload, fmt_name)
    opts = read or ReadOptions(n)
    if fmt.rank_files:
        w = fmt.to_workload(Path(workload), ReadOptions(n, opts.execution_trace, opts.whole_trace, groups))
        label = str(workload) + (f" (groups: {comm_groups})" if isinstance(comm_groups, (str, os.PathLike)) else "")
        return w, label
    w = fmt.to_workload(Path(workload), opts)
    return (with_groups(w, groups) if groups else w), w.name


def _simulate_on_cluster(
    workload: PathLike | Workload,
    system: PathLike | SystemConfig | None,
    cluster: str | ClusterSpec,
    backend: str,
    comm_groups: PathLike | dict[str, tuple[int, ...]] | None,
    use_symmetry: bool,
    record_timeline: bool,
    progress: Callable[[int, int, int], None] | None,
    read: ReadOptions,
    fmt_name: str | None = None,
    remote_memory: PathLike | RemoteMemoryConfig | None = None,
    faults: FaultSpec | None = None,
) -> Result:
    if backend not in ("analytical", "flow"):
        raise InputError(f"unknown backend {backend!r}; expected analytical or flow", where="--backend")
    faults = faults or FaultSpec()
    spec = load_cluster(cluster)
    fmt = None if isinstance(workload, Workload) else find_format(workload, fmt_name)
    if fmt is not None and not fmt.rank_files:
        workload = fmt.to_workload(Path(workload), read)
    if isinstance(workload, Workload):
        n = workload.num_ranks
    else:  # rank files: as many ranks as files
        assert fmt is not None and fmt.ranks is not None
        n = fmt.ranks(Path(workload))
    wl, label = _load_workload(workload, n, comm_groups, fmt_name)
    fabric = build_fabric(spec, n)
    compute = ComputeTiming()
    if system is not None:
        sys_cfg = system if isinstance(system, SystemConfig) else read_system(system)
        compute = ComputeTiming(
            sys_cfg.roofline_enabled, sys_cfg.local_mem_bw_GBps, sys_cfg.peak_perf_TFLOPS, sys_cfg.replay_only
        )
    rm = None
    if remote_memory is not None:
        rm_cfg = remote_memory if isinstance(remote_memory, RemoteMemoryConfig) else read_remote_memory(remote_memory)
        rm = RemoteMemoryParams(
            rm_cfg.memory_type, rm_cfg.latency_ns, rm_cfg.bandwidth, rm_cfg.npus_per_node, rm_cfg.num_nodes
        )

    def run(f: FaultSpec) -> Result:
        plan = resolve_faults(f, n, fabric) if f else None
        return simulate_cluster(
            wl,
            degraded_fabric(fabric, plan.links) if plan is not None else fabric,
            spec.nccl,
            backend,
            compute,
            use_symmetry,
            record_timeline and f == faults,
            progress,
            remote_memory=rm,
            faults=plan,
        )

    try:
        result = run_with_faults(faults, n, run) if faults else run(FaultSpec())
    except InputError as e:
        raise e.with_source(label) from None
    except SimulationError as e:  # a deadlock: name the workload whose ops wait forever
        raise SimulationError(f"{label}: {e}") from None
    result.info["podsim_version"] = __version__
    short = label if isinstance(workload, Workload) else Path(str(workload)).name
    result.info["title"] = f"{short} on {n} GPU{'s' if n != 1 else ''} of {spec.name} ({backend})"
    result.info["workload"] = label
    result.info["cluster"] = spec.description or spec.name
    if wl.rank_labels is not None:
        result.info["rank_labels"] = list(wl.rank_labels)
    return result


def _simulate_parallel(
    workload: PathLike | Workload | OneGpuStep,
    spec: ParallelSpec,
    system: PathLike | SystemConfig | None,
    network: PathLike | Topology | None,
    remote_memory: PathLike | RemoteMemoryConfig | None,
    comm_groups: PathLike | dict[str, tuple[int, ...]] | None,
    *,
    num_queues_per_dim: int,
    injection_scale: float,
    use_symmetry: bool,
    progress: Callable[[int, int, int], None] | None,
    rendezvous: bool,
    cluster: str | ClusterSpec | None,
    backend: str,
    execution_trace: PathLike | None,
    whole_trace: bool,
    trace_format: str | None,
    faults: FaultSpec | None = None,
) -> Result:
    """One GPU's training step (read from ``workload``, or given) on ``spec.gpus`` GPUs of
    ``cluster``: memory checked (and offloaded), parallelized, simulated; notes say the one-GPU
    time against the simulated one and the memory per GPU; ``info["layers"]`` rank 0 by layer."""
    if isinstance(workload, Workload):
        raise InputError("parallel= takes a one-GPU trace (or step), not a built multi-rank workload")
    if spec.mode not in MODES:
        raise InputError(f"parallel mode must be one of {', '.join(MODES)}, not {spec.mode!r}", where="--parallel")
    if isinstance(workload, OneGpuStep):
        step = workload
    else:
        step = load_step(
            whole_trace=whole_trace,
            traced_batch=spec.batch_size,
            simulated_batch=spec.batch_size_sim,
            execution_trace=execution_trace,
            path=workload,
            trace_format=trace_format,
        )
    cluster = cluster or DEFAULT_PARALLEL_CLUSTER
    step, time_note = _retime(step, spec.retime, cluster)
    step, memory_note, remote = _fit_memory(step, spec, cluster, remote_memory)
    wl = parallelize(
        step,
        spec.mode,
        spec.gpus,
        batch=step.batch,
        micro_batch=spec.micro_batch,
        bucket_bytes=int(spec.bucket_mb * 2**20),
        pipeline_schedule=spec.pipeline_schedule,
        pp_replicas=spec.dp,
    )
    res = simulate(
        wl,
        system,
        network,
        remote,
        comm_groups,
        num_queues_per_dim=num_queues_per_dim,
        injection_scale=injection_scale,
        use_symmetry=use_symmetry,
        record_timeline=True,
        progress=progress,
        rendezvous=rendezvous,
        cluster=cluster,
        backend=backend,
        faults=faults,
    )
    mode = f"pp x dp {spec.dp}" if spec.mode == "pp" and spec.dp > 1 else spec.mode
    if time_note:
        res.notes.append(time_note)
    res.notes.append(summary(step, mode, res.num_ranks, res.finish_ns))
    res.notes.append(memory_note)
    res.info["layers"] = [
        {
            "layer": r.layer,
            "forward_ns": r.forward_ns,
            "backward_ns": r.backward_ns,
            "optimizer_ns": r.optimizer_ns,
            "comm_ns": r.comm_ns,
            "exposed_comm_ns": r.exposed_comm_ns,
        }
        for r in layer_breakdown(res, 0)
    ]
    return res


def _retime(step: OneGpuStep, target: str | None, cluster: str | ClusterSpec) -> tuple[OneGpuStep, str | None]:
    """The step timed on ``target`` (a GPU; None: the cluster's when the capture ran on the CPU
    or on another GPU than the cluster's; ``off``: as captured), and the note that says which
    times the run rests on.

    Raises:
        InputError: an unknown GPU, a CPU capture on a cluster without a GPU type and no --retime."""
    ran = gpu_of_device(step.device_name or "") if step.device == "cuda" else None
    if target is None:
        if step.device == "cuda":  # re-timed where it ran on another GPU than the cluster's
            target = load_cluster(cluster).gpu
            if ran is None or target is None or get_gpu(target).key == ran.key:
                return step, None
        elif step.device != "cpu":
            return step, None
        else:
            target = load_cluster(cluster).gpu
        if target is None:
            raise InputError(
                "the capture ran on the CPU and the cluster names no GPU type to time its ops on: give --retime GPU "
                "(or --retime off to simulate the CPU's times)",
                where="--retime",
            )
    if str(target).lower() == AS_CAPTURED:
        if step.device == "cpu":
            return step, "op times are the CPU's that captured the step (--retime off), not a GPU's"
        here = load_cluster(cluster).gpu
        if ran is not None and here is not None and get_gpu(here).key != ran.key:
            return (
                step,
                f"op times are the {step.device_name}'s that captured the step (--retime off), not the {here}'s",
            )
        return step, None
    try:
        gpu = get_gpu(target)
    except InputError as e:
        raise InputError(e.message, where="--retime") from None
    out, report = retime(step, gpu, ran)
    return out, report.note(step.device, step.device_name)


def _fit_memory(
    step: OneGpuStep,
    spec: ParallelSpec,
    cluster: str | ClusterSpec,
    remote_memory: PathLike | RemoteMemoryConfig | None,
) -> tuple[OneGpuStep, str, PathLike | RemoteMemoryConfig | None]:
    """(step with offloads marked, a note on memory per GPU, the remote memory to simulate with)."""
    if spec.gpu_memory_gib is not None:
        if spec.gpu_memory_gib <= 0:
            raise InputError(f"expected a positive number of GiB, got {spec.gpu_memory_gib:g}", where="--gpu-memory")
        capacity, source = int(spec.gpu_memory_gib * 2**30), "--gpu-memory"
    else:
        cl = load_cluster(cluster)
        if cl.gpu_memory_bytes is None:
            raise InputError(f"the cluster {cl.name} names no GPU type: give --gpu-memory GIB", where="--cluster")
        capacity, source = int(cl.gpu_memory_bytes), cl.gpu
    bw = spec.remote_bandwidth_gbps
    if bw is not None and bw <= 0:
        raise InputError(f"expected a positive bandwidth in GB/s, got {bw:g}", where="--remote-bandwidth")
    gpus = spec.gpus or 1
    micro = micro_batches(gpus // max(spec.dp, 1), step.batch, spec.micro_batch) if spec.mode == "pp" else 1
    step, fp = fit_memory(
        step,
        spec.mode,
        gpus,
        capacity,
        offload=bw is not None,
        micro_batches=micro,
        pipeline_schedule=spec.pipeline_schedule,
        pp_replicas=spec.dp,
    )
    offloaded = sum(o.offload_bytes for o in step.ops)
    note = f"memory per GPU: {fp.describe()} of {capacity / 2**30:.2f} GiB ({source})"
    remote = remote_memory
    if offloaded:
        note += f"; {offloaded / 2**30:.2f} GiB of activations offloaded at {bw:g} GB/s"
        remote = RemoteMemoryConfig("PER_NODE_MEMORY_EXPANSION", 0.0, bw, None, 1, "--remote-bandwidth")
    return step, note, remote


def _attribute(
    e: InputError, sys_cfg: SystemConfig, rm_cfg: RemoteMemoryConfig | None, workload: str, comm_groups: object
) -> InputError:
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


def _one_cpu_capture(path: PathLike) -> bool:
    """Whether ``path`` is a ``podsim trace`` folder of one process on the CPU, with its execution
    trace (what :mod:`podsim.parallelize.retime` re-times)."""
    try:
        d = capture_info(Path(path))
    except InputError:  # a capture.json that is not one: replayed as any trace folder
        return False
    if d.get("device") != "cpu" or d.get("nproc", 1) != 1 or d.get("world_size", 1) != 1:
        return False  # a distributed job's ranks (fake or real) replay as their ranks
    return bool((d.get("files") or {}).get("execution_trace"))


@dataclass
class SimulateOutcome:
    """What one ``podsim simulate`` job gives: the result, and whether it comes from a one-GPU
    trace taken to many GPUs (``one_gpu``) or from a parallel job traced rank by rank whose
    layers are known (``rank_layers``): the two that have a per-layer breakdown."""

    result: Result
    one_gpu: bool
    rank_layers: bool


def run_job(job: SimulateJob, progress: Callable[[int, int, int], None] | None = None) -> SimulateOutcome:
    """``podsim simulate`` from its job spec: the checks its flags need together, the workload
    (``--workload``, or ``--triosim`` / ``--pytorch`` with the one-GPU pipeline), then
    :func:`simulate`.

    Raises:
        InputError: a missing, contradictory or malformed input."""
    t, g, m, out = job.trace, job.one_gpu, job.machine, job.outputs
    groups = m.comm_groups
    if groups is not None and "empty" in groups:
        groups = None
    workload, trace_format = t.workload, t.trace_format
    one_gpu = bool(t.triosim or t.pytorch) or (bool(workload) and g.parallel is not None)
    as_captured = str(g.retime).lower() == AS_CAPTURED
    if not one_gpu and workload and m.cluster is not None and not as_captured and _one_cpu_capture(workload):
        one_gpu = True  # replayed on the cluster's GPU: its ops re-timed there, not its CPU's times
    if t.triosim or t.pytorch:
        if workload:
            raise InputError("give one of --workload-configuration, --triosim and --pytorch")
        if t.triosim and t.pytorch:
            raise InputError("give one trace: a TrioSim folder or a podsim trace folder")
        if trace_format is not None:
            raise InputError(
                "--format names the format of --workload PATH; --triosim and --pytorch name their own", where="--format"
            )
        workload, trace_format = (t.triosim, "triosim") if t.triosim else (t.pytorch, "pytorch")
    elif not workload:
        raise InputError("missing --workload-configuration (or --triosim DIR, --pytorch DIR)")
    rank_layers = not one_gpu and format_of(workload, trace_format).layers
    if g.layers and not (one_gpu or rank_layers):
        raise InputError(
            "per-layer breakdowns need a one-GPU trace to parallelize (--triosim DIR, --pytorch DIR, or "
            "--workload PATH --parallel MODE) or a parallel job traced rank by rank (podsim trace "
            "--world-size N --layout ...)",
            where="--layers",
        )
    parallel = None
    if one_gpu:
        parallel = ParallelSpec(
            g.parallel or "ddp",
            m.gpus or 1,
            g.micro_batch,
            g.schedule,
            g.dp,
            g.bucket_mb,
            g.batch_size,
            g.batch_size_sim,
            g.gpu_memory,
            g.remote_bandwidth,
            g.retime,
        )
    elif m.cluster is None:
        for flag, val in (("--system-configuration", m.system), ("--network-configuration", m.network)):
            if val is None:
                raise InputError(f"missing {flag} (or give --cluster)")
    res = simulate(
        workload,
        m.system,
        m.network,
        m.remote_memory,
        groups,
        num_queues_per_dim=m.num_queues_per_dim,
        injection_scale=m.injection_scale,
        use_symmetry=not out.no_symmetry,
        record_timeline=bool(out.trace or out.plot or g.layers),
        progress=progress,
        rendezvous=m.rendezvous,
        cluster=m.cluster,
        backend=m.backend,
        gpus=m.gpus,
        execution_trace=t.execution_trace,
        whole_trace=t.whole_trace,
        trace_format=trace_format,
        parallel=parallel,
        faults=job.faults.spec(),
    )
    if m.comm_scale != 1.0:
        res.notes.append(f"--comm-scale {m.comm_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    if m.compute_scale != 1.0:
        res.notes.append(f"--compute-scale {m.compute_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    return SimulateOutcome(res, one_gpu, bool(rank_layers))
