"""The job specs the API's calls take, and the tools that turn their declared parameters into
a command line (:mod:`podsim.params`): what the CLI needs to parse a job, without reaching
past the API."""

from __future__ import annotations

from ..jobs.collective import COLLECTIVE_PARAMS, CollectiveJob
from ..jobs.example import EXAMPLE_PARAMS, ExampleJob
from ..jobs.fabric import FABRIC_PARAMS, FabricJob
from ..jobs.goodput import GOODPUT_PARAMS, GoodputJob
from ..jobs.infer import INFER_PARAMS, InferJob
from ..jobs.kernels import KERNELS_PARAMS, KernelsJob
from ..jobs.kinds import PARAMS_BY_COMMAND
from ..jobs.outputs import RESULT_OUTPUT_PARAMS
from ..jobs.search import SEARCH_PARAMS, SearchCommand, SearchJob
from ..jobs.serve import SERVE_PARAMS, ServeCommand, ServeJob
from ..jobs.serve_llm import SERVE_LLM_PARAMS, ServeLLMJob
from ..jobs.serve_workload import SERVE_WORKLOAD_PARAMS, ServeWorkloadJob
from ..jobs.simulate import SIMULATE_PARAMS, SimulateJob
from ..jobs.simulation import BACKEND, RAY, WORKERS
from ..jobs.sweep import SWEEP_PARAMS, SweepJob
from ..jobs.trace import CONVERT_PARAMS, INSPECT_PARAMS, TRACE_PARAMS, ConvertJob, InspectJob, TraceJob
from ..jobs.train import TRAIN_PARAMS, TrainJob
from ..jobs.validate import VALIDATE_PARAMS, ValidateJob
from ..params import Param, add_arguments, echo

__all__ = [
    "BACKEND",
    "RAY",
    "WORKERS",
    "COLLECTIVE_PARAMS",
    "CollectiveJob",
    "EXAMPLE_PARAMS",
    "ExampleJob",
    "INFER_PARAMS",
    "InferJob",
    "PARAMS_BY_COMMAND",
    "RESULT_OUTPUT_PARAMS",
    "Param",
    "SERVE_LLM_PARAMS",
    "SEARCH_PARAMS",
    "SearchCommand",
    "SearchJob",
    "SERVE_PARAMS",
    "SIMULATE_PARAMS",
    "SimulateJob",
    "ServeCommand",
    "ServeJob",
    "ServeLLMJob",
    "TRAIN_PARAMS",
    "TrainJob",
    "add_arguments",
    "echo",
    "CONVERT_PARAMS",
    "ConvertJob",
    "FABRIC_PARAMS",
    "FabricJob",
    "GOODPUT_PARAMS",
    "GoodputJob",
    "INSPECT_PARAMS",
    "InspectJob",
    "KERNELS_PARAMS",
    "KernelsJob",
    "SERVE_WORKLOAD_PARAMS",
    "ServeWorkloadJob",
    "SWEEP_PARAMS",
    "SweepJob",
    "TRACE_PARAMS",
    "TraceJob",
    "VALIDATE_PARAMS",
    "ValidateJob",
]
