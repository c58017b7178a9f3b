"""podsim's Python API: one call per job kind, each taking typed inputs and returning a typed
result.  The command line and the sweep call these functions and nothing below them.

* :func:`simulate` -- a workload (a trace or a :class:`~podsim.workload.Workload`) on an
  ASTRA-sim machine or a cluster preset; returns a :class:`~podsim.report.Result`.
* :func:`collective` -- one collective over a range of sizes, as nccl-tests times it.
"""

from __future__ import annotations

from .collective import CollectiveTable, collective
from .simulate import describe_topology, load_workload, simulate, system_params

__all__ = ["CollectiveTable", "collective", "describe_topology", "load_workload", "simulate", "system_params"]
