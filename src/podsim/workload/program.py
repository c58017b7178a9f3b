"""A program: the op DAG that one rank runs, stored as arrays.

Ranks that run the same ops share one :class:`Program`.  Ops are stored column-wise in numpy
arrays (one entry per op, in the order the source gave them, usually by node id) and
dependencies in compressed sparse rows: the data dependencies of op ``i`` are
``data_idx[data_ptr[i]:data_ptr[i+1]]`` (indices of other ops in the same program), and the
control dependencies likewise with ``ctrl_ptr`` / ``ctrl_idx``.

Units: ``duration_ns`` in integer nanoseconds, ``size_bytes`` in integer bytes, ``flops`` in
floating-point operations.

A **fused op** is a COMPUTE op whose ``extras[i]["segments"]`` lists its parts as
``(offset_ns, duration_ns, name, category)`` from the op's start, optionally followed by a dict
of what else to report of the part (its ``stage``, ``layer``, ...); ``category`` is
``"compute"`` or the group of a collective timed in closed form.  The engine runs the op for
its ``duration_ns`` and reports the parts (timeline slices, compute and communication time).
Generators fuse runs of ops whose times do not depend on the rest of the simulation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .ops import ALL_DIMS, NO_VALUE, OpKind

#: the extras key of a fused op's parts (see the module docstring)
SEGMENTS = "segments"

# Columns of a program, their dtype and their default.
COLUMNS: dict[str, tuple[type, int | float | bool]] = {
    "kind": (np.int8, int(OpKind.NOOP)),
    "node_id": (np.int64, NO_VALUE),  # the id the source file gave the op
    "duration_ns": (np.int64, NO_VALUE),  # measured/replayed duration; -1 if not given
    "flops": (np.float64, 0.0),  # work for a compute model (Chakra num_ops)
    "size_bytes": (np.int64, 0),  # collective/p2p/memory bytes, or tensor bytes of a compute op
    "collective": (np.int8, NO_VALUE),  # CollectiveKind for COLLECTIVE ops
    "group": (np.int32, NO_VALUE),  # index into Program.group_keys; -1 = all ranks
    "peer": (np.int64, NO_VALUE),  # SEND: destination rank; RECV: source rank
    "tag": (np.int64, 0),  # send/recv matching tag
    "priority": (np.int64, 0),  # explicit scheduling priority (higher first)
    "stream": (np.int16, 0),  # index into Program.streams
    "is_cpu": (np.bool_, False),  # runs on the host rather than the GPU
    "remote": (np.bool_, True),  # MEM ops: remote (True) or local memory
    "dims_mask": (np.int64, ALL_DIMS),  # network dimensions a collective spans (bit i = dim i)
    "replay_only": (np.bool_, False),  # replay duration_ns whatever the kind
}


@dataclass(eq=False)
class Program:
    """The ops one rank runs, column-wise.  Build one with :class:`ProgramBuilder`."""

    name: str
    columns: dict[str, np.ndarray]
    data_ptr: np.ndarray
    data_idx: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_idx: np.ndarray
    names: list[str]
    streams: list[str] = field(default_factory=lambda: ["main"])
    group_keys: list[str] = field(default_factory=list)
    extras: dict[int, dict[str, object]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a reader changed or dropped, for reports
    ctrl_deps_order: bool = True  # control dependencies order ops (False: they are only caller links)
    #: ``peer`` holds rank offsets (peer = own rank + peer), so ranks at different positions of a
    #: regular layout can share one program
    relative_peers: bool = False

    def peer_of(self, i: int, rank: int) -> int:
        """The absolute peer rank of send/recv op ``i`` run by ``rank``."""
        p = int(self.columns["peer"][i])
        return rank + p if self.relative_peers else p

    def __len__(self) -> int:
        return len(self.names)

    def __getattr__(self, item: str) -> np.ndarray:
        cols = self.__dict__.get("columns")
        if cols is not None and item in cols:
            return cols[item]
        raise AttributeError(item)

    @property
    def num_ops(self) -> int:
        """Number of ops."""
        return len(self.names)

    def data_deps(self, i: int) -> np.ndarray:
        """Indices of the ops op ``i`` has data dependencies on."""
        return self.data_idx[self.data_ptr[i] : self.data_ptr[i + 1]]

    def ctrl_deps(self, i: int) -> np.ndarray:
        """Indices of the ops op ``i`` has control dependencies on."""
        return self.ctrl_idx[self.ctrl_ptr[i] : self.ctrl_ptr[i + 1]]

    def signature(self, include_ids: bool = False) -> str:
        """A hash of what the program does (ops, sizes, deps); two ranks with equal
        signatures behave identically given identical surroundings.  Node ids and names are
        left out unless ``include_ids``."""
        h = hashlib.blake2b(digest_size=16)
        for key in COLUMNS:
            if key == "node_id" and not include_ids:
                continue
            h.update(key.encode())
            h.update(np.ascontiguousarray(self.columns[key]).tobytes())
        for arr in (self.data_ptr, self.data_idx, self.ctrl_ptr, self.ctrl_idx):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(
            repr(
                (self.streams, self.group_keys, sorted(self.extras.items(), key=lambda kv: kv[0]), self.relative_peers)
            ).encode()
        )
        if include_ids:
            h.update("\0".join(self.names).encode())
        return h.hexdigest()


class ProgramBuilder:
    """Append ops one at a time, then :meth:`build` a :class:`Program`.

    Dependencies are given as indices of ops added earlier or later (resolved at build).
    """

    def __init__(self, name: str = "program") -> None:
        self.name = name
        self._rows: list[dict[str, object]] = []
        self._names: list[str] = []
        self._data: list[Sequence[int]] = []
        self._ctrl: list[Sequence[int]] = []
        self._streams: list[str] = ["main"]
        self._group_keys: list[str] = []
        self._extras: dict[int, dict[str, object]] = {}

    def __len__(self) -> int:
        return len(self._names)

    def stream_index(self, stream: str) -> int:
        """Index of a named stream, added if new."""
        if stream not in self._streams:
            self._streams.append(stream)
        return self._streams.index(stream)

    def group_index(self, key: str | None) -> int:
        """Index of a group key; ``None`` or ``""`` means all ranks (-1)."""
        if not key:
            return NO_VALUE
        if key not in self._group_keys:
            self._group_keys.append(key)
        return self._group_keys.index(key)

    def add(
        self,
        kind: OpKind,
        name: str = "",
        *,
        data_deps: Sequence[int] = (),
        ctrl_deps: Sequence[int] = (),
        stream: str | None = None,
        group: str | None = None,
        extra: dict[str, object] | None = None,
        **values: object,
    ) -> int:
        """Add one op; ``values`` are column values (see ``COLUMNS``).  Returns its index."""
        idx = len(self._names)
        for key in values:
            if key not in COLUMNS:
                raise KeyError(f"unknown op column {key!r}")
        values["kind"] = int(kind)
        if stream is not None:
            values["stream"] = self.stream_index(stream)
        if group is not None:
            values["group"] = self.group_index(group)
        self._rows.append(values)
        self._names.append(name)
        self._data.append(tuple(data_deps))
        self._ctrl.append(tuple(ctrl_deps))
        if extra:
            self._extras[idx] = dict(extra)
        return idx

    def add_deps(self, idx: int, data_deps: Sequence[int]) -> None:
        """Make op ``idx`` also wait for ``data_deps`` (ops added before or after it)."""
        self._data[idx] = self._data[idx] + tuple(d for d in data_deps if d not in self._data[idx])

    def build(self) -> Program:
        """Freeze into arrays."""
        n = len(self._rows)
        cols = {k: np.full(n, default, dtype=dt) for k, (dt, default) in COLUMNS.items()}
        by_key: dict[str, tuple[list[int], list[object]]] = {}
        for i, row in enumerate(self._rows):
            for k, v in row.items():
                entry = by_key.get(k)
                if entry is None:
                    entry = by_key[k] = ([], [])
                entry[0].append(i)
                entry[1].append(v)
        for k, (idx, vals) in by_key.items():
            cols[k][np.asarray(idx, dtype=np.int64)] = np.asarray(vals, dtype=COLUMNS[k][0])
        data_ptr, data_idx = _csr(self._data)
        ctrl_ptr, ctrl_idx = _csr(self._ctrl)
        return Program(
            self.name,
            cols,
            data_ptr,
            data_idx,
            ctrl_ptr,
            ctrl_idx,
            list(self._names),
            list(self._streams),
            list(self._group_keys),
            dict(self._extras),
        )


def _csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    if lists:
        ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.fromiter((d for deps in lists for d in deps), dtype=np.int32, count=int(ptr[-1]))
    return ptr, idx


def csr_from_arrays(counts: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Build CSR arrays from per-op counts and the concatenated indices."""
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, np.asarray(flat, dtype=np.int32)
