"""The closed-form estimate of a whole run: its failure rate, checkpoint interval, goodput, wall
time and interruptions (:mod:`.goodput`'s formulas on a :class:`RunModel`).

A :class:`RunModel` holds everything the estimate depends on (the reliability model, the job's
size, its checkpoint state, the storage, the restart times and the interval asked for), so a
what-if (:mod:`.whatif`) is the same model with one field replaced.  Times are float seconds,
bandwidths bytes per second, sizes int bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import InputError
from .checkpoint import CheckpointCost, CheckpointState, checkpoint_cost
from .goodput import (
    daly_interval_s,
    first_order_goodput,
    goodput,
    optimal_interval_s,
    segment_time_s,
    young_interval_s,
)
from .rates import Reliability
from .restart import RestartTimes, mean_restart_s, restart_by_kind


@dataclass(frozen=True)
class RunModel:
    """The inputs of a goodput estimate.

    Attributes:
        reliability: the failure kinds and rates.
        gpus: GPUs in the job.
        gpus_per_node: GPUs a node holds (counts the ``node`` components).
        state: the checkpoint's bytes.
        mode: ``sync``, ``async`` or ``memory`` (:mod:`.checkpoint`).
        write_bytes_per_s: the storage's aggregate write bandwidth.
        read_bytes_per_s: its aggregate read bandwidth.
        snapshot_bytes_per_s: one GPU's device-to-host copy (async snapshots).
        nic_bytes_per_s: one GPU's NIC (in-memory checkpoints).
        times: detection, rescheduling and warm-up of a restart.
        interval_s: training time between checkpoints; None: the optimum.
        step_s: one training step (intervals are whole steps).
    """

    reliability: Reliability
    gpus: int
    gpus_per_node: int
    state: CheckpointState
    mode: str
    write_bytes_per_s: float
    read_bytes_per_s: float
    snapshot_bytes_per_s: float
    nic_bytes_per_s: float
    times: RestartTimes
    interval_s: float | None
    step_s: float

    def rates_per_s(self) -> dict[str, float]:
        """The job's rate of interruptions by kind, per second."""
        return self.reliability.job_rates_per_s(self.gpus, self.gpus_per_node)

    def checkpoint(self) -> CheckpointCost:
        return checkpoint_cost(
            self.state,
            self.mode,
            self.write_bytes_per_s,
            self.read_bytes_per_s,
            self.snapshot_bytes_per_s,
            self.nic_bytes_per_s,
        )


@dataclass
class Estimate:
    """The closed-form expectation of a run (times in s).

    Attributes:
        rate_per_s: the job's failure rate (all kinds).
        rates_per_s: by kind.
        checkpoint: the checkpoint's costs.
        restart_s: the mean restart cost per failure.
        restart_by_kind_s: each kind's.
        interval_s: the interval used (given, or the optimum in whole steps).
        optimal_interval_s: the optimum of the exact model, in whole steps (None: no failures).
        young_interval_s: Young's, daly_interval_s: Daly's (None without failures).
        goodput: at ``interval_s``; goodput_first_order: its first-order form (None where <= 0).
        work_s: training time the run needs without failures.
        wall_s: expected wall time.
        interruptions: expected failures; interruptions_by_kind: by kind.
        notes: what the reader should know (an interval held up by the async write, ...).
    """

    rate_per_s: float
    rates_per_s: dict[str, float]
    checkpoint: CheckpointCost
    restart_s: float
    restart_by_kind_s: dict[str, float]
    interval_s: float
    optimal_interval_s: float | None
    young_interval_s: float | None
    daly_interval_s: float | None
    goodput: float
    goodput_first_order: float | None
    work_s: float
    wall_s: float
    interruptions: float
    interruptions_by_kind: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def mtbf_s(self) -> float | None:
        """The job's mean time between failures (None: no failures)."""
        return 1 / self.rate_per_s if self.rate_per_s > 0 else None


#: lam x (restart + checkpoint + step) beyond which a run makes no progress (exp(30) tries a step)
HOPELESS = 30.0


def _whole_steps(tau: float, step_s: float) -> float:
    """``tau`` rounded to a whole number of steps, at least one."""
    if step_s <= 0:
        return tau
    return max(1, round(tau / step_s)) * step_s


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def estimate(model: RunModel, work_s: float | None = None, days: float | None = None) -> Estimate:
    """The run's expectation: ``work_s`` seconds of failure-free training (a number of tokens),
    or ``days`` of wall clock (the work is then what those days train, on average).

    Raises:
        InputError: neither or both of ``work_s`` and ``days``; an interval given shorter than
            what one checkpoint blocks, or (async) than its background write -- the run would
            checkpoint more than it trains, which podsim says instead of printing a goodput."""
    if (work_s is None) == (days is None):
        raise InputError("give the run's length: --train-tokens or --days (one of them)", where="--train-tokens")
    rates = model.rates_per_s()
    lam = sum(rates.values())
    ckpt = model.checkpoint()
    by_kind = restart_by_kind(model.times, ckpt, model.reliability)
    restart = mean_restart_s(by_kind, rates)
    if lam * (restart + ckpt.blocking_s + model.step_s) > HOPELESS:
        raise InputError(
            f"the job would fail every {1 / lam:.3g} s on average, far less than a restart and a step "
            f"({restart + model.step_s:.3g} s): it would never make progress; check the failure rates",
            model.reliability.source,
            "--reliability",
        )
    horizon = work_s if work_s is not None else days * 86400.0  # type: ignore[operator]
    notes: list[str] = []
    c = ckpt.blocking_s
    opt = optimal_interval_s(lam, c)
    opt_steps = _whole_steps(min(opt, horizon), model.step_s) if math.isfinite(opt) else None
    if model.interval_s is not None:
        tau = model.interval_s
        if c > tau:
            raise InputError(
                f"one checkpoint blocks training {c:.4g} s, longer than the interval of {tau:.4g} s: the run would "
                f"spend more time checkpointing than training; give a longer --checkpoint-interval"
                + (f" (the optimum is {opt_steps:.4g} s)" if opt_steps else "")
                + ", faster --storage-bandwidth or --checkpoint-mode async",
                where="--checkpoint-interval",
            )
        if ckpt.lag_s > tau:
            raise InputError(
                f"an asynchronous checkpoint takes {ckpt.lag_s:.4g} s to write, longer than the interval of "
                f"{tau:.4g} s: "
                "the writes would queue up; give a longer --checkpoint-interval or faster --storage-bandwidth",
                where="--checkpoint-interval",
            )
    else:
        tau = opt_steps if opt_steps is not None else _whole_steps(horizon, model.step_s)
        if ckpt.lag_s > tau:
            notes.append(
                f"the optimum interval ({tau:.4g} s) is shorter than an asynchronous write ({ckpt.lag_s:.4g} s): "
                "checkpointing every write instead"
            )
            tau = _whole_steps(ckpt.lag_s, model.step_s)
            if tau < ckpt.lag_s:
                tau += model.step_s
        if c > tau:
            notes.append(
                f"checkpointing dominates: one checkpoint blocks {c:.4g} s, more than the best interval "
                f"({tau:.4g} s) -- faster storage or asynchronous checkpoints would help most"
            )
    g = goodput(lam, tau, c, restart)
    g1 = first_order_goodput(lam, tau, c, restart)
    if days is not None:
        wall = days * 86400.0
        work_s = wall * g
    else:
        full = int(work_s // tau)  # type: ignore[operator]
        last = work_s - full * tau  # type: ignore[operator]
        wall = full * segment_time_s(lam, tau, c, restart) + (
            segment_time_s(lam, last, c, restart) if last > 1e-9 * max(work_s, 1.0) else 0.0  # type: ignore[arg-type]
        )
    return Estimate(
        lam,
        rates,
        ckpt,
        restart,
        by_kind,
        tau,
        opt_steps,
        _finite(young_interval_s(lam, c)),
        _finite(daly_interval_s(lam, c)),
        g,
        g1 if g1 > 0 else None,
        float(work_s),  # type: ignore[arg-type]
        wall,
        lam * wall,
        {k: r * wall for k, r in rates.items()},
        notes,
    )
