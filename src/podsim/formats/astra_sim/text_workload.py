"""ASTRA-sim 1.0 text workloads (``Resnet50_DataParallel.txt`` and friends).

Format (ASTRA-sim 1.0's ``Workload::initialize_workload``; reference notes 3.3): line 1 the
parallelism policy, line 2 the layer count, then one line per layer::

    name  -1  fwd_compute  fwd_comm  fwd_bytes  ig_compute  ig_comm  ig_bytes  wg_compute  wg_comm  wg_bytes  update

Times are 1.0 cycles = ns; comm types ``NONE``, ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``,
``ALLTOALL``.  One pass, wired as ASTRA-sim 1.0 runs it:

* **DATA** / **MICRO**: the forward computes in order; then, from the last layer down, the
  weight-gradient compute, its collective (not waited for), and the input-gradient compute
  (none for layer 0); weight-gradient collectives span every network dimension.
* **MODEL** / **DISTRIBUTED_INFERENCE**: forward compute then its collective (blocking) per
  layer; backward input-gradient compute, then its collective alongside the weight-gradient
  compute, both before the next layer; collectives span every dimension.
* **HYBRID_DATA_MODEL** / **HYBRID_MODEL_DATA**: both; forward and input-gradient collectives on
  dimension 0 (the model-parallel one) and weight-gradient collectives on the higher
  dimensions, or the reverse.

``HYBRID_TRANSFORMER*`` files are SimAI/AICB workloads: :mod:`podsim.formats.simai` reads them.
``HYBRID_CUSTOMIZED`` and the DLRM policies are refused with a message.  ``update`` delays are
not simulated (ASTRA-sim 2.x's converter drops them too).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import InputError
from ...fileio import read_text
from ...workload import ALL_DIMS, CollectiveKind, OpKind, ProgramBuilder, Workload
from ..simai.workload import parse_count

POLICIES = ("DATA", "MICRO", "MODEL", "DISTRIBUTED_INFERENCE", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA")
_KINDS = {
    "ALLREDUCE": CollectiveKind.ALL_REDUCE,
    "ALLGATHER": CollectiveKind.ALL_GATHER,
    "REDUCESCATTER": CollectiveKind.REDUCE_SCATTER,
    "ALLTOALL": CollectiveKind.ALL_TO_ALL,
}
_HIGHER_DIMS = (1 << 10) - 2  # dimensions 1..9, as ASTRA-sim 1.0 decodes them


def is_text_workload(path: str | Path) -> bool:
    """Whether ``path`` is an ASTRA-sim 1.0 text workload this module reads (not a SimAI one)."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline().split()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(first) and first[0] in POLICIES


def read_text_workload(path: str | Path, npus: int, compute_scale: float = 1.0, comm_scale: float = 1.0) -> Workload:
    """The workload of an ASTRA-sim 1.0 text file on ``npus`` NPUs (every NPU runs it).

    Raises:
        InputError: naming the file and line of an unknown policy, a layer count that does not
            match the lines, a line without 12 fields, or a bad number or comm type.
    """
    src = str(path)
    lines = [(i, ln.split()) for i, ln in enumerate(read_text(path, "workload file").splitlines(), 1) if ln.strip()]
    if len(lines) < 2:
        raise InputError("expected a policy line, a layer count and layer lines", src)
    policy = lines[0][1][0]
    if policy not in POLICIES:
        hint = " (a SimAI/AICB workload: run it with --cluster)" if policy.startswith("HYBRID_TRANSFORMER") else ""
        raise InputError(
            f"policy {policy!r} is not supported here{hint}; expected one of {', '.join(POLICIES)}", src, "line 1"
        )
    count_line, count_toks = lines[1]
    count = parse_count(count_toks[0], src, f"line {count_line}", "the layer count")
    body = lines[2:]
    if len(body) != count:
        raise InputError(f"the file declares {count} layers and has {len(body)} layer lines", src, f"line {count_line}")
    data = policy in ("DATA", "MICRO")
    model = policy in ("MODEL", "DISTRIBUTED_INFERENCE")
    dims_mp = {"HYBRID_DATA_MODEL": 1, "HYBRID_MODEL_DATA": _HIGHER_DIMS}.get(policy, ALL_DIMS)
    dims_dp = {"HYBRID_DATA_MODEL": _HIGHER_DIMS, "HYBRID_MODEL_DATA": 1}.get(policy, ALL_DIMS)
    layers = []
    for lineno, f in body:
        where = f"line {lineno}"
        if len(f) != 12:
            raise InputError(
                f"expected 12 fields (name dep fwd_ns fwd_comm fwd_bytes ig_ns ig_comm ig_bytes "
                f"wg_ns wg_comm wg_bytes update), got {len(f)}",
                src,
                where,
            )
        for col in (3, 6, 9):
            if f[col] != "NONE" and f[col] not in _KINDS:
                raise InputError(f"comm type {f[col]!r} is not one of NONE, {', '.join(_KINDS)}", src, where)
        nums = [
            parse_count(f[c], src, where, name)
            for c, name in (
                (2, "forward compute"),
                (4, "forward size"),
                (5, "input-gradient compute"),
                (7, "input-gradient size"),
                (8, "weight-gradient compute"),
                (10, "weight-gradient size"),
            )
        ]
        layers.append((f[0], nums, f[3], f[6], f[9]))
    b = ProgramBuilder(Path(path).stem)
    nid = [0]

    def comp(name: str, ns: int, deps: list[int]) -> list[int]:
        if ns <= 0:
            return deps
        nid[0] += 1
        return [
            b.add(OpKind.COMPUTE, name, data_deps=deps, node_id=nid[0], duration_ns=max(1, round(ns * compute_scale)))
        ]

    def coll(name: str, kind: str, size: int, dims: int, deps: list[int], stream: str | None = None) -> list[int]:
        if kind == "NONE" or size <= 0:
            return deps
        nid[0] += 1
        return [
            b.add(
                OpKind.COLLECTIVE,
                name,
                data_deps=deps,
                node_id=nid[0],
                collective=int(_KINDS[kind]),
                size_bytes=max(1, round(size * comm_scale)),
                dims_mask=dims,
                stream=stream,
            )
        ]

    prev: list[int] = []
    for name, (fwd, fwd_b, _ig, _ig_b, _wg, _wg_b), fc, _ic, _wc in layers:
        prev = comp(f"{name} fwd", fwd, prev)
        if not data:
            prev = coll(f"{name} fwd {fc.lower()}", fc, fwd_b, dims_mp, prev)
    for i in range(len(layers) - 1, -1, -1):
        name, (_fwd, _fb, ig, ig_b, wg, wg_b), _fc, ic, wc = layers[i]
        if data:
            prev = comp(f"{name} wg", wg, prev)
            coll(f"{name} wg {wc.lower()}", wc, wg_b, dims_dp, prev, stream="wg")
            if i > 0:
                prev = comp(f"{name} ig", ig, prev)
            continue
        ig_done = comp(f"{name} ig", ig, prev)
        ig_comm = coll(f"{name} ig {ic.lower()}", ic, ig_b, dims_mp, ig_done)
        w = comp(f"{name} wg", wg, ig_done)  # alongside the input-gradient collective
        if not model:
            coll(f"{name} wg {wc.lower()}", wc, wg_b, dims_dp, w, stream="wg")
        prev = sorted(set(ig_comm + w))
    return Workload([b.build()], [0] * npus, [], f"{Path(path).name} ({policy})")
