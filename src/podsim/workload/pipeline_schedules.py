"""Pipeline schedules: the order of forward and backward passes on each pipeline rank (shared
by the generators that build pipelined workloads: llm/, parallelize/).

Each entry is ``(is_forward, micro_batch, chunk)``; ``chunk`` is the virtual stage (0 unless
interleaved).  With ``p`` ranks, ``m`` micro-batches and ``v`` chunks per rank:

* **GPipe**: every forward, then every backward.
* **1F1B** (PipeDream-flush): rank ``s`` runs ``min(p - s - 1, m)`` warm-up forwards, then
  alternates one forward and one backward, then drains the backwards; at most ``p - s``
  micro-batches are in flight.
* **Interleaved 1F1B** (Narayanan et al. 2021): micro-batches go through the ``v`` chunks in
  groups of ``p``; warm-up is ``2 (p - s - 1) + (v - 1) p`` forwards.  The bubble shrinks to
  ``(p - 1) / (v m)``.
"""

from __future__ import annotations

Entry = tuple[bool, int, int]


def gpipe(m: int) -> list[Entry]:
    return [(True, i, 0) for i in range(m)] + [(False, i, 0) for i in range(m)]


def one_f_one_b(p: int, s: int, m: int) -> list[Entry]:
    warm = min(p - s - 1, m)
    out: list[Entry] = [(True, i, 0) for i in range(warm)]
    for i in range(m - warm):
        out.append((True, warm + i, 0))
        out.append((False, i, 0))
    out += [(False, i, 0) for i in range(m - warm, m)]
    return out


def interleaved(p: int, s: int, m: int, v: int) -> list[Entry]:
    total = m * v

    def unit(k: int, forward: bool) -> tuple[int, int]:
        group, pos = divmod(k, p * v)
        chunk = (k // p) % v
        if not forward:
            chunk = v - 1 - chunk
        return group * p + pos % p, chunk

    warm = min(2 * (p - s - 1) + (v - 1) * p, total)
    out: list[Entry] = []
    for k in range(warm):
        mb, c = unit(k, True)
        out.append((True, mb, c))
    for i in range(total - warm):
        mb, c = unit(warm + i, True)
        out.append((True, mb, c))
        mb, c = unit(i, False)
        out.append((False, mb, c))
    for k in range(total - warm, total):
        mb, c = unit(k, False)
        out.append((False, mb, c))
    return out


def schedule(kind: str, p: int, s: int, m: int, v: int = 1) -> list[Entry]:
    """The order of passes on pipeline rank ``s``."""
    if kind == "gpipe":
        return gpipe(m)
    if v > 1 or kind == "interleaved":
        return interleaved(p, s, m, v)
    return one_f_one_b(p, s, m)
