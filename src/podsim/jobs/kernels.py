"""The parameters of ``podsim kernels`` (measure, fit and compare kernel tables and measured steps)."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
KERNELS_PARAMS: tuple[Param, ...] = ()
