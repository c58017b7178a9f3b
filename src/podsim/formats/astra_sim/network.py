"""ASTRA-sim analytical network YAML -> :class:`~podsim.network.Topology`.

::

    topology:   [ Ring, Switch ]   # Ring | FullyConnected | Switch, one per dimension
    npus_count: [ 4, 8 ]           # NPUs per dimension (the total is the product)
    bandwidth:  [ 50.0, 25.0 ]     # GB/s per link per direction, where ASTRA-sim's GB is 2^30 B
    latency:    [ 500.0, 700.0 ]   # ns per hop

podsim extension: a bandwidth or latency may be a string with a unit (``"400 GB/s"`` is then
10^9 B/s, ``"50 GiB/s"`` 2^30 B/s; ``"1 us"``).  A bare number keeps ASTRA-sim's meaning.
"""

from __future__ import annotations

import os

from ...errors import InputError, closest
from ...network.topology import BlockKind, Dimension, Topology
from ...units import MAX_BYTES, MAX_NS, parse_bandwidth, parse_time_ns
from .common import check_keys, load_yaml

KEYS = ("topology", "npus_count", "bandwidth", "latency")
GIB_PER_GB = 2**30 / 1e9  # ASTRA-sim: bw_GBps * 2^30 / 1e9 = bytes per ns
MAX_NPUS = 1 << 24


def _as_list(data: dict, key: str, source: str) -> list:
    if key not in data:
        raise InputError(f"missing key {key!r} (one entry per dimension)", source)
    v = data[key]
    if isinstance(v, (list, tuple)):
        if not v:
            raise InputError("empty list: expected one entry per dimension", source, key)
        return list(v)
    return [v]


def parse_network(data: dict, source: str = "<network>") -> Topology:
    """Build a topology from an already-loaded network mapping."""
    check_keys(data, KEYS, source)
    lists = {k: _as_list(data, k, source) for k in KEYS}
    lengths = {k: len(v) for k, v in lists.items()}
    if len(set(lengths.values())) != 1:
        desc = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        raise InputError(f"lists disagree in length ({desc}); give one entry per dimension", source)
    dims = []
    total = 1
    for i in range(lengths["topology"]):
        where = f"dimension {i}"
        name = lists["topology"][i]
        kinds = {k.value.lower(): k for k in BlockKind}
        kind = kinds.get(str(name).lower())
        if kind is None:
            hint = closest(str(name), [k.value for k in BlockKind])
            msg = f"unknown topology {name!r}" + (
                f"; did you mean {hint!r}?" if hint else "; expected Ring, FullyConnected or Switch"
            )
            raise InputError(msg, source, f"topology[{i}]")
        n = lists["npus_count"][i]
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise InputError(f"npus_count must be an integer >= 2, got {n!r}", source, f"npus_count[{i}] ({where})")
        total *= n
        if total > MAX_NPUS:
            raise InputError(f"{total} NPUs is absurd (more than {MAX_NPUS})", source, "npus_count")
        bw = lists["bandwidth"][i]
        if isinstance(bw, str):
            bpns = parse_bandwidth(bw, source, f"bandwidth[{i}]")
        else:
            if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not bw > 0:
                raise InputError(f"bandwidth must be > 0 (GB/s), got {bw!r}", source, f"bandwidth[{i}]")
            if not bw * GIB_PER_GB <= MAX_BYTES / 1e9:  # also refuses inf and NaN
                raise InputError(
                    f"bandwidth must be a finite number of GB/s (at most {MAX_BYTES / 1e9:.3g}), got {bw!r}",
                    source,
                    f"bandwidth[{i}]",
                )
            bpns = float(bw) * GIB_PER_GB
        lat = lists["latency"][i]
        if isinstance(lat, str):
            lat_ns = float(parse_time_ns(lat, source, f"latency[{i}]"))
        else:
            if isinstance(lat, bool) or not isinstance(lat, (int, float)) or lat < 0:
                raise InputError(f"latency must be >= 0 (ns), got {lat!r}", source, f"latency[{i}]")
            if not lat <= MAX_NS:  # also refuses inf and NaN
                raise InputError(
                    f"latency must be a finite number of ns (at most {MAX_NS:.3g}), got {lat!r}",
                    source,
                    f"latency[{i}]",
                )
            lat_ns = float(lat)
        dims.append(Dimension(kind, n, bpns, lat_ns))
    return Topology(tuple(dims))


def read_network(path: str | os.PathLike[str]) -> Topology:
    """Read an ASTRA-sim analytical network YAML file."""
    path = str(path)
    return parse_network(load_yaml(path), path)
