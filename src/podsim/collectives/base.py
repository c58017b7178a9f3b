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
from typing import TYPE_CHECKING, ClassVar, Protocol

from ..workload.ops import CollectiveKind

if TYPE_CHECKING:
    from .plan import LogicalDim


class Direction(Enum):
    CLOCKWISE = 1
    ANTICLOCKWISE = -1


class ClosedForm(Enum):
    """How the engine may time a phase without sending its messages one by one (on the
    analytical network, every member's end from every member's start; see
    :mod:`podsim.engine.closed_form_phases`)."""

    #: the ring recurrence: each step one message to the next member, ``stream_count`` steps
    RING = "ring"
    #: a chain of one send, one receive and one packet a step, timed by its step recurrence
    STEPS = "steps"
    #: every peer at once: all messages sent together, every arrival crossing the bus
    DIRECT = "direct"


class PhaseHost(Protocol):
    """Services the engine gives a running phase on one rank."""

    rank: int

    def bundle(self, fast: bool, needs_processing: bool, size: int, to_memory: bool, send_back: bool = False) -> None:
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

    def __init__(
        self, me: int, size: int, index: int, offset: int = 1, members: list[int] | None = None, local: bool = False
    ) -> None:
        self.me = me
        self.size = size
        self.index = index
        self.local = local  # ASTRA-sim's Dimension::Local: bus hops use the fixed 10 ns
        self._ids: list[int] | None
        self._pos: dict[int, int] | None
        if members is not None:
            self._ids = list(members)
            self._pos = {npu: i for i, npu in enumerate(self._ids)}
            #: names the ring the same on every member (a hash of the member list)
            self.key: tuple[int, ...] = (-1, hash(tuple(self._ids)), self._ids[0], size)
        else:  # positions by arithmetic: no per-ring lists (a rank builds one ring per dimension)
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

    Each algorithm declares what it supports in class attributes, which the planner, the
    system-JSON reader and the engine read instead of testing its type:

    * ``kinds``: the collectives it implements;
    * ``closed_form``: how the engine may time it without its messages (None: it may not).
      A subclass changes the state machine, so it never inherits a closed form: it declares
      its own or has none;
    * ``has_one_variant``: whether a ``one*`` variant (one ring over every NPU) exists;
    * ``windowed``: whether the name takes a window suffix (``direct4``);
    * ``on_groups``: whether it runs on a communicator group (one ring in the group's order);
    * ``roles_differ``: why ranks running it are not interchangeable (None: they are), which
      rules out simulating equivalent ranks once;
    * ``nccl``: the NCCL algorithm it corresponds to (:mod:`podsim.collectives.registry`).

    The planner makes a phase with :meth:`for_dim`; :meth:`prepare_dim` builds what a dimension
    needs once (a tree).
    """

    name = "base"
    kinds: ClassVar[frozenset[CollectiveKind]] = frozenset()
    closed_form: ClassVar[ClosedForm | None] = None
    has_one_variant: ClassVar[bool] = True
    windowed: ClassVar[bool] = False
    on_groups: ClassVar[bool] = True
    roles_differ: ClassVar[str | None] = None
    nccl: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "closed_form" not in cls.__dict__:  # never inherited (see the class docstring)
            cls.closed_form = None

    @classmethod
    def prepare_dim(cls, rank: int, size: int, offset: int, last: bool) -> object | None:
        """What one dimension of ``size`` NPUs ``offset`` apart needs for this algorithm on
        ``rank`` (``last``: the last listed dimension), kept on the dimension; None by default.

        Raises:
            InputError: when the algorithm cannot run on such a dimension."""
        return None

    @classmethod
    def for_dim(cls, kind: CollectiveKind, dim: LogicalDim, data_size: int, direction: Direction) -> PhaseAlgorithm:
        """This algorithm's phase for ``kind`` of ``data_size`` bytes on ``dim``, going round in
        ``direction`` (where the algorithm has one)."""
        return cls(kind, dim.ring, data_size)

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
                self.kind == CollectiveKind.ALL_REDUCE and self.toggle
            )
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
