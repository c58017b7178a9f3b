"""podsim's Python API: one call per job kind, each taking typed inputs and returning a typed
result.  The command line and the sweep call these functions and nothing below them.

* :func:`simulate` -- a workload (a trace or a :class:`~podsim.workload.Workload`) on an
  ASTRA-sim machine or a cluster preset; returns a :class:`~podsim.report.Result`.
  A path may be in any trace format (:func:`trace_formats`, sniffed or named); with
  ``parallel=`` (:class:`ParallelSpec`) a one-GPU trace's step runs on many GPUs.
* :func:`collective` -- one collective over a range of sizes, as nccl-tests times it.
* :func:`serve` -- inference serving as DLSIM models it (:class:`ServeJob`: requests, a
  placement, per-GPU queues, a replica scheduler); returns a
  :class:`~podsim.serving.simulator.ServeResult`.
"""

from __future__ import annotations

from .collective import CollectiveTable, collective
from .serve import ServeJob, serve
from .simulate import (
    ParallelSpec,
    describe_topology,
    format_of,
    load_workload,
    simulate,
    system_params,
    trace_formats,
)

__all__ = ["CollectiveTable", "ServeJob", "collective", "describe_topology", "load_workload", "serve", "simulate",
           "system_params", "ParallelSpec", "format_of", "trace_formats"]
