"""A collective as steps of concurrent point-to-point flows.

A :class:`Step` is a set of flows (fabric node ids, bytes, ECMP label) that run at the same
time; a step repeated ``repeat`` times stands for that many identical rounds (a ring's
``2(n-1)`` rounds).  Each round also pays per-step latencies: ``hops`` maps a link class
("nvlink", "pcie", "net") to the number of such latencies per round (fractional when only some
rounds cross the network, as a ring's ``2(k-1)`` of ``2(n-1)`` on ``k`` servers).
A :class:`Schedule` is the ordered list of steps of one algorithm and protocol.

Units: bytes, ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Step:
    """One kind of round: flows that run together, repeated ``repeat`` times."""

    name: str
    src: np.ndarray  #: int64 fabric node ids
    dst: np.ndarray  #: int64 fabric node ids
    nbytes: np.ndarray  #: float64 bytes per flow per round
    label: np.ndarray  #: int64 ECMP labels (channel ids)
    repeat: int = 1
    hops: dict = field(default_factory=dict)  #: link class -> per-step latencies per round

    @property
    def num_flows(self) -> int:
        return len(self.src)


@dataclass
class Schedule:
    """An algorithm's steps for one collective call."""

    collective: str
    algorithm: str
    protocol: str
    size: int  #: the collective's size in bytes (nccl-tests convention)
    ranks: int
    steps: list[Step] = field(default_factory=list)


class FlowList:
    """Collects flows for one step (lists, or arrays from :meth:`of_arrays`)."""

    def __init__(self) -> None:
        self.src: list[int] | np.ndarray = []
        self.dst: list[int] | np.ndarray = []
        self.nbytes: list[float] | np.ndarray = []
        self.label: list[int] | np.ndarray = []

    @classmethod
    def of_arrays(cls, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, label: np.ndarray) -> FlowList:
        """The flows of four arrays, in order, without those :meth:`add` would drop (a flow
        to itself, or of no bytes)."""
        keep = (src != dst) & (nbytes > 0)
        fl = cls()
        fl.src, fl.dst, fl.label = src[keep], dst[keep], label[keep]
        if nbytes.strides == (0,) and len(nbytes):  # one size for all: stays a read-only view
            fl.nbytes = np.broadcast_to(nbytes[0], (len(fl.src),))
        else:
            fl.nbytes = nbytes[keep]
        return fl

    def add(self, src: int, dst: int, nbytes: float, label: int) -> None:
        if src != dst and nbytes > 0:
            self.src.append(src)
            self.dst.append(dst)
            self.nbytes.append(nbytes)
            self.label.append(label)

    def step(self, name: str, repeat: int, hops: dict[str, float]) -> Step:
        nbytes = self.nbytes
        return Step(
            name,
            np.asarray(self.src, dtype=np.int64),
            np.asarray(self.dst, dtype=np.int64),
            nbytes if isinstance(nbytes, np.ndarray) and nbytes.dtype == np.float64 else np.asarray(nbytes, np.float64),
            np.asarray(self.label, dtype=np.int64),
            repeat,
            dict(hops),
        )
