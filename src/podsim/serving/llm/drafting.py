"""Speculative decoding's draft model on the target's GPUs: its time and its memory.

With ``spec_decode=(k, a)`` a decode step verifies ``1 + k`` tokens on the target (a chunk of
``1 + k`` new tokens, :mod:`.simulate`); the ``k`` draft tokens come from a small model run
before it on the same GPUs (vLLM's draft-model speculation, the draft at the target's TP).
:class:`DraftedTimer` wraps the target's step timer so that every step also pays the draft's
passes:

* the draft computes each prompt chunk of the step as the target does (one pass over the
  chunks), and proposes ``k`` tokens for each decoding request: ``k`` passes of one token each
  (the first together with the prompt chunks);
* its weights are taken from the KV-cache room of each GPU, and its own KV cache holds every
  token too: a token's KV bytes are the target's plus the draft's.

A step's decoding requests are its chunks of exactly ``1 + k`` tokens (a prompt chunk of that
size, rare, is costed as a decode).  Pipeline parallelism is refused (vLLM's speculative decoding
does not take it).  Units: ns, bytes per GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import InputError
from .steps import LLMStepTimer
from .timing import Chunk, StepTimer


@dataclass(frozen=True)
class DraftedTimer:
    """``target``'s steps with ``draft``'s passes for a draft length of ``k`` tokens."""

    target: StepTimer
    draft: LLMStepTimer
    k: int

    def __post_init__(self) -> None:
        if self.k < 1:
            raise InputError(f"a draft model needs a draft length >= 1, got {self.k}", where="--spec-decode")
        if int(self.target.pp) != 1:
            raise InputError(
                "speculative decoding with a draft model runs without pipeline parallelism: give --pp 1",
                where="--draft-model",
            )

    @property
    def pp(self) -> int:
        return 1

    @property
    def kv_bytes_per_token(self) -> float:
        """The target's and the draft's KV bytes of one token on one GPU."""
        return self.target.kv_bytes_per_token + self.draft.kv_bytes_per_token

    @property
    def kv_capacity_bytes(self) -> float:
        """The target's KV room on one GPU less the draft's weights there."""
        return self.target.kv_capacity_bytes - self.draft.weights_bytes_per_gpu

    @property
    def activation_bytes(self) -> float:
        """The target's step activations: what :attr:`kv_capacity_bytes` leaves out besides the
        two models' weights (the draft's own, smaller and at another moment, are not counted)."""
        return self.target.activation_bytes

    def draft_ns(self, batch: Sequence[Chunk]) -> int:
        """The draft's passes in a step over ``batch`` (ns): the prompt chunks and every
        decoding request's first proposal in one pass, then ``k - 1`` passes of one token each
        for the decoding requests."""
        verify = self.k + 1
        decodes = [(1, c) for n, c in batch if n == verify]
        first = [(n, c) for n, c in batch if n != verify] + decodes
        ns = self.draft.stage_ns(first) if first else 0
        if decodes:
            ns += sum(self.draft.stage_ns([(1, c + j) for _, c in decodes]) for j in range(1, self.k))
        return ns

    def stage_ns(self, batch: Sequence[Chunk]) -> int:
        """The target's step over ``batch`` and the draft's passes before it (ns)."""
        return self.target.stage_ns(batch) + self.draft_ns(batch)
