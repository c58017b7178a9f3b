"""Where a search's or a sweep's tasks run: worker processes on this machine (default), this
process (``workers=1``), or a Ray cluster (``ray_address``; the optional ``ray`` extra).

:func:`run_tasks` yields ``(index, result)`` as each task finishes, in finishing order, so that
the caller can store and count results as they arrive.  A task is ``fn(arg)`` with ``fn`` a
module-level function and ``arg`` picklable.  No scheduler of podsim's own: the standard
library's process pool, or Ray's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from .ray_tasks import LOCAL_RAY, run_on_ray

__all__ = ["LOCAL_RAY", "default_workers", "run_tasks"]

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """Worker processes when none are asked for: the CPUs, at most 8."""
    return min(8, os.cpu_count() or 1)


def run_tasks(
    fn: Callable[[T], R], args: Sequence[T], workers: int | None = None, ray_address: str | None = None
) -> Iterator[tuple[int, R]]:
    """Run ``fn`` on each of ``args``; yield ``(index into args, result)`` as tasks finish.

    ``workers``: local worker processes (default :func:`default_workers`; 1 runs in this
    process, in order).  ``ray_address``: run on Ray instead: :data:`LOCAL_RAY` starts a local
    instance, anything else is the address of a running cluster (``ray start --head`` prints
    it); ``workers`` is then ignored (Ray uses the cluster's CPUs).

    Raises:
        InputError: Ray is not installed, or the address cannot be reached.
    """
    if not args:
        return
    if ray_address is not None:
        yield from run_on_ray(fn, args, ray_address)
        return
    n = workers or default_workers()
    if n <= 1 or len(args) == 1:
        for i, a in enumerate(args):
            yield i, fn(a)
        return
    with ProcessPoolExecutor(max_workers=min(n, len(args))) as pool:
        pending: dict[Any, int] = {pool.submit(fn, a): i for i, a in enumerate(args)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    i = pending.pop(f)
                    yield i, f.result()
        finally:
            for f in pending:
                f.cancel()
