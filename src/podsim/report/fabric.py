"""The printed summary of ``podsim fabric``: a fabric's GPUs and servers, its nodes by kind and
its cables by tier, bandwidth (GB/s per direction) and latency (ns), and a note when cables
have no latency (an ideal what-if, which a cluster file may ask for)."""

from __future__ import annotations

from ..network.describe import describe_fabric
from ..network.fabric import Fabric

__all__ = ["format_fabric"]


def format_fabric(fab: Fabric) -> str:
    """Lines like ``nic: 1,024 cables x 25 GB/s per direction, 600 ns`` (see
    :func:`podsim.network.describe.describe_fabric`)."""
    text = describe_fabric(fab)
    ideal = int((fab.link_lat == 0).sum())
    if ideal:
        text += (
            f"\n  note: {ideal:,} of {fab.num_links:,} directed links have a latency of 0 ns: ideal links (a "
            "what-if); real NVLink, NIC and switch hops take 100s of ns"
        )
    return text
