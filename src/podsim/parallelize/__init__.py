"""From a one-GPU trace to a multi-GPU workload (issue #5, in progress): data, tensor and pipeline
parallelism and batch extrapolation so far."""

from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .pipeline_parallel import partition, pipeline_parallel
from .tensor_parallel import tensor_parallel
from .trace import OneGpuStep, StepOp, from_pytorch, from_triosim

__all__ = ["DDP_BUCKET_BYTES", "OneGpuStep", "StepOp", "data_parallel", "extrapolate", "from_pytorch", "from_triosim",
           "partition", "pipeline_parallel", "tensor_parallel"]
