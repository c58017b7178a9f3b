"""Monte Carlo of a whole training run under failures: the distribution of its time to train.

The same model as :mod:`.goodput`, simulated: ``work_s`` seconds of training are cut into
segments of ``interval_s`` (the last one shorter), each followed by a checkpoint blocking
``checkpoint_s``; failures arrive at rate ``lam`` at any time; a failure loses the segment's
progress and starts a restart of ``restart_s``, which a failure may interrupt too.

Vectorised over samples and failures, never looping over either: with exponential arrivals a
segment of length ``L`` is tried until one try sees no failure, so the failed tries of ``n``
equal segments are negative-binomial(``n``, ``exp(-lam L)``); each failed try lasted an
exponential time truncated to ``[0, L)``; the restarts likewise (negative-binomial failures
before the restarts succeed, truncated to ``[0, R)``).  A sample's time is drawn from these
counts and sums, whatever the number of segments (a 100,000-GPU run of months is a few
thousand failures a sample); sums of more than :data:`EXACT_DRAWS` draws use their normal
limit (the sum of that many bounded draws).  Each failure's kind is drawn in proportion to the
kinds' rates (multinomial).  Same seed, same samples.

Times are float seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

#: a sample's truncated-exponential draws beyond which its sum is drawn from the normal limit
EXACT_DRAWS = 4096
#: the most expected failures a run may have before podsim calls it hopeless
MAX_FAILURES = 1e9


@dataclass(frozen=True)
class RunSamples:
    """Samples of one run.

    Attributes:
        wall_s: wall-clock time to train, one per sample (s).
        failures: failures per sample and kind (samples x kinds).
        kinds: the kinds' names, in the columns' order.
    """

    wall_s: np.ndarray
    failures: np.ndarray
    kinds: tuple[str, ...]

    def percentiles_h(self) -> dict[str, float]:
        """p10, p50, p90 of the time to train, in hours."""
        p = np.percentile(self.wall_s, [10, 50, 90]) / 3600.0
        return {"p10": float(p[0]), "p50": float(p[1]), "p90": float(p[2])}


def _trunc_exp_moments(lam: float, a: float) -> tuple[float, float]:
    """Mean and variance of an exponential(``lam``) conditioned on being below ``a``."""
    x = lam * a
    if x < 1e-6:  # nearly uniform on [0, a)
        return a / 2, a * a / 12
    e = math.exp(-x)
    m = 1 / lam - a * e / (1 - e)
    second = (2 / lam**2 - e * (a * a + 2 * a / lam + 2 / lam**2)) / (1 - e)
    return m, max(second - m * m, 0.0)


def _trunc_exp_sums(rng: np.random.Generator, counts: np.ndarray, lam: float, a: float) -> np.ndarray:
    """Per sample, the sum of ``counts[i]`` exponential(``lam``) draws truncated to ``[0, a)``."""
    out = np.zeros(len(counts))
    if a <= 0 or not counts.any():
        return out
    small = counts <= EXACT_DRAWS
    n = counts[small]
    total = int(n.sum())
    if total:
        u = rng.random(total)
        top = -math.expm1(-lam * a)  # P(draw < a)
        draws = -np.log1p(-u * top) / lam
        owner = np.repeat(np.arange(len(n)), n)
        out[small] = np.bincount(owner, weights=draws, minlength=len(n))
    big = ~small
    if big.any():
        m, v = _trunc_exp_moments(lam, a)
        k = counts[big].astype(float)
        out[big] = np.maximum(k * m + np.sqrt(k * v) * rng.standard_normal(int(big.sum())), 0.0)
    return out


def _neg_binomial(rng: np.random.Generator, n: np.ndarray | int, p: float, size: int) -> np.ndarray:
    """Failures before ``n`` successes of probability ``p`` (0 where ``n`` is 0)."""
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.int64), (size,))
    out = np.zeros(size, dtype=np.int64)
    pos = n_arr > 0
    if pos.any() and p < 1.0:
        out[pos] = rng.negative_binomial(n_arr[pos], p)
    return out


def simulate_run(
    work_s: float,
    interval_s: float,
    checkpoint_s: float,
    restart_s: float,
    rates_per_s: dict[str, float],
    samples: int = 1000,
    seed: int = 0,
) -> RunSamples:
    """``samples`` runs of ``work_s`` seconds of training (see the module docstring).

    Raises:
        InputError: the run would see more than :data:`MAX_FAILURES` failures on average (it
            would practically never finish: its segments are far longer than the time between
            failures)."""
    kinds = tuple(rates_per_s)
    rates = np.array([rates_per_s[k] for k in kinds], dtype=float)
    lam = float(rates.sum())
    rng = np.random.default_rng(seed)
    full = int(work_s // interval_s) if interval_s > 0 else 0
    last = work_s - full * interval_s
    if last <= 1e-9 * max(work_s, 1.0):
        last = 0.0
    seg = interval_s + checkpoint_s
    seg_last = last + checkpoint_s if last > 0 else 0.0
    base = full * seg + seg_last
    if lam <= 0:
        return RunSamples(np.full(samples, base), np.zeros((samples, len(kinds)), dtype=np.int64), kinds)
    expected = full * math.expm1(min(lam * seg, 700)) + math.expm1(min(lam * seg_last, 700))
    if expected > MAX_FAILURES:
        raise InputError(
            f"the run would practically never finish: about {expected:.3g} failures, with a failure every "
            f"{1 / lam:.3g} s on average against segments of {seg:.3g} s of training and checkpoint; checkpoint "
            "more often (--checkpoint-interval) or use fewer GPUs",
            where="--checkpoint-interval",
        )
    k_full = _neg_binomial(rng, full, math.exp(-lam * seg), samples)
    k_last = _neg_binomial(rng, 1 if last > 0 else 0, math.exp(-lam * seg_last), samples)
    k_work = k_full + k_last
    lost = _trunc_exp_sums(rng, k_full, lam, seg) + _trunc_exp_sums(rng, k_last, lam, seg_last)
    if restart_s > 0:
        k_restart = np.zeros(samples, dtype=np.int64)
        pos = k_work > 0
        if pos.any():
            k_restart[pos] = rng.negative_binomial(k_work[pos], math.exp(-lam * restart_s))
        restarting = k_work * restart_s + _trunc_exp_sums(rng, k_restart, lam, restart_s)
    else:
        k_restart = np.zeros(samples, dtype=np.int64)
        restarting = np.zeros(samples)
    wall = base + lost + restarting
    k = k_work + k_restart
    failures = rng.multinomial(k, rates / lam) if len(kinds) > 1 else k[:, None]
    return RunSamples(wall, failures, kinds)
