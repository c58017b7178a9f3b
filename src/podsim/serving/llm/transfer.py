"""KV-cache transfers from prefill to decode replicas over the cluster's fabric (prefill/decode
disaggregation).

Replicas take whole servers' GPUs in order: replica ``r`` of ``g`` GPUs (TP x PP) is GPUs
``r g .. r g + g - 1`` of the fabric (prefill replicas first, then decode replicas).  A request's
KV cache moves GPU to GPU: the prefill replica's GPU ``i`` (its TP shard of its stage's layers)
sends ``kv bytes per token x prompt tokens`` to the decode replica's GPU ``i``, all ``g`` flows at
once; the transfer is done when the last arrives.  With the ``flow`` backend every flow is a flow
of :class:`~podsim.network.flow.network.FlowNetwork` on the caller's clock, so transfers that
overlap share links max-min fairly (they contend); ``analytical`` gives each flow the
congestion-free time of its route (latency + bytes / bottleneck).  Units: bytes, ns.
"""

from __future__ import annotations

from collections.abc import Callable

from ...collectives.nccl.planner import FabricDelay
from ...collectives.nccl.timing import Timer
from ...errors import InputError
from ...hardware.cluster import ClusterSpec, build_fabric
from ...network.fabric import Fabric
from ...network.flow.network import Clock, FlowNetwork


class KVTransfers:
    """Moves KV caches between replicas of ``gpus_per_replica`` GPUs on ``cluster``."""

    def __init__(
        self, cluster: ClusterSpec, replicas: int, gpus_per_replica: int, clock: Clock, backend: str = "flow"
    ) -> None:
        if backend not in ("flow", "analytical"):
            raise InputError(
                f"the KV transfer backend must be flow or analytical, got {backend!r}", where="--pd-backend"
            )
        self.gpus_per_replica = gpus_per_replica
        self.clock = clock
        self.backend = backend
        self.fabric: Fabric = build_fabric(cluster, replicas * gpus_per_replica)
        timer = Timer(self.fabric, cluster.nccl, "analytical")
        self._delay = FabricDelay(self.fabric, timer)
        self._net = None
        if backend == "flow":
            self._net = FlowNetwork(self.fabric, clock, router=timer.router)
        self.transfers = 0
        self.bytes = 0

    def gpus_of(self, replica: int) -> range:
        """The fabric GPUs of ``replica``."""
        g = self.gpus_per_replica
        return range(replica * g, replica * g + g)

    def start(self, nbytes_per_gpu: int, src: int, dst: int, on_done: Callable[[], None]) -> None:
        """Send ``nbytes_per_gpu`` from each GPU of replica ``src`` to the same GPU of replica
        ``dst``; ``on_done()`` runs (on the clock) when every byte has arrived."""
        if src == dst or nbytes_per_gpu <= 0:
            self.clock.schedule(self.clock.now, lambda _a: on_done(), None)
            return
        self.transfers += 1
        self.bytes += nbytes_per_gpu * self.gpus_per_replica
        pairs = list(zip(self.gpus_of(src), self.gpus_of(dst)))
        if self._net is None:
            t = max(self._delay.delay_ns(a, b, nbytes_per_gpu) for a, b in pairs)
            self.clock.schedule(self.clock.now + t, lambda _a: on_done(), None)
            return
        left = [len(pairs)]

        def one_done() -> None:
            left[0] -= 1
            if left[0] == 0:
                on_done()

        for a, b in pairs:
            self._net.start(a, b, nbytes_per_gpu, one_done)
