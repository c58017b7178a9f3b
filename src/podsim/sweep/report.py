"""The HTML report of ``podsim search --report OUT.html``.

One self-contained file a browser opens offline: inline CSS, inline JavaScript that draws inline
SVG charts (no library, no network), and the search's rows embedded as JSON in a
``<script type="application/json">`` element.  It shows

- the Pareto front: every layout as throughput (tokens/s) against peak memory per GPU (GiB), or
  against cost ($ per million tokens) when the rows carry ``cost_per_mtok_usd``; the layouts no
  other layout beats on both (more tokens/s for no more memory or cost) highlighted and joined;
  the layouts the search simulated exactly (row field ``method`` ``simulated``, or no ``method``:
  older documents) filled, those it only estimated in closed form (``estimated``) hollow;
- the time breakdown of the top layouts (compute, exposed communication, pipeline bubble, other;
  s per iteration) as stacked bars;
- the memory per pipeline stage of the top layouts (weights, gradients, optimizer states,
  activations, buffers; GiB) as small multiples;
- a sortable table of the top layouts with their method and ``podsim llm`` command (ranked as the
  search ranks them: the simulated layouts first, then the estimated ones);
- filters by GPU count and parallel dimension (TP, PP, VPP, CP, EP, DP, micro-batch,
  recomputation, sequence parallelism, distributed optimizer, ZeRO stage, TP communication overlap,
  overlapped gradient reduce and parameter gather) that redraw everything; a dimension the rows do
  not carry (older documents) has no filter, one with a single value a disabled one.

The page reads an initial state from its URL hash (``#tp=8,4&pp=1&x=cost&color=pp&sort=-mfu``) and keeps
the hash in step with the filters, so a view can be shared as a link.  When it has drawn it sets
``document.body.dataset.ready = "1"``; script errors are recorded in
``document.body.dataset.errors`` (a test reads both from the DOM).

The page's HTML, CSS and JavaScript are package files in ``podsim/report/html/`` (the room of the
exporters; shipped as package data, read with :mod:`importlib.resources`); this module builds the
data and fills the template.

Units: tokens/s, GiB (2^30 B), s, US $ per million tokens.
"""

from __future__ import annotations

import html
import json
import math
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any, Iterable, Sequence

from ..fileio import atomic_write_text

#: the layout fields a row carries in the page, in this order
LAYOUT_COLS = (
    "gpus",
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "micro_batch",
    "num_microbatches",
    "global_batch",
    "seq_len",
    "recompute",
    "sequence_parallel",
    "distributed_optimizer",
    "schedule",
    "zero",
    "tp_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
)
#: the columns of an embedded row (``rows`` of the payload are lists in this order)
COLS = LAYOUT_COLS + (
    "tokens_per_s",
    "mfu",
    "iteration_time_s",
    "memory_peak_gib",
    "cost_per_mtok_usd",
    "goodput",
    "time_to_train_h",
    "breakdown",
    "memory_per_stage",
    "flow",
    "command",
    "best",
    "simulated",
)
BREAKDOWN_KEYS = ("compute_s", "exposed_comm_s", "bubble_s", "other_s")
STAGE_KEYS = ("weights_gib", "gradients_gib", "optimizer_gib", "activations_gib", "buffers_gib", "total_gib")
FLOW_KEYS = ("iteration_time_s", "tokens_per_s", "mfu")


#: the package and folder that hold the page's files (shipped as package data)
ASSET_PACKAGE = "podsim.report"
ASSET_DIR = "html"
#: the page's files: the HTML template, its style sheet and its script
PAGE_FILE = "search_report.html"
CSS_FILE = "search_report.css"
JS_FILE = "search_report.js"


@lru_cache(maxsize=1)
def _assets() -> tuple[Template, str, str]:
    """The page template (a :class:`string.Template` with ``${title}``, ``${css}``, ``${js}`` and
    ``${data}``; a literal ``$`` is written ``$$`` in it), the CSS and the JavaScript, read once
    from the package's ``report/html`` folder.  The CSS and JavaScript are inserted verbatim."""
    folder = resources.files(ASSET_PACKAGE).joinpath(ASSET_DIR)

    def read(name: str) -> str:
        return folder.joinpath(name).read_text(encoding="utf-8")

    return Template(read(PAGE_FILE)), read(CSS_FILE), read(JS_FILE)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices (ascending) of the points no other point dominates, where ``x`` is to be
    minimised (memory or cost) and ``y`` maximised (throughput): ``q`` dominates ``p`` when
    ``q.x <= p.x`` and ``q.y >= p.y`` and the two differ.  Equal points are all kept.  Points
    with a non-finite coordinate are left out.  The page's JavaScript does the same."""
    idx = [i for i, (x, y) in enumerate(points) if math.isfinite(x) and math.isfinite(y)]
    idx.sort(key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    best_y = -math.inf
    last: tuple[float, float] | None = None
    for i in idx:
        p = points[i]
        if p[1] > best_y:
            front.append(i)
            best_y = p[1]
            last = p
        elif last is not None and p == last:
            front.append(i)
    return sorted(front)


def _num(v: Any) -> float | int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return v
    return None


def simulated(row: dict[str, Any]) -> bool:
    """Whether the search simulated ``row`` exactly (``method`` ``simulated``, or none: documents
    from before the closed-form estimate) rather than estimating it (``estimated``)."""
    return row.get("method", "simulated") != "estimated"


def _key(row: dict[str, Any]) -> str:
    cmd = row.get("command")
    if isinstance(cmd, str) and cmd:
        return cmd
    return json.dumps(row.get("layout", {}), sort_keys=True, default=str)


def _merge(rows: list[dict[str, Any]], best: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[int]]:
    """All rows, best first, with what a ``best`` row adds (a breakdown, memory per stage, flow)
    merged into its entry of ``rows``; and the positions of the best rows."""
    if not rows:
        rows = list(best)
    out = [dict(r) for r in rows]
    where = {}
    for i, r in enumerate(out):
        where.setdefault(_key(r), i)
    best_at: set[int] = set()
    for b in best:
        i = where.get(_key(b))
        if i is None:
            out.append(dict(b))
            i = len(out) - 1
            where[_key(b)] = i
        else:
            for k, v in b.items():
                if v is not None and (out[i].get(k) is None or k in ("breakdown", "memory_per_stage", "flow")):
                    if k == "breakdown" and isinstance(out[i].get(k), dict) and isinstance(v, dict):
                        v = {**out[i][k], **{kk: vv for kk, vv in v.items() if vv is not None}}
                    out[i][k] = v
        best_at.add(i)
    return out, best_at


class _Parts:
    """Commands stored as indices into a table of their ``--option value`` parts (10,000 rows of
    ~250-character commands share almost all their parts)."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def encode(self, command: Any) -> list[int] | None:
        if not isinstance(command, str):
            return None
        out = []
        for p in command.split(" --"):
            i = self.index.get(p)
            if i is None:
                i = self.index[p] = len(self.table)
                self.table.append(p)
            out.append(i)
        return out


def decode_command(parts: Sequence[str], encoded: Iterable[int] | None) -> str | None:
    """A command back from its part indices (the page does ``parts.join(" --")``)."""
    return None if encoded is None else " --".join(parts[i] for i in encoded)


def payload(doc: dict[str, Any]) -> dict[str, Any]:
    """The data the page embeds: ``meta`` (model, GPU, objective, counts: ``simulated``,
    ``estimated`` and ``flow`` rows among them, rejected reasons),
    ``cols`` (:data:`COLS`), ``parts`` (the command parts) and ``rows`` (lists, best first)."""
    rows, best_at = _merge(list(doc.get("rows") or []), list(doc.get("best") or []))
    parts = _Parts()
    packed = []
    for i, r in enumerate(rows):
        lay = r.get("layout") or {}
        rec: list[Any] = []
        for c in LAYOUT_COLS:
            v = lay.get(c)
            rec.append(v if isinstance(v, (bool, int, float, str)) else None)
        for c in ("tokens_per_s", "mfu", "iteration_time_s", "memory_peak_gib", "cost_per_mtok_usd"):
            rec.append(_num(r.get(c)))
        g = r.get("goodput")  # podsim search --goodput: the share of wall time that trains, hours to train
        rec.append(_num(g.get("goodput")) if isinstance(g, dict) else None)
        rec.append(_num(g.get("expected_time_to_train_h")) if isinstance(g, dict) else None)
        bd = r.get("breakdown")
        rec.append([_num(bd.get(k)) for k in BREAKDOWN_KEYS] if isinstance(bd, dict) else None)
        st = r.get("memory_per_stage")
        if isinstance(st, list) and st and all(isinstance(s, dict) for s in st):
            rec.append([[_num(s.get(k)) for k in STAGE_KEYS] + [s.get("stage", j)] for j, s in enumerate(st)])
        else:
            rec.append(None)
        fl = r.get("flow")
        rec.append([_num(fl.get(k)) for k in FLOW_KEYS] if isinstance(fl, dict) else None)
        rec.append(parts.encode(r.get("command")))
        rec.append(1 if i in best_at else 0)
        rec.append(1 if simulated(r) else 0)
        packed.append(rec)
    rejected = doc.get("rejected") or {}
    n_sim = sum(1 for rec in packed if rec[-1])
    meta = {
        "model": str(doc.get("model", "")),
        "gpu": str(doc.get("gpu", "")),
        "objective": str(doc.get("objective", "")),
        "evaluated": doc.get("evaluated"),
        "reused": doc.get("reused"),
        "rejected": sorted(([str(k), int(v)] for k, v in dict(rejected).items()), key=lambda kv: -kv[1]),
        "best": len(best_at),
        "simulated": n_sim,
        "estimated": len(packed) - n_sim,
        "flow": sum(1 for r in rows if isinstance(r.get("flow"), dict)),
        "global_batch": _num(doc.get("global_batch")),
        "seq_len": _num(doc.get("seq_len")),
    }
    return {"meta": meta, "cols": list(COLS), "parts": parts.table, "rows": packed}


def _embed(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<`` at all (so neither ``</script>`` nor
    ``<!--`` can end or change it); ``\\u003c`` is the same string to ``JSON.parse``."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def render_report(doc: dict[str, Any]) -> str:
    """The report's HTML for a search's JSON document (``model``, ``gpu``, ``objective``,
    ``evaluated``, ``reused``, ``rejected``, ``best``, ``rows``, optionally ``global_batch`` and
    ``seq_len``; see :mod:`podsim.sweep.search`)."""
    data = payload(doc)
    meta = data["meta"]
    title = f"podsim search: {meta['model'] or 'model'} on {meta['gpu'] or 'GPU'}"
    page, css, js = _assets()
    return page.substitute(title=html.escape(title), css=css, js=js, data=_embed(data))


def write_report(path: str, doc: dict[str, Any]) -> None:
    """Write the report of ``doc`` to ``path`` (whole or not at all).

    Raises:
        InputError: when ``path`` cannot be written.
    """
    atomic_write_text(path, render_report(doc))
