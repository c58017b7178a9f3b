"""A replica's paged KV cache (vLLM's PagedAttention blocks), counted in blocks.

The cache is ``num_blocks`` blocks of ``block_size`` tokens (vLLM's default 16).  A request holds
``ceil(tokens / block_size)`` blocks for the tokens whose keys and values it keeps; it grows a
block at a time and frees all of them when it finishes or is preempted.  Capacity either comes
from memory -- ``kv_capacity_bytes // (kv_bytes_per_token x block_size)`` blocks, both per GPU
of the replica (every GPU of a TP x PP replica holds its shard of every token) -- or is given as
a block count (vLLM's ``--num-gpu-blocks-override``) to match an engine's log.

A *watermark* keeps a share of the blocks free when admitting new requests (vLLM V0's block
manager: 1%); running requests may still grow into it.  vLLM V1 has none (the default here).
"""

from __future__ import annotations

import math

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
        raise InputError(f"no room for a KV cache: {kv_capacity_bytes / 2**30:.3g} GiB per GPU left after the "
                         f"weights and activations, one block of {block_size} tokens needs "
                         f"{kv_bytes_per_token * block_size / 2**20:.3g} MiB (more TP or PP, a larger GPU, or "
                         "--kv-blocks N)", where="--kv-blocks")
    return n


class KVCache:
    """Block accounting of one replica: ``free`` blocks of ``num_blocks``.

    Args:
        num_blocks: blocks in the cache (>= 1).
        block_size: tokens per block (>= 1).
        watermark: share of the blocks (0 to 1) that admitting a new request must leave free.
    """

    __slots__ = ("num_blocks", "block_size", "free", "watermark_blocks")

    def __init__(self, num_blocks: int, block_size: int = 16, watermark: float = 0.0) -> None:
        if num_blocks < 1 or block_size < 1:
            raise InputError(f"a KV cache needs at least one block of at least one token, got {num_blocks} blocks "
                             f"of {block_size}", where="--kv-blocks")
        if not 0.0 <= watermark < 1.0:
            raise InputError(f"the KV watermark must be a share from 0 to below 1, got {watermark}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = num_blocks
        self.watermark_blocks = int(watermark * num_blocks)

    @property
    def used(self) -> int:
        """Blocks held by requests."""
        return self.num_blocks - self.free

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)

    def grow(self, held: int, tokens: int) -> int:
        """Take the blocks a request holding ``held`` blocks needs to hold ``tokens`` tokens;
        returns how many it took, or -1 (taking none) when too few are free."""
        need = -(-tokens // self.block_size) - held
        if need <= 0:
            return 0
        if need > self.free:
            return -1
        self.free -= need
        return need

    def admit(self, held: int, tokens: int) -> int:
        """Like :meth:`grow` for a request not yet running: it must also leave the watermark free."""
        need = -(-tokens // self.block_size) - held
        if need <= 0:
            return 0
        if need > self.free - self.watermark_blocks:
            return -1
        self.free -= need
        return need

    def release(self, blocks: int) -> None:
        """Give back ``blocks`` blocks (a request finished or was preempted)."""
        self.free += blocks
