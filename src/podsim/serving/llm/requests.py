"""LLM inference requests: the Azure LLM trace CSV and seeded generators (issue #16).

A :class:`Request` arrives at ``arrival_ns`` (integer ns from the workload's start) with a prompt
of ``prompt_tokens`` and asks for ``output_tokens`` tokens; it may share its first
``prefix_tokens`` prompt tokens with every other request of the same ``prefix_id`` (a system
prompt, a conversation's history) for prefix caching.

**Trace CSV** (the Azure LLM inference trace 2023 as Vidur processed it): a header naming at least
``arrived_at`` (s from the first request, non-decreasing), ``num_prefill_tokens`` and
``num_decode_tokens`` (positive whole numbers); optional ``prefix_id`` (a whole number >= 0, or
empty for none) and ``prefix_tokens`` (at most the prompt).  Other columns are ignored.

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

import csv
import io
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...errors import InputError, closest
from ...fileio import read_text

#: the columns a trace must have
TRACE_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
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
    """

    id: int
    arrival_ns: int
    prompt_tokens: int
    output_tokens: int
    prefix_id: int = -1
    prefix_tokens: int = 0


def _whole(text: str, what: str, source: str, where: str, low: int = 1) -> int:
    """A whole number >= ``low`` (``"12"`` or ``"12.0"``), else an error naming the place."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v == int(v) and low <= v <= MAX_TOKENS):
        kind = "a positive whole number" if low == 1 else f"a whole number >= {low}"
        raise InputError(f"{what} must be {kind}, got {text.strip()!r}", source, where)
    return int(v)


def read_trace(path: str | Path, limit: int | None = None) -> list[Request]:
    """Read a request trace CSV (the module docstring says its columns); ``limit``: the first
    rows only.

    Raises:
        InputError: naming the file, and the row and column where it applies: a missing column,
            a length that is not a positive whole number, a negative or non-finite arrival,
            arrivals out of time order, a prefix longer than its prompt, or no rows.
    """
    src = str(path)
    text = read_text(path, "request trace")
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        others = [h for h in header if h not in TRACE_COLUMNS]
        hints = [f"{m!r} (found {closest(m, others)!r}?)" if closest(m, others) else repr(m) for m in missing]
        raise InputError(f"missing column{'s' if len(missing) > 1 else ''} {', '.join(hints)}; a trace needs "
                         f"{', '.join(TRACE_COLUMNS)} (found: {', '.join(header) or 'nothing'})", src, "header")
    col = {c: header.index(c) for c in header}
    ia, ip, io_ = col["arrived_at"], col["num_prefill_tokens"], col["num_decode_tokens"]
    ipid, iplen = col.get("prefix_id"), col.get("prefix_tokens")
    out: list[Request] = []
    last = 0.0
    for row_no, row in enumerate(reader, start=1):
        if limit is not None and len(out) >= limit:
            break
        if not row or all(not x.strip() for x in row):
            continue
        where = f"row {row_no} (line {reader.line_num})"
        if len(row) < len(header):
            raise InputError(f"expected {len(header)} fields, got {len(row)}", src, where)
        try:
            t = float(row[ia])
        except ValueError:
            t = math.nan
        if not (math.isfinite(t) and 0 <= t <= MAX_SECONDS):
            raise InputError(f"arrived_at must be a finite number of seconds from 0 to {MAX_SECONDS:.3g}, got "
                             f"{row[ia].strip()!r}", src, f"{where}, column arrived_at")
        if t < last:
            raise InputError(f"arrived_at {t:g} s is before the previous row's {last:g} s: rows must be in time "
                             "order", src, f"{where}, column arrived_at")
        last = t
        prompt = _whole(row[ip], "num_prefill_tokens", src, f"{where}, column num_prefill_tokens")
        output = _whole(row[io_], "num_decode_tokens", src, f"{where}, column num_decode_tokens")
        pid, plen = -1, 0
        if ipid is not None and row[ipid].strip():
            pid = _whole(row[ipid], "prefix_id", src, f"{where}, column prefix_id", low=0)
            if iplen is None:
                raise InputError("a prefix_id needs a prefix_tokens column", src, "header")
            plen = _whole(row[iplen], "prefix_tokens", src, f"{where}, column prefix_tokens", low=0)
            if plen > prompt:
                raise InputError(f"prefix_tokens {plen} is longer than the prompt ({prompt} tokens)", src,
                                 f"{where}, column prefix_tokens")
        out.append(Request(len(out), round(t * 1e9), prompt, output, pid, plen))
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
            a, b = (int(x) for x in t[len("uniform:"):].split("-"))
            if 1 <= a <= b <= MAX_TOKENS:
                return Lengths("uniform", a, b)
        elif t.startswith("lognormal:"):
            m, s = (float(x) for x in t[len("lognormal:"):].split(":"))
            if math.isfinite(m) and math.isfinite(s) and m >= 1 and 0 <= s <= 10:
                return Lengths("lognormal", m, s)
        else:
            n = int(t)
            if 1 <= n <= MAX_TOKENS:
                return Lengths("fixed", n)
    except ValueError:
        pass
    raise InputError(f"expected a length as {forms} (whole numbers >= 1, A <= B, MEDIAN >= 1, 0 <= SIGMA <= 10), "
                     f"got {text!r}", where=where)


@dataclass(frozen=True)
class GeneratorSpec:
    """A parsed generator: ``kind`` (poisson or gamma), ``qps`` (requests/s), ``cv`` (gamma),
    length distributions, ``seed`` and shared ``prefixes`` (count, tokens; 0: none)."""

    kind: str
    qps: float
    cv: float = 1.0
    prompt: Lengths = Lengths("fixed", 1024)
    output: Lengths = Lengths("fixed", 128)
    seed: int = 0
    prefixes: tuple[int, int] = (0, 0)

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
        raise InputError(f"unknown generator {kind!r}" + (f"; did you mean {hint!r}?" if hint else "") +
                         " (poisson:QPS[,prompt=...,output=...] or gamma:QPS,cv=C[,...], or a trace CSV)",
                         where=where)
    parts = [p.strip() for p in rest.split(",")]
    try:
        qps = float(parts[0])
    except ValueError:
        qps = math.nan
    if not (math.isfinite(qps) and 0 < qps <= 1e9):
        raise InputError(f"{kind}: the rate must be a finite number of requests/s > 0, got {parts[0]!r} "
                         f"(e.g. {kind}:5.5)", where=where)
    kw: dict[str, object] = {}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        key = key.strip()
        if not eq or key not in _KEYS:
            hint = closest(key, _KEYS)
            raise InputError(f"{kind}: unknown option {p!r}" + (f"; did you mean {hint!r}?" if hint else "") +
                             f" (options: {', '.join(_KEYS)})", where=where)
        if key in ("prompt", "output"):
            kw[key] = parse_lengths(value, f"{where} {key}")
        elif key == "seed":
            if not value.strip().isdigit():
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
            if not (k.strip().isdigit() and ln.strip().isdigit() and int(k) >= 1 and int(ln) >= 1):
                raise InputError(f"{kind}: prefixes must be K:LEN (whole numbers >= 1), got {value!r}", where=where)
            kw["prefixes"] = (int(k), int(ln))
    if kind == "gamma" and "cv" not in kw:
        raise InputError("gamma arrivals need cv=C (their gaps' coefficient of variation), e.g. gamma:5,cv=2",
                         where=where)
    if kind == "poisson" and kw.get("cv", 1.0) != 1.0:
        raise InputError("poisson arrivals have cv 1; for another cv use gamma:QPS,cv=C", where=where)
    return GeneratorSpec(kind, qps, **kw)  # type: ignore[arg-type]


def arrivals_ns(spec: GeneratorSpec, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` arrival times (ns), the first at 0, gaps exponential (Poisson) or Gamma."""
    if n <= 0:
        return []
    if spec.kind == "poisson":
        gaps = rng.exponential(1.0 / spec.qps, n - 1)
    else:
        gaps = rng.gamma(1.0 / spec.cv ** 2, spec.cv ** 2 / spec.qps, n - 1)
    t = np.concatenate(([0.0], np.cumsum(gaps)))
    if t[-1] > MAX_SECONDS:
        raise InputError(f"{n} requests at {spec.qps:g}/s last past {MAX_SECONDS:.3g} s", where="--requests")
    return np.rint(t * 1e9).astype(np.int64).tolist()


def generate(spec: GeneratorSpec, n: int) -> list[Request]:
    """``n`` requests of ``spec``, seeded: the same spec and ``n`` give the same requests, and a
    spec that differs only in its rate gives the same lengths with every gap scaled."""
    if n < 1:
        raise InputError(f"expected at least one request, got {n}", where="--requests")
    rng = np.random.default_rng(spec.seed)
    unit = arrivals_ns(GeneratorSpec(spec.kind, 1.0, spec.cv), n, rng)   # gaps at 1/s, then scaled
    prompts = spec.prompt.draw(rng, n).tolist()
    outputs = spec.output.draw(rng, n).tolist()
    k, plen = spec.prefixes
    pids = rng.integers(0, k, n).tolist() if k else [-1] * n
    scale = 1.0 / spec.qps
    out = []
    for i in range(n):
        shared = min(plen, prompts[i] - 1) if k else 0
        out.append(Request(i, round(unit[i] * scale), prompts[i], outputs[i], pids[i] if shared > 0 else -1,
                           max(shared, 0)))
    return out


def load_requests(spec: str, n: int | None = None) -> list[Request]:
    """A trace CSV (its first ``n`` rows, default all) or a generator spec (``n`` requests,
    default 1000)."""
    if is_generator(spec):
        return generate(parse_generator(spec), 1000 if n is None else n)
    if ":" in spec and not Path(spec).exists():         # a misspelt generator, not a missing file
        parse_generator(spec)
    return read_trace(spec, n)


def with_poisson_arrivals(requests: list[Request], qps: float, seed: int = 0) -> list[Request]:
    """The same requests (lengths, prefixes) re-timed as a Poisson process of ``qps`` requests/s
    from t = 0 (seeded; a higher rate scales every gap down): the capacity search's workload."""
    unit = arrivals_ns(GeneratorSpec("poisson", 1.0), len(requests), np.random.default_rng(seed))
    return [replace(r, arrival_ns=round(u / qps)) for r, u in zip(requests, unit)]
