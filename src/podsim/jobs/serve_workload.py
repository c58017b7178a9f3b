"""The parameters of ``podsim serve-workload`` (generate a serving workload's arrivals)."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
SERVE_WORKLOAD_PARAMS: tuple[Param, ...] = ()
