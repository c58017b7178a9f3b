"""Fit a cluster's NCCL tuning to measured collective times (nccl-tests logs).

One tuning must serve every GPU count and size: the fit adjusts a handful of physical
parameters shared by all of them and never one per GPU count:

* link efficiency of NVLink and of the NIC tier (fraction of line rate achieved),
* protocol efficiency of LL and LL128,
* a scale on NCCL's base latencies per algorithm (ring, tree),
* a scale on NCCL's per-hop latencies per link class (NVLink, network),
* the per-channel rate cap of trees (NCCL's per-channel tree bandwidth limit),

plus two discrete choices tried exhaustively: the channel count and whether trees are allowed.
The objective is the mean absolute log error of predicted vs measured time over sizes
>= 1 MiB plus half of it over smaller sizes, so small-message latency shapes the fit too.
The channel options should not go below the NICs per server (NCCL gives every NIC a channel).

Prediction uses the analytical model (what the selector uses), made fast by noting that every
round's time is linear in the message size: ``round = size x max_l(load_l / cap_l) + latency``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...network.fabric import Fabric
from .algorithms import communicator
from .selector import build, candidates
from .timing import Timer, effective_capacity
from .tuning import NcclTuning

REF_BYTES = 1 << 30


@dataclass
class Case:
    """Measured times (us) at sizes (bytes) on a fabric of ``gpus`` GPUs."""

    gpus: int
    fabric: Fabric
    sizes: np.ndarray
    times_us: np.ndarray


@dataclass
class _StepCoef:
    repeat: int
    load_per_byte: np.ndarray  # per link, at 1 byte of collective size
    phys_ns: float  # longest route latency
    hops: dict
    max_flow_per_byte: float  # largest flow, at 1 byte of collective size


class Predictor:
    """Predicted times for a case under any tuning (same channels / pxn as given)."""

    def __init__(self, case: Case, channels: int, pxn: bool, algos: tuple[str, ...]) -> None:
        self.case = case
        base = NcclTuning(channels=channels, pxn=pxn, algorithms=algos)
        comm = communicator(case.fabric)
        timer = Timer(case.fabric, base)
        self.options: list[tuple[str, str, list[_StepCoef]]] = []
        for algo, proto in candidates(comm, "all_reduce", base):
            sched = build(comm, "all_reduce", REF_BYTES, algo, proto, base)
            coefs = []
            for st in sched.steps:
                rl = timer._round_links(st, per_flow=True)  # every flow's links, in flow order
                if rl is None or rl.links is None or rl.lengths is None:
                    continue
                weights = np.repeat(np.broadcast_to(st.nbytes, rl.lengths.shape), rl.lengths)
                load = np.bincount(rl.links, weights=weights, minlength=case.fabric.num_links)
                coefs.append(
                    _StepCoef(st.repeat, load / REF_BYTES, rl.longest, st.hops, float(np.max(st.nbytes)) / REF_BYTES)
                )
            self.options.append((algo, proto, coefs))

    def times_us(self, tuning: NcclTuning) -> tuple[np.ndarray, list[str]]:
        """Predicted time (us) at each size, and the chosen 'algo/proto' per size."""
        sizes = self.case.sizes.astype(np.float64)
        best = np.full(len(sizes), np.inf)
        choice = [""] * len(sizes)
        caps: dict[str, np.ndarray] = {}
        for algo, proto, coefs in self.options:
            if algo not in tuning.algorithms:
                continue
            cap = caps.get(proto)
            if cap is None:
                cap = caps[proto] = effective_capacity(self.case.fabric, tuning, proto)
            t = np.full(len(sizes), tuning.base_ns(algo, proto) if coefs else 0.0)
            fcap = tuning.channel_cap(algo)
            for c in coefs:
                hop = sum(n * tuning.hop_ns(cls, algo, proto) for cls, n in c.hops.items())
                per_byte = max(float((c.load_per_byte / cap).max()), c.max_flow_per_byte / fcap)
                t += c.repeat * (sizes * per_byte + c.phys_ns + hop)
            better = t < best
            best = np.where(better, t, best)
            for i in np.flatnonzero(better):
                choice[i] = f"{algo}/{proto}"
        return best / 1000.0, choice


PARAMS = ("eff_nvlink", "eff_nic", "eff_LL", "eff_LL128", "base_ring", "base_tree", "hop_nvlink", "hop_net", "cap_tree")


def apply(start: NcclTuning, x: dict[str, float]) -> NcclTuning:
    """``start`` with parameter vector ``x`` applied (efficiencies absolute, latencies as
    multipliers of ``start``'s)."""
    link = dict(start.link_efficiency)
    link["nvlink"] = min(1.0, x["eff_nvlink"])
    link["nic"] = min(1.0, x["eff_nic"])
    proto = dict(start.protocol_efficiency)
    proto["LL"] = min(1.0, x["eff_LL"])
    proto["LL128"] = min(1.0, x["eff_LL128"])
    base = {a: dict(d) for a, d in start.base_latency_ns.items()}
    for a, key in (("ring", "base_ring"), ("tree", "base_tree")):
        base[a] = {p: v * x[key] for p, v in start.base_latency_ns[a].items()}
    base["hierarchical"] = dict(base["ring"])
    hop = {c: {a: dict(d) for a, d in ad.items()} for c, ad in start.hop_latency_ns.items()}
    for cls, key in (("nvlink", "hop_nvlink"), ("net", "hop_net")):
        hop[cls] = {a: {p: v * x[key] for p, v in d.items()} for a, d in start.hop_latency_ns[cls].items()}
    caps = dict(start.channel_bandwidth)
    caps["tree"] = x["cap_tree"]
    return replace(
        start,
        link_efficiency=link,
        protocol_efficiency=proto,
        base_latency_ns=base,
        hop_latency_ns=hop,
        channel_bandwidth=caps,
    )


BIG = 1 << 20  #: sizes from here on are bandwidth-bound and carry the accuracy target


def objective(preds: list[Predictor], tuning: NcclTuning) -> float:
    """Mean absolute log error of time over sizes >= 1 MiB, plus half that over smaller ones
    (the shape below 1 MiB matters, the accuracy target is set above)."""
    big, small = [], []
    for p in preds:
        t, _ = p.times_us(tuning)
        e = np.abs(np.log(t / p.case.times_us))
        m = p.case.sizes >= BIG
        big.append(e[m])
        small.append(e[~m])
    b, s = np.concatenate(big), np.concatenate(small)
    return float((b.mean() if len(b) else 0.0) + 0.5 * (s.mean() if len(s) else 0.0))


def fit(
    cases: list[Case],
    start: NcclTuning,
    channel_options: tuple[int, ...] = (8, 16),
    algo_options: tuple[tuple[str, ...], ...] = (("ring",), ("ring", "tree")),
    tree_cap_starts: tuple[float, ...] = (8.0, 16.0, 64.0),
    log: Callable[[str], None] | None = None,
) -> tuple[NcclTuning, float]:
    """Coordinate search over :data:`PARAMS` from several starts (channel count, whether
    trees are allowed, the tree channel cap); returns the best tuning and its objective."""
    best_t, best_f = start, math.inf
    for ch in channel_options:
        for algos in algo_options:
            base = replace(start, channels=ch, algorithms=algos)
            preds = [Predictor(c, ch, base.pxn, algos) for c in cases]
            for cap0 in tree_cap_starts if "tree" in algos else (64.0,):
                x, f = _descend(preds, base, cap0)
                if log is not None:
                    log(f"channels {ch}, algorithms {'+'.join(algos)}, tree cap from {cap0:g} GB/s: objective {f:.4f}")
                if f < best_f:
                    best_t, best_f = apply(base, x), f
    return best_t, best_f


def _descend(preds: list[Predictor], base: NcclTuning, cap0: float) -> tuple[dict[str, float], float]:
    """Multiplicative coordinate descent from NCCL's defaults."""
    x = {
        "eff_nvlink": base.link_efficiency["nvlink"],
        "eff_nic": base.link_efficiency["nic"],
        "eff_LL": base.protocol_efficiency["LL"],
        "eff_LL128": base.protocol_efficiency["LL128"],
        "base_ring": 1.0,
        "base_tree": 1.0,
        "hop_nvlink": 1.0,
        "hop_net": 1.0,
        "cap_tree": cap0,
    }
    f = objective(preds, apply(base, x))
    for step in (1.5, 1.2, 1.05, 1.01):
        improved = True
        while improved:
            improved = False
            for k in PARAMS:
                for mult in (step, 1 / step):
                    y = dict(x)
                    y[k] = x[k] * mult
                    if k.startswith("eff") and y[k] > 1.0:
                        continue
                    g = objective(preds, apply(base, y))
                    if g < f - 1e-9:
                        x, f, improved = y, g, True
    return x, f
