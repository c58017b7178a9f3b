"""NCCL-like tuning parameters: latencies and efficiencies, kept as data (a cluster file's
``nccl:`` section), never as constants in the algorithms.

The cost of one collective is modelled as NCCL's own tuner does::

    time = base_latency[algo][proto]
         + sum over steps (hop_latency[link class][algo][proto] + transfer time of the step)

where a step's transfer time comes from the network backend with every link's capacity
scaled by ``link_efficiency[tier] * protocol_efficiency[proto]``.  The defaults below are
NCCL 2.x's published tuner constants (base latencies 6.6-14 us, hop latencies 0.6-14 us,
LL carrying 8 data bytes per 16, LL128 120 per 128); cluster presets override them with
values fitted to measurements.

Units in files: latencies with a time unit ("6.6 us"), efficiencies as fractions.  Inside:
integer-free floats in ns and plain fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import InputError, unknown_key_error
from ...units import parse_bandwidth, parse_time_ns
from ..registry import tuned_nccl_algorithms

PROTOCOLS = ("LL", "LL128", "Simple")
LINK_CLASSES = ("nvlink", "pcie", "net")
TIERS = ("nvlink", "pcie", "nic", "fabric", "optical")

_DEFAULT_BASE_US = {
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 14.0},
    "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
    "hierarchical": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
}
_DEFAULT_HOP_US = {
    "nvlink": {
        "ring": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
        "hierarchical": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
    },
    "pcie": {
        "ring": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
        "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
        "hierarchical": {"LL": 1.0, "LL128": 1.9, "Simple": 6.0},
    },
    "net": {
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
        "hierarchical": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
    },
}
_DEFAULT_PROTO_EFF = {"LL": 0.5, "LL128": 0.9375, "Simple": 1.0}
_DEFAULT_LINK_EFF = {"nvlink": 1.0, "pcie": 1.0, "nic": 1.0, "fabric": 1.0, "optical": 1.0}


@dataclass(frozen=True)
class NcclTuning:
    """Tuning of the NCCL-like collectives (see the module docstring for the model)."""

    channels: int = 8  #: parallel rings / trees (NCCL channels)
    algorithms: tuple[str, ...] = ("ring", "tree")  #: what the selector may pick (add "nvls" on H100+)
    protocols: tuple[str, ...] = PROTOCOLS
    pxn: bool = True  #: relay inter-node ring hops over NVLink to the rail GPU
    base_latency_ns: dict = field(
        default_factory=lambda: {a: {p: v * 1000 for p, v in d.items()} for a, d in _DEFAULT_BASE_US.items()}
    )
    hop_latency_ns: dict = field(
        default_factory=lambda: {
            c: {a: {p: v * 1000 for p, v in d.items()} for a, d in ad.items()} for c, ad in _DEFAULT_HOP_US.items()
        }
    )
    protocol_efficiency: dict = field(default_factory=lambda: dict(_DEFAULT_PROTO_EFF))
    link_efficiency: dict = field(default_factory=lambda: dict(_DEFAULT_LINK_EFF))
    #: most one channel's transfer between two GPUs can carry, per algorithm (bytes per ns; an
    #: SM / copy limit, NCCL's per-channel tree and ring bandwidth caps); absent = no cap
    channel_bandwidth: dict = field(default_factory=dict)

    def base_ns(self, algo: str, proto: str) -> float:
        """Fixed start-up cost of one collective (ns)."""
        return float(self.base_latency_ns[algo][proto])

    def hop_ns(self, link_class: str, algo: str, proto: str) -> float:
        """Per-step latency over a link class (ns)."""
        return float(self.hop_latency_ns[link_class][algo][proto])

    def channel_cap(self, algo: str) -> float:
        """Per-channel flow rate cap of ``algo`` (bytes per ns; inf when none)."""
        return float(self.channel_bandwidth.get(algo, float("inf")))

    def efficiency(self, tier: str, proto: str) -> float:
        """Fraction of a link's line rate a protocol achieves on a tier."""
        return float(self.link_efficiency[tier]) * float(self.protocol_efficiency[proto])


_KEYS = {
    "channels",
    "algorithms",
    "protocols",
    "pxn",
    "base_latency",
    "hop_latency",
    "protocol_efficiency",
    "link_efficiency",
    "channel_bandwidth",
}


def tuning_from_dict(data: dict | None, source: str | None = None) -> NcclTuning:
    """Build :class:`NcclTuning` from a cluster file's ``nccl:`` mapping (unset fields keep
    their defaults).

    Raises:
        InputError: naming the field for unknown keys, bad units or values out of range.
    """
    t = NcclTuning()
    if not data:
        return t
    algorithms = tuned_nccl_algorithms()
    if not isinstance(data, dict):
        raise InputError("expected a mapping", source, "nccl")
    for key in data:
        _check_key(key, tuple(sorted(_KEYS)), source, "nccl")
    kw: dict = {}
    if "channels" in data:
        ch = data["channels"]
        if not isinstance(ch, int) or isinstance(ch, bool) or not 1 <= ch <= 64:
            raise InputError(f"expected an integer from 1 to 64, got {ch!r}", source, "nccl.channels")
        kw["channels"] = ch
    for key, valid in (("algorithms", algorithms), ("protocols", PROTOCOLS)):
        if key in data:
            vals = data[key]
            if not isinstance(vals, list) or not vals:
                raise InputError(f"expected a non-empty list of {', '.join(valid)}", source, f"nccl.{key}")
            for v in vals:
                _check_key(v, valid, source, f"nccl.{key}")
            kw[key] = tuple(vals)
    if "pxn" in data:
        if not isinstance(data["pxn"], bool):
            raise InputError(f"expected true or false, got {data['pxn']!r}", source, "nccl.pxn")
        kw["pxn"] = data["pxn"]
    base = {a: dict(d) for a, d in t.base_latency_ns.items()}
    for algo, protos in _mapping(data.get("base_latency") or {}, source, "nccl.base_latency").items():
        _check_key(algo, algorithms, source, "nccl.base_latency")
        for proto, val in _mapping(protos, source, f"nccl.base_latency.{algo}").items():
            _check_key(proto, PROTOCOLS, source, f"nccl.base_latency.{algo}")
            base[algo][proto] = parse_time_ns(val, source, f"nccl.base_latency.{algo}.{proto}")
    kw["base_latency_ns"] = base
    hop = {c: {a: dict(d) for a, d in ad.items()} for c, ad in t.hop_latency_ns.items()}
    for cls, algos in _mapping(data.get("hop_latency") or {}, source, "nccl.hop_latency").items():
        _check_key(cls, LINK_CLASSES, source, "nccl.hop_latency")
        for algo, protos in _mapping(algos, source, f"nccl.hop_latency.{cls}").items():
            _check_key(algo, algorithms, source, f"nccl.hop_latency.{cls}")
            for proto, val in _mapping(protos, source, f"nccl.hop_latency.{cls}.{algo}").items():
                _check_key(proto, PROTOCOLS, source, f"nccl.hop_latency.{cls}.{algo}")
                hop[cls][algo][proto] = parse_time_ns(val, source, f"nccl.hop_latency.{cls}.{algo}.{proto}")
    kw["hop_latency_ns"] = hop
    for key, valid in (("protocol_efficiency", PROTOCOLS), ("link_efficiency", TIERS)):
        eff = dict(getattr(t, key))
        for name, val in _mapping(data.get(key) or {}, source, f"nccl.{key}").items():
            _check_key(name, valid, source, f"nccl.{key}")
            if isinstance(val, bool) or not isinstance(val, (int, float)) or not 0 < val <= 1:
                raise InputError(f"expected a fraction in (0, 1], got {val!r}", source, f"nccl.{key}.{name}")
            eff[name] = float(val)
        kw[key] = eff
    caps = {}
    for algo, val in _mapping(data.get("channel_bandwidth") or {}, source, "nccl.channel_bandwidth").items():
        _check_key(algo, algorithms, source, "nccl.channel_bandwidth")
        caps[algo] = parse_bandwidth(val, source, f"nccl.channel_bandwidth.{algo}")
        if caps[algo] <= 0:
            raise InputError(f"expected a positive bandwidth, got {val!r}", source, f"nccl.channel_bandwidth.{algo}")
    kw["channel_bandwidth"] = caps
    return NcclTuning(**{**t.__dict__, **kw})


def tuning_to_dict(t: NcclTuning) -> dict:
    """The inverse of :func:`tuning_from_dict` (latencies written in us)."""
    return {
        "channels": t.channels,
        "algorithms": list(t.algorithms),
        "protocols": list(t.protocols),
        "pxn": t.pxn,
        "base_latency": {a: {p: f"{v / 1000:.4g} us" for p, v in d.items()} for a, d in t.base_latency_ns.items()},
        "hop_latency": {
            c: {a: {p: f"{v / 1000:.4g} us" for p, v in d.items()} for a, d in ad.items()}
            for c, ad in t.hop_latency_ns.items()
        },
        "protocol_efficiency": {k: round(v, 4) for k, v in t.protocol_efficiency.items()},
        "link_efficiency": {k: round(v, 4) for k, v in t.link_efficiency.items()},
        "channel_bandwidth": {a: f"{v:.4g} GB/s" for a, v in t.channel_bandwidth.items()},
    }


def _mapping(value: object, source: str | None, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping, got {value!r}", source, where)
    return value


def _check_key(key: object, valid: tuple[str, ...], source: str | None, where: str) -> None:
    if key not in valid:
        hint = unknown_key_error(str(key), valid, source)
        raise InputError(hint.message, source, f"{where}.{key}")
