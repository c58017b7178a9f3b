"""One collective over a range of sizes, as nccl-tests times it (``podsim collective``; the
sweep's ``run: collective`` times one ``size``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..collectives.nccl import COLLECTIVES
from ..collectives.nccl.tuning import PROTOCOLS
from ..collectives.registry import NCCL_ALGORITHMS
from ..params import JobSpec, Param, nested, param, params_of
from .faults import NetworkFaults
from .hardware import GPUS
from .outputs import JsonOutput
from .simulation import BACKEND

#: element types (``--dtype``) and their bytes, as nccl-tests names them
DTYPES = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "double": 8}


@dataclass(frozen=True)
class CollectiveOptions:
    """Which collective, where, how large, how it is timed."""

    collective: str | None = param(
        Param(
            "collective", "name", None, tuple(COLLECTIVES), positional=True, metavar="NAME", help=", ".join(COLLECTIVES)
        )
    )
    cluster: str | None = param(
        Param(
            "cluster",
            "name",
            metavar="PRESET_OR_YAML",
            help="a preset name or a cluster YAML file (presets: podsim collective --list)",
        )
    )
    gpus: int | None = param(GPUS)
    min_bytes: str = param(
        Param("min-bytes", "size", "1K", metavar="SIZE", aliases=("b",), sweep=False, help="smallest size (default 1K)")
    )
    max_bytes: str = param(
        Param("max-bytes", "size", "1G", metavar="SIZE", aliases=("e",), sweep=False, help="largest size (default 1G)")
    )
    factor: int = param(
        Param("factor", "count", 2, metavar="X", aliases=("f",), sweep=False, help="size multiplier (default 2)")
    )
    size: Any = param(
        Param(
            "size",
            "size",
            cli=False,
            help="message size: bytes, or 1K / 1M / 1G (KiB, MiB, GiB as nccl-tests), '16 MB' "
            "(a sweep's one size: min-bytes = max-bytes)",
        )
    )
    backend: str = param(BACKEND)
    dtype: str = param(
        Param(
            "dtype",
            "name",
            "float",
            tuple(DTYPES),
            metavar="TYPE",
            aliases=("d",),
            help=f"element type for the count column: {', '.join(DTYPES)} (default float)",
        )
    )
    algo: str | None = param(
        Param(
            "algo",
            "name",
            None,
            NCCL_ALGORITHMS.names(),
            metavar="ALGO",
            help=f"force an algorithm ({', '.join(NCCL_ALGORITHMS.names())})",
        )
    )
    proto: str | None = param(
        Param(
            "proto", "name", None, tuple(PROTOCOLS), metavar="PROTO", help=f"force a protocol ({', '.join(PROTOCOLS)})"
        )
    )


@dataclass(frozen=True)
class CollectiveJob(JobSpec):
    """Everything one ``podsim collective`` run depends on."""

    options: CollectiveOptions = nested(CollectiveOptions)
    faults: NetworkFaults = nested(NetworkFaults)
    outputs: JsonOutput = nested(JsonOutput)


#: every parameter of ``podsim collective``, in --help order
COLLECTIVE_PARAMS: tuple[Param, ...] = params_of(CollectiveJob)
