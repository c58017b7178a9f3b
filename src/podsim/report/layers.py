"""Per-layer breakdown of a simulated training step: forward, backward and optimizer compute
and the communication each layer causes, with the part of it no compute hides.

Read from one rank's timeline (``Result.timelines``): every slice whose op carries a ``layer``
(the parallelized workloads of :mod:`podsim.parallelize` set it, with the ``stage``) counts for
that layer.  ``comm_ns`` is how long the layer's collectives were in flight; ``exposed_comm_ns``
the part of that time the rank's GPU computed nothing (the time communication adds to the
step); where a rank's transfers overlap (a pipeline stage sends and receives at once), each
instant goes to the one that started first, so the layers' exposed times never add up to more
than the rank's.  Units: ns.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass

from ..errors import InputError
from ..fileio import atomic_write_text
from ..intervals import clip, merged, subtract
from .result import Result, Slice


@dataclass
class LayerRow:
    """One layer's times on the rank (ns)."""

    layer: str
    forward_ns: int = 0
    backward_ns: int = 0
    optimizer_ns: int = 0
    comm_ns: int = 0
    exposed_comm_ns: int = 0

    @property
    def compute_ns(self) -> int:
        return self.forward_ns + self.backward_ns + self.optimizer_ns

    @property
    def total_ns(self) -> int:
        """Compute plus exposed communication: what the layer adds to the step."""
        return self.compute_ns + self.exposed_comm_ns


def layer_breakdown(result: Result, rank: int = 0) -> list[LayerRow]:
    """The layers of ``rank``, in the order they first run.

    Raises:
        InputError: when the result holds no timeline for ``rank`` (simulate with
            ``record_timeline=True``) or its ops carry no layers.
    """
    slices: list[Slice] | None = result.timelines.get(rank)
    if not slices:
        raise InputError(f"no timeline for rank {rank}: simulate with record_timeline=True")
    compute = merged([(s.start_ns, s.end_ns) for s in slices if s.category == "compute"])
    # the rank's exposed time: communication in flight while it computes nothing; each instant
    # of it goes to the layer whose communication started first (concurrent transfers, as a
    # pipeline stage's send and receive, are not counted twice)
    exposed = subtract(merged([(s.start_ns, s.end_ns) for s in slices if s.category == "comm"]), compute)
    ex_starts = [a for a, _ in exposed]
    claimed: list[tuple[int, int]] = []
    rows: dict[str, LayerRow] = {}
    for s in sorted(slices, key=lambda s: s.start_ns):
        layer = s.args.get("layer")
        if not isinstance(layer, str):
            continue
        row = rows.setdefault(layer, LayerRow(layer))
        dur = s.end_ns - s.start_ns
        if s.category == "comm":
            row.comm_ns += dur
            claimed = [c for c in claimed if c[1] > s.start_ns]  # later slices start later: the rest is past
            mine = subtract(clip(s.start_ns, s.end_ns, exposed, ex_starts), claimed)
            row.exposed_comm_ns += sum(b - a for a, b in mine)
            claimed = merged(claimed + mine)
        elif s.category == "compute":
            stage = s.args.get("stage", "forward")
            attr = f"{stage}_ns" if stage in ("forward", "backward", "optimizer") else "forward_ns"
            setattr(row, attr, getattr(row, attr) + dur)
    if not rows:
        raise InputError(
            "the simulated ops carry no layers (per-layer reports need a workload from --triosim or --pytorch)"
        )
    return list(rows.values())


def format_layers(rows: list[LayerRow], top: int | None = 15) -> str:
    """A table of the ``top`` layers by total time (all with ``None``) and the sum of all (ms)."""
    shown = sorted(rows, key=lambda r: -r.total_ns)[:top] if top is not None else rows
    lines = [
        f"  {'layer (ms)':<42}  forward  backward  optimizer    comm  exposed comm",
        f"  {'-' * 42}  -------  --------  ---------  ------  ------------",
    ]

    def line(name: str, f: int, b: int, o: int, c: int, e: int) -> str:
        return f"  {name[:42]:<42}  {f / 1e6:7.3f}  {b / 1e6:8.3f}  {o / 1e6:9.3f}  {c / 1e6:6.3f}  {e / 1e6:12.3f}"

    for r in shown:
        lines.append(line(r.layer, r.forward_ns, r.backward_ns, r.optimizer_ns, r.comm_ns, r.exposed_comm_ns))
    if top is not None and len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more layers (--layers FILE.csv writes all)")
    lines.append(
        line(
            f"all {len(rows)} layers",
            sum(r.forward_ns for r in rows),
            sum(r.backward_ns for r in rows),
            sum(r.optimizer_ns for r in rows),
            sum(r.comm_ns for r in rows),
            sum(r.exposed_comm_ns for r in rows),
        )
    )
    return "\n".join(lines)


def write_layers_csv(rows: list[LayerRow], path: str) -> None:
    """Write every row as CSV (columns: layer, forward_ns, backward_ns, optimizer_ns, comm_ns,
    exposed_comm_ns), atomically."""
    buf = io.StringIO()
    fields = list(asdict(rows[0]).keys()) if rows else ["layer"]
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(asdict(r))
    atomic_write_text(path, buf.getvalue())
