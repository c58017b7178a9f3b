"""User-supplied collectives: a Chakra ET per participant of SEND, RECV and COMP nodes
(ASTRA-sim's CustomAlgorithm, e.g. generated from MSCCL-lang).

Every dependency-free node is issued at once; sends and receives use the nodes' own tags and
sizes; COMP nodes take their duration (0 us counts as 1 ns); ranks in the ET are positions in
the communicator group.  The collective ends when no node is left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..workload import OpKind, Program
from ..workload.ops import CollectiveKind
from .base import ClosedForm


class CustomHost(Protocol):
    def p2p_send(self, dst: int, size: int, tag: int, done: Callable[[], None]) -> None: ...
    def p2p_recv(self, src: int, size: int, tag: int, done: Callable[[], None]) -> None: ...
    def after(self, ns: int, fn: Callable[[], None]) -> None: ...
    def phase_done(self) -> None: ...


class CustomPhase:
    """Runs one participant's custom-collective program."""

    name = "custom"
    closed_form: ClosedForm | None = None  #: its messages are always sent (a program, no recurrence)

    def __init__(self, kind: CollectiveKind, program: Program, members: Sequence[int] | None, data_size: int) -> None:
        self.kind = kind
        self.p = program
        self.members = members
        self.data_size = self.final_data_size = data_size
        n = len(program)
        self.pending = [int(x) for x in (program.data_ptr[1:] - program.data_ptr[:-1])]
        counts = program.data_ptr[1:] - program.data_ptr[:-1]
        self.children: list[list[int]] = [[] for _ in range(n)]
        for i in range(n):
            for d in program.data_idx[program.data_ptr[i] : program.data_ptr[i] + counts[i]]:
                self.children[int(d)].append(i)
        self.free = sorted(i for i in range(n) if self.pending[i] == 0)
        self.ongoing = 0
        self.host: CustomHost | None = None

    def _real(self, algo_rank: int) -> int:
        return algo_rank if self.members is None else int(self.members[algo_rank])

    def start(self, host: CustomHost) -> None:  # type: ignore[override]
        self.host = host
        self._issue_free()
        if not self.free and self.ongoing == 0:
            host.phase_done()

    def _issue_free(self) -> None:
        todo, self.free = self.free, []
        for i in todo:
            self._issue(i)

    def _issue(self, i: int) -> None:
        p, h = self.p, self.host
        assert h is not None
        self.ongoing += 1
        kind = int(p.kind[i])
        done = lambda i=i: self._done(i)  # noqa: E731
        if kind == OpKind.SEND:
            h.p2p_send(self._real(int(p.peer[i])), int(p.size_bytes[i]), int(p.tag[i]), done)
        elif kind == OpKind.RECV:
            h.p2p_recv(self._real(int(p.peer[i])), int(p.size_bytes[i]), int(p.tag[i]), done)
        elif kind == OpKind.COMPUTE:
            d = int(p.duration_ns[i])
            h.after(d if d > 0 else 1, done)
        else:  # ASTRA-sim never completes other node types here; podsim finishes them at once
            self._done(i)

    def _done(self, i: int) -> None:
        self.ongoing -= 1
        for c in self.children[i]:
            self.pending[c] -= 1
            if self.pending[c] == 0:
                self.free.append(c)
        self.free.sort()
        self._issue_free()
        if not self.free and self.ongoing == 0:
            assert self.host is not None
            self.host.phase_done()

    # the stream drives every phase through these three entry points
    def on_general(self) -> None:
        pass

    def on_packet_received(self) -> None:
        pass
