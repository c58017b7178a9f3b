"""podsim's Python API: one call per job kind, each taking typed inputs and returning a typed
result.  The command line and the sweep call these functions and nothing below them.

* :func:`simulate` -- a workload (a trace or a :class:`~podsim.workload.Workload`) on an
  ASTRA-sim machine or a cluster preset; returns a :class:`~podsim.report.Result`.
* :func:`collective` -- one collective over a range of sizes, as nccl-tests times it.
* :func:`serve` -- inference serving as DLSIM models it (:class:`ServeJob`: requests, a
  placement, per-GPU queues, a replica scheduler); returns a
  :class:`~podsim.serving.simulator.ServeResult`.
"""

from __future__ import annotations

from .collective import CollectiveTable, collective
from .serve import ServeJob, serve
from .simulate import describe_topology, load_workload, simulate, system_params

__all__ = ["CollectiveTable", "ServeJob", "collective", "describe_topology", "load_workload", "serve", "simulate",
           "system_params"]
