"""Results and their exporters (summary, JSON, Perfetto).  Never re-runs anything."""

from .json_out import result_json, write_json
from .perfetto import trace_events, write_trace
from .result import Flow, RankResult, Result, Slice
from .summary import format_summary

__all__ = [
    "Flow",
    "RankResult",
    "Result",
    "Slice",
    "format_summary",
    "result_json",
    "trace_events",
    "write_json",
    "write_trace",
]
