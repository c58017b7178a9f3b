"""``podsim llm`` as a Python call: one training iteration of an LLM under a parallel layout.

:func:`train` takes a :class:`~podsim.jobs.train.TrainJob` (what the command line and the
sweep build from their flags); :func:`simulate_training` takes the typed pieces (a model
config, a layout, a GPU) for scripts that build them themselves.  Both return a
:class:`~podsim.llm.training.TrainingResult`.

Example::

    from podsim.api import train
    from podsim.jobs.train import TrainJob
    job = TrainJob.from_values({"model": "llama3-8b", "gpu": "h100", "gpus": 64, "tp": 8,
                                "global-batch": 64})
    print(train(job).iteration_time_s)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..collectives.nccl.planner import CollectivePlanner
from ..compute.model import ComputeModel, KernelTimer
from ..compute.table import table_model
from ..engine.cluster import simulate_cluster
from ..engine.faults import FaultSpec, degraded_fabric, resolve_faults
from ..errors import InputError
from ..formats.chakra import write_workload_with_groups
from ..hardware.cluster import ClusterSpec, shared_fabric
from ..hardware.gpu import GpuSpec, check_precision, get_gpu, gpu_specs
from ..jobs.train import TrainJob
from ..llm.export import write_simai
from ..llm.flops import iteration_flops
from ..llm.generate import generate
from ..llm.kernel_report import kernel_rows
from ..llm.layout import Layout
from ..llm.memory import GIB, StageMemory, fits, memory, stage_params, worst_stage
from ..llm.model import ModelConfig, zoo
from ..llm.ops import LayerCosts
from ..llm.stack import FP8_ROWWISE_GPU, Stack
from ..llm.training import TrainingResult, breakdown, calibration_of, default_cluster, group_ranks
from ..network.fabric import Fabric
from ..stacks.rules import apply_rules
from ..stacks.stack import DEFAULT_TRAINING, SoftwareStack, load_stack
from ..units import parse_bandwidth
from ..workload import CollectiveKind, Workload
from .faults import run_with_faults


def resolved_layout(job: TrainJob, model: ModelConfig) -> Layout:
    """The job's layout with what it leaves open filled in: the model's sequence length, and
    the interleaved schedule when ``vpp > 1``.

    Raises:
        InputError: ``gpus`` or ``global-batch`` missing."""
    lay = job.layout
    for flag, value in (("--gpus", lay.gpus), ("--global-batch", lay.global_batch)):
        if value is None:
            raise InputError(f"{flag} is required")
    return replace(lay, seq_len=lay.seq_len or model.seq_len, schedule="interleaved" if lay.vpp > 1 else lay.schedule)


def train(
    job: TrainJob,
    *,
    record_timeline: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    record_link_load: bool | None = None,
) -> TrainingResult:
    """Simulate one training iteration of ``job``.  ``record_link_load``: keep the flow
    backend's link loads over time (a trace's counter tracks; default: with the timeline).

    ``progress(now_ns, stages_finished, stages)`` is called about once a second of wall time.

    Raises:
        InputError: a missing or contradictory input, a layout the model or cluster cannot take.
    """
    model = job.model.load()
    lay = resolved_layout(job, model)
    if lay.sequence_parallel and lay.tp == 1:  # asked for: a stack's rule sets it only with TP > 1
        raise InputError(
            "sequence parallelism shards the activations over the tensor-parallel ranks, and --tp 1 has none: "
            "drop --sequence-parallel or give --tp 2 or more",
            where="--sequence-parallel",
        )
    if job.simulation.granularity != "bulk" and job.simulation.backend != "flow":
        raise InputError(
            f"{job.simulation.granularity!r} sets the flow backend's flows; with --backend "
            f"{job.simulation.backend} it would be ignored (add --backend flow)",
            where="--granularity",
        )
    hw = job.hardware
    gpu = hw.gpu if isinstance(hw.gpu, GpuSpec) else get_gpu(hw.gpu)
    over = job.cluster
    nic = parse_bandwidth(over.nic_bandwidth, where="--nic-bandwidth") if over.nic_bandwidth else None
    compute = None
    if job.timing.kernel_table:
        table = job.timing.kernel_table
        compute = table_model(table if table == "measured" else str(Path(table)), gpu, lay.compute_dtype)
    software = load_stack(job.software.stack or DEFAULT_TRAINING, "training")
    spec = job.faults.spec()

    def run(faults: FaultSpec, record: bool = record_timeline) -> TrainingResult:
        return simulate_training(
            model,
            lay,
            gpu,
            hw.cluster,
            job.simulation.backend,
            over.gpus_per_node,
            nic,
            record_timeline=record,
            compute=compute,
            granularity=job.simulation.granularity,
            record_link_load=record_link_load if record else False,
            progress=progress,
            software=software,
            allow_oom=job.simulation.allow_oom,
            faults=faults or None,
        )

    if not spec:
        return run(spec)
    # the runs that only give a step time keep no timeline; the one with every fault is the result
    return run_with_faults(spec, lay.gpus, lambda f: run(f) if f == spec else run(f, False), lambda r: r.result)


def _kernel_timer(result: TrainingResult, job: TrainJob) -> KernelTimer:
    """The kernel timer a result was simulated with (for exporting its workload)."""
    if job.timing.kernel_table:
        return table_model(job.timing.kernel_table, job.hardware.gpu, result.layout.compute_dtype)
    return ComputeModel.for_gpu(result.gpu, result.layout.compute_dtype)


def export_simai(result: TrainingResult, job: TrainJob, path: str) -> None:
    """Write pipeline stage 0 of the simulated iteration as a SimAI/AICB workload file."""
    write_simai(result.model, result.layout, _kernel_timer(result, job), path)


def export_chakra(result: TrainingResult, job: TrainJob, prefix: str) -> tuple[list[str], str]:
    """Write the iteration's workload as Chakra ET files ``prefix.<rank>.et`` and its comm
    groups JSON; returns (the ET paths, the groups file)."""
    w = generate(result.model, result.layout, _kernel_timer(result, job))
    paths, groups = write_workload_with_groups(w, prefix)
    return list(paths), str(groups)


def catalog() -> tuple[list[tuple[str, ModelConfig]], list[tuple[str, GpuSpec]]]:
    """The zoo's models and the GPUs podsim knows, by name (what ``podsim llm --list`` shows)."""
    return list(zoo().items()), list(gpu_specs().items())


def simulate_training(
    model: ModelConfig,
    layout: Layout,
    gpu: str | GpuSpec = "a100-80gb",
    cluster: str | ClusterSpec | None = None,
    backend: str = "analytical",
    gpus_per_node: int | None = None,
    nic_bandwidth: float | None = None,
    flash_attention: bool | None = None,
    record_timeline: bool = True,
    compute: KernelTimer | None = None,
    granularity: str = "bulk",
    progress: Callable[[int, int, int], None] | None = None,
    rendezvous: bool = True,
    stack: Stack | None = None,
    software: SoftwareStack | None = None,
    allow_oom: bool = False,
    record_link_load: bool | None = None,
    faults: FaultSpec | None = None,
) -> TrainingResult:
    """Simulate one iteration.

        ``granularity``: with the flow backend, ``bulk`` (default) runs each collective step's
        identical rounds as one set of flows (see :func:`~podsim.engine.cluster.simulate_cluster`);
        ``round`` simulates every round.  ``progress(now_ns, stages_finished, stages)`` is called
        about once a second of wall time.  ``rendezvous``: pipeline sends wait for the receiving
        stage to post its receive (NCCL's send/recv of large messages; Megatron's blocking
        point-to-point), holding the sender's pipeline stream meanwhile.  ``stack``: the host
    overhead, in-step efficiency and interference parameters (default: the GPU's, ``llm/stack.yaml``,
    under ``software``).  ``software``: the software stack (default megatron-core): its framework
    rules fill the layout fields left at their defaults, its physical parameters time the kernels.
    ``allow_oom``: simulate a layout that does not fit in the GPU's memory (its result says so)
    instead of refusing it (validation and calibration rows ran, so they pass True).
    ``record_link_load``: keep the flow backend's link loads over time, for a trace's counter
    tracks (default: when ``record_timeline``).  ``faults``: slow GPUs, NICs and links and a host
    hiccup injected into the iteration (:mod:`podsim.engine.faults`): every rank is simulated;
    a group whose collectives are folded into fused ops in closed form (tensor parallelism
    inside a server) computes at its slowest GPU's speed, as its collectives would make it.

        Raises:
            InputError: for a layout the model or cluster cannot take (see :meth:`Layout.check`),
            or that does not fit in the GPU's memory (unless ``allow_oom``).
    """
    spec_gpu = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
    check_precision(layout.precision, spec_gpu)
    if flash_attention is not None and flash_attention != layout.flash_attention:
        layout = replace(layout, flash_attention=flash_attention)
    applied: dict = {}
    if software is not None:
        layout, applied = apply_rules(layout, model, software)
    stack = stack or Stack.for_gpu(spec_gpu.key, software)
    layout.check(model)
    stages = check_fits(model, layout, spec_gpu, allow_oom)
    cm = compute or ComputeModel.for_gpu(spec_gpu, layout.compute_dtype)
    spec = default_cluster(spec_gpu, gpus_per_node, nic_bandwidth, cluster)
    fabric = shared_fabric(spec, layout.gpus)
    plan = None
    if faults:
        plan = resolve_faults(faults, layout.gpus, fabric)
        fabric = degraded_fabric(fabric, plan.links)
    fold, estimate = _folder(layout, fabric, spec, backend)
    folded: set[str] = set()

    def fold_seen(kind: CollectiveKind, nbytes: int, group: str) -> int | None:
        t = fold(kind, nbytes, group)
        if t is not None:
            folded.add(group)
        return t

    costs = LayerCosts(model, layout, cm, layout.flash_attention, comm_ns=estimate, stack=stack)
    w = generate(model, layout, cm, costs=costs, fold=fold_seen if fold is not None else None, estimate=estimate)
    if plan is not None and plan.compute:
        plan.compute = slowest_of_folded(plan.compute, w, folded)
    # tensor-parallel collectives stay inside a server: in closed form even with the flow backend
    res = simulate_cluster(
        w,
        fabric,
        spec.nccl,
        backend,
        record_timeline=record_timeline,
        intra_server_closed_form=True,
        granularity=granularity,
        progress=progress,
        rendezvous=rendezvous,
        record_link_load=record_link_load,
        faults=plan,
    )
    mf, hf = iteration_flops(model, layout)
    out = TrainingResult(model, layout, spec_gpu, spec.name, backend, res, mf, hf, memory=stages)
    out.breakdown = breakdown(res)
    out.compute_model = cm.describe()
    out.calibration = calibration_of(spec_gpu, compute is not None and not isinstance(compute, ComputeModel))
    params = stage_params(model, layout, 0)
    sharded = layout.distributed_optimizer or layout.zero >= 1
    out.kernels = kernel_rows(
        costs,
        params / (layout.dp * layout.cp) if layout.zero >= 3 else params,
        params / (layout.dp * layout.cp) if sharded else params,
    )
    out.host_ns = stack.host_ns
    if software is not None:
        out.stack = {
            **software.echo(),
            "applied": {k: list(v) if isinstance(v, tuple) else v for k, v in applied.items()},
        }
    own = software is not None and software.get("fp8_rowwise_overhead") is not None
    if layout.rowwise_scaled and spec_gpu.key != FP8_ROWWISE_GPU and not own:
        out.notes.append(
            f"the rowwise fp8 casts are timed with fp8_rowwise_overhead {stack.fp8_rowwise_overhead:g}, fitted to "
            f"torchao's kernel measurements on the H100 only: untested on the {spec_gpu.name}"
        )
    if not out.memory_fits:
        out.notes.append(_oom_message(worst_stage(stages), spec_gpu) + " (simulated anyway: --allow-oom)")
    return out


def slowest_of_folded(compute: dict[int, float], w: Workload, folded: set[str]) -> dict[int, float]:
    """Compute factors per rank where the collectives of groups ``folded`` (timed in closed form
    inside fused ops, so not rendezvous between ranks) would make every rank of such a group
    wait for its slowest: each rank takes the largest factor of the ranks it is joined to through
    those groups (ranks at 1.0 left out)."""
    if not folded:
        return compute
    parent = list(range(w.num_ranks))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in w.groups:
        if g.name in folded and len(g.ranks) > 1:
            a = find(g.ranks[0])
            for r in g.ranks[1:]:
                b = find(r)
                if a != b:
                    parent[b] = a
    top: dict[int, float] = {}
    for r, f in compute.items():
        root = find(r)
        top[root] = max(top.get(root, 1.0), f)
    out = {}
    for r in range(w.num_ranks):
        f = top.get(find(r), 1.0)
        if f != 1.0:
            out[r] = f
    return out


def _oom_message(worst: StageMemory, gpu: GpuSpec) -> str:
    """'the layout does not fit: ...', naming the stage, its GiB and what takes them."""
    parts = (("model states", worst.states), ("activations", worst.activations), ("buffers", worst.buffers))
    what = ", ".join(f"{name} {b / GIB:.1f} GiB" for name, b in parts if b > 0)
    need = worst.total / GIB
    digits = next((d for d in range(1, 4) if round(need, d) > gpu.memory_gib), 4)  # 79.64 of 79.6: not "79.6"
    return (
        f"the layout does not fit: pipeline stage {worst.stage} needs {need:.{digits}f} GiB per GPU "
        f"({what}), the {gpu.name} has {gpu.memory_gib:g} GiB"
    )


def check_fits(model: ModelConfig, layout: Layout, gpu: GpuSpec, allow_oom: bool) -> list[StageMemory]:
    """The memory of every pipeline stage (see :func:`~podsim.llm.memory.memory`), checked against
    ``gpu``'s before anything is simulated.

    Raises:
        InputError: a stage needs more than the GPU holds and ``allow_oom`` is False; the message
        names the stage, what takes its memory and the flags that would shrink it.
    """
    stages = memory(model, layout)
    worst = worst_stage(stages)
    if allow_oom or fits(worst, gpu.memory_gib):
        return stages
    tips = []
    if worst.activations > worst.states and layout.recompute != "full":
        tips.append("--recompute full")
    if worst.states >= worst.activations and not (layout.distributed_optimizer or layout.zero):
        tips.append("--distributed-optimizer")
    tips += ["a larger --tp or --pp", "more --gpus"]
    raise InputError(f"{_oom_message(worst, gpu)}: try {', '.join(tips)}; or --allow-oom to simulate it anyway")


def _folder(layout: Layout, fabric: Fabric, spec: ClusterSpec, backend: str):  # type: ignore[no-untyped-def]
    """(fold, estimate).  ``fold``: what generate() may fuse: blocking collectives the engine
    would time in closed form anyway -- every one with the analytical backend; with the flow
    backend those of groups inside one server (TP; CP and EP when they fit in a server too).
    Exact: the fused ops give the same timeline as separate ones.  ``estimate``: the
    closed-form time of a collective on any group (DP too), for the interference of overlapped
    communication (an estimate under the flow backend, which times them itself)."""
    g = fabric.gpus_per_node
    planner = CollectivePlanner.shared(fabric, spec.nccl)
    # generate() asks for the same few (kind, bytes, group) for every layer of every
    # micro-batch: each answer is a function of them alone, so it is kept
    ranks: dict[str, tuple[int, ...] | None] = {}
    folded: dict[tuple[CollectiveKind, int, str], int | None] = {}
    estimated: dict[tuple[CollectiveKind, int, str], int | None] = {}

    def ranks_of(group: str) -> tuple[int, ...] | None:
        if group not in ranks:
            ranks[group] = group_ranks(layout, group)
        return ranks[group]

    def fold(kind: CollectiveKind, nbytes: int, group: str) -> int | None:
        key = (kind, nbytes, group)
        if key in folded:
            return folded[key]
        r = ranks_of(group)
        if r is None or group in ("dp", "edp") or (backend != "analytical" and len({x // g for x in r}) > 1):
            t = None
        else:
            t = planner.plan(r, kind, nbytes)[1]
        folded[key] = t
        return t

    def estimate(kind: CollectiveKind, nbytes: int, group: str) -> int | None:
        key = (kind, nbytes, group)
        if key in estimated:
            return estimated[key]
        r = ranks_of(group)
        t = None if r is None or nbytes <= 0 else planner.plan(r, kind, nbytes)[1]
        estimated[key] = t
        return t

    return fold, estimate
