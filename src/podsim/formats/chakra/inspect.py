"""Summaries of Chakra traces: what ``podsim inspect`` reports (printed by
:func:`podsim.report.traces.format_trace_summaries`)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from .etfile import read_trace
from .schema import CommType, NodeType
from .to_workload import discover_ranks, rank_file


@dataclass
class TraceSummary:
    """Counts for one ``.et`` file.  Durations in microseconds (Chakra's unit)."""

    path: str
    schema: str
    nodes: int
    by_type: dict[str, int]
    cpu_ops: int
    collectives: dict[str, int]
    data_deps: int
    ctrl_deps: int
    zero_duration: int
    total_duration_us: int
    comm_bytes: int
    notes: list[str] = field(default_factory=list)


def summarize_trace(path: str | os.PathLike[str]) -> TraceSummary:
    """Count the nodes of one trace by type, its dependencies and durations."""
    tr = read_trace(path)
    by_type: Counter[str] = Counter()
    colls: Counter[str] = Counter()
    cpu = zero = dur = comm = data = ctrl = 0
    for nd in tr.nodes:
        try:
            by_type[NodeType(nd.type).name] += 1
        except ValueError:
            by_type[f"type {nd.type}"] += 1
        if nd.attr("is_cpu_op"):
            cpu += 1
        if nd.type == NodeType.COMM_COLL_NODE and nd.attr("comm_type") is not None:
            try:
                colls[CommType(int(nd.attr("comm_type"))).name] += 1  # type: ignore[arg-type]
            except ValueError:
                colls[f"comm_type {nd.attr('comm_type')}"] += 1
        if nd.type in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE) and isinstance(nd.attr("comm_size"), int):
            comm += int(nd.attr("comm_size"))  # type: ignore[arg-type]
        zero += nd.duration_micros == 0
        dur += nd.duration_micros
        data += len(nd.data_deps)
        ctrl += len(nd.ctrl_deps)
    schema = tr.metadata.version or str(tr.metadata.attrs["schema"].value if "schema" in tr.metadata.attrs else "")
    return TraceSummary(str(path), schema, len(tr.nodes), dict(by_type), cpu, dict(colls), data, ctrl, zero, dur, comm)


def summarize_prefix(prefix: str | os.PathLike[str], max_ranks: int = 8) -> tuple[int, list[TraceSummary]]:
    """The number of rank files of ``prefix`` and summaries of the first ``max_ranks``."""
    n = discover_ranks(prefix)
    return n, [summarize_trace(rank_file(prefix, r)) for r in range(min(n, max_ranks))]
