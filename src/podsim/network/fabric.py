"""A physical fabric: GPUs, switches and the directed links between them.

A :class:`Fabric` is a directed multigraph held in numpy arrays (one entry per directed
link), so the flow solver touches integers and floats, not objects.  A full-duplex cable is
two directed links, one per direction, each with the cable's per-direction bandwidth.

Node ids are dense integers.  ``gpus[r]`` is the node id of GPU rank ``r``; GPUs are
numbered node by node (``gpus_per_node`` consecutive ranks share a server).  Only nodes that
*forward* (switches, and GPUs in direct-connect fabrics such as tori) may appear in the
middle of a route; an ordinary GPU is never used as a transit hop by the router (NCCL's PXN
relays through a GPU explicitly, as two flows).

Units: bandwidth in bytes per ns (= GB/s, 10^9 B/s) per direction, latency in ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from ..errors import InputError
from ..units import MAX_BYTES, MAX_NS


class NodeKind(IntEnum):
    """What a fabric node is."""

    GPU = 0
    NVSWITCH = 1  #: an NVLink switch (or a server-local switch chip such as a PCIe switch)
    SWITCH = 2  #: a network switch (leaf / ToR / spine / core)
    NIC = 3  #: a network interface card, when modelled as its own node
    CPU = 4  #: a host CPU / PCIe root complex


class LinkTier(IntEnum):
    """Which kind of cable a link is; used for per-tier latency and efficiency parameters."""

    NVLINK = 0  #: GPU <-> NVSwitch, or GPU <-> GPU NVLink
    PCIE = 1  #: GPU / NIC <-> PCIe switch or CPU
    NIC = 2  #: GPU or NIC <-> first network switch (the scale-out NIC link)
    FABRIC = 3  #: switch <-> switch
    OPTICAL = 4  #: an optical link (TrioSim's optical mesh)


@dataclass(frozen=True)
class Fabric:
    """An immutable fabric.  Build one with :class:`FabricBuilder`."""

    name: str
    node_kind: np.ndarray  #: int8 per node, a :class:`NodeKind`
    node_name: tuple[str, ...]  #: a readable name per node ("gpu3", "leaf1", ...)
    forwards: np.ndarray  #: bool per node: may appear inside a route
    gpus: np.ndarray  #: int32 node id of each GPU rank
    gpus_per_node: int  #: GPUs per server (ranks ``k*g .. k*g+g-1`` share server ``k``)
    link_src: np.ndarray  #: int32 per directed link
    link_dst: np.ndarray  #: int32 per directed link
    link_bw: np.ndarray  #: float64 bytes per ns, per directed link
    link_lat: np.ndarray  #: float64 ns, per directed link
    link_tier: np.ndarray  #: int8 per directed link, a :class:`LinkTier`
    gpu_type: str = ""  #: e.g. "A100", "H100" (informational; specs live in hardware/)
    #: extra facts a builder records (e.g. {"nvswitches": [...], "rails": 8}); read-only by
    #: convention
    meta: dict = field(default_factory=dict, compare=False)
    #: tables derived from the fabric and costly to build (the routers' forwarding distances),
    #: computed once and shared by every router of this fabric; not part of its identity
    derived: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_nodes(self) -> int:
        return len(self.node_kind)

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)

    @property
    def num_servers(self) -> int:
        return (self.num_gpus + self.gpus_per_node - 1) // self.gpus_per_node

    def server_of(self, rank: int) -> int:
        """The server (0-based) GPU rank ``rank`` sits in."""
        return rank // self.gpus_per_node

    def link_name(self, link: int) -> str:
        """``"gpu0->nvsw0"``: a readable name of a directed link."""
        return f"{self.node_name[self.link_src[link]]}->{self.node_name[self.link_dst[link]]}"

    def out_links(self) -> list[np.ndarray]:
        """For each node, the ids of the directed links leaving it."""
        order = np.argsort(self.link_src, kind="stable")
        counts = np.bincount(self.link_src, minlength=self.num_nodes)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        return [order[bounds[i] : bounds[i + 1]] for i in range(self.num_nodes)]


class FabricBuilder:
    """Collects nodes and links, then freezes them into a :class:`Fabric`.

    Nodes and links can be added one at a time or many at once in arrays
    (:meth:`add_nodes`, :meth:`add_links`, :meth:`add_duplexes`: the same checks, the same
    order); links are kept in arrays, so a fabric of a million GPUs builds without millions of
    Python objects.

    Args:
        name: the fabric's name (used in messages and outputs).
        gpus_per_node: GPUs per server.
        source: the file the fabric comes from, for error messages.
    """

    def __init__(self, name: str, gpus_per_node: int, source: str | None = None) -> None:
        if gpus_per_node < 1:
            raise InputError(f"gpus_per_node must be >= 1, got {gpus_per_node}", source, "gpus_per_node")
        self.name = name
        self.gpus_per_node = gpus_per_node
        self.source = source
        self._kind: list[int] = []
        self._name: list[str] = []
        self._forwards: list[bool] = []
        self._gpus: list[int] = []
        # links: whole arrays (chunks) in order, then the ones added one at a time since
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._chunked = 0
        self._src: list[int] = []
        self._dst: list[int] = []
        self._bw: list[float] = []
        self._lat: list[float] = []
        self._tier: list[int] = []
        self.meta: dict = {}

    @property
    def num_nodes(self) -> int:
        return len(self._kind)

    @property
    def num_links(self) -> int:
        return self._chunked + len(self._src)

    @property
    def num_gpus(self) -> int:
        return len(self._gpus)

    def add_node(self, kind: NodeKind, name: str, forwards: bool | None = None) -> int:
        """Add a node and return its id.  GPUs and NICs do not forward unless told to;
        switches do.  GPUs become ranks in the order they are added."""
        nid = len(self._kind)
        self._kind.append(int(kind))
        self._name.append(name)
        if forwards is None:
            forwards = kind in (NodeKind.NVSWITCH, NodeKind.SWITCH, NodeKind.CPU)
        self._forwards.append(bool(forwards))
        if kind == NodeKind.GPU:
            self._gpus.append(nid)
        return nid

    def add_nodes(self, kinds: np.ndarray, names: list[str], forwards: np.ndarray | None = None) -> np.ndarray:
        """Add nodes of ``kinds`` (a :class:`NodeKind` per node) and ``names`` in order, as
        :meth:`add_node` would one by one; returns their ids."""
        kinds = np.asarray(kinds, dtype=np.int64)
        if len(names) != len(kinds):
            raise ValueError("one name per node")
        if forwards is None:
            forwards = np.isin(kinds, (int(NodeKind.NVSWITCH), int(NodeKind.SWITCH), int(NodeKind.CPU)))
        first = len(self._kind)
        ids = np.arange(first, first + len(kinds))
        self._kind.extend(kinds.tolist())
        self._name.extend(names)
        self._forwards.extend(np.asarray(forwards, dtype=bool).tolist())
        self._gpus.extend(ids[kinds == int(NodeKind.GPU)].tolist())
        return ids

    def add_gpu(self, name: str | None = None, forwards: bool = False) -> int:
        """Add the next GPU rank; its default name is ``gpu<rank>``."""
        return self.add_node(NodeKind.GPU, name or f"gpu{len(self._gpus)}", forwards)

    def _check_link(self, a: int, b: int, bandwidth: float, latency_ns: float) -> None:
        n = len(self._kind)
        if not (0 <= a < n and 0 <= b < n):
            raise InputError(f"link {a}->{b} names a node that does not exist (nodes are 0..{n - 1})", self.source)
        if a == b:
            raise InputError(f"link {a}->{b} connects a node to itself", self.source)
        if not bandwidth > 0:
            raise InputError(
                f"link {self._name[a]}->{self._name[b]} has bandwidth {bandwidth}; expected a positive value",
                self.source,
            )
        if not bandwidth <= MAX_BYTES / 1e9:  # also refuses NaN and inf
            raise InputError(
                f"link {self._name[a]}->{self._name[b]} has bandwidth {bandwidth} B/ns; expected a "
                f"finite value (at most {MAX_BYTES / 1e9:.3g})",
                self.source,
            )
        if latency_ns < 0:
            raise InputError(f"link {self._name[a]}->{self._name[b]} has negative latency {latency_ns}", self.source)
        if not latency_ns <= MAX_NS:
            raise InputError(
                f"link {self._name[a]}->{self._name[b]} has latency {latency_ns} ns; expected a "
                f"finite value (at most {MAX_NS:.3g})",
                self.source,
            )

    def add_link(self, a: int, b: int, bandwidth: float, latency_ns: float, tier: LinkTier) -> int:
        """Add one directed link ``a -> b`` (bytes per ns, ns) and return its id."""
        self._check_link(a, b, bandwidth, latency_ns)
        self._src.append(a)
        self._dst.append(b)
        self._bw.append(float(bandwidth))
        self._lat.append(float(latency_ns))
        self._tier.append(int(tier))
        return self.num_links - 1

    def add_links(
        self,
        a: np.ndarray,
        b: np.ndarray,
        bandwidth: float | np.ndarray,
        latency_ns: float | np.ndarray,
        tier: LinkTier | np.ndarray,
    ) -> np.ndarray:
        """Add directed links ``a[i] -> b[i]`` in order, as :meth:`add_link` one by one (the
        same checks, the first bad link's message); returns their ids."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        k = len(a)
        bw = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (k,))
        lat = np.broadcast_to(np.asarray(latency_ns, dtype=np.float64), (k,))
        tr = np.broadcast_to(np.asarray(tier, dtype=np.int64), (k,))
        n = len(self._kind)
        with np.errstate(invalid="ignore"):
            bad = (
                (a < 0)
                | (a >= n)
                | (b < 0)
                | (b >= n)
                | (a == b)
                | ~(bw > 0)
                | ~(bw <= MAX_BYTES / 1e9)
                | (lat < 0)
                | ~(lat <= MAX_NS)
            )
        if bad.any():
            i = int(np.argmax(bad))
            self._check_link(int(a[i]), int(b[i]), float(bw[i]), float(lat[i]))
        self._flush()
        first = self._chunked
        self._chunks.append((a.astype(np.int32), b.astype(np.int32), bw.copy(), lat.copy(), tr.astype(np.int8)))
        self._chunked += k
        return np.arange(first, first + k)

    def _flush(self) -> None:
        """Move the links added one at a time into a chunk."""
        if self._src:
            self._chunks.append(
                (
                    np.asarray(self._src, dtype=np.int32),
                    np.asarray(self._dst, dtype=np.int32),
                    np.asarray(self._bw, dtype=np.float64),
                    np.asarray(self._lat, dtype=np.float64),
                    np.asarray(self._tier, dtype=np.int8),
                )
            )
            self._chunked += len(self._src)
            self._src, self._dst, self._bw, self._lat, self._tier = [], [], [], [], []

    def add_duplex(self, a: int, b: int, bandwidth: float, latency_ns: float, tier: LinkTier, count: int = 1) -> None:
        """Add a full-duplex cable (two directed links) between ``a`` and ``b``.  ``count``
        parallel cables are merged into one link of ``count`` times the bandwidth."""
        self.add_link(a, b, bandwidth * count, latency_ns, tier)
        self.add_link(b, a, bandwidth * count, latency_ns, tier)

    def add_duplexes(self, a: np.ndarray, b: np.ndarray, bandwidth: float, latency_ns: float, tier: LinkTier) -> None:
        """:meth:`add_duplex` for each ``(a[i], b[i])`` in order: ``a[i] -> b[i]``, then back."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        self.add_links(np.stack([a, b], 1).ravel(), np.stack([b, a], 1).ravel(), bandwidth, latency_ns, tier)

    def build(self, gpu_type: str = "", check_connected: bool = True) -> Fabric:
        """Freeze the fabric; by default reject one in which some GPU cannot reach another."""
        if not self._gpus:
            raise InputError(f"fabric {self.name!r} has no GPUs", self.source)
        self._flush()
        cols = list(zip(*self._chunks)) if self._chunks else [[np.zeros(0, dtype=t)] for t in _LINK_TYPES]
        fab = Fabric(
            name=self.name,
            node_kind=np.asarray(self._kind, dtype=np.int8),
            node_name=tuple(self._name),
            forwards=np.asarray(self._forwards, dtype=bool),
            gpus=np.asarray(self._gpus, dtype=np.int32),
            gpus_per_node=self.gpus_per_node,
            link_src=np.concatenate(cols[0]).astype(np.int32),
            link_dst=np.concatenate(cols[1]).astype(np.int32),
            link_bw=np.concatenate(cols[2]).astype(np.float64),
            link_lat=np.concatenate(cols[3]).astype(np.float64),
            link_tier=np.concatenate(cols[4]).astype(np.int8),
            gpu_type=gpu_type,
            meta=dict(self.meta),
        )
        if check_connected:
            check_gpus_connected(fab, self.source)
        return fab


_LINK_TYPES = (np.int32, np.int32, np.float64, np.float64, np.int8)


def _reach(start: int, n: int, starts: np.ndarray, ends: np.ndarray, forwards: np.ndarray) -> np.ndarray:
    """Nodes reachable from ``start`` along links (CSR ``starts`` into the far ends ``ends``)
    whose intermediate nodes forward."""
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = np.array([start])
    while len(frontier):
        lo, hi = starts[frontier], starts[frontier + 1]
        cnt = hi - lo
        at = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
        nxt = ends[at]
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        fresh = np.zeros(n, dtype=bool)
        fresh[nxt] = True
        frontier = np.flatnonzero(fresh & forwards)  # only forwarding nodes pass a route on
    return seen


def check_gpus_connected(fab: Fabric, source: str | None = None) -> None:
    """Raise :class:`InputError` unless every GPU can reach every other GPU through links
    whose intermediate nodes forward."""
    n = fab.num_nodes
    start = int(fab.gpus[0])
    src = fab.link_src.astype(np.int64)
    dst = fab.link_dst.astype(np.int64)
    # reachable from GPU 0 (forward direction) and able to reach GPU 0 (reverse direction)
    for direction, own, far in (("from", src, dst), ("to", dst, src)):
        order = np.argsort(own, kind="stable")
        starts = np.concatenate(([0], np.cumsum(np.bincount(own, minlength=n))))
        seen = _reach(start, n, starts, far[order], fab.forwards)
        missing = fab.gpus[~seen[fab.gpus]].tolist()
        if missing:
            names = ", ".join(fab.node_name[g] for g in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            verb = "reach" if direction == "from" else "be reached from"
            raise InputError(
                f"fabric {fab.name!r} is disconnected: {fab.node_name[start]} cannot {verb} {names}{more}", source
            )
