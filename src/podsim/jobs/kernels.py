"""The parameters of ``podsim kernels``: measure a kernel table on a GPU, fit the roofline
model's efficiencies to one, or compare measured training steps with podsim's prediction."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from .hardware import GPU
from .outputs import JSON

#: the precisions a kernel table may be measured in (``--dtype``)
DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")

#: the precision measured or fitted when ``--dtype`` names none
DEFAULT_DTYPE = "bf16"

#: what ``podsim kernels`` does (its positional argument)
ACTIONS: tuple[str, ...] = ("measure", "fit", "steps")


@dataclass(frozen=True)
class KernelsJob(JobSpec):
    """Everything one ``podsim kernels`` run depends on.

    Attributes:
        action: ``measure`` (time kernels into ``out``), ``fit`` (fit the roofline to
            ``table``) or ``steps`` (compare the measured ``steps`` with podsim).
        out: the kernel table CSV to write (measure).
        table: the kernel table CSV to fit, or ``measured`` (the table podsim ships of ``gpu``).
        gpu: the GPU the table or the steps were measured on.
        steps: a training-steps CSV, or ``measured`` (the steps podsim ships of ``gpu``).
        json: the steps comparison as JSON (steps).
        dtypes: the precisions to measure; fit uses the first (None: bf16 only).
        quick: measure a few shapes only.
        device: ``cuda``, or ``cpu`` (only tests the tool).
    """

    action: str | None = param(
        Param(
            "action",
            "choice",
            None,
            ACTIONS,
            positional=True,
            required=True,
            sweep=False,
            help="measure: time GEMMs, attention, memory-bound kernels into --out; fit: fit the roofline "
            "model's efficiencies to --table; steps: compare measured training steps "
            "(benchmarks/gpu/training_steps.py) with podsim, by kernel category",
        )
    )
    out: str | None = param(
        Param("out", "path", metavar="CSV", sweep=False, help="the kernel table to write (measure)")
    )
    table: str | None = param(
        Param(
            "table",
            "path",
            metavar="CSV|measured",
            help="the kernel table to fit (fit), or 'measured': podsim's of --gpu",
        )
    )
    gpu: str = param(
        replace(
            GPU,
            default="h100-80gb",
            help="the GPU the table was measured on (fit); with steps --steps measured: whose shipped steps "
            "(a GPU key or alias: podsim llm --list)",
        )
    )
    steps: str | None = param(
        Param(
            "steps",
            "path",
            metavar="CSV|measured",
            help="steps: a training-steps CSV, or 'measured' for the steps podsim ships of --gpu",
        )
    )
    json: str | None = param(replace(JSON, help="steps: the comparison as JSON (fields: docs/compute.md)"))
    dtypes: tuple[str, ...] | None = param(
        Param(
            "dtype",
            "choice",
            None,
            DTYPES,
            metavar="DTYPE",
            field="dtypes",
            repeat=True,
            help=f"precision to measure (repeatable; default {DEFAULT_DTYPE}); fit: the rows of the first",
        )
    )
    quick: bool = param(Param("quick", "bool", False, help="a few shapes only (to try the tool)"))
    device: str = param(Param("device", "choice", "cuda", ("cuda", "cpu"), help="cpu only tests the tool"))

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions asked for, ``(bf16,)`` when none."""
        return self.dtypes or (DEFAULT_DTYPE,)


#: every parameter of ``podsim kernels``, in --help order
KERNELS_PARAMS: tuple[Param, ...] = params_of(KernelsJob)
