"""One serving replica (a TP x PP group of GPUs holding one model copy) as a discrete-event
process in integer ns.

A replica runs steps back to back while it has work: at each *try* its scheduler forms a batch
(:mod:`.schedulers`), the step timer times one pipeline stage of it, and the step *completes*
later.  With PP stages a batch passes stage 0, 1, ... in turn, each taking the stage time and
waiting for the previous batch to leave that stage; a new batch may enter stage 0 as soon as
stage 0 is free, with at most PP batches in flight (Vidur's pipeline model); requests in flight
are not rescheduled until their batch leaves the last stage.  With PP = 1 a step takes its
stage time and the next starts when it ends.

At a step's completion each request's computed tokens advance; a request that has computed all
its tokens produces one (:mod:`.sequence`): its first at the end of the step that completes its
prompt, one per decode step after that (with speculative decoding of draft length k and
acceptance rate a, the expected ``(1 - a^(k+1)) / (1 - a)`` a step, rounded down on the running
sum so that tokens stay whole).  A finished request frees its KV blocks.

Events at one time: a completion before a try.  The simulation (:mod:`.simulate`) advances a
replica to a time before it looks at it (routers) or gives it work.

Speed (PP 1, no speculative decoding; ``fast``): the running requests that decode, from the
first admitted on, are one aggregate (:mod:`.decode_group`): a step gives each of them a token,
takes the KV blocks its slots need, preempts (the newest first, as one by one) when they run
short and finishes those done, in time independent of how many there are; the step is timed from
their number and total context (a timer's ``stage_ns_decodes``, :mod:`.timing`).  The others
(prompts being computed, requests admitted after one) are scheduled one by one, after the group,
and join it when they decode and every request before them is in it.  And a run of decode steps
that take every running request, while nothing arrives, finishes, runs out of KV blocks, or
registers a shared prefix (one lost to an eviction, registered again at the end of the first
step: the next step may then admit a request that uses it), is simulated in one go: each step is
still timed (a timer's optional ``decode_steps_ns(contexts, steps)`` may time them together), only
the bookkeeping is done once.  Both are exact: ``fast``
off simulates every request one by one, with the same results.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from itertools import accumulate
from typing import TYPE_CHECKING

from .decode_group import DecodeGroup
from .kvcache import KVCache
from .sequence import Seq
from .timing import StepTimer, timer_method

if TYPE_CHECKING:
    from .schedulers import Scheduler

INF = 1 << 62
#: a pending run with this many steps timed is timed to its end when advanced ahead
RUN_AHEAD = 4
#: replica roles: both phases, or one side of prefill/decode disaggregation
ROLES = ("mixed", "prefill", "decode")


class StepRecord:
    """One step of a replica, for the Perfetto trace: start and end (ns) of each pipeline stage,
    the requests and their token counts, and how many of them were decodes."""

    __slots__ = ("stages", "ids", "tokens", "decodes")

    def __init__(self, stages: list[tuple[int, int]], ids: list[int], tokens: list[int], decodes: int) -> None:
        self.stages = stages
        self.ids = ids
        self.tokens = tokens
        self.decodes = decodes

    @property
    def label(self) -> str:
        """``prefill 2 / decode 14``: the step's composition."""
        p = len(self.ids) - self.decodes
        parts = ([f"prefill {p}"] if p else []) + ([f"decode {self.decodes}"] if self.decodes else [])
        return " / ".join(parts)


class Replica:
    """A replica's queues, KV cache and steps.

    Args:
        index: its number (prefill replicas first under P/D).
        role: ``mixed``, ``prefill`` (hands each request off when its prompt is done) or
            ``decode``.
        timer: its step timer.
        kv: its KV cache.
        scheduler: its scheduler (one per replica).
        on_finish: called with (request state, time ns) when a request produces its last token.
        on_prefilled: P/D: called with (request state, time ns) when a prefill replica has
            computed a prompt.
        lookahead: speculative decoding's draft length k (0: off).
        accept: speculative decoding's acceptance rate a (0 to 1).
        prefix_hit_rate: share of each prompt found in the prefix cache (0 to 1), or 0.
        record: keep every step (:class:`StepRecord`) for the trace.
        fast: keep the decoding requests as one aggregate and simulate runs of identical decode
            steps in one go (exact; off only to check that).
    """

    def __init__(
        self,
        index: int,
        role: str,
        timer: StepTimer,
        kv: KVCache,
        scheduler: "Scheduler",
        *,
        on_finish: Callable[[Seq, int], None],
        on_prefilled: Callable[[Seq, int], None] | None = None,
        lookahead: int = 0,
        accept: float = 0.0,
        prefix_hit_rate: float = 0.0,
        record: bool = False,
        fast: bool = True,
        swap_blocks: int = 0,
        swap_ns_per_block: float = 0.0,
    ) -> None:
        self.index = index
        self.role = role
        self.timer = timer
        self.pp = max(1, int(timer.pp))
        self.kv = kv
        self.scheduler = scheduler
        self.on_finish = on_finish
        self.on_prefilled = on_prefilled
        self.lookahead = lookahead
        self.expected_tokens = (
            (lookahead + 1.0 if accept >= 1.0 else (1.0 - accept ** (lookahead + 1)) / (1.0 - accept))
            if lookahead
            else 1.0
        )
        self.prefix_hit_rate = prefix_hit_rate
        self.waiting: deque[Seq] = deque()
        # the running requests outside the decode group (all of them without one), admission order
        self.running: list[Seq] = []
        # steps in flight: (end ns, requests, their tokens, decode group members in the step)
        self.inflight: deque[tuple[int, list[Seq], list[int], int]] = deque()
        self.stage_free = [0] * self.pp
        self.s0_free = 0
        self.try_at = -1
        # what routers read
        self.outstanding = 0  # requests routed here and not yet done here
        self.pending_tokens = 0  # tokens still to compute for them here
        self.waiting_blocks = 0  # blocks the waiting requests' contexts need
        self.incoming_blocks = 0  # P/D: blocks of requests on their way here
        # preemption by swap: host blocks free, the copy time of each block, copies due in the next step
        self.swap_free = swap_blocks
        self.swap_ns_per_block = swap_ns_per_block
        self.swap_ns = 0.0
        # statistics
        self.preemptions = 0
        self.swaps = 0
        self.steps = 0
        self.busy_ns = 0
        self.kv_samples: list[tuple[int, int]] = [(0, 0)]
        self.record = record
        self.records: list[StepRecord] = []
        self.run: _Run | None = None  # a pending run of identical decode steps
        self.fast = fast and self.pp == 1 and not lookahead and role != "prefill"
        # the decoding requests admitted first, as one (running before every request in running)
        self.group: DecodeGroup | None = DecodeGroup(kv.block_size, not prefix_hit_rate) if self.fast else None
        if self.group is not None and not prefix_hit_rate:
            kv.evicted = []
        self.step_group = 0  # members of the group in the step being formed
        self.last_stage = 1  # the last step's stage time (ns), a run's first guess of its steps
        self._decode_steps = getattr(timer, "decode_steps_ns", None)
        self._decodes_ns = timer_method(timer, "stage_ns_decodes")
        self._decode_run_ns = timer_method(timer, "stage_ns_decode_run")

    # -- what the scheduler uses -----------------------------------------------------------------

    @property
    def num_running(self) -> int:
        """Requests running here (the decode group's and the others)."""
        g = self.group
        return len(self.running) + g.n if g is not None else len(self.running)

    def newest_idle(self) -> Seq:
        """The running request admitted last that is not in a step (the preemption victim).  Only
        asked for while a request of ``running`` grows: the decode group, before it, is in the
        step then."""
        for s in reversed(self.running):
            if not s.busy:
                return s
        raise AssertionError("no idle running request to preempt")

    def preempt(self, s: Seq) -> None:
        """Preempt ``s`` (of ``running``): free its blocks and put it first in line; by swap (its
        blocks copied to host memory, the copy timed in the next step) when host blocks are free
        for it, else by recompute (its KV forgotten)."""
        self.running.remove(s)
        self._preempt_out(s)

    def _preempt_out(self, s: Seq) -> None:
        """:meth:`preempt` of a request already out of the running ones."""
        self.kv.release(s.blocks)
        held = s.blocks + s.shared  # a shared prefix is copied out with the rest
        self.drop_prefix(s)
        if 0 < held <= self.swap_free:
            self.swap_free -= held
            self.swap_ns += held * self.swap_ns_per_block
            s.swapped = held
            self.swaps += 1
        else:
            self.pending_tokens += s.computed
            s.computed = 0
        s.blocks = 0
        s.preemptions += 1
        self.preemptions += 1
        s.demand = self.kv.blocks_for(s.prompt + s.generated)
        self.waiting_blocks += s.demand
        self.waiting.appendleft(s)

    def cached_prefix(self, s: Seq) -> int:
        """Prompt tokens of ``s`` found in this replica's prefix cache: whole blocks, at most the
        prompt less one token (the last is always computed, as vLLM does)."""
        bs = self.kv.block_size
        pid = s.req.prefix_id
        if self.prefix_hit_rate:
            hit = int(self.prefix_hit_rate * s.prompt)
        elif pid >= 0 and self.kv.has_prefix(pid):
            hit = min(s.req.prefix_tokens, self.kv.prefix_blocks[pid] * bs)
        else:
            return 0
        return min(hit, s.prompt + s.generated - 1) // bs * bs

    def drop_prefix(self, s: Seq) -> None:
        """``s`` stops using its shared prefix (it finished, left or was preempted)."""
        if s.shared:
            self.kv.unref(s.req.prefix_id)
            s.shared = 0

    def _share_prefix(self, s: Seq) -> None:
        """``s`` computed its whole prompt: the whole blocks of its prefix become the replica's
        shared prefix, unless the replica has it already (or hit rates, not ids, are modelled)."""
        pid = s.req.prefix_id
        if pid < 0 or s.shared or self.prefix_hit_rate or self.kv.has_prefix(pid):
            return
        n = min(s.req.prefix_tokens, s.prompt) // self.kv.block_size
        if 0 < n <= s.blocks:
            s.blocks -= n
            s.shared = n
            self.kv.register(pid, n)

    def admit(self, s: Seq, n_max: int, reserve_tokens: int = 0) -> int:
        """Admit the first waiting request ``s`` with a chunk of at most ``n_max`` tokens, taking
        KV blocks for its context and the chunk (or ``reserve_tokens`` tokens if more) and
        leaving the watermark free.  Returns the chunk's tokens, or 0 (nothing changed) when the
        cache cannot take it."""
        c0 = s.computed or self.cached_prefix(s)
        n = min(s.prompt + s.generated - c0, n_max)
        shared = c0 // self.kv.block_size if c0 > s.computed and not self.prefix_hit_rate else 0
        if shared:  # hold the prefix before anything is evicted
            self.kv.ref(s.req.prefix_id)
        got = self.kv.admit(s.blocks + shared, max(c0 + n, reserve_tokens))
        if got < 0:
            if shared:
                self.kv.unref(s.req.prefix_id)
            return 0
        s.shared = shared
        self.waiting.popleft()
        self.waiting_blocks -= s.demand
        s.blocks += got
        if s.swapped:  # its blocks come back from host memory
            self.swap_free += s.swapped
            self.swap_ns += s.swapped * self.swap_ns_per_block
            s.swapped = 0
        if c0 != s.computed:
            self.pending_tokens -= c0 - s.computed
            s.computed = c0
        s.busy = True
        self.running.append(s)
        return n

    def admissible(self, s: Seq) -> bool:
        """Whether :meth:`admit` would take the first waiting request ``s`` now with the rest of
        its prompt and no reservation beyond it (its KV blocks, with a cached prefix shared,
        leave the watermark free); changes nothing."""
        kv = self.kv
        c0 = s.computed or self.cached_prefix(s)
        shared = c0 // kv.block_size if c0 > s.computed and not self.prefix_hit_rate else 0
        need = kv.blocks_for(s.prompt + s.generated) - s.blocks - shared
        if need <= 0:
            return True
        room = kv.free + kv.cached_blocks
        if shared and not kv.prefix_refs[s.req.prefix_id]:  # using it makes it unevictable
            room -= kv.prefix_blocks[s.req.prefix_id]
        return need + kv.watermark_blocks <= room

    def take_group(self, budget: float) -> tuple[float, bool, bool]:
        """The decode group's part of the step being formed, as taking its members one by one in
        admission order would be (the scheduler's first pass over the running requests): each a
        token while ``budget`` (tokens) lasts -- the members beyond it leave the group, to be
        scheduled one by one --, their new KV blocks taken; when blocks run short, the newest
        running requests are preempted (those after the group first, then its last members) until
        they fit, or until the member that cannot grow is itself the newest.

        Returns (budget left, whether any request was preempted, whether the pass stops there:
        a member could not grow).  Sets :attr:`step_group`."""
        g = self.group
        if g is None or not g.n:
            return budget, False, False
        if budget < g.n:  # the first members take the budget; the others go one by one
            k = int(budget) if budget > 0 and budget == int(budget) else 0
            self.running[:0] = g.split(k)
            if not g.n:
                return budget, False, False
        x = g.steps
        need = g.needy(x)
        kv = self.kv
        preempted = stopped = False
        if need:
            if need <= kv.free + kv.cached_blocks:
                kv.take(need)
            else:
                taken = 0
                while True:
                    avail = kv.free + kv.cached_blocks
                    if avail:
                        take = min(avail, need - taken)
                        kv.take(take)
                        taken += take
                        if taken == need:
                            break
                    preempted = True
                    if self.running:  # admitted after every member, all idle
                        self._preempt_out(self.running.pop())
                        continue
                    v = g.last()
                    v_needy = g.needs_block(v, x)
                    g.remove(v)
                    self._preempt_out(v)
                    if v_needy:
                        need -= 1
                        if need == taken:  # it was the member that could not grow: the pass stops
                            stopped = True
                            break
        if g.n:
            g.steps = x + 1
            self.step_group = g.n
            budget -= g.n
        return budget, preempted, stopped

    def _join_ready(self) -> None:
        """Running requests that decode and come right after the decode group join it."""
        run = self.running
        if not run or not run[0].decoding:
            return
        g = self.group
        assert g is not None
        k = 0
        while k < len(run) and run[k].decoding:
            g.join(run[k], self.kv.prefix_blocks)
            k += 1
        del run[:k]

    # -- work arriving ---------------------------------------------------------------------------

    def work_of(self, s: Seq) -> int:
        """Tokens ``s`` still has to compute here."""
        end = s.prompt if self.role == "prefill" else s.prompt + s.output - 1
        return end - s.computed

    def enqueue(self, s: Seq, now: int) -> None:
        """``s`` joins the waiting queue at ``now`` (the replica is advanced to ``now``)."""
        s.demand = self.kv.blocks_for(s.prompt + s.generated)
        self.waiting_blocks += s.demand
        self.outstanding += 1
        self.pending_tokens += self.work_of(s)
        self.waiting.append(s)
        self.wake(now)

    def wake(self, now: int) -> None:
        """Make sure a try is due at ``now`` or when stage 0 frees, if a batch may enter."""
        if self.try_at < 0 and len(self.inflight) < self.pp:
            self.try_at = max(now, self.s0_free)

    # -- events ----------------------------------------------------------------------------------

    def next_event(self) -> tuple[int, int]:
        """(time ns, priority) of the next event: 2 for a completion, 3 for a try; INF if none
        (replicas whose events run in global order have no decode runs)."""
        c = self.inflight[0][0] if self.inflight else INF
        a = self.try_at if self.try_at >= 0 else INF
        return (c, 2) if c <= a else (a, 3)

    def due(self) -> int:
        """The time (ns) up to which :meth:`advance_to` has nothing to do: ``advance_to(t)`` for
        ``t`` at or before it changes nothing.  The next completion or try; with a pending decode
        run, the end of its last step timed (beyond it the run is timed further, or ends)."""
        run = self.run
        if run is not None:
            return run.ends[-1] if run.ends else run.start
        c = self.inflight[0][0] if self.inflight else INF
        a = self.try_at if self.try_at >= 0 else INF
        return c if c < a else a

    def advance_to(self, t: int) -> None:
        """Process every event before ``t`` (ns).  A run of identical decode steps that goes on
        past ``t`` is left pending: what routers read of this replica (outstanding requests, and
        through :meth:`pending_at` and :meth:`free_at` its tokens and blocks) is right at ``t``;
        :meth:`materialize` brings the rest up to ``t``."""
        inflight = self.inflight
        while True:
            run = self.run
            if run is not None:
                run.extend(t)
                if run.ends[-1] >= t:
                    return
                self._finish_run()
            c = inflight[0][0] if inflight else INF
            a = self.try_at if self.try_at >= 0 else INF
            if c <= a:
                if c >= t:
                    return
                self._complete()
            else:
                if a >= t:
                    return
                self._try(a)

    def advance_ahead(self, t: int) -> None:
        """:meth:`advance_to` ``t``, timing a decode run left pending ahead of need (which changes
        nothing but :meth:`due`): to twice its span so far while it has fewer than
        :data:`RUN_AHEAD` steps timed (a run cut short by an arrival wastes little), all its steps
        after that.  A replica advanced at each arrival while it runs (:mod:`.router_index`) then
        times its run in a few chunks, not a step or two at a time."""
        run = self.run
        if run is not None and run.ends and run.ends[-1] >= t:
            return  # nothing to do
        self.advance_to(t)
        run = self.run
        if run is not None:
            run.extend(INF if len(run.ends) >= RUN_AHEAD else 2 * t - run.start)

    def materialize(self, t: int) -> None:
        """Advance to ``t`` and end a pending decode run there: its steps done before ``t`` are
        applied and the one in progress becomes an ordinary step in flight (before a request joins
        this replica or anything else reads its queues)."""
        self.advance_to(t)
        run = self.run
        if run is None:
            return
        self.run = None
        m = bisect_left(run.ends, t)  # steps done before t; step m + 1 is in progress
        g = self.group
        assert g is not None
        if m:
            self._apply_run(run, m)
            self.kv.free -= g.needy(g.steps)  # step m + 1's KV slots (the run's bound leaves room)
            g.steps += 1
            self.scheduler.skip(1)
        start = run.ends[m - 1] if m else run.start
        end = run.ends[m]
        self.steps += 1
        self.busy_ns += end - start
        self.s0_free = end
        self.try_at = -1
        self.inflight.append((end, [], [], g.n))
        self._sample_kv(start)
        if self.record:
            ids = [s.req.id for s in g.members()]
            self.records.append(StepRecord([(start, end)], ids, [1] * len(ids), len(ids)))

    def pending_at(self, t: int) -> int:
        """Tokens still to compute here at ``t`` (after :meth:`advance_to` ``t``)."""
        run = self.run
        if run is None:
            return self.pending_tokens
        return self.pending_tokens - run.n * bisect_left(run.ends, t)

    def pending_bound(self, t: int, floor: int) -> tuple[int, int]:
        """A lower bound of :meth:`pending_at` from ``t`` (after :meth:`advance_to` ``t``) on, and
        the time (ns) up to which it holds.  With a pending run, the tokens left after as many of
        its steps as keep the bound above ``floor`` (at least the step in progress at ``t``, at
        most the steps timed), until the last of them ends; without one, the tokens left, until
        INF (what changes them is another event)."""
        run = self.run
        if run is None:
            return self.pending_tokens, INF
        ends = run.ends
        n = run.n
        j = bisect_left(ends, t)  # steps done before t
        now = self.pending_tokens - n * j
        if now > floor:
            j += (now - floor - 1) // n  # each step takes n tokens off
        j = min(j, len(ends) - 1)  # up to ends[j], at most j steps are done
        return self.pending_tokens - n * j, ends[j]

    def free_at(self, t: int) -> int:
        """Free KV blocks at ``t`` (after :meth:`advance_to` ``t``)."""
        run = self.run
        if run is None:
            return self.kv.available
        return self.kv.available - run.extra(bisect_left(run.ends, t) + 1)

    def process_next(self) -> None:
        """Process the next event alone (replicas whose events others must see in time order)."""
        c, prio = self.next_event()
        if c >= INF:
            return
        if prio == 2:
            self._complete()
        else:
            self._try(c)

    def _sample_kv(self, t: int) -> None:
        used = self.kv.used
        if used != self.kv_samples[-1][1]:
            if self.kv_samples[-1][0] == t:
                self.kv_samples[-1] = (t, used)
            else:
                self.kv_samples.append((t, used))

    def _try(self, now: int) -> None:
        self.try_at = -1
        if len(self.inflight) >= self.pp:
            return
        g = self.group
        if g is not None:
            self.step_group = 0
            if self.running:
                self._join_ready()
        seqs, ns = self.scheduler.schedule(self)
        gn = self.step_group if g is not None else 0
        if not seqs and not gn:
            self._sample_kv(now)
            return
        if self.fast and not self.swap_ns and self._start_run(now, seqs, ns):
            return
        stage = self._stage_ns(seqs, ns, gn)
        self.last_stage = stage
        if self.swap_ns:  # the swaps this step's scheduling made, before its pass
            stage += int(round(self.swap_ns))
            self.swap_ns = 0.0
        self.steps += 1
        self.busy_ns += stage
        if self.pp == 1:
            end = now + stage
            stages = [(now, end)]
        else:
            sf = self.stage_free
            t = now + stage
            sf[0] = t
            stages = [(now, t)]
            for k in range(1, self.pp):
                st = t if t > sf[k] else sf[k]
                t = st + stage
                sf[k] = t
                stages.append((st, t))
            end = t
        self.s0_free = now + stage
        self.inflight.append((end, seqs, ns, gn))
        if len(self.inflight) < self.pp:
            self.try_at = self.s0_free
        self._sample_kv(now)
        if self.record:
            dec = gn + sum(1 for s in seqs if s.decoding)
            ids = [s.req.id for s in g.members()] if gn else []  # type: ignore[union-attr]
            self.records.append(StepRecord(stages, ids + [s.req.id for s in seqs], [1] * gn + list(ns), dec))

    def _stage_ns(self, seqs: list[Seq], ns: list[int], gn: int) -> int:
        """One stage's time of the step formed: the decode group's ``gn`` members (one token each),
        then ``seqs`` with ``ns`` tokens each."""
        chunks = list(zip(ns, [s.computed for s in seqs]))
        if not gn:
            return self.timer.stage_ns(chunks)
        g = self.group
        assert g is not None
        if self._decodes_ns is not None:
            return self._decodes_ns(gn, g.context(), chunks)
        return self.timer.stage_ns([(1, c) for c in g.contexts()] + chunks)

    def _complete(self) -> None:
        end, seqs, ns, gn = self.inflight.popleft()
        prefill_role = self.role == "prefill"
        lookahead = self.lookahead
        finished = self.group.complete(end, self.kv) if gn else ()  # type: ignore[union-attr]
        done: list[Seq] = []
        advanced = gn
        for s, n in zip(seqs, ns):
            s.busy = False
            c = s.computed
            total = s.prompt + s.generated
            if lookahead and s.generated and c == total - 1:
                s.spec_steps += 1
                e = self.expected_tokens
                g = int(s.spec_steps * e + 1e-9) - int((s.spec_steps - 1) * e + 1e-9)
                g = min(g, s.output - s.generated)
                s.computed = c + g
                s.generated += g
                advanced += g
            else:
                c += n
                s.computed = c
                advanced += n
                if c != total:
                    continue
                s.generated += 1
                self._share_prefix(s)
            if not prefill_role:
                if s.first_ns < 0:
                    s.first_ns = end
                s.last_ns = end
            if s.generated >= s.output or prefill_role:
                done.append(s)
        self.pending_tokens -= advanced
        for s in finished:  # the group's come first in the step
            self.outstanding -= 1
            self._finish(s, end)
        for s in done:
            self.running.remove(s)
            self.outstanding -= 1
            if prefill_role and s.generated < s.output:  # P/D: the prompt is done, the KV moves on
                s.prefill_replica = self.index
                s.prefill_blocks = s.blocks
                s.blocks = 0
                self.on_prefilled(s, end)  # type: ignore[misc]
            else:
                self._finish(s, end)
        self.wake(end)

    def _finish(self, s: Seq, end: int) -> None:
        self.kv.release(s.blocks)
        s.blocks = 0
        self.drop_prefix(s)
        if s.first_ns < 0:
            s.first_ns = end
        s.last_ns = end
        s.finish_ns = end
        s.replica = self.index
        self.on_finish(s, end)

    # -- runs of identical decode steps -----------------------------------------------------------

    def _start_run(self, now: int, seqs: list[Seq], ns: list[int]) -> bool:
        """If this step (every running request, one decode token each) will repeat, start a run
        of such steps from ``now`` and return True; else False (the step runs the ordinary way).
        The requests outside the decode group then join it."""
        g = self.group
        assert g is not None
        if len(seqs) != len(self.running) or self.step_group != g.n:
            return False
        for s, n in zip(seqs, ns):
            if n != 1 or not s.decoding:
                return False
        x = g.steps - 1 if self.step_group else g.steps  # the step being formed
        # steps 1..m_cap repeat: none finishes a request, the scheduler takes them all alike, and
        # their KV slots fit the free blocks (step 1's are taken already)
        left = min((s.output - s.generated for s in seqs), default=INF)
        if g.n:
            left = min(left, g.next_finish() - x + 1)
        m_cap = min(left - 1, 1 + self.scheduler.steady_steps(self))
        if m_cap < 2:
            return False
        bs = self.kv.block_size
        need2 = sum(1 for s in seqs if -(-(s.computed + 2) // bs) > s.blocks + s.shared)
        if g.n:
            need2 += g.blocks_taken(x + 1, x + 1)
        if need2 > self.kv.free:
            return False
        if g.registers(self.kv, seqs):  # a prefix registered at step 1's end may change what
            return False  # the next try admits: that step runs the ordinary way
        if not self.step_group:  # the group was empty: the step becomes its first
            g.steps = x + 1
            g.act = max(g.act, x + 1)
        for s in self.running:  # in the step already: their slots for it are taken
            g.join(s, self.kv.prefix_blocks)
        self.running.clear()
        self.step_group = g.n
        self.run = _Run(self, now, m_cap)
        return True

    def _apply_run(self, run: "_Run", m: int) -> None:
        """Book the first ``m`` steps of ``run`` as done."""
        if m == 0:
            return
        end = run.ends[m - 1]
        g = self.group
        assert g is not None
        self.kv.free -= run.extra(m)
        g.run_steps(m, end)
        self.pending_tokens -= m * run.n
        self.scheduler.skip(m - 1)
        self.steps += m
        self.busy_ns += end - run.start
        self._sample_kv(run.ends[m - 2] if m > 1 else run.start)
        if self.record:
            ids = [s.req.id for s in g.members()]
            ones = [1] * len(ids)
            t = run.start
            for e in run.ends[:m]:
                self.records.append(StepRecord([(t, e)], ids, ones, len(ids)))
                t = e

    def _finish_run(self) -> None:
        """Every step of the pending run ended: book them; the next try is at the last one's end."""
        run = self.run
        assert run is not None
        self.run = None
        self._apply_run(run, run.m_cap)
        end = run.ends[-1]
        self.s0_free = end
        self.try_at = end


class _Run:
    """A run of decode steps over the decode group (its ``n`` members, contexts ``ctx0`` in all
    before the first step), each step one token each, from ``start`` (ns): step j (1-based, index
    ``x + j - 1`` in the group) computes contexts ``ctx0 + n x (j - 1)`` in all; ``ends`` holds
    the steps timed so far; ``m_cap`` steps at most, those whose KV slots fit the blocks free at
    the start."""

    __slots__ = ("rep", "start", "x", "n", "ctx0", "m_cap", "ends", "ctx")

    def __init__(self, rep: Replica, start: int, m_cap: int) -> None:
        g = rep.group
        assert g is not None
        self.rep = rep
        self.start = start
        self.x = g.steps - 1
        self.n = g.n
        self.ctx0 = g.context()
        self.ends: list[int] = []
        self.m_cap = m_cap
        free = rep.kv.free
        # the most steps whose slots fit (extra(2) does; a member takes a block every bs steps)
        if self.n * -(-(m_cap - 1) // g.bs) > free and self.extra(m_cap) > free:
            lo, hi = 2, m_cap
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.extra(mid) <= free:
                    lo = mid
                else:
                    hi = mid
            self.m_cap = lo
        # each member's context before step 1, for timers that need the list
        self.ctx = g.contexts() if rep._decode_run_ns is None or rep._decode_steps is not None else []

    def extra(self, j: int) -> int:
        """Blocks taken beyond those held at the start once step ``j``'s slots are."""
        g = self.rep.group
        assert g is not None
        return g.blocks_taken(self.x + 1, self.x + j - 1)

    def extend(self, t: int) -> None:
        """Time steps until one ends at or after ``t`` or all ``m_cap`` are timed."""
        ends = self.ends
        if len(ends) >= self.m_cap or (ends and ends[-1] >= t):
            return
        end = ends[-1] if ends else self.start
        rep = self.rep
        hook = rep._decode_steps
        run_ns = rep._decode_run_ns
        chunk = 16
        while len(ends) < self.m_cap and end < t:
            base = len(ends)
            left = self.m_cap - base
            k = min(chunk, left)
            n, ctx = self.n, self.ctx0 + self.n * base
            if hook is not None:
                times = hook([c + base for c in self.ctx], k)
            elif run_ns is not None:
                # as many steps as reach t at the mean step so far (the step before the run's at
                # first), and a few more
                span, steps = (end - self.start, base) if base else (rep.last_stage, 1)
                k = left if t >= INF else min(left, 2 + (t - end) * steps // max(span, 1))
                if k <= 4 and rep._decodes_ns is not None:
                    times = [rep._decodes_ns(n, ctx + n * j, ()) for j in range(k)]
                else:
                    times = run_ns(n, ctx, k)
            else:
                stage_ns = rep.timer.stage_ns
                times = [stage_ns([(1, c + j) for c in self.ctx]) for j in range(base, base + k)]
            it = accumulate(times, initial=end)
            next(it)
            ends.extend(it)
            end = ends[-1]
            chunk *= 4
