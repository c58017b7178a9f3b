"""ASTRA-sim communicator-group JSON: ``{"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}``.

Group ids are strings of positive integers; 0 is reserved for "all ranks".
"""

from __future__ import annotations

import os

from ...errors import InputError
from .common import load_json


def parse_comm_groups(
    data: dict, num_npus: int | None = None, source: str = "<comm-groups>"
) -> dict[str, tuple[int, ...]]:
    """Validate ``{id: ranks}``; returns ids as strings."""
    out: dict[str, tuple[int, ...]] = {}
    for key, ranks in data.items():
        if str(key) == "0":
            raise InputError("group id 0 is reserved for all ranks", source, str(key))
        if not isinstance(ranks, list) or not ranks:
            raise InputError("expected a non-empty list of ranks", source, str(key))
        seen = set()
        for r in ranks:
            if isinstance(r, bool) or not isinstance(r, int) or r < 0:
                raise InputError(f"ranks must be integers >= 0, got {r!r}", source, str(key))
            if num_npus is not None and r >= num_npus:
                raise InputError(f"rank {r} does not exist (the network has {num_npus} NPUs)", source, str(key))
            if r in seen:
                raise InputError(f"rank {r} listed twice", source, str(key))
            seen.add(r)
        out[str(key)] = tuple(ranks)
    return out


def read_comm_groups(path: str | os.PathLike[str], num_npus: int | None = None) -> dict[str, tuple[int, ...]]:
    """Read a comm-group JSON file."""
    path = str(path)
    return parse_comm_groups(load_json(path), num_npus, path)
