"""A phase algorithm's steps read off its own state machine, and every member's end by the step
recurrence, vectorised over the members: the closed form for halving-doubling
phases, whose partners and message sizes change from step to step.

An algorithm that keeps one packet in flight (``parallel_reduce == 1``) runs a chain on each
rank: its first packet crosses the memory bus (``E``, and a reduction ``R`` if it is processed);
then, step after step, the rank sends message ``k`` and posts the receive of message ``k``; when
that message has arrived, its packet crosses the bus (``E``, ``+ R`` if processed) and the next
step starts.  So, with ``T_r(k)`` the time rank ``r`` sends message ``k``:

    T_r(1)   = S_r + E + R_0
    T_r(k+1) = max(T_s(j) + H, T_r(k)) + E + R_k,        end_r = T_r(m + 1)

where the message ``r`` receives at step ``k`` is the one rank ``s`` sends at its step ``j``
(matched as the engine matches them: by sender, receiver, size and order) and ``H`` its network
delay.  :func:`step_pattern` drives a copy of a rank's algorithm with a recording host, so the
steps are the algorithm's own (partners, sizes, which packets reduce); :class:`StepTable`
matches every member's steps once per phase shape and ring; :meth:`StepTable.ends` evaluates the
recurrence, one array operation a step.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable

import numpy as np

from ..collectives.base import PhaseAlgorithm


class _Recorder:
    """A phase host that records what the algorithm asks for."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.events: list[tuple] = []

    def bundle(self, fast: bool, needs_processing: bool, size: int, to_memory: bool, send_back: bool = False) -> None:
        self.events.append(("bundle", needs_processing, size))

    def send(self, dst: int, size: int) -> None:
        self.events.append(("send", dst, size))

    def recv(self, src: int, size: int) -> None:
        self.events.append(("recv", src, size))

    def phase_done(self) -> None:
        self.events.append(("done",))


class StepPattern:
    """One rank's steps of a phase, peers by ring position.

    ``first``: (reduces, bytes) of the first packet; per step ``k = 1 .. m``: ``sends[k-1]``
    (position, bytes), ``recvs[k-1]`` (position, bytes) and ``bundles[k-1]`` (reduces, bytes)
    of the packet that arrives."""

    __slots__ = ("first", "sends", "recvs", "bundles")

    def __init__(
        self,
        first: tuple[bool, int],
        sends: list[tuple[int, int]],
        recvs: list[tuple[int, int]],
        bundles: list[tuple[bool, int]],
    ) -> None:
        self.first = first
        self.sends = sends
        self.recvs = recvs
        self.bundles = bundles


def step_pattern(alg: PhaseAlgorithm) -> StepPattern | None:
    """The steps of ``alg`` (not started; it is left untouched), or None when it is not a chain
    of one send, one receive and one packet a step."""
    if alg.parallel_reduce != 1:
        return None
    a = copy.copy(alg)
    a.packets = deque()
    host = _Recorder(alg.id)
    pos = alg.ring.position
    a.start(host)  # type: ignore[arg-type]
    if len(host.events) != 1 or host.events[0][0] != "bundle":
        return None
    first = (bool(host.events[0][1]), int(host.events[0][2]))
    sends: list[tuple[int, int]] = []
    recvs: list[tuple[int, int]] = []
    bundles: list[tuple[bool, int]] = []
    for _ in range(4 * alg.stream_count + 4):
        host.events.clear()
        a.on_general()
        ev = host.events
        if len(ev) == 1 and ev[0][0] == "done":
            return StepPattern(first, sends, recvs, bundles) if sends else None
        if len(ev) != 2 or ev[0][0] != "send" or ev[1][0] != "recv":
            return None
        sends.append((pos(ev[0][1]), int(ev[0][2])))
        recvs.append((pos(ev[1][1]), int(ev[1][2])))
        host.events.clear()
        a.on_packet_received()
        if len(host.events) != 1 or host.events[0][0] != "bundle":
            return None
        bundles.append((bool(host.events[0][1]), int(host.events[0][2])))
    return None


class StepTable:
    """Every member's steps of one phase shape on one ring, matched (the module docstring):
    ``src[k]``/``step[k]`` the position and step whose message each position receives at step
    ``k + 1``, ``hop[k]`` its delay and ``add[k]`` the bus time after it (ns, arrays over
    positions); ``add0`` the first packet's."""

    def __init__(
        self,
        patterns: list[StepPattern],
        ids: list[int],
        delay_ns: Callable[[int, int, int], int],
        endpoint_ns: int,
        reduction_ns: Callable[[int], int],
    ) -> None:
        n = len(patterns)
        m = len(patterns[0].sends)
        if any(len(p.sends) != m for p in patterns):
            raise ValueError("the members' phases take different numbers of steps")
        sent: dict[tuple[int, int, int, int], int] = {}  # (sender, receiver, bytes, nth) -> step
        count: dict[tuple[int, int, int], int] = {}
        for s, p in enumerate(patterns):
            for k, (dst, size) in enumerate(p.sends):
                nth = count.get((s, dst, size), 0)
                count[(s, dst, size)] = nth + 1
                sent[(s, dst, size, nth)] = k
        self.src = np.zeros((m, n), dtype=np.int64)
        self.step = np.zeros((m, n), dtype=np.int64)
        self.hop = np.zeros((m, n), dtype=np.int64)
        self.add = np.zeros((m, n), dtype=np.int64)
        self.add0 = np.zeros(n, dtype=np.int64)
        count.clear()
        for r, p in enumerate(patterns):
            self.add0[r] = endpoint_ns + (reduction_ns(p.first[1]) if p.first[0] else 0)
            for k, (src, size) in enumerate(p.recvs):
                nth = count.get((src, r, size), 0)
                count[(src, r, size)] = nth + 1
                j = sent.get((src, r, size, nth))
                if j is None or j > k:
                    raise ValueError(f"position {r}'s receive {k + 1} is not sent by an earlier or equal step")
                self.src[k, r] = src
                self.step[k, r] = j
                self.hop[k, r] = delay_ns(ids[src], ids[r], size)
                reduces, bsize = p.bundles[k]
                self.add[k, r] = endpoint_ns + (reduction_ns(bsize) if reduces else 0)
        self.messages = n * m

    def ends(self, starts: list[int]) -> list[int]:
        """Every position's end (ns) from its start."""
        m, n = self.src.shape
        t = np.empty((m + 1, n), dtype=np.int64)
        t[0] = np.asarray(starts, dtype=np.int64) + self.add0
        for k in range(m):
            t[k + 1] = np.maximum(t[self.step[k], self.src[k]] + self.hop[k], t[k]) + self.add[k]
        return t[m].tolist()
