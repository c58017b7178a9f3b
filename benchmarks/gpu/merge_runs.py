#!/usr/bin/env python3
"""Merge measured-steps CSVs of several runs on one GPU into the one file podsim ships.

A configuration is the columns before ``status`` (the shape, mode, backend, ...) and how many
times the run met it before (the traced repeat of the first configuration is its own row).  The first
run given that measured it (``status: ok``) supplies its row; a configuration no run measured
keeps the first run's row (its ``status`` says why).  Rows taken from a run named with
``--no-breakdown`` keep their step times but lose the profiled step's columns (window, busy,
idle, host, kernel count, per-category times): for a run whose profiler breakdown is known to be
wrong.  Each row's ``notes`` says which run (its ``# date:``) it came from when that is not the
first run; the provenance (``#`` lines) is the first run's, then one ``# run_<n>:`` line per run
(date, command, how many rows it gave).

    python benchmarks/gpu/merge_runs.py run2/h200.csv run1/h200.csv \\
        --no-breakdown run1/h200.csv --out src/podsim/compute/tables/steps/h200.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

#: a profiled step's columns, besides the ``<category>_ms`` ones
PROFILE_COLUMNS = ("profiled_step_ms", "busy_ms", "idle_ms", "host_ms", "kernels")
#: measured columns that are not per-category times
NOT_CATEGORIES = {"step_ms", "step_ms_min", "step_ms_max", "wall_step_ms", "gpu_ms", "trace_step_ms", "replay_ms"}


def read_run(path: Path) -> tuple[list[str], dict[str, str], list[str], list[dict[str, str]]]:
    """A run's ``#`` lines, its provenance, its columns and its rows."""
    comments, body = [], []
    for ln in path.read_text().splitlines():
        (comments if ln.lstrip().startswith("#") else body).append(ln)
    prov = {}
    for ln in comments:
        key, sep, val = ln.lstrip()[1:].partition(":")
        if sep and " " not in key.strip():
            prov[key.strip()] = val.strip()
    reader = csv.DictReader([b for b in body if b.strip()])
    return comments, prov, list(reader.fieldnames or []), list(reader)


def merge(paths: list[Path], no_breakdown: set[Path]) -> str:
    """The merged CSV's text (see the module docstring)."""
    runs = [read_run(p) for p in paths]
    columns = runs[0][2]
    if "status" not in columns:
        raise SystemExit(f"merge_runs: {paths[0]}: no 'status' column")
    for p, run in zip(paths[1:], runs[1:]):
        if run[2] != columns:
            raise SystemExit(f"merge_runs: {p}: its columns differ from {paths[0]}'s")
    key_cols = columns[: columns.index("status")]
    profile = [c for c in columns if c in PROFILE_COLUMNS or (c.endswith("_ms") and c not in NOT_CATEGORIES)]
    chosen: dict[tuple, tuple[int, dict[str, str]]] = {}
    order: list[tuple] = []
    for i, (_c, _p, _cols, rows) in enumerate(runs):
        seen: dict[tuple, int] = {}
        for r in rows:
            key = tuple(r[c] for c in key_cols)
            seen[key] = seen.get(key, 0) + 1
            key = (*key, seen[key])  # a configuration run twice in a run (e.g. once more, traced)
            if key not in chosen:
                order.append(key)
                chosen[key] = (i, r)
            elif chosen[key][1]["status"] != "ok" and r["status"] == "ok":
                chosen[key] = (i, r)
    given = [0] * len(runs)
    out_rows = []
    for key in order:
        i, r = chosen[key]
        r = dict(r)
        given[i] += 1
        if i > 0:
            note = f"from the run of {runs[i][1].get('date', paths[i].name)}"
            if paths[i] in no_breakdown:
                for c in profile:
                    r[c] = ""
                note += " (its profiled breakdown left out)"
            r["notes"] = "; ".join(x for x in (r.get("notes", ""), note) if x)
        out_rows.append(r)
    buf = io.StringIO()
    for ln in runs[0][0]:
        buf.write(ln + "\n")
    for n, (p, run) in enumerate(zip(paths, runs), start=1):
        extra = ", profiled breakdown left out" if p in no_breakdown else ""
        buf.write(f"# run_{n}: {run[1].get('date', '?')}, {run[1].get('command', '?')}, {given[n - 1]} rows{extra}\n")
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(out_rows)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="the runs' CSVs, the preferred first")
    ap.add_argument("--no-breakdown", action="append", type=Path, default=[], metavar="CSV")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    text = merge(args.runs, set(args.no_breakdown))
    tmp = args.out.with_suffix(".tmp")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(text)
    tmp.replace(args.out)
    print(f"merge_runs: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
