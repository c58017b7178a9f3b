"""The Python API of ``podsim collective``: nccl-tests in simulation.

Example::

    import podsim
    table = podsim.collective("all_reduce", cluster="dgx-a100-superpod", gpus=16,
                              min_bytes="1K", max_bytes="1G", backend="flow")
    for row in table.rows:
        print(row.bytes, row.time_us, row.busbw_gbps)
"""

from __future__ import annotations

from collections.abc import Callable

from ..collectives.nccl import BACKENDS, COLLECTIVES
from ..collectives.nccl.sweep import sizes, sweep
from ..collectives.nccl.tuning import PROTOCOLS
from ..collectives.registry import NCCL_ALGORITHMS
from ..engine.faults import FaultSpec, degraded_fabric, resolve_faults
from ..errors import InputError
from ..hardware.cluster import ClusterSpec, build_fabric, load_cluster, preset_names
from ..jobs.collective import DTYPES, CollectiveJob
from ..report.collective import CollectiveTable
from ..units import parse_message_size

#: the algorithms ``algorithm`` may force (NCCL's names; the registry also takes ASTRA-sim's
#: name for the same algorithm, e.g. doubleBinaryTree for tree)
ALGORITHMS: tuple[str, ...] = NCCL_ALGORITHMS.names()

__all__ = [
    "ALGORITHMS",
    "BACKENDS",
    "COLLECTIVES",
    "DTYPES",
    "PROTOCOLS",
    "CollectiveTable",
    "cluster_presets",
    "collective",
    "run_job",
]


def collective(
    name: str,
    cluster: str | ClusterSpec,
    gpus: int,
    *,
    min_bytes: int | str = "1K",
    max_bytes: int | str = "1G",
    factor: int = 2,
    backend: str = "analytical",
    dtype: str = "float",
    algorithm: str | None = None,
    protocol: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    faults: FaultSpec | None = None,
) -> CollectiveTable:
    """Time collective ``name`` on ``gpus`` GPUs of ``cluster`` (a preset name, a YAML path
    or a :class:`ClusterSpec`) from ``min_bytes`` to ``max_bytes`` (bytes or "4 MiB"-style
    strings), multiplying by ``factor``.

    ``faults``: slow NICs and links (:mod:`podsim.engine.faults`; GPU and host faults do not
    apply to a collective alone): the rows are timed on the degraded fabric, and the table's
    ``faults`` holds each size's time on the healthy one.

    Raises:
        InputError: for an unknown collective, backend or dtype, bad sizes, or a GPU count the
            cluster cannot hold.
    """
    if name not in COLLECTIVES:
        raise InputError(f"unknown collective {name!r}; expected one of {', '.join(COLLECTIVES)}")
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}", where="--backend")
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}", where="--dtype")
    lo = parse_message_size(min_bytes, where="--min-bytes")
    hi = parse_message_size(max_bytes, where="--max-bytes")
    if lo < 1 or hi < lo:
        raise InputError(f"need 1 <= min-bytes <= max-bytes, got {lo} and {hi}", where="--min-bytes")
    if factor < 2:
        raise InputError(f"must be >= 2, got {factor}", where="--factor")
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster)
    fabric = build_fabric(spec, gpus)
    faults = faults or FaultSpec()
    for flag, what in (("slow-gpus", faults.slow_gpus), ("hiccup", faults.hiccup)):
        if what is not None:
            raise InputError(
                "a collective alone has no compute or host step: only --slow-nics and --slow-links apply",
                where=f"--{flag}",
            )

    def run(fab, report=None):  # type: ignore[no-untyped-def]
        return sweep(
            fab,
            spec.nccl,
            name,
            sizes(lo, hi, factor),
            backend=backend,
            dtype_bytes=DTYPES[dtype],
            algo=algorithm,
            proto=protocol,
            progress=report,
        )

    report: dict = {}
    if faults:
        plan = resolve_faults(faults, gpus, fabric)
        healthy = run(fabric)
        fabric = degraded_fabric(fabric, plan.links)
        rows = run(fabric, progress)
        report = {
            "injected": [
                {"flag": f"--{k}", "spec": str(v), "what": plan.described.get(k, "")} for k, v in faults.items()
            ],
            "sizes": [
                {
                    "bytes": h.bytes,
                    "baseline_time_us": round(h.time_us, 3),
                    "time_us": round(r.time_us, 3),
                    "ratio": round(r.time_us / h.time_us, 6) if h.time_us else None,
                    "baseline_algorithm": h.algorithm,
                    "baseline_protocol": h.protocol,
                }
                for h, r in zip(healthy, rows)
            ],
        }
    else:
        rows = run(fabric, progress)
    table = CollectiveTable(name, spec.name, gpus, fabric.num_servers, backend, dtype, rows)
    table.faults = report
    return table


def cluster_presets() -> list[tuple[str, str]]:
    """The shipped cluster presets: (name, description), by name."""
    return [(n, load_cluster(n).description) for n in preset_names()]


def run_job(job: CollectiveJob, progress: Callable[[int, int], None] | None = None) -> CollectiveTable:
    """``podsim collective`` from its job spec: the sizes from ``min-bytes`` to ``max-bytes``,
    or the one ``size`` a sweep point gives.

    Raises:
        InputError: a missing collective, cluster or GPU count (and whatever :func:`collective`
            refuses)."""
    o = job.options
    for flag, val in (("NAME", o.collective), ("--cluster", o.cluster), ("--gpus", o.gpus)):
        if val is None:
            raise InputError(f"missing {flag} (see podsim collective --help)")
    lo, hi = (o.size, o.size) if o.size is not None else (o.min_bytes, o.max_bytes)
    return collective(
        o.collective,
        o.cluster,
        o.gpus,
        min_bytes=lo,
        max_bytes=hi,
        factor=o.factor,
        backend=o.backend,
        dtype=o.dtype,
        algorithm=o.algo,
        protocol=o.proto,
        progress=progress,
        faults=job.faults.spec(),
    )
