"""ASTRA-sim's shared NPU <-> memory bus (``model-shared-bus: 1``), a LogGP model.

Each rank has a bus with two sides (NPU and memory).  A transfer of ``b`` bytes is sent by one
side after an overhead (``o``, or what remains of the gap ``g`` since its last transfer) and
takes ``G * (b - 1)`` ns to send; the other side receives it ``L + o`` later.  A side that has
sent more than 8 transfers in a row yields to its partner if the partner has work.  Data that
needs reducing queues for ``(b // 100) * local-reduction-delay + 50`` ns of processing; data
marked ``send back`` crosses the bus again.  The NPU side also owns an inner bus (G = 0.0038)
that every request crosses before and after (ASTRA-sim's ``attach_mem_bus``).  Only
transfers on network dimensions use this model; the local dimension keeps its fixed 10 ns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .buckets import RankBuckets

THRESHOLD = 8


class _Request:
    __slots__ = ("size", "processed", "send_back", "done", "next_event")

    def __init__(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        self.size = size
        self.processed = processed
        self.send_back = send_back
        self.done = done  # called when the request leaves through this side
        self.next_event = ""  # what the outer side does when the inner bus returns it


class _Side:
    """One side of a bus (ASTRA-sim's LogGP object)."""

    def __init__(self, b: RankBuckets, L: int, o: int, g: int, G: float, reduction_delay: int) -> None:
        self.b = b
        self.L, self.o, self.g, self.G = L, o, g, G
        self.red = reduction_delay
        self.partner: _Side | None = None
        self.inner: SharedBus | None = None
        self.last_trans = 0
        self.state = self.prev_state = "free"
        self.processing_busy = False
        self.subsequent_reads = 0
        self.sends: deque[_Request] = deque()
        self.receives: deque[_Request] = deque()
        self.processing: deque[_Request] = deque()

    def request(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        r = _Request(size, processed, send_back, done)
        if self.inner is not None:
            r.next_event = "send_back"
            self.inner.to_npu(size, False, False, lambda: self._call("send_back", r))
            return
        self.sends.append(r)
        if self.state == "free":
            if self._yield_to_partner():
                return
            self._next_read()

    def _yield_to_partner(self) -> bool:
        p = self.partner
        assert p is not None
        if self.subsequent_reads > THRESHOLD and p.sends and p.subsequent_reads <= THRESHOLD:
            if p.state == "free":
                p._call("general", None)
            return True
        return False

    def _next_read(self) -> None:
        now = self.b.queue.now
        if self.prev_state == "sending":
            since = now - self.last_trans
            offset = self.o if self.o + since > self.g else self.g - since
        else:
            offset = self.o
        r = self.sends.popleft()
        assert self.partner is not None
        self.partner._receive(r, offset)
        self.state = "sending"
        self.b.register(int(offset + self.G * (r.size - 1)), lambda: self._call("send_finished", None))

    def _receive(self, r: _Request, offset: int) -> None:
        self.receives.append(r)
        self.prev_state = self.state
        self.state = "receiving"
        self.b.register(int(offset + (r.size - 1) * self.G + self.L + self.o), lambda: self._call("rec_finished", None))
        self.subsequent_reads = 0

    def _start_processing(self) -> None:
        self.processing_busy = True
        self.b.register(
            (self.processing[0].size // 100) * self.red + 50, lambda: self._call("processing_finished", None)
        )

    def _leave(self, r: _Request, send_back: bool) -> None:
        """A request is done on this side: back over the bus, or out (via the inner bus)."""
        if send_back:
            r.send_back = False
            if self.inner is not None:
                self.inner.to_memory(r.size, False, True, lambda: self._call("send_back", r))
            else:
                self.sends.append(r)
        elif self.inner is not None:
            self.inner.to_memory(r.size, False, False, lambda: self._call("retire", r))
        else:
            r.done()

    def _call(self, event: str, r: _Request | None) -> None:
        now = self.b.queue.now
        if event == "send_finished":
            self.last_trans = now
            self.prev_state = self.state
            self.state = "free"
            self.subsequent_reads += 1
        elif event == "rec_finished":
            self.last_trans = now
            self.prev_state = self.state
            if len(self.receives) < 2:
                self.state = "free"
            front = self.receives.popleft()
            if front.processed:
                front.processed = False
                if self.inner is not None:
                    self.inner.to_memory(front.size, False, True, lambda f=front: self._call("process", f))
                else:
                    self.processing.append(front)
                if not self.processing_busy and self.processing:
                    self._start_processing()
            else:
                self._leave(front, front.send_back)
        elif event == "processing_finished":
            self.processing_busy = False
            front = self.processing.popleft()
            self._leave(front, front.send_back)
            if self.processing:
                self._start_processing()
        elif event == "retire":
            assert r is not None
            r.done()
        elif event == "process":
            assert r is not None
            self.processing.append(r)
            if not self.processing_busy:
                self._start_processing()
        elif event == "send_back":
            assert r is not None
            self.sends.append(r)
        if self.state == "free" and self.sends:
            if self._yield_to_partner():
                return
            self._next_read()


class SharedBus:
    """The NPU <-> memory bus of one rank (two LogGP sides, optionally an inner bus)."""

    def __init__(
        self, b: RankBuckets, L: int, o: int, g: int, G: float, reduction_delay: int, attach_inner: bool = True
    ) -> None:
        self.npu = _Side(b, L, o, g, G, reduction_delay)
        self.mem = _Side(b, L, o, g, G, reduction_delay)
        self.npu.partner, self.mem.partner = self.mem, self.npu
        if attach_inner:
            self.npu.inner = SharedBus(b, L, o, g, 0.0038, reduction_delay, attach_inner=False)

    def to_memory(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        """A transfer from the NPU side (ASTRA-sim's send_from_NPU_to_MA)."""
        self.npu.request(size, processed, send_back, done)

    def to_npu(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        """A transfer from the memory side (ASTRA-sim's send_from_MA_to_NPU)."""
        self.mem.request(size, processed, send_back, done)
