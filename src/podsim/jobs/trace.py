"""The parameters of ``podsim trace`` (capture a PyTorch step), ``podsim convert`` (one trace
format to another) and ``podsim inspect`` (what a trace holds)."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
TRACE_PARAMS: tuple[Param, ...] = ()
#: every parameter, in --help order (to be declared)
CONVERT_PARAMS: tuple[Param, ...] = ()
#: every parameter, in --help order (to be declared)
INSPECT_PARAMS: tuple[Param, ...] = ()
