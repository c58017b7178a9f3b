"""Small builders for tests: workloads and machines made with podsim's own IR and writers."""

from __future__ import annotations

from podsim.collectives.plan import Algo
from podsim.engine import SystemParams
from podsim.network.topology import BlockKind, Dimension, Topology
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

GIB = 2**30 / 1e9  # ASTRA-sim's "GB/s" -> bytes per ns factor


def topo(*dims: tuple[str, int, float, float]) -> Topology:
    """``topo(("Ring", 8, 50, 500))``: kind, NPUs, bandwidth in ASTRA-sim GB/s, latency ns."""
    return Topology(tuple(Dimension(BlockKind(k), n, bw * GIB, lat) for k, n, bw, lat in dims))


def params(
    algo: str = "ring",
    ndims: int = 1,
    splits: int = 1,
    active: int = 1,
    opt: str = "baseline",
    policy: str = "LIFO",
    lmb: float = 50.0,
    endpoint: int = 10,
    window: int = -1,
) -> SystemParams:
    algos = {k: tuple([Algo(algo, window)] * ndims) for k in CollectiveKind}
    return SystemParams(policy, opt, active, splits, endpoint, lmb, 1, algos)


def one_collective(n: int, kind: CollectiveKind, size: int) -> Workload:
    b = ProgramBuilder("coll")
    b.add(OpKind.COLLECTIVE, "c", collective=int(kind), size_bytes=size, node_id=1)
    return Workload([b.build()], [0] * n, name="coll")


def skewed(
    n: int,
    size: int,
    seed: int,
    kinds: tuple[CollectiveKind, ...] = (CollectiveKind.ALL_REDUCE,),
    layers: int = 1,
    group: str | None = None,
    involved: list[bool] | None = None,
    spread: int = 50_000,
) -> Workload:
    """Every rank its own program: compute of a random length (1 .. ``spread`` ns), then a
    collective of ``size`` bytes (``kinds`` in turn, on ``group`` if given, on the dimensions
    ``involved``), ``layers`` times, the next compute after the collective."""
    import numpy as np

    rng = np.random.default_rng(seed)
    progs = []
    for r in range(n):
        b = ProgramBuilder(f"r{r}")
        prev = None
        for layer in range(layers):
            c = b.add(
                OpKind.COMPUTE,
                f"c{layer}",
                duration_ns=int(rng.integers(1, spread)),
                node_id=2 * layer + 1,
                data_deps=[] if prev is None else [prev],
            )
            prev = b.add(
                OpKind.COLLECTIVE,
                f"x{layer}",
                collective=int(kinds[layer % len(kinds)]),
                size_bytes=size,
                node_id=2 * layer + 2,
                data_deps=[c],
                group=group,
                extra=None if involved is None else {"involved_dim": involved},
            )
        progs.append(b.build())
    return Workload(progs, list(range(n)))


def written_two_ways(n: int, collectives: list[tuple[CollectiveKind, int]]) -> tuple[Workload, Workload]:
    """The issue #17 check: 10 us of compute then ``collectives`` (kind, bytes) in turn, the odd
    ranks writing the compute as two 5 us ops.  Returns (every rank simulated: two programs on
    alternate ranks, the symmetric workload: one program)."""
    progs = []
    for odd in (False, True):
        b = ProgramBuilder("odd" if odd else "even")
        if odd:
            c = b.add(
                OpKind.COMPUTE,
                "c2",
                duration_ns=5_000,
                node_id=2,
                data_deps=[b.add(OpKind.COMPUTE, "c1", duration_ns=5_000, node_id=1)],
            )
        else:
            c = b.add(OpKind.COMPUTE, "c", duration_ns=10_000, node_id=2)
        for i, (kind, size) in enumerate(collectives):
            c = b.add(OpKind.COLLECTIVE, f"x{i}", collective=int(kind), size_bytes=size, node_id=3 + i, data_deps=[c])
        progs.append(b.build())
    return Workload(progs, [i % 2 for i in range(n)]), Workload(progs[:1], [0] * n)


def importable_module(folder, monkeypatch, name: str, source: str) -> str:  # type: ignore[no-untyped-def]
    """Write ``source`` as module ``name`` in ``folder`` and make it importable for this test
    (a fresh import: any earlier one is forgotten).  Returns ``name``."""
    import sys

    (folder / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    return name
