"""Matching sends with receives (ASTRA-sim's analytical front end).

Messages are keyed by ``(tag, src, dst, size)`` plus a per-key sequence number, counted
separately for sends and receives, so the k-th send matches the k-th receive.  When a message
arrives: if its receive is posted, the send handler then the receive handler run at once;
otherwise the send handler runs and the receive handler runs when the receive is posted
(as a new event at that time).

:class:`MirrorMessaging` serves runs in which every rank is provably equivalent: only one
rank is simulated, and posting a receive from ``src`` stands for ``src`` sending, at that very
moment, the same message the simulated rank sends to its own peer.
"""

from __future__ import annotations

from collections.abc import Callable

from ..network.analytical import AnalyticalNetwork
from .events import EventQueue

Handler = Callable[[], None] | None


class _Entry:
    __slots__ = ("send_cb", "recv_cb", "arrived", "has_send", "has_recv")

    def __init__(self) -> None:
        self.send_cb: Handler = None
        self.recv_cb: Handler = None
        self.has_send = False
        self.has_recv = False
        self.arrived = False


class Messaging:
    """Point-to-point message matching over an analytical network."""

    def __init__(self, queue: EventQueue, network: AnalyticalNetwork | None) -> None:
        self.queue = queue
        self.network = network  # anything with delay_ns(src, dst, size), unless _transmit is overridden
        self._entries: dict[tuple[int, int, int, int, int], _Entry] = {}
        self._send_seq: dict[tuple[int, int, int, int], int] = {}
        self._recv_seq: dict[tuple[int, int, int, int], int] = {}
        self.messages = 0
        self.on_delivery: Callable[[int, int, int, int, int, int], None] | None = None

    def send(self, src: int, dst: int, size: int, tag: int, on_sent: Handler) -> None:
        key = (tag, src, dst, size)
        seqs = self._send_seq
        seq = seqs.get(key, 0)
        seqs[key] = seq + 1
        full = (tag, src, dst, size, seq)
        entries = self._entries
        e = entries.get(full)
        if e is None:
            e = entries[full] = _Entry()
        e.send_cb = on_sent
        e.has_send = True
        self.messages += 1
        self._transmit(src, dst, size, tag, full)

    def _transmit(self, src: int, dst: int, size: int, tag: int, full: tuple) -> None:
        """Carry the message; call ``self._arrive(full)`` when it has arrived."""
        q = self.queue
        t = q.now + self.network.delay_ns(src, dst, size)
        if self.on_delivery is not None:
            self.on_delivery(src, dst, size, q.now, t, tag)
        q.schedule(t, self._arrive, full)

    def _arrive(self, full: object) -> None:
        e = self._entries[full]  # type: ignore[index]
        if e.has_recv:
            del self._entries[full]  # type: ignore[arg-type]
            if e.send_cb:
                e.send_cb()
            if e.recv_cb:
                e.recv_cb()
        else:
            if e.send_cb:
                e.send_cb()
            e.arrived = True

    def recv(self, dst: int, src: int, size: int, tag: int, on_recv: Handler) -> None:
        key = (tag, src, dst, size)
        seq = self._recv_seq.get(key, 0)
        self._recv_seq[key] = seq + 1
        full = key + (seq,)
        e = self._entries.get(full)
        if e is not None and e.arrived:
            del self._entries[full]
            if on_recv is not None:
                self.queue.schedule(self.queue.now, lambda _a: on_recv(), None)
            return
        if e is None:
            e = self._entries[full] = _Entry()
        e.recv_cb, e.has_recv = on_recv, True

    def pending(self) -> list[tuple[int, int, int, int, str]]:
        """Messages still unmatched: (tag, src, dst, size, what is missing)."""
        out = []
        for (tag, src, dst, size, _), e in self._entries.items():
            out.append((tag, src, dst, size, "receive" if not e.has_recv else "send"))
        return out


class MirrorMessaging:
    """Messaging for a run that simulates one representative of equivalent ranks."""

    def __init__(self, queue: EventQueue, network: AnalyticalNetwork) -> None:
        self.queue = queue
        self.network = network
        self.messages = 0
        self.on_delivery = None

    def send(self, src: int, dst: int, size: int, tag: int, on_sent: Handler) -> None:
        self.messages += 1
        if on_sent is not None:
            t = self.queue.now + self.network.delay_ns(src, dst, size)
            self.queue.schedule(t, lambda _a: on_sent(), None)

    def recv(self, dst: int, src: int, size: int, tag: int, on_recv: Handler) -> None:
        t = self.queue.now + self.network.delay_ns(src, dst, size)
        if on_recv is not None:
            self.queue.schedule(t, lambda _a: on_recv(), None)

    def pending(self) -> list[tuple[int, int, int, int, str]]:
        return []


RENDEZVOUS_BYTES = 8192
_RENDEZVOUS_TAG = 2 * 10**12


class Rendezvous:
    """ASTRA-sim's rendezvous protocol on top of another messaging layer: a receiver first
    sends an 8 KiB handshake to the sender; when it arrives, the receiver posts the real
    receive and the sender (whose handshake receive was posted at its send) sends the data."""

    def __init__(self, inner: Messaging | MirrorMessaging, control: Messaging | None = None) -> None:
        self.inner = inner
        #: where handshakes travel (default: with the data); a cluster run's flow backend
        #: sends them through a closed-form messaging layer, too small to load a link
        self.control = control or inner
        self.queue = inner.queue

    @property
    def messages(self) -> int:
        return self.inner.messages

    @property
    def on_delivery(self):  # type: ignore[no-untyped-def]
        return self.inner.on_delivery

    @on_delivery.setter
    def on_delivery(self, fn) -> None:  # type: ignore[no-untyped-def]
        self.inner.on_delivery = fn

    def send(self, src: int, dst: int, size: int, tag: int, on_sent: Handler) -> None:
        self.control.recv(
            src, dst, RENDEZVOUS_BYTES, _RENDEZVOUS_TAG + tag, lambda: self.inner.send(src, dst, size, tag, on_sent)
        )

    def recv(self, dst: int, src: int, size: int, tag: int, on_recv: Handler) -> None:
        self.control.send(
            dst, src, RENDEZVOUS_BYTES, _RENDEZVOUS_TAG + tag, lambda: self.inner.recv(dst, src, size, tag, on_recv)
        )

    def pending(self) -> list[tuple[int, int, int, int, str]]:
        return self.inner.pending() + (self.control.pending() if self.control is not self.inner else [])
