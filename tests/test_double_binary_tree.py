"""Double binary tree all-reduce on 8 NPUs, derived by hand.

The first chunk uses the tree whose extra root is the last NPU: in-order ids give leaves
0, 2, 4, 6; inner nodes 1 (children 0, 2) and 5 (4, 6) under 3; 3 under the root 7.  Every
message carries the whole chunk D; every bus crossing is b = 10 ns; reductions cost r(D).
On a Ring(8), 1 -> 3 is 2 hops and 3 -> 7 is 4 hops.
"""

from helpers import GIB, one_collective, params, topo
from podsim.engine import simulate
from podsim.workload import CollectiveKind as CK


def test_tree_all_reduce_by_hand():
    D = 1 << 20
    h = {d: int(d * 500 + D / (50 * GIB)) for d in (1, 2, 4)}
    r = 3 * int(D / 50e9 * 1e9)
    b = 10
    t1 = b + h[1] + b + r  # leaves -> inner 1 and 5, both reduced
    t2 = t1 + h[2] + b + r + h[4]  # -> 3, reduced, -> root 7
    root_done = t2 + b + r
    t3 = root_done + h[4]  # root -> 3
    three_done = t3 + b + r
    t4 = three_done + h[2]  # 3 -> 1, 5
    inner_done = t4 + b + r
    t5 = inner_done + h[1]  # 1, 5 -> leaves
    leaf_done = t5 + b
    res = simulate(one_collective(8, CK.ALL_REDUCE, D), topo(("Ring", 8, 50, 500)), params("doubleBinaryTree"))
    fin = [x.finish_ns for x in res.ranks]
    assert fin == [leaf_done, inner_done, leaf_done, three_done, leaf_done, inner_done, leaf_done, root_done]


def test_chunks_alternate_between_the_two_trees():
    # two chunks, one active at a time: the second uses the other tree (extra root = NPU 0),
    # so rank 0 is a leaf in chunk 1 and the root in chunk 2; every rank still finishes.
    res = simulate(
        one_collective(8, CK.ALL_REDUCE, 1 << 20), topo(("Ring", 8, 50, 500)), params("doubleBinaryTree", splits=2)
    )
    assert len({x.finish_ns for x in res.ranks}) > 1
    assert res.info["equivalent_ranks"] is False
