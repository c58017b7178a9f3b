"""Direct-connect fabrics, in which GPUs are the routers: tori and TrioSim's optical mesh.

* Torus: GPUs on a ``d1 x d2 (x d3)`` grid (dimension 0 fastest), each linked to its
  neighbours along every dimension with wraparound; a dimension of size 2 gets one cable,
  not two.  ``bandwidth`` is per cable per direction.
* Optical 2-D mesh (TrioSim ``-interconnects 1``): ``rows x cols`` GPUs, neighbours linked,
  no wraparound; 64 GB/s and 20 ns per hop by default, at most ``max_ports`` links per chip.

Units: bytes per ns, ns.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from .fabric import FabricBuilder, LinkTier


def _grid_links(
    b: FabricBuilder, gpus: list[int], dims: list[int], bw: float, lat: float, wrap: bool, tier: LinkTier
) -> None:
    """Each GPU's cable to its next neighbour along every dimension (the last one wrapping
    round to the first where ``wrap`` and the dimension has more than 2), GPU by GPU."""
    ids = np.asarray(gpus, dtype=np.int64)
    idx = np.arange(len(ids))
    strides = [math.prod(dims[:i]) for i in range(len(dims))]
    to = np.full((len(ids), len(dims)), -1, dtype=np.int64)  # GPU, dimension
    for d, (size, stride) in enumerate(zip(dims, strides)):
        pos = (idx // stride) % size
        nxt = np.where(pos + 1 < size, idx + stride, np.where(wrap and size > 2, idx - pos * stride, -1))
        to[:, d] = nxt
    has = to >= 0
    a = np.broadcast_to(ids[:, None], to.shape)[has]
    b.add_duplexes(a, ids[to[has]], bw, lat, tier)


def attach_torus_cluster(b: FabricBuilder, num_gpus: int, dims: list[int], bandwidth: float, latency_ns: float) -> None:
    """Add ``num_gpus`` forwarding GPUs as a 2-D or 3-D torus of shape ``dims``."""
    if not dims:
        raise InputError("a torus needs 'dims', e.g. [4, 4] or [4, 4, 4]", where="inter_node.dims")
    if len(dims) not in (1, 2, 3) or any(not isinstance(x, int) or x < 1 for x in dims):
        raise InputError(f"expected 1 to 3 positive integer sizes, got {dims}", where="inter_node.dims")
    if math.prod(dims) != num_gpus:
        raise InputError(
            f"a {'x'.join(map(str, dims))} torus holds {math.prod(dims)} GPUs, not {num_gpus}", where="inter_node.dims"
        )
    gpus = [b.add_gpu(forwards=True) for _ in range(num_gpus)]
    _grid_links(b, gpus, list(dims), bandwidth, latency_ns, True, LinkTier.FABRIC)
    b.meta.update(inter_node="torus", dims=list(dims))


def attach_optical_mesh(
    b: FabricBuilder,
    num_gpus: int,
    rows: int,
    bandwidth: float = 64.0,
    hop_latency_ns: float = 20.0,
    max_ports: int = 8,
) -> None:
    """Add ``num_gpus`` forwarding GPUs as TrioSim's ``rows x cols`` optical mesh."""
    if rows < 1 or num_gpus % rows:
        raise InputError(f"{num_gpus} GPUs do not fill {rows} rows", where="inter_node.rows")
    cols = num_gpus // rows
    if 4 > max_ports:
        raise InputError(f"a 2-D mesh needs up to 4 ports per chip, max_ports is {max_ports}")
    gpus = [b.add_gpu(forwards=True) for _ in range(num_gpus)]
    _grid_links(b, gpus, [cols, rows], bandwidth, hop_latency_ns, False, LinkTier.OPTICAL)
    b.meta.update(inter_node="optical_mesh", rows=rows, cols=cols)
