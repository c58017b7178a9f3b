"""The NCCL ring and double-binary-tree flows, now built in arrays (issue #29), are the flows
of the rank-by-rank construction they replace (kept here as the reference), in the same order,
on whole clusters, partial servers, uneven and shuffled communicators, with and without PXN."""

from __future__ import annotations

import random

import numpy as np
import pytest

from podsim.collectives.nccl.algorithms import Communicator, _depth, _ring_flows, _tree_flows, communicator
from podsim.hardware.cluster import build_fabric, load_cluster


def _rotate(xs: list[int], k: int) -> list[int]:
    k %= len(xs)
    return xs[k:] + xs[:k]


def ring_reference(comm: Communicator, channels: int, pxn: bool) -> list[tuple[int, int, int]]:
    out = []
    servers = comm.servers
    multi = len(servers) > 1
    for c in range(channels):
        orders = [_rotate(s, c) for s in servers]
        seq = [r for o in orders for r in o]
        first = {r: o[0] for o in orders for r in o}
        for i, r in enumerate(seq):
            nxt = seq[(i + 1) % len(seq)]
            if multi and comm.fabric.server_of(r) != comm.fabric.server_of(nxt):
                rail = first[r]
                if pxn and rail != r:
                    out += [(comm.node(r), comm.node(rail), c), (comm.node(rail), comm.node(nxt), c)]
                    continue
            out.append((comm.node(r), comm.node(nxt), c))
    return [f for f in out if f[0] != f[1]]


def _binary_tree(count: int) -> list[int]:
    parent = [-1] * count

    def build(lo: int, hi: int, up: int) -> None:
        if lo < hi:
            mid = (lo + hi) // 2
            parent[mid] = up
            build(lo, mid, mid)
            build(mid + 1, hi, mid)

    build(0, count, -1)
    return parent


def tree_reference(comm: Communicator, channels: int) -> tuple[list[tuple[int, int, int]], int]:
    k = len(comm.servers)
    parents = [_binary_tree(k), [k - 1 - p if p >= 0 else -1 for p in reversed(_binary_tree(k))]]
    out, depth = [], 0
    for c in range(channels):
        parent = parents[c % 2]
        heads = []
        for s in comm.servers:
            chain = _rotate(s, c)
            heads.append(chain[0])
            for a, b in zip(chain[1:], chain[:-1]):
                out += [(comm.node(a), comm.node(b), c), (comm.node(b), comm.node(a), c)]
        for i, p in enumerate(parent):
            if p >= 0:
                out += [(comm.node(heads[i]), comm.node(heads[p]), c), (comm.node(heads[p]), comm.node(heads[i]), c)]
        for i in range(len(parent)):  # the depth, position by position
            d, j = 0, i
            while parent[j] >= 0:
                j, d = parent[j], d + 1
            depth = max(depth, d)
    return [f for f in out if f[0] != f[1]], depth


def communicators():
    fab = build_fabric(load_cluster("dgx-h100"), 64)
    rnd = random.Random(3)
    shuffled = list(range(64))
    rnd.shuffle(shuffled)
    yield communicator(fab)
    yield communicator(fab, list(range(8)))  # one server
    yield communicator(fab, [0, 9, 18, 27])  # one GPU a server
    yield communicator(fab, shuffled[:37])  # uneven servers, scattered order
    yield communicator(fab, [3, 2, 1, 11, 10, 12, 40])
    yield communicator(build_fabric(load_cluster("dgx-a100-superpod"), 48))


@pytest.mark.parametrize("channels", [1, 2, 5])
def test_ring_and_tree_flows_are_the_reference_flows(channels: int) -> None:
    for comm in communicators():
        for pxn in (False, True):
            fl = _ring_flows(comm, 2.5, channels, pxn)
            got = list(zip(np.asarray(fl.src).tolist(), np.asarray(fl.dst).tolist(), np.asarray(fl.label).tolist()))
            assert got == ring_reference(comm, channels, pxn)
            assert set(np.asarray(fl.nbytes).tolist()) <= {2.5}
        step = _tree_flows(comm, channels)
        want, depth = tree_reference(comm, channels)
        assert list(zip(step.src.tolist(), step.dst.tolist(), step.label.tolist())) == want
        assert step.hops["net"] == 2 * depth


def test_tree_depth() -> None:
    # 1 server: no edge; 2 and 3: a root and its children; 7: a full tree of 3 levels (depth 2);
    # 8: one more; 1,000 (512 <= 1,000 < 1,024): depth 9
    assert [_depth(_binary_tree(k)) for k in (1, 2, 3, 7, 8, 1000)] == [0, 1, 1, 2, 3, 9]
