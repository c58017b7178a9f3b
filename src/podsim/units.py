"""Unit conversions done once, at the edge.

Inside podsim, time is integer nanoseconds and sizes are integer bytes.  Bandwidth is held as
bytes per nanosecond (float).  Strings with units are accepted in configs:

* sizes: ``"16 MiB"``, ``"1 GB"`` (GB = 10^9 B, GiB = 2^30 B), ``"512 B"``;
* times: ``"500 ns"``, ``"1.5 us"``, ``"2 ms"``, ``"1 s"``;
* bandwidth: ``"400 GB/s"`` (10^9 B/s), ``"50 GiB/s"`` (2^30 B/s), ``"200 Gbps"``/``"200 Gb/s"``
  (10^9 bit/s), ``"1.6 TB/s"``.
"""

from __future__ import annotations

import math
import re

from .errors import InputError

_SIZE = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_TIME_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_BW_BYTES_PER_S = {
    "b/s": 1.0,
    "kb/s": 1e3,
    "mb/s": 1e6,
    "gb/s": 1e9,
    "tb/s": 1e12,
    "kib/s": 2.0**10,
    "mib/s": 2.0**20,
    "gib/s": 2.0**30,
    "tib/s": 2.0**40,
    "bps": 1 / 8,
    "kbps": 1e3 / 8,
    "mbps": 1e6 / 8,
    "gbps": 1e9 / 8,
    "tbps": 1e12 / 8,
}
_NUM_UNIT = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str, source: str | None, where: str | None) -> tuple[float, str]:
    m = _NUM_UNIT.match(text)
    if not m:
        raise InputError(f"cannot read {what} {text!r}: expected a number and a unit", source, where)
    return float(m.group(1)), m.group(2)


#: the largest size (1 EB) and duration (2^63 ns / 10, ~29 years) podsim takes: beyond them
#: integer-ns arithmetic could overflow
MAX_BYTES = 1e18
MAX_NS = 9.2e17


def _number_unit(
    value: object, what: str, default_unit: str, source: str | None, where: str | None
) -> tuple[float, str]:
    """Split a number or a 'number unit' string; bare numbers take ``default_unit``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"expected a {what}, got {value!r}", source, where)
    if isinstance(value, str):
        num, unit = _split(value, what, source, where)
        unit = unit or default_unit
    else:
        num, unit = float(value), default_unit
    if not math.isfinite(num):
        raise InputError(f"expected a finite {what}, got {value!r}", source, where)
    return num, unit


def parse_size(value: object, source: str | None = None, where: str | None = None) -> int:
    """Parse a size (int bytes or a string with a unit) into integer bytes."""
    num, unit = _number_unit(value, "size", "b", source, where)
    key = unit.lower()
    if key not in _SIZE or unit in ("Gb", "Mb", "Kb", "Tb"):
        raise InputError(f"unknown size unit {unit!r}: use B, KB, MB, GB, KiB, MiB, GiB", source, where)
    out = num * _SIZE[key]
    if out < 0:
        raise InputError(f"size must be >= 0, got {value!r}", source, where)
    if out > MAX_BYTES:
        raise InputError(f"size too large: {value!r} (at most {MAX_BYTES:.3g} B)", source, where)
    return int(round(out))


def parse_message_size(value: object, source: str | None = None, where: str | None = None) -> int:
    """A message size in integer bytes as nccl-tests and ``podsim collective -b`` read it:
    ``1K`` / ``4M`` / ``1G`` / ``2T`` are KiB, MiB, GiB, TiB; anything else as :func:`parse_size`
    (an integer of bytes, ``16 MB`` = 16e6, ``1 MiB``)."""
    if isinstance(value, str):
        t = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?[KMGT]", t):
            value = f"{t[:-1]} {t[-1]}iB"
    return parse_size(value, source, where)


def parse_time_ns(value: object, source: str | None = None, where: str | None = None) -> int:
    """Parse a duration (number = ns, or a string with a unit) into integer nanoseconds."""
    num, unit = _number_unit(value, "duration", "ns", source, where)
    if unit not in _TIME_NS:
        raise InputError(f"unknown time unit {unit!r}: use ns, us, ms or s", source, where)
    out = num * _TIME_NS[unit]
    if out < 0:
        raise InputError(f"duration must be >= 0, got {value!r}", source, where)
    if out > MAX_NS:
        raise InputError(f"duration too long: {value!r} (at most {MAX_NS:.3g} ns, about 29 years)", source, where)
    return int(round(out))


def parse_bandwidth(
    value: object, source: str | None = None, where: str | None = None, default_unit: str = "GB/s"
) -> float:
    """Parse a bandwidth into bytes per nanosecond (must be > 0).

    A bare number is read in ``default_unit``.  ``GB/s`` means 10^9 bytes per second,
    ``GiB/s`` 2^30, ``Gbps`` 10^9 bits per second.
    """
    num, unit = _number_unit(value, "bandwidth", default_unit, source, where)
    m = re.fullmatch(r"([kKMGT]?)(?:bps|b/s|bit/s)", unit)
    if m:  # bits per second: lower-case b
        key = (m.group(1).lower() + "bps") if m.group(1) else "bps"
    else:
        key = unit.lower()
    if key not in _BW_BYTES_PER_S:
        raise InputError(f"unknown bandwidth unit {unit!r}: use GB/s, GiB/s or Gbps", source, where)
    bps = num * _BW_BYTES_PER_S[key]
    if not bps >= 1e3:
        raise InputError(f"bandwidth must be > 0 (at least 1 kB/s), got {value!r}", source, where)
    if bps > MAX_BYTES:
        raise InputError(f"bandwidth too large: {value!r} (at most {MAX_BYTES:.3g} B/s)", source, where)
    return bps / 1e9


def format_ns(ns: int | float) -> str:
    """Human-readable duration: '117.78 us', '1.20 ms', '950 ns'."""
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def format_bytes(n: int | float) -> str:
    """Human-readable size with binary prefixes: '1.00 MiB'."""
    n = float(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
