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
        self._src: list[int] = []
        self._dst: list[int] = []
        self._bw: list[float] = []
        self._lat: list[float] = []
        self._tier: list[int] = []
        self.meta: dict = {}

    @property
    def num_nodes(self) -> int:
        return len(self._kind)

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

    def add_gpu(self, name: str | None = None, forwards: bool = False) -> int:
        """Add the next GPU rank; its default name is ``gpu<rank>``."""
        return self.add_node(NodeKind.GPU, name or f"gpu{len(self._gpus)}", forwards)

    def add_link(self, a: int, b: int, bandwidth: float, latency_ns: float, tier: LinkTier) -> int:
        """Add one directed link ``a -> b`` (bytes per ns, ns) and return its id."""
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
        self._src.append(a)
        self._dst.append(b)
        self._bw.append(float(bandwidth))
        self._lat.append(float(latency_ns))
        self._tier.append(int(tier))
        return len(self._src) - 1

    def add_duplex(self, a: int, b: int, bandwidth: float, latency_ns: float, tier: LinkTier, count: int = 1) -> None:
        """Add a full-duplex cable (two directed links) between ``a`` and ``b``.  ``count``
        parallel cables are merged into one link of ``count`` times the bandwidth."""
        self.add_link(a, b, bandwidth * count, latency_ns, tier)
        self.add_link(b, a, bandwidth * count, latency_ns, tier)

    def build(self, gpu_type: str = "", check_connected: bool = True) -> Fabric:
        """Freeze the fabric; by default reject one in which some GPU cannot reach another."""
        if not self._gpus:
            raise InputError(f"fabric {self.name!r} has no GPUs", self.source)
        fab = Fabric(
            name=self.name,
            node_kind=np.asarray(self._kind, dtype=np.int8),
            node_name=tuple(self._name),
            forwards=np.asarray(self._forwards, dtype=bool),
            gpus=np.asarray(self._gpus, dtype=np.int32),
            gpus_per_node=self.gpus_per_node,
            link_src=np.asarray(self._src, dtype=np.int32),
            link_dst=np.asarray(self._dst, dtype=np.int32),
            link_bw=np.asarray(self._bw, dtype=np.float64),
            link_lat=np.asarray(self._lat, dtype=np.float64),
            link_tier=np.asarray(self._tier, dtype=np.int8),
            gpu_type=gpu_type,
            meta=dict(self.meta),
        )
        if check_connected:
            check_gpus_connected(fab, self.source)
        return fab


def check_gpus_connected(fab: Fabric, source: str | None = None) -> None:
    """Raise :class:`InputError` unless every GPU can reach every other GPU through links
    whose intermediate nodes forward."""
    n = fab.num_nodes
    out = fab.out_links()
    start = int(fab.gpus[0])
    # reachable from GPU 0 (forward direction) and able to reach GPU 0 (reverse direction)
    for direction in ("from", "to"):
        seen = np.zeros(n, dtype=bool)
        seen[start] = True
        stack = [start]
        if direction == "to":
            rev: list[list[int]] = [[] for _ in range(n)]
            for s, d in zip(fab.link_src.tolist(), fab.link_dst.tolist()):
                rev[d].append(s)
        while stack:
            u = stack.pop()
            if u != start and not fab.forwards[u]:
                continue
            nbrs = fab.link_dst[out[u]].tolist() if direction == "from" else rev[u]
            for v in nbrs:
                if not seen[v]:
                    seen[v] = True
                    stack.append(v)
        missing = [int(g) for g in fab.gpus if not seen[g]]
        if missing:
            names = ", ".join(fab.node_name[g] for g in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            verb = "reach" if direction == "from" else "be reached from"
            raise InputError(
                f"fabric {fab.name!r} is disconnected: {fab.node_name[start]} cannot {verb} {names}{more}", source
            )
