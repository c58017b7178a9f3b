"""From a one-GPU trace to a multi-GPU workload: data (dp, ddp), tensor and pipeline parallelism,
batch extrapolation, per-GPU memory with offloading to remote memory."""

from ..formats.one_gpu_step import OneGpuStep, StepOp, from_pytorch, from_triosim, label_layers, to_triosim
from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .memory import Footprint, footprint, plan_offload
from .pipeline_parallel import partition, pipeline_parallel
from .plan import MODES, fit_memory, load_step, parallelize, summary
from .tensor_parallel import tensor_parallel

__all__ = [
    "DDP_BUCKET_BYTES",
    "Footprint",
    "MODES",
    "OneGpuStep",
    "StepOp",
    "data_parallel",
    "extrapolate",
    "fit_memory",
    "footprint",
    "from_pytorch",
    "from_triosim",
    "label_layers",
    "load_step",
    "parallelize",
    "partition",
    "pipeline_parallel",
    "plan_offload",
    "summary",
    "tensor_parallel",
    "to_triosim",
]
