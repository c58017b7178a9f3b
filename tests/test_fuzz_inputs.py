"""Seeded fuzz of every input format podsim reads (issues 13 and 29): bad input never yields a
traceback, a hang or a silent answer.

For each format a small valid seed is built here (with podsim's own writers, or a few lines of
hand-written text), then a fixed set of mutants is drawn with ``random.Random`` from a fixed
seed: truncations, byte flips, numbers replaced by NaN / inf / -1 / 0 / 1e300 / 1.5 / "x" /
null / true, deleted keys (columns, tokens, attributes), unknown keys added and containers of
the wrong type.  Each mutant goes through the format's public reader and, where it is cheap, a
tiny simulation, under a per-case time budget.

A case passes when the call succeeds with finite, non-negative times and sizes, or raises a
:class:`~podsim.errors.PodsimError` whose one-line message names the input file.  Any other
exception, a hang or NaN / inf / negative numbers in a result fail it.

``python tests/test_fuzz_inputs.py`` prints the failures per format and mutation class.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml

from podsim.errors import PodsimError

SEED = 20260513
CASE_BUDGET_S = 5.0  #: a case running longer is a hang
CLASSES = ("truncate", "byteflip", "bad-value", "missing-key", "unknown-key", "wrong-type")
#: replacement numbers for structured (JSON / YAML) inputs
BAD_VALUES: list[tuple[str, object]] = [
    ("nan", math.nan),
    ("inf", math.inf),
    ("-1", -1),
    ("0", 0),
    ("1e300", 1e300),
    ("1.5", 1.5),
    ("'x'", "x"),
    ("null", None),
    ("true", True),
]
#: replacement tokens for text and CSV inputs
BAD_TOKENS = ("nan", "inf", "-1", "0", "1e300", "1.5", "x", "null", "true")
_NUM = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)$")


# ----------------------------------------------------------------------------- the harness


class _Hang(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in podsim eats it."""


@dataclass
class Mutant:
    cls: str
    label: str
    files: dict[str, bytes]


@dataclass
class Format:
    """One input format: seed files, the file mutated, how to mutate it and what reads it."""

    name: str
    seed: Callable[[], dict[str, bytes]]
    target: str
    kind: str  #: json | yaml | text | csv | chakra
    run: Callable[[Path], object]  #: reads the files in a folder (and simulates)
    allow_inf: tuple[str, ...] = ()  #: result fields where inf is meaningful
    limits: dict[str, int] = field(default_factory=dict)


def _sample(rng: random.Random, items: list, n: int) -> list:
    return items if len(items) <= n else rng.sample(items, n)


def _byte_mutants(data: bytes, rng: random.Random) -> list[tuple[str, str, bytes]]:
    out = []
    n = len(data)
    cuts = sorted({0, 1, n // 4, n // 2, (3 * n) // 4, max(n - 1, 0)} | {rng.randrange(max(n, 1)) for _ in range(3)})
    for c in cuts:
        if c < n:
            out.append(("truncate", f"cut at byte {c}", data[:c]))
    for _ in range(12):
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            if b:
                i = rng.randrange(len(b))
                b[i] ^= rng.randint(1, 255)
        out.append(("byteflip", "flipped bytes", bytes(b)))
    return out


# -- JSON / YAML trees


def _walk(obj: object, path: tuple = ()) -> Iterator[tuple[tuple, object]]:
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, path + (i,))


_DELETE = object()


def _edit(doc: object, path: tuple, value: object) -> object:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]  # type: ignore[index]
    if value is _DELETE:
        del parent[path[-1]]  # type: ignore[union-attr, arg-type]
    else:
        parent[path[-1]] = value  # type: ignore[index]
    return doc


def _label(path: tuple) -> str:
    return "/".join(str(p) for p in path) or "<root>"


def _tree_mutants(
    doc: object, rng: random.Random, dump: Callable[[object], bytes], limits: dict[str, int]
) -> list[tuple[str, str, bytes]]:
    nodes = list(_walk(doc))
    leaves = [(p, v) for p, v in nodes if p and not isinstance(v, (dict, list))]
    containers = [(p, v) for p, v in nodes if isinstance(v, (dict, list))]
    members = [p for p, v in nodes if p]
    dicts = [(p, v) for p, v in containers if isinstance(v, dict)]
    out = []
    for p, v in _sample(rng, leaves, limits.get("leaves", 24)):
        for name, bad in BAD_VALUES:
            out.append(("bad-value", f"{_label(p)} = {name}", dump(_edit(doc, p, bad))))
        m = _NUM.match(v) if isinstance(v, str) else None
        if m and m.group(2):  # "450 GB/s": the number with its unit
            for tok in BAD_TOKENS[:6]:
                out.append(
                    ("bad-value", f"{_label(p)} = {tok} {m.group(2)}", dump(_edit(doc, p, f"{tok} {m.group(2)}")))
                )
    for p in _sample(rng, members, limits.get("keys", 16)):
        out.append(("missing-key", f"delete {_label(p)}", dump(_edit(doc, p, _DELETE))))
    for p, _d in _sample(rng, dicts, limits.get("dicts", 5)):
        out.append(("unknown-key", f"{_label(p)} + zz_unknown", dump(_edit(doc, p + ("zz_unknown",), 1))))
    for p, v in _sample(rng, containers + leaves, limits.get("types", 12)):
        if isinstance(v, dict):
            alts: list[object] = [list(v.values()), "x"]
        elif isinstance(v, list):
            alts = [{"k": v}, 7]
        else:
            alts = [[v], {"v": v}]
        for a in alts:
            out.append(("wrong-type", f"{_label(p)} = {json.dumps(a, default=str)[:40]}", dump(_edit(doc, p, a))))
    return out


def _json_dump(doc: object) -> bytes:
    return json.dumps(doc, indent=1).encode()


def _yaml_dump(doc: object) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()


# -- whitespace-separated text


def _bad_token(tok: str, unit: str) -> list[str]:
    return [b + unit if b not in ("x", "null", "true") else b for b in BAD_TOKENS]


def _text_mutants(text: str, rng: random.Random, limits: dict[str, int]) -> list[tuple[str, str, bytes]]:
    lines = text.split("\n")
    toks = [(li, ti, t) for li, ln in enumerate(lines) for ti, t in enumerate(ln.split())]
    nums = [(li, ti, t) for li, ti, t in toks if _NUM.match(t)]
    words = [(li, ti, t) for li, ti, t in toks if not _NUM.match(t)]
    out = []

    def put(li: int, new: list[str] | None) -> bytes:
        ls = list(lines)
        if new is None:
            del ls[li]
        else:
            ls[li] = " ".join(new)
        return "\n".join(ls).encode()

    for li, ti, t in _sample(rng, nums, limits.get("leaves", 20)):
        m = _NUM.match(t)
        assert m
        for b in _bad_token(t, m.group(2)):
            f = lines[li].split()
            f[ti] = b
            out.append(("bad-value", f"line {li + 1} token {ti} = {b}", put(li, f)))
    for li, ti, _t in _sample(rng, toks, limits.get("keys", 6)):
        f = lines[li].split()
        del f[ti]
        out.append(("missing-key", f"line {li + 1} without token {ti}", put(li, f)))
    for li in _sample(rng, [i for i, ln in enumerate(lines) if ln.strip()], 4):
        out.append(("missing-key", f"without line {li + 1}", put(li, None)))
    for li in _sample(rng, [i for i, ln in enumerate(lines) if ln.strip()], 3):
        out.append(("unknown-key", f"line {li + 1} + zz_unknown", put(li, lines[li].split() + ["zz_unknown"])))
    ls = list(lines)
    ls.insert(min(2, len(ls)), "zz_unknown 1 2")
    out.append(("unknown-key", "an unknown line", "\n".join(ls).encode()))
    for li, ti, t in _sample(rng, words, 4) + _sample(rng, nums, 4):
        f = lines[li].split()
        f[ti] = "7" if not _NUM.match(t) else "[1]"
        out.append(("wrong-type", f"line {li + 1} token {ti} = {f[ti]}", put(li, f)))
    return out


# -- CSV


def _csv_mutants(
    text: str, rng: random.Random, limits: dict[str, int], header: bool = True
) -> list[tuple[str, str, bytes]]:
    lines = text.split("\n")
    comments = [ln for ln in lines if ln.startswith("#")]
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in lines if not ln.startswith("#")))))
    first = 1 if header else 0

    def dump(rs: list[list[str]]) -> bytes:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rs)
        return ("\n".join(comments) + ("\n" if comments else "") + buf.getvalue()).encode()

    def put(r: int, c: int, v: str) -> bytes:
        rs = [list(x) for x in rows]
        rs[r][c] = v
        return dump(rs)

    cells = [(r, c, v) for r in range(first, len(rows)) for c, v in enumerate(rows[r])]
    nums = [(r, c, v) for r, c, v in cells if _NUM.match(v.strip())]
    lists = [(r, c, v) for r, c, v in cells if v.strip().startswith("[")]
    texts = [
        (r, c, v) for r, c, v in cells if v.strip() and not _NUM.match(v.strip()) and not v.strip().startswith("[")
    ]
    out = []
    for r, c, v in _sample(rng, nums, limits.get("leaves", 20)):
        m = _NUM.match(v.strip())
        assert m
        for b in _bad_token(v, m.group(2)):
            out.append(("bad-value", f"row {r + 1} col {c} = {b}", put(r, c, b)))
    for r, c, v in _sample(rng, lists, 4):
        body = v.strip()[1:-1]
        sep = ";" if ";" in body else ","
        parts = body.split(sep) if body.strip() else ["1"]
        for b in ("nan", "inf", "-1", "1e300", "1.5", "x"):
            out.append(
                ("bad-value", f"row {r + 1} col {c} = [{b}...]", put(r, c, "[" + sep.join([b] + parts[1:]) + "]"))
            )
    ncols = max(len(x) for x in rows) if rows else 0
    for c in _sample(rng, list(range(ncols)), limits.get("keys", 5)):
        rs = [[v for j, v in enumerate(x) if j != c] for x in rows]
        out.append(("missing-key", f"without column {c}", dump(rs)))
    for r in _sample(rng, list(range(first, len(rows))), 3):
        rs = [list(x) for x in rows]
        rs[r] = rs[r][:-1]
        out.append(("missing-key", f"row {r + 1} without its last cell", dump(rs)))
        if len(rows) > first + 1:
            out.append(("missing-key", f"without row {r + 1}", dump(rows[:r] + rows[r + 1 :])))
    rs = [list(x) + ["zz_unknown" if header and i == 0 else "1"] for i, x in enumerate(rows)]
    out.append(("unknown-key", "an unknown column", dump(rs)))
    for r in _sample(rng, list(range(first, len(rows))), 2):
        rs = [list(x) for x in rows]
        rs[r] = rs[r] + ["zz_unknown"]
        out.append(("unknown-key", f"row {r + 1} + a cell", dump(rs)))
    for r, c, _v in _sample(rng, lists, 3):
        out.append(("wrong-type", f"row {r + 1} col {c} = 5", put(r, c, "5")))
    for r, c, _v in _sample(rng, nums, 4):
        out.append(("wrong-type", f"row {r + 1} col {c} = [1]", put(r, c, "[1]")))
    for r, c, _v in _sample(rng, texts, 4):
        out.append(("wrong-type", f"row {r + 1} col {c} = 7", put(r, c, "7")))
    return out


# -- Chakra ET (binary protobuf)


def _chakra_mutants(data: bytes, rng: random.Random, path: Path) -> list[tuple[str, str, bytes]]:
    from podsim.formats.chakra import encode_trace, read_trace, wire
    from podsim.formats.chakra.schema import encode_metadata, encode_node

    path.write_bytes(data)
    tr = read_trace(path)
    out = []

    def enc(nodes: list, extra: dict[int, bytes] | None = None) -> bytes:
        if not extra:
            return encode_trace(tr.metadata, nodes)
        parts = [encode_metadata(tr.metadata)] + [encode_node(n) + extra.get(i, b"") for i, n in enumerate(nodes)]
        return b"".join(wire.encode_varint(len(p)) + p for p in parts)

    pairs = [(i, name) for i, n in enumerate(tr.nodes) for name in n.attrs]
    bad_attrs = [
        ("double", math.nan),
        ("double", math.inf),
        ("int64", -1),
        ("int64", 0),
        ("double", 1e300),
        ("double", 1.5),
        ("string", "x"),
        ("bool", True),
        ("uint64", (1 << 64) - 1),
        ("int64", 1 << 62),
        ("sint32", -(1 << 31)),
    ]
    for i, name in _sample(rng, pairs, 8):
        for t, v in bad_attrs:
            nodes = copy.deepcopy(tr.nodes)
            nodes[i].set_attr(name, v, t)
            out.append(("bad-value", f"node {nodes[i].id} {name} = {t} {v}", enc(nodes)))
    for i in range(len(tr.nodes)):
        for fld, v in (
            ("duration_micros", (1 << 63) - 1),
            ("duration_micros", 1 << 40),
            ("id", (1 << 64) - 1),
            ("type", 99),
        ):
            nodes = copy.deepcopy(tr.nodes)
            setattr(nodes[i], fld, v)
            out.append(("bad-value", f"node {i} {fld} = {v}", enc(nodes)))
    for i, name in _sample(rng, pairs, 8):
        nodes = copy.deepcopy(tr.nodes)
        del nodes[i].attrs[name]
        out.append(("missing-key", f"node {nodes[i].id} without {name}", enc(nodes)))
    for i, n in enumerate(tr.nodes):
        if n.data_deps:
            nodes = copy.deepcopy(tr.nodes)
            nodes[i].data_deps = [n.data_deps[0] + 1000]
            out.append(("missing-key", f"node {n.id} depends on a missing node", enc(nodes)))
    for i in _sample(rng, list(range(len(tr.nodes))), 3):
        nodes = copy.deepcopy(tr.nodes)
        nodes[i].set_attr("zz_unknown", 1, "int64")
        out.append(("unknown-key", f"node {nodes[i].id} + attribute zz_unknown", enc(nodes)))
        out.append(
            (
                "unknown-key",
                f"node {nodes[i].id} + protobuf field 99",
                enc(tr.nodes, {i: wire.field_varint(99, 5) + wire.field_bytes(98, b"zz")}),
            )
        )
    for i, name in _sample(rng, pairs, 6):
        for t, v in (("int64_list", [1, 2]), ("string_list", ["a"]), ("bytes", b"\xff\x00"), ("float_list", [1.5])):
            nodes = copy.deepcopy(tr.nodes)
            nodes[i].set_attr(name, v, t)
            out.append(("wrong-type", f"node {nodes[i].id} {name} = {t}", enc(nodes)))
    # a field with another wire type than the schema's (a varint name, a length-delimited id)
    for i in _sample(rng, list(range(len(tr.nodes))), 3):
        for raw in (
            wire.field_varint(2, 1 << 62),
            wire.field_bytes(1, b"\x01\x02"),
            wire.field_fixed32(7, b"\0\0\0\0"),
            wire.field_bytes(10, wire.field_varint(1, 1 << 40)),
            wire.field_bytes(4, b"\xff"),
        ):
            out.append(("wrong-type", f"node {i} + a field of the wrong wire type", enc(tr.nodes, {i: raw})))
    return out


# -- running one case


def _numbers(obj: object, path: str, seen: set[int], depth: int = 0) -> Iterator[tuple[str, float]]:
    """Every number in a result, with a dotted path (Programs are checked on their own)."""
    if depth > 12 or id(obj) in seen:
        return
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, bytes)):
        return
    if isinstance(obj, (int, float, np.integer, np.floating)):
        yield path, float(obj)
        return
    seen.add(id(obj))
    from podsim.workload import Program

    if isinstance(obj, Program):
        d, s, f = obj.columns["duration_ns"], obj.columns["size_bytes"], obj.columns["flops"]
        for name, bad in (("duration_ns", d < -1), ("size_bytes", s < 0), ("flops", ~np.isfinite(f) | (f < 0))):
            if bad.any():
                yield f"{path}.{name}", float(obj.columns[name][np.argmax(bad)]) if name != "flops" else -1.0
        return
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iuf" and obj.size:
            flat = obj.ravel()
            bad = ~np.isfinite(flat) if obj.dtype.kind == "f" else np.zeros(flat.shape, bool)
            yield (path, float(flat[np.argmax(bad)])) if bad.any() else (path, float(flat.min()))
        return
    if isinstance(obj, dict):
        for k, v in list(obj.items())[:2000]:
            yield from _numbers(v, f"{path}.{k}", seen, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in list(obj)[:2000]:
            yield from _numbers(v, f"{path}[]", seen, depth + 1)
    elif is_dataclass(obj):
        for f in fields(obj):
            yield from _numbers(getattr(obj, f.name), f"{path}.{f.name}", seen, depth + 1)
    elif type(obj).__module__.startswith("podsim") and hasattr(obj, "__dict__"):
        for k, v in vars(obj).items():
            yield from _numbers(v, f"{path}.{k}", seen, depth + 1)


_MAX_NS = 2.0**63  #: no time in ns reaches int64's limit (292 years)
#: result fields that are times, sizes or rates: they must not be negative
_NONNEG = re.compile(
    r"(_ns|_us|_s|time|dur|bytes|size|bandwidth|latency|_bw|flops|memory|rate|_gib|params)\]*$", re.IGNORECASE
)


def _nonsense(result: object, allow_inf: tuple[str, ...]) -> str | None:
    for path, v in _numbers(result, "result", set()):
        if math.isnan(v) or (math.isinf(v) and not any(a in path for a in allow_inf)):
            return f"{path} = {v}"
        name = path.split(".")[-1]
        if v < 0 and _NONNEG.search(name):
            return f"{path} = {v}"
        if v > _MAX_NS and re.search(r"_ns\]*$", name):
            return f"{path} = {v:.3g} (beyond int64 nanoseconds)"
    return None


def _run_case(fmt: Format, m: Mutant, folder: Path) -> str | None:
    """None if the case passes, else what went wrong."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in m.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)

    def alarm(signum, frame):  # type: ignore[no-untyped-def]
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_BUDGET_S)
    try:
        result = fmt.run(folder)
    except _Hang:
        return f"hang (over {CASE_BUDGET_S:g} s)"
    except PodsimError as e:
        msg = str(e)
        if fmt.target not in msg and Path(fmt.target).name not in msg and str(folder) not in msg:
            return f"{type(e).__name__} does not name the file: {msg[:200]}"
        if "\n" in msg.strip():
            return f"{type(e).__name__} is not one line: {msg[:200]}"
        return None
    except RecursionError as e:  # a subclass of RuntimeError: named on its own
        return f"RecursionError: {str(e)[:120]}"
    except Exception as e:  # noqa: BLE001 -- any other exception is the failure being looked for
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
        return f"{type(e).__name__}{where}: {str(e)[:150]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    bad = _nonsense(result, fmt.allow_inf)
    return f"success with nonsense: {bad}" if bad else None


def mutants(fmt: Format, scratch: Path) -> list[Mutant]:
    """The format's fixed set of mutants (the seed itself first, as a control)."""
    rng = random.Random(f"{SEED}/{fmt.name}")
    files = fmt.seed()
    data = files[fmt.target]
    out = [Mutant("seed", "the valid seed", files)]
    raw = _byte_mutants(data, rng)
    if fmt.kind == "json":
        raw += _tree_mutants(json.loads(data), rng, _json_dump, fmt.limits)
    elif fmt.kind == "yaml":
        raw += _tree_mutants(yaml.safe_load(data), rng, _yaml_dump, fmt.limits)
    elif fmt.kind == "text":
        raw += _text_mutants(data.decode(), rng, fmt.limits)
    elif fmt.kind in ("csv", "csv-noheader"):
        raw += _csv_mutants(data.decode(), rng, fmt.limits, header=fmt.kind == "csv")
    elif fmt.kind == "chakra":
        scratch.mkdir(parents=True, exist_ok=True)
        raw += _chakra_mutants(data, rng, scratch / "seed.0.et")
    for cls, label, blob in raw:
        out.append(Mutant(cls, label, {**files, fmt.target: blob}))
    return out


def fuzz(fmt: Format, tmp: Path) -> tuple[list[tuple[Mutant, str]], int]:
    """(failures, number of cases) of one format."""
    failures = []
    cases = mutants(fmt, tmp / "scratch")
    for k, m in enumerate(cases):
        why = _run_case(fmt, m, tmp / f"case{k}")
        if why is not None:
            failures.append((m, why))
    return failures, len(cases)


# ----------------------------------------------------------------------------- seeds and runners


def _system_cfg(dims: int = 2) -> object:
    from podsim.formats.astra_sim import parse_system

    return parse_system(
        {
            "all-reduce-implementation": ["ring"] * dims,
            "all-gather-implementation": ["ring"] * dims,
            "reduce-scatter-implementation": ["ring"] * dims,
            "all-to-all-implementation": ["direct"] * dims,
            "local-mem-bw": 50,
            "endpoint-delay": 10,
        }
    )


def _topo(n: int = 4) -> object:
    from podsim.network.topology import BlockKind, Dimension, Topology

    if n == 4:
        return Topology((Dimension(BlockKind("Ring"), 2, 50.0, 500.0), Dimension(BlockKind("Switch"), 2, 25.0, 700.0)))
    return Topology((Dimension(BlockKind("Ring"), n, 50.0, 500.0),))


def _small_workload(n: int = 4, group: str | None = None, memory: bool = False) -> object:
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    b = ProgramBuilder("w")
    c = b.add(OpKind.COMPUTE, "c", node_id=1, duration_ns=5000, flops=1e9, size_bytes=1 << 20)
    r = b.add(
        OpKind.COLLECTIVE,
        "ar",
        node_id=2,
        data_deps=[c],
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=1 << 20,
        group=group,
    )
    if memory:
        b.add(OpKind.MEM_LOAD, "load", node_id=3, data_deps=[r], size_bytes=1 << 16)
        b.add(OpKind.MEM_STORE, "store", node_id=4, data_deps=[r], size_bytes=1 << 16)
    return Workload([b.build()], [0] * n, name="w")


def _simulate(workload: object, system: object = None, network: object = None, **kw: object) -> object:
    import podsim

    dims = len(network.dims) if network is not None else 2  # type: ignore[attr-defined]
    res = podsim.simulate(
        workload,
        system if system is not None else _system_cfg(dims),
        network if network is not None else _topo(),
        record_timeline=False,
        **kw,
    )
    return res.ranks


# -- ASTRA-sim configurations


def _system_seed() -> dict[str, bytes]:
    return {
        "system.json": _json_dump(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "all-reduce-implementation": ["ring", "ring"],
                "all-gather-implementation": ["ring", "doubleBinaryTree"],
                "reduce-scatter-implementation": ["ring", "ring"],
                "all-to-all-implementation": ["direct4", "direct"],
                "collective-optimization": "localBWAware",
                "local-mem-bw": 50,
                "peak-perf": 900,
                "roofline-enabled": 0,
                "L": 0,
                "o": 0,
                "g": 0,
                "G": 0,
                "local-reduction-delay": 1,
                "model-shared-bus": 0,
                "boost-mode": 0,
            }
        )
    }


def _run_system(d: Path) -> object:
    from podsim.formats.astra_sim import read_system

    cfg = read_system(d / "system.json")
    return cfg, _simulate(_small_workload(), cfg)


def _network_seed() -> dict[str, bytes]:
    return {
        "network.yml": _yaml_dump(
            {
                "topology": ["Ring", "Switch"],
                "npus_count": [2, 2],
                "bandwidth": [50.0, "25 GB/s"],
                "latency": [500.0, "700 ns"],
            }
        )
    }


def _run_network(d: Path) -> object:
    from podsim.formats.astra_sim import read_network

    topo = read_network(d / "network.yml")
    return topo, _simulate(_small_workload(topo.num_npus), network=topo)


def _remote_memory_seed() -> dict[str, bytes]:
    return {
        "remote_memory.json": _json_dump(
            {
                "memory-type": "PER_NODE_MEMORY_EXPANSION",
                "remote-mem-latency": 100,
                "remote-mem-bw": 50,
                "num-nodes": 2,
                "num-npus-per-node": 2,
            }
        )
    }


def _run_remote_memory(d: Path) -> object:
    from podsim.formats.astra_sim import read_remote_memory

    cfg = read_remote_memory(d / "remote_memory.json")
    return cfg, _simulate(_small_workload(memory=True), remote_memory=str(d / "remote_memory.json"))


def _comm_groups_seed() -> dict[str, bytes]:
    return {"groups.json": _json_dump({"1": [0, 1], "2": [2, 3]})}


def _run_comm_groups(d: Path) -> object:
    from podsim.formats.astra_sim import read_comm_groups

    groups = read_comm_groups(d / "groups.json", 4)
    return groups, _simulate(_small_workload(group="1"), comm_groups=str(d / "groups.json"))


# -- Chakra


def _chakra_seed() -> dict[str, bytes]:
    import tempfile

    from podsim.formats.chakra import write_workload
    from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

    progs = []
    for rank in (0, 1):
        b = ProgramBuilder(f"r{rank}")
        c = b.add(OpKind.COMPUTE, "gemm", node_id=1, duration_ns=7000, flops=2e9, size_bytes=1 << 20)
        a = b.add(
            OpKind.COLLECTIVE,
            "ar",
            node_id=2,
            data_deps=[c],
            collective=int(CollectiveKind.ALL_REDUCE),
            size_bytes=1 << 20,
            dims_mask=1,
            priority=1,
        )
        kind = OpKind.SEND if rank == 0 else OpKind.RECV
        b.add(kind, "p2p", node_id=3, data_deps=[a], peer=1 - rank, size_bytes=4096, tag=7)
        b.add(OpKind.NOOP, "end", node_id=4, ctrl_deps=[a])
        progs.append(b.build())
    w = Workload(progs, [0, 1], name="w")
    with tempfile.TemporaryDirectory() as t:
        paths = write_workload(w, Path(t) / "w")
        return {Path(p).name: Path(p).read_bytes() for p in paths}


def _run_chakra(d: Path) -> object:
    from podsim.formats.chakra import read_workload

    w = read_workload(d / "w", 2)
    return w, _simulate(str(d / "w"), network=_topo(2))


# -- text workloads and topologies

_TEXT_WORKLOAD = """HYBRID_DATA_MODEL
2
conv1 -1 1000 ALLGATHER 65536 1000 REDUCESCATTER 65536 1000 ALLREDUCE 131072 10
fc -1 2000 NONE 0 2000 ALLTOALL 32768 2000 ALLREDUCE 262144 10
"""


def _run_text_workload(d: Path) -> object:
    from podsim.formats.astra_sim.text_workload import read_text_workload

    w = read_text_workload(d / "workload.txt", 4)
    return w, _simulate(w)


_SIMAI_WORKLOAD = """HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4 checkpoints: 0 checkpoint_initiates: 0
2
attention -1 1000 ALLREDUCE 1048576 1000 ALLREDUCE 1048576 1000 ALLREDUCE 2097152 100
mlp -1 2000 ALLGATHER 524288 2000 REDUCESCATTER 524288 2000 ALLREDUCE 4194304 100
"""


def _run_simai_workload(d: Path) -> object:
    import podsim
    from podsim.formats.simai import simai_to_workload

    w = simai_to_workload(d / "simai.txt")
    if w.num_ranks > 16:
        return w
    return w, podsim.simulate(w, cluster="dgx-h100", record_timeline=False).ranks


_SIMAI_TOPOLOGY = """4 2 1 1 4 H100
2 3
0 2 2400Gbps 0.000025ms 0
1 2 2400Gbps 0.000025ms 0
0 3 400Gbps 0.0005ms 0
1 3 400Gbps 0.0005ms 0
"""


def _run_simai_topology(d: Path) -> object:
    from podsim.api import collective
    from podsim.formats.simai import read_topology

    fab = read_topology(d / "topo.txt")
    t = collective("all_reduce", str(d / "topo.txt"), fab.num_gpus, min_bytes="1M", max_bytes="1M")
    return fab.link_bw, fab.link_lat, t.rows


# -- TrioSim

_TRIO_TRACE = """OperatorID,OperatorName,Operator_input,Operator_output,Operator_cudatime,Operator_cudatimenooverlap,InputSize,OutputSize,gpuid,stage,tpflag
1,aten::linear,[4; 6],[5],12,10,[6; 6],[6],0,forward,1
2,autograd::LinearBackward0,[5],[4],30,25,[6],[6],0,backward,1
3,aten::add_,[6],[6],5,4,[6],[6],0,optimizer,0
"""
_TRIO_TENSOR = """Index,TensorID,TensorShape,TensorNumElement,TensorEachByte,TensorType,TensorStorgeid,gpuid
0,4,[2; 3],6,4,input,5,0
1,5,[2; 3],6,4,output,6,0
2,6,[2; 3],6,4,weight,7,0
"""


def _trio_seed() -> dict[str, bytes]:
    return {"trace.csv": _TRIO_TRACE.encode(), "tensor.csv": _TRIO_TENSOR.encode()}


def _run_triosim(d: Path) -> object:
    import podsim
    from podsim.formats.triosim import read_triosim, triosim_to_workload
    from podsim.parallelize import from_triosim

    t = read_triosim(d)
    step = from_triosim(t)
    return t, step, podsim.simulate(triosim_to_workload(t), cluster="dgx-h100", record_timeline=False).ranks


# -- PyTorch traces (hand-written: one profiled step with a kernel and a c10d all-reduce)


def _kineto_seed() -> dict[str, bytes]:
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "ts": 100.0,
            "dur": 900.0,
            "tid": 1,
            "pid": 1,
            "args": {"Record function id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "ts": 110.0,
            "dur": 50.0,
            "tid": 1,
            "pid": 1,
            "args": {"Record function id": 2, "External id": 2},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": 120.0,
            "dur": 5.0,
            "tid": 1,
            "pid": 1,
            "args": {"correlation": 10, "External id": 2},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "sm90_gemm",
            "ts": 130.0,
            "dur": 200.0,
            "tid": 7,
            "pid": 0,
            "args": {"stream": 7, "correlation": 10},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "c10d::allreduce_",
            "ts": 400.0,
            "dur": 40.0,
            "tid": 1,
            "pid": 1,
            "args": {"Record function id": 3, "External id": 3},
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gloo:all_reduce",
            "ts": 410.0,
            "dur": 300.0,
            "tid": 2,
            "pid": 1,
            "args": {"Record function id": 4},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add_",
            "ts": 720.0,
            "dur": 30.0,
            "tid": 1,
            "pid": 1,
            "args": {"Record function id": 5, "External id": 5},
        },
    ]
    tensor = [11, 12, 0, 262144, 4, "cpu"]
    nodes = [
        {
            "id": 1,
            "name": "[pytorch|profiler|execution_trace|thread]",
            "ctrl_deps": 0,
            "inputs": {"values": []},
            "outputs": {"values": []},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": 0}],
        },
        {
            "id": 2,
            "name": "aten::mm",
            "ctrl_deps": 1,
            "inputs": {"values": [tensor, tensor]},
            "outputs": {"values": [tensor]},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": 2}, {"name": "seq_id", "type": "int64", "value": 1}],
        },
        {
            "id": 3,
            "name": "c10d::allreduce_",
            "ctrl_deps": 1,
            "inputs": {"values": [[tensor], 0]},
            "outputs": {"values": []},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": 3}],
        },
        {
            "id": 4,
            "name": "aten::add_",
            "ctrl_deps": 1,
            "inputs": {"values": [tensor, tensor]},
            "outputs": {"values": [tensor]},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": 5}],
        },
    ]
    return {
        "kineto.json": _json_dump({"schemaVersion": 1, "traceEvents": ev}),
        "et.json": _json_dump({"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": nodes}),
    }


def _run_pytorch(d: Path) -> object:
    import podsim
    from podsim.formats.pytorch_trace import pytorch_to_workload
    from podsim.parallelize import from_pytorch

    w = pytorch_to_workload(d / "kineto.json", d / "et.json", ranks=2)
    step = from_pytorch(d / "kineto.json", d / "et.json")
    return w, step, podsim.simulate(w, cluster="dgx-h100", record_timeline=False).ranks


# -- hardware

_CLUSTER = """name: fuzz-cluster
description: a small test cluster
gpu: H100-SXM5-80GB
gpus_per_node: 4
intra_node: {kind: nvswitch, bandwidth: 450 GB/s, latency: 150 ns, switches: 2}
inter_node: {kind: fat_tree, nic_bandwidth: 400 Gbps, nic_latency: 600 ns, switch_latency: 300 ns, radix: 16,
             tiers: 2, oversubscription: 1.0, routing: ecmp, ecmp_seed: 3}
nccl:
  channels: 8
  algorithms: [ring, tree]
  protocols: [LL, LL128, Simple]
  pxn: true
  base_latency: {ring: {LL: 6.6 us, Simple: 8.4 us}}
  hop_latency: {net: {ring: {Simple: 14 us}}}
  protocol_efficiency: {LL: 0.5}
  link_efficiency: {nvlink: 0.9, nic: 0.95}
  channel_bandwidth: {ring: 50 GB/s}
"""


def _run_cluster(d: Path, gpus: int = 8) -> object:
    from podsim.api import collective
    from podsim.hardware.cluster import load_cluster

    spec = load_cluster(str(d / "cluster.yaml"))
    t = collective("all_reduce", spec, gpus, min_bytes="1M", max_bytes="1M")
    return spec, t.rows


def _preset_seed(name: str) -> Callable[[], dict[str, bytes]]:
    return lambda: {"cluster.yaml": (resources.files("podsim.hardware") / "presets" / f"{name}.yaml").read_bytes()}


def _gpu_seed() -> dict[str, bytes]:
    shipped = yaml.safe_load((resources.files("podsim.hardware") / "gpus.yaml").read_text())
    h100 = dict(shipped["h100-80gb"])
    h100["sources"] = ["test"]
    b = dict(shipped["b200"])
    b["efficiency"] = {
        "from": "h100-test",
        "scale": {"gemm_max": 1.05, "memory_max": 0.98},
        "measured_as": {"flash_max": "h100-test"},
    }
    b["sources"] = ["test"]
    return {"gpus.yaml": _yaml_dump({"h100-test": h100, "b-test": b, "shared": {**h100, "efficiency": "h100-test"}})}


def _run_gpus(d: Path) -> object:
    from podsim.compute.model import ComputeModel
    from podsim.hardware.gpu import gpu_specs

    out = []
    for spec in gpu_specs(d / "gpus.yaml").values():
        cm = ComputeModel.for_gpu(spec, "fp8")  # falls back to bf16 on a GPU without fp8
        out.append(
            (
                spec,
                cm,
                cm.gemm_ns(4096, 4096, 4096),
                cm.memory_ns(1e8),
                cm.attention_ns(64, 2048, 2048, 128),
                spec.memory_bytes,
            )
        )
    return out


# -- models


def _hf_seed(moe: bool) -> Callable[[], dict[str, bytes]]:
    cfg: dict[str, object] = {
        "_name_or_path": "tiny",
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 512,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "hidden_dropout": 0.0,
        "head_dim": 32,
    }
    if moe:
        cfg.update(
            {
                "num_local_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 128,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
            }
        )
    return lambda: {"config.json": _json_dump(cfg)}


def _run_hf(d: Path) -> object:
    from podsim.api.train import simulate_training
    from podsim.llm.layout import Layout
    from podsim.llm.model import from_hf_config

    m = from_hf_config(d / "config.json")
    res = simulate_training(
        m,
        Layout(gpus=2, tp=2, global_batch=2, micro_batch=1, seq_len=128, sequence_parallel=True),
        "h100-80gb",
        record_timeline=False,
    )
    return m, m.total_params(), m.active_params(), res.result.ranks, res.memory


# -- serving

_DLSIM_WORKLOAD = '2,4.0,"[0.5, 0.5]",1.0,"[0.5, inf]",fuzz\n0,0.0\n1,0.25\n0,0.5\n1,0.75\n'
_REQUEST_TRACE = "model_id,arrival_s,prompt\n0,0.0,a\n1,0.1,b\n0,0.3,c\n"
_PLACEMENT = [
    {
        "service_name": "a",
        "model_name": "m1",
        "executable_name": "m1_one",
        "mesh_group": [{"node_ids": [0], "devices": [[0]]}],
    },
    {
        "service_name": "b",
        "model_name": "m2",
        "executable_name": "m2_two",
        "mesh_group": [{"node_ids": [0], "devices": [[0]]}, {"node_ids": [0], "devices": [[1]]}],
    },
]
_PROFILES = """gpu: V100-SXM2-16GB
models:
  m1:
    parameters: 125.0e6
    bytes_per_parameter: 2
    executables:
      m1_one: {stages: [[1, 1]], latencies_s: [0.02]}
  m2:
    parameters: 1.0e9
    executables:
      m2_two: {stages: [[1, 1], [1, 1]], latencies_s: [0.05, 0.06], memory_gb_per_gpu: [1.5, 1.5]}
"""


def _serving_seed() -> dict[str, bytes]:
    return {
        "workload.csv": _DLSIM_WORKLOAD.encode(),
        "trace.csv": _REQUEST_TRACE.encode(),
        "placement.json": _json_dump(_PLACEMENT),
        "profiles.yaml": _PROFILES.encode(),
    }


def _run_serving(d: Path, workload: str = "workload.csv") -> object:
    from podsim.serving import load_profiles, read_placement, simulate_serving
    from podsim.serving.placement import check_placement, serve_cluster
    from podsim.serving.workload import read_any_workload

    w = read_any_workload(d / workload)
    p = read_placement(d / "placement.json")
    ex = load_profiles(d / "profiles.yaml")
    cl = serve_cluster(p, nodes=1, gpus_per_node=2, memory_gb=16)
    check_placement(p, ex, cl)
    res = simulate_serving(w, p, ex, cl)
    return w, p, ex, res.finish_ns, res.latencies_s(), res.makespan_ns


# -- tables


def _rows_seed() -> dict[str, bytes]:
    text = (resources.files("podsim.validation") / "calibration.csv").read_text()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    keep = (
        [lines[0]] + [ln for ln in lines[1:] if "korthikanti" in ln][:2] + [ln for ln in lines[1:] if "nccl" in ln][:1]
    )
    return {"rows.csv": ("\n".join(keep) + "\n").encode()}


def _run_rows(d: Path) -> object:
    from podsim.validation import read_rows, run_validation

    rows = read_rows(d / "rows.csv", "user")
    checks, _ = run_validation(d / "rows.csv")
    return [float(r["value"]) for r in rows], [(c.measured, c.predicted) for c in checks]


def _published_seed() -> dict[str, bytes]:
    text = (resources.files("podsim.hardware") / "published_kernels.csv").read_text()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    keep = [lines[0]] + [ln for ln in lines[1:] if ln.startswith(("h100", "b200"))][:6]
    return {"kernels.csv": ("# published kernels\n" + "\n".join(keep) + "\n").encode()}


def _run_published(d: Path) -> object:
    from podsim.compute.derive import efficiency_scale, published_kernels
    from podsim.hardware.gpu import gpu_specs

    rows = published_kernels(d / "kernels.csv")
    gpus = gpu_specs()
    return rows, efficiency_scale("b200", "h100-80gb", gpus, [r for r in rows if r.gpu in gpus])


_KERNEL_TABLE = """# podsim kernel table v1: fuzz
kernel,dtype,m,n,k,batch,time_us,note
gemm,bf16,1024,1024,1024,1,12.5,
gemm,bf16,4096,4096,4096,1,180.0,
gemm,bf16,4096,1024,4096,1,50.0,
attention_fwd,bf16,2048,2048,128,32,400.0,
attention_bwd,bf16,2048,2048,128,32,1100.0,
memory,bf16,1048576,1,1,1,4.0,
memory,bf16,1073741824,1,1,1,400.0,
launch,bf16,1,1,1,1,2.0,
"""


def _run_kernel_table(d: Path) -> object:
    from podsim.compute.table import TableComputeModel
    from podsim.hardware.gpu import get_gpu

    t = TableComputeModel.from_csv(d / "table.csv", get_gpu("h100"))
    return t.rows, t.gemm_ns(2048, 2048, 2048), t.memory_ns(1e7), t.attention_ns(32, 1024, 1024, 128)


_NCCL_LOG = """# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid 1 on host device  0 [0x1b] NVIDIA H100
#  Rank  1 Group  0 Pid 1 on host device  1 [0x2b] NVIDIA H100
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    10.50    0.10    0.10      0    10.20    0.10    0.10      0
        2048           512     float     sum      -1    11.00    0.19    0.19      0    10.90    0.19    0.19      0
        4096          1024     float     sum      -1    11.80    0.35    0.35      0    11.70    0.35    0.35      0
# Avg bus bandwidth    : 0.21
"""
_VTRAIN = "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n1024,256,float,10500,0.1,10200,0.1\n2048,512,float,11000,0.19,10900,0.19\n"


def _run_nccl_log(d: Path) -> object:
    from podsim.formats.nccl_tests import read_nccl_tests_log

    return read_nccl_tests_log(d / "nccl.log")


def _run_vtrain(d: Path) -> object:
    from podsim.formats.nccl_tests import read_vtrain_lut

    return read_vtrain_lut(d / "AR_GPU8_lut.csv")


# -- the newer commands' inputs (issue 29): sweep specs, stacks, GPU prices, LLM request traces,
# Vidur profile tables, measured serving runs

_SWEEP = """name: fuzz
run: llm
fixed: {model: gpt3-125m, gpu: h100, global-batch: 16, seq-len: 1024}
grid: {gpus: [8], tp: [1, 2]}
points: [{pp: 1}]
"""
_STACK = """name: fuzz-stack
kind: training
base: megatron-core
sources:
  gemm_efficiency: "a test"
  host_ns: "a test"
training:
  gemm_efficiency: 0.8
  host_ns: 5000
"""
_PRICES = "h100-80gb: {usd_per_gpu_hour: 2.5}\na100-80gb: {usd_per_gpu_hour: 1.5}\n"
_LLM_TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,120,10\n0.05,300,20\n0.2,64,5\n"
_INFERENCE_RUNS = (
    "model,gpu,tp,pp,batch,prompt_tokens,output_tokens,prefill_ms,decode_ms\n"
    "llama3-8b,h100,1,1,1,512,128,14.58,8.198\nllama3-8b,h100,1,1,8,512,128,87.71,8.441\n"
)


def _run_sweep_spec(d: Path) -> object:
    from podsim.api.sweep import load_spec, sweep

    spec = load_spec(d / "sweep.yaml")
    res = sweep(spec, workers=1)
    return [(r.get("iteration_time_s"), r.get("memory_peak_gib")) for r in res.rows]


def _run_stack(d: Path) -> object:
    from podsim.api.train import simulate_training
    from podsim.llm.layout import Layout
    from podsim.llm.model import get_model
    from podsim.stacks.stack import load_stack

    st = load_stack(str(d / "stack.yaml"), "training")
    res = simulate_training(get_model("gpt3-125m"), Layout(8, tp=2, global_batch=16, seq_len=1024), "h100", software=st)
    return st.values, res.iteration_time_s


def _run_prices(d: Path) -> object:
    from podsim.sweep.search import gpu_hour_price

    return gpu_hour_price("h100", str(d / "prices.yaml"))


def _run_llm_trace(d: Path) -> object:
    from podsim.api.serve_llm import serve_llm
    from podsim.jobs.serve_llm import ServeLLMJob

    job = ServeLLMJob.from_values({"model": "llama3-8b", "gpu": "h100", "workload": str(d / "trace.csv")})
    return serve_llm(job).result.stats()


def _vidur_seed() -> dict[str, bytes]:
    import contextlib
    import tempfile

    from podsim.api.infer import write_profiles
    from podsim.jobs.infer import InferJob

    with tempfile.TemporaryDirectory() as tmp:
        job = InferJob.from_values({"model": "gpt3-125m", "gpu": "h100", "prompt_tokens": 128, "output_tokens": 8})
        with contextlib.redirect_stdout(io.StringIO()):
            write_profiles(job, tmp)
        out = {}
        for p in Path(tmp).rglob("*.csv"):  # the rows a batch of 2 x (128 + 8) tokens reads, and a few more
            rows = list(csv.DictReader(io.StringIO(p.read_text())))
            keep = [
                r
                for r in rows
                if all(float(r.get(c) or 0) <= 1024 for c in ("num_tokens", "kv_cache_size", "prefill_chunk_size"))
                and float(r.get("batch_size") or 0) <= 4
            ]
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(keep)
            out[str(p.relative_to(tmp))] = buf.getvalue().encode()
        return out


def _run_vidur(d: Path) -> object:
    from podsim.api.infer import infer
    from podsim.jobs.infer import InferJob

    job = InferJob.from_values(
        {"model": "gpt3-125m", "gpu": "h100", "batch": 2, "prompt_tokens": 128, "output_tokens": 8, "profile": str(d)}
    )
    r = infer(job).report
    return r.prefill_s, r.decode_step_mean_s, r.e2e_s


def _run_inference_runs(d: Path) -> object:
    from podsim.api.calibrate import read_inference_runs

    return read_inference_runs(d / "runs.csv")


FORMATS = [
    Format("astra system json", _system_seed, "system.json", "json", _run_system),
    Format("astra network yaml", _network_seed, "network.yml", "yaml", _run_network),
    Format("astra remote-memory json", _remote_memory_seed, "remote_memory.json", "json", _run_remote_memory),
    Format("astra comm-groups json", _comm_groups_seed, "groups.json", "json", _run_comm_groups),
    Format("chakra et", _chakra_seed, "w.0.et", "chakra", _run_chakra),
    Format(
        "astra-sim 1.0 text workload",
        lambda: {"workload.txt": _TEXT_WORKLOAD.encode()},
        "workload.txt",
        "text",
        _run_text_workload,
    ),
    Format("simai workload", lambda: {"simai.txt": _SIMAI_WORKLOAD.encode()}, "simai.txt", "text", _run_simai_workload),
    Format("simai topology", lambda: {"topo.txt": _SIMAI_TOPOLOGY.encode()}, "topo.txt", "text", _run_simai_topology),
    Format("triosim trace.csv", _trio_seed, "trace.csv", "csv", _run_triosim),
    Format("triosim tensor.csv", _trio_seed, "tensor.csv", "csv", _run_triosim),
    Format("kineto json", _kineto_seed, "kineto.json", "json", _run_pytorch, limits={"leaves": 24, "keys": 20}),
    Format("execution-trace json", _kineto_seed, "et.json", "json", _run_pytorch, limits={"leaves": 24, "keys": 20}),
    Format(
        "cluster yaml",
        lambda: {"cluster.yaml": _CLUSTER.encode()},
        "cluster.yaml",
        "yaml",
        _run_cluster,
        limits={"leaves": 30, "keys": 20},
    ),
    Format(
        "cluster yaml (gb200-nvl72 preset)",
        _preset_seed("gb200-nvl72"),
        "cluster.yaml",
        "yaml",
        lambda d: _run_cluster(d, 8),
    ),
    Format("gpu yaml", _gpu_seed, "gpus.yaml", "yaml", _run_gpus, limits={"leaves": 30, "keys": 20}),
    Format("hf config.json", _hf_seed(False), "config.json", "json", _run_hf),
    Format("hf config.json (moe)", _hf_seed(True), "config.json", "json", _run_hf),
    Format("dlsim workload csv", _serving_seed, "workload.csv", "csv-noheader", _run_serving, allow_inf=("slos_s",)),
    Format(
        "request trace csv",
        _serving_seed,
        "trace.csv",
        "csv",
        lambda d: _run_serving(d, "trace.csv"),
        allow_inf=("slos_s",),
    ),
    Format("placement json", _serving_seed, "placement.json", "json", _run_serving, allow_inf=("slos_s",)),
    Format("serving profiles yaml", _serving_seed, "profiles.yaml", "yaml", _run_serving, allow_inf=("slos_s",)),
    Format("validate rows csv", _rows_seed, "rows.csv", "csv", _run_rows, limits={"leaves": 16, "keys": 8}),
    Format("published kernels csv", _published_seed, "kernels.csv", "csv", _run_published),
    Format("kernel table csv", lambda: {"table.csv": _KERNEL_TABLE.encode()}, "table.csv", "csv", _run_kernel_table),
    Format("nccl-tests log", lambda: {"nccl.log": _NCCL_LOG.encode()}, "nccl.log", "text", _run_nccl_log),
    Format("vtrain lut csv", lambda: {"AR_GPU8_lut.csv": _VTRAIN.encode()}, "AR_GPU8_lut.csv", "csv", _run_vtrain),
    Format("sweep spec yaml", lambda: {"sweep.yaml": _SWEEP.encode()}, "sweep.yaml", "yaml", _run_sweep_spec),
    Format("stack yaml", lambda: {"stack.yaml": _STACK.encode()}, "stack.yaml", "yaml", _run_stack),
    Format("gpu prices yaml", lambda: {"prices.yaml": _PRICES.encode()}, "prices.yaml", "yaml", _run_prices),
    Format("llm request trace csv", lambda: {"trace.csv": _LLM_TRACE.encode()}, "trace.csv", "csv", _run_llm_trace),
    Format("vidur mlp csv", _vidur_seed, "compute/h100/gpt3-125m/mlp.csv", "csv", _run_vidur),
    Format("vidur attention csv", _vidur_seed, "compute/h100/gpt3-125m/attention.csv", "csv", _run_vidur),
    Format(
        "measured serving runs csv",
        lambda: {"runs.csv": _INFERENCE_RUNS.encode()},
        "runs.csv",
        "csv",
        _run_inference_runs,
    ),
]


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_fuzz_input_format(fmt: Format, tmp_path: Path) -> None:
    failures, n = fuzz(fmt, tmp_path)
    assert n > 20
    if failures:
        lines = [f"{len(failures)} of {n} mutants of {fmt.name} failed:"]
        lines += [f"  [{m.cls}] {m.label}: {why}" for m, why in failures[:25]]
        pytest.fail("\n".join(lines), pytrace=False)


def _first_key_twice(obj: object) -> tuple[str, str | None]:
    """The JSON text of ``obj`` with the first key of its first non-empty object written twice
    (with the same value, so keeping either copy would give the same answer: only a refusal
    shows the duplicate was seen), and that key as JSON spells it (None: no object in ``obj``)."""
    if isinstance(obj, dict) and obj:
        key, value = next(iter(obj.items()))
        pair = json.dumps({key: value})[1:-1]  # '"key": value', as json.dumps spells a non-str key
        return "{" + pair + ", " + json.dumps(obj)[1:], next(iter(json.loads("{" + pair + "}")))
    if isinstance(obj, list):
        parts = [json.dumps(x) for x in obj]
        for i, x in enumerate(obj):
            text, key = _first_key_twice(x)
            if key is not None:
                parts[i] = text
                return "[" + ", ".join(parts) + "]", key
    return json.dumps(obj), None


#: the structured formats: JSON ones, and YAML ones whose readers take a JSON file as well
STRUCTURED = [f for f in FORMATS if f.kind in ("json", "yaml")]


@pytest.mark.parametrize("fmt", STRUCTURED, ids=[f.name for f in STRUCTURED])
def test_a_json_key_given_twice_is_refused_naming_the_file_and_the_key(fmt: Format, tmp_path: Path) -> None:
    # issue 29: json.loads keeps the last of two equal keys without a word; a reader must refuse
    # it as load_yaml does, naming the file and the key
    files = fmt.seed()
    doc = json.loads(files[fmt.target]) if fmt.kind == "json" else yaml.safe_load(files[fmt.target])
    text, key = _first_key_twice(doc)
    assert key is not None and text.count(json.dumps(key) + ":") >= 2
    for name, data in {**files, fmt.target: text.encode()}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    with pytest.raises(PodsimError) as e:
        fmt.run(tmp_path)
    msg = str(e.value)
    assert Path(fmt.target).name in msg and f"the key {key!r} appears twice" in msg, msg
    assert "\n" not in msg.strip()


def test_the_other_user_json_readers_refuse_a_key_given_twice(tmp_path: Path) -> None:
    from podsim.capture.breakdown import load_trace
    from podsim.capture.megatron import _sizes
    from podsim.errors import InputError
    from podsim.fileio import load_json
    from podsim.formats import one_gpu_step, rank_traces

    # a duplicate inside a nested object, and one inside an array's object, are found too
    assert load_json('{"a": {"b": 1, "c": 2}, "d": [{"b": 1}, {"b": 2}]}', "x") == {
        "a": {"b": 1, "c": 2},
        "d": [{"b": 1}, {"b": 2}],
    }
    for text, key in (('{"a": {"b": 1, "b": 1}}', "b"), ('[{"e": 0}, {"f": 1, "g": 2, "f": 1}]', "f")):
        with pytest.raises(InputError, match=f"^x: the key '{key}' appears twice in one JSON object: keep one$"):
            load_json(text, "x")
    with pytest.raises(InputError, match=r"^x: line 2 column 7: not valid JSON"):
        load_json('{"a": 1,\n  "b" 2}', "x")  # a colon expected where the 2 is, line 2's seventh character

    trace = tmp_path / "trace.json"  # a Chrome trace for `podsim calibrate trace` / `stack fit`
    trace.write_text('{"traceEvents": [], "traceEvents": []}')
    with pytest.raises(InputError, match="trace.json: .*the key 'traceEvents' appears twice"):
        load_trace(trace)
    config = tmp_path / "config.json"  # a Megatron capture's model config
    config.write_text('{"hidden_size": 64, "num_hidden_layers": 2, "hidden_size": 64}')
    with pytest.raises(InputError, match="config.json: the key 'hidden_size' appears twice"):
        _sizes(str(config))
    (tmp_path / "capture.json").write_text('{"world_size": 2, "world_size": 2}')  # a `podsim trace` folder's
    with pytest.raises(InputError, match="capture.json: the key 'world_size' appears twice"):
        one_gpu_step.capture_info(tmp_path)
    with pytest.raises(InputError, match="capture.json: the key 'world_size' appears twice"):
        rank_traces.capture_info(tmp_path)


def main() -> None:
    """Print failures per format and mutation class (``-v``: each failure)."""
    import tempfile

    verbose = "-v" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    total = 0
    t0 = time.time()
    print(f"{'format':<36} {'cases':>5} " + " ".join(f"{c:>11}" for c in CLASSES) + "  seconds")
    for fmt in FORMATS:
        if only and not any(o in fmt.name for o in only):
            continue
        t = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            failures, n = fuzz(fmt, Path(tmp))
        by_cls = {c: 0 for c in CLASSES + ("seed",)}
        for m, _ in failures:
            by_cls[m.cls] += 1
        total += len(failures)
        seed = " SEED FAILS" if by_cls["seed"] else ""
        print(
            f"{fmt.name:<36} {n:>5} "
            + " ".join(f"{by_cls[c]:>11}" for c in CLASSES)
            + f"  {time.time() - t:6.1f}{seed}"
        )
        if verbose:
            for m, why in failures:
                print(f"    [{m.cls}] {m.label}: {why}")
    print(f"{total} failures in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
