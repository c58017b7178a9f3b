"""The parameters of ``podsim fabric``: a cluster's fabric, summarized or written as a SimAI
topology."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from .hardware import CLUSTER, GPUS

#: ``--gpus`` / ``-g`` as ``podsim collective`` declares it (the number of GPUs)


@dataclass(frozen=True)
class FabricJob(JobSpec):
    """Everything one ``podsim fabric`` run depends on.

    Attributes:
        cluster: a preset name, a cluster YAML or a SimAI topology file.
        gpus: the number of GPUs whose fabric is built.
        simai: where to write the fabric as a SimAI topology file (None: nowhere).
    """

    cluster: str | None = param(
        replace(
            CLUSTER,
            required=True,
            help="a preset, a cluster YAML or a SimAI topology (presets: podsim collective --list)",
        )
    )
    gpus: int | None = param(replace(GPUS, required=True))
    simai: str | None = param(
        Param("simai", "path", metavar="OUT", sweep=False, help="write the fabric as a SimAI topology file")
    )


#: every parameter of ``podsim fabric``, in --help order
FABRIC_PARAMS: tuple[Param, ...] = params_of(FabricJob)
