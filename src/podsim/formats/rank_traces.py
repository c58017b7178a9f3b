"""A parallel job traced rank by rank (``podsim trace --world-size N --layout ...``), read into one
multi-rank workload.

The folder holds ``capture.json`` (``world_size``, ``layout``, ``ranks_traced``) and, for each
traced rank ``r``, ``kineto.<r>.json`` (the profiled step; ``podsim::<kind>#<seq>`` ranges mark
where each call was issued, ``podsim::wait#<seq>`` where the program waited for one) and
``comms.<r>.json`` (the calls: kind, bytes, group, global ranks, peer, call site).

**One rank's program**: the step's host timeline on the main thread, cut at every top-level op,
every call and every wait.  Each piece is a host op lasting until the next cut (so host gaps are
kept) and keeps the name of the top-level op it belongs to; a call becomes a collective (or a
send / receive) issued when the host reaches it, on a stream of its group; the time the program
spent inside a wait is dropped and the piece after it waits for the call instead, so a faster
or slower network moves the rest of the step.  On a CUDA trace the host pieces launch the work:
kernels run on their streams once the piece that launched them has begun; a call also waits for
the GPU work launched before it (NCCL orders it after its inputs), and a wait holds the streams'
later kernels, not the host (NCCL's ``wait`` makes the stream wait).

**The job**: every rank of the world runs the program of the traced rank at its ``(pp, tp)``
coordinate.  Each group is rebuilt around each rank (the mesh dimensions its members span), a
peer of a send or receive keeps its offset along the mesh, and ranks of a group must issue the
same calls on it in the same order (else an error names the ranks and call sites).  The data-
parallel degree may differ from the traced one (``gpus``): groups grow or shrink with it.
Units: ns and bytes.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..workload import CollectiveKind, Group, OpKind, Program, ProgramBuilder, Workload
from ..workload.mesh import DIMS, MeshLayout, layout_from_json
from .pytorch_trace import load_json_object, read_kineto, step_window, top_level_ops

_KINDS = {
    "all_reduce": CollectiveKind.ALL_REDUCE,
    "all_gather": CollectiveKind.ALL_GATHER,
    "reduce_scatter": CollectiveKind.REDUCE_SCATTER,
    "all_to_all": CollectiveKind.ALL_TO_ALL,
    "broadcast": CollectiveKind.BROADCAST,
    "reduce": CollectiveKind.REDUCE,
    "gather": CollectiveKind.GATHER,
    "scatter": CollectiveKind.SCATTER,
    "barrier": CollectiveKind.BARRIER,
}
_P2P = ("send", "recv")
_MARK = re.compile(r"^podsim::([a-z_]+)#(\d+)$")


def is_rank_trace(folder: str | Path) -> bool:
    """Whether ``folder`` is a rank-by-rank trace (``capture.json`` with ``world_size`` and
    ``comms.<rank>.json`` files)."""
    p = Path(folder)
    info = p / "capture.json"
    if not (p.is_dir() and info.is_file() and any(p.glob("comms.[0-9]*.json"))):
        return False
    try:
        return "world_size" in json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


@dataclass
class Call:
    """One recorded call of a rank's step."""

    seq: int
    kind: str
    size: int
    group: str  #: the group's key (``<desc> <name>``)
    ranks: tuple[int, ...]
    site: str
    peer: int | None = None
    tag: int = 0


def read_calls(path: str | Path) -> list[Call]:
    """The calls of ``comms.<rank>.json``.

    Raises:
        InputError: for a malformed file, naming the call and field.
    """
    p = Path(path)
    calls = load_json_object(p, "comms").get("calls")
    if not isinstance(calls, list):
        raise InputError("expected {rank, coords, calls: [...]}", str(p), "calls")
    # a group's key: its description (``mesh_dp``: the same on every rank, while torch numbers
    # each rank's groups apart) when the rank has one group of that description, else both
    names: dict[str, set[str]] = {}
    for c in calls:
        if isinstance(c, dict):
            names.setdefault(str(c.get("group_desc") or "pg"), set()).add(str(c.get("group", "?")))

    def group_key(desc: str, name: str) -> str:
        return desc if len(names[desc]) == 1 and desc not in ("pg", "undefined") else f"{desc} {name}"

    out = []
    for i, c in enumerate(calls):
        where = f"calls[{i}]"
        if not isinstance(c, dict):
            raise InputError("expected a call object", str(p), where)
        kind = c.get("kind")
        if kind not in _KINDS and kind not in _P2P:
            raise InputError(
                f"unknown kind {kind!r}; expected one of {', '.join(list(_KINDS) + list(_P2P))}",
                str(p),
                f"{where}.kind",
            )
        for key in ("seq", "bytes"):
            if isinstance(c.get(key), bool) or not isinstance(c.get(key), int) or c[key] < 0:
                raise InputError(f"expected a whole number >= 0, got {c.get(key)!r}", str(p), f"{where}.{key}")
        ranks = c.get("ranks")
        if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) and r >= 0 for r in ranks):
            raise InputError(f"expected a list of global ranks, got {ranks!r}", str(p), f"{where}.ranks")
        peer = c.get("peer")
        if kind in _P2P and (not isinstance(peer, int) or peer < 0):
            raise InputError(f"a {kind} needs a peer rank, got {peer!r}", str(p), f"{where}.peer")
        group = group_key(str(c.get("group_desc") or "pg"), str(c.get("group", "?")))
        out.append(
            Call(
                c["seq"],
                kind,
                c["bytes"],
                group,
                tuple(ranks),
                str(c.get("site", "?")),
                peer if kind in _P2P else None,
                int(c.get("tag", 0) or 0),
            )
        )
    return out


def _marks(k: Any, lo: float, hi: float) -> list[tuple[str, int, float, float]]:
    """podsim's marks in the step ``[lo, hi)`` of a Kineto trace: ``(kind or "wait", seq, ts, dur)``
    (us)."""
    out = []
    for a in k.annotations:
        m = _MARK.match(a.name)
        if m and lo <= a.ts < hi:
            out.append((m.group(1), int(m.group(2)), a.ts, a.dur))
    return out


def rank_program(kineto: str | Path, calls: list[Call], rank: int, comm_ns: dict[int, int] | None = None) -> Program:
    """One traced rank's program (see the module docstring).  ``comm_ns`` (call seq -> ns):
    replay each call for that time instead of simulating it (a real capture's measured times).

    Raises:
        InputError: for a trace without a step or host ops, or a call the trace does not mark.
    """
    k = read_kineto(kineto)
    lo, hi, step = step_window(k)
    host = [o for o in k.host_ops if lo <= o.ts < hi and not o.name.startswith("ProfilerStep#")]
    if not host:
        raise InputError("the profiled step has no host ops", k.source)
    main_tid = step.tid if step is not None else host[0].tid
    top = [o for o in top_level_ops(host) if o.tid == main_tid]
    by_seq = {c.seq: c for c in calls}
    issues: dict[int, float] = {}
    waits: list[tuple[float, float, int]] = []
    for what, seq, ts, dur in _marks(k, lo, hi):
        if what == "wait":
            waits.append((ts, dur, seq))
        elif seq in by_seq:
            issues[seq] = ts
    missing = [c.seq for c in calls if c.seq not in issues]
    if missing:
        raise InputError(
            f"calls {missing[:5]} of the comms file are not marked in the trace (podsim::<kind>#<seq>):"
            " the two files come from different runs",
            k.source,
        )
    # the cuts, in time order: (time, order, what, payload); at one time a wait's end comes
    # after calls issued there, an op's start first
    events: list[tuple[float, int, str, Any]] = [(o.ts, 0, "op", o.name) for o in top]
    events += [(ts, 1, "issue", seq) for seq, ts in issues.items()]
    events += [(ts, 2, "wait", (dur, seq)) for ts, dur, seq in waits if seq in issues]
    events.sort(key=lambda e: (e[0], e[1]))
    optimizer = sorted(
        (a.ts, a.ts + a.dur) for a in k.annotations + host if a.name.startswith("Optimizer.step") and lo <= a.ts < hi
    )
    on_host = bool(k.gpu)  # a CUDA trace: host ops launch the GPU's work; a CPU trace: they are the work
    b = ProgramBuilder(Path(kineto).stem)
    cur, name = lo, "host (before the first op)"
    prev: list[int] = []
    pending: list[int] = []
    comm_idx: dict[int, int] = {}
    seg_start: list[float] = []
    seg_idx: list[int] = []
    stream_waits: list[tuple[float, int]] = []  # (when the host waited, the call) on a CUDA trace

    def segment(until: float) -> None:
        nonlocal prev, pending
        if until > cur:
            deps = prev + pending
            idx = b.add(
                OpKind.COMPUTE,
                name,
                data_deps=deps,
                duration_ns=max(1, round((until - cur) * 1000)),
                is_cpu=on_host,
                stream="host",
                extra={
                    "layer": name.removeprefix("autograd::engine::evaluate_function: "),
                    "stage": _stage(name, cur, optimizer),
                },
            )
            seg_start.append(cur)
            seg_idx.append(idx)
            prev, pending = [idx], []

    for t, _, what, payload in events:
        t = min(max(t, lo), hi)
        if t < cur:  # inside a dropped wait: the cut moves to its end
            t = cur
        segment(t)
        cur = max(cur, t)
        if what == "op":
            name = payload
        elif what == "issue":
            comm_idx[payload] = _call_op(b, by_seq[payload], rank, prev, comm_ns)
        else:
            dur, seq = payload
            if on_host:  # CUDA: the wait makes the GPU's stream wait, not the host
                stream_waits.append((t, comm_idx[seq]))
            else:
                pending.append(comm_idx[seq])
            cur = max(cur, min(t + dur, hi))
    segment(hi)
    if pending:  # waits at the very end of the step: a last host op finishes after them
        b.add(
            OpKind.COMPUTE,
            "host (after the last wait)",
            data_deps=prev + pending,
            duration_ns=1,
            is_cpu=on_host,
            stream="host",
        )
    launched = _gpu_events(b, k, lo, hi, seg_start, seg_idx, stream_waits)
    if launched:  # CUDA: a call starts once the GPU work launched before it is done (NCCL's stream order)
        times = [t for t, _ in launched]
        for seq, idx in comm_idx.items():
            j = bisect.bisect_left(times, issues[seq]) - 1
            if j >= 0:
                b.add_deps(idx, [launched[j][1]])
    prog = b.build()
    prog.relative_peers = True
    return prog


def _stage(name: str, ts: float, optimizer: list[tuple[float, float]]) -> str:
    """forward, backward or optimizer: what a host op at ``ts`` (us) was doing."""
    j = bisect.bisect_right(optimizer, (ts, float("inf"))) - 1
    if j >= 0 and optimizer[j][0] <= ts < optimizer[j][1]:
        return "optimizer"
    return "backward" if name.startswith("autograd::engine::evaluate_function") or "Backward" in name else "forward"


def _call_op(b: ProgramBuilder, c: Call, rank: int, deps: list[int], comm_ns: dict[int, int] | None) -> int:
    extra = {"site": c.site, "seq": c.seq, "layer": c.site}
    if comm_ns is not None and c.seq in comm_ns:
        # each on a track of its own: its measured time already holds any queueing behind others
        return b.add(
            OpKind.COMPUTE,
            f"{c.kind} ({c.size:,} B, measured)",
            data_deps=deps,
            extra=extra,
            duration_ns=max(1, comm_ns[c.seq]),
            stream=f"measured {c.seq}",
        )
    if c.kind in _P2P:
        assert c.peer is not None
        return b.add(
            OpKind.SEND if c.kind == "send" else OpKind.RECV,
            f"{c.kind} {c.size:,} B",
            data_deps=deps,
            peer=c.peer - rank,
            size_bytes=max(c.size, 1),
            tag=c.tag,
            extra=extra,
            stream=f"p2p {c.kind} {c.peer - rank:+d}",
        )
    return b.add(
        OpKind.COLLECTIVE,
        c.kind,
        data_deps=deps,
        collective=int(_KINDS[c.kind]),
        size_bytes=max(c.size, 1),
        group=c.group,
        extra=extra,
        stream=f"comm {c.group}",
    )


def _gpu_events(
    b: ProgramBuilder,
    k: Any,
    lo: float,
    hi: float,
    seg_start: list[float],
    seg_idx: list[int],
    waits: list[tuple[float, int]],
) -> list[tuple[float, int]]:
    """GPU kernels, copies and memsets of the step on their streams, each once the host piece
    in which it was launched has begun, and after every call the host waited for before launching it (a
    wait on a CUDA tensor's work holds the stream).  Returns ``(launch time, op)`` in launch
    order."""
    last_on: dict[int, int] = {}
    waited_on: dict[int, int] = {}  # stream -> how many of ``waits`` it already waits for
    out = []
    events = sorted(
        (g for g in k.gpu if g.correlation in k.launches and lo <= k.launches[g.correlation][0] < hi),
        key=lambda g: (k.launches[g.correlation][0], g.ts),
    )
    wait_times = [t for t, _ in waits]
    for g in events:
        launch = k.launches[g.correlation][0]
        deps = [last_on[g.stream]] if g.stream in last_on else []
        j = bisect.bisect_right(seg_start, launch) - 1  # the piece that launched it: it may start with it
        if j >= 1:
            deps.append(seg_idx[j - 1])
        n = bisect.bisect_right(wait_times, launch)
        deps += [c for _, c in waits[waited_on.get(g.stream, 0) : n]]
        waited_on[g.stream] = max(n, waited_on.get(g.stream, 0))
        last_on[g.stream] = b.add(
            OpKind.COMPUTE,
            g.name,
            data_deps=deps,
            duration_ns=max(1, round(g.dur * 1000)),
            stream=f"cuda stream {g.stream}",
        )
        out.append((launch, last_on[g.stream]))
    return out


def capture_info(folder: str | Path) -> tuple[dict[str, Any], MeshLayout]:
    """``capture.json`` of a rank-by-rank trace and its layout.

    Raises:
        InputError: for a missing or malformed ``capture.json``.
    """
    p = Path(folder) / "capture.json"
    info = load_json_object(p, "capture.json")
    n = info.get("world_size")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected a world size >= 1, got {n!r}", str(p), "world_size")
    layout = layout_from_json(info.get("layout"), n, str(p))
    traced = info.get("ranks_traced")
    if not isinstance(traced, list) or not traced or not all(isinstance(r, int) and 0 <= r < n for r in traced):
        raise InputError(f"expected the traced ranks (0 to {n - 1}), got {traced!r}", str(p), "ranks_traced")
    return info, layout


def _spans(members: tuple[int, ...], layout: MeshLayout) -> tuple[str, ...] | None:
    """The mesh dimensions a group spans, when it is a whole slice of the mesh along them (None
    otherwise)."""
    coords = [layout.coords(m) for m in members]
    dims = tuple(d for d in DIMS if len({c[d] for c in coords}) > 1)
    size = 1
    for d in dims:
        size *= getattr(layout, d)
    return dims if size == len(set(members)) else None


def _translate_group(
    members: tuple[int, ...], rank: int, old: MeshLayout, new: MeshLayout, rep: int
) -> tuple[int, ...]:
    """The group of ``rank`` (in layout ``new``) that plays the part ``members`` play for the
    traced rank ``rep`` (in layout ``old``)."""
    dims = _spans(members, old)
    if dims is None:
        if old.dp != new.dp:
            raise InputError(
                f"group of ranks {list(members)} is not a whole slice of the mesh: it cannot be rebuilt "
                f"for {new.world_size} ranks; simulate the job on its own {old.world_size}"
            )
        shift = rank - rep  # the same data-parallel offset
        return tuple(m + shift for m in members)
    return _slice(dims, rank, new)


def _slice(dims: tuple[str, ...], rank: int, layout: MeshLayout) -> tuple[int, ...]:
    """The ranks of ``layout`` that differ from ``rank`` only along the mesh dimensions ``dims``."""
    c = layout.coords(rank)
    grid = [[c[d]] if d not in dims else list(range(getattr(layout, d))) for d in DIMS]
    return tuple(
        sorted(
            layout.rank_of(pp=p, dp=q, cp=x, tp=t) for p in grid[0] for q in grid[1] for x in grid[2] for t in grid[3]
        )
    )


def _translate_peer(peer: int, rep: int, rank: int, old: MeshLayout, new: MeshLayout) -> int:
    """The peer of ``rank`` (layout ``new``) that ``peer`` is of ``rep`` (layout ``old``)."""
    pc, rc, c = old.coords(peer), old.coords(rep), new.coords(rank)
    out = {d: (pc[d] if pc[d] != rc[d] else c[d]) for d in DIMS}
    for d in ("dp", "cp"):
        out[d] %= getattr(new, d)
    return new.rank_of(**out)


def compose(folder: str | Path, gpus: int | None = None, comm_ns: dict[int, dict[int, int]] | None = None) -> Workload:
    """The whole job of a rank-by-rank trace, on its own world size or, with ``gpus``, on that
    many ranks (another data-parallel degree).  ``comm_ns``: rank -> call seq -> ns, to replay
    calls for measured times (see :func:`rank_program`).

    Raises:
        InputError: for missing files, a ``gpus`` the layout does not divide, or ranks of a
            group that issue different calls on it (naming the ranks, the call and its sites).
    """
    d = Path(folder)
    info, old = capture_info(d)
    new = old if gpus is None or gpus == old.world_size else old.with_world_size(gpus)
    traced = sorted(info["ranks_traced"])
    calls = {r: read_calls(d / f"comms.{r}.json") for r in traced}
    programs, prog_of = [], {}
    for r in traced:
        kin = next((d / n for n in (f"kineto.{r}.json", f"kineto.{r}.json.gz") if (d / n).is_file()), None)
        if kin is None:
            raise InputError(f"the trace of rank {r} is missing (kineto.{r}.json)", str(d))
        prog_of[r] = len(programs)
        programs.append(rank_program(kin, calls[r], r, (comm_ns or {}).get(r)))
    # the traced rank each rank of the new world runs like
    if info.get("fake_ranks", True):
        rep_of = [old.rank_of(pp=new.coords(r)["pp"], tp=new.coords(r)["tp"]) for r in range(new.world_size)]
    else:
        if new is not old:
            raise InputError("a real job's capture (every rank traced) is simulated on its own ranks", str(d))
        rep_of = list(range(new.world_size))
    missing = sorted({r for r in rep_of if r not in prog_of})
    if missing:
        raise InputError(f"ranks {missing} were not traced (ranks_traced lists {traced})", str(d / "capture.json"))
    groups: dict[tuple[str, tuple[int, ...]], None] = {}
    # each traced rank's groups, and the mesh dimensions each spans (once, not once a rank)
    spans = {
        rep: [
            (key, members, _spans(members, old))
            for key, members in {c.group: c.ranks for c in calls[rep] if c.kind not in _P2P}.items()
        ]
        for rep in traced
    }
    made: dict[tuple[Any, ...], tuple[int, ...]] = {}  # (key, dims, coords off the group) -> group
    for r in range(new.world_size):
        rep = rep_of[r]
        coords = new.coords(r)
        for key, members, dims in spans[rep]:
            if dims is None:
                groups[(key, _translate_group(members, r, old, new, rep))] = None
                continue
            where = (key, dims, tuple(coords[d] for d in DIMS if d not in dims))
            if where not in made:
                made[where] = _slice(dims, r, new)
                groups[(key, made[where])] = None
    # peers: the offset of each send / receive must be the same for every rank of a program
    for rep, prog in zip(traced, programs):
        op_of = {e["seq"]: i for i, e in prog.extras.items() if "seq" in e}
        sharers = [r for r in range(new.world_size) if rep_of[r] == rep]
        for c in calls[rep]:
            if c.peer is None:
                continue
            offsets = {_translate_peer(c.peer, rep, r, old, new) - r for r in sharers}
            if len(offsets) > 1:
                raise InputError(
                    f"rank {rep}'s {c.kind} with rank {c.peer} ({c.site}) does not keep one offset across its replicas",
                    str(d),
                )
            i = op_of[c.seq]
            if prog.columns["kind"][i] in (OpKind.SEND, OpKind.RECV):
                prog.columns["peer"][i] = offsets.pop()
    w = Workload(
        programs,
        [prog_of[rep_of[r]] for r in range(new.world_size)],
        [Group(k, m) for k, m in groups],
        f"{d.name} ({new.world_size} ranks, {new.spec()})",
    )
    w.rank_labels = [
        " ".join(f"{k}={v}" for k, v in new.coords(r).items() if k in ("pp", "dp", "tp") or new.cp > 1)
        for r in range(new.world_size)
    ]
    _check_groups(w, calls, rep_of, prog_of, traced)
    batch = info.get("batch_size")
    if new is not old and isinstance(batch, int):
        programs[0].notes.append(
            f"traced as {old.world_size} ranks ({old.spec()}, dp={old.dp}), "
            f"simulated as {new.world_size} (dp={new.dp}): "
            f"each data-parallel rank keeps its batch of {batch}, so the global batch is {batch * new.dp} "
            f"(traced: {batch * old.dp}); data-parallel groups follow, call sizes do not change"
        )
    if info.get("fake_ranks", True):
        w.representatives = np.asarray(
            [new.rank_of(pp=new.coords(r)["pp"], tp=new.coords(r)["tp"]) for r in range(new.world_size)], dtype=np.int64
        )
    return w


def _check_groups(
    w: Workload, calls: dict[int, list[Call]], rep_of: list[int], prog_of: dict[int, int], traced: list[int]
) -> None:
    """Ranks of each group issue the same calls on it, in the same order.

    Raises:
        InputError: naming the two ranks, the group, the call's position and both call sites.
    """
    seqs = {r: {} for r in traced}
    for r in traced:
        for c in calls[r]:
            if c.peer is None:
                seqs[r].setdefault(c.group, []).append(c)
    done: set[tuple[str, tuple[int, ...]]] = set()
    for g in w.groups:
        reps = sorted({rep_of[m] for m in g.ranks})
        key = (g.name, tuple(reps))
        if len(reps) < 2 or key in done:
            continue
        done.add(key)
        first = reps[0]
        a = seqs[first].get(g.name, [])
        for other in reps[1:]:
            bb = seqs[other].get(g.name, [])
            for i in range(max(len(a), len(bb))):
                x = a[i] if i < len(a) else None
                y = bb[i] if i < len(bb) else None
                if x is None or y is None or (x.kind, x.size) != (y.kind, y.size):

                    def say(c: Call | None) -> str:
                        return "nothing" if c is None else f"{c.kind} of {c.size:,} B at {c.site}"

                    raise InputError(
                        f"ranks {first} and {other} issue different calls on group {g.name} (ranks "
                        f"{list(g.ranks)[:8]}{'...' if len(g.ranks) > 8 else ''}): call {i + 1} is "
                        f"{say(x)} on rank {first} but {say(y)} on rank {other}"
                    )


def measured_comm_ns(folder: str | Path) -> dict[int, list[int]]:
    """For each rank of a real job's capture (``podsim trace --nproc``), how long each call took
    (ns), in call order: from its issue until the program's wait for it returned (the end of
    its ``podsim::wait#<seq>`` range; a call never waited for: until its issue range ended).

    Raises:
        InputError: for a folder that is not a rank-by-rank capture.
    """
    d = Path(folder)
    info, _layout = capture_info(d)
    out: dict[int, list[int]] = {}
    for r in info["ranks_traced"]:
        k = read_kineto(d / f"kineto.{r}.json")
        lo, hi, _ = step_window(k)
        issue: dict[int, tuple[float, float]] = {}
        done: dict[int, float] = {}
        for what, seq, ts, dur in _marks(k, lo, hi):
            if what == "wait":
                done[seq] = max(done.get(seq, 0.0), ts + dur)
            else:
                issue[seq] = (ts, ts + dur)
        out[r] = [
            max(1, round((max(done.get(c.seq, 0.0), issue[c.seq][1]) - issue[c.seq][0]) * 1000))
            for c in read_calls(d / f"comms.{r}.json")
            if c.seq in issue
        ]
    return out


def replay_with_measured(fake: str | Path, real: str | Path) -> Workload:
    """A rank-by-rank trace (``fake``) whose calls take the times the same job's real capture
    (``real``) measured for them, call by call (the check of ex-situ tracing against reality).

    Raises:
        InputError: when the two captures' ranks issue different numbers of calls.
    """
    times = measured_comm_ns(real)
    info, _ = capture_info(fake)
    comm: dict[int, dict[int, int]] = {}
    for r in info["ranks_traced"]:
        calls = read_calls(Path(fake) / f"comms.{r}.json")
        if r not in times or len(times[r]) != len(calls):
            raise InputError(
                f"rank {r} issued {len(calls)} calls in the fake-rank trace but "
                f"{len(times.get(r, []))} in the real capture {real}",
                str(fake),
            )
        comm[r] = {c.seq: ns for c, ns in zip(calls, times[r])}
    return compose(fake, comm_ns=comm)
