"""ASTRA-sim's workload layer for one rank: issue dependency-free ops in op order when their
hardware resource is free (one CPU op, one GPU compute op and one other GPU op -- collective,
send, memory load/store -- in flight; receives are exempt), and finish when nothing is left.

Statistics kept per rank (ns): ``finish``, ``gpu_ops`` (sum of GPU compute durations, as
ASTRA-sim's exposed-communication figure uses), ``cpu_ops``, and the intervals of compute and
communication ops for the union-based figures.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..arrays import unique
from ..errors import InputError
from ..intervals import length, merged
from ..workload import NO_VALUE, SEGMENTS, CollectiveKind, OpKind, Program, Workload
from .buckets import RankBuckets
from .system import RankSystem

CPU, GPU_COMP, GPU_COMM, NONE = 0, 1, 2, 3
_COMPUTE, _COLLECTIVE, _NOOP = int(OpKind.COMPUTE), int(OpKind.COLLECTIVE), int(OpKind.NOOP)
_KIND_OF: dict[int, CollectiveKind] = {}


class RankRunner:
    """Runs one rank's program (or one representative of equivalent ranks)."""

    def __init__(
        self,
        rank: int,
        workload: Workload,
        program: Program,
        system: RankSystem,
        buckets: RankBuckets,
        compute_ns: Callable[[Program, int], int],
        remote_mem: Callable[[int, int, int, Callable[[], None]], None] | None,
        record: bool = False,
        use_ctrl_deps: bool = True,
        per_stream: bool = False,
        plans: dict[tuple[int, bool, bool], "ProgramPlan"] | None = None,
    ) -> None:
        self.rank = rank
        self.w = workload
        self.p = program
        self.sys = system
        self.buckets = buckets
        self.compute_ns = compute_ns
        self.remote_mem = remote_mem
        n = len(program)
        key = (id(program), use_ctrl_deps, per_stream)
        plan = plans.get(key) if plans is not None else None
        if plan is None:
            plan = ProgramPlan(program, use_ctrl_deps, per_stream)
            if plans is not None:
                plans[key] = plan
        self.pending_deps = plan.pending_deps[:]
        self.child_ptr = plan.child_ptr
        self.children = plan.children
        self.free: list[int] = plan.free[:]
        self.ongoing = 0
        self.done = 0
        self.finished = False
        self.finish_ns = 0
        self.gpu_ops_ns = 0
        self.cpu_ops_ns = 0
        self.record = record
        self.starts = [0] * n
        self.ends = [0] * n
        self.resource = plan.resource
        self.slot = plan.slot
        self.in_flight = [0] * plan.slots
        self.kinds = plan.kinds
        self._replay = plan.replay
        self._cpu = plan.cpu
        self._coll_kind = plan.coll_kind
        self._coll_group = plan.coll_group
        self._size = plan.size
        self._prio = plan.prio
        self._nid = plan.nid
        self._group_cache: dict[int, tuple] = {}
        self.replay_all = False
        self._comm_part = plan.comm_part

    # -- issue loop ------------------------------------------------------------------------
    def fire(self) -> None:
        self.call()

    def _available(self, i: int) -> bool:
        r = self.slot[i]
        if r == NONE:
            return True
        return self.in_flight[r] == 0

    def issue_free(self) -> None:
        snapshot = self.free[:]
        for i in snapshot:
            if self._available(i):
                self.issue(i)

    def issue(self, i: int) -> None:
        self.free.remove(i)
        self.ongoing += 1
        r = self.slot[i]
        if r != NONE:
            self.in_flight[r] += 1
        now = self.buckets.queue.now
        self.starts[i] = now
        kind = self.kinds[i]
        p = self.p
        if kind == _COMPUTE or ((self.replay_all or self._replay[i]) and kind != _NOOP):
            ns = self.compute_ns(p, i)
            if ns < 0:  # a roofline op with no tensor size: skipped as invalid
                self._finish(i)
                return
            if self._cpu[i]:
                self.cpu_ops_ns += ns
            else:
                self.gpu_ops_ns += ns - self._comm_part.get(i, 0) if self._comm_part else ns
            self.buckets.register(ns, lambda: self.call(i))
        elif kind == _COLLECTIVE:
            self._collective(i)
        elif kind == OpKind.SEND:
            self.sys.msg.send(
                self.rank, p.peer_of(i, self.rank), int(p.size_bytes[i]), int(p.tag[i]), lambda: self.call(i)
            )
        elif kind == OpKind.RECV:
            self.sys.msg.recv(
                self.rank, p.peer_of(i, self.rank), int(p.size_bytes[i]), int(p.tag[i]), lambda: self.call(i)
            )
        elif kind in (OpKind.MEM_LOAD, OpKind.MEM_STORE):
            if self.remote_mem is None:
                raise InputError(
                    f"rank {self.rank} node {int(p.node_id[i])}: memory node needs a remote memory "
                    "model (NO_MEMORY_EXPANSION)",
                    where="--remote-memory-configuration",
                )
            self.remote_mem(self.rank, int(p.size_bytes[i]), int(p.kind[i]), lambda: self.call(i))
        else:  # NOOP: metadata / invalid nodes finish at once
            self._finish(i)

    def _collective(self, i: int) -> None:
        call = self._collective_call(i)
        if call[0] is None:  # a replayed broadcast
            self.buckets.register(call[1], lambda: self.call(i))
            return
        kind, size, involved, group, key, prio, nid, name = call
        self.sys.generate(kind, size, involved, group, key, prio, lambda _ns: self.call(i), nid, name)

    def _collective_call(self, i: int) -> tuple:
        """What op ``i`` asks of the system layer."""
        p = self.p
        code = self._coll_kind[i]
        kind = _KIND_OF.get(code)
        if kind is None:
            kind = _KIND_OF[code] = CollectiveKind(code)
        if kind == CollectiveKind.BROADCAST:
            if int(p.duration_ns[i]) > 0:  # replayed for its recorded duration, as ASTRA-sim does
                return (None, int(p.duration_ns[i]))
            # no recorded duration (a traced broadcast loads as -1): timed as an all-gather of
            # its size, which moves the same bytes per link as a pipelined ring broadcast
            kind = CollectiveKind.ALL_GATHER
        if kind not in (
            CollectiveKind.ALL_REDUCE,
            CollectiveKind.ALL_GATHER,
            CollectiveKind.REDUCE_SCATTER,
            CollectiveKind.ALL_TO_ALL,
        ):
            raise InputError(
                f"rank {self.rank} node {int(p.node_id[i])}: collective {kind.name} is not "
                "supported (ASTRA-sim supports ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
                "ALL_TO_ALL and replays BROADCAST)",
                where="comm_type",
            )
        g = self._coll_group[i]
        group = None
        key = None
        if g != NO_VALUE:
            hit = self._group_cache.get(g)
            if hit is None:
                key = p.group_keys[g]
                grp = self.w.group_of(key, self.rank)
                if grp is None:
                    raise InputError(
                        f"rank {self.rank} node {int(p.node_id[i])}: communicator group {key!r} "
                        "not found in the comm-group configuration (give it with "
                        "--comm-group-configuration FILE; podsim reads PREFIX.comm_groups.json "
                        "beside PREFIX.<rank>.et by itself)",
                        where="pg_name",
                    )
                hit = self._group_cache[g] = (key, tuple(grp.ranks) if len(grp.ranks) != self.sys.total_npus else None)
            key, group = hit
        extra = p.extras.get(i)
        involved = extra.get("involved_dim") if extra else None
        return (
            kind,
            self._size[i],
            involved,
            group,
            key,
            self._prio[i],
            self._nid[i],
            p.names[i] or f"node {self._nid[i]}",
        )

    # -- completion ------------------------------------------------------------------------
    def _finish(self, i: int) -> None:
        self.ongoing -= 1
        r = self.slot[i]
        if r != NONE:
            self.in_flight[r] -= 1
        self.ends[i] = self.buckets.queue.now
        self.done += 1
        for k in range(self.child_ptr[i], self.child_ptr[i + 1]):
            c = self.children[k]
            self.pending_deps[c] -= 1
            if self.pending_deps[c] == 0:
                self._add_free(c)

    def _add_free(self, c: int) -> None:
        lo, hi = 0, len(self.free)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.free[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        self.free.insert(lo, c)

    def call(self, i: int | None = None) -> None:
        """A completion (or the start, with ``i`` None): ASTRA-sim's Workload::call."""
        if self.finished:
            return
        if i is not None:
            self._finish(i)
        self.issue_free()
        # ASTRA-sim does not re-scan the ready ops after ops that finish at once (metadata
        # and invalid nodes), so their children wait for the next completion.  When nothing
        # else is in flight there is no next completion and ASTRA-sim never finishes the
        # rank; podsim re-scans in that case only (documented deviation).
        while self.free and self.ongoing == 0:
            before = self.done
            self.issue_free()
            if self.done == before:
                break
        if not self.free and self.ongoing == 0 and not any(self.in_flight):
            self.finished = True
            self.finish_ns = self.buckets.queue.now


class ProgramPlan:
    """What every runner of one program shares (read-only): dependencies as child lists,
    resource slots and the op columns as lists.  :func:`podsim.engine.simulate` builds one per
    program and run, not one per rank."""

    def __init__(self, program: Program, use_ctrl_deps: bool, per_stream: bool) -> None:
        n = len(program)
        # ASTRA-sim's FeederV3 resolves data and control dependencies alike, each parent once
        child, parent = _edges(program, use_ctrl_deps and program.ctrl_deps_order)
        self.pending_deps: list[int] = np.bincount(child, minlength=n).tolist()
        order = np.lexsort((child, parent))  # by parent, then child
        self.children: list[int] = child[order].tolist()
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(parent, minlength=n), out=ptr[1:])
        self.child_ptr: list[int] = ptr.tolist()
        self.free: list[int] = [i for i, d in enumerate(self.pending_deps) if d == 0]
        kinds = program.kind
        # ASTRA-sim's HardwareResource: CPU ops share one CPU slot; GPU compute ops one compute
        # slot; every other GPU node (collectives, sends, memory loads/stores, and metadata or
        # invalid nodes, which hold it only for the instant they take) one communication slot;
        # receives take none.
        recv, comp = int(OpKind.RECV), int(OpKind.COMPUTE)
        self.resource = [
            NONE if k == recv else CPU if c else GPU_COMP if k == comp else GPU_COMM
            for k, c in zip(kinds.tolist(), program.is_cpu.tolist())
        ]
        # ASTRA-sim has one slot of each kind per rank; with per_stream, each of the program's
        # streams has its own slots (a trace's or generator's separate CUDA streams)
        streams = program.stream.tolist() if per_stream else [0] * n
        self.slot = [r + 3 * st if r != NONE else NONE for r, st in zip(self.resource, streams)]
        self.slots = 3 * (max(streams, default=0) + 1)
        self.kinds = kinds.tolist()
        self.replay = program.replay_only.tolist()
        self.cpu = program.is_cpu.tolist()
        self.coll_kind = program.collective.tolist()
        self.coll_group = program.group.tolist()
        self.size = program.size_bytes.tolist()
        self.prio = program.priority.tolist()
        self.nid = program.node_id.tolist()
        # fused ops (a generator's compute + closed-form collectives): their collective parts
        # are communication, not GPU compute -- the op's time outside its compute segments
        # (a collective that runs beside a kernel overlaps it)
        durations = program.duration_ns
        self.comm_part = {
            i: int(durations[i]) - _compute_length(e[SEGMENTS])  # type: ignore[arg-type]
            for i, e in program.extras.items()
            if SEGMENTS in e
        }


def _edges(program: Program, use_ctrl: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every (op, parent) dependency once, data and control alike if asked: two int64 arrays,
    sorted by op then parent."""
    n = len(program)
    dp, di = np.asarray(program.data_ptr, dtype=np.int64), np.asarray(program.data_idx, dtype=np.int64)
    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(dp))
    parent = di
    if use_ctrl:
        cp, ci = np.asarray(program.ctrl_ptr, dtype=np.int64), np.asarray(program.ctrl_idx, dtype=np.int64)
        child = np.concatenate((child, np.repeat(np.arange(n, dtype=np.int64), np.diff(cp))))
        parent = np.concatenate((parent, ci))
    pairs = unique(child * max(n, 1) + parent)
    return pairs // max(n, 1), pairs % max(n, 1)


def _compute_length(segments: list[tuple]) -> int:
    """The time (ns) a fused op's compute parts cover: their durations' sum where they follow
    one another without overlapping (as generators write them), else their union."""
    total, end = 0, None
    for seg in segments:
        if seg[3] != "compute":
            continue
        a, d = seg[0], seg[1]
        if d <= 0 or (end is not None and a < end):
            return length(merged([(x[0], x[0] + x[1]) for x in segments if x[3] == "compute"]))
        total += d
        end = a + d
    return total
