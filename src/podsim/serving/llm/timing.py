"""The interface between LLM step times and the serving simulation.

A *step* is one forward pass of a replica over a batch: each running request contributes a
chunk ``(new_tokens, context)``: ``new_tokens`` computed in this step (a prompt or a chunk of
it; 1 for a decode step) on top of ``context`` tokens already in its KV cache.  A
:class:`StepTimer` says how long a step takes (ns) and what a replica's memory holds.

A timer may also offer ``stage_ns_decodes(decodes, context, chunks)``: ``stage_ns`` of a batch
of ``decodes`` one-token chunks whose contexts sum to ``context`` (tokens), then ``chunks`` --
the same time, bit for bit, without a list of the decodes (the serving simulation keeps its
decoding requests as one aggregate, :mod:`.decode_group`); and ``stage_ns_decode_run(decodes,
context, steps)``: the times of ``steps`` such steps without chunks, each context one token
longer than at the step before (a run of decode steps), as a list.  :func:`timer_method` finds
them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

#: one request's part of a step: (tokens computed now, tokens already in its KV cache)
Chunk = tuple[int, int]


class StepTimer(Protocol):
    """Times the steps of one replica (a TP x PP group of GPUs serving one model copy)."""

    @property
    def pp(self) -> int:
        """Pipeline stages: a batch passes through them in turn; ``stage_ns`` is one stage's time."""

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token takes on one GPU of the replica (every layer it holds)."""

    @property
    def kv_capacity_bytes(self) -> float:
        """KV-cache bytes one GPU of the replica can hold: its memory minus weights, activations
        and reserved memory (the smallest over the replica's stages)."""

    @property
    def activation_bytes(self) -> float:
        """Working activations of the largest step on one GPU (bytes): the part of the memory
        :attr:`kv_capacity_bytes` leaves out besides the weights (0: none counted)."""

    def stage_ns(self, batch: Sequence[Chunk]) -> int:
        """One pipeline stage's time for a step over ``batch`` (ns), host overhead included."""


@dataclass(frozen=True)
class LinearTimer:
    """A step timer of a fixed form, for tests and hand-derived checks: ``base_ns +
    per_token_ns x (new tokens) + per_context_ns x (context tokens read)`` per stage."""

    base_ns: int
    per_token_ns: float
    per_context_ns: float = 0.0
    kv_bytes_per_token: float = 1.0
    kv_capacity_bytes: float = 1e12
    pp: int = 1
    activation_bytes: float = 0.0

    def stage_ns(self, batch: Sequence[Chunk]) -> int:
        new = sum(n for n, _ in batch)
        ctx = sum(c for _, c in batch)
        return int(round(self.base_ns + self.per_token_ns * new + self.per_context_ns * ctx))

    def stage_ns_decodes(self, decodes: int, context: int, chunks: Sequence[Chunk]) -> int:
        """``stage_ns`` of ``decodes`` one-token chunks of ``context`` tokens in all, then ``chunks``."""
        new = decodes + sum(n for n, _ in chunks)
        ctx = context + sum(c for _, c in chunks)
        return int(round(self.base_ns + self.per_token_ns * new + self.per_context_ns * ctx))

    def stage_ns_decode_run(self, decodes: int, context: int, steps: int) -> list[int]:
        """``stage_ns_decodes(decodes, context + decodes x j, ())`` for ``j`` in ``range(steps)``,
        at once (the same operations on numpy arrays: bit for bit; round half to even as round)."""
        ctx = context + decodes * np.arange(steps, dtype=np.int64)
        t = (self.base_ns + self.per_token_ns * decodes) + self.per_context_ns * ctx
        if t.dtype.kind == "f":
            t = np.rint(t)
        return t.astype(np.int64).tolist()


#: ``stage_ns_decodes(decodes, context, chunks)`` (the module docstring)
DecodesTimer = Callable[[int, int, Sequence[Chunk]], int]
#: ``stage_ns_decode_run(decodes, context, steps)`` (the module docstring)
DecodeRunTimer = Callable[[int, int, int], list[int]]


def split_batch(batch: Sequence[Chunk]) -> tuple[int, int, list[Chunk]]:
    """A batch as ``stage_ns_decodes`` takes it: (its one-token chunks, their contexts' sum in
    tokens, the other chunks in order)."""
    decodes = context = 0
    rest = []
    for n, c in batch:
        if n == 1:
            decodes += 1
            context += c
        else:
            rest.append((n, c))
    return decodes, context, rest


def timer_method(timer: object, name: str) -> Callable | None:  # type: ignore[type-arg]
    """``timer``'s method ``name`` (``stage_ns_decodes`` or ``stage_ns_decode_run``), or None when
    it has none or when a subclass overrides ``stage_ns`` or ``parts_ns`` below the class that
    defines it (it would time other steps)."""
    return getattr(timer, name) if _times_alike(type(timer), name) else None


@functools.cache
def _times_alike(cls: type, name: str) -> bool:
    """Whether ``cls`` has ``name`` defined no higher than its ``stage_ns`` and ``parts_ns``."""

    def owner(attr: str) -> type | None:
        return next((c for c in cls.__mro__ if attr in vars(c)), None)

    home = owner(name)
    if home is None:
        return False
    for attr in ("stage_ns", "parts_ns"):
        c = owner(attr)
        if c is not None and c is not home and issubclass(c, home):
            return False
    return True
