"""A request's state while it is served (vLLM's semantics, counted in tokens).

A sequence holds ``prompt + generated`` tokens; ``computed`` of them have their keys and values in
its replica's KV cache.  A step computes ``n`` of the rest; when that reaches every token, the
model samples the next one (``generated`` + 1).  So a prompt of P tokens yields the first output
token when its last chunk is computed, and each later decode step computes 1 token (the one
sampled last) and samples another.  A finished request has ``generated == output`` and
``computed == prompt + output - 1``.  Preemption by recompute drops the KV cache
(``computed = 0``) and keeps the tokens generated so far: they are recomputed with the prompt;
preemption by swap keeps ``computed`` (its blocks wait in host memory, ``swapped``).
"""

from __future__ import annotations

from .requests import Request


class Seq:
    """The mutable state of one request (times in ns, -1 when not yet).

    Attributes:
        req: the request.
        prompt, output: its prompt and output lengths (tokens).
        computed: tokens whose KV is cached on its replica.
        generated: output tokens produced so far.
        blocks: KV blocks it holds on its current replica.
        busy: in a step that has not finished (a pipeline holds it; no scheduler may touch it).
        first_ns, last_ns: when its first and latest output tokens were produced.
        finish_ns: when it finished (its last token), -1 before.
        preemptions: how many times it was preempted.
        replica: the replica that produced its latest token (-1 before any).
        demand: the blocks its whole context needs, counted in its replica's waiting demand while
            it waits.
        spec_steps: speculative decode steps it has taken (for the expected tokens' running sum).
        prefill_replica, prefill_blocks: P/D: the prefill replica and the blocks it keeps there
            until the KV transfer is done.
        swapped: blocks of its KV cache in host memory (preempted by swap), 0 otherwise.
        shared: blocks of a shared prefix it uses on its replica (held by the replica's prefix
            cache, not in ``blocks``), 0 otherwise.
        ingroup: it is a member of its replica's decode group (:mod:`.decode_group`): then
            ``computed``, ``generated``, ``blocks`` and ``last_ns`` are as when it joined, and
            ``gkey``, ``gd0``, ``gd1``, ``gfin`` (the group's numbers of it) give the rest.
    """

    __slots__ = (
        "req",
        "prompt",
        "output",
        "computed",
        "generated",
        "blocks",
        "busy",
        "first_ns",
        "last_ns",
        "finish_ns",
        "preemptions",
        "replica",
        "demand",
        "spec_steps",
        "prefill_replica",
        "prefill_blocks",
        "swapped",
        "shared",
        "ingroup",
        "gkey",
        "gd0",
        "gd1",
        "gfin",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.prompt = req.prompt_tokens
        self.output = req.output_tokens
        self.computed = 0
        self.generated = 0
        self.blocks = 0
        self.busy = False
        self.first_ns = -1
        self.last_ns = -1
        self.finish_ns = -1
        self.preemptions = 0
        self.replica = -1
        self.demand = 0
        self.spec_steps = 0
        self.prefill_replica = -1
        self.prefill_blocks = 0
        self.swapped = 0
        self.shared = 0
        self.ingroup = False
        self.gkey = self.gd0 = self.gd1 = self.gfin = 0

    @property
    def decoding(self) -> bool:
        """Whether its next step is a decode: one token (the last sampled) left to compute."""
        return self.generated > 0 and self.computed == self.prompt + self.generated - 1

    def __repr__(self) -> str:
        return (
            f"Seq({self.req.id}, prompt={self.prompt}, output={self.output}, computed={self.computed}, "
            f"generated={self.generated}, blocks={self.blocks})"
        )
