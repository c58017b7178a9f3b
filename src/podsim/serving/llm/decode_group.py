"""A replica's decoding requests kept as one aggregate, so that a step costs the same however
many of them run (vLLM's semantics unchanged: :mod:`.replica` uses it only where each member
would compute exactly one token a step).

The *group* is the replica's running requests that decode, from the first in admission order
on, while each is idle between steps: every step that takes them gives each one token (no
speculative decoding, PP 1).  So it counts its steps -- ``steps`` scheduled, ``done`` completed
(``steps - 1`` while one is in flight) -- and keeps, per member, numbers fixed when it joins:

* ``gkey = computed - done``: its context (tokens in its KV cache) is ``gkey + done``; the
  group's total context is ``key_sum + n x done``, a running sum;
* ``blocks`` (and ``shared``) as they were when it joined, ``h0`` blocks in all: it holds
  ``max(h0, ceil((gkey + steps) / block_size))`` (each step takes the KV slot of its token);
* ``gd1 = block_size x h0 - gkey``: the first step (by index) whose slot needs a new block; it
  needs one at every ``block_size``-th step after, so the blocks a step ``x`` takes are the members
  counted in ``cnt[x mod block_size]`` once ``pending`` (members whose first such step is still
  ahead, by step) has moved its ``x`` there;
* ``gfin = prompt + output - 2 - gkey``: the step whose completion yields its last token
  (``finish_at``, by step, in admission order).

A member is touched again only when it leaves: it finishes, is preempted, or the group is split
(a step whose token budget takes only the first members).  Its state is then written back
(:meth:`DecodeGroup.settle`).  Members leave from anywhere; the order list drops them lazily.

Shared prefixes by id: a request that computed its prompt without taking its prefix's blocks
(the replica had them) registers its own at the end of any later step if the replica has lost
them meanwhile (:meth:`.replica.Replica._share_prefix`).  The group keeps such members by prefix
id (``cands``) and the ids the replica lacks (``missing``: at a join, or evicted since,
:attr:`.kvcache.KVCache.evicted`), so that a step's end registers them without looking at the
others; :meth:`DecodeGroup.registers` says whether a step's end will (a run of decode steps
does not start then).  Units: tokens, KV blocks, steps; ``last_end`` in ns.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from .kvcache import KVCache
from .sequence import Seq


class DecodeGroup:
    """The decoding requests of one replica, stepping together (see the module docstring).

    Args:
        block_size: the replica's KV block size (tokens).
    """

    __slots__ = (
        "bs",
        "order",
        "n",
        "key_sum",
        "steps",
        "done",
        "act",
        "cnt",
        "pending",
        "finish_at",
        "finish_steps",
        "last_end",
        "cands",
        "missing",
    )

    def __init__(self, block_size: int, prefixes: bool = True) -> None:
        self.bs = block_size
        # members in admission order, and some that finished (``ingroup`` False; a request that
        # leaves otherwise, and may join again, is taken out at once)
        self.order: list[Seq] = []
        self.n = 0  # members
        self.key_sum = 0  # sum of their gkey
        self.steps = 0  # group steps scheduled
        self.done = 0  # group steps completed
        self.act = 0  # steps whose pending members have been counted in cnt
        self.cnt = [0] * block_size  # members that take a block at steps of this residue
        self.pending: dict[int, int] = {}  # first block-taking step -> members, for steps >= act
        self.finish_at: dict[int, list[Seq]] = {}  # step -> members whose last token it yields
        self.finish_steps: list[int] = []  # a heap of finish_at's keys (some stale)
        self.last_end = -1  # when the last completed group step ended (ns)
        # prefix id -> members that would register it when the replica lacks it (admission
        # order); None when prefixes are not shared by id
        self.cands: dict[int, list[Seq]] | None = {} if prefixes else None
        self.missing: set[int] = set()  # ids of cands the replica may lack

    # -- members --------------------------------------------------------------------------------

    def _cand(self, s: Seq) -> bool:
        """Whether ``s`` would register its prefix when the replica lacks it."""
        return (
            self.cands is not None
            and s.req.prefix_id >= 0
            and not s.shared
            and min(s.req.prefix_tokens, s.prompt) >= self.bs
        )

    def join(self, s: Seq, prefixes: dict[int, int] | None = None) -> None:
        """``s`` (decoding, its blocks taken for its context, or for its slot of the step in
        flight when it is in that step) becomes the last member; ``prefixes``: the replica's
        shared prefixes (:attr:`.kvcache.KVCache.prefix_blocks`)."""
        bs = self.bs
        if self.cands is not None and self._cand(s):
            pid = s.req.prefix_id
            self.cands.setdefault(pid, []).append(s)
            if prefixes is None or pid not in prefixes:
                self.missing.add(pid)
        key = s.computed - self.done
        s.gkey = key
        s.gd0 = self.done
        d1 = bs * (s.blocks + s.shared) - key
        s.gd1 = d1
        if d1 < self.act:
            self.cnt[d1 % bs] += 1
        else:
            self.pending[d1] = self.pending.get(d1, 0) + 1
        fin = s.prompt + s.output - 2 - key
        s.gfin = fin
        lst = self.finish_at.get(fin)
        if lst is None:
            self.finish_at[fin] = [s]
            heapq.heappush(self.finish_steps, fin)
        else:
            lst.append(s)
        s.ingroup = True
        self.order.append(s)
        self.n += 1
        self.key_sum += key

    def _drop(self, s: Seq) -> None:
        """Take ``s`` out of the counts (not out of ``finish_at``)."""
        if self.cands is not None and self._cand(s):
            lst = self.cands[s.req.prefix_id]
            lst.remove(s)
            if not lst:
                del self.cands[s.req.prefix_id]
        d1 = s.gd1
        if d1 < self.act:
            self.cnt[d1 % self.bs] -= 1
        else:
            left = self.pending[d1] - 1
            if left:
                self.pending[d1] = left
            else:
                del self.pending[d1]
        s.ingroup = False
        self.n -= 1
        self.key_sum -= s.gkey
        if self.n == 0:
            self.order.clear()
        elif len(self.order) > 2 * self.n + 32:
            self.order = [x for x in self.order if x.ingroup]

    def settle(self, s: Seq) -> None:
        """Write ``s``'s state back (computed, generated, blocks, last token's time); last, as it
        leaves."""
        c = s.gkey + self.done
        s.computed = c
        s.generated = c - s.prompt + 1
        held = s.blocks + s.shared
        need = -(-(s.gkey + self.steps) // self.bs)
        if need > held:
            s.blocks = need - s.shared
        if self.done > s.gd0:
            s.last_ns = self.last_end
        s.busy = False
        s.gkey = s.gd0 = s.gd1 = s.gfin = 0  # (their ints need not outlive the membership)

    def remove(self, s: Seq) -> None:
        """``s`` leaves the group between steps (preempted, or split off: it may join again); its
        state written back."""
        self._drop(s)
        order = self.order
        if order and order[-1] is s:
            order.pop()
        elif s in order:  # not dropped from the order list by _drop's compaction
            order.remove(s)
        self.finish_at[s.gfin].remove(s)
        self.settle(s)

    def last(self) -> Seq:
        """The member admitted last."""
        order = self.order
        while not order[-1].ingroup:
            order.pop()
        return order[-1]

    def members(self) -> list[Seq]:
        """The members in admission order."""
        if len(self.order) != self.n:
            self.order = [x for x in self.order if x.ingroup]
        return self.order

    def split(self, k: int) -> list[Seq]:
        """Keep the first ``k`` members; the others leave (written back), returned in order."""
        members = self.members()
        rest = members[k:]
        del members[k:]
        for s in rest:
            self._drop(s)
            self.finish_at[s.gfin].remove(s)
            self.settle(s)
        return rest

    # -- steps ----------------------------------------------------------------------------------

    def context(self) -> int:
        """The members' contexts in all (tokens) before the step being formed or in flight."""
        return self.key_sum + self.n * self.done

    def contexts(self) -> list[int]:
        """Each member's context (tokens), in order, before the step being formed or in flight."""
        d = self.done
        return [s.gkey + d for s in self.members()]

    def needy(self, x: int) -> int:
        """Members whose slot at step ``x`` (the one being formed: ``x == steps``) takes a block;
        counts the members whose first such step is ``x``."""
        n = self.pending.pop(x, 0)
        if n:
            self.cnt[x % self.bs] += n
        self.act = x + 1
        return self.cnt[x % self.bs]

    def needs_block(self, s: Seq, x: int) -> bool:
        """Whether member ``s``'s slot at step ``x`` takes a block."""
        return x >= s.gd1 and (x - s.gd1) % self.bs == 0

    def blocks_taken(self, a: int, b: int) -> int:
        """The blocks the members' slots take at steps ``a`` to ``b`` (both included; ``a`` not
        before the next step to count, ``a >= act``), in closed form: a member takes one at each
        step from its first (``gd1``) on whose index has the first's residue."""
        if b < a:
            return 0
        bs, cnt = self.bs, self.cnt
        full, rest = divmod(b - a + 1, bs)  # whole periods: every activated member once each
        total = full * sum(cnt) if full else 0
        for x in range(b - rest + 1, b + 1):
            total += cnt[x % bs]
        for d1, c in self.pending.items():
            if d1 <= b:
                total += c * ((b - d1) // bs - (max(a, d1) - 1 - d1) // bs)
        return total

    def run_steps(self, m: int, end: int) -> None:
        """The step in flight and ``m - 1`` more, scheduled one after another, completed (a run
        of steps that finishes no member), the last at ``end`` (ns)."""
        bs, cnt, pending = self.bs, self.cnt, self.pending
        x0 = self.steps
        if pending:
            if len(pending) < m:
                due = [x for x in pending if x < x0 + m - 1]
            else:
                due = [x for x in range(x0, x0 + m - 1) if x in pending]
            for x in due:
                cnt[x % bs] += pending.pop(x)
        self.steps = self.done = self.act = x0 + m - 1
        self.last_end = end

    def next_finish(self) -> int:
        """The first step that yields a member's last token."""
        fs, fa = self.finish_steps, self.finish_at
        while not fa.get(fs[0]):
            fa.pop(heapq.heappop(fs), None)
        return fs[0]

    def registers(self, kv: KVCache, joining: Iterable[Seq] = ()) -> bool:
        """Whether the end of the step being formed registers a prefix the replica lacks: a
        member's (:meth:`register_missing` would) or one of ``joining``'s (decoding requests in
        the step that would join first); changes nothing."""
        cands = self.cands
        if cands is None:
            return False
        have = kv.prefix_blocks
        for ids in (self.missing, kv.evicted or ()):
            for pid in ids:
                if pid in cands and pid not in have:
                    return True
        return any(self._cand(s) and s.req.prefix_id not in have for s in joining)

    def register_missing(self, kv: KVCache) -> None:
        """At the end of a step: for each prefix id the replica lacks, its first member that
        would register it does (its first blocks become the prefix, used by it)."""
        cands, missing = self.cands, self.missing
        assert cands is not None
        if kv.evicted:
            missing.update(pid for pid in kv.evicted if pid in cands)
            kv.evicted.clear()
        for pid in missing:
            lst = cands.get(pid)
            if lst and pid not in kv.prefix_blocks:
                s = lst.pop(0)
                if not lst:
                    del cands[pid]
                n = min(s.req.prefix_tokens, s.prompt) // self.bs
                s.blocks -= n
                s.shared = n
                kv.register(pid, n)
        missing.clear()

    def complete(self, end: int, kv: KVCache) -> list[Seq]:
        """The step in flight completed at ``end`` (ns): members register prefixes the replica
        lacks (:meth:`register_missing`); returns the members it finished, written back and out
        of the group, in admission order."""
        x = self.done
        self.done = x + 1
        self.last_end = end
        if self.missing or kv.evicted:
            self.register_missing(kv)
        out = self.finish_at.pop(x, None)
        if not out:
            return []
        for s in out:
            self._drop(s)
            self.settle(s)
        return out
