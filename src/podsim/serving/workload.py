"""Request workloads for serving: DLSIM's workload CSV, and open-loop generators.

DLSIM's file (no header): a metadata row ``model_num,rate,"[p0, p1, ...]",duration,"[slo0, ...]",name``
then one ``model_id,arrival_s`` row per request, in time order.  podsim reads it without
evaluating anything (the lists are bracketed numbers; ``inf`` is allowed as an SLO) and writes
it back byte for byte: fields keep the text they were read with while it still holds their
value, and new numbers are written with Python's shortest round-trip float formatting, as
DLSIM's ``csv`` writer does.

Generators (seeded, reproducible): open-loop arrivals whose gaps follow an exponential
(Poisson process) or a Gamma distribution of a given coefficient of variation (AlpaServe's
``GammaProcess``: shape 1/cv^2, scale cv^2/rate), either one stream of ``rate`` with each
request's model drawn by ``proportions`` (DLSIM), or one stream per model at its own rate.
Closed-loop clients (:class:`ClosedLoop`) send a request, wait for it, think, and send the next.
Times: arrivals in seconds in files, integer ns inside.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..fileio import atomic_write_text, check_columns


@dataclass
class ServeWorkload:
    """Requests (``model_ids[i]`` arriving at ``arrivals_s[i]``, in time order) and the
    metadata DLSIM keeps: per-model proportions and SLOs (s), the nominal rate (req/s) and
    duration (s), a name.  ``texts`` keeps the metadata fields as read, for writing back."""

    model_ids: list[int]
    arrivals_s: list[float]
    num_models: int
    rate: float
    proportions: list[float]
    duration_s: float
    slos_s: list[float]
    name: str
    texts: dict[str, str] = field(default_factory=dict)
    arrival_texts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.model_ids)

    def arrivals_ns(self) -> list[int]:
        return [round(a * 1e9) for a in self.arrivals_s]


@dataclass
class ClosedLoop:
    """Closed-loop clients: ``clients[m]`` users of model ``m``, each sending a request, waiting
    for it, thinking for an exponential time of mean ``think_s`` (0: none), and sending the
    next, for ``duration_s`` seconds.  Arrivals depend on the service, so the simulation makes
    them."""

    clients: list[int]
    think_s: float
    duration_s: float
    slos_s: list[float]
    name: str = "closed-loop"
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.clients or any(c < 0 for c in self.clients) or sum(self.clients) == 0:
            raise InputError(
                f"closed-loop clients must be non-negative per model with some in all, got {self.clients}",
                where="--closed-loop",
            )
        if not (math.isfinite(self.think_s) and self.think_s >= 0):
            raise InputError(f"the think time must be a finite number >= 0, got {self.think_s:g} s", where="--think-ms")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise InputError(f"the duration must be a finite number > 0, got {self.duration_s:g} s", where="--duration")
        if len(self.slos_s) != len(self.clients):
            raise InputError(f"{len(self.clients)} models but {len(self.slos_s)} SLOs", where="--slos")

    @property
    def num_models(self) -> int:
        return len(self.clients)


def _number_list(text: str, what: str, source: str, row: int, allow_inf: bool = False) -> list[float]:
    """``[0.8, 0.2]``: numbers in brackets (``inf`` allowed where ``allow_inf``); nothing is
    evaluated."""
    t = text.strip()
    ok = t.startswith("[") and t.endswith("]")
    vals: list[float] = []
    if ok:
        for part in t[1:-1].split(","):
            part = part.strip()
            try:
                v = float(part)
            except ValueError:
                ok = False
                break
            if math.isnan(v) or (math.isinf(v) and not allow_inf) or v < 0:
                ok = False
                break
            vals.append(v)
    if not ok or not vals:
        raise InputError(f"{what} must be a list of numbers >= 0 like [0.8, 0.2], got {text!r}", source, f"row {row}")
    return vals


#: the latest arrival (s) and the most models a workload may have: beyond, times overflow int64 ns
MAX_SECONDS = 9.2e8
MAX_MODELS = 1 << 16


def _number(text: str, what: str, source: str, row: int, integer: bool = False, hi: float = MAX_SECONDS) -> float:
    """A finite number of magnitude at most ``hi`` (a positive whole one with ``integer``)."""
    try:
        v = float(text)
        if not abs(v) <= hi or (integer and (v != int(v) or v < 1)):  # also refuses NaN and inf
            raise ValueError
    except ValueError:
        kind = "a positive whole number" if integer else "a finite number"
        raise InputError(f"{what} must be {kind} (at most {hi:.3g}), got {text!r}", source, f"row {row}") from None
    return v


def _read_text(p: Path, what: str) -> str:
    if not p.is_file():
        raise InputError(f"no such {what}", str(p))
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not a UTF-8 text file (byte {e.start})", str(p)) from None


def _check_proportions(p: list[float], n: int, source: str | None, where: str) -> None:
    if len(p) != n:
        raise InputError(f"{n} models but {len(p)} proportions", source, where)
    if any(x < 0 for x in p) or abs(sum(p) - 1.0) > 1e-6:
        raise InputError(f"proportions must be non-negative and sum to 1, got {p} (sum {sum(p):g})", source, where)


def read_workload(path: str | Path) -> ServeWorkload:
    """Read a DLSIM workload CSV.

    Raises:
        InputError: for a malformed metadata row (naming the field), proportions that do not
            sum to 1, a model id out of range, or rows out of time order.
    """
    p = Path(path)
    text = _read_text(p, "workload file")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InputError("empty workload file", str(p))
    meta = rows[0]
    if len(meta) != 6:
        raise InputError(
            f'the metadata row must be model_num,rate,"[proportions]",duration,"[SLOs]",name; got {len(meta)} fields',
            str(p),
            "row 1",
        )
    n = int(_number(meta[0], "model_num", str(p), 1, integer=True, hi=MAX_MODELS))
    rate = _number(meta[1], "rate", str(p), 1)
    props = _number_list(meta[2], "proportions", str(p), 1)
    _check_proportions(props, n, str(p), "row 1")
    duration = _number(meta[3], "duration", str(p), 1)
    for what, v in (("rate", rate), ("duration", duration)):
        if v < 0:
            raise InputError(f"{what} must not be negative, got {v:g}", str(p), "row 1")
    slos = _number_list(meta[4], "SLOs", str(p), 1, allow_inf=True)
    if len(slos) != n:
        raise InputError(f"{n} models but {len(slos)} SLOs", str(p), "row 1")
    ids, arrivals, texts = [], [], []
    last = -float("inf")
    for i, r in enumerate(rows[1:], start=2):
        if not r:
            continue
        if len(r) != 2:
            raise InputError(f"expected model_id,arrival_s, got {len(r)} fields", str(p), f"row {i}")
        mid = _number(r[0], "model_id", str(p), i, hi=MAX_MODELS)
        if mid != int(mid) or not 0 <= mid < n:
            raise InputError(f"model_id must be one of 0..{n - 1}, got {r[0]!r}", str(p), f"row {i}")
        t = _number(r[1], "arrival_s", str(p), i)
        if t < 0:
            raise InputError(f"arrival {r[1]} s is before 0", str(p), f"row {i}")
        if t < last:
            raise InputError(
                f"arrival {r[1]} s is before the previous row's {last} s: rows must be in time order",
                str(p),
                f"row {i}",
            )
        last = t
        ids.append(int(mid))
        arrivals.append(t)
        texts.append(r[1])
    texts_meta = dict(zip(("model_num", "rate", "proportions", "duration", "slos", "name"), meta))
    texts_meta["line_end"] = "\r\n" if "\r\n" in text else "\n"
    return ServeWorkload(ids, arrivals, n, rate, props, duration, slos, meta[5], texts_meta, texts)


def write_workload(w: ServeWorkload, path: str | Path) -> None:
    """Write ``w`` as a DLSIM workload CSV (atomically).  A workload read from a file is written
    back byte for byte: each field keeps the text it was read with while that still reads as
    the current value (the line ends too)."""
    t = w.texts

    def keep(key: str, now: str, same: bool) -> str:
        return t[key] if key in t and same else now

    def parses(key: str, value: object) -> bool:
        try:
            if key in ("proportions", "slos"):
                return _number_list(t[key], key, "", 1, allow_inf=True) == list(value)  # type: ignore[call-overload]
            return float(t[key]) == value
        except (InputError, KeyError, ValueError):
            return False

    meta = [
        keep("model_num", str(w.num_models), parses("model_num", w.num_models)),
        keep("rate", _num(w.rate), parses("rate", w.rate)),
        keep("proportions", _list(w.proportions), parses("proportions", w.proportions)),
        keep("duration", _num(w.duration_s), parses("duration", w.duration_s)),
        keep("slos", _list(w.slos_s), parses("slos", w.slos_s)),
        keep("name", w.name, t.get("name") == w.name),
    ]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator=t.get("line_end", "\r\n"))
    out.writerow(meta)
    texts = w.arrival_texts if len(w.arrival_texts) == len(w) else []
    for i, (mid, a) in enumerate(zip(w.model_ids, w.arrivals_s)):
        at = texts[i] if texts and _same_float(texts[i], a) else repr(float(a))
        out.writerow([mid, at])
    atomic_write_text(path, buf.getvalue())


def _same_float(text: str, value: float) -> bool:
    try:
        return float(text) == value
    except ValueError:
        return False


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _list(xs: list[float]) -> str:
    """As Python prints a list of floats (DLSIM's metadata): ``[0.8, 0.2]``."""
    return "[" + ", ".join(repr(float(x)) for x in xs) + "]"  # inf as Python prints it: inf


def read_any_workload(path: str | Path) -> ServeWorkload:
    """A DLSIM workload CSV, or a request trace: the trace when the first row is a header naming
    a model or a time column, DLSIM's otherwise (each reader's errors say what is wrong)."""
    p = Path(path)
    first = next(csv.reader(io.StringIO(_read_text(p, "workload file"))), [])
    names = {c.strip() for c in first}
    if names & {"model_id", "model", "arrival_s", "timestamp_s", "time_s"}:  # a header: a trace
        return read_request_trace(p)
    return read_workload(p)


def read_request_trace(path: str | Path) -> ServeWorkload:
    """A recorded request trace: a CSV with a header naming ``model_id`` (or ``model``) and
    ``arrival_s`` (or ``timestamp_s``, ``time_s``) columns, other columns ignored; requests are
    replayed at their recorded times, sorted (SLOs unknown: none, unless given).

    Raises:
        InputError: without those columns, or for a row whose model id or time is not a number.
    """
    p = Path(path)
    reader = csv.DictReader(io.StringIO(_read_text(p, "request trace")))
    cols = reader.fieldnames or []
    check_columns(cols, str(p))
    mcol = next((c for c in ("model_id", "model") if c in cols), None)
    tcol = next((c for c in ("arrival_s", "timestamp_s", "time_s") if c in cols), None)
    if mcol is None or tcol is None:
        raise InputError(
            f"a request trace needs model_id and arrival_s columns; the header has {cols}", str(p), "row 1"
        )
    rows = []
    for i, r in enumerate(reader, start=2):
        m = _number(r.get(mcol) or "", mcol, str(p), i, hi=MAX_MODELS)
        if m != int(m) or m < 0:
            raise InputError(f"{mcol} must be a whole number >= 0, got {r.get(mcol)!r}", str(p), f"row {i}")
        t = _number(r.get(tcol) or "", tcol, str(p), i)
        if t < 0:
            raise InputError(f"{tcol} {t:g} s is before 0", str(p), f"row {i}")
        rows.append((t, int(m)))
    if not rows:
        raise InputError("no requests", str(p))
    rows.sort(key=lambda x: x[0])  # by time; simultaneous requests keep their order
    n = max(m for _, m in rows) + 1
    counts = [0] * n
    for _, m in rows:
        counts[m] += 1
    duration = max(t for t, _ in rows) - min(t for t, _ in rows)
    return ServeWorkload(
        [m for _, m in rows],
        [t for t, _ in rows],
        n,
        len(rows) / duration if duration > 0 else 0.0,
        [c / len(rows) for c in counts],
        duration,
        [float("inf")] * n,
        p.name,
    )


def generate_workload(
    num_models: int,
    rate: float,
    duration_s: float,
    *,
    proportions: list[float] | None = None,
    rates: list[float] | None = None,
    cv: float = 1.0,
    slos_s: list[float] | None = None,
    seed: int = 0,
    name: str = "workload",
) -> ServeWorkload:
    """Open-loop arrivals over ``duration_s`` seconds, seeded.

    With ``proportions`` (default: equal): one stream of ``rate`` req/s starting at t = 0, each
    request's model drawn by the proportions (DLSIM's generator).  With ``rates``: one stream
    per model at its rate, merged (``rate`` is then their sum).  Gaps are exponential for
    ``cv`` = 1 (Poisson) and Gamma(1/cv^2, cv^2/rate) otherwise.

    Raises:
        InputError: for non-positive rates, duration or cv, proportions that do not sum to 1, or
            list lengths that do not match ``num_models``.
    """
    if num_models < 1:
        raise InputError(f"at least one model is needed, got {num_models}")
    if not (math.isfinite(duration_s) and duration_s > 0 and math.isfinite(cv) and cv > 0):
        raise InputError(f"duration and cv must be finite positive numbers, got {duration_s:g} s and {cv:g}")
    slos = slos_s if slos_s is not None else [float("inf")] * num_models
    if len(slos) != num_models:
        raise InputError(f"{num_models} models but {len(slos)} SLOs")
    rng = np.random.default_rng(seed)

    def gaps(r: float, n: int) -> np.ndarray:
        return rng.exponential(1.0 / r, n) if cv == 1.0 else rng.gamma(1.0 / cv**2, cv**2 / r, n)

    def stream(r: float) -> list[float]:
        out, t = [0.0], 0.0
        while True:
            for g in gaps(r, 1024):
                t += float(g)
                if t >= duration_s:
                    return out
                out.append(t)

    if rates is not None:
        if len(rates) != num_models or any(not (math.isfinite(r) and r > 0) for r in rates):
            raise InputError(f"rates must be {num_models} positive numbers, got {rates}")
        pairs = sorted((t, m) for m, r in enumerate(rates) for t in stream(r))
        props = [r / sum(rates) for r in rates]
        total = float(sum(rates))
        ids, arrivals = [m for _, m in pairs], [t for t, _ in pairs]
    else:
        if not (math.isfinite(rate) and rate > 0):
            raise InputError(f"the rate must be a finite positive number, got {rate:g}")
        props = proportions if proportions is not None else [1.0 / num_models] * num_models
        _check_proportions(props, num_models, None, "--proportions")
        arrivals = stream(rate)
        ids = [int(x) for x in rng.choice(num_models, size=len(arrivals), p=props)]
        total = rate
    return ServeWorkload(ids, arrivals, num_models, total, list(props), duration_s, list(slos), name)
