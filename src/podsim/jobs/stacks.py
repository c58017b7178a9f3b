"""The parameters of ``podsim stack`` (list and show software stacks) and ``podsim calibrate``
(fit a training or serving stack's free parameters to measured runs and write a stack file)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..params import JobSpec, Param, param, params_of
from .outputs import JSON

#: what ``podsim stack`` does (its positional argument)
STACK_ACTIONS: tuple[str, ...] = ("list", "show")
#: what ``podsim calibrate`` fits (its positional argument)
CALIBRATE_KINDS: tuple[str, ...] = ("training", "inference")


@dataclass(frozen=True)
class StackJob(JobSpec):
    """``podsim stack list`` / ``podsim stack show NAME|FILE``."""

    action: str | None = param(
        Param(
            "action",
            "choice",
            None,
            STACK_ACTIONS,
            positional=True,
            sweep=False,
            help="list: the presets (also --list); show: one stack's properties, values and sources",
        )
    )
    name: str | None = param(
        Param("name", "name", None, positional=True, sweep=False, metavar="NAME|FILE", help="the stack to show")
    )
    list: bool = param(Param("list", "bool", False, sweep=False, help="list the presets, then exit"))
    json: str | None = param(replace(JSON, help="write the stack (or the list) as JSON"))


@dataclass(frozen=True)
class CalibrateJob(JobSpec):
    """``podsim calibrate training|inference ROWS.csv --base STACK --out FILE.yaml``."""

    kind: str | None = param(
        Param(
            "kind",
            "choice",
            None,
            CALIBRATE_KINDS,
            positional=True,
            required=True,
            sweep=False,
            help="training: fit a training stack to measured iterations (tokens/s, TFLOP/s, step time); "
            "inference: fit a serving stack to measured prefill and decode step times",
        )
    )
    rows: str | None = param(
        Param(
            "rows",
            "path",
            None,
            positional=True,
            sweep=False,
            metavar="ROWS.csv",
            help="the measured runs: for training podsim validate's columns (docs/calibration.md) or the "
            "published-measurements table's; for inference model, gpu, tp, pp, batch, prompt_tokens, output_tokens, "
            "prefill_ms, decode_ms (docs/stacks.md); shipped:PREFIX takes podsim's own published rows whose id "
            "starts with PREFIX (several: shipped:A,B)",
        )
    )
    base: str | None = param(
        Param(
            "base",
            "name",
            None,
            metavar="STACK",
            sweep=False,
            help="the stack to start from (a preset or a stack YAML); its 'free' parameters are fitted",
        )
    )
    out: str | None = param(
        Param("out", "path", None, metavar="FILE.yaml", sweep=False, help="write the fitted stack here (required)")
    )
    name: str | None = param(
        Param(
            "stack-name",
            "text",
            None,
            metavar="NAME",
            sweep=False,
            help="the fitted stack's name (default: the --out file's stem)",
        )
    )
    free: tuple[str, ...] | None = param(
        Param(
            "free",
            "list",
            None,
            metavar="P,P,...",
            sweep=False,
            help="the parameters to fit instead of the base's free list (e.g. gemm_efficiency,host_ns; serving: "
            "host_overhead_ms,engine_gemm_efficiency)",
        )
    )
    json: str | None = param(replace(JSON, help="write the fit (values, residuals before and after) as JSON"))


#: every parameter of ``podsim stack``, in --help order
STACK_PARAMS: tuple[Param, ...] = params_of(StackJob)
#: every parameter of ``podsim calibrate``, in --help order
CALIBRATE_PARAMS: tuple[Param, ...] = params_of(CalibrateJob)
