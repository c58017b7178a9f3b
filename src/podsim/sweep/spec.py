"""A sweep spec (``podsim sweep SPEC.yaml``): a run kind, parameter values and hardware
what-ifs, read, checked whole before anything runs, and expanded into points.

::

    name: llama3-8b-layouts        # optional (default: the file's name); the table's 'sweep' column
    run: llm                       # llm | goodput | collective | simulate | serve | serve-llm
    fixed: {model: llama3-8b, gpu: h100, global-batch: 256, seq-len: 4096}
    grid: {gpus: [64, 128], tp: [2, 4, 8]}      # every combination (the product)
    points: [{pp: 1}, {pp: 2, vpp: 2}]          # an explicit list; grid x points when both
    what-if:                                    # hardware variants, each crossed with every point
      - {name: baseline}
      - {name: 2x peak, gpu: {peak_scale: 2}}
      - {name: half NIC, cluster: {nic_bandwidth_scale: 0.5}}
    store: sweep.duckdb            # optional results store (podsim sweep --store overrides)

Parameter names are the subcommand's flags, with dashes or underscores (``global-batch`` or
``global_batch``); a point is ``fixed``, then a grid combination, then an entry of ``points``
over it.  Relative paths (files, cluster YAMLs, the store) are read from the spec's folder.
Every problem is an :class:`~podsim.errors.InputError` naming the spec, the field and what was
expected (the closest name for a misspelled one).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError, closest, unknown_key_error, yaml_error
from ..fileio import load_yaml, read_text
from ..hardware.gpu import get_gpu
from .runs import RUNS, RunKind, check_value, default_cluster_name, with_defaults
from .whatif import apply_cluster, apply_gpu, check_whatif

#: the keys of a sweep spec
TOP_KEYS = ("name", "description", "run", "fixed", "grid", "points", "what-if", "store")
#: the most points (times what-ifs) one sweep may expand to
MAX_POINTS = 1_000_000


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its parameters as the spec gives them (dash names, no defaults),
    the what-if it runs under, and its key (:func:`point_key`)."""

    params: dict[str, Any]
    whatif: dict[str, Any]
    key: str


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep spec.

    Attributes:
        name: the sweep's name (the table's ``sweep`` column).
        run: the run kind.
        source: the spec file (or "built-in example NAME"), for messages.
        base: the folder relative paths are read from (None: the current folder).
        fixed, grid, points: the parameters (dash names, checked values).
        whatifs: the what-ifs (``[{"name": "baseline"}]`` when the spec has none).
        store: the results store the spec names, resolved (None: none).
        description: what the sweep is for.
    """

    name: str
    run: RunKind
    source: str
    base: str | None
    fixed: dict[str, Any]
    grid: dict[str, list[Any]]
    points: list[dict[str, Any]]
    whatifs: list[dict[str, Any]]
    store: str | None = None
    description: str = ""

    @property
    def parameters(self) -> list[str]:
        """The parameters the spec gives: swept ones (grid, then points) first, then fixed."""
        out = list(self.grid)
        for p in self.points:
            out += [k for k in p if k not in out]
        return out + [k for k in self.fixed if k not in out]

    @property
    def swept(self) -> list[str]:
        """The parameters whose value changes from point to point."""
        vals: dict[str, set[str]] = {k: {json.dumps(v) for v in vs} for k, vs in self.grid.items()}
        for k in {k for q in self.points for k in q} - set(self.grid):
            vals[k] = {json.dumps(q.get(k, self.fixed.get(k))) for q in self.points}
        return [k for k in self.parameters if len(vals.get(k, ())) > 1]

    def expand(self) -> list[Point]:
        """Every point (grid combination x ``points`` entry, over ``fixed``) under every
        what-if, point by point; a point given twice is kept once."""
        keys = list(self.grid)
        combos = [dict(zip(keys, vals)) for vals in itertools.product(*(self.grid[k] for k in keys))]
        out: list[Point] = []
        seen: set[str] = set()
        for g in combos:
            for q in self.points or [{}]:
                params = {**self.fixed, **g, **q}
                for w in self.whatifs:
                    k = point_key(self.run, params, w)
                    if k not in seen:
                        seen.add(k)
                        out.append(Point(params, w, k))
        return out


def point_key(run: RunKind, params: dict[str, Any], whatif: dict[str, Any]) -> str:
    """What identifies a point in a results store: a hash of the run kind, every parameter that
    differs from its default (so ``tp: 1`` and no ``tp`` are the same point) and the what-if
    (its name and overrides)."""
    full = with_defaults(run, params)
    given = {k: v for k, v in full.items() if v is not None and v != run.param(k).default}
    text = json.dumps([run.name, given, whatif], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check the sweep spec at ``path`` (see the module docstring).

    Raises:
        InputError: naming the file and the field for a missing or unreadable file, a YAML
            error (its line), an unknown key or parameter (with the closest name), a bad value,
            an empty grid list, or an unknown or misplaced what-if field.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; give the sweep spec (a YAML file)", str(p))
    if not p.exists():
        raise InputError("no such sweep spec", str(p))
    return spec_from_text(read_text(p, "sweep spec"), str(p), str(p.resolve().parent), p.stem)


def spec_from_text(text: str, source: str, base: str | None, default_name: str = "sweep") -> SweepSpec:
    """A sweep spec from its YAML text (``source`` names it in messages; relative paths are
    read from ``base``)."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, source) from None
    return spec_from_dict(data, source, base, default_name)


def _mapping(v: object, source: str, where: str, example: str) -> dict[Any, Any]:
    if not isinstance(v, dict):
        raise InputError(f"expected a mapping such as {example}, got {v!r:.60}", source, where)
    return v


def spec_from_dict(data: object, source: str, base: str | None, default_name: str = "sweep") -> SweepSpec:
    """Check a sweep spec's mapping (see :func:`load_spec`)."""
    if data is None:
        raise InputError("the sweep spec is empty: expected run, fixed, grid or points (docs/sweep.md)", source)
    data = _mapping(data, source, "", "{run: llm, fixed: {...}, grid: {...}}")
    data = {("what-if" if k in ("what_if", "whatif") else k): v for k, v in data.items()}
    for k in data:
        if k not in TOP_KEYS:
            raise InputError(unknown_key_error(str(k), TOP_KEYS, None).message, source, str(k))
    run_name = data.get("run")
    if run_name is None:
        raise InputError(f"missing 'run': one of {', '.join(RUNS)}", source, "run")
    if not isinstance(run_name, str) or run_name not in RUNS:
        e = unknown_key_error(str(run_name), RUNS, None, "run kind")
        raise InputError(e.message, source, "run")
    run = RUNS[run_name]
    name = data.get("name", default_name)
    if not isinstance(name, (str, int, float)) or isinstance(name, bool) or not str(name).strip():
        raise InputError(f"expected a name, got {name!r}", source, "name")

    fixed = _params(run, _mapping(data.get("fixed") or {}, source, "fixed", "{gpus: 64}"), base, source, "fixed")
    grid: dict[str, list[Any]] = {}
    raw_grid = _mapping(data.get("grid") or {}, source, "grid", "{tp: [1, 2, 4]}")
    for k, vals in raw_grid.items():
        pname = _param_name(run, k, source, f"grid.{k}")
        where = f"grid.{k}"
        if pname in grid:
            raise InputError(f"{pname!r} is given twice", source, where)
        if pname in fixed:
            raise InputError(
                f"{pname!r} is in fixed too (the grid would override it): give it in one of them", source, where
            )
        if not isinstance(vals, list):
            raise InputError(
                f"expected a list of values such as [1, 2, 4], got {vals!r:.60} (a single value belongs in fixed)",
                source,
                where,
            )
        if not vals:
            raise InputError("the list is empty: a grid parameter needs at least one value", source, where)
        grid[pname] = [check_value(run, run.param(pname), v, base, source, f"{where}[{i}]") for i, v in enumerate(vals)]
        if len({json.dumps(v) for v in grid[pname]}) < len(vals):
            raise InputError("a value is listed twice", source, where)
    points: list[dict[str, Any]] = []
    if "points" in data:
        raw_points = data["points"]
        if not isinstance(raw_points, list) or not raw_points:
            raise InputError(
                "expected a non-empty list of points such as [{tp: 8, pp: 2}, {tp: 4, pp: 4}]", source, "points"
            )
        for i, q in enumerate(raw_points):
            where = f"points[{i}]"
            pt = _params(
                run, _mapping(q if q is not None else {}, source, where, "{tp: 8, pp: 2}"), base, source, where
            )
            for k in pt:
                if k in grid:
                    raise InputError(f"{k!r} is in the grid too: give it in one of them", source, f"{where}.{k}")
            points.append(pt)
        for k in fixed:
            if all(k in q for q in points):
                raise InputError(
                    f"{k!r} is in fixed and in every point (fixed's value is never used): give it in one of them",
                    source,
                    f"fixed.{k}",
                )

    whatifs = _whatifs(run, data.get("what-if"), source)
    store = data.get("store")
    if store is not None:
        if not isinstance(store, str) or not store.strip():
            raise InputError(f"expected the path of a results store (a DuckDB file), got {store!r}", source, "store")
        store = str(Path(base) / store) if base and not Path(store).is_absolute() else store
    description = data.get("description") or ""
    spec = SweepSpec(str(name).strip(), run, source, base, fixed, grid, points, whatifs, store, str(description))
    n = len(whatifs) * max(len(points), 1)
    for vals in grid.values():
        n *= len(vals)
    if n > MAX_POINTS:
        raise InputError(f"the sweep has {n:,} runs (points x what-ifs), more than {MAX_POINTS:,}", source, "grid")
    _check_points(spec)
    return spec


def _param_name(run: RunKind, key: object, source: str, where: str) -> str:
    """A spec's parameter name as the run kind's (dashes), or an error with the closest name."""
    name = str(key).strip().lstrip("-").replace("_", "-")
    name = run.aliases.get(name, name)
    if name in run.names:
        return name
    hint = closest(name, run.names)
    elsewhere = [r for r, k in RUNS.items() if k is not run and name in k.names]
    msg = f"unknown parameter {str(key)!r} for run: {run.name}"
    if hint:
        msg += f"; did you mean {hint!r}?"
    if elsewhere:
        msg += f" ({name!r} is a parameter of run: {', '.join(elsewhere)})"
    if not hint and not elsewhere:
        msg += f"; its parameters are: {', '.join(run.names)}"
    raise InputError(msg, source, where)


def _params(run: RunKind, raw: dict[Any, Any], base: str | None, source: str, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        name = _param_name(run, k, source, f"{where}.{k}")
        if name in out:
            raise InputError(f"{name!r} is given twice", source, f"{where}.{k}")
        if isinstance(v, list) and run.param(name).kind != "list":
            raise InputError(
                "expected one value, got a list (lists of values to sweep go in grid)", source, f"{where}.{k}"
            )
        out[name] = check_value(run, run.param(name), v, base, source, f"{where}.{k}")
    return out


def _whatifs(run: RunKind, raw: object, source: str) -> list[dict[str, Any]]:
    if raw is None:
        return [{"name": "baseline"}]
    if not isinstance(raw, list) or not raw:
        raise InputError(
            "expected a non-empty list of what-ifs such as [{name: baseline}, {name: 2x peak, gpu: {peak_scale: 2}}]",
            source,
            "what-if",
        )
    out = []
    names: set[str] = set()
    for i, w in enumerate(raw):
        where = f"what-if[{i}]"
        c = check_whatif(w, source, where)
        if c["name"] in names:
            raise InputError(f"two what-ifs are named {c['name']!r}", source, f"{where}.name")
        names.add(c["name"])
        for part, allowed in (("gpu", run.gpu_fields), ("cluster", run.cluster_fields)):
            for k in c.get(part) or {}:
                if k not in allowed:
                    runs = [
                        r
                        for r, kind in RUNS.items()
                        if k in (kind.gpu_fields if part == "gpu" else kind.cluster_fields)
                    ]
                    why = (
                        f"; {part} what-ifs of {run.name} runs take: {', '.join(allowed)}"
                        if allowed
                        else f"; {run.name} runs take no {part} what-if"
                    )
                    raise InputError(
                        f"{k!r} does not apply to run: {run.name} (it applies to {', '.join(runs)}){why}",
                        source,
                        f"{where}.{part}.{k}",
                    )
        out.append(c)
    return out


def _check_points(spec: SweepSpec) -> None:
    """Every point has its required parameters, and every what-if fits the GPU and cluster it
    changes (tried once for each distinct one), before anything runs."""
    run = spec.run
    tried: set[str] = set()
    swept = spec.swept
    for pt in spec.expand():
        where = _where_of(swept, pt.params)
        for group in run.required:
            given = [g for g in group if pt.params.get(g) is not None]
            if not given:
                what = " or ".join(repr(g) for g in group)
                anywhere = any(g in spec.parameters for g in group)
                raise InputError(
                    f"missing parameter {what} (give it in fixed, grid or points)",
                    spec.source,
                    where if anywhere else None,
                )
            if len(given) > 1:
                raise InputError(f"give one of {', '.join(repr(g) for g in group)}, not both", spec.source, where)
        w = pt.whatif
        if not (w.get("gpu") or w.get("cluster")):
            continue
        full = with_defaults(run, pt.params)
        trial = json.dumps([full.get("gpu"), full.get("cluster"), w], sort_keys=True, default=str)
        if trial in tried:
            continue
        tried.add(trial)
        i = spec.whatifs.index(w)
        try:
            _try_whatif(run, full, w, spec.base)
        except InputError as e:
            msg = f"{e.where}: {e.message}" if e.where else e.message
            if e.source and "with what-if" not in e.source:
                msg += f" ({e.source})"
            raise InputError(msg, spec.source, f"what-if[{i}] ({w['name']})") from None


def _where_of(swept: list[str], params: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {params[k]}" for k in swept if k in params)
    return f"point ({shown})" if shown else "fixed"


def _try_whatif(run: RunKind, full: dict[str, Any], w: dict[str, Any], base: str | None) -> None:
    if w.get("gpu") and full.get("gpu"):
        apply_gpu(get_gpu(full["gpu"]), w["gpu"])
    ov = w.get("cluster")
    if not ov:
        return
    if run.name == "serve":  # GPUs per node and memory only: no fabric to change
        if "preset" in ov:
            apply_cluster(ov["preset"], None, w["name"], base)
        return
    name = full.get("cluster")
    if run.name in ("llm", "serve-llm") and name is None:
        name = default_cluster_name(get_gpu(full["gpu"]))
    if name is None and "preset" not in ov:
        raise InputError("it changes the cluster, and the point names none: give cluster")
    apply_cluster(name or ov["preset"], ov, w["name"], base)
