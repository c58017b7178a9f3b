"""The printed summary of ``podsim fabric``: a fabric's GPUs and servers, its nodes by kind and
its cables by tier, bandwidth (GB/s per direction) and latency (ns)."""

from __future__ import annotations

from ..network.describe import describe_fabric
from ..network.fabric import Fabric

__all__ = ["format_fabric"]


def format_fabric(fab: Fabric) -> str:
    """Lines like ``nic: 1,024 cables x 25 GB/s per direction, 600 ns`` (see
    :func:`podsim.network.describe.describe_fabric`)."""
    return describe_fabric(fab)
