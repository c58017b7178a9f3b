"""The reliability model: how often each kind of component interrupts a synchronous training job.

A :class:`Reliability` holds one :class:`FailureKind` per kind (``gpu``, ``hbm``, ``host``,
``nic``, ``switch``, ``software``): a rate in failures per component-hour, the component it
counts (``per``: one per GPU, per node or per switch) and whether the failed part must be
swapped before the job restarts (``replace``).  Every failure of any component of the job
stops the whole job (synchronous training), so the job's failure rate is the sum over kinds
of ``rate x components``: :meth:`Reliability.job_rates_per_s`.

The shipped defaults are ``reliability/defaults.yaml`` (each rate with its ``source`` and the
arithmetic from it); a user's YAML of the same shape replaces the kinds it names
(:func:`load_reliability`).  Rates are per component-hour here and per second of the job's
wall-clock time once counted (:meth:`Reliability.job_rates_per_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, closest
from ..fileio import load_yaml, read_yaml

#: the kinds of failure podsim counts, in report order
KINDS = ("gpu", "hbm", "host", "nic", "switch", "software")
#: what a kind's rate counts: one component per GPU, per node, per switch
PER = ("gpu", "node", "switch")
#: the keys a kind may set
_KIND_KEYS = ("rate", "per", "replace", "source", "derivation")
_TOP_KEYS = ("gpus_per_switch", "kinds")


@dataclass(frozen=True)
class FailureKind:
    """One kind of failure.

    Attributes:
        name: one of :data:`KINDS`.
        rate: failures per component-hour (>= 0; 0: never).
        per: the component counted, one of :data:`PER`.
        replace: the failed part must be swapped before a restart (the restart waits for
            rescheduling).
        source: where the rate comes from.
        derivation: how it was computed from the source.
    """

    name: str
    rate: float
    per: str
    replace: bool
    source: str = ""
    derivation: str = ""


@dataclass(frozen=True)
class Reliability:
    """Failure kinds and how many GPUs share a switch.

    Attributes:
        kinds: by name, in :data:`KINDS` order.
        gpus_per_switch: GPUs under one switch (counts the ``switch`` components).
        source: the file the model was read from (``defaults.yaml`` or the user's).
    """

    kinds: dict[str, FailureKind]
    gpus_per_switch: int
    source: str = "defaults"

    def components(self, per: str, gpus: int, gpus_per_node: int) -> int:
        """How many ``per`` components ``gpus`` GPUs use (nodes and switches rounded up)."""
        if per == "gpu":
            return gpus
        if per == "node":
            return -(-gpus // gpus_per_node)
        return -(-gpus // self.gpus_per_switch)

    def job_rates_per_s(self, gpus: int, gpus_per_node: int) -> dict[str, float]:
        """Each kind's rate of interruptions of a job on ``gpus`` GPUs, per second of wall clock."""
        return {k.name: k.rate * self.components(k.per, gpus, gpus_per_node) / 3600.0 for k in self.kinds.values()}

    def scaled(self, factor: float) -> Reliability:
        """Every rate times ``factor`` (a what-if)."""
        return replace(self, kinds={n: replace(k, rate=k.rate * factor) for n, k in self.kinds.items()})


def _unknown(key: str, valid: tuple[str, ...], source: str, where: str | None, what: str) -> InputError:
    """An unknown key or kind, with the closest valid one and the list."""
    hint = closest(key, valid)
    near = f"; did you mean {hint!r}?" if hint else ""
    return InputError(f"unknown {what} {key!r}{near} (one of {', '.join(valid)})", source, where)


def _rate(value: Any, source: str, where: str) -> float:
    """A failure rate: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"rate must be a number of failures per component-hour >= 0, got {value!r}", source, where)
    try:
        r = float(value)
    except ValueError:
        raise InputError(
            f"rate must be a number of failures per component-hour >= 0, got {value!r}", source, where
        ) from None
    if not math.isfinite(r) or r < 0:
        raise InputError(
            f"rate must be a finite number of failures per component-hour >= 0 (0: never), got {value!r}",
            source,
            where,
        )
    return r


def _kind(name: str, spec: Any, base: FailureKind | None, source: str) -> FailureKind:
    where = f"kinds.{name}"
    if not isinstance(spec, dict):
        raise InputError(f"expected a mapping with rate, per, replace, got {spec!r}", source, where)
    for key in spec:
        if key not in _KIND_KEYS:
            raise _unknown(str(key), _KIND_KEYS, source, where, "key")
    if base is None:
        missing = [k for k in ("rate", "per", "replace") if k not in spec]
        if missing:
            raise InputError(f"a new kind needs {', '.join(missing)}", source, where)
    rate = _rate(spec["rate"], source, f"{where}.rate") if "rate" in spec else base.rate  # type: ignore[union-attr]
    per = spec.get("per", base.per if base else None)
    if per not in PER:
        raise InputError(f"per must be one of {', '.join(PER)}, got {per!r}", source, f"{where}.per")
    rep = spec.get("replace", base.replace if base else None)
    if not isinstance(rep, bool):
        raise InputError(f"replace must be true or false, got {rep!r}", source, f"{where}.replace")
    return FailureKind(
        name,
        rate,
        per,
        rep,
        str(spec.get("source", base.source if base else "")),
        str(spec.get("derivation", "" if "rate" in spec else (base.derivation if base else ""))),
    )


def parse_reliability(doc: Any, source: str, base: Reliability | None = None) -> Reliability:
    """A :class:`Reliability` from a YAML document; the kinds it names replace ``base``'s (the
    ones it does not keep ``base``'s rates).

    Raises:
        InputError: naming ``source`` and the key: an unknown key or kind (with the closest
            one), a rate that is not a finite number >= 0, a ``per`` or ``replace`` it does
            not take, no kinds at all."""
    if not isinstance(doc, dict):
        raise InputError("expected a mapping with `kinds:` (docs/goodput.md)", source)
    for key in doc:
        if key not in _TOP_KEYS:
            raise _unknown(str(key), _TOP_KEYS, source, None, "key")
    gps = doc.get("gpus_per_switch", base.gpus_per_switch if base else None)
    if isinstance(gps, bool) or not isinstance(gps, int) or gps < 1:
        raise InputError(f"gpus_per_switch must be a whole number >= 1, got {gps!r}", source, "gpus_per_switch")
    kinds_doc = doc.get("kinds")
    if not isinstance(kinds_doc, dict) or not kinds_doc:
        raise InputError("expected `kinds:`, a mapping of failure kinds (gpu, hbm, ...) to rates", source, "kinds")
    kinds = dict(base.kinds) if base else {}
    for name, spec in kinds_doc.items():
        if name not in KINDS:
            raise _unknown(str(name), KINDS, source, "kinds", "failure kind")
        kinds[name] = _kind(name, spec, kinds.get(name), source)
    ordered = {k: kinds[k] for k in KINDS if k in kinds}
    return Reliability(ordered, gps, source)


def default_reliability() -> Reliability:
    """The shipped defaults (``reliability/defaults.yaml``)."""
    text = (resources.files("podsim.reliability") / "defaults.yaml").read_text()
    return parse_reliability(load_yaml(text), "podsim/reliability/defaults.yaml")


def load_reliability(path: str | Path | None) -> Reliability:
    """The defaults, with the kinds a user's YAML ``path`` names replaced (None: the defaults).

    Raises:
        InputError: an unreadable file, bad YAML, or a bad entry (:func:`parse_reliability`)."""
    base = default_reliability()
    if path is None:
        return base
    return parse_reliability(read_yaml(path, "reliability file"), str(path), base)
