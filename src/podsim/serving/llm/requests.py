"""LLM inference requests: the Azure LLM trace CSV and seeded generators.

A :class:`Request` arrives at ``arrival_ns`` (integer ns from the workload's start) with a prompt
of ``prompt_tokens`` and asks for ``output_tokens`` tokens; it may share its first
``prefix_tokens`` prompt tokens with every other request of the same ``prefix_id`` (a system
prompt, a conversation's history) for prefix caching.

**Trace CSV**, in either of two column sets (a header naming at least one set; other columns
are ignored; a header with both is read by the first):

* the Azure LLM inference trace 2023 as Vidur processed it: ``arrived_at`` (s from the first
  request, non-decreasing), ``num_prefill_tokens`` (prompt) and ``num_decode_tokens`` (output);
* the raw Azure LLM inference trace (Azure/AzurePublicDataset ``AzureLLMInferenceTrace_*.csv``,
  2023 and 2024): ``TIMESTAMP``, ``ContextTokens`` (prompt) and ``GeneratedTokens`` (output).
  A timestamp is a date and time ``YYYY-MM-DD HH:MM:SS[.f...]`` (``T`` also separates them; up
  to 9 fractional digits count, more are cut at the ns; an optional UTC offset ``+HH:MM`` or
  ``Z``, none meaning UTC) -- 2023's ``2023-11-16 18:15:46.6805900``, 2024's
  ``2024-05-10 00:00:00.009930+00:00`` -- or a plain number of seconds, every row the same kind.
  A request arrives at its timestamp minus the first row's, in integer ns (exact, no float
  rounding); rows must be in time order (a row earlier than the one before it is refused, not
  sorted) and at most 9.2e8 s after the first.

Token counts are positive whole numbers: a row of 0 output tokens (raw Azure files may have
some) is refused in both sets, naming its row, since every request generates at least one token.  Optional in
both: ``prefix_id`` (a whole number >= 0, or empty for none) and ``prefix_tokens`` (at most the
prompt).

**Generators**: ``poisson:QPS[,prompt=D,output=D,seed=S,prefixes=K:LEN]`` and
``gamma:QPS,cv=C[,...]``: arrivals of a Poisson process of ``QPS`` requests/s (exponential gaps)
or of Gamma gaps with coefficient of variation ``C`` (shape 1/C^2, scale C^2/QPS, AlpaServe's
``GammaProcess``); the first request arrives at t = 0.  Lengths ``D``: a whole number ``N``,
``uniform:A-B`` (whole numbers from A to B, both included) or ``lognormal:MEDIAN:SIGMA``
(rounded, at least 1).  Defaults: prompt 1024, output 128, seed 0.  ``prefixes=K:LEN``: each
request shares the first ``min(LEN, prompt - 1)`` tokens with the requests of one of ``K`` prefix
ids drawn uniformly.
"""

from __future__ import annotations

import calendar
import csv
import io
import math
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from ...errors import InputError, closest
from ...fileio import check_columns, read_text

#: the columns a trace must have: arrival (s), prompt and output tokens (Vidur's processed trace)
TRACE_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
#: or the raw Azure LLM inference trace's: timestamp, prompt and output tokens
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
#: the latest arrival (s) a workload may have: beyond, integer ns could overflow
MAX_SECONDS = 9.2e8
#: the longest prompt or output podsim takes (tokens)
MAX_TOKENS = 1 << 31


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request.

    Attributes:
        id: its index in the workload (0, 1, ...).
        arrival_ns: when it arrives (ns from the workload's start).
        prompt_tokens: prompt length (tokens, >= 1).
        output_tokens: tokens to generate (>= 1; the first comes from the prefill).
        prefix_id: requests with the same id share their first ``prefix_tokens`` tokens; -1: none.
        prefix_tokens: how many prompt tokens the shared prefix is (0 without one).
        line: the trace file's line it was read from (the header is line 1); 0: generated.
    """

    id: int
    arrival_ns: int
    prompt_tokens: int
    output_tokens: int
    prefix_id: int = -1
    prefix_tokens: int = 0
    line: int = field(default=0, compare=False)  #: where it came from, not what it is

    @property
    def label(self) -> str:
        """How an error names it: its trace line, or its place in a generated workload (from 1)."""
        return f"the request on line {self.line} of the trace" if self.line else f"generated request {self.id + 1}"


def _whole(text: str, what: str, source: str, where: str, low: int = 1, zero_hint: str = "") -> int:
    """A whole number >= ``low`` (``"12"`` or ``"12.0"``), else an error naming the place
    (``zero_hint`` added when it is 0)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v == int(v) and low <= v <= MAX_TOKENS):
        kind = "a positive whole number" if low == 1 else f"a whole number >= {low}"
        hint = f" ({zero_hint})" if zero_hint and v == 0 else ""
        raise InputError(f"{what} must be {kind}, got {text.strip()!r}{hint}", source, where)
    return int(v)


#: a raw Azure timestamp: date, time, fraction, UTC offset
_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?")
_TIMESTAMP_FORMS = "a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM] or a number of seconds"


class _Timestamps:
    """Raw Azure timestamps as integer ns (from 1970 in UTC for dates, from 0 for plain
    seconds); every row of one file the kind of the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.dates: bool | None = None
        self._second: tuple[str, int] = ("", 0)  # the last whole second parsed (most rows share it)

    def ns(self, text: str, where: str) -> int:
        t = text.strip()
        m = _DATETIME.fullmatch(t)
        if self.dates is None:
            self.dates = m is not None
        if self.dates:
            if m is None:
                raise InputError(
                    f"TIMESTAMP must be a date and time YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM] as the "
                    f"first row's, got {t!r}",
                    self.source,
                    where,
                )
            day, frac, zone = m.groups()
            if day != self._second[0]:
                try:
                    dt = datetime.strptime(day.replace("T", " "), "%Y-%m-%d %H:%M:%S")
                except ValueError:
                    raise InputError(f"TIMESTAMP {t!r} is not a valid date and time", self.source, where) from None
                self._second = (day, calendar.timegm(dt.timetuple()))
            ns = self._second[1] * 1_000_000_000 + (int(frac[:9].ljust(9, "0")) if frac else 0)
            if zone and zone != "Z":
                sign = -1 if zone[0] == "-" else 1
                hh, mm = int(zone[1:3]), int(zone[-2:])
                if hh > 23 or mm > 59:
                    raise InputError(f"TIMESTAMP {t!r} has a UTC offset out of range", self.source, where)
                ns -= sign * (hh * 3600 + mm * 60) * 1_000_000_000
            return ns
        try:
            d = Decimal(t)
        except InvalidOperation:
            d = Decimal("NaN")
        if m is not None or not d.is_finite() or abs(d) > Decimal("1e12"):
            what = "a number of seconds as the first row's" if m is not None else _TIMESTAMP_FORMS
            raise InputError(f"TIMESTAMP must be {what}, got {t!r}", self.source, where)
        return int((d * 1_000_000_000).to_integral_value(ROUND_HALF_EVEN))


def _trace_columns(header: list[str], src: str) -> tuple[str, str, str]:
    """The column set a trace header has (arrival, prompt, output), else an error naming the
    missing columns of the closer set."""
    sets = (TRACE_COLUMNS, AZURE_COLUMNS)
    for cols in sets:
        if all(c in header for c in cols):
            return cols
    best = max(sets, key=lambda cols: sum(c in header for c in cols))  # a tie: Vidur's
    other = AZURE_COLUMNS if best is TRACE_COLUMNS else TRACE_COLUMNS
    missing = [c for c in best if c not in header]
    others = [h for h in header if h not in best]

    def hint(m: str) -> str:
        near = next((h for h in others if h.lower() == m.lower()), None) or closest(m, others)
        return f"{m!r} (found {near!r}?)" if near else repr(m)

    hints = [hint(m) for m in missing]
    names = {TRACE_COLUMNS: "Vidur's processed trace", AZURE_COLUMNS: "the raw Azure trace"}
    raise InputError(
        f"missing column{'s' if len(missing) > 1 else ''} {', '.join(hints)}; a trace needs "
        f"{', '.join(best)} ({names[best]}) or {', '.join(other)} ({names[other]}) "
        f"(found: {', '.join(header) or 'nothing'})",
        src,
        "header",
    )


def read_trace(path: str | Path, limit: int | None = None) -> list[Request]:
    """Read a request trace CSV (the module docstring says its columns: Vidur's, or the raw
    Azure trace's); ``limit``: the first rows only.

    Raises:
        InputError: naming the file, and the row and column where it applies: a missing column
            (of either set), a length that is not a positive whole number (0 output tokens
            included), a negative or non-finite arrival, a timestamp that is neither a date and
            time nor a number of seconds (or not the first row's kind), arrivals out of time
            order or too far apart, a prefix longer than its prompt, or no rows.
    """
    src = str(path)
    text = read_text(path, "request trace").removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    check_columns(header, src)
    c_arr, c_prompt, c_out = _trace_columns(header, src)
    raw = c_arr == AZURE_COLUMNS[0]
    col = {c: header.index(c) for c in header}
    ia, ip, io_ = col[c_arr], col[c_prompt], col[c_out]
    ipid, iplen = col.get("prefix_id"), col.get("prefix_tokens")
    stamps = _Timestamps(src)
    out: list[Request] = []
    last = 0.0
    first_ns = last_ns = 0
    for row_no, row in enumerate(reader, start=1):
        if limit is not None and len(out) >= limit:
            break
        if not row or all(not x.strip() for x in row):
            continue
        where = f"row {row_no} (line {reader.line_num})"
        if len(row) < len(header):
            raise InputError(f"expected {len(header)} fields, got {len(row)}", src, where)
        if raw:
            ns = stamps.ns(row[ia], f"{where}, column {c_arr}")
            if not out:
                first_ns = last_ns = ns
            if ns < last_ns:
                raise InputError(
                    f"TIMESTAMP {row[ia].strip()!r} is {(last_ns - ns) / 1e9:g} s before the previous "
                    "row's: rows must be in time order",
                    src,
                    f"{where}, column {c_arr}",
                )
            if ns - first_ns > MAX_SECONDS * 1e9:
                raise InputError(
                    f"TIMESTAMP {row[ia].strip()!r} is {(ns - first_ns) / 1e9:.4g} s after the first "
                    f"row's, more than {MAX_SECONDS:.3g} s",
                    src,
                    f"{where}, column {c_arr}",
                )
            last_ns = ns
            arrival = ns - first_ns
        else:
            try:
                t = float(row[ia])
            except ValueError:
                t = math.nan
            if not (math.isfinite(t) and 0 <= t <= MAX_SECONDS):
                raise InputError(
                    f"arrived_at must be a finite number of seconds from 0 to {MAX_SECONDS:.3g}, got "
                    f"{row[ia].strip()!r}",
                    src,
                    f"{where}, column arrived_at",
                )
            if t < last:
                raise InputError(
                    f"arrived_at {t:g} s is before the previous row's {last:g} s: rows must be in time order",
                    src,
                    f"{where}, column arrived_at",
                )
            last = t
            arrival = round(t * 1e9)
        prompt = _whole(row[ip], c_prompt, src, f"{where}, column {c_prompt}")
        output = _whole(
            row[io_],
            c_out,
            src,
            f"{where}, column {c_out}",
            zero_hint="every request generates at least one token: drop the rows of 0",
        )
        pid, plen = -1, 0
        if ipid is not None and row[ipid].strip():
            pid = _whole(row[ipid], "prefix_id", src, f"{where}, column prefix_id", low=0)
            if iplen is None:
                raise InputError("a prefix_id needs a prefix_tokens column", src, "header")
            plen = _whole(row[iplen], "prefix_tokens", src, f"{where}, column prefix_tokens", low=0)
            if plen > prompt:
                raise InputError(
                    f"prefix_tokens {plen} is longer than the prompt ({prompt} tokens)",
                    src,
                    f"{where}, column prefix_tokens",
                )
        out.append(Request(len(out), arrival, prompt, output, pid, plen, reader.line_num))
    if not out:
        raise InputError("the trace has no requests", src)
    return out


# -- generators ----------------------------------------------------------------------------------

#: the generators' names
GENERATORS = ("poisson", "gamma")
_KEYS = ("prompt", "output", "seed", "cv", "prefixes")


@dataclass(frozen=True)
class Lengths:
    """A length distribution: ``fixed`` tokens, ``uniform`` from ``a`` to ``b``, or ``lognormal``
    of median ``a`` and sigma ``b``."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` whole lengths >= 1."""
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, n, dtype=np.int64)
        v = np.rint(rng.lognormal(math.log(self.a), self.b, n))
        return np.clip(v, 1, MAX_TOKENS).astype(np.int64)


def parse_lengths(text: str, where: str) -> Lengths:
    """``N``, ``uniform:A-B`` or ``lognormal:MEDIAN:SIGMA`` (the module docstring).

    Raises:
        InputError: naming ``where`` and the forms expected.
    """
    forms = "N, uniform:A-B or lognormal:MEDIAN:SIGMA"
    t = text.strip()
    try:
        if t.startswith("uniform:"):
            a, b = (int(x) for x in t[len("uniform:") :].split("-"))
            if 1 <= a <= b <= MAX_TOKENS:
                return Lengths("uniform", a, b)
        elif t.startswith("lognormal:"):
            m, s = (float(x) for x in t[len("lognormal:") :].split(":"))
            if math.isfinite(m) and math.isfinite(s) and m >= 1 and 0 <= s <= 10:
                return Lengths("lognormal", m, s)
        else:
            n = int(t)
            if 1 <= n <= MAX_TOKENS:
                return Lengths("fixed", n)
    except ValueError:
        pass
    raise InputError(
        f"expected a length as {forms} (whole numbers >= 1, A <= B, MEDIAN >= 1, 0 <= SIGMA <= 10), got {text!r}",
        where=where,
    )


@dataclass(frozen=True)
class GeneratorSpec:
    """A parsed generator: ``kind`` (poisson or gamma), ``qps`` (requests/s), ``cv`` (gamma),
    length distributions, ``seed``, shared ``prefixes`` (count, tokens; 0: none) and
    ``max_context``: the context its requests are cut to (tokens; None: as drawn), see
    :func:`clip_to_context`."""

    kind: str
    qps: float
    cv: float = 1.0
    prompt: Lengths = Lengths("fixed", 1024)
    output: Lengths = Lengths("fixed", 128)
    seed: int = 0
    prefixes: tuple[int, int] = (0, 0)
    max_context: int | None = None

    def with_qps(self, qps: float) -> "GeneratorSpec":
        return replace(self, qps=qps)


def is_generator(spec: str) -> bool:
    """Whether ``spec`` names a generator (``poisson:...``, ``gamma:...``) rather than a file."""
    return spec.split(":", 1)[0].strip().lower() in GENERATORS


def parse_generator(spec: str, where: str = "--workload") -> GeneratorSpec:
    """Parse ``poisson:QPS[,k=v...]`` or ``gamma:QPS,cv=C[,k=v...]``.

    Raises:
        InputError: naming ``where``: an unknown generator or key (with a did-you-mean), a rate
            that is not a finite number > 0, a bad length or seed.
    """
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in GENERATORS:
        hint = closest(kind, GENERATORS)
        raise InputError(
            f"unknown generator {kind!r}"
            + (f"; did you mean {hint!r}?" if hint else "")
            + " (poisson:QPS[,prompt=...,output=...] or gamma:QPS,cv=C[,...], or a trace CSV)",
            where=where,
        )
    parts = [p.strip() for p in rest.split(",")]
    try:
        qps = float(parts[0])
    except ValueError:
        qps = math.nan
    if not (math.isfinite(qps) and 0 < qps <= 1e9):
        raise InputError(
            f"{kind}: the rate must be a finite number of requests/s > 0, got {parts[0]!r} (e.g. {kind}:5.5)",
            where=where,
        )
    kw: dict[str, object] = {}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        key = key.strip()
        if key in kw:
            raise InputError(f"{kind}: option {key!r} is given twice in {spec!r}; give it once", where=where)
        if not eq or key not in _KEYS:
            hint = closest(key, _KEYS)
            raise InputError(
                f"{kind}: unknown option {p!r}"
                + (f"; did you mean {hint!r}?" if hint else "")
                + f" (options: {', '.join(_KEYS)})",
                where=where,
            )
        if key in ("prompt", "output"):
            kw[key] = parse_lengths(value, f"{where} {key}")
        elif key == "seed":
            if not value.strip().isdecimal():
                raise InputError(f"{kind}: seed must be a whole number >= 0, got {value!r}", where=where)
            kw["seed"] = int(value)
        elif key == "cv":
            try:
                cv = float(value)
            except ValueError:
                cv = math.nan
            if not (math.isfinite(cv) and 0 < cv <= 100):
                raise InputError(f"{kind}: cv must be a finite number > 0 (1: Poisson), got {value!r}", where=where)
            kw["cv"] = cv
        else:
            k, _, ln = value.partition(":")
            if not (k.strip().isdecimal() and ln.strip().isdecimal() and int(k) >= 1 and int(ln) >= 1):
                raise InputError(f"{kind}: prefixes must be K:LEN (whole numbers >= 1), got {value!r}", where=where)
            kw["prefixes"] = (int(k), int(ln))
    if kind == "gamma" and "cv" not in kw:
        raise InputError(
            "gamma arrivals need cv=C (their gaps' coefficient of variation), e.g. gamma:5,cv=2", where=where
        )
    if kind == "poisson" and kw.get("cv", 1.0) != 1.0:
        raise InputError("poisson arrivals have cv 1; for another cv use gamma:QPS,cv=C", where=where)
    return GeneratorSpec(kind, qps, **kw)  # type: ignore[arg-type]


def _check_span(last_ns: float, n: int, qps: float) -> None:
    """Refuse arrivals whose last one (``last_ns``, ns) falls past :data:`MAX_SECONDS`."""
    if last_ns > MAX_SECONDS * 1e9:
        raise InputError(
            f"{n} requests at {qps:g}/s last {last_ns / 1e9:.3g} s, past the {MAX_SECONDS:.3g} s a run may span: "
            "give a higher rate or fewer requests",
            where="--workload",
        )


def arrivals_ns(spec: GeneratorSpec, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` arrival times (ns), the first at 0, gaps exponential (Poisson) or Gamma."""
    if n <= 0:
        return []
    if spec.kind == "poisson":
        gaps = rng.exponential(1.0 / spec.qps, n - 1)
    else:
        gaps = rng.gamma(1.0 / spec.cv**2, spec.cv**2 / spec.qps, n - 1)
    t = np.concatenate(([0.0], np.cumsum(gaps)))
    if t[-1] > MAX_SECONDS:
        raise InputError(f"{n} requests at {spec.qps:g}/s last past {MAX_SECONDS:.3g} s", where="--requests")
    return np.rint(t * 1e9).astype(np.int64).tolist()


def generate(spec: GeneratorSpec, n: int) -> list[Request]:
    """``n`` requests of ``spec``, seeded: the same spec and ``n`` give the same requests, and a
    spec that differs only in its rate gives the same lengths with every gap scaled; cut to the
    spec's ``max_context`` when it has one."""
    if n < 1:
        raise InputError(f"expected at least one request, got {n}", where="--requests")
    rng = np.random.default_rng(spec.seed)
    unit = arrivals_ns(GeneratorSpec(spec.kind, 1.0, spec.cv), n, rng)  # gaps at 1/s, then scaled
    prompts = spec.prompt.draw(rng, n).tolist()
    outputs = spec.output.draw(rng, n).tolist()
    k, plen = spec.prefixes
    pids = rng.integers(0, k, n).tolist() if k else [-1] * n
    scale = 1.0 / spec.qps
    _check_span(unit[-1] * scale, n, spec.qps)
    out = []
    for i in range(n):
        shared = min(plen, prompts[i] - 1) if k else 0
        out.append(
            Request(i, round(unit[i] * scale), prompts[i], outputs[i], pids[i] if shared > 0 else -1, max(shared, 0))
        )
    return out if spec.max_context is None else clip_to_context(out, spec.max_context)[0]


def load_requests(spec: str, n: int | None = None) -> list[Request]:
    """A trace CSV (its first ``n`` rows, default all) or a generator spec (``n`` requests,
    default 1000).

    Raises:
        InputError: a bad spec or trace (see :func:`read_trace`), or ``n`` over the trace's rows.
    """
    if is_generator(spec):
        return generate(parse_generator(spec), 1000 if n is None else n)
    if ":" in spec and not Path(spec).exists():  # a misspelt generator, not a missing file
        parse_generator(spec)
    out = read_trace(spec, n)
    if n is not None and len(out) < n:
        raise InputError(
            f"--requests {n} asks for more requests than the trace's {len(out)}: leave --requests out to run "
            f"them all, or give at most {len(out)}",
            spec,
        )
    return out


def workload(spec: str, n: int | None, max_context: int) -> tuple[list[Request], GeneratorSpec | None, int]:
    """A workload as a serving run takes it: its requests (see :func:`load_requests`), its
    generator when it is one (cutting what it draws to ``max_context``, tokens), and how many
    generated requests were cut (see :func:`clip_to_context`).

    Raises:
        InputError: as :func:`load_requests`.
    """
    requests = load_requests(spec, n)
    if not is_generator(spec):
        return requests, None, 0
    requests, cut = clip_to_context(requests, max_context)
    return requests, replace(parse_generator(spec), max_context=max_context), cut


def clip_to_context(requests: list[Request], max_context: int) -> tuple[list[Request], int]:
    """Generated requests fitted to the context (as a benchmark client sizes them): a prompt of at
    most ``max_context - 1`` tokens and an output of at most what the context leaves; returns the
    requests and how many were cut.  A trace's requests are not for podsim to change: they are
    refused if too long (see :func:`podsim.serving.llm.simulate.simulate`)."""
    out, cut = [], 0
    for r in requests:
        prompt = min(r.prompt_tokens, max_context - 1)
        output = min(r.output_tokens, max_context - prompt)
        if (prompt, output) == (r.prompt_tokens, r.output_tokens):
            out.append(r)
            continue
        cut += 1
        shared = min(r.prefix_tokens, prompt - 1)
        out.append(
            replace(
                r,
                prompt_tokens=prompt,
                output_tokens=output,
                prefix_tokens=shared,
                prefix_id=r.prefix_id if shared > 0 else -1,
            )
        )
    return out, cut


def with_poisson_arrivals(requests: list[Request], qps: float, seed: int = 0) -> list[Request]:
    """The same requests (lengths, prefixes) re-timed as a Poisson process of ``qps`` requests/s
    from t = 0 (seeded; a higher rate scales every gap down): the capacity search's workload."""
    unit = arrivals_ns(GeneratorSpec("poisson", 1.0), len(requests), np.random.default_rng(seed))
    if unit:
        _check_span(unit[-1] / qps, len(requests), qps)
    return [replace(r, arrival_ns=round(u / qps)) for r, u in zip(requests, unit)]
