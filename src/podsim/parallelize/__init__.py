"""From a one-GPU trace to a multi-GPU workload: data (dp, ddp), tensor and pipeline parallelism,
batch extrapolation, per-GPU memory with offloading to remote memory."""

from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .memory import Footprint, footprint, plan_offload
from .pipeline_parallel import partition, pipeline_parallel
from .plan import MODES, fit_memory, load_step, parallelize, summary
from .tensor_parallel import tensor_parallel
from .trace import OneGpuStep, StepOp, from_pytorch, from_triosim

__all__ = ["DDP_BUCKET_BYTES", "Footprint", "MODES", "OneGpuStep", "fit_memory", "footprint", "plan_offload", "StepOp", "data_parallel", "extrapolate", "from_pytorch",
           "from_triosim", "load_step", "parallelize", "partition", "pipeline_parallel", "summary",
           "tensor_parallel"]
