"""A readable summary of a fabric: nodes by kind, cables by tier and bandwidth."""

from __future__ import annotations

from collections import Counter

from .fabric import Fabric, LinkTier, NodeKind


def describe_fabric(fab: Fabric) -> str:
    """Lines like ``nic: 1,024 cables x 25 GB/s per direction, 600 ns``."""
    kinds = Counter(NodeKind(int(k)).name.lower() for k in fab.node_kind)
    lines = [
        f"fabric {fab.name}: {fab.num_gpus} GPUs in {fab.num_servers} servers of {fab.gpus_per_node}",
        "  nodes: " + ", ".join(f"{v:,} {k}" for k, v in sorted(kinds.items())),
    ]
    cables: Counter[tuple[str, float, float]] = Counter()
    for i in range(fab.num_links):
        cables[(LinkTier(int(fab.link_tier[i])).name.lower(), float(fab.link_bw[i]), float(fab.link_lat[i]))] += 1
    for (tier, bw, lat), n in sorted(cables.items()):
        lines.append(f"  {tier:<8} {n // 2:>7,} cables x {bw:g} GB/s per direction, {lat:g} ns")
    extra = {k: v for k, v in fab.meta.items() if k != "simai_ids"}
    if extra:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in extra.items()))
    return "\n".join(lines)
