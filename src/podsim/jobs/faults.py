"""Faults a job injects (``--slow-gpus``, ``--slow-nics``, ``--slow-links``, ``--hiccup``): the
same flags in ``podsim simulate`` and ``podsim llm`` (``podsim collective`` takes the network
ones), and so in ``podsim sweep``.  Each flag's text is parsed here, with one-line errors naming
the flag and the form it takes, into the engine's fault data (:mod:`podsim.engine.faults`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..engine.faults import FaultSpec, HostHiccup, SlowGpus, SlowLinks, SlowNics
from ..errors import InputError
from ..params import Param, nested, param
from ..units import parse_time_ns

SLOW_GPUS_FORM = "RANKS:FACTOR (3:1.1, 3,7:1.5), PERCENT%:FACTOR[,seed=S] (2%:1.2,seed=7) or random:LO-HI[,seed=S]"
SLOW_NICS_FORM = "RANKS:FRACTION (5:0.5, 5,6:0.25)"
SLOW_LINKS_FORM = "LINK[,LINK...]:FRACTION (gpu0->seg0.rail0:0.5; a<->b for both directions)"
HICCUP_FORM = "EVERY:DELAY[,host=H] (10:200ms: host 0 stalls 200 ms every 10 steps)"


def _number(text: str, flag: str, what: str, form: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or x <= 0:
        raise InputError(f"{what} must be a number > 0, got {text!r}; expected {form}", where=flag)
    return x


def _ranks(text: str, flag: str, form: str) -> tuple[int, ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not re.fullmatch(r"\d+", part):
            raise InputError(f"expected ranks (integers >= 0), got {part!r} in {text!r}; expected {form}", where=flag)
        out.append(int(part))
    return tuple(sorted(set(out)))


def _options(parts: list[str], flag: str, form: str, allowed: tuple[str, ...]) -> dict[str, int]:
    """``key=int`` options after the first comma-free part."""
    out = {}
    for opt in parts:
        key, eq, value = opt.strip().partition("=")
        if not eq or key not in allowed or not re.fullmatch(r"\d+", value.strip()):
            raise InputError(f"unknown option {opt!r}; expected {form}", where=flag)
        out[key] = int(value)
    return out


def _split(text: str, flag: str, form: str) -> tuple[str, str]:
    what, colon, value = str(text).strip().rpartition(":")
    if not colon or not what or not value:
        raise InputError(f"expected {form}, got {text!r}", where=flag)
    return what.strip(), value.strip()


def parse_slow_gpus(text: object, flag: str = "--slow-gpus") -> SlowGpus:
    """``3:1.1`` (rank 3, 1.1x), ``3,7:1.5``, ``2%:1.2,seed=7`` (a random 2% of the GPUs) or
    ``random:1.0-1.2,seed=1`` (every GPU a random factor in the range)."""
    raw = str(text).strip()
    if raw.startswith("random:"):
        body, *opts = raw[len("random:") :].split(",")
        lo, dash, hi = body.partition("-")
        if not dash:
            raise InputError(f"expected random:LO-HI, got {raw!r}; expected {SLOW_GPUS_FORM}", where=flag)
        a = _number(lo, flag, "a factor", SLOW_GPUS_FORM)
        b = _number(hi, flag, "a factor", SLOW_GPUS_FORM)
        if b < a:
            raise InputError(f"random:LO-HI needs LO <= HI, got {raw!r}", where=flag)
        seed = _options(opts, flag, SLOW_GPUS_FORM, ("seed",)).get("seed", 0)
        return SlowGpus(raw, spread=(a, b), seed=seed)
    what, value = _split(raw, flag, SLOW_GPUS_FORM)
    if what.endswith("%"):
        factor_text, *opts = value.split(",")
        pct = _number(what[:-1], flag, "a percentage", SLOW_GPUS_FORM)
        if pct > 100:
            raise InputError(f"a percentage of the GPUs must be <= 100, got {what!r}", where=flag)
        seed = _options(opts, flag, SLOW_GPUS_FORM, ("seed",)).get("seed", 0)
        return SlowGpus(raw, _number(factor_text, flag, "the factor", SLOW_GPUS_FORM), fraction=pct / 100, seed=seed)
    return SlowGpus(raw, _number(value, flag, "the factor", SLOW_GPUS_FORM), ranks=_ranks(what, flag, SLOW_GPUS_FORM))


def _fraction(value: str, flag: str, form: str) -> float:
    f = _number(value, flag, "the fraction of the bandwidth", form)
    if f > 1:
        raise InputError(f"the fraction of the bandwidth must be <= 1, got {value!r}; expected {form}", where=flag)
    return f


def parse_slow_nics(text: object, flag: str = "--slow-nics") -> SlowNics:
    """``5:0.5``: GPU 5's NIC at half its bandwidth; ``5,6:0.25``."""
    what, value = _split(str(text), flag, SLOW_NICS_FORM)
    return SlowNics(str(text).strip(), _ranks(what, flag, SLOW_NICS_FORM), _fraction(value, flag, SLOW_NICS_FORM))


def parse_slow_links(text: object, flag: str = "--slow-links") -> SlowLinks:
    """``gpu0->seg0.rail0:0.5`` (one direction), ``gpu0<->seg0.rail0:0.5`` (both)."""
    what, value = _split(str(text), flag, SLOW_LINKS_FORM)
    links = tuple(x.strip() for x in what.split(",") if x.strip())
    for name in links:
        if "->" not in name:
            raise InputError(f"a link is named a->b or a<->b, got {name!r}; expected {SLOW_LINKS_FORM}", where=flag)
    return SlowLinks(str(text).strip(), links, _fraction(value, flag, SLOW_LINKS_FORM))


def parse_hiccup(text: object, flag: str = "--hiccup") -> HostHiccup:
    """``10:200ms``: host 0 stalls 200 ms before its step every 10 steps; ``10:200ms,host=3``."""
    raw = str(text).strip()
    every, colon, rest = raw.partition(":")
    delay, *opts = rest.split(",")
    if not colon or not re.fullmatch(r"\d+", every.strip()) or int(every) < 1:
        raise InputError(f"expected {HICCUP_FORM} (EVERY an integer >= 1), got {raw!r}", where=flag)
    ns = parse_time_ns(delay.strip(), where=flag)
    if ns <= 0:
        raise InputError(f"the delay must be > 0, got {delay!r}; expected {HICCUP_FORM}", where=flag)
    host = _options(opts, flag, HICCUP_FORM, ("host",)).get("host", 0)
    return HostHiccup(raw, int(every), ns, host)


SLOW_NICS = Param(
    "slow-nics",
    "text",
    metavar="RANKS:FRACTION",
    parse=parse_slow_nics,
    help="GPUs whose NIC runs at a fraction of its bandwidth: 5:0.5 (GPU 5's NIC halved), 5,6:0.25",
)
SLOW_LINKS = Param(
    "slow-links",
    "text",
    metavar="LINKS:FRACTION",
    parse=parse_slow_links,
    help="fabric links at a fraction of their bandwidth: gpu0->seg0.rail0:0.5 (one direction), a<->b:0.5 "
    "(both); names as podsim fabric prints them",
)


@dataclass(frozen=True)
class NetworkFaults:
    """Degraded NICs and links (``podsim collective`` takes these alone)."""

    slow_nics: SlowNics | None = param(SLOW_NICS)
    slow_links: SlowLinks | None = param(SLOW_LINKS)

    def spec(self) -> FaultSpec:
        """The faults as the engine takes them."""
        return FaultSpec(slow_nics=self.slow_nics, slow_links=self.slow_links)


@dataclass(frozen=True)
class Faults:
    """Stragglers and slow parts injected into a simulated step (docs/faults.md)."""

    slow_gpus: SlowGpus | None = param(
        Param(
            "slow-gpus",
            "text",
            metavar="SPEC",
            parse=parse_slow_gpus,
            help="GPUs that compute slower: 3:1.1 (rank 3 takes 1.1x as long), 3,7:1.5, 2%:1.2,seed=7 (a random "
            "2% of the GPUs), random:1.0-1.2,seed=1 (every GPU a random factor)",
        )
    )
    network: NetworkFaults = nested(NetworkFaults)
    hiccup: HostHiccup | None = param(
        Param(
            "hiccup",
            "text",
            metavar="EVERY:DELAY",
            parse=parse_hiccup,
            help="a host stalls before its step every EVERY steps: 10:200ms (host 0), 10:200ms,host=3; the "
            "affected step is simulated and its cost amortised over EVERY steps",
        )
    )

    def spec(self) -> FaultSpec:
        """The faults as the engine takes them."""
        return FaultSpec(self.slow_gpus, self.network.slow_nics, self.network.slow_links, self.hiccup)
