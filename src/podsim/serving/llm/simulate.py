"""The LLM serving simulation: requests arrive, a router sends each to a replica, replicas run
steps (:mod:`.replica`), optionally with prefill and decode on separate pools (P/D).

Discrete events in integer ns, in time order; at one time: arrivals, then transfers' and
other scheduled callbacks, then replicas' completions, then their tries.  Replicas whose events
nobody else sees are advanced lazily: to the present before a router reads them or a request
joins them, and to the end at the end.  A router that reads them finds its replica through an
index (:mod:`.router_index`: only the replicas with events before the present are advanced, the
same choice as a scan of the pool).  Under P/D the prefill replicas' events run in global order
(a heap of their next events, the lowest replica first at one time and priority), since each
finished prompt routes its request to a decode replica at that instant.

**P/D** (``pd=(P, D)``): replicas 0..P-1 prefill, P..P+D-1 decode, each pool with its own
router.  A prefill replica computes the prompt (and samples the first token); its KV cache --
``kv_bytes_per_token x prompt tokens`` on each GPU of the replica, every GPU sending its shard to
the same GPU of the decode replica -- moves to the decode replica chosen at that instant; the
prefill replica frees its blocks when the transfer is done.  The first token reaches the user
with the KV cache: TTFT = the transfer's end - arrival.  The decode replica then queues the
request like any other (its prompt already computed) and decodes the rest.  A one-token output
finishes on its prefill replica.  Transfers: ``transfer_ns(nbytes per GPU, src, dst)`` in
closed form (default :func:`link_transfer` at 50 GB/s and 10 us), or ``transfers(clock)``: an
object whose ``start(nbytes_per_gpu, src, dst, on_done)`` runs on the simulation's clock
(:class:`~.transfer.KVTransfers`: flows on the fabric that contend).

**Prefix caching**: with ``prefix_hit_rate`` h, a prompt's first ``h x prompt`` tokens (whole
blocks, at most prompt - 1) are found cached and not computed (those tokens still take the
request's own blocks: a hit rate names no prefix to share).  Without it, prefixes are shared by
id: when a request of a ``prefix_id`` has computed its prompt, the whole blocks of its
``prefix_tokens`` become the replica's, held once for every request of that id that runs there;
a later request of the id finds them cached (not computed) and takes blocks only for the rest.
A prefix no request uses stays cached until blocks run short, then the least recently used are
evicted (:mod:`.kvcache`).

**Preemption by swap** (``preemption="swap"``): a victim's blocks are copied to host memory
(``swap_space_gib`` per GPU) instead of dropped, and copied back when it is admitted again
(first in line, as a recompute victim); each copy adds ``blocks x block bytes /
swap_bandwidth`` to the step that makes it (vLLM V0 issues them before the step's forward pass),
and nothing is recomputed.  A victim the host space cannot take is preempted by recompute (vLLM
V0 aborts instead).

**Speculative decoding** (``spec_decode=(k, a)``): each decode step verifies 1 + k tokens (timed
as a chunk of 1 + k new tokens) and yields on average ``(1 - a^(k+1)) / (1 - a)`` tokens; the
draft model's own time is the timer's (:class:`~.drafting.DraftedTimer` adds it; none otherwise).
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...errors import InputError, SimulationError
from .footprint import check_footprint
from .kvcache import KVCache, blocks_from_memory
from .metrics import LLMServeResult
from .replica import INF, Replica
from .requests import Request
from .router import DEFAULT_ROUTER, make_router
from .router_index import PoolIndex
from .schedulers import DEFAULT_SCHEDULER, make_scheduler
from .sequence import Seq
from .timing import StepTimer

#: how a preempted request gives up its KV blocks
PREEMPTIONS = ("recompute", "swap")
#: P/D transfers' default link: bytes per ns (50 GB/s) and latency (ns)
DEFAULT_TRANSFER_BYTES_PER_NS = 50.0
DEFAULT_TRANSFER_LATENCY_NS = 10_000
#: the longest speculative draft accepted (vLLM recipes use 1 to 10 draft tokens)
MAX_DRAFT_TOKENS = 64


@dataclass(frozen=True)
class ServeConfig:
    """How the requests are served.

    Attributes:
        replicas: replicas (ignored under ``pd``: P + D).
        scheduler: a name of :data:`.schedulers.SCHEDULERS` (vllm, vllm-v0, sarathi, ...).
        max_num_seqs, max_batched_tokens, chunk_size: the scheduler's limits (None: its defaults).
        router: a name of :data:`.router.ROUTERS` (round-robin, least-outstanding, ...).
        pd: (prefill replicas, decode replicas), or None for mixed replicas.
        block_size: KV block size (tokens).
        kv_blocks: KV blocks per replica, or None for what the timer's memory holds.
        watermark: share of blocks admission keeps free.
        max_context: the model's context (tokens): a longer prompt + output is refused; None: no check.
        prefix_hit_rate: share of each prompt found in the prefix cache (0: use the trace's
            prefix ids).
        spec_decode: (draft length k, acceptance rate a), or None.
        slo_ttft_s, slo_tpot_s: SLOs (s) for the attainment, or None.
        preemption: ``recompute`` (drop a preempted request's KV cache; vLLM V1's only mode) or
            ``swap`` (copy its blocks to host memory and back; vLLM V0's ``preemption_mode="swap"``).
        swap_space_gib: host memory for swapped blocks, GiB per GPU (vLLM's ``--swap-space``, 4);
            a victim that does not fit is preempted by recompute.
        swap_bandwidth_gbps: GPU <-> host copies, GB/s (10^9 B/s) per GPU (25: PCIe 4.0 x16's
            pinned copies; about 50 on PCIe 5.0).
    """

    replicas: int = 1
    scheduler: str = DEFAULT_SCHEDULER
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    chunk_size: int | None = None
    router: str = DEFAULT_ROUTER
    pd: tuple[int, int] | None = None
    block_size: int = 16
    kv_blocks: int | None = None
    watermark: float = 0.0
    max_context: int | None = None
    prefix_hit_rate: float = 0.0
    spec_decode: tuple[int, float] | None = None
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    preemption: str = "recompute"
    swap_space_gib: float = 4.0
    swap_bandwidth_gbps: float = 25.0

    def check(self) -> None:
        """Refuse settings that make no sense.

        Raises:
            InputError: naming the setting.
        """
        if self.pd is None and self.replicas < 1:
            raise InputError(f"expected at least one replica, got {self.replicas}", where="--replicas")
        if self.pd is not None and (len(self.pd) != 2 or min(self.pd) < 1):
            raise InputError(f"P/D needs at least one prefill and one decode replica, got {self.pd}", where="--pd")
        if self.block_size < 1:
            raise InputError(f"the KV block size must be at least 1 token, got {self.block_size}", where="--block-size")
        if not 0.0 <= self.prefix_hit_rate < 1.0:
            raise InputError(
                f"the prefix hit rate must be from 0 to below 1, got {self.prefix_hit_rate}", where="--prefix-hit-rate"
            )
        if self.spec_decode is not None:
            k, a = self.spec_decode
            if not 1 <= k <= MAX_DRAFT_TOKENS or not 0.0 <= a <= 1.0:
                raise InputError(
                    f"speculative decoding needs a draft length from 1 to {MAX_DRAFT_TOKENS} and an acceptance rate "
                    f"from 0 to 1, got {k}:{a}",
                    where="--spec-decode",
                )
        for name, v in (("--slo-ttft", self.slo_ttft_s), ("--slo-tpot", self.slo_tpot_s)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise InputError(f"an SLO must be a finite number of seconds > 0, got {v}", where=name)
        if self.preemption not in PREEMPTIONS:
            raise InputError(
                f"preemption must be {' or '.join(PREEMPTIONS)}, got {self.preemption!r}", where="--preemption"
            )
        if not (math.isfinite(self.swap_space_gib) and self.swap_space_gib >= 0):
            raise InputError(
                f"the swap space must be a finite number of GiB >= 0, got {self.swap_space_gib}", where="--swap-space"
            )
        if not (math.isfinite(self.swap_bandwidth_gbps) and self.swap_bandwidth_gbps > 0):
            raise InputError(
                f"the swap bandwidth must be a finite number of GB/s > 0, got {self.swap_bandwidth_gbps}",
                where="--swap-bandwidth",
            )
        if self.max_context is not None and self.max_context < 2:
            raise InputError(
                f"the model's context must be at least 2 tokens, got {self.max_context}", where="--max-context"
            )

    @property
    def num_replicas(self) -> int:
        return sum(self.pd) if self.pd is not None else self.replicas


def kv_blocks(cfg: ServeConfig, timer: StepTimer) -> int:
    """KV blocks a replica holds: ``cfg.kv_blocks`` when given, else what its memory holds
    after the weights and the largest step's activations.

    Raises:
        InputError: naming ``--kv-blocks``, or ``--max-num-seqs`` when the activations of the
            step ``--max-num-seqs`` / ``--max-batched-tokens`` allow leave no room."""
    if cfg.kv_blocks is not None:
        return cfg.kv_blocks
    room = timer.kv_capacity_bytes
    act = timer.activation_bytes
    if room < timer.kv_bytes_per_token * cfg.block_size <= room + act:  # activations crowd out the cache
        raise InputError(
            f"a step of --max-num-seqs / --max-batched-tokens this large needs {act / 2**30:.3g} GiB of activations "
            f"per GPU, leaving no room for a KV cache: give smaller limits",
            where="--max-num-seqs",
        )
    return blocks_from_memory(room, timer.kv_bytes_per_token, cfg.block_size)


class Transfers(Protocol):
    """Moves a request's KV cache between replicas on the simulation's clock."""

    def start(self, nbytes_per_gpu: int, src: int, dst: int, on_done: Callable[[], None]) -> None: ...


def link_transfer(
    bytes_per_ns: float = DEFAULT_TRANSFER_BYTES_PER_NS, latency_ns: int = DEFAULT_TRANSFER_LATENCY_NS
) -> Callable[[int, int, int], int]:
    """A closed-form transfer time: ``latency + ceil(nbytes / bandwidth)`` ns for the bytes each
    GPU sends (all GPUs of the replica send at once, each on its own link)."""
    if not (bytes_per_ns > 0 and math.isfinite(bytes_per_ns)) or latency_ns < 0:
        raise InputError(
            f"a transfer needs a bandwidth > 0 and a latency >= 0, got {bytes_per_ns * 1e9 / 1e9:g} "
            f"GB/s and {latency_ns} ns",
            where="--pd-bandwidth",
        )

    def transfer_ns(nbytes: int, src: int, dst: int) -> int:
        return latency_ns + math.ceil(nbytes / bytes_per_ns)

    return transfer_ns


class EventLoop:
    """The simulation's event loop as other parts see it: ``now`` (ns) and
    ``schedule(time_ns, callback, arg)`` (the flow network's clock)."""

    def __init__(self) -> None:
        self.now = 0
        self.heap: list[tuple[int, int, Callable[[object], None], object]] = []
        self._seq = 0

    def schedule(self, time_ns: int, callback: Callable[[object], None], arg: object = None) -> None:
        if time_ns < self.now:
            raise SimulationError(f"an event was scheduled at {time_ns} ns, before now ({self.now} ns)")
        self._seq += 1
        heapq.heappush(self.heap, (time_ns, self._seq, callback, arg))


class _ClosedForm:
    def __init__(self, clock: EventLoop, fn: Callable[[int, int, int], int]) -> None:
        self.clock, self.fn = clock, fn

    def start(self, nbytes_per_gpu: int, src: int, dst: int, on_done: Callable[[], None]) -> None:
        self.clock.schedule(self.clock.now + int(self.fn(nbytes_per_gpu, src, dst)), lambda _a: on_done(), None)


def _check_requests(
    requests: Sequence[Request], cfg: ServeConfig, blocks: int, reserve: bool, lookahead: int, watermark_blocks: int
) -> None:
    """Refuse requests longer than the context, or than a replica's KV cache."""
    longest = max(requests, key=lambda r: r.prompt_tokens + r.output_tokens)
    total = longest.prompt_tokens + longest.output_tokens
    if cfg.max_context is not None and total > cfg.max_context:
        raise InputError(
            f"{longest.label}: its prompt ({longest.prompt_tokens} tokens) and output "
            f"({longest.output_tokens}) make {total} tokens, more than the model's context of "
            f"{cfg.max_context} (--max-context N for a model that takes more)",
            where="--workload",
        )
    held = total + lookahead if reserve else total - 1 + lookahead
    need = -(-held // cfg.block_size)
    room = blocks - (watermark_blocks if reserve else 0)
    if need > room:
        raise InputError(
            f"the KV cache is smaller than one request: {longest.label} ({longest.prompt_tokens} "
            f"prompt + {longest.output_tokens} output tokens) needs {need} blocks of {cfg.block_size} "
            f"tokens, a replica holds {room} (more GPUs per replica, a larger GPU, or --kv-blocks N)",
            where="--kv-blocks",
        )


def simulate(
    requests: Sequence[Request],
    timer: StepTimer,
    cfg: ServeConfig = ServeConfig(),
    *,
    transfer_ns: Callable[[int, int, int], int] | None = None,
    transfers: Callable[[EventLoop], Transfers] | None = None,
    record_steps: bool = False,
    fast: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> LLMServeResult:
    """Serve ``requests`` (in arrival order) on replicas timed by ``timer``.

    Args:
        requests: the workload (:mod:`.requests`).
        timer: one replica's step timer (every replica is alike).
        cfg: replicas, scheduler, router, KV cache and options.
        transfer_ns, transfers: P/D's KV transfer (the module docstring); default 50 GB/s, 10 us.
        record_steps: keep every step for the Perfetto trace.
        fast: keep each replica's decoding requests as one aggregate and simulate runs of
            identical decode steps in one go (exact; off to check that).
        progress: called with (requests done, requests) now and then.

    Raises:
        InputError: for bad settings, requests longer than the context or a replica's KV cache,
            more requests and replicas than the machine's memory holds (:mod:`.footprint`).
        SimulationError: when requests can never be served (they wait for KV blocks the
            admission watermark keeps).
    """
    # The event loop allocates millions of short-lived objects but creates no reference cycles
    # that outlive it; the cyclic collector would rescan the growing heap again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _simulate(requests, timer, cfg, transfer_ns, transfers, record_steps, fast, progress)
    finally:
        if gc_was_on:
            gc.enable()


def _simulate(
    requests: Sequence[Request],
    timer: StepTimer,
    cfg: ServeConfig,
    transfer_ns: Callable[[int, int, int], int] | None,
    transfers: Callable[[EventLoop], Transfers] | None,
    record_steps: bool,
    fast: bool,
    progress: Callable[[int, int], None] | None,
) -> LLMServeResult:
    cfg.check()
    if not requests:
        raise InputError("no requests to serve", where="--workload")
    check_footprint(len(requests), cfg.num_replicas, replicas_flag="--pd" if cfg.pd is not None else "--replicas")
    for a, b in zip(requests, requests[1:]):
        if b.arrival_ns < a.arrival_ns:
            raise InputError(
                f"requests must be in arrival order: request {b.id} arrives before request {a.id}", where="--workload"
            )
    blocks = kv_blocks(cfg, timer)
    lookahead, accept = cfg.spec_decode if cfg.spec_decode is not None else (0, 0.0)
    probe = make_scheduler(cfg.scheduler, cfg.max_num_seqs, cfg.max_batched_tokens, cfg.chunk_size)
    kv_probe = KVCache(blocks, cfg.block_size, cfg.watermark)
    _check_requests(requests, cfg, blocks, probe.reserves_output, lookahead, kv_probe.watermark_blocks)

    seqs = [Seq(r) for r in requests]
    n = len(seqs)
    done = [0]
    every = max(1, n // 100)

    def on_finish(s: Seq, t: int) -> None:
        done[0] += 1
        if progress is not None and done[0] % every == 0:
            progress(done[0], n)

    block_bytes = timer.kv_bytes_per_token * cfg.block_size  # one block on one GPU
    swap_blocks = int(cfg.swap_space_gib * 2**30 // block_bytes) if cfg.preemption == "swap" else 0
    swap_ns_per_block = block_bytes / cfg.swap_bandwidth_gbps  # GB/s = bytes per ns
    clock = EventLoop()
    roles = (["prefill"] * cfg.pd[0] + ["decode"] * cfg.pd[1]) if cfg.pd is not None else ["mixed"] * cfg.replicas
    reps: list[Replica] = []
    for i, role in enumerate(roles):
        sched = make_scheduler(cfg.scheduler, cfg.max_num_seqs, cfg.max_batched_tokens, cfg.chunk_size)
        reps.append(
            Replica(
                i,
                role,
                timer,
                KVCache(blocks, cfg.block_size, cfg.watermark),
                sched,
                on_finish=on_finish,
                on_prefilled=None,
                lookahead=lookahead if role != "prefill" else 0,
                accept=accept,
                prefix_hit_rate=cfg.prefix_hit_rate,
                record=record_steps,
                fast=fast,
                swap_blocks=swap_blocks,
                swap_ns_per_block=swap_ns_per_block,
            )
        )
    entry = [r for r in reps if r.role != "decode"]
    decode_pool = [r for r in reps if r.role == "decode"]
    entry_router = make_router(cfg.router)
    decode_router = make_router(cfg.router)
    emitters = [r for r in reps if r.role == "prefill"]
    # routers that read the replicas find them through an index (the same choice as a scan)
    entry_ix = PoolIndex(entry, entry_router) if entry_router.observes else None  # type: ignore[arg-type]
    decode_ix = PoolIndex(decode_pool, decode_router) if decode_router.observes and decode_pool else None  # type: ignore[arg-type]
    # the prefill replicas' next events, (time, priority, place): stale entries are dropped when
    # they come up (an entry is current when it is the replica's next event); every change to a
    # prefill replica pushes its next event
    em_place = {r.index: k for k, r in enumerate(emitters)}
    em_heap: list[tuple[int, int, int]] = []

    def entry_changed(rep: Replica, now: int) -> None:
        """An entry replica changed at ``now`` (ns): renew what the index and the heap hold of it."""
        if entry_ix is not None:
            entry_ix.touch(rep, now)
        k = em_place.get(rep.index)
        if k is not None:
            t, p = rep.next_event()
            if t < INF:
                heapq.heappush(em_heap, (t, p, k))

    if cfg.pd is not None:
        mover: Transfers = (
            transfers(clock) if transfers is not None else _ClosedForm(clock, transfer_ns or link_transfer())
        )
        kv_per_token = float(timer.kv_bytes_per_token)

        def on_prefilled(s: Seq, t: int) -> None:
            if decode_ix is not None:
                d = decode_pool[decode_ix.choose(t)]
            else:
                d = decode_pool[decode_router.choose(decode_pool, t)]
            d.outstanding += 1
            d.pending_tokens += s.prompt + s.output - 1 - s.computed
            need = d.kv.blocks_for(s.prompt + s.generated)
            d.incoming_blocks += need
            if decode_ix is not None:
                decode_ix.touch(d, t)
            src = reps[s.prefill_replica]

            def delivered() -> None:
                now = clock.now
                d.materialize(now)
                src.kv.release(s.prefill_blocks)
                s.prefill_blocks = 0
                src.drop_prefix(s)
                src.wake(now)
                d.incoming_blocks -= need
                s.first_ns = s.last_ns = now
                s.replica = d.index
                s.demand = need
                d.waiting_blocks += need
                d.waiting.append(s)
                d.wake(now)
                if decode_ix is not None:
                    decode_ix.touch(d, now)
                entry_changed(src, now)

            mover.start(int(math.ceil(kv_per_token * s.prompt)), s.prefill_replica, d.index, delivered)

        for r in emitters:
            r.on_prefilled = on_prefilled

    arrivals = [s.req.arrival_ns for s in seqs]
    heap = clock.heap
    i = 0
    while True:
        ta = arrivals[i] if i < n else INF
        th = heap[0][0] if heap else INF
        te, em = INF, None
        while em_heap:
            t, p, k = em_heap[0]
            if emitters[k].next_event() == (t, p):
                te, em = t, emitters[k]
                break
            heapq.heappop(em_heap)
        if ta <= th and ta <= te:
            if ta >= INF:
                break
            clock.now = ta
            s = seqs[i]
            i += 1
            rep = entry[entry_ix.choose(ta) if entry_ix is not None else entry_router.choose(entry, ta)]
            rep.materialize(ta)
            rep.enqueue(s, ta)
            if entry_ix is not None or em_place:
                entry_changed(rep, ta)
        elif th <= te:
            t, _, cb, arg = heapq.heappop(heap)
            clock.now = t
            cb(arg)
        else:
            heapq.heappop(em_heap)  # its entry
            clock.now = te
            em.process_next()  # type: ignore[union-attr]
            entry_changed(em, te)  # type: ignore[arg-type]
    for r in reps:
        r.advance_to(INF)

    stuck = [s for s in seqs if s.finish_ns < 0]
    if stuck:
        s = stuck[0]
        raise SimulationError(
            f"{len(stuck)} request(s) never finished (first: request {s.req.id}, "
            f"{s.prompt} prompt + {s.output} output tokens): they wait for KV blocks that "
            f"admission cannot take ({blocks} blocks a replica, watermark {cfg.watermark:g})"
        )
    text = (
        f"{len(reps)} replica{'s' if len(reps) > 1 else ''}"
        if cfg.pd is None
        else f"{cfg.pd[0]} prefill + {cfg.pd[1]} decode replicas"
    )
    info: dict[str, object] = {
        "scheduler": cfg.scheduler,
        "router": cfg.router,
        "replicas_text": text,
        "kv_blocks": blocks,
        "block_size": cfg.block_size,
        "notes": [],
    }
    return LLMServeResult.collect(seqs, reps, cfg.slo_ttft_s, cfg.slo_tpot_s, info)
