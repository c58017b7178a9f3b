"""NCCL-like collective algorithms as :class:`~.schedule.Schedule` objects.

The communicator's GPUs are grouped by server.  With ``C`` channels:

* **ring**: channel ``c`` visits each server's GPUs starting at local GPU ``c`` and moves on
  to the next server's local GPU ``c``, the same rail.  With PXN the last GPU of a server
  hands its data over NVLink to the server's rail GPU ``c``, which sends it through its own
  NIC (two flows); without PXN it sends through its own NIC to the other rail.  Every round
  every GPU sends ``S / (n C)`` on each channel: ``2(n-1)`` rounds for all-reduce, ``n-1``
  for all-gather and reduce-scatter.
* **tree**: a chain through each server's GPUs plus a binary tree over servers (two mirrored
  trees, alternate channels, as NCCL's double binary tree); pipelined, so all up (reduce) and
  down (broadcast) edges carry ``S / C`` at once, and a round pays the depth in latencies.
* **nvls**: NVLink SHARP on an NVSwitch server: every GPU sends its ``S`` to the switch,
  which reduces, and receives ``S`` back (one server only).
* **hierarchical**: reduce-scatter in each server, all-reduce of ``S / m`` among the GPUs of
  the same rail across servers, all-gather in each server.
* **all-to-all**: every GPU sends ``S / n`` to every other GPU at once; **broadcast**: a
  pipelined chain; **send/recv**: one flow.

``S`` follows nccl-tests: the buffer size of all-reduce, broadcast and all-to-all, and the
*total* (output of all-gather, input of reduce-scatter) size of all-gather and reduce-scatter.

Each algorithm is registered at the end of this module in
:data:`~podsim.collectives.registry.NCCL_ALGORITHMS` with what it supports, in the order the
selector tries them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError
from ...network.fabric import Fabric, LinkTier, NodeKind
from ..registry import NcclAlgorithm, register_nccl
from .schedule import FlowList, Schedule, Step
from .tuning import NcclTuning

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")


@dataclass
class Communicator:
    """The GPUs of one collective call, grouped by server (in first-appearance order)."""

    fabric: Fabric
    ranks: list[int]  #: global GPU ranks in communicator order
    servers: list[list[int]]  #: global ranks per server
    intra_class: str  #: "nvlink" or "pcie": how GPUs of one server talk
    #: steps whose flows all carry the same bytes (ring, tree), at one byte each, by algorithm
    #: and shape: the same at every size (see ``_scaled``)
    shapes: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def node(self, rank: int) -> int:
        return int(self.fabric.gpus[rank])


def communicator(fabric: Fabric, ranks: list[int] | None = None) -> Communicator:
    """Group ``ranks`` (default: all GPUs) by server.

    Raises:
        InputError: for ranks the fabric does not have, or repeated ranks.
    """
    n = fabric.num_gpus
    if ranks is None:
        ranks = list(range(n))
    if len(set(ranks)) != len(ranks):
        raise InputError("a communicator lists a GPU twice")
    bad = [r for r in ranks if not 0 <= r < n]
    if bad:
        raise InputError(f"GPU {bad[0]} does not exist: the fabric {fabric.name!r} has {n} GPUs (0-{n - 1})")
    groups: dict[int, list[int]] = {}
    for r in ranks:
        groups.setdefault(fabric.server_of(r), []).append(r)
    has_pcie = bool(np.any(fabric.link_tier == LinkTier.PCIE))
    has_nvlink = bool(np.any(fabric.link_tier == LinkTier.NVLINK))
    intra = "pcie" if has_pcie and not has_nvlink else "nvlink"
    return Communicator(fabric, list(ranks), list(groups.values()), intra)


def _rotate(xs: list[int], k: int) -> list[int]:
    k %= len(xs)
    return xs[k:] + xs[:k]


def _positions(comm: Communicator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The communicator's ranks server by server, and for each: its server's index, its
    position in the server and the server's first index and size in that list."""
    sizes = np.fromiter((len(s) for s in comm.servers), dtype=np.int64, count=len(comm.servers))
    flat = np.fromiter((r for s in comm.servers for r in s), dtype=np.int64, count=int(sizes.sum()))
    srv = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.cumsum(sizes) - sizes
    return flat, srv, np.arange(len(flat)) - starts[srv], np.stack([starts, sizes])


def _interleave(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], two: np.ndarray):
    """Flows ``first[i]`` in order, each followed by ``second[i]`` where ``two[i]``."""
    cnt = 1 + two.astype(np.int64)
    at = np.cumsum(cnt) - cnt
    src = np.empty(int(cnt.sum()), dtype=np.int64)
    dst = np.empty_like(src)
    src[at], dst[at] = first
    src[at[two] + 1], dst[at[two] + 1] = second[0][two], second[1][two]
    return src, dst


def _ring_flows(comm: Communicator, per_flow: float, channels: int, pxn: bool) -> FlowList:
    """Channel ``c``'s ring, in arrays: each server's GPUs from local GPU ``c`` on, server after
    server; a GPU whose successor is on another server sends to it directly or, with PXN and
    when it is not its server's rail GPU ``c``, over NVLink to that GPU first (two flows)."""
    flat, srv, pos, (starts, sizes) = _positions(comm)
    gpus = comm.fabric.gpus.astype(np.int64)
    gpn = comm.fabric.gpus_per_node
    multi = len(comm.servers) > 1
    src, dst, label = [], [], []
    for c in range(channels):
        seq = flat[starts[srv] + (pos + c) % sizes[srv]]
        nxt = np.roll(seq, -1)
        rail = flat[starts[srv] + c % sizes[srv]]
        two = (seq // gpn != nxt // gpn) & (rail != seq) if multi and pxn else np.zeros(len(seq), dtype=bool)
        s, d = _interleave((seq, np.where(two, rail, nxt)), (rail, nxt), two)
        src.append(gpus[s])
        dst.append(gpus[d])
        label.append(np.full(len(s), c, dtype=np.int64))
    src_a, dst_a = np.concatenate(src), np.concatenate(dst)
    return FlowList.of_arrays(src_a, dst_a, np.broadcast_to(np.float64(per_flow), (len(src_a),)), np.concatenate(label))


def ring(comm: Communicator, collective: str, size: int, channels: int, pxn: bool, proto: str) -> Schedule:
    """Ring all-reduce, all-gather or reduce-scatter."""
    n = comm.size
    sched = Schedule(collective, "ring", proto, size, n)
    if n < 2 or size <= 0:
        return sched
    rounds = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}[collective]
    sched.steps.append(
        _scaled(
            comm,
            ("ring", channels, pxn, rounds),
            lambda: _ring_flows(comm, 1.0, channels, pxn).step("ring", rounds, _ring_hops(comm)),
            size / (n * channels),
        )
    )
    return sched


def _ring_hops(comm: Communicator) -> dict[str, float]:
    """Per-round latencies of a ring: of its ``n - 1`` hops per pass, ``k - 1`` cross the
    network (``k`` servers) and the rest stay inside a server (NCCL's latency model)."""
    n, k = comm.size, len(comm.servers)
    if n < 2:
        return {}
    return {comm.intra_class: (n - k) / (n - 1), "net": (k - 1) / (n - 1)}


def _binary_tree(count: int) -> list[int]:
    """Parent of each of ``count`` positions in a balanced binary tree built by splitting
    ranges at the middle (root = the middle); the root's parent is -1."""
    parent = [-1] * count

    def build(lo: int, hi: int, up: int) -> None:
        if lo >= hi:
            return
        mid = (lo + hi) // 2
        parent[mid] = up
        build(lo, mid, mid)
        build(mid + 1, hi, mid)

    build(0, count, -1)
    return parent


def _depth(parent: list[int]) -> int:
    """The longest path from a position up to the root."""
    up = np.asarray(parent, dtype=np.int64)
    at = np.arange(len(up))
    depth = 0
    while True:
        at = up[at]
        at = at[at >= 0]
        if not len(at):
            return depth
        depth += 1


def tree(comm: Communicator, collective: str, size: int, channels: int, proto: str) -> Schedule:
    """Pipelined double binary tree all-reduce (chains inside servers)."""
    if collective != "all_reduce":
        raise InputError(f"the tree algorithm implements all_reduce only, not {collective}")
    n = comm.size
    sched = Schedule(collective, "tree", proto, size, n)
    if n < 2 or size <= 0:
        return sched
    sched.steps.append(_scaled(comm, ("tree", channels), lambda: _tree_flows(comm, channels), size / channels))
    return sched


def _tree_flows(comm: Communicator, channels: int) -> Step:
    """The double binary tree's flows at one byte each: per channel, each server's chain from
    local GPU ``c`` (both ways, link by link), then the tree over the servers' first GPUs (both
    ways, edge by edge)."""
    k = len(comm.servers)
    parents = [_binary_tree(k), [k - 1 - p if p >= 0 else -1 for p in reversed(_binary_tree(k))]]
    flat, srv, pos, (starts, sizes) = _positions(comm)
    gpus = comm.fabric.gpus.astype(np.int64)
    src, dst, label = [], [], []
    for c in range(channels):
        parent = np.asarray(parents[c % 2], dtype=np.int64)
        chain = flat[starts[srv] + (pos + c) % sizes[srv]]
        heads = flat[starts + c % sizes]
        link = np.flatnonzero(pos >= 1)
        a, b = chain[link], chain[link - 1]
        edge = np.flatnonzero(parent >= 0)
        child, up = heads[edge], heads[parent[edge]]
        s = np.concatenate([np.stack([a, b], 1).ravel(), np.stack([child, up], 1).ravel()])
        d = np.concatenate([np.stack([b, a], 1).ravel(), np.stack([up, child], 1).ravel()])
        src.append(gpus[s])
        dst.append(gpus[d])
        label.append(np.full(len(s), c, dtype=np.int64))
    depth = max(_depth(p) for p in parents[: min(channels, 2)]) if channels else 0
    src_a, dst_a = np.concatenate(src), np.concatenate(dst)
    fl = FlowList.of_arrays(src_a, dst_a, np.broadcast_to(np.float64(1.0), (len(src_a),)), np.concatenate(label))
    chain_len = max(len(s) for s in comm.servers) - 1
    return fl.step("tree", 1, {comm.intra_class: 2 * chain_len, "net": 2 * depth})


def _scaled(comm: Communicator, key: tuple, build: Callable[[], Step], per: float) -> Step:
    """A step whose every flow carries ``per`` bytes: its flows (built by ``build`` at one byte
    each) kept on the communicator, the same at every size."""
    shape = comm.shapes.get(key)
    if shape is None:
        shape = comm.shapes[key] = build()
    every = np.broadcast_to(np.float64(per), (len(shape.src),))  # one size for all: a read-only view
    return Step(shape.name, shape.src, shape.dst, every, shape.label, shape.repeat, dict(shape.hops))


def nvswitches_of(fabric: Fabric, rank: int) -> list[int]:
    """NVSwitch nodes directly linked to GPU ``rank``."""
    g = int(fabric.gpus[rank])
    out = fabric.link_dst[fabric.link_src == g]
    return [int(v) for v in out if fabric.node_kind[v] == NodeKind.NVSWITCH]


def nvls(comm: Communicator, collective: str, size: int, proto: str) -> Schedule:
    """NVLink SHARP all-reduce inside one NVSwitch server."""
    if collective != "all_reduce":
        raise InputError(f"nvls implements all_reduce only, not {collective}")
    if len(comm.servers) != 1:
        raise InputError("nvls needs all GPUs of the collective in one NVSwitch server")
    n = comm.size
    sched = Schedule(collective, "nvls", proto, size, n)
    if n < 2 or size <= 0:
        return sched
    fl = FlowList()
    for r in comm.ranks:
        sws = nvswitches_of(comm.fabric, r)
        if not sws:
            raise InputError(f"nvls needs NVSwitches, and GPU {r} has none")
        for i, sw in enumerate(sws):
            fl.add(comm.node(r), sw, size / len(sws), i)
            fl.add(sw, comm.node(r), size / len(sws), i)
    sched.steps.append(fl.step("nvls", 1, {"nvlink": 1}))
    return sched


def hierarchical(comm: Communicator, collective: str, size: int, channels: int, pxn: bool, proto: str) -> Schedule:
    """Reduce-scatter in each server, all-reduce across servers per rail, all-gather."""
    if collective != "all_reduce":
        raise InputError(f"the hierarchical algorithm implements all_reduce only, not {collective}")
    sizes = {len(s) for s in comm.servers}
    if len(sizes) != 1:
        raise InputError("the hierarchical algorithm needs the same number of GPUs in every server")
    m = sizes.pop()
    k = len(comm.servers)
    sched = Schedule(collective, "hierarchical", proto, size, comm.size)
    if comm.size < 2 or size <= 0:
        return sched
    if m > 1:
        intra = [Communicator(comm.fabric, s, [s], comm.intra_class) for s in comm.servers]
        fl = FlowList()
        for sub in intra:
            part = _ring_flows(sub, size / (m * channels), channels, pxn)
            for a, b, x, lab in zip(*(np.asarray(v).tolist() for v in (part.src, part.dst, part.nbytes, part.label))):
                fl.add(a, b, x, lab)
        rs = fl.step("intra reduce-scatter", m - 1, {comm.intra_class: 1})
    if k > 1:
        fl2 = FlowList()
        for j in range(m):
            rail = [s[j] for s in comm.servers]
            sub = Communicator(comm.fabric, rail, [[r] for r in rail], comm.intra_class)
            part = _ring_flows(sub, size / (m * k * channels), channels, pxn)
            for a, b, x, lab in zip(*(np.asarray(v).tolist() for v in (part.src, part.dst, part.nbytes, part.label))):
                fl2.add(a, b, x, lab)
        inter = fl2.step("inter all-reduce", 2 * (k - 1), {"net": 1})
    if m > 1:
        sched.steps.append(rs)
    if k > 1:
        sched.steps.append(inter)
    if m > 1:
        ag = FlowList()
        ag.src, ag.dst, ag.nbytes, ag.label = list(rs.src), list(rs.dst), list(rs.nbytes), list(rs.label)
        sched.steps.append(ag.step("intra all-gather", m - 1, {comm.intra_class: 1}))
    return sched


def all_to_all(comm: Communicator, size: int, proto: str) -> Schedule:
    """Every GPU sends ``size / n`` bytes to every other GPU at once."""
    n = comm.size
    sched = Schedule("all_to_all", "direct", proto, size, n)
    if n < 2 or size <= 0:
        return sched
    fl = FlowList()
    per = size / n
    for i, a in enumerate(comm.ranks):
        for j, b in enumerate(comm.ranks):
            if i != j:
                fl.add(comm.node(a), comm.node(b), per, i)
    sched.steps.append(fl.step("all-to-all", 1, {_widest(comm): 1}))
    return sched


def broadcast(comm: Communicator, size: int, channels: int, proto: str, root: int = 0) -> Schedule:
    """Pipelined chain broadcast from communicator position ``root``."""
    n = comm.size
    sched = Schedule("broadcast", "ring", proto, size, n)
    if n < 2 or size <= 0:
        return sched
    order = _rotate(comm.ranks, root)
    fl = FlowList()
    for c in range(channels):
        for a, b in zip(order[:-1], order[1:]):
            fl.add(comm.node(a), comm.node(b), size / channels, c)
    k = len(comm.servers)
    sched.steps.append(fl.step("chain", 1, {comm.intra_class: n - k, "net": k - 1}))
    return sched


def send_recv(comm: Communicator, size: int, proto: str) -> Schedule:
    """One transfer from the communicator's first GPU to its second."""
    if comm.size != 2:
        raise InputError(f"send_recv takes exactly 2 GPUs, got {comm.size}")
    sched = Schedule("send_recv", "p2p", proto, size, 2)
    if size > 0:
        fl = FlowList()
        a, b = comm.ranks
        fl.add(comm.node(a), comm.node(b), size, 0)
        sched.steps.append(fl.step("p2p", 1, {_widest(comm): 1}))
    return sched


def _widest(comm: Communicator) -> str:
    """The link class of the slowest hop: the network when the GPUs span servers."""
    return "net" if len(comm.servers) > 1 else comm.intra_class


# -- the registered algorithms: one uniform build(comm, collective, size, proto, tuning) each --


def _build_ring(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    if collective == "broadcast":
        return broadcast(comm, size, tuning.channels, proto)
    return ring(comm, collective, size, tuning.channels, tuning.pxn, proto)


def _build_tree(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    return tree(comm, collective, size, tuning.channels, proto)


def _build_nvls(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    return nvls(comm, collective, size, proto)


def _build_hierarchical(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    return hierarchical(comm, collective, size, tuning.channels, tuning.pxn, proto)


def _build_direct(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    return all_to_all(comm, size, proto)


def _build_p2p(comm: Communicator, collective: str, size: int, proto: str, tuning: NcclTuning) -> Schedule:
    return send_recv(comm, size, proto)


def _one_nvswitch_server(comm: Communicator) -> bool:
    return len(comm.servers) == 1 and bool(nvswitches_of(comm.fabric, comm.ranks[0]))


def _equal_servers(comm: Communicator) -> bool:
    return len({len(s) for s in comm.servers}) == 1


register_nccl(
    NcclAlgorithm("ring", ("all_reduce", "all_gather", "reduce_scatter", "broadcast"), _build_ring, astra_sim="ring")
)
register_nccl(NcclAlgorithm("tree", ("all_reduce",), _build_tree, astra_sim="doubleBinaryTree"))
register_nccl(NcclAlgorithm("nvls", ("all_reduce",), _build_nvls, fits=_one_nvswitch_server, protocols=("Simple",)))
register_nccl(NcclAlgorithm("hierarchical", ("all_reduce",), _build_hierarchical, fits=_equal_servers))
register_nccl(NcclAlgorithm("direct", ("all_to_all",), _build_direct, tuned=False, astra_sim="direct"))
register_nccl(NcclAlgorithm("p2p", ("send_recv",), _build_p2p, tuned=False))
