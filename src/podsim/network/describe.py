"""A readable summary of a fabric: nodes by kind, cables by tier and bandwidth (counted in
arrays: a million GPUs' links in a second)."""

from __future__ import annotations

import numpy as np

from .fabric import Fabric, LinkTier, NodeKind


def describe_fabric(fab: Fabric) -> str:
    """Lines like ``nic: 1,024 cables x 25 GB/s per direction, 600 ns``."""
    per_kind = np.bincount(fab.node_kind.astype(np.int64), minlength=len(NodeKind))
    kinds = {NodeKind(k).name.lower(): int(v) for k, v in enumerate(per_kind.tolist()) if v}
    lines = [
        f"fabric {fab.name}: {fab.num_gpus} GPUs in {fab.num_servers} servers of {fab.gpus_per_node}",
        "  nodes: " + ", ".join(f"{v:,} {k}" for k, v in sorted(kinds.items())),
    ]
    # directed links by (tier, bandwidth, latency), counted in arrays
    bws, ib = np.unique(fab.link_bw, return_inverse=True)
    lats, il = np.unique(fab.link_lat, return_inverse=True)
    key = (fab.link_tier.astype(np.int64) * len(bws) + ib.reshape(-1)) * len(lats) + il.reshape(-1)
    keys, counts = np.unique(key, return_counts=True)
    cables: dict[tuple[str, float, float], int] = {}
    for k, n in zip(keys.tolist(), counts.tolist()):
        tier, rest = divmod(k, len(bws) * len(lats))
        b, la = divmod(rest, len(lats))
        cables[(LinkTier(tier).name.lower(), float(bws[b]), float(lats[la]))] = n
    for (tier, bw, lat), n in sorted(cables.items()):
        lines.append(f"  {tier:<8} {n // 2:>7,} cables x {bw:g} GB/s per direction, {lat:g} ns")
    extra = {k: v for k, v in fab.meta.items() if k != "simai_ids"}
    if extra:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in extra.items()))
    return "\n".join(lines)
