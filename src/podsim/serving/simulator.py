"""Discrete-event simulation of serving, DLSIM's model made configurable.

Every GPU has a FIFO task queue; a GPU's *idle time* is when its last queued task ends (0 with
an empty queue) and its *event time* when its head task ends.  The event loop repeatedly runs
the entity with the earliest event time -- the GPUs in cluster order first, then the
scheduler, ties to the first -- until nothing is left:

* **arrivals**: open-loop ones as the workload lists them; a closed-loop client sends its first
  request at 0 and each next one an exponential think time (seeded) after its previous one is
  done or dropped, while the run lasts.
* **scheduler** (at each request's arrival, in arrival order): model ``m`` is served by the
  ``m``-th service of the placement; the scheduler (:mod:`.schedulers`) picks one of the
  service's replicas: ``fifo`` (DLSIM) the one whose first-stage mesh is idle soonest,
  ``round-robin`` (``rr``) them in turn, ``least-outstanding`` the one with the fewest requests
  in flight (ties: the first in the placement).  With ``drop_late``, a request whose predicted
  finish misses its SLO is dropped (AlpaServe).
* **a stage receives a request at t**: mesh idle time ``mi`` = the latest idle time of its GPUs;
  start = max(mi, t), plus the dispatch overhead when the mesh is busy (``mi`` > 0; DLSIM: 3 ms
  for a multi-stage executable, 4 ms for a single-stage one); the task (start, start + stage
  latency) is queued on every GPU of the mesh (intra-op stages occupy all their GPUs).
* **a GPU's head task ends**: it is popped; once every GPU of the stage has popped it, the
  request moves to the next stage at that time, or is done.

So requests overlap across pipeline stages, and meshes shared by several models serialize
them.  Times are integer ns.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .executable import Executable
from .placement import Placement, ServeCluster
from .schedulers import DEFAULT_SCHEDULER, QueueView, make_scheduler
from .workload import ClosedLoop, ServeWorkload

DLSIM_OVERHEAD_NS = (4_000_000, 3_000_000)  #: dispatch overhead on a busy mesh: (single-stage, multi-stage)


def parse_overhead(text: str) -> tuple[int, int]:
    """``--dispatch-overhead``: ``dlsim`` (:data:`DLSIM_OVERHEAD_NS`), ``none``, or a number of
    ms for every executable; returns (single-stage, multi-stage) ns.

    Raises:
        InputError: for anything else, or a negative or non-finite number.
    """
    t = text.strip().lower()
    if t == "dlsim":
        return DLSIM_OVERHEAD_NS
    if t == "none":
        return (0, 0)
    try:
        ms = float(t)
    except ValueError:
        ms = math.nan
    if not (math.isfinite(ms) and ms >= 0):
        raise InputError(
            f"expected dlsim, none or a finite number of ms >= 0, got {text!r}", where="--dispatch-overhead"
        )
    return (round(ms * 1e6),) * 2  # type: ignore[return-value]


@dataclass
class ServeResult:
    """What a serving simulation produced (ns).  ``finish_ns[i]`` is None for a dropped request;
    ``slices[g]`` are GPU g's tasks as (request, stage, start, end)."""

    arrival_ns: list[int]
    finish_ns: list[int | None]
    model_ids: list[int]
    executor_of: list[int]  #: placement entry that served each request (-1: dropped)
    slices: dict[int, list[tuple[int, int, int, int]]]
    cluster: ServeCluster
    placement: Placement
    workload: ServeWorkload
    scheduler: str  #: as the run was asked for (a name or an alias)
    notes: list[str] = field(default_factory=list)

    @property
    def makespan_ns(self) -> int:
        ends = [f for f in self.finish_ns if f is not None]
        return max(ends + self.arrival_ns + [0])

    def latencies_s(self, model: int | None = None) -> list[float]:
        """Latencies (s) of the completed requests (of one model)."""
        return [
            (f - a) / 1e9
            for f, a, m in zip(self.finish_ns, self.arrival_ns, self.model_ids)
            if f is not None and (model is None or m == model)
        ]


def simulate_serving(
    workload: ServeWorkload | ClosedLoop,
    placement: Placement,
    executables: dict[str, Executable],
    cluster: ServeCluster,
    *,
    scheduler: str = DEFAULT_SCHEDULER,
    overhead_ns: tuple[int, int] = DLSIM_OVERHEAD_NS,
    drop_late: bool = False,
) -> ServeResult:
    """Serve ``workload`` (open-loop arrivals, or closed-loop clients) on ``placement``
    (checked beforehand with :func:`podsim.serving.placement.check_placement`) under the
    scheduler named ``scheduler`` (:data:`podsim.serving.schedulers.SCHEDULERS`: a name or an
    alias).  The result's workload holds the arrivals that happened (a closed loop's are known
    only now).

    Raises:
        InputError: for an unknown scheduler (with the closest name), or a workload with more
            models than the placement has services.
    """
    picker = make_scheduler(scheduler)
    services = placement.services()
    if workload.num_models > len(services):
        raise InputError(
            f"the workload has {workload.num_models} models but the placement serves "
            f"{len(services)} ({', '.join(services)}): model i goes to the i-th service",
            placement.source,
        )
    replicas: list[list[int]] = [[k for k, e in enumerate(placement.executors) if e.service == s] for s in services]
    exes = [executables[e.executable] for e in placement.executors]
    meshes = [[tuple(cluster.gpu_index(n, d) for n, d in stage) for stage in e.stages] for e in placement.executors]
    n_gpus = cluster.num_gpus
    queues: list[deque[tuple[int, int, int, int]]] = [deque() for _ in range(n_gpus)]  # (req, stage, start, end)
    slices: dict[int, list[tuple[int, int, int, int]]] = {g: [] for g in range(n_gpus)}
    # arrivals: (time, order, model, client); open-loop ones all known, a closed-loop client's
    # next one is added when its previous request is done
    closed = isinstance(workload, ClosedLoop)
    incoming: list[tuple[int, int, int, int]] = []
    rng = None
    if closed:
        rng = np.random.default_rng(workload.seed)
        clients = [m for m, c in enumerate(workload.clients) for _ in range(c)]
        incoming = [(0, i, m, i) for i, m in enumerate(clients)]
    else:
        incoming = [(t, i, m, -1) for i, (t, m) in enumerate(zip(workload.arrivals_ns(), workload.model_ids))]
    heapq.heapify(incoming)
    order = len(incoming)
    arrivals: list[int] = []
    model_ids: list[int] = []
    client_of: list[int] = []
    finish: list[int | None] = []
    executor_of: list[int] = []
    pending: dict[tuple[int, int], int] = {}  # (request, stage) -> GPUs still running it
    outstanding = [0] * len(placement.executors)
    heap: list[tuple[float, int]] = []  # (event time, entity): GPUs 0..n-1, then the scheduler

    def idle(g: int) -> int:
        return queues[g][-1][3] if queues[g] else 0

    def mesh_idle(k: int, stage: int) -> int:
        return max(idle(g) for g in meshes[k][stage])

    def overhead(k: int) -> int:
        return overhead_ns[1] if exes[k].num_stages > 1 else overhead_ns[0]

    def receive(req: int, k: int, stage: int, t: int) -> None:
        mi = mesh_idle(k, stage)
        start = max(mi, t) + (overhead(k) if mi > 0 else 0)
        end = start + exes[k].stage_latencies_ns[stage]
        pending[(req, stage)] = len(meshes[k][stage])
        for g in meshes[k][stage]:
            if not queues[g]:
                heapq.heappush(heap, (end, g))
            queues[g].append((req, stage, start, end))

    def predicted_finish(k: int, t: int) -> int:
        """When a request arriving now would finish, from the queues as they are: a stage's
        overhead counts where its mesh is still busy when the request reaches it.  A heuristic:
        requests of other executors sharing a mesh may still get ahead of it."""
        for stage in range(exes[k].num_stages):
            mi = mesh_idle(k, stage)
            busy = mi > 0 if stage == 0 else mi > t
            t = max(mi, t) + (overhead(k) if busy else 0) + exes[k].stage_latencies_ns[stage]
        return t

    def done(req: int, t: int, backoff: int = 0) -> None:
        """A closed-loop client's request is done (or dropped) at ``t``: it thinks, then sends
        its next request, while the run lasts; after a drop it waits at least ``backoff`` (the
        dropped request's predicted latency), so the clock moves on."""
        nonlocal order
        c = client_of[req]
        if c < 0 or rng is None:
            return
        think = rng.exponential(workload.think_s) if workload.think_s > 0 else 0.0  # type: ignore[union-attr]
        nxt = t + max(round(think * 1e9), backoff)
        if nxt < workload.duration_s * 1e9:  # type: ignore[union-attr]
            heapq.heappush(incoming, (nxt, order, model_ids[req], c))
            order += 1
            if incoming[0][1] == order - 1:
                heapq.heappush(heap, (nxt, n_gpus))

    view = QueueView(mesh_idle, outstanding)

    def choose(req: int) -> int:
        m = model_ids[req]
        return picker.choose(m, replicas[m], view)

    if incoming:
        heapq.heappush(heap, (incoming[0][0], n_gpus))
    while heap:
        t, ent = heapq.heappop(heap)
        if ent == n_gpus:  # the scheduler: the next request arrives
            if not incoming or incoming[0][0] != t:
                continue  # stale entry (an earlier arrival was added since)
            _, _, m, c = heapq.heappop(incoming)
            req = len(arrivals)
            arrivals.append(int(t))
            model_ids.append(m)
            client_of.append(c)
            finish.append(None)
            executor_of.append(-1)
            k = choose(req)
            slo = workload.slos_s[m]
            predicted = predicted_finish(k, int(t)) if drop_late and math.isfinite(slo) else 0
            if predicted and predicted - int(t) > slo * 1e9:
                done(req, int(t), predicted - int(t))  # dropped: finish stays None
            else:
                executor_of[req] = k
                outstanding[k] += 1
                receive(req, k, 0, int(t))
            if incoming:
                heapq.heappush(heap, (incoming[0][0], n_gpus))
            continue
        q = queues[ent]
        if not q or q[0][3] != t:
            continue  # stale entry
        req, stage, start, end = q.popleft()
        slices[ent].append((req, stage, start, end))
        if q:
            heapq.heappush(heap, (q[0][3], ent))
        pending[(req, stage)] -= 1
        if pending[(req, stage)] == 0:
            del pending[(req, stage)]
            k = executor_of[req]
            if stage + 1 < exes[k].num_stages:
                receive(req, k, stage + 1, end)
            else:
                finish[req] = end
                outstanding[k] -= 1
                done(req, end)
    n = len(arrivals)
    notes = []
    dropped = sum(1 for k in executor_of if k < 0)
    if dropped:
        notes.append(f"{dropped} of {n} requests dropped: their predicted finish missed the SLO")
    if closed:
        wl = workload
        workload = ServeWorkload(
            model_ids,
            [a / 1e9 for a in arrivals],
            wl.num_models,  # type: ignore[union-attr]
            n / wl.duration_s,
            [c / max(sum(wl.clients), 1) for c in wl.clients],
            wl.duration_s,
            list(wl.slos_s),
            wl.name,
        )
        notes.append(
            f"closed loop: {sum(wl.clients)} clients, {wl.think_s * 1e3:g} ms mean think time: "
            f"{n} requests in {wl.duration_s:g} s"
        )
    return ServeResult(arrivals, finish, model_ids, executor_of, slices, cluster, placement, workload, scheduler, notes)  # type: ignore[arg-type]
