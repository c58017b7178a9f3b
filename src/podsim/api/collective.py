"""The Python API of ``podsim collective``: nccl-tests in simulation.

Example::

    import podsim
    table = podsim.collective("all_reduce", cluster="dgx-a100-superpod", gpus=16,
                              min_bytes="1K", max_bytes="1G", backend="flow")
    for row in table.rows:
        print(row.bytes, row.time_us, row.busbw_gbps)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..collectives.nccl import BACKENDS, COLLECTIVES, SweepRow
from ..collectives.nccl.sweep import sizes, sweep
from ..errors import InputError
from ..hardware.cluster import ClusterSpec, build_fabric, load_cluster
from ..units import parse_size

DTYPES = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "double": 8}


@dataclass
class CollectiveTable:
    """The rows of one sweep and what produced them."""

    collective: str
    cluster: str
    gpus: int
    servers: int
    backend: str
    dtype: str
    rows: list[SweepRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON form (fields documented in docs/outputs.md)."""
        return {
            "collective": self.collective, "cluster": self.cluster, "gpus": self.gpus,
            "servers": self.servers, "backend": self.backend, "dtype": self.dtype,
            "units": {"bytes": "B", "time_us": "us", "algbw_gbps": "GB/s (1e9 B/s)",
                      "busbw_gbps": "GB/s (1e9 B/s)"},
            "rows": [{"bytes": r.bytes, "count": r.count, "time_us": round(r.time_us, 3),
                      "algbw_gbps": round(r.algbw_gbps, 4), "busbw_gbps": round(r.busbw_gbps, 4),
                      "algorithm": r.algorithm, "protocol": r.protocol} for r in self.rows],
        }


def collective(name: str, cluster: str | ClusterSpec, gpus: int, *, min_bytes: int | str = "1K",
               max_bytes: int | str = "1G", factor: int = 2, backend: str = "analytical",
               dtype: str = "float", algorithm: str | None = None, protocol: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> CollectiveTable:
    """Time collective ``name`` on ``gpus`` GPUs of ``cluster`` (a preset name, a YAML path
    or a :class:`ClusterSpec`) from ``min_bytes`` to ``max_bytes`` (bytes or "4 MiB"-style
    strings), multiplying by ``factor``.

    Raises:
        InputError: for an unknown collective, backend or dtype, bad sizes, or a GPU count the
            cluster cannot hold.
    """
    if name not in COLLECTIVES:
        raise InputError(f"unknown collective {name!r}; expected one of {', '.join(COLLECTIVES)}")
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}", where="--backend")
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}", where="--dtype")
    lo = parse_size(_nccl_size(min_bytes), where="--min-bytes")
    hi = parse_size(_nccl_size(max_bytes), where="--max-bytes")
    if lo < 1 or hi < lo:
        raise InputError(f"need 1 <= min-bytes <= max-bytes, got {lo} and {hi}", where="--min-bytes")
    if factor < 2:
        raise InputError(f"must be >= 2, got {factor}", where="--factor")
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster)
    fabric = build_fabric(spec, gpus)
    rows = sweep(fabric, spec.nccl, name, sizes(lo, hi, factor), backend=backend,
                 dtype_bytes=DTYPES[dtype], algo=algorithm, proto=protocol, progress=progress)
    return CollectiveTable(name, spec.name, gpus, fabric.num_servers, backend, dtype, rows)


def _nccl_size(v: int | str) -> int | str:
    """nccl-tests style sizes: "1K", "4G" mean KiB and GiB; other strings go to parse_size."""
    if isinstance(v, str):
        t = v.strip()
        if t and t[-1] in "KMGT" and t[:-1].replace(".", "", 1).isdigit():
            return f"{t[:-1]} {t[-1]}iB"
    return v


def format_table(t: CollectiveTable) -> str:
    """The nccl-tests table (out-of-place columns), with the chosen algorithm and protocol."""
    lines = [
        f"# podsim collective {t.collective}: {t.gpus} GPUs ({t.servers} servers) of {t.cluster}, "
        f"backend {t.backend}",
        "#",
        f"# {'size':>10} {'count':>12} {'type':>9} {'redop':>7} {'time':>10} {'algbw':>7} {'busbw':>7}"
        f"  {'algo':<12} proto",
        f"# {'(B)':>10} {'(elements)':>12} {'':>9} {'':>7} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}",
    ]
    redop = "sum" if t.collective in ("all_reduce", "reduce_scatter") else "none"
    for r in t.rows:
        tm = f"{r.time_us:.2f}" if r.time_us < 10000 else f"{r.time_us:.0f}"
        lines.append(f"  {r.bytes:>10} {r.count:>12} {t.dtype:>9} {redop:>7} {tm:>10} "
                     f"{r.algbw_gbps:7.2f} {r.busbw_gbps:7.2f}  {r.algorithm:<12} {r.protocol}")
    if t.rows:
        big = [r for r in t.rows if r.bytes >= 1 << 20] or t.rows
        avg = sum(r.busbw_gbps for r in t.rows) / len(t.rows)
        lines.append(f"# Avg bus bandwidth    : {avg:.4f} GB/s")
        lines.append(f"# Peak bus bandwidth   : {max(r.busbw_gbps for r in big):.4f} GB/s")
    return "\n".join(lines)
