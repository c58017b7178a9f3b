"""Op and collective kinds of the IR.

The numeric values of :class:`CollectiveKind` equal Chakra's ``CollectiveCommType`` so that
conversion is the identity, but nothing outside ``formats/chakra`` may rely on that.
"""

from __future__ import annotations

from enum import IntEnum


class OpKind(IntEnum):
    """What an op does."""

    COMPUTE = 0  #: kernel or CPU work: a duration, or flops + bytes for a compute model
    COLLECTIVE = 1  #: collective over a group
    SEND = 2  #: point-to-point send to ``peer``
    RECV = 3  #: point-to-point receive from ``peer``
    MEM_LOAD = 4  #: load ``size_bytes`` from (remote) memory
    MEM_STORE = 5  #: store ``size_bytes`` to (remote) memory
    NOOP = 6  #: completes at once (metadata, invalid or unknown nodes)


class CollectiveKind(IntEnum):
    """Collective operations (values match Chakra's CollectiveCommType)."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9

    @property
    def label(self) -> str:
        """Lower-case label used in reports, e.g. ``all_reduce``."""
        return self.name.lower()


NO_VALUE = -1
"""Marker in integer op arrays for 'not given' (duration, group, peer, ...)."""

ALL_DIMS = -1
"""``dims_mask`` value meaning 'every network dimension' (Chakra's default)."""
