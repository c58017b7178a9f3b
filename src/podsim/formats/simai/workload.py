"""SimAI / AICB workload files (``.txt``), read into podsim's IR.

Format (SimAI's ``Workload.cc``)::

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 32 ...
    <number of layer lines>
    <name> <dep> <fwd ns> <fwd comm> <fwd bytes> <ig ns> <ig comm> <ig bytes> <wg ns> <wg comm> <wg bytes> <update ns>

Semantics kept from SimAI (see ``shared/reference/simai-and-aicb.md`` §2):

* forward, layer 0 to N-1: compute, then the forward collective, blocking;
* backward, layer N-1 to 0: input-gradient compute, its collective (blocking), weight-gradient
  compute, then the weight-gradient collective *without* waiting (its own stream, FIFO);
* ``<update ns>`` is a delay after every collective of the layer;
* a bare comm name means TP in the forward / input-gradient columns and DP in the
  weight-gradient column; ``_EP`` is the expert-parallel group, ``_DP_EP`` the DP/EP group;
  ``NONE`` and anything unknown (``BROADCAST``) are skipped; forward sizes below 4096 B become
  4096 B; the dependency column is ignored.

Groups follow SimAI's MockNccl: TP groups are consecutive ranks, DP groups strided by
``gpus / DP``.  Pipeline traffic (``pp_comm``) is not simulated, as in SimAI's simulation
mode; every rank runs the same program (one representative iteration of a stage).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError
from ...fileio import read_text
from ...workload import CollectiveKind, Group, OpKind, ProgramBuilder, Workload

_KINDS = {
    "ALLREDUCE": CollectiveKind.ALL_REDUCE,
    "ALLGATHER": CollectiveKind.ALL_GATHER,
    "REDUCESCATTER": CollectiveKind.REDUCE_SCATTER,
    "ALLTOALL": CollectiveKind.ALL_TO_ALL,
}
POLICIES = (
    "DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
    "MICRO",
    "DISTRIBUTED_INFERENCE",
)


@dataclass
class SimaiHeader:
    """The first line of a SimAI workload file."""

    policy: str
    tp: int = 1
    ep: int = 1
    pp: int = 1
    vpp: int = 1
    ga: int = 1
    all_gpus: int | None = None
    pp_comm: int = 0


@dataclass
class SimaiLayer:
    name: str
    fwd_ns: int
    fwd_comm: str
    fwd_bytes: int
    ig_ns: int
    ig_comm: str
    ig_bytes: int
    wg_ns: int
    wg_comm: str
    wg_bytes: int
    update_ns: int


#: the largest time (ns) or size (bytes) a workload line may give: 10^18, as podsim's units
MAX_FIELD = 10**18
#: the largest parallel degree or GPU count a header may give (podsim's largest fabric)
MAX_GPUS = 1 << 20


def parse_count(tok: str, src: str, where: str, what: str, lo: int = 0, hi: int = MAX_FIELD) -> int:
    """A non-negative integer field of a text workload line (ns, bytes or a count), from ``lo``
    to ``hi``."""
    try:
        v = int(tok)
    except ValueError:
        raise InputError(f"{what} must be an integer, got {tok!r}", src, where) from None
    if v < 0:
        raise InputError(f"{what} must not be negative, got {v}", src, where)
    if v < lo:
        raise InputError(f"{what} must be at least {lo}, got {v}", src, where)
    if v > hi:
        raise InputError(f"{what} = {v} is absurd (at most {hi:,})", src, where)
    return v


def read_simai_workload(path: str | Path) -> tuple[SimaiHeader, list[SimaiLayer]]:
    """Parse a SimAI workload file.

    Raises:
        InputError: naming the file and line for a bad header, a layer count that does not
            match, or malformed layer lines.
    """
    src = str(path)
    lines = read_text(path, "workload file").splitlines()
    body = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip()]
    if len(body) < 2:
        raise InputError("expected a header line, a layer count and layer lines", src)
    head = body[0][1].split()
    if head[0] not in POLICIES:
        raise InputError(
            f"unknown parallelism policy {head[0]!r}; expected one of {', '.join(POLICIES)}", src, "line 1"
        )
    hdr = SimaiHeader(head[0])
    keys = {
        "model_parallel_NPU_group": "tp",
        "ep": "ep",
        "pp": "pp",
        "vpp": "vpp",
        "ga": "ga",
        "all_gpus": "all_gpus",
        "pp_comm": "pp_comm",
    }
    toks = head[1:]
    i = 0
    while i < len(toks):
        key = toks[i].rstrip(":")
        if key in ("checkpoints", "checkpoint_initiates"):
            n = parse_count(toks[i + 1], src, "line 1", key) if i + 1 < len(toks) else 0
            i += 2 + n
            continue
        if key in keys and i + 1 < len(toks):
            if key == "pp_comm":
                hdr.pp_comm = parse_count(toks[i + 1], src, "line 1", key)
            else:  # a parallel degree or the GPU count
                setattr(hdr, keys[key], parse_count(toks[i + 1], src, "line 1", key, lo=1, hi=MAX_GPUS))
            i += 2
            continue
        i += 1
    count_line, count_text = body[1]
    count = parse_count(count_text.strip().split()[0], src, f"line {count_line}", "the layer count")
    layers_lines = body[2:]
    if len(layers_lines) != count:
        raise InputError(
            f"the file declares {count} layers and has {len(layers_lines)} layer lines", src, f"line {count_line}"
        )
    layers = []
    for lineno, ln in layers_lines:
        f = ln.split()
        where = f"line {lineno}"
        if hdr.policy == "HYBRID_CUSTOMIZED" and len(f) == 13:
            f = f[:12]
        if len(f) != 12:
            raise InputError(
                f"expected 12 fields (name dep fwd_ns fwd_comm fwd_bytes ig_ns ig_comm ig_bytes "
                f"wg_ns wg_comm wg_bytes update_ns), got {len(f)}",
                src,
                where,
            )
        layers.append(
            SimaiLayer(
                f[0],
                parse_count(f[2], src, where, "forward compute time"),
                f[3],
                parse_count(f[4], src, where, "forward size"),
                parse_count(f[5], src, where, "input-gradient compute time"),
                f[6],
                parse_count(f[7], src, where, "input-gradient size"),
                parse_count(f[8], src, where, "weight-gradient compute time"),
                f[9],
                parse_count(f[10], src, where, "weight-gradient size"),
                parse_count(f[11], src, where, "update time"),
            )
        )
    return hdr, layers


def _comm(name: str, column: str) -> tuple[CollectiveKind, str] | None:
    """(kind, group name) of a comm column entry, or None to skip it."""
    if name.endswith("_DP_EP"):
        base, group = name[:-6], "dp_ep"
    elif name.endswith("_EP"):
        base, group = name[:-3], "ep"
    else:
        base, group = name, ("dp" if column == "wg" else "tp")
    kind = _KINDS.get(base)
    return None if kind is None else (kind, group)


def simai_groups(gpus: int, tp: int, pp: int, ep: int) -> list[Group]:
    """SimAI's communicator groups for ``gpus`` ranks (MockNccl's rules)."""
    if gpus % (tp * pp):
        raise InputError(f"{gpus} GPUs are not divisible by TP x PP = {tp * pp}")
    dp = gpus // (tp * pp)
    groups = [Group("tp", tuple(range(i * tp, (i + 1) * tp))) for i in range(gpus // tp)]
    stride = gpus // dp
    groups += [Group("dp", tuple(i + j * stride for j in range(dp))) for i in range(stride)]
    if ep > 1:
        if dp % ep:
            raise InputError(f"EP {ep} does not divide DP {dp}")
        # EP: the k-th member of EP consecutive TP groups; DP_EP: the complement in DP
        for base in range(0, gpus, tp * ep):
            for k in range(tp):
                groups.append(Group("ep", tuple(base + e * tp + k for e in range(ep))))
        for i in range(stride):
            dpg = [i + j * stride for j in range(dp)]
            for e in range(ep):
                groups.append(Group("dp_ep", tuple(dpg[e::ep])))
    return groups


def simai_to_workload(path: str | Path, gpus: int | None = None) -> Workload:
    """The workload of a SimAI file on ``gpus`` ranks (default: the header's ``all_gpus``,
    else its TP size)."""
    hdr, layers = read_simai_workload(path)
    n = gpus or hdr.all_gpus or hdr.tp
    try:
        groups = simai_groups(n, hdr.tp, hdr.pp, hdr.ep)
    except InputError as e:
        raise e.with_source(str(path)) from None
    b = ProgramBuilder(Path(path).stem)
    prev: list[int] = []

    def collective(
        layer: SimaiLayer, name: str, bytes_: int, column: str, after: list[int], stream: str | None = None
    ) -> list[int]:
        spec = _comm(name, column)
        if spec is None or bytes_ == 0:
            return after
        kind, group = spec
        if column == "fwd" and 0 < bytes_ < 4096:
            bytes_ = 4096
        c = b.add(
            OpKind.COLLECTIVE,
            f"{layer.name}.{column} {name.lower()}",
            collective=int(kind),
            size_bytes=bytes_,
            data_deps=after,
            group=group,
            stream=stream,
            node_id=len(b) + 1,
        )
        if layer.update_ns:
            c = b.add(
                OpKind.COMPUTE,
                f"{layer.name}.update",
                duration_ns=layer.update_ns,
                data_deps=[c],
                stream=stream,
                node_id=len(b) + 1,
            )
        return [c]

    def compute(layer: SimaiLayer, what: str, ns: int, after: list[int]) -> list[int]:
        if ns <= 0:
            return after
        return [b.add(OpKind.COMPUTE, f"{layer.name}.{what}", duration_ns=ns, data_deps=after, node_id=len(b) + 1)]

    for layer in layers:
        prev = compute(layer, "fwd", layer.fwd_ns, prev)
        prev = collective(layer, layer.fwd_comm, layer.fwd_bytes, "fwd", prev)
    for layer in reversed(layers):
        prev = compute(layer, "ig", layer.ig_ns, prev)
        prev = collective(layer, layer.ig_comm, layer.ig_bytes, "ig", prev)
        prev = compute(layer, "wg", layer.wg_ns, prev)
        collective(layer, layer.wg_comm, layer.wg_bytes, "wg", prev, stream="dp")
    prog = b.build()
    if hdr.pp > 1 and hdr.pp_comm:
        prog.notes.append(
            f"pipeline traffic (pp {hdr.pp}, pp_comm {hdr.pp_comm} B) is not simulated, as in SimAI's simulation mode"
        )
    return Workload([prog], [0] * n, groups, Path(path).stem)
