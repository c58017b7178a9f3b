"""Simulating one representative of equivalent ranks must give exactly what simulating every
rank gives.  The two runs share the algorithms but not the message matching: the full run
pairs every send with its receive across ranks; the mirrored run never does."""

import random

import pytest

from helpers import params, topo
from podsim.engine import equivalent_ranks, simulate
from podsim.workload import CollectiveKind as CK
from podsim.workload import OpKind, ProgramBuilder, Workload

TOPOS = [
    (("Ring", 8, 50, 500),),
    (("Switch", 8, 400, 936.25),),
    (("Ring", 4, 50, 500), ("Switch", 2, 25, 1000)),
    (("Ring", 2, 100, 200), ("FullyConnected", 2, 50, 300), ("Ring", 4, 25, 800)),
]
ALGOS = ["ring", "direct", "halvingDoubling", "oneRing", "oneDirect", "oneHalvingDoubling"]


def random_program(rng, algo):
    b = ProgramBuilder("rand")
    ids = []
    for k in range(rng.randint(2, 6)):
        deps = rng.sample(ids, min(len(ids), rng.randint(0, 2)))
        if rng.random() < 0.5:
            ids.append(
                b.add(OpKind.COMPUTE, f"c{k}", duration_ns=rng.choice([0, 1000, 25_000]), node_id=k + 1, data_deps=deps)
            )
        else:
            kinds = [CK.ALL_REDUCE, CK.ALL_GATHER, CK.REDUCE_SCATTER]
            if "alvingDoubling" not in algo:  # halving-doubling has no all-to-all
                kinds.append(CK.ALL_TO_ALL)
            kind = rng.choice(kinds)
            ids.append(
                b.add(
                    OpKind.COLLECTIVE,
                    f"x{k}",
                    collective=int(kind),
                    size_bytes=rng.choice([64, 4096, 1 << 20]),
                    node_id=k + 1,
                    data_deps=deps,
                )
            )
    return b.build()


@pytest.mark.parametrize("seed", range(40))
def test_mirrored_equals_full(seed):
    rng = random.Random(seed)
    dims = rng.choice(TOPOS)
    t = topo(*dims)
    algo = rng.choice(ALGOS)
    p = params(
        algo,
        len(dims),
        splits=rng.choice([1, 2, 4]),
        active=rng.choice([1, 2]),
        opt=rng.choice(["baseline", "localBWAware"]),
        policy=rng.choice(["LIFO", "FIFO"]),
    )
    wl = Workload([random_program(rng, algo)], [0] * t.num_npus)
    assert equivalent_ranks(wl, None, p)[0]
    a = simulate(wl, t, p, use_symmetry=True, record_timeline=False)
    b = simulate(wl, t, p, use_symmetry=False, record_timeline=False)
    assert a.info["simulated_ranks"] == 1 and b.info["simulated_ranks"] == t.num_npus
    assert [x.as_dict() for x in a.ranks] == [x.as_dict() for x in b.ranks]


def test_unsupported_pairing_is_an_input_error():
    from podsim.errors import InputError

    b = ProgramBuilder()
    b.add(OpKind.COLLECTIVE, "a2a", collective=int(CK.ALL_TO_ALL), size_bytes=4096, node_id=1)
    with pytest.raises(InputError, match="halvingDoubling does not implement all-to-all"):
        simulate(Workload([b.build()], [0] * 8), topo(("Ring", 8, 50, 500)), params("halvingDoubling"))


def test_a_group_of_every_rank_is_the_world() -> None:
    # data parallelism names its group "dp"; when it holds every rank, the ranks stay equivalent
    # and a cluster run simulates one, with the same result as simulating all
    from podsim.engine.cluster import simulate_cluster
    from podsim.hardware.cluster import build_fabric, load_cluster
    from podsim.workload import Group

    b = ProgramBuilder("dp")
    c = b.add(OpKind.COMPUTE, "c", duration_ns=5000, node_id=1)
    b.add(
        OpKind.COLLECTIVE, "ar", collective=int(CK.ALL_REDUCE), size_bytes=1 << 24, node_id=2, data_deps=[c], group="dp"
    )
    prog = b.build()
    whole = Workload([prog], [0] * 16, [Group("dp", tuple(range(16)))])
    assert equivalent_ranks(whole, None)[0]
    halves = Workload([prog], [0] * 16, [Group("dp", tuple(range(8))), Group("dp", tuple(range(8, 16)))])
    assert equivalent_ranks(halves, None) == (False, "collectives on communicator groups")
    spec = load_cluster("dgx-a100-superpod")
    fabric = build_fabric(spec, 16)
    once = simulate_cluster(whole, fabric, spec.nccl, "analytical", record_timeline=False)
    every = simulate_cluster(whole, fabric, spec.nccl, "analytical", use_symmetry=False, record_timeline=False)
    assert once.info["equivalent_ranks"] and [r.finish_ns for r in once.ranks] == [r.finish_ns for r in every.ranks]
