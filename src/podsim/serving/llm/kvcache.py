"""A replica's paged KV cache (vLLM's PagedAttention blocks), counted in blocks.

The cache is ``num_blocks`` blocks of ``block_size`` tokens (vLLM's default 16).  A request holds
``ceil(tokens / block_size)`` blocks for the tokens whose keys and values it keeps; it grows a
block at a time and frees all of them when it finishes or is preempted.  Capacity either comes
from memory -- ``kv_capacity_bytes // (kv_bytes_per_token x block_size)`` blocks, both per GPU
of the replica (every GPU of a TP x PP replica holds its shard of every token) -- or is given as
a block count (vLLM's ``--num-gpu-blocks-override``) to match an engine's log.

A *watermark* keeps a share of the blocks free when admitting new requests (vLLM V0's block
manager: 1%); running requests may still grow into it.  vLLM V1 has none (the default here).

**Shared prefixes** (vLLM's automatic prefix caching, by prefix id): the whole blocks of a
prompt prefix that requests share are held once, with a count of the requests using them
(:meth:`KVCache.register`, :meth:`KVCache.ref`, :meth:`KVCache.unref`).  A prefix no request
uses stays cached, its blocks neither free nor used, until blocks are needed: then the least
recently released prefixes are evicted, whole, before an allocation fails.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from ...errors import InputError


def blocks_from_memory(kv_capacity_bytes: float, kv_bytes_per_token: float, block_size: int) -> int:
    """Blocks that fit ``kv_capacity_bytes`` (per GPU) at ``kv_bytes_per_token`` (per GPU).

    Raises:
        InputError: when not a single block fits (the weights leave no room for a KV cache).
    """
    if not (kv_bytes_per_token > 0 and math.isfinite(kv_bytes_per_token)):
        raise InputError(f"the KV bytes per token must be a finite number > 0, got {kv_bytes_per_token}")
    n = int(max(kv_capacity_bytes, 0.0) // (kv_bytes_per_token * block_size))
    if n < 1:
        raise InputError(
            f"no room for a KV cache: {kv_capacity_bytes / 2**30:.3g} GiB per GPU left after the "
            f"weights and activations, one block of {block_size} tokens needs "
            f"{kv_bytes_per_token * block_size / 2**20:.3g} MiB (more TP or PP, a larger GPU, or "
            "--kv-blocks N)",
            where="--kv-blocks",
        )
    return n


class KVCache:
    """Block accounting of one replica: ``free`` blocks of ``num_blocks``.

    Args:
        num_blocks: blocks in the cache (>= 1).
        block_size: tokens per block (>= 1).
        watermark: share of the blocks (0 to 1) that admitting a new request must leave free.
    """

    __slots__ = (
        "num_blocks",
        "block_size",
        "free",
        "watermark_blocks",
        "prefix_blocks",
        "prefix_refs",
        "cached",
        "cached_blocks",
        "evicted",
    )

    def __init__(self, num_blocks: int, block_size: int = 16, watermark: float = 0.0) -> None:
        if num_blocks < 1 or block_size < 1:
            raise InputError(
                f"a KV cache needs at least one block of at least one token, got {num_blocks} blocks of {block_size}",
                where="--kv-blocks",
            )
        if not 0.0 <= watermark < 1.0:
            raise InputError(f"the KV watermark must be a share from 0 to below 1, got {watermark}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = num_blocks
        self.watermark_blocks = int(watermark * num_blocks)
        self.prefix_blocks: dict[int, int] = {}  # prefix id -> its blocks (held once)
        self.prefix_refs: dict[int, int] = {}  # prefix id -> requests using it
        self.cached: OrderedDict[int, None] = OrderedDict()  # unused prefixes, least recent first
        self.cached_blocks = 0  # their blocks: evictable
        self.evicted: list[int] | None = None  # prefix ids evicted, kept when a list (a decode group reads them)

    @property
    def used(self) -> int:
        """Blocks held by requests (their own and the prefixes they use); unused cached
        prefixes are not counted."""
        return self.num_blocks - self.free - self.cached_blocks

    @property
    def available(self) -> int:
        """Blocks an allocation may take: the free ones and the unused cached prefixes'."""
        return self.free + self.cached_blocks

    def _make_room(self, need: int) -> bool:
        """Evict unused cached prefixes, least recent first, until ``need`` blocks are free;
        False (evicting nothing) when even all of them would not do."""
        if need <= self.free:
            return True
        if need > self.free + self.cached_blocks:
            return False
        while self.free < need:
            pid, _ = self.cached.popitem(last=False)
            if self.evicted is not None:
                self.evicted.append(pid)
            n = self.prefix_blocks.pop(pid)
            del self.prefix_refs[pid]
            self.cached_blocks -= n
            self.free += n
        return True

    # -- shared prefixes ---------------------------------------------------------------------------

    def has_prefix(self, pid: int) -> bool:
        """Whether prefix ``pid``'s blocks are here (used or cached)."""
        return pid in self.prefix_blocks

    def register(self, pid: int, blocks: int) -> None:
        """A request's first ``blocks`` blocks become prefix ``pid``'s, used by that request
        (they stay taken: only their owner changes)."""
        self.prefix_blocks[pid] = blocks
        self.prefix_refs[pid] = 1

    def ref(self, pid: int) -> None:
        """One more request uses prefix ``pid`` (no longer evictable)."""
        if self.prefix_refs[pid] == 0:
            del self.cached[pid]
            self.cached_blocks -= self.prefix_blocks[pid]
        self.prefix_refs[pid] += 1

    def unref(self, pid: int) -> None:
        """One request less uses prefix ``pid``; with none left it stays cached, evictable."""
        self.prefix_refs[pid] -= 1
        if self.prefix_refs[pid] == 0:
            self.cached[pid] = None
            self.cached_blocks += self.prefix_blocks[pid]

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)

    def grow(self, held: int, tokens: int) -> int:
        """Take the blocks a request holding ``held`` blocks needs to hold ``tokens`` tokens;
        returns how many it took, or -1 (taking none) when too few are free."""
        need = -(-tokens // self.block_size) - held
        if need <= 0:
            return 0
        if not self._make_room(need):
            return -1
        self.free -= need
        return need

    def admit(self, held: int, tokens: int) -> int:
        """Like :meth:`grow` for a request not yet running: it must also leave the watermark free."""
        need = -(-tokens // self.block_size) - held
        if need <= 0:
            return 0
        if not self._make_room(need + self.watermark_blocks):
            return -1
        self.free -= need
        return need

    def take(self, blocks: int) -> None:
        """Take ``blocks`` blocks that the caller knows are free or cached (:attr:`available`):
        as many one-block :meth:`grow` calls would, evicting the least recent unused prefixes."""
        self._make_room(blocks)
        self.free -= blocks

    def release(self, blocks: int) -> None:
        """Give back ``blocks`` blocks (a request finished or was preempted)."""
        self.free += blocks
