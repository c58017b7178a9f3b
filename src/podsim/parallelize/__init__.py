"""From a one-GPU trace to a multi-GPU workload (issue #5, in progress): data, tensor and pipeline
parallelism and batch extrapolation so far."""

from .batch import extrapolate
from .data_parallel import DDP_BUCKET_BYTES, data_parallel
from .pipeline_parallel import partition, pipeline_parallel
from .plan import MODES, load_step, parallelize, summary
from .tensor_parallel import tensor_parallel
from .trace import OneGpuStep, StepOp, from_pytorch, from_triosim

__all__ = ["DDP_BUCKET_BYTES", "MODES", "OneGpuStep", "StepOp", "data_parallel", "extrapolate", "from_pytorch",
           "from_triosim", "load_step", "parallelize", "partition", "pipeline_parallel", "summary",
           "tensor_parallel"]
