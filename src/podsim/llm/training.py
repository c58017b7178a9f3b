"""What one simulated training iteration says (:class:`TrainingResult`, the result of
:func:`podsim.api.train`), and the choices it rests on: the cluster for a GPU, how the GPU's
kernel times are known, the ranks of a layout's groups.

Result fields (``TrainingResult.to_dict``; times in s, FLOP/s in 10^12, memory in GiB):
``iteration_time_s``; ``model_tflops_per_gpu`` (model FLOPs, :mod:`podsim.llm.flops`, over time
and GPUs: full ``s x s`` attention, as Megatron-LM and Korthikanti et al. count);
``model_tflops_per_gpu_causal`` (the causal attention scores at half, as NeMo and Megatron-
Bridge count in their performance tables); ``hardware_tflops_per_gpu`` (counting
recomputation); ``mfu`` (model FLOP/s over the GPU's dense peak); ``tokens_per_s``;
``memory_peak_gib`` (worst pipeline stage) and per-stage memory; ``breakdown``: ``compute_s``
(GPU compute busy), ``exposed_comm_s`` (collectives not hidden under compute), ``bubble_s``
(waiting for the neighbouring pipeline stage), ``other_s`` (the rest), all on the pipeline rank
that finishes last.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..hardware.cluster import ClusterSpec, load_cluster
from ..hardware.gpu import GpuSpec
from ..intervals import length, merged, subtract
from ..report.result import Result
from .flops import causal_model_flops
from .layout import Layout
from .memory import GIB, fits, worst_stage
from .model import ModelConfig


@dataclass
class TrainingResult:
    """What one simulated iteration says."""

    model: ModelConfig
    layout: Layout
    gpu: GpuSpec
    cluster: str
    backend: str
    result: Result
    model_flops: float
    hardware_flops: float
    breakdown: dict[str, float] = field(default_factory=dict)
    memory: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compute_model: str = ""
    #: how the GPU's kernel times were obtained: ``status`` measured (a kernel table) / fitted
    #: (roofline parameters fitted to this GPU's measurements) / derived (a sibling's fit on this
    #: GPU's datasheet), ``source``, ``derived_from``
    calibration: dict = field(default_factory=dict)
    #: per-kernel rows of one layer, the embedding, the output layer and the optimizer
    #: (:mod:`podsim.llm.kernel_report`)
    kernels: dict = field(default_factory=dict)
    #: CPU ns the stack spends launching one kernel (``llm/stack.yaml``'s ``host_ns``)
    host_ns: float = 0.0
    #: the software stack (``stacks/``): name, origin, base, values; and ``applied``, the layout
    #: fields its framework rules set (those the user left at their defaults)
    stack: dict = field(default_factory=dict)

    @property
    def iteration_time_s(self) -> float:
        return self.result.finish_ns / 1e9

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.iteration_time_s / self.layout.gpus / 1e12

    @property
    def model_tflops_per_gpu_causal(self) -> float:
        """Model TFLOP/s per GPU with the causal attention counted at half (NeMo's count)."""
        return causal_model_flops(self.model, self.layout) / self.iteration_time_s / self.layout.gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops / self.iteration_time_s / self.layout.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.model_tflops_per_gpu * 1000 / self.gpu.peak(self.layout.compute_dtype)

    @property
    def memory_peak_gib(self) -> float:
        return worst_stage(self.memory).total / GIB

    @property
    def memory_fits(self) -> bool:
        """Whether the worst stage fits in the GPU's memory (:func:`~podsim.llm.memory.fits`)."""
        return fits(worst_stage(self.memory), self.gpu.memory_gib)

    def to_dict(self) -> dict:
        lay = self.layout
        return {
            "model": self.model.name,
            "gpu": self.gpu.name,
            "cluster": self.cluster,
            "backend": self.backend,
            "compute_model": self.compute_model,
            "calibration": self.calibration,
            "stack": self.stack,
            "layout": layout_dict(self.model, lay),
            "iteration_time_s": round(self.iteration_time_s, 9),
            "tokens_per_s": round(lay.global_batch * lay.seq_len / self.iteration_time_s, 3),
            "model_tflops_per_gpu": round(self.model_tflops_per_gpu, 3),
            "model_tflops_per_gpu_causal": round(self.model_tflops_per_gpu_causal, 3),
            "hardware_tflops_per_gpu": round(self.hardware_tflops_per_gpu, 3),
            "mfu": round(self.mfu, 5),
            "memory_peak_gib": round(self.memory_peak_gib, 4),
            "memory_fits": self.memory_fits,
            "memory_per_stage": [
                {k: round(v, 4) if isinstance(v, float) else v for k, v in s.as_gib().items()} for s in self.memory
            ],
            "breakdown": {k: None if v is None else round(v, 9) for k, v in self.breakdown.items()},
            "simulation": {k: v for k, v in self.result.info.items() if k not in ("podsim_version",)},
            "notes": self.notes + list(self.result.notes),
            "kernels": self.kernels,
            **({"faults": self.result.faults} if self.result.faults else {}),
        }


def layout_dict(model: ModelConfig, lay: Layout) -> dict:
    """The ``layout`` field of the JSON (every setting of the layout, and its layers per virtual stage)."""
    return {
        "gpus": lay.gpus,
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp,
        "cp": lay.cp,
        "ep": lay.ep,
        "etp": lay.expert_tp,
        "edp": lay.edp,
        "vpp": lay.vpp,
        "global_batch": lay.global_batch,
        "micro_batch": lay.micro_batch,
        "num_microbatches": lay.num_microbatches,
        "seq_len": lay.seq_len,
        "sequence_parallel": lay.sequence_parallel,
        "recompute": lay.recompute,
        "recompute_modules": list(lay.recompute_modules) if lay.recompute == "selective" else [],
        "recompute_layers": lay.recompute_layers,
        "schedule": lay.schedule,
        "zero": lay.zero,
        "distributed_optimizer": lay.distributed_optimizer,
        "precision": lay.precision,
        "tp_overlap": lay.tp_overlap,
        "overlap_grad_reduce": lay.overlap_grad_reduce,
        "overlap_param_gather": lay.overlap_param_gather,
        "loss_fusion": lay.loss_fusion,
        "layers_per_virtual_stage": lay.virtual_stage_layer_counts(model),
    }


def calibration_of(gpu: GpuSpec, table: bool) -> dict:
    """How ``gpu``'s kernel times are known (the ``calibration`` field of the JSON)."""
    if table:
        return {"status": "measured", "source": "kernel table", "derived_from": None, "scale": {}}
    fit = _FITS.get(gpu.key)
    if fit is not None:
        return {"status": "fitted", "source": fit, "derived_from": None, "scale": {}}
    own = gpu.efficiency_from
    sib = own if own and own != gpu.key else "a100-80gb"
    scaled = ""
    if gpu.efficiency_scale:
        factors = ", ".join(f"{p} x{f:g}" for p, f in gpu.efficiency_scale.items())
        scaled = (
            f", scaled by published kernel measurements ({factors}; podsim/hardware/published_kernels.csv, "
            "docs/hardware.md)"
        )
    return {
        "status": "derived",
        "source": f"{sib}'s fit ({_FITS.get(sib, 'its own')}) on the {gpu.name}'s "
        f"datasheet peaks and HBM bandwidth{scaled}",
        "derived_from": sib,
        "scale": dict(gpu.efficiency_scale),
    }


def replica_calibration(gpu: GpuSpec, profile: str | None) -> dict:
    """How a serving replica's step times are known: the measured tables of ``profile`` (Vidur's
    layout), else :func:`calibration_of` its GPU."""
    if profile:
        return {"status": "measured", "source": f"the tables in {profile}", "derived_from": None, "scale": {}}
    return calibration_of(gpu, False)


#: GPUs whose roofline parameters were fitted to their own measurements (docs/compute.md)
_FITS = {
    "a100-80gb": "Megatron-LM SC'21 Table 1 (A100 80GB)",
    "h100-80gb": "podsim's H100 kernel table (src/podsim/compute/tables/h100-80gb.csv)",
}


def default_cluster(
    gpu: GpuSpec, gpus_per_node: int | None, nic_bandwidth: float | None, cluster: str | ClusterSpec | None
) -> ClusterSpec:
    """The cluster to run on: ``cluster`` if given, else the preset that matches the GPU; with
    ``gpus_per_node`` / ``nic_bandwidth`` (bytes per ns) overriding it."""
    if isinstance(cluster, ClusterSpec):
        spec = cluster
    else:
        if cluster is None and not gpu.preset:
            raise InputError(
                f"no cluster preset for GPU {gpu.key} ({gpu.name}): give --cluster (a preset or a cluster "
                "YAML), or a `preset:` in its GPU entry",
                where="--cluster",
            )
        spec = load_cluster(cluster or gpu.preset)
    if gpus_per_node is None and nic_bandwidth is None:
        return spec
    inter = dict(spec.inter)
    if nic_bandwidth is not None:
        inter["nic_bandwidth"] = nic_bandwidth
    gpn = gpus_per_node or spec.gpus_per_node
    tray = spec.gpus_per_tray if spec.gpus_per_tray and gpn % spec.gpus_per_tray == 0 else None
    return replace(
        spec,
        name=spec.name + "-custom",
        gpus_per_node=gpn,
        inter=inter,
        max_gpus=None,
        gpus_per_tray=tray,
        topology_file=None,
    )


def group_ranks(layout: Layout, group: str) -> tuple[int, ...] | None:
    """The ranks of the first ``tp`` / ``cp`` / ``dp`` (DP x CP) group of ``layout``, or of its
    experts' ``etp`` / ``ep`` / ``edp`` groups (folded over TP x CP x DP, ETP fastest); None for
    a group of one rank or another name."""
    t, et, e = layout.tp, layout.expert_tp, layout.ep
    stride_size = {
        "tp": (1, t),
        "cp": (t, layout.cp),
        "dp": (t, layout.dp * layout.cp),
        "etp": (1, et),
        "ep": (et, e),
        "edp": (et * e, layout.edp),
    }
    if group not in stride_size or stride_size[group][1] < 2:
        return None
    stride, size = stride_size[group]
    return tuple(i * stride for i in range(size))


def breakdown(res: Result) -> dict[str, float]:
    """Compute, exposed collectives, pipeline waits and the rest, on the rank finishing last."""
    last = res.last_rank()
    slices = res.timelines.get(last.rank, [])
    if not slices:  # simulated without a timeline: only the compute total is known
        return {
            "compute_s": last.compute_ns / 1e9,
            "exposed_comm_s": None,
            "bubble_s": None,  # type: ignore[dict-item]
            "other_s": None,
        }
    comp = merged([(s.start_ns, s.end_ns) for s in slices if s.category == "compute"])
    coll = merged(
        [
            (s.start_ns, s.end_ns)
            for s in slices
            if s.category == "comm" and " recv " not in f" {s.name} " and " send " not in f" {s.name} "
        ]
    )
    recv = merged([(s.start_ns, s.end_ns) for s in slices if s.category == "comm" and s.name.startswith("recv")])
    total = last.finish_ns
    c = length(comp)
    exposed = length(subtract(coll, comp))
    busy = merged(comp + coll)
    bubble = length(subtract(recv, busy))
    other = max(0, total - c - exposed - bubble)
    return {"compute_s": c / 1e9, "exposed_comm_s": exposed / 1e9, "bubble_s": bubble / 1e9, "other_s": other / 1e9}
