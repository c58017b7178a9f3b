"""What a collective algorithm needs from the engine, and the shared state machine.

Timing model (ASTRA-sim 2.x system layer, reproduced exactly):

* every step of an algorithm is a *packet*: it first crosses the NPU<->memory bus (10 ns for
  a dimension marked local, ``endpoint-delay`` otherwise), then, if the step reduces data,
  spends ``3 * int(bytes / local_mem_bw)`` ns in local memory (one write, two reads);
* after that the rank sends the next message and posts the receive of the next incoming one;
* a phase ends when its last message was sent and the last packet has been processed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Protocol

from ..workload.ops import CollectiveKind


class Direction(Enum):
    CLOCKWISE = 1
    ANTICLOCKWISE = -1


class PhaseHost(Protocol):
    """Services the engine gives a running phase on one rank."""

    rank: int

    def bundle(self, fast: bool, needs_processing: bool, size: int, to_memory: bool,
               send_back: bool = False) -> None:
        """Send one packet over the memory bus (and reduce it if ``needs_processing``); when
        done, the engine calls the phase's ``on_general``.  ``to_memory`` picks the bus
        direction (NPU to memory, or back) and ``send_back`` asks the shared-bus model to
        return the data afterwards; both matter only when the bus is modelled (LogGP)."""

    def send(self, dst: int, size: int) -> None:
        """Send ``size`` bytes to ``dst`` (tagged with the stream)."""

    def recv(self, src: int, size: int) -> None:
        """Post the receive of ``size`` bytes from ``src``; on arrival the engine calls the
        phase's ``on_packet_received``."""

    def phase_done(self) -> None:
        """The phase has finished on this rank."""


class LogicalRing:
    """A ring of NPUs used by ring, direct and halving-doubling algorithms.

    Either homogeneous (``size`` NPUs ``offset`` apart, as one network dimension) or given as
    an explicit list of NPU ids (a communicator group).
    """

    def __init__(self, me: int, size: int, index: int, offset: int = 1,
                 members: list[int] | None = None, local: bool = False) -> None:
        self.me = me
        self.size = size
        self.index = index
        self.local = local   # ASTRA-sim's Dimension::Local: bus hops use the fixed 10 ns
        self._ids: list[int] | None
        self._pos: dict[int, int] | None
        if members is not None:
            self._ids = list(members)
            self._pos = {npu: i for i, npu in enumerate(self._ids)}
            #: names the ring the same on every member (a hash of the member list)
            self.key: tuple[int, ...] = (-1, hash(tuple(self._ids)), self._ids[0], size)
        else:   # positions by arithmetic: no per-ring lists (a rank builds one ring per dimension)
            self._base = me - index * offset
            self._offset = offset
            self._ids = self._pos = None
            self.key = (self._base, offset, size)

    @property
    def members(self) -> list[int]:
        """The NPUs of the ring, in index order (clockwise)."""
        if self._ids is None:
            return [self._base + i * self._offset for i in range(self.size)]
        return self._ids

    def position(self, npu: int) -> int:
        """The index of ``npu`` in the ring."""
        if self._pos is None:
            return (npu - self._base) // self._offset
        return self._pos[npu]

    def _at(self, i: int) -> int:
        i %= self.size
        return self._base + i * self._offset if self._ids is None else self._ids[i]

    def receiver(self, npu: int, direction: Direction) -> int:
        return self._at(self.position(npu) + (1 if direction is Direction.CLOCKWISE else -1))

    def receiver_at(self, npu: int, hops: int, direction: Direction) -> int:
        """The NPU ``hops`` receivers on from ``npu`` (``receiver`` applied ``hops`` times)."""
        return self._at(self.position(npu) + (hops if direction is Direction.CLOCKWISE else -hops))

    def sender(self, npu: int, direction: Direction) -> int:
        return self._at(self.position(npu) + (-1 if direction is Direction.CLOCKWISE else 1))


class PhaseAlgorithm:
    """Base of the packet state machines (ASTRA-sim's Ring, AllToAll, HalvingDoubling).

    Subclasses set ``stream_count``, ``msg_size``, ``final_data_size``, ``parallel_reduce``
    and override :meth:`_nonzero_packets`, :meth:`_after_release` and :meth:`on_general`.
    """

    name = "base"

    def __init__(self, kind: CollectiveKind, ring: LogicalRing, data_size: int) -> None:
        self.kind = kind
        self.ring = ring
        self.id = ring.me
        self.n = ring.size
        self.data_size = data_size
        self.final_data_size = data_size
        self.msg_size = 0
        self.parallel_reduce = 1
        self.stream_count = 0
        self.free_packets = 0
        self.total_received = 0
        self.zero_latency = 0
        self.nonzero_latency = 0
        self.toggle = False
        self.curr_receiver = self.id
        self.curr_sender = self.id
        self.packets: deque[tuple[int, int, int]] = deque()  # (dst, src, size)
        self.host: PhaseHost | None = None
        self.fast = ring.local

    # -- engine entry points -------------------------------------------------------------
    def start(self, host: PhaseHost) -> None:
        """StreamInit: inject the first packet(s)."""
        self.host = host
        for _ in range(self.parallel_reduce):
            self._insert_packet()

    def on_packet_received(self) -> None:
        self.total_received += 1
        self._insert_packet()

    def on_general(self) -> None:
        self.free_packets += 1
        self._ready()
        self._iteratable()

    # -- state machine -------------------------------------------------------------------
    def _nonzero_packets(self) -> int:
        return (self.n - 1) * self.parallel_reduce

    def _insert_packet(self) -> None:
        if self.zero_latency == 0 and self.nonzero_latency == 0:
            self.zero_latency = self.parallel_reduce
            self.nonzero_latency = self._nonzero_packets()
            self.toggle = not self.toggle
        self.packets.append((self.curr_receiver, self.curr_sender, self.msg_size))
        if self.zero_latency > 0:
            processed, to_memory, send_back = False, True, False
            self.zero_latency -= 1
        elif self.nonzero_latency > 0:
            processed = self.kind == CollectiveKind.REDUCE_SCATTER or (
                self.kind == CollectiveKind.ALL_REDUCE and self.toggle)
            send_back = self.nonzero_latency > self.parallel_reduce
            to_memory = False
            self.nonzero_latency -= 1
        else:  # ASTRA-sim panics here ("should not inject nothing!")
            raise RuntimeError(f"{self.name}: packet injected after the phase ended on rank {self.id}")
        self._release(processed, to_memory, send_back)

    def _release(self, processed: bool, to_memory: bool, send_back: bool) -> None:
        size = self.msg_size
        self._after_release()
        assert self.host is not None
        self.host.bundle(self.fast, processed, size, to_memory, send_back)

    def _after_release(self) -> None:
        """Hook run after each packet is released (peer rotation, size halving)."""

    def _ready(self) -> bool:
        if not self.packets or self.stream_count == 0 or self.free_packets == 0:
            return False
        dst, src, size = self.packets.popleft()
        assert self.host is not None
        self.host.send(dst, size)
        self.host.recv(src, size)
        self.stream_count -= 1
        self.free_packets -= 1
        return True

    def _iteratable(self) -> None:
        if self.stream_count == 0 and self.free_packets == self.parallel_reduce:
            assert self.host is not None
            self.host.phase_done()


PhaseFactory = Callable[[CollectiveKind, LogicalRing, int], PhaseAlgorithm]
