"""Replica schedulers: which requests, and how many of their tokens, each step computes.

Every scheduler sees its replica's running requests (admission order), its FCFS ``waiting`` queue
and its KV cache (:mod:`.kvcache`), and returns a batch: requests and their token counts, their
KV blocks already taken.  Requests of a batch still in a pipeline (``busy``) are skipped.  The
running requests are the replica's decode group, first (decoding requests kept as one aggregate,
:mod:`.decode_group`; a pass over the running requests takes it whole,
:meth:`~.replica.Replica.take_group`, and its members count in ``num_running``), then its
``running`` list; the batch returned lists the others, the group's part is ``step_group``.

* ``vllm`` -- vLLM V1's default scheduler (``vllm/v1/core/sched/scheduler.py``, FCFS): chunked
  prefill always on; a budget of ``max_batched_tokens`` tokens a step.  Running requests first,
  in order, each its remaining tokens (a decode: 1; a prompt being prefilled: as much as the
  budget leaves); when the KV cache cannot grow for one, the newest running request is preempted
  by recompute (freed, back to the front of the waiting queue) until it can, or until it is the
  one preempted.  Then, if nothing was preempted this step, waiting requests in order while fewer
  than ``max_num_seqs`` run and budget is left, each a chunk of its prompt, stopping at the first
  that the cache cannot take.  Defaults as ``vllm serve`` sets them (``vllm/engine/arg_utils.py``,
  ``EngineArgs.get_batch_defaults``, the OpenAI server context): 8192 tokens and 1024 sequences
  on GPUs of 70 GiB or more other than the A100, else 2048 and 256 (:func:`vllm_defaults`).
* ``vllm-v0`` -- vLLM V0's default scheduler without chunked prefill, *prefill-first*
  (``vllm/core/scheduler.py``, ``Scheduler._schedule_default`` and ``_schedule_prefills``, FCFS):
  if waiting requests can be admitted, the step runs only prefills -- whole prompts, in order,
  while they fit a budget of ``max_batched_tokens`` tokens and fewer than ``max_num_seqs``
  requests (running ones counted) run, stopping at the first that does not fit the budget or the
  KV cache -- and the running decodes stall for that step; otherwise the step decodes every
  running request, preempting the newest by recompute when the KV cache cannot grow (as
  ``vllm``).  vLLM V0 refuses a budget below the model's context without chunked prefill, so
  every prompt fits; here a prompt longer than the budget is admitted alone, in a step of its
  own.  Defaults (:func:`vllm_v0_defaults`): V0's ``max(max_model_len, 2048)`` tokens -- 8192
  here, a Llama 3 context, as the scheduler is not told the model's (pass the budget for
  another) -- and 256 sequences.  V0's block manager kept a 1% watermark at admission
  (``ServeConfig(watermark=0.01)``; the default here is none).
* ``sarathi`` -- Sarathi-Serve: a ``chunk_size`` token budget (default 512), decodes first (they
  never stall behind a prompt), then prompts being prefilled, then new requests' chunks;
  preemption as vLLM's, for decodes.
* ``orca`` -- iteration-level batching: running decodes, then whole prompts of waiting requests
  (no chunking) while fewer than ``max_num_seqs`` run and the cache takes them; an optional
  ``max_batched_tokens`` caps the step's tokens (a prompt longer than it still runs, alone).
* ``static`` -- FasterTransformer's static batching: when nothing runs, a batch of up to
  ``max_num_seqs`` waiting requests is formed, each reserving KV blocks for its whole prompt and
  output; it prefills together, then decodes until its last request is done (finished ones drop
  out of the step); only then is the next batch formed.
* ``lightllm`` -- LightLLM's admission by predicted KV use: a request is admitted only if the
  cache can hold every admitted request's full prompt and output (so nothing is ever
  preempted); prefill steps (whole prompts) and decode steps are separate, a prefill step when
  nothing runs or after ``max_waiting_iters`` decode steps (Vidur's LightLLM, default 10).

Speculative decoding (``lookahead`` k on the replica): a decode computes 1 + k tokens (the last
sampled and k drafts to verify) and needs KV slots for them.

Each scheduler is a class registered in :data:`SCHEDULERS` (with the :func:`scheduler`
decorator) that declares its ``name``, ``aliases``, a ``help`` line for ``--help``, its limits'
defaults (:meth:`_Base.default_limits`, :meth:`_Base.from_limits`) and which limit a serving
search varies (``chunk_flag``).  Adding one is a class here with its test and a line in
docs/serving-llm.md.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Protocol

from ...errors import InputError
from ...registry import Registry
from .sequence import Seq

if TYPE_CHECKING:
    from ...hardware.gpu import GpuSpec
    from .replica import Replica

#: the replica schedulers, by name (each a :class:`_Base` subclass)
SCHEDULERS: Registry[type["_Base"]] = Registry("scheduler", flag="--scheduler")
#: the scheduler a run uses when it names none
DEFAULT_SCHEDULER = "vllm"
#: "no limit" for a number of steps
UNLIMITED = 1 << 62


def vllm_defaults(gpu_memory_gib: float | None, gpu_name: str = "") -> tuple[int, int]:
    """``vllm serve``'s default (max_num_batched_tokens, max_num_seqs) for a GPU: (8192, 1024)
    with 70 GiB or more of memory unless it is an A100, else (2048, 256)."""
    if gpu_memory_gib is not None and gpu_memory_gib >= 70 and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256


#: vLLM V0's default token budget without chunked prefill for a model of 8192 tokens of context
V0_DEFAULT_BATCHED_TOKENS = 8192


def vllm_v0_defaults(max_model_len: int | None = None) -> tuple[int, int]:
    """vLLM V0's default (max_num_batched_tokens, max_num_seqs) without chunked prefill
    (``vllm/config.py``, ``SchedulerConfig``): ``max(max_model_len, 2048)`` tokens and 256
    sequences; ``max_model_len`` in tokens (None: 8192, a Llama 3 context)."""
    if max_model_len is None:
        return V0_DEFAULT_BATCHED_TOKENS, 256
    return max(max_model_len, 2048), 256


class Scheduler(Protocol):
    """What a replica needs of a scheduler."""

    name: str
    max_num_seqs: int

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        """The next step's requests and their new token counts (KV blocks taken, ``busy`` set)."""

    def steady_steps(self, rep: "Replica") -> int:
        """After a step that took every running request for one decode token, how many more
        steps are sure to do the same while nothing arrives, finishes, runs out of KV blocks or
        registers a shared prefix."""

    def skip(self, steps: int) -> None:
        """``steps`` such steps were taken without calling :meth:`schedule`."""

    @property
    def reserves_output(self) -> bool:
        """Whether admission reserves KV blocks for the whole prompt and output."""


def _positive(value: int | None, what: str, flag: str) -> None:
    if value is not None and value < 1:
        raise InputError(f"{what} must be at least 1, got {value}", where=flag)


def _grow(rep: "Replica", s: Seq, n: int) -> tuple[bool, bool]:
    """Take KV blocks for ``s``'s next ``n`` tokens, preempting the newest idle running request
    while they do not fit.  Returns (``s`` still runs, something was preempted)."""
    kv = rep.kv
    preempted = False
    while True:
        got = kv.grow(s.blocks + s.shared, s.computed + n)
        if got >= 0:
            s.blocks += got
            return True, preempted
        victim = rep.newest_idle()
        rep.preempt(victim)
        preempted = True
        if victim is s:
            return False, True


def _decode_tokens(rep: "Replica", s: Seq) -> int:
    """A decode's tokens: 1, or 1 + k with speculative decoding."""
    return 1 + rep.lookahead if rep.lookahead and s.generated else 1


class _Base:
    #: the registered name, its other spellings, and a note for ``--help`` ("" for none)
    name: ClassVar[str] = "base"
    aliases: ClassVar[tuple[str, ...]] = ()
    help: ClassVar[str] = ""
    #: the flag that sets the step's token budget a serving search varies (``podsim search
    #: --chunk-values``), or None where the search varies none
    chunk_flag: ClassVar[str | None] = None

    @classmethod
    def from_limits(cls, max_num_seqs: int | None, max_batched_tokens: int | None, chunk_size: int | None) -> "_Base":
        """A fresh scheduler from the run's limits (``--max-num-seqs``, ``--max-batched-tokens``,
        ``--chunk-size``); None takes the scheduler's default (256 sequences)."""
        return cls(256 if max_num_seqs is None else max_num_seqs, max_batched_tokens)  # type: ignore[call-arg]

    @classmethod
    def default_limits(cls, gpu: "GpuSpec", max_context: int | None) -> tuple[int, int] | None:
        """The (max_batched_tokens, max_num_seqs) a deployment fills in where the run gives none,
        for ``gpu`` and a model context of ``max_context`` tokens; None: leave them unset."""
        return None

    def __init__(self, max_num_seqs: int, max_batched_tokens: int | None) -> None:
        _positive(max_num_seqs, "max_num_seqs", "--max-num-seqs")
        _positive(max_batched_tokens, "max_batched_tokens", "--max-batched-tokens")
        self.max_num_seqs = max_num_seqs
        self.max_batched_tokens = max_batched_tokens

    @property
    def reserves_output(self) -> bool:
        return False

    def skip(self, steps: int) -> None:
        pass

    def _steady_within(self, rep: "Replica", budget: int | None) -> int:
        """:meth:`Scheduler.steady_steps` of a scheduler that admits waiting requests into a
        step of at most ``budget`` tokens (None: no cap): none if the decodes alone exceed the
        budget, else unlimited while no request waits or every sequence slot is taken."""
        running = rep.num_running
        if budget is not None and running > budget:
            return 0
        return UNLIMITED if not rep.waiting or running >= self.max_num_seqs else 0

    def _take_running(
        self, rep: "Replica", seqs: list[Seq], ns: list[int], budget: float, decodes_only: bool = False
    ) -> tuple[float, bool]:
        """Schedule the running requests in order (only those decoding, with ``decodes_only``):
        each its decode tokens or the rest of its prompt, at most ``budget`` tokens in all,
        growing its KV blocks and preempting when they run out (:func:`_grow`); stops at the
        first that cannot grow.  The replica's decode group, first in order, is taken as a whole
        (:meth:`~.replica.Replica.take_group`).  Returns (budget left, whether anything was
        preempted)."""
        budget, preempted, stopped = rep.take_group(budget)
        if stopped:
            return budget, True
        running = rep.running
        i = 0
        while i < len(running) and budget > 0:
            s = running[i]
            if s.busy or (decodes_only and not s.decoding):
                i += 1
                continue
            rest = s.prompt + s.generated - s.computed
            n = _decode_tokens(rep, s) if rest == 1 else rest
            n = int(min(n, budget))
            ok, pre = _grow(rep, s, n)
            preempted |= pre
            if not ok:
                break
            s.busy = True
            seqs.append(s)
            ns.append(n)
            budget -= n
            i += 1
        return budget, preempted

    def _fill(self, rep: "Replica", seqs: list[Seq], ns: list[int], budget: float) -> None:
        """Admit waiting requests, a chunk each, while budget and sequence slots are left."""
        waiting = rep.waiting
        while waiting and budget > 0 and rep.num_running < self.max_num_seqs:
            s = waiting[0]
            n = rep.admit(s, int(min(budget, 1 << 62)))
            if not n:
                break
            seqs.append(s)
            ns.append(n)
            budget -= n

    def _fill_whole(
        self, rep: "Replica", seqs: list[Seq], ns: list[int], used: int, budget: float, reserve: bool
    ) -> None:
        """Admit waiting requests with their whole remaining prompts while they fit ``budget``
        (the first always fits) and sequence slots are left."""
        waiting = rep.waiting
        first = True
        while waiting and rep.num_running < self.max_num_seqs:
            s = waiting[0]
            rest = s.prompt + s.generated - (s.computed or rep.cached_prefix(s))
            if used + rest > budget and not (first and not seqs and not rep.step_group):
                break
            n = rep.admit(s, rest, reserve_tokens=s.prompt + s.output + rep.lookahead if reserve else 0)
            if not n:
                break
            first = False
            seqs.append(s)
            ns.append(n)
            used += n


def scheduler(cls: type[_Base]) -> type[_Base]:
    """Register ``cls`` in :data:`SCHEDULERS` under its ``name`` and ``aliases``."""
    SCHEDULERS.register(cls.name, cls, aliases=cls.aliases)
    return cls


@scheduler
class VllmScheduler(_Base):
    """vLLM V1 (see the module docstring)."""

    name = "vllm"
    help = "V1: chunked prefill, token budget, recompute preemption"
    chunk_flag = "max-batched-tokens"

    @classmethod
    def default_limits(cls, gpu: "GpuSpec", max_context: int | None) -> tuple[int, int] | None:
        return vllm_defaults(gpu.memory_gib, gpu.name)

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int | None = 2048) -> None:
        super().__init__(max_num_seqs, max_batched_tokens if max_batched_tokens is not None else 2048)

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        budget, preempted = self._take_running(rep, seqs, ns, self.max_batched_tokens)  # type: ignore[arg-type]
        if not preempted:
            self._fill(rep, seqs, ns, budget)
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        return self._steady_within(rep, self.max_batched_tokens)


@scheduler
class VllmV0Scheduler(_Base):
    """vLLM V0's prefill-first scheduler (see the module docstring)."""

    name = "vllm-v0"
    help = "V0's prefill-first steps, whole prompts"

    @classmethod
    def default_limits(cls, gpu: "GpuSpec", max_context: int | None) -> tuple[int, int] | None:
        return vllm_v0_defaults(max_context)

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int | None = V0_DEFAULT_BATCHED_TOKENS) -> None:
        super().__init__(
            max_num_seqs, max_batched_tokens if max_batched_tokens is not None else V0_DEFAULT_BATCHED_TOKENS
        )

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        if rep.waiting:  # prefills first: whole prompts; the decodes stall
            self._fill_whole(rep, seqs, ns, 0, self.max_batched_tokens, reserve=False)  # type: ignore[arg-type]
            if seqs:
                return seqs, ns
        self._take_running(rep, seqs, ns, math.inf)  # else every running request decodes
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        # the steps stay decodes while the first waiting request cannot be admitted: sequence
        # slots stay full until a request finishes, and free KV blocks only shrink while the
        # decodes grow (the prefixes cached stay: a run registers none).  Asked, not assumed: a
        # request preempted in this step, first in line now, may need fewer blocks than it freed
        # (a cached prefix it computed itself before)
        if not rep.waiting or rep.num_running >= self.max_num_seqs or not rep.admissible(rep.waiting[0]):
            return UNLIMITED
        return 0


@scheduler
class SarathiScheduler(_Base):
    """Sarathi-Serve (see the module docstring)."""

    name = "sarathi"
    chunk_flag = "chunk-size"

    @classmethod
    def from_limits(cls, max_num_seqs: int | None, max_batched_tokens: int | None, chunk_size: int | None) -> "_Base":
        """Its budget is ``chunk_size``, else ``max_batched_tokens`` (default 512)."""
        return cls(
            256 if max_num_seqs is None else max_num_seqs, chunk_size if chunk_size is not None else max_batched_tokens
        )

    def __init__(self, max_num_seqs: int = 256, chunk_size: int | None = 512) -> None:
        super().__init__(max_num_seqs, chunk_size if chunk_size is not None else 512)

    @property
    def chunk_size(self) -> int:
        return self.max_batched_tokens  # type: ignore[return-value]

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        # decodes first: they never stall
        budget, preempted = self._take_running(rep, seqs, ns, self.chunk_size, decodes_only=True)
        for s in rep.running:  # then prompts being prefilled
            if budget <= 0:
                break
            if s.busy or s.decoding:
                continue
            n = min(s.prompt + s.generated - s.computed, budget)
            got = rep.kv.grow(s.blocks + s.shared, s.computed + n)
            if got < 0:
                break
            s.blocks += got
            s.busy = True
            seqs.append(s)
            ns.append(n)
            budget -= n
        if not preempted:
            self._fill(rep, seqs, ns, budget)
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        return self._steady_within(rep, self.chunk_size)


@scheduler
class OrcaScheduler(_Base):
    """Orca (see the module docstring)."""

    name = "orca"

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int | None = None) -> None:
        super().__init__(max_num_seqs, max_batched_tokens)

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        _, preempted = self._take_running(rep, seqs, ns, math.inf)  # whole prompts, no budget
        used = sum(ns) + rep.step_group
        if not preempted:
            budget = math.inf if self.max_batched_tokens is None else self.max_batched_tokens
            self._fill_whole(rep, seqs, ns, used, budget, reserve=False)
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        return self._steady_within(rep, self.max_batched_tokens)


@scheduler
class StaticScheduler(_Base):
    """FasterTransformer's static batching (see the module docstring)."""

    name = "static"
    help = "FasterTransformer"

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int | None = None) -> None:
        super().__init__(max_num_seqs, max_batched_tokens)

    @property
    def reserves_output(self) -> bool:
        return True

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        if rep.num_running:  # the batch runs to completion
            rep.take_group(math.inf)  # its blocks are reserved: never preempts
            for s in rep.running:
                if s.busy:
                    continue
                rest = s.prompt + s.generated - s.computed
                n = _decode_tokens(rep, s) if rest == 1 else rest
                _grow(rep, s, n)  # its blocks are reserved: never fails
                s.busy = True
                seqs.append(s)
                ns.append(n)
            return seqs, ns
        budget = math.inf if self.max_batched_tokens is None else self.max_batched_tokens
        self._fill_whole(rep, seqs, ns, 0, budget, reserve=True)
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        return UNLIMITED


@scheduler
class LightLLMScheduler(_Base):
    """LightLLM (see the module docstring)."""

    name = "lightllm"

    def __init__(
        self, max_num_seqs: int = 256, max_batched_tokens: int | None = None, max_waiting_iters: int = 10
    ) -> None:
        super().__init__(max_num_seqs, max_batched_tokens)
        _positive(max_waiting_iters, "max_waiting_iters", "--max-waiting-iters")
        self.max_waiting_iters = max_waiting_iters
        self.decode_iters = 0

    @property
    def reserves_output(self) -> bool:
        return True

    def schedule(self, rep: "Replica") -> tuple[list[Seq], list[int]]:
        seqs: list[Seq] = []
        ns: list[int] = []
        if rep.waiting and (not rep.num_running or self.decode_iters >= self.max_waiting_iters):
            budget = math.inf if self.max_batched_tokens is None else self.max_batched_tokens
            self._fill_whole(rep, seqs, ns, 0, budget, reserve=True)
            if seqs:
                self.decode_iters = 0
                return seqs, ns
        rep.take_group(math.inf)  # reserved: never preempts
        for s in rep.running:
            if s.busy:
                continue
            rest = s.prompt + s.generated - s.computed
            n = _decode_tokens(rep, s) if rest == 1 else rest
            _grow(rep, s, n)  # reserved: never fails
            s.busy = True
            seqs.append(s)
            ns.append(n)
        if seqs or rep.step_group:
            self.decode_iters += 1
        return seqs, ns

    def steady_steps(self, rep: "Replica") -> int:
        if not rep.waiting:
            return UNLIMITED
        return max(0, self.max_waiting_iters - self.decode_iters)

    def skip(self, steps: int) -> None:
        self.decode_iters += steps


def make_scheduler(
    name: str, max_num_seqs: int | None = None, max_batched_tokens: int | None = None, chunk_size: int | None = None
) -> Scheduler:
    """A fresh scheduler by name, in any case (one per replica: some keep state).  Limits left
    ``None`` take the scheduler's defaults (vllm: 2048 tokens, 256 sequences; vllm-v0: 8192
    tokens, 256 sequences; sarathi: chunks of 512; the others: 256 sequences, no token cap).

    Raises:
        InputError: for an unknown name (with the closest one), or a limit below 1.
    """
    return scheduler_class(name).from_limits(max_num_seqs, max_batched_tokens, chunk_size)  # type: ignore[return-value]


def scheduler_class(name: str) -> type[_Base]:
    """The scheduler class named ``name`` (or an alias of it), in any case.

    Raises:
        InputError: for an unknown name, with the closest one.
    """
    return SCHEDULERS.get(name.strip().lower())


def describe(default: str = DEFAULT_SCHEDULER) -> str:
    """The schedulers for ``--help``: ``vllm (V1: ...; default), vllm-v0 (...), sarathi, ...``."""
    parts = []
    for name, cls in SCHEDULERS.items():
        notes = [
            *SCHEDULERS.aliases(name),
            *([cls.help] if cls.help else []),
            *(["default"] if name == default else []),
        ]
        parts.append(f"{name} ({'; '.join(notes)})" if notes else name)
    return ", ".join(parts)
