"""The parameters of ``podsim validate`` (predictions against published measurements)."""

from __future__ import annotations

from ..params import Param

#: every parameter, in --help order (to be declared)
VALIDATE_PARAMS: tuple[Param, ...] = ()
