"""The parameters of ``podsim sweep`` (many runs from one spec) itself, not of its runs."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
SWEEP_PARAMS: tuple[Param, ...] = ()
