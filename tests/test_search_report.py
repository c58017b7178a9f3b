"""The HTML report of ``podsim search --report`` (issue #15, point 5): the page embeds every row,
and a real headless browser (Debian's Chromium) loads it without script errors and draws its
charts: a point per layout, the Pareto front the Python reference computes, a bar per top layout,
a panel per layout with memory per stage, filters read from the URL hash, and the edge cases
(one row, no breakdown, no memory per stage, equal values, no cost, 10,000 rows); the rows the
search only estimated in closed form drawn hollow and ranked after the simulated ones, and filters
by ZeRO stage and the overlap options where the rows carry them.

The browser tests skip when Chromium is absent (``apt-get install chromium``), unless
``PODSIM_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from podsim.sweep.report import COLS, decode_command, pareto_front, payload, render_report, write_report

# ---------------------------------------------------------------------------------------------
# documents


def _row(
    i: int,
    gpus: int,
    tp: int,
    pp: int,
    vpp: int,
    cp: int,
    ep: int,
    mb: int,
    rc: str,
    sp: bool,
    do: bool,
    rng: random.Random,
    cost: bool = True,
) -> dict[str, Any]:
    dp = max(1, gpus // (tp * pp * cp))
    gb = 256
    t = round(rng.uniform(0.8, 4.0), 9)
    row: dict[str, Any] = {
        "layout": {
            "gpus": gpus,
            "tp": tp,
            "pp": pp,
            "vpp": vpp,
            "cp": cp,
            "ep": ep,
            "dp": dp,
            "micro_batch": mb,
            "num_microbatches": max(1, gb // (mb * dp)),
            "global_batch": gb,
            "seq_len": 4096,
            "recompute": rc,
            "sequence_parallel": sp,
            "distributed_optimizer": do,
            "schedule": "interleaved" if vpp > 1 else "1f1b",
        },
        "tokens_per_s": round(gb * 4096 / t, 3),
        "mfu": round(rng.uniform(0.2, 0.6), 5),
        "iteration_time_s": t,
        "memory_peak_gib": round(rng.uniform(5, 79), 4),
        "command": (
            f"podsim llm --model llama3-8b --gpu h100 --gpus {gpus} --tp {tp} --pp {pp} --vpp {vpp} --cp {cp} "
            f"--ep {ep} --global-batch {gb} --micro-batch {mb} --seq-len 4096 --recompute {rc}"
            + (" --sequence-parallel" if sp else "")
            + (" --distributed-optimizer" if do else "")
            + " --backend analytical"
        ),
        "breakdown": {"compute_s": round(t * 0.8, 9), "exposed_comm_s": None, "bubble_s": None, "other_s": None},
    }
    if cost:
        row["cost_per_mtok_usd"] = round(3.0 * gpus * t / 3600 / (gb * 4096) * 1e6, 6)
    return row


def synthetic(
    n: int,
    *,
    cost: bool = True,
    breakdown_top: int = 5,
    memory_top: int = 3,
    seed: int = 1,
    simulated: int | None = None,
    flow_top: int = 0,
) -> dict[str, Any]:
    """``n`` rows over distinct layouts, best (most tokens/s) first; the first ``breakdown_top``
    carry a full time breakdown, the first ``memory_top`` memory per stage.

    With ``simulated``: rows as the search now makes them, whose layouts carry ``zero``,
    ``tp_overlap``, ``overlap_grad_reduce`` and ``overlap_param_gather``: the best ``simulated``
    (by tokens/s) with ``method`` ``simulated`` first, then the rest, ``estimated``, with no
    breakdown (each group best first); the first ``flow_top`` with a flow re-run.  Without: rows
    as older documents have them (no method, none of those four fields)."""
    rng = random.Random(seed)
    space = list(
        itertools.product(
            (64, 128),
            (1, 2, 4, 8),
            (1, 2, 4, 8, 16),
            (1, 2),
            (1, 2),
            (1, 2),
            (1, 2, 4),
            ("none", "selective", "full"),
            (False, True),
            (True, False),
        )
    )
    rng.shuffle(space)
    rows = [_row(i, *p, rng=rng, cost=cost) for i, p in zip(range(n), space)]
    assert len(rows) == n
    rows.sort(key=lambda r: -r["tokens_per_s"])
    if simulated is not None:
        # the search ranks the simulated rows (the best estimates) first: here the best by tokens/s
        # and every third of the rest, so that the two groups overlap on the chart
        head = simulated // 2
        sim = set(range(head)) | set([i for i in range(head, n) if i % 3 == 0][: simulated - head])
        rows = [r for i, r in enumerate(rows) if i in sim] + [r for i, r in enumerate(rows) if i not in sim]
        for k, r in enumerate(rows):
            r["method"] = "simulated" if k < simulated else "estimated"
            r["layout"].update(
                zero=rng.choice((0, 0, 1, 3)),
                tp_overlap=rng.choice(("te", "async", "none")),
                overlap_grad_reduce=rng.random() < 0.7,
                overlap_param_gather=rng.random() < 0.7,
            )
            if k >= simulated:
                r["breakdown"] = None
        for r in rows[:flow_top]:
            r["flow"] = {
                "iteration_time_s": r["iteration_time_s"] * 1.01,
                "tokens_per_s": r["tokens_per_s"] / 1.01,
                "mfu": r["mfu"] / 1.01,
                "command": r["command"].replace("analytical", "flow"),
            }
    for r in rows[:breakdown_top]:
        t = r["iteration_time_s"]
        r["breakdown"] = {
            "compute_s": round(t * 0.7, 9),
            "exposed_comm_s": round(t * 0.1, 9),
            "bubble_s": round(t * 0.15, 9),
            "other_s": round(t * 0.05, 9),
        }
    for r in rows[:memory_top]:
        pp = r["layout"]["pp"]
        r["memory_per_stage"] = [
            {
                "stage": s,
                "weights_gib": 4.0,
                "gradients_gib": 8.0,
                "optimizer_gib": 1.5,
                "activations_gib": 20.0 - s,
                "buffers_gib": 0.5,
                "total_gib": 34.0 - s,
            }
            for s in range(pp)
        ]
    doc = {
        "model": "Llama 3 8B",
        "gpu": "NVIDIA H100 80GB",
        "objective": "tokens",
        "evaluated": n,
        "reused": 0,
        "rejected": {"does not fit in 80 GiB per GPU": 500, "N GPUs are not divisible by TP x PP x CP": 3},
        "best": rows[: max(breakdown_top, memory_top, 1)],
        "rows": rows,
    }
    if simulated is not None:
        doc.update(simulated=simulated, flow=flow_top, gpus=[64, 128], global_batch=256, seq_len=4096)
    return doc


# ---------------------------------------------------------------------------------------------
# pure Python


def test_pareto_front_of_a_hand_worked_example() -> None:
    pts = [
        (10, 100),  # 0: front
        (20, 150),  # 1: front
        (15, 90),  # 2: 0 has less memory and more throughput
        (20, 150),  # 3: equal to 1: kept (neither beats the other)
        (30, 140),  # 4: 1 beats it
        (5, 50),  # 5: front (least memory)
        (40, 200),  # 6: front (most throughput)
        (10, 80),  # 7: 0 has the same memory and more throughput
        (math.nan, 1000),
    ]  # 8: no memory: not plotted
    assert pareto_front(pts) == [0, 1, 3, 5, 6]
    assert pareto_front([]) == [] and pareto_front([(1.0, 1.0)]) == [0]


def _embedded(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="podsim-data">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def test_the_page_embeds_every_row() -> None:
    doc = synthetic(60)
    page = render_report(doc)
    data = _embedded(page)
    assert data["cols"] == list(COLS) and len(data["rows"]) == 60
    assert data["meta"]["model"] == "Llama 3 8B" and data["meta"]["best"] == 5
    assert data["meta"]["rejected"][0] == ["does not fit in 80 GiB per GPU", 500]
    for rec, row in zip(data["rows"], doc["rows"]):
        r = dict(zip(data["cols"], rec))
        for k in (
            "tp",
            "pp",
            "vpp",
            "cp",
            "ep",
            "dp",
            "micro_batch",
            "recompute",
            "sequence_parallel",
            "distributed_optimizer",
            "gpus",
        ):
            assert r[k] == row["layout"][k]
        for k in ("tokens_per_s", "mfu", "iteration_time_s", "memory_peak_gib", "cost_per_mtok_usd"):
            assert r[k] == row[k]
        assert decode_command(data["parts"], r["command"]) == row["command"]
        assert r["breakdown"] == [row["breakdown"][k] for k in ("compute_s", "exposed_comm_s", "bubble_s", "other_s")]
        assert (r["memory_per_stage"] is None) == ("memory_per_stage" not in row)
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page
    assert "<link" not in page and " src=" not in page  # nothing fetched: one self-contained file


def test_best_rows_add_what_rows_lack() -> None:
    doc = synthetic(8, breakdown_top=0, memory_top=0)
    best = json.loads(json.dumps(doc["rows"][:2]))
    best[0]["breakdown"] = {"compute_s": 1.0, "exposed_comm_s": 0.5, "bubble_s": 0.25, "other_s": 0.0}
    best[1]["flow"] = {"iteration_time_s": 2.0, "tokens_per_s": 524288.0, "mfu": 0.4}
    doc["best"] = best
    rows = payload(doc)["rows"]
    cols = list(COLS)
    assert len(rows) == 8
    assert rows[0][cols.index("breakdown")] == [1.0, 0.5, 0.25, 0.0]
    assert rows[1][cols.index("flow")] == [2.0, 524288.0, 0.4]
    assert [r[cols.index("best")] for r in rows] == [1, 1, 0, 0, 0, 0, 0, 0]
    # a document with only best rows
    only = payload({"best": best})
    assert len(only["rows"]) == 2


def test_the_method_and_the_new_layout_fields_are_embedded() -> None:
    doc = synthetic(60, simulated=12, flow_top=3)
    data = payload(doc)
    cols = list(COLS)
    assert [r[cols.index("simulated")] for r in data["rows"]] == [1] * 12 + [0] * 48
    assert data["meta"]["simulated"] == 12 and data["meta"]["estimated"] == 48 and data["meta"]["flow"] == 3
    assert data["meta"]["global_batch"] == 256 and data["meta"]["seq_len"] == 4096
    for rec, row in zip(data["rows"], doc["rows"]):
        for k in ("zero", "tp_overlap", "overlap_grad_reduce", "overlap_param_gather"):
            assert rec[cols.index(k)] == row["layout"][k]
    # an older document: no method (simulated), none of the new fields
    old = payload(synthetic(5))
    assert [r[cols.index("simulated")] for r in old["rows"]] == [1] * 5 and old["meta"]["estimated"] == 0
    assert all(r[cols.index("tp_overlap")] is None for r in old["rows"])


def test_script_text_in_the_data_cannot_end_the_data_element(tmp_path: Path) -> None:
    doc = synthetic(3)
    doc["model"] = "evil</script><script>alert(1)</script><!--"
    doc["rows"][0]["command"] += " --note </script>"
    page = render_report(doc)
    assert "alert(1)</script>" not in page and "<!--" not in page.split("<body>")[1]
    data = _embedded(page)
    assert data["meta"]["model"] == doc["model"]
    assert decode_command(data["parts"], data["rows"][0][COLS.index("command")]).endswith("--note </script>")
    out = tmp_path / "sub" / "r.html"
    write_report(str(out), doc)
    assert out.read_text(encoding="utf-8") == page


def test_ten_thousand_rows_make_a_file_of_a_few_megabytes() -> None:
    page = render_report(synthetic(10_000))
    assert len(page.encode("utf-8")) < 3_000_000
    assert len(_embedded(page)["rows"]) == 10_000


# ---------------------------------------------------------------------------------------------
# a real browser


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        exe = shutil.which(name)
        if exe:
            return exe
    msg = "Chromium not found: apt-get install chromium (the HTML report's browser tests need it)"
    if os.environ.get("PODSIM_REQUIRE_BROWSER") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--mute-audio",
]


class _Dom(HTMLParser):
    """Start tags with their attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.html = ""  #: the serialised DOM

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def find(self, tag: str, cls: str | None = None, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.tags
            if t == tag
            and (cls is None or cls in a.get("class", "").split())
            and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def load(doc: dict[str, Any], tmp: Path, hash_: str = "", *, name: str = "report.html") -> _Dom:
    """The DOM after the page ran in Chromium, checked for readiness and script errors."""
    exe = _chromium()
    page = tmp / name
    write_report(str(page), doc)
    with tempfile.TemporaryDirectory(dir=tmp) as profile:
        p = subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=5000",
                "--dump-dom",
                page.as_uri() + hash_,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    dom = _Dom()
    dom.feed(p.stdout)
    dom.html = p.stdout
    body = dom.find("body")
    assert body, p.stdout[:500]
    assert "data-errors" not in body[0], body[0]["data-errors"]
    assert body[0].get("data-ready") == "1", "the page did not finish drawing"
    return dom


def _ints(attrs: list[dict[str, str]], key: str = "data-i") -> set[int]:
    return {int(a[key]) for a in attrs}


def _rows_front(rows: list[dict[str, Any]], ids: list[int], x: str) -> set[int]:
    pts = [(rows[i][x] if x in rows[i] else math.nan, rows[i]["tokens_per_s"]) for i in ids]
    return {ids[k] for k in pareto_front(pts)}


def test_the_browser_draws_every_chart(tmp_path: Path) -> None:
    doc = synthetic(300)
    rows = doc["rows"]
    dom = load(doc, tmp_path)
    assert dom.find("body")[0]["data-shown"] == "300"
    pts = dom.find("circle", "pt")
    assert len(pts) == 300 and _ints(pts) == set(range(300))
    front = dom.find("circle", "front")
    assert _ints(front) == _rows_front(rows, list(range(300)), "memory_peak_gib") and len(front) >= 2
    assert len(dom.find("path", "front-line")) == 1
    # a bar per top layout with a breakdown (5 here), four segments each
    assert _ints(dom.find("g", "bd-bar")) == {0, 1, 2, 3, 4}
    assert dom.find("svg", id="breakdown-svg")[0]["data-bars"] == "5"
    # a panel per top layout with memory per stage, a bar per stage
    panels = dom.find("div", "panel")
    assert _ints(panels) == {0, 1, 2}
    stages = [int(a["data-stages"]) for a in dom.find("svg", "memory-svg")]
    assert stages == [rows[i]["layout"]["pp"] for i in range(3)]
    assert len(dom.find("g", "mem-bar")) == sum(stages)
    # the table: the first 50 layouts, best first
    trs = [a for a in dom.find("tr") if "data-i" in a]
    assert [int(a["data-i"]) for a in trs] == list(range(50))
    # rows without a method (older documents) count as simulated: all filled, none hollow
    assert len(dom.find("circle", "sim")) == 300 and dom.find("circle", "est") == []
    assert {a["data-method"] for a in trs} == {"simulated"}
    assert dom.find("span", id="methods")[0]["data-simulated"] == "300"
    # filters: a checkbox per value present; none for ZeRO and the overlaps, which these rows lack
    dims = [
        "gpus",
        "tp",
        "pp",
        "vpp",
        "cp",
        "ep",
        "dp",
        "micro_batch",
        "recompute",
        "sequence_parallel",
        "distributed_optimizer",
    ]
    assert [a["data-dim"] for a in dom.find("fieldset")] == dims
    boxes = [a["data-value"] for a in dom.find("input") if a.get("type") == "checkbox"]
    want = []
    for d in dims:
        want += sorted({json.dumps(r["layout"][d]).strip('"') for r in rows})
    assert (
        sorted(boxes) == sorted(want)
        and len(boxes) == 2 + 4 + 5 + 2 + 2 + 2 + len({r["layout"]["dp"] for r in rows}) + 3 + 3 + 4
    )
    # axis titles carry units
    texts = _texts(tmp_path / "report.html")
    for unit in ("throughput (tokens/s)", "peak memory per GPU (GiB", "time per iteration (s)", "memory per GPU (GiB)"):
        assert unit in texts


def _texts(page: Path) -> str:
    exe = _chromium()
    with tempfile.TemporaryDirectory(dir=page.parent) as profile:
        p = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    return p.stdout


def test_filters_and_the_cost_axis_come_from_the_url_hash(tmp_path: Path) -> None:
    doc = synthetic(300)
    rows = doc["rows"]
    keep = [i for i, r in enumerate(rows) if r["layout"]["tp"] == 8 and r["layout"]["recompute"] in ("none", "full")]
    dom = load(doc, tmp_path, "#tp=8&recompute=none,full")
    assert dom.find("body")[0]["data-shown"] == str(len(keep))
    assert _ints(dom.find("circle", "pt")) == set(keep)
    assert _ints(dom.find("circle", "front")) == _rows_front(rows, keep, "memory_peak_gib")
    boxes = dom.find("input", type="checkbox")
    off = {(a["data-dim"], a["data-value"]) for a in boxes if "checked" not in a}
    assert off == {("tp", "1"), ("tp", "2"), ("tp", "4"), ("recompute", "selective")}
    # the top layouts' charts and table follow the filter
    assert _ints(dom.find("g", "bd-bar")) == {i for i in keep if i < 5}
    trs = [int(a["data-i"]) for a in dom.find("tr") if "data-i" in a]
    assert trs == keep[:50]
    # sorted by memory, least first (ties: by rank)
    dom = load(doc, tmp_path, "#sort=memory_peak_gib&tp=8")
    trs = [int(a["data-i"]) for a in dom.find("tr") if "data-i" in a]
    assert (
        trs
        == sorted(
            keep + [i for i, r in enumerate(rows) if r["layout"]["tp"] == 8 and i not in keep],
            key=lambda i: (rows[i]["memory_peak_gib"], i),
        )[:50]
    )
    # against cost
    dom = load(doc, tmp_path, "#x=cost")
    assert _ints(dom.find("circle", "front")) == _rows_front(rows, list(range(300)), "cost_per_mtok_usd")
    assert "cost ($ per million tokens" in _texts(tmp_path / "report.html")


def test_estimated_rows_are_drawn_hollow_and_ranked_after_the_simulated(tmp_path: Path) -> None:
    doc = synthetic(300, simulated=40, flow_top=3)
    rows = doc["rows"]
    dom = load(doc, tmp_path)
    # the chart: a filled point per simulated row, a hollow one per estimated row
    sim, est = dom.find("circle", "sim"), dom.find("circle", "est")
    assert _ints(sim) == set(range(40)) and _ints(est) == set(range(40, 300))
    assert all("pt" in a["class"].split() for a in sim + est)
    assert dom.find("svg", id="pareto-svg")[0]["data-simulated"] == "40"
    front = dom.find("circle", "front")
    assert _ints(front) == _rows_front(rows, list(range(300)), "memory_peak_gib")
    assert {int(a["data-i"]) for a in front if "est" in a["class"].split()} == {i for i in _ints(front) if i >= 40}
    assert dom.find("span", "method-sim") and dom.find("span", "method-est")
    # the header: how many of each
    m = dom.find("span", id="methods")[0]
    assert (m["data-estimated"], m["data-simulated"], m["data-flow"]) == ("260", "40", "3")
    text = dom.html
    assert "260 estimated, 40 simulated, 3 also with the flow backend" in text
    assert "estimated (closed form)" in text and "256 \u00d7 4,096 tokens" in text
    # the table: ranked as the search ranks, simulated first, a rule before the first estimated row
    trs = [a for a in dom.find("tr") if "data-i" in a]
    assert [int(a["data-i"]) for a in trs] == list(range(50))
    assert [a["data-method"] for a in trs] == ["simulated"] * 40 + ["estimated"] * 10
    assert [int(a["data-i"]) for a in trs if "first-est" in a["class"].split()] == [40]
    assert "the 40 simulated exactly first, then the 260 estimated in closed form" in text
    assert re.search(r"<td[^>]*>41</td><td[^>]*>estimated</td>", text)
    # sorted by another column: no rule
    dom = load(doc, tmp_path, "#sort=-mfu")
    assert not [a for a in dom.find("tr") if "first-est" in a.get("class", "").split()]


def test_filters_by_zero_and_the_overlaps(tmp_path: Path) -> None:
    doc = synthetic(300, simulated=40)
    rows = doc["rows"]
    dom = load(doc, tmp_path, "#tp_overlap=async")
    keep = [i for i, r in enumerate(rows) if r["layout"]["tp_overlap"] == "async"]
    assert 0 < len(keep) < 300 and dom.find("body")[0]["data-shown"] == str(len(keep))
    assert _ints(dom.find("circle", "pt")) == set(keep)
    assert _ints(dom.find("circle", "sim")) == {i for i in keep if i < 40}
    dims = [a["data-dim"] for a in dom.find("fieldset")]
    assert dims[-4:] == ["zero", "tp_overlap", "overlap_grad_reduce", "overlap_param_gather"]
    boxes = {(a["data-dim"], a["data-value"]): "checked" in a for a in dom.find("input", type="checkbox")}
    assert {k: v for k, v in boxes.items() if k[0] == "tp_overlap"} == {
        ("tp_overlap", "te"): False,
        ("tp_overlap", "async"): True,
        ("tp_overlap", "none"): False,
    }
    assert {k for k in boxes if k[0] in ("zero", "overlap_grad_reduce", "overlap_param_gather")} == {
        ("zero", "0"),
        ("zero", "1"),
        ("zero", "3"),
        ("overlap_grad_reduce", "false"),
        ("overlap_grad_reduce", "true"),
        ("overlap_param_gather", "false"),
        ("overlap_param_gather", "true"),
    }
    # several at once, and the table follows
    dom = load(doc, tmp_path, "#zero=1,3&overlap_grad_reduce=false&overlap_param_gather=true")
    keep = [
        i
        for i, r in enumerate(rows)
        if r["layout"]["zero"] in (1, 3)
        and not r["layout"]["overlap_grad_reduce"]
        and r["layout"]["overlap_param_gather"]
    ]
    assert keep and _ints(dom.find("circle", "pt")) == set(keep)
    assert [int(a["data-i"]) for a in dom.find("tr") if "data-i" in a] == keep[:50]
    # a single value: a disabled filter (as for CP and EP)
    for r in rows:
        r["layout"]["zero"] = 0
    dom = load(doc, tmp_path)
    zero = [a for a in dom.find("input", type="checkbox") if a["data-dim"] == "zero"]
    assert len(zero) == 1 and "disabled" in zero[0]


def test_the_tooltip_names_the_method(tmp_path: Path) -> None:
    exe = _chromium()
    page = tmp_path / "tip.html"
    html = render_report(synthetic(20, simulated=5))
    hover = (
        "<script>function hover(i) { var c = document.querySelector('circle.pt[data-i=\"' + i + '\"]');"
        "c.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: 50, clientY: 50}));"
        "return document.getElementById('tip').textContent; }"
        "document.body.dataset.tipSim = hover(0); document.body.dataset.tipEst = hover(10);</script></body>"
    )
    page.write_text(html.replace("</body>", hover), encoding="utf-8")
    with tempfile.TemporaryDirectory(dir=tmp_path) as profile:
        p = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    dom = _Dom()
    dom.feed(p.stdout)
    body = dom.find("body")[0]
    assert "data-errors" not in body, body["data-errors"]
    assert "simulated exactly" in body["data-tip-sim"] and "estimated" not in body["data-tip-sim"]
    assert "estimated in closed form" in body["data-tip-est"] and "TP comm. overlap" in body["data-tip-est"]


@pytest.mark.parametrize(
    "case", ["one row", "no breakdown or memory", "equal values", "no cost", "nothing matches", "no rows"]
)
def test_edge_cases_draw_without_errors(tmp_path: Path, case: str) -> None:
    hash_ = ""
    if case == "one row":
        doc = synthetic(1, breakdown_top=1, memory_top=1)
    elif case == "no breakdown or memory":
        doc = synthetic(20, breakdown_top=0, memory_top=0)
        for r in doc["rows"][:5]:
            r.pop("breakdown")
    elif case == "equal values":
        doc = synthetic(12)
        for r in doc["rows"]:
            r.update(tokens_per_s=1000.0, memory_peak_gib=40.0, cost_per_mtok_usd=0.5, iteration_time_s=1.0)
            r["layout"].update(tp=1, pp=1)
    elif case == "no cost":
        doc = synthetic(20, cost=False)
        hash_ = "#x=cost"
    elif case == "nothing matches":
        doc = synthetic(20)
        hash_ = "#tp=3"
    else:
        doc = {
            "model": "m",
            "gpu": "g",
            "objective": "tokens",
            "evaluated": 0,
            "reused": 0,
            "rejected": {},
            "best": [],
            "rows": [],
        }
    dom = load(doc, tmp_path, hash_)
    n = 0 if case in ("nothing matches", "no rows") else len(doc["rows"])
    assert len(dom.find("circle", "pt")) == n
    if case == "equal values":
        assert len(dom.find("circle", "front")) == 12  # all equal: none beats another
    if case == "no breakdown or memory":
        assert dom.find("g", "bd-bar") == [] and dom.find("div", "panel") == []
    if case == "one row":
        assert len(dom.find("g", "bd-bar")) == 1 and len(dom.find("div", "panel")) == 1


def test_ten_thousand_rows_load_in_the_browser(tmp_path: Path) -> None:
    doc = synthetic(10_000)
    dom = load(doc, tmp_path)
    assert len(dom.find("circle", "pt")) == 10_000
    assert _ints(dom.find("circle", "front")) == _rows_front(doc["rows"], list(range(10_000)), "memory_peak_gib")


def test_real_rows_from_the_simulator(tmp_path: Path) -> None:
    from podsim.api.train import simulate_training
    from podsim.llm.layout import Layout
    from podsim.llm.model import get_model
    from podsim.sweep.search import llm_command

    model = get_model("llama3-8b")
    rows = []
    for tp, pp in ((8, 1), (2, 2), (1, 4)):
        lay = Layout(gpus=8, tp=tp, pp=pp, global_batch=16, micro_batch=1, seq_len=2048)
        d = simulate_training(model, lay, gpu="h100-80gb").to_dict()
        d["command"] = llm_command("--model llama3-8b", lay, "h100", None, "analytical")
        rows.append(d)
    rows.sort(key=lambda r: -r["tokens_per_s"])
    doc = {
        "model": model.name,
        "gpu": rows[0]["gpu"],
        "objective": "tokens",
        "evaluated": 3,
        "reused": 0,
        "rejected": {},
        "best": rows,
        "rows": rows,
    }
    dom = load(doc, tmp_path)
    assert len(dom.find("circle", "pt")) == 3
    assert len(dom.find("g", "bd-bar")) == 3
    assert [int(a["data-stages"]) for a in dom.find("svg", "memory-svg")] == [r["layout"]["pp"] for r in rows]


def test_a_script_error_is_seen(tmp_path: Path) -> None:
    """The check for script errors can fail: a page whose drawing throws records it in the DOM."""
    exe = _chromium()
    page = tmp_path / "broken.html"
    html = render_report(synthetic(5))
    assert html.count("  drawTable(current);\n  showPicked();") == 1
    broken = html.replace(
        "  drawTable(current);\n  showPicked();", "  drawTable(current); notAFunction();\n  showPicked();"
    )
    page.write_text(broken, encoding="utf-8")
    with tempfile.TemporaryDirectory(dir=tmp_path) as profile:
        p = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    dom = _Dom()
    dom.feed(p.stdout)
    assert "notAFunction" in dom.find("body")[0].get("data-errors", "")


def test_goodput_rows_carry_their_goodput_and_time_to_train(tmp_path: Path) -> None:
    # podsim search --goodput: each simulated row's goodput object becomes two columns of the page
    doc = synthetic(6)
    for i, row in enumerate(doc["rows"]):
        if i < 4:
            row["goodput"] = {"goodput": 0.9 - 0.1 * i, "expected_time_to_train_h": 100.0 + i}
    rows = payload(doc)["rows"]
    cols = list(COLS)
    assert [r[cols.index("goodput")] for r in rows] == [0.9, 0.8, 0.7, 0.6, None, None]
    assert [r[cols.index("time_to_train_h")] for r in rows] == [100.0, 101.0, 102.0, 103.0, None, None]
    keys = {a.get("data-key") for a in load(doc, tmp_path).find("th")}
    assert {"goodput", "time_to_train_h"} <= keys
    # a search without --goodput has neither column
    plain = synthetic(6)
    keys = {a.get("data-key") for a in load(plain, tmp_path / "plain").find("th")}
    assert not {"goodput", "time_to_train_h"} & keys
