"""Read measured collective timings: nccl-tests output logs and vTrain's all-reduce tables.

* nccl-tests (``all_reduce_perf`` and friends): data rows ``size count type [redop] [root]
  time algbw busbw #wrong time algbw busbw #wrong``, optionally behind an MPI prefix such as
  ``[1,0]<stdout>:``.  The GPU count is the number of ``#  Rank`` lines (or ``nGpus`` when
  none).  The out-of-place time (us) is kept.
* vTrain LUT files: CSV ``size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)``; the
  GPU count comes from the file name (``AR_GPU<n>_...``).

Units: bytes, us, GB/s (10^9 B/s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..fileio import read_text

_PREFIX = re.compile(r"^\[[^\]]*\]<std(?:out|err)>:")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s")
_NGPUS = re.compile(r"nGpus\s+(\d+)")


@dataclass
class Measurement:
    """One measured size."""

    bytes: int
    time_us: float
    busbw_gbps: float


@dataclass
class MeasuredTable:
    """A measured sweep of one collective on ``gpus`` GPUs."""

    source: str
    gpus: int
    rows: list[Measurement] = field(default_factory=list)


def read_nccl_tests_log(path: str | Path) -> MeasuredTable:
    """Parse an nccl-tests log.

    Raises:
        InputError: when the file has no data rows or a row is malformed (names the line).
    """
    path = Path(path)
    ranks = 0
    ngpus = None
    rows: list[Measurement] = []
    try:
        text = path.read_text(errors="replace")  # logs may hold stray bytes from other output
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", str(path)) from None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        if line.startswith("#"):
            if _RANK.match(line):
                ranks += 1
            m = _NGPUS.search(line)
            if m and ngpus is None:
                ngpus = int(m.group(1))
            continue
        parts = line.split()
        if not parts[0].isdecimal():
            continue
        # the row ends with: time algbw busbw #wrong (out of place), the same in place
        tail = parts[-8:]
        try:
            if len(parts) < 11:
                raise ValueError
            time_us, busbw = float(tail[0]), float(tail[2])
        except ValueError:
            raise InputError(
                "expected 'size count type [redop] [root] time algbw busbw #wrong time algbw busbw #wrong'",
                str(path),
                f"line {lineno}",
            ) from None
        rows.append(_measurement(int(parts[0]), time_us, busbw, str(path), f"line {lineno}"))
    if not rows:
        raise InputError("no nccl-tests data rows found", str(path))
    gpus = ranks or ngpus or 1
    return MeasuredTable(str(path), gpus, rows)


def read_vtrain_lut(path: str | Path) -> MeasuredTable:
    """Parse a vTrain ``AR_GPU<n>_*`` table (time in ns)."""
    path = Path(path)
    m = re.search(r"GPU(\d+)", path.name)
    if not m:
        raise InputError("cannot tell the GPU count: expected a name like AR_GPU8_...", str(path))
    rows = []
    for lineno, line in enumerate(read_text(path, "vTrain table").splitlines(), 1):
        if lineno == 1 or not line.strip():
            continue
        f = line.split(",")
        if len(f) < 5:
            raise InputError(f"expected 7 comma-separated fields, got {len(f)}", str(path), f"line {lineno}")
        try:
            size, time_ns, busbw = int(f[0]), float(f[3]), float(f[4])
        except ValueError:
            raise InputError(f"not a number in {line!r}", str(path), f"line {lineno}") from None
        rows.append(_measurement(size, time_ns / 1000.0, busbw, str(path), f"line {lineno}"))
    return MeasuredTable(str(path), int(m.group(1)), rows)


#: the largest size (bytes), time (us) or bus bandwidth (GB/s) a measured row may give
MAX_VALUE = 1e18


def _measurement(size: int, time_us: float, busbw: float, source: str, where: str) -> Measurement:
    """One measured row, its size, time and bandwidth checked (finite, not negative)."""
    for what, v in (("size", size), ("time", time_us), ("bus bandwidth", busbw)):
        if not 0 <= v <= MAX_VALUE:  # also refuses NaN and inf
            raise InputError(f"{what} must be a finite number >= 0, got {v!r}", source, where)
    return Measurement(size, time_us, busbw)
