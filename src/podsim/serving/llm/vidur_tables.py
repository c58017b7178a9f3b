"""Measured step tables in Vidur's profile layout, both ways.

Vidur (Agrawal et al., MLSys 2024) times an LLM step from per-operation tables that its profiler
measures on a GPU; podsim reads the same tables (:class:`TableStepTimer`, ``podsim infer
--profile DIR``) and writes its compute model's times in that layout
(:func:`write_vidur_profiles`, ``podsim infer --write-profile DIR``), so that Vidur can run on
podsim's times, for GPUs it never profiled too.

The layout (Vidur's ``data/profiling/``; times in **ms**, the median of the profiled runs in
``time_stats.<op>.median``; ``min``, ``max``, ``mean`` and ``std`` beside it; sizes in bytes)::

    compute/<device>/<model>/mlp.csv        one row per (num_tokens, num_tensor_parallel_workers):
        time_stats.<op>.median for op in attn_pre_proj (QKV GEMM), attn_post_proj (attention
        output GEMM), mlp_up_proj (gate + up GEMMs), mlp_down_proj, mlp_act, input_layernorm,
        post_attention_layernorm, attn_rope, add; the model's shape in n_head, n_kv_head, n_embd,
        n_expanded_embd, vocab_size, use_gated_mlp
    compute/<device>/<model>/attention.csv  one row per (batch_size, kv_cache_size,
        prefill_chunk_size, num_tensor_parallel_workers): prefill rows (prefill_chunk_size > 0,
        batch_size 1) time time_stats.attn_prefill.median, decode rows (prefill_chunk_size 0)
        time_stats.attn_decode.median for batch_size sequences each attending over kv_cache_size
        cached tokens; time_stats.attn_kv_cache_save.median; is_prefill, block_size, n_embd,
        n_q_head, n_kv_head, max_model_len
    network/<network_device>/all_reduce.csv  time_stats.all_reduce.median over size (bytes),
        num_workers, devices_per_node (num_workers on one node), collective = all_reduce
    network/<network_device>/send_recv.csv   time_stats.send_recv.median over size (bytes);
        devices_per_node 2: a send inside a node, 1: between nodes; collective = send_recv

A step's stage time from the tables: per layer, the nine ops at the step's token count (linear
interpolation in num_tokens), the attention of its decode sequences (their number and mean
context: linear in kv_cache_size, then in batch_size) plus that of each prefill chunk (linear in
kv_cache_size, then in prefill_chunk_size), two all-reduces of the tokens' activations (TP > 1:
linear in size); the activations' send to the next stage (PP > 1).  The tables must hold the
replica's TP exactly.  What Vidur's layout has no column for stays podsim's model: the output
layer (logits), the host overhead, MoE all-to-alls, and memory (weights, KV cache).  Outside the
tabulated range a time is extrapolated linearly from the two nearest points.

Vidur differs from this reader in how it looks times up: it fits a regression (random forest by
default) to the rows and rounds a step's tokens up to a multiple of 8 and KV lengths up to its
``kv_cache_prediction_granularity``; it times all prefill chunks of a step as one, adds 10% to
batched GQA attention and 0.02 ms of NCCL launch per all-reduce, and leaves out the logits.
"""

from __future__ import annotations

import csv
import io
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from ...errors import InputError
from ...fileio import check_columns, read_text
from ...llm.model import ModelConfig
from ...workload import CollectiveKind
from .steps import LLMStepTimer
from .timing import Chunk, split_batch

#: Vidur's per-layer ops in mlp.csv: the GEMMs, then the element-wise kernels
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("mlp_act", "input_layernorm", "post_attention_layernorm", "attn_rope", "add")
MLP_OPS = GEMM_OPS + ELEMENTWISE_OPS
ATTENTION_OPS = ("attn_prefill", "attn_decode", "attn_kv_cache_save")
STATS = ("min", "max", "mean", "median", "std")
MS = 1e6  #: ns per ms

#: podsim zoo name -> (Vidur's model name, the vocab_size Vidur's model config says)
VIDUR_MODELS = {
    "llama2-7b": ("meta-llama/Llama-2-7b-hf", 32768),
    "llama2-70b": ("meta-llama/Llama-2-70b-hf", 32768),
    "llama3-8b": ("meta-llama/Meta-Llama-3-8B", 128256),
    "llama3-70b": ("meta-llama/Meta-Llama-3-70B", 128256),
}
#: podsim GPU key -> Vidur's device name
VIDUR_DEVICES = {"a100-80gb": "a100", "a100-40gb": "a100", "h100-80gb": "h100"}


def _col(op: str, stat: str = "median") -> str:
    return f"time_stats.{op}.{stat}"


def vidur_names(model: ModelConfig, gpu_key: str) -> tuple[str, str, str]:
    """(device, model, network device) folder names for ``model`` on ``gpu_key``: Vidur's own
    where it has them (``h100``, ``meta-llama/Llama-2-70b-hf``, ``h100_dgx``), podsim's otherwise."""
    device = VIDUR_DEVICES.get(gpu_key, gpu_key)
    return device, VIDUR_MODELS.get(model.name, (model.name, model.vocab))[0], f"{device}_dgx"


# -- grids (the points Vidur's profiler measures) -------------------------------------------------


def token_grid(max_tokens: int) -> list[int]:
    """Token counts of mlp.csv: 1, 2, 4, then steps of 8 up to 1024, of 16 up to 2048, and so on
    (the step doubles with each power of two), up to ``max_tokens``."""
    out = [n for n in (1, 2, 4) if n <= max_tokens]
    n = 8
    while n <= max_tokens:
        out.append(n)
        n += max(8, (1 << (n.bit_length() - 1)) // 64)
    return out


def kv_grid(max_len: int) -> list[int]:
    """KV lengths of attention.csv: steps of 32 up to 1024, of 64 up to 4096, of 256 beyond,
    below ``max_len``."""
    out, n = [], 0
    while n < max_len:
        out.append(n)
        n += 32 if n < 1024 else 64 if n < 4096 else 256
    return out


def chunk_grid(max_len: int) -> list[int]:
    """Prefill chunk sizes: steps of 16 from 64 to 128, of 32 to 1024, of 64 to 4096, of 128 to
    16384, of 256 beyond, up to ``max_len``."""
    out, n = [], 64
    while n <= max_len:
        out.append(n)
        n += 16 if n < 128 else 32 if n < 1024 else 64 if n < 4096 else 128 if n < 16384 else 256
    return out


def batch_grid(max_batch: int) -> list[int]:
    """Decode batch sizes: every size up to 128, then steps of 8."""
    return [b for b in list(range(1, 129)) + list(range(136, 1025, 8)) if b <= max_batch]


# -- writing --------------------------------------------------------------------------------------


def _find(directory: Path, name: str, kind: str, preferred: str) -> Path:
    """The table ``name`` in ``directory``: ``directory/name``, or the one file of that name in
    Vidur's tree (``compute/<device>/<model>/`` or ``network/<network device>/``), the
    ``preferred`` sub-path among several."""
    flat = directory / name
    if flat.is_file():
        return flat
    tree = directory / kind
    found = sorted(tree.rglob(name)) if tree.is_dir() else []
    if len(found) == 1:
        return found[0]
    for p in found:
        if p.parent == tree / preferred:
            return p
    where = f"{kind}/<device>/<model>/{name}" if kind == "compute" else f"{kind}/<network device>/{name}"
    if found:
        raise InputError(
            f"{len(found)} {name} files in Vidur's layout and none under {kind}/{preferred}: "
            + ", ".join(str(p.relative_to(directory)) for p in found)
            + "; give the folder that holds the one you mean",
            str(directory),
        )
    raise InputError(f"no {name}: expected {flat} or {directory / where} (Vidur's profile layout)", str(directory))


def _read_rows(path: Path, required: Sequence[str]) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV table; every ``required`` column must be there."""
    text = read_text(path, "profile table")
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise InputError("empty table (no header row)", str(path))
    check_columns(header, str(path))
    reader.fieldnames = header
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"{path.name} needs the columns {', '.join(required)}",
            str(path),
        )
    return header, list(reader)


def _number(path: Path, i: int, row: dict[str, str], col: str, empty_ok: bool = False) -> float | None:
    """The number in ``col`` of data row ``i`` (file line ``i + 2``)."""
    s = (row.get(col) or "").strip()
    if not s and empty_ok:
        return None
    try:
        v = float(s)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise InputError(
            f"{s!r} is not a number" if s else "empty, expected a number", f"{path}:{i + 2}", f"column {col}"
        )
    return v


#: the longest kernel or collective time a table may hold (ms): an hour
MAX_MS = 3.6e6


def _time(
    path: Path, i: int, row: dict[str, str], col: str, empty_ok: bool = False, zero_ok: bool = True
) -> float | None:
    """A measured time (ms) in ``col`` of data row ``i``: at most :data:`MAX_MS`, from 0 (an op
    a model skips) where ``zero_ok``, else above 0 (attention, a collective); None when empty
    and ``empty_ok``."""
    v = _number(path, i, row, col, empty_ok)
    if v is not None and not ((v >= 0 if zero_ok else v > 0) and v <= MAX_MS):
        raise InputError(
            f"{row[col].strip()!r} is not a time: expected milliseconds {'from 0' if zero_ok else 'above 0'} "
            f"to {MAX_MS:g}",
            f"{path}:{i + 2}",
            f"column {col}",
        )
    return v


def _count(path: Path, i: int, row: dict[str, str], col: str, least: int) -> int:
    """A whole number >= ``least`` (tokens, sequences, bytes) in ``col`` of data row ``i``."""
    v = _number(path, i, row, col)
    if not (v is not None and v == int(v) and least <= v <= 2**53):
        raise InputError(f"{row[col].strip()!r} is not a whole number >= {least}", f"{path}:{i + 2}", f"column {col}")
    return int(v)


def _flag(s: str) -> bool | None:
    return {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}.get(s.strip().lower())


def _fmt(values: Iterable[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(set(values)))


def _select(
    path: Path, sel: list[tuple[int, dict[str, str]]], header: Sequence[str], match: dict[str, float], what: str
) -> list[tuple[int, dict[str, str]]]:
    """The rows (index, row) whose ``match`` columns that the table has equal the values."""
    cols = [c for c in match if c in header]
    out = [(i, r) for i, r in sel if all(_number(path, i, r, c) == match[c] for c in cols)]
    if not out and sel:
        have = sorted({tuple(_number(path, i, r, c) for c in cols) for i, r in sel})
        raise InputError(
            f"no rows for {what} ({', '.join(f'{c} {match[c]:g}' for c in cols)}); "
            f"it has rows for "
            + "; ".join(", ".join(f"{c} {v:g}" for c, v in zip(cols, h)) for h in have[:6])
            + (" ..." if len(have) > 6 else ""),
            str(path),
        )
    return out


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Linear in ``x`` through the points (xs ascending); linear extrapolation from the two
    nearest points outside them, never below 0."""
    n = len(xs)
    if n == 1:
        return float(ys[0])
    i = bisect_left(xs, x)
    if i < n and xs[i] == x:
        return float(ys[i])
    i = min(max(i, 1), n - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    v = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return float(v) if x0 <= x <= x1 else max(0.0, float(v))


@dataclass
class _Grid2:
    """A table over (x, y) with y's points per x (attention: batch or chunk size, then KV length):
    linear in y along each x that covers y, then linear in x."""

    xs: list[int]  #: ascending
    ys: list[list[float]]  #: y's points along each x, ascending
    vs: list[list[float]]  #: the values there
    lo: float = 0.0  #: every x covers the y's from ``lo`` ...
    hi: float = -1.0  #: ... to ``hi``

    @classmethod
    def of(cls, points: dict[tuple[int, int], list[float]]) -> _Grid2:
        by_x: dict[int, list[tuple[int, float]]] = {}
        for (x, y), v in points.items():
            by_x.setdefault(x, []).append((y, sum(v) / len(v)))
        xs = sorted(by_x)
        ys = [[float(y) for y, _ in sorted(by_x[x])] for x in xs]
        vs = [[v for _, v in sorted(by_x[x])] for x in xs]
        return cls(xs, ys, vs, max(a[0] for a in ys), min(a[-1] for a in ys))

    def __call__(self, x: float, y: float) -> float:
        ok: Sequence[int]
        if self.lo <= y <= self.hi:  # every x covers y (the usual case)
            ok, xs = range(len(self.xs)), self.xs
        else:
            ok = (
                [j for j, a in enumerate(self.ys) if a[0] <= y <= a[-1]]
                or [j for j, a in enumerate(self.ys) if len(a) > 1]
                or range(len(self.xs))
            )
            xs = [self.xs[j] for j in ok]
        if len(xs) == 1:
            return _interp(self.ys[ok[0]], self.vs[ok[0]], y) * x / xs[0]
        i = min(max(bisect_left(xs, x), 1), len(xs) - 1)  # xs[i-1] < x <= xs[i], or the end pair
        a = _interp(self.ys[ok[i - 1]], self.vs[ok[i - 1]], y)
        if xs[i - 1] == x:
            return a
        b = _interp(self.ys[ok[i]], self.vs[ok[i]], y)
        return max(0.0, a + (b - a) * (x - xs[i - 1]) / (xs[i] - xs[i - 1]))


@dataclass
class VidurTables:
    """Measured times of one replica's ops (ns), read from Vidur's profile layout."""

    files: list[Path]
    tokens: list[float]  #: mlp.csv's token counts
    ops: dict[str, list[float]]  #: op -> ns at ``tokens``
    decode: _Grid2 | None  #: (batch size, KV length) -> ns
    prefill: _Grid2 | None  #: (chunk size, KV length) -> ns
    all_reduce: tuple[list[float], list[float]] | None = None  #: (bytes, ns)
    send_recv: tuple[list[float], list[float]] | None = None  #: (bytes, ns)

    def op_ns(self, op: str, tokens: float) -> float:
        """One layer's ``op`` over ``tokens`` tokens."""
        return _interp(self.tokens, self.ops[op], tokens)

    def attention_ns(self, batch: Sequence[Chunk]) -> float:
        """One layer's attention: the decode sequences (1 new token) by their number and mean
        context, plus each prefill chunk by its size and context."""
        return self.attention_split_ns(*split_batch(batch))

    def attention_split_ns(self, decodes: int, context: int, prefill: Sequence[Chunk]) -> float:
        """:meth:`attention_ns` of ``decodes`` one-token chunks of ``context`` tokens in all and
        the ``prefill`` chunks (none of one token)."""
        t = 0.0
        if decodes:
            if self.decode is None:
                raise InputError("attention.csv has no decode rows (prefill_chunk_size 0)", str(self.files[1]))
            t += self.decode(decodes, context / decodes)
        for n, c in prefill:
            if self.prefill is None:
                raise InputError(
                    "attention.csv has no prefill rows (prefill_chunk_size > 0, batch_size 1)", str(self.files[1])
                )
            t += self.prefill(n, c)
        return t


def load_vidur_tables(
    directory: str | Path, model: ModelConfig, gpu_key: str, tp: int, pp: int = 1, gpus_per_node: int = 8
) -> VidurTables:
    """Read the tables of ``model`` at TP ``tp`` from ``directory``: either a folder holding
    mlp.csv and attention.csv (and all_reduce.csv for TP > 1, send_recv.csv for PP > 1), or
    Vidur's ``data/profiling`` tree (the only one of each file, or that of Vidur's names for
    this model and GPU).  Rows of other model shapes (n_head, n_kv_head, n_embd, n_expanded_embd
    where the table has them) are left out; rows at the same point are averaged.

    Raises:
        InputError: for a missing file or column, a value that is not a number (file:line,
            column), a table without rows for this model or TP (naming the TPs it has).
    """
    d = Path(directory)
    if not d.is_dir():
        raise InputError("no such folder of profile tables", str(d))
    dev, vname, net = vidur_names(model, gpu_key)
    mlp_path = _find(d, "mlp.csv", "compute", f"{dev}/{vname}")
    att_path = _find(d, "attention.csv", "compute", f"{dev}/{vname}")
    ffn = model.expert_ffn if model.moe else model.ffn
    files = [mlp_path, att_path]

    # mlp.csv: the nine ops over num_tokens
    need = ["num_tokens", "num_tensor_parallel_workers"] + [_col(op) for op in MLP_OPS]
    header, rows = _read_rows(mlp_path, need)
    sel = _select(
        mlp_path,
        list(enumerate(rows)),
        header,
        {"n_head": model.heads, "n_kv_head": model.kv, "n_embd": model.hidden, "n_expanded_embd": ffn},
        f"{model.name}'s shape",
    )
    sel = _tp_rows(mlp_path, sel, "num_tensor_parallel_workers", tp)
    acc: dict[int, list[list[float]]] = {}
    for i, r in sel:
        t = _count(mlp_path, i, r, "num_tokens", 1)
        acc.setdefault(t, []).append([_time(mlp_path, i, r, _col(op)) * MS for op in MLP_OPS])  # type: ignore[operator]
    tokens = [float(t) for t in sorted(acc)]
    mean = {t: [sum(col) / len(col) for col in zip(*v)] for t, v in acc.items()}
    ops = {op: [mean[int(t)][k] for t in tokens] for k, op in enumerate(MLP_OPS)}

    # attention.csv: prefill rows by (chunk, context), decode rows by (batch, context)
    need = ["batch_size", "kv_cache_size", "prefill_chunk_size", "num_tensor_parallel_workers"]
    header, rows = _read_rows(att_path, need)
    for op in ("attn_prefill", "attn_decode"):
        if _col(op) not in header:
            raise InputError(
                f"missing column {_col(op)}; {att_path.name} needs the columns "
                f"{', '.join(need + [_col('attn_prefill'), _col('attn_decode')])}",
                str(att_path),
            )
    sel = _select(
        att_path,
        list(enumerate(rows)),
        header,
        {"n_q_head": model.heads, "n_kv_head": model.kv, "n_embd": model.hidden},
        f"{model.name}'s shape",
    )
    sel = _tp_rows(att_path, sel, "num_tensor_parallel_workers", tp)
    pre: dict[tuple[int, int], list[float]] = {}
    dec: dict[tuple[int, int], list[float]] = {}
    save = "time_stats.attn_kv_cache_save.median" in header
    for i, r in sel:
        b, c, n = (
            _count(att_path, i, r, k, low)
            for k, low in (("batch_size", 1), ("kv_cache_size", 0), ("prefill_chunk_size", 0))
        )
        extra = (_time(att_path, i, r, _col("attn_kv_cache_save"), empty_ok=True) or 0.0) if save else 0.0
        if "is_prefill" in r and _flag(r["is_prefill"] or "") is None:
            raise InputError(
                f"{r['is_prefill']!r} is not a flag: expected True or False", f"{att_path}:{i + 2}", "column is_prefill"
            )
        if n > 0:
            if b == 1:
                v = _time(att_path, i, r, _col("attn_prefill"), zero_ok=False)
                pre.setdefault((n, c), []).append((v + extra) * MS)  # type: ignore[operator]
        else:
            v = _time(att_path, i, r, _col("attn_decode"), zero_ok=False)
            dec.setdefault((b, c), []).append((v + extra) * MS)  # type: ignore[operator]
    tables = VidurTables(files, tokens, ops, _Grid2.of(dec) if dec else None, _Grid2.of(pre) if pre else None)

    def network(name: str, op: str, match: dict[str, float], what: str) -> tuple[list[float], list[float]]:
        path = _find(d, name, "network", net)
        files.append(path)
        need = ["size", _col(op)]
        header, rows = _read_rows(path, need + [c for c in ("num_workers",) if c in match])
        sel = [(i, r) for i, r in enumerate(rows) if "collective" not in header or r["collective"].strip() == op]
        if "num_workers" in match:
            sel = _tp_rows(path, sel, "num_workers", int(match.pop("num_workers")))
        sel = _select(path, sel, header, match, what)
        acc: dict[int, list[float]] = {}
        for i, r in sel:
            acc.setdefault(_count(path, i, r, "size", 1), []).append(_time(path, i, r, _col(op), zero_ok=False) * MS)  # type: ignore[operator]
        sizes = sorted(acc)
        return [float(s) for s in sizes], [sum(acc[s]) / len(acc[s]) for s in sizes]

    if tp > 1:
        tables.all_reduce = network(
            "all_reduce.csv",
            "all_reduce",
            {"num_workers": tp, "devices_per_node": min(tp, gpus_per_node)},
            f"TP {tp} on {min(tp, gpus_per_node)} GPUs of a node",
        )
    if pp > 1:
        inside = tp < gpus_per_node  # GPU 0 sends to GPU tp: the same node?
        tables.send_recv = network(
            "send_recv.csv",
            "send_recv",
            {"devices_per_node": 2 if inside else 1},
            "a send inside a node" if inside else "a send between nodes",
        )
    return tables


def _tp_rows(path: Path, sel: list[tuple[int, dict[str, str]]], col: str, tp: int) -> list[tuple[int, dict[str, str]]]:
    """The rows of TP ``tp``: an error naming the TPs the table has when there are none."""
    out = [(i, r) for i, r in sel if _number(path, i, r, col) == tp]
    if not out:
        have = {_number(path, i, r, col) for i, r in sel}
        raise InputError(
            f"column {col} has no rows for TP {tp}; the table has TP {_fmt(have) if have else 'none'}", str(path)
        )  # type: ignore[arg-type]
    return out


@dataclass
class TableStepTimer(LLMStepTimer):
    """An :class:`~.steps.LLMStepTimer` whose GEMM, attention, element-wise and communication
    times come from measured tables in Vidur's layout (:func:`load_vidur_tables`); the output
    layer, host overhead, MoE all-to-alls and memory stay podsim's model."""

    tables: VidurTables | None = None
    _table_tokens: dict[int, tuple[float, float, float]] = field(default_factory=dict, repr=False)

    def _table_costs(self, tokens: int) -> tuple[float, float, float]:
        """(GEMMs, element-wise, collectives) of one layer over ``tokens`` tokens (ns)."""
        hit = self._table_tokens.get(tokens)
        if hit is not None:
            return hit
        tab = self.tables
        assert tab is not None
        gemm = sum(tab.op_ns(op, tokens) for op in GEMM_OPS)
        elem = sum(tab.op_ns(op, tokens) for op in ELEMENTWISE_OPS)
        act = tokens * self.model.hidden * self.cm.elem_bytes
        comm = 2 * _interp(*tab.all_reduce, act) if tab.all_reduce is not None else 0.0
        if self.model.moe and self.ep > 1:  # the EP all-to-alls: podsim's model (no such table)
            ar = self._collective_ns(CollectiveKind.ALL_REDUCE, tuple(range(self.tp)), int(act))
            comm += max(0.0, self._token_costs(tokens)[2] - 2 * ar)
        out = self._table_tokens[tokens] = (gemm, elem, comm)
        return out

    def _parts(self, decodes: int, context: int, prefill: Sequence[Chunk]) -> tuple[float, ...]:
        """``stage_ns`` by part (ns), as :meth:`LLMStepTimer._parts`: ``gemm``, ``attention``,
        ``elementwise``, ``communication`` from the tables; ``output`` and ``host`` from podsim's model."""
        seqs = decodes + len(prefill)
        if not seqs:
            return (self.step_host_ns(0),)
        assert self.tables is not None
        tokens = decodes + sum(n for n, _ in prefill)
        gemm, elem, comm = self._table_costs(tokens)
        layers = self.layers_per_stage
        m, cm = self.model, self.cm
        out, host = self._per_seqs(seqs)  # the logits (Vidur's layout has no row for them)
        send = 0.0
        if self.pp > 1:
            assert self.tables.send_recv is not None
            send = _interp(*self.tables.send_recv, tokens * m.hidden * cm.elem_bytes)
        return (
            layers * gemm,
            layers * self.tables.attention_split_ns(decodes, context, prefill),
            layers * elem,
            layers * comm + send,
            out,
            host,
        )


def table_step_timer(timer: LLMStepTimer, directory: str | Path, gpus_per_node: int = 8) -> TableStepTimer:
    """``timer``'s replica with its step times from the tables in ``directory`` (Vidur's layout)."""
    tables = load_vidur_tables(directory, timer.model, timer.gpu.key, timer.tp, timer.pp, gpus_per_node)
    kw = {f.name: getattr(timer, f.name) for f in fields(LLMStepTimer) if f.init and f.name != "_per_tokens"}
    return TableStepTimer(**kw, tables=tables)
