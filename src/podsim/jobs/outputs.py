"""The files a run writes: the same flags in every subcommand.  Outputs are not sweep
parameters (a sweep writes its own results store)."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param

#: ranks a Perfetto trace holds unless --trace-ranks says otherwise
TRACE_RANKS = 64


#: ``--json``, the same in every subcommand
JSON = Param("json", "path", metavar="OUT", sweep=False, help="write the result as JSON (fields: docs/outputs.md)")


@dataclass(frozen=True)
class JsonOutput:
    """The JSON result only."""

    json: str | None = param(JSON)


@dataclass(frozen=True)
class Outputs:
    """JSON result and Perfetto trace."""

    json: str | None = param(JSON)
    trace: str | None = param(Param("trace", "path", metavar="OUT", sweep=False,
                                    help="write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev)"))
    trace_ranks: int = param(Param("trace-ranks", "count", TRACE_RANKS, metavar="N", sweep=False,
                                   help=f"ranks to include in the trace (default {TRACE_RANKS})"))
