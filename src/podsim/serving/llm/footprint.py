"""How much memory an LLM serving run takes, estimated before it starts, so that a run that
cannot fit is refused at once (naming the flag) instead of growing until the machine runs out.

Measured on podsim's 2-core test machine (Python 3.11, peak resident memory of ``podsim
serve-llm``, llama3-8b on an H100, Poisson requests of 1,024 + 128 tokens): 1,000,000 requests on
one replica peak at 0.90 GB (0.85 KB a request over the process's 47 MB), writing ``--json``
adds about 1.9 KB a request (the document's rows, then its text); 100,000 replicas take 0.58 GB
(5.4 KB a replica: its queues, KV cache, scheduler and statistics).  The estimate rounds these up
(:data:`REQUEST_BYTES`, :data:`JSON_REQUEST_BYTES`, :data:`REPLICA_BYTES`) and compares it with
the machine's physical memory.  Units: bytes.
"""

from __future__ import annotations

import os

from ...errors import InputError

#: memory a served request takes at the run's peak: the request, its state, its results (bytes)
REQUEST_BYTES = 1_000
#: what writing the JSON document adds for each request (bytes)
JSON_REQUEST_BYTES = 2_000
#: memory a replica takes: queues, KV cache accounting, scheduler, statistics (bytes)
REPLICA_BYTES = 8_000
#: what the process takes before any request or replica (bytes)
BASE_BYTES = 100_000_000
#: the memory assumed where the machine's cannot be read (bytes)
ASSUMED_MEMORY_BYTES = 64 * 2**30


def machine_memory_bytes() -> int:
    """The machine's physical memory (bytes), or :data:`ASSUMED_MEMORY_BYTES` where the system
    does not say."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return ASSUMED_MEMORY_BYTES
    return n if n > 0 else ASSUMED_MEMORY_BYTES


def run_bytes(requests: int, replicas: int, json: bool = False) -> int:
    """The estimated peak memory (bytes) of serving ``requests`` on ``replicas`` replicas, with
    the JSON document when ``json``."""
    per_request = REQUEST_BYTES + (JSON_REQUEST_BYTES if json else 0)
    return BASE_BYTES + requests * per_request + replicas * REPLICA_BYTES


def check_footprint(
    requests: int,
    replicas: int,
    *,
    json: bool = False,
    replicas_flag: str = "--replicas",
    memory_bytes: int | None = None,
) -> None:
    """Refuse a run whose estimated memory (:func:`run_bytes`) exceeds the machine's
    (``memory_bytes``, default :func:`machine_memory_bytes`), naming ``--requests`` or
    ``replicas_flag`` (``--replicas``, ``--pd``), whichever takes more, and the most it could be.

    Raises:
        InputError: naming the flag, the estimate and the machine's memory.
    """
    mem = machine_memory_bytes() if memory_bytes is None else memory_bytes
    need = run_bytes(requests, replicas, json)
    if need <= mem:
        return
    per_request = REQUEST_BYTES + (JSON_REQUEST_BYTES if json else 0)
    gib = 2**30
    if requests * per_request >= replicas * REPLICA_BYTES:
        most = max(0, (mem - BASE_BYTES - replicas * REPLICA_BYTES) // per_request)
        raise InputError(
            f"{requests:,} requests would take about {need / gib:,.0f} GiB of memory ({per_request:,} B each"
            f"{' with --json' if json else ''}), more than this machine's {mem / gib:,.1f} GiB: give at most "
            f"{most:,} (a long trace can be served in parts)",
            where="--requests",
        )
    most = max(0, (mem - BASE_BYTES - requests * per_request) // REPLICA_BYTES)
    raise InputError(
        f"{replicas:,} replicas would take about {need / gib:,.0f} GiB of memory ({REPLICA_BYTES:,} B each), "
        f"more than this machine's {mem / gib:,.1f} GiB: give at most {most:,}",
        where=replicas_flag,
    )
