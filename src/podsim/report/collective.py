"""The result of ``podsim collective`` (nccl-tests in simulation) and its printed table.

Units: sizes in B, times in us, bandwidths in GB/s (10^9 B/s), as nccl-tests prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..collectives.nccl.sweep import SweepRow


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
    #: injected NIC and link faults: what they are and each size's time without them (empty: none)
    faults: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON form (fields documented in docs/outputs.md)."""
        return {
            "collective": self.collective,
            "cluster": self.cluster,
            "gpus": self.gpus,
            "servers": self.servers,
            "backend": self.backend,
            "dtype": self.dtype,
            "units": {"bytes": "B", "time_us": "us", "algbw_gbps": "GB/s (1e9 B/s)", "busbw_gbps": "GB/s (1e9 B/s)"},
            "rows": [
                {
                    "bytes": r.bytes,
                    "count": r.count,
                    "time_us": round(r.time_us, 3),
                    "algbw_gbps": round(r.algbw_gbps, 4),
                    "busbw_gbps": round(r.busbw_gbps, 4),
                    "algorithm": r.algorithm,
                    "protocol": r.protocol,
                }
                for r in self.rows
            ],
            **({"faults": self.faults} if self.faults else {}),
        }


def format_collective(t: CollectiveTable) -> str:
    """The nccl-tests table (out-of-place columns), with the chosen algorithm and protocol."""
    lines = [
        f"# podsim collective {t.collective}: {t.gpus} GPUs ({t.servers} servers) of {t.cluster}, backend {t.backend}",
        "#",
        f"# {'size':>10} {'count':>12} {'type':>9} {'redop':>7} {'time':>10} {'algbw':>7} {'busbw':>7}"
        f"  {'algo':<12} proto",
        f"# {'(B)':>10} {'(elements)':>12} {'':>9} {'':>7} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}",
    ]
    redop = "sum" if t.collective in ("all_reduce", "reduce_scatter") else "none"
    for r in t.rows:
        tm = f"{r.time_us:.2f}" if r.time_us < 10000 else f"{r.time_us:.0f}"
        lines.append(
            f"  {r.bytes:>10} {r.count:>12} {t.dtype:>9} {redop:>7} {tm:>10} "
            f"{r.algbw_gbps:7.2f} {r.busbw_gbps:7.2f}  {r.algorithm:<12} {r.protocol}"
        )
    if t.rows:
        big = [r for r in t.rows if r.bytes >= 1 << 20] or t.rows
        avg = sum(r.busbw_gbps for r in t.rows) / len(t.rows)
        lines.append(f"# Avg bus bandwidth    : {avg:.4f} GB/s")
        lines.append(f"# Peak bus bandwidth   : {max(r.busbw_gbps for r in big):.4f} GB/s")
    if t.faults:
        lines.append("#")
        for f in t.faults["injected"]:
            lines.append(f"# fault {f['flag']} {f['spec']}: {f['what']}")
        lines.append(f"# {'size':>10} {'healthy':>10} {'faulty':>10} {'ratio':>7}  healthy algo/proto")
        lines.append(f"# {'(B)':>10} {'(us)':>10} {'(us)':>10}")
        for x in t.faults["sizes"]:
            ratio = f"{x['ratio']:.3f}" if x["ratio"] is not None else "-"
            lines.append(
                f"  {x['bytes']:>10} {x['baseline_time_us']:>10.2f} {x['time_us']:>10.2f} {ratio:>7}  "
                f"{x['baseline_algorithm']}/{x['baseline_protocol']}"
            )
    return "\n".join(lines)


def format_cluster_list(presets: list[tuple[str, str]]) -> str:
    """The shipped cluster presets, one per line: name and description."""
    return "\n".join(f"  {n:<20} {d}" for n, d in presets)
