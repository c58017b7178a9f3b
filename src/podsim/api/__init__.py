"""podsim's Python API: one call per job kind, each taking typed inputs and returning a typed
result.  The command line and the sweep call these functions and nothing below them.  A
module and its call share a name (once the package is imported, ``podsim.api.train`` is the
function): import a module's other names with ``from podsim.api.train import ...``.

* :func:`simulate` -- a workload (a trace or a :class:`~podsim.workload.Workload`) on an
  ASTRA-sim machine or a cluster preset; returns a :class:`~podsim.report.Result`.
  A path may be in any trace format (:func:`trace_formats`, sniffed or named); with
  ``parallel=`` (:class:`ParallelSpec`) a one-GPU trace's step runs on many GPUs.
* :func:`train` -- one training iteration of an LLM under a parallel layout
  (:class:`~podsim.jobs.train.TrainJob`); returns a :class:`~podsim.llm.training.TrainingResult`.
* :func:`infer` -- the prefill and decode step times of an LLM on one replica
  (:class:`~podsim.jobs.infer.InferJob`).
* :func:`serve_llm` -- LLM serving on replicas (:class:`~podsim.jobs.serve_llm.ServeLLMJob`).
* :func:`collective` -- one collective over a range of sizes, as nccl-tests times it.
* :func:`serve` -- inference serving as DLSIM models it (:class:`ServeJob`: requests, a
  placement, per-GPU queues, a replica scheduler); returns a
  :class:`~podsim.serving.simulator.ServeResult`.
* :func:`search` -- the best training layouts of a model on N GPUs, or the best ways to serve
  it (:class:`SearchJob`).
* :func:`goodput` -- a training run's time to train under failures, checkpoints and restarts
  (:class:`~podsim.jobs.goodput.GoodputJob`).
* :func:`sweep` -- any run over a grid of parameters and hardware what-ifs, into one table.
* :func:`validate` -- predictions against published measurements.
* :func:`fabric` -- a cluster's fabric; :func:`measure_kernels`, :func:`fit_kernels` and
  :func:`compare_steps` -- kernel tables and measured training steps.
"""

from __future__ import annotations

from .collective import CollectiveTable, collective
from .fabric import fabric
from .goodput import goodput
from .infer import infer
from .kernels import compare_steps, fit_kernels, measure_kernels
from .search import SearchJob, search
from .serve import ServeJob, serve
from .serve_llm import serve_llm
from .simulate import (
    ParallelSpec,
    describe_topology,
    format_of,
    load_workload,
    simulate,
    system_params,
    trace_formats,
)
from .sweep import sweep
from .train import train
from .validate import validate

__all__ = [
    "CollectiveTable",
    "ServeJob",
    "collective",
    "describe_topology",
    "load_workload",
    "serve",
    "simulate",
    "system_params",
    "ParallelSpec",
    "format_of",
    "trace_formats",
    "SearchJob",
    "compare_steps",
    "fabric",
    "goodput",
    "fit_kernels",
    "measure_kernels",
    "search",
    "sweep",
    "validate",
    "train",
    "infer",
    "serve_llm",
]
