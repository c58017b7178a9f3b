"""The files a run writes: the same flags in every subcommand.  Outputs are not sweep
parameters (a sweep writes its own results store)."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param, params_of

#: ranks a Perfetto trace holds unless --trace-ranks says otherwise
TRACE_RANKS = 64


#: ``--json``, the same in every subcommand
JSON = Param("json", "path", metavar="OUT", sweep=False, help="write the result as JSON (fields: docs/outputs.md)")


@dataclass(frozen=True)
class JsonOutput:
    """The JSON result only."""

    json: str | None = param(JSON)


#: ``--trace`` and ``--trace-ranks``, the same in every subcommand that writes a timeline
TRACE = Param(
    "trace", "path", metavar="OUT", sweep=False, help="write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev)"
)
TRACE_RANKS_PARAM = Param(
    "trace-ranks",
    "count",
    TRACE_RANKS,
    metavar="N",
    sweep=False,
    help=f"ranks to include in the trace (default {TRACE_RANKS})",
)


@dataclass(frozen=True)
class Outputs:
    """JSON result and Perfetto trace."""

    json: str | None = param(JSON)
    trace: str | None = param(TRACE)
    trace_ranks: int = param(TRACE_RANKS_PARAM)


@dataclass(frozen=True)
class ResultOutputs:
    """What a simulation of ranks writes: the JSON result, a Perfetto trace, a PNG timeline;
    and whether equivalent ranks are simulated once (the same results, faster)."""

    json: str | None = param(JSON)
    trace: str | None = param(TRACE)
    trace_ranks: int = param(TRACE_RANKS_PARAM)
    plot: str | None = param(
        Param(
            "plot",
            "path",
            metavar="OUT.png",
            sweep=False,
            help="draw the first ranks' timeline as a PNG (needs matplotlib: pip install podsim[plot])",
        )
    )
    plot_ranks: int = param(
        Param("plot-ranks", "count", 4, metavar="N", sweep=False, help="ranks to draw with --plot (default 4)")
    )
    no_symmetry: bool = param(
        Param(
            "no-symmetry",
            "bool",
            False,
            sweep=False,
            help="simulate every rank even when ranks are provably equivalent",
        )
    )


#: the outputs of every subcommand that simulates ranks (simulate, example)
RESULT_OUTPUT_PARAMS: tuple[Param, ...] = params_of(ResultOutputs)
