"""The parameters of ``podsim fabric`` (a cluster's fabric, summarized or written as a SimAI topology)."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
FABRIC_PARAMS: tuple[Param, ...] = ()
