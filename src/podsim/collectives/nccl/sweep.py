"""nccl-tests in simulation: time one collective over a range of sizes.

Figures follow nccl-tests' definitions: ``algbw = size / time``; ``busbw = algbw x factor``
with factor ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and
all-to-all, and 1 for broadcast and send/recv, so that busbw is comparable with the hardware's
link bandwidth whatever the GPU count.  Units: bytes, us, GB/s (10^9 B/s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...network.fabric import Fabric
from .algorithms import communicator
from .selector import select
from .timing import Timer
from .tuning import NcclTuning


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``n`` ranks."""
    if n <= 1:
        return 0.0 if collective in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") else 1.0
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass
class SweepRow:
    """One line of the table."""

    bytes: int
    count: int  #: elements of ``dtype``
    time_us: float
    algbw_gbps: float  #: GB/s (10^9 B/s)
    busbw_gbps: float  #: GB/s (10^9 B/s)
    algorithm: str
    protocol: str


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """``min, min*factor, ...`` up to ``max`` (inclusive)."""
    out = []
    s = min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def sweep(
    fabric: Fabric,
    tuning: NcclTuning,
    collective: str,
    size_list: list[int],
    *,
    ranks: list[int] | None = None,
    backend: str = "analytical",
    dtype_bytes: int = 4,
    algo: str | None = None,
    proto: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[SweepRow]:
    """Time ``collective`` at each size (bytes) on ``ranks`` (default: every GPU)."""
    comm = communicator(fabric, ranks)
    model = Timer(fabric, tuning, "analytical")
    timer = model if backend == "analytical" else Timer(fabric, tuning, backend, router=model.router)
    factor = bus_factor(collective, comm.size)
    rows = []
    for i, size in enumerate(size_list):
        sched, predicted = select(comm, collective, size, tuning, model, algo, proto)
        t_ns = predicted.time_ns if timer is model else timer.time(sched).time_ns
        t_us = t_ns / 1000.0
        algbw = size / t_ns if t_ns > 0 else 0.0
        rows.append(SweepRow(size, size // dtype_bytes, t_us, algbw, algbw * factor, sched.algorithm, sched.protocol))
        if progress is not None:
            progress(i + 1, len(size_list))
    return rows
