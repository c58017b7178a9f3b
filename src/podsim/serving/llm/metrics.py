"""What an LLM serving run measured and its JSON document (its text summary:
:func:`podsim.report.serving_llm.format_serve_llm_run`).

Per request (times in s): ``ttft_s`` = its first output token's time - its arrival; ``tpot_s``
= the mean time between its later tokens, (last token - first token) / (output tokens - 1)
(null for a one-token output); ``e2e_s`` = its last token - its arrival.

JSON fields (``podsim serve-llm --json``):

* ``ttft_{mean,p50,p90,p99}_s``, ``tpot_{mean,p50,p90,p99}_s``, ``e2e_{mean,p50,p90,p99}_s``
  (s; percentiles interpolate linearly between the nearest ranks, as numpy's default);
* ``tokens_per_s`` (output tokens / the time from the first arrival to the last finish) and
  ``requests_per_s`` (requests / that time);
* ``mfu``: model FLOPs utilization, every request's model FLOPs (served once: no recompute,
  no rejected drafts; :mod:`.flops`) over the span x the GPUs x their dense peak (null when the
  run's model and GPU are not known, as with a test's step timer);
* ``slo_attainment``: the share of requests meeting both ``slo_ttft_s`` and ``slo_tpot_s`` (only
  the SLOs given count; null when none is given; a one-token output meets any TPOT SLO);
* ``preemptions``: preemptions over the run, and ``swaps``: those by swap (the rest by recompute);
* ``requests``: ``[{id, arrival_s, prompt_tokens, output_tokens, replica, ttft_s, tpot_s, e2e_s,
  preemptions}]`` in request order (``replica``: the one that produced its last token);
* ``kv_use``: ``[{replica, role, blocks, samples: [[t_s, used], ...]}]``: the share of each
  replica's KV blocks in use, sampled at each step start where it changed (in a run of
  identical decode steps simulated in one go, where use only grows, at its last step; at most
  :data:`KV_POINTS` points a replica: beyond, the largest in each of that many equal intervals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..stats import percentile
from .replica import Replica, StepRecord
from .sequence import Seq

#: the most KV-use samples a replica has in the JSON document
KV_POINTS = 2000


@dataclass
class ReplicaStats:
    """One replica's totals: role, KV blocks, steps, busy time (ns, stage 0), preemptions, its KV
    samples ((ns, blocks used)) and step records (when kept for a trace)."""

    index: int
    role: str
    blocks: int
    steps: int
    busy_ns: int
    preemptions: int
    kv_samples: list[tuple[int, int]]
    records: list[StepRecord] = field(default_factory=list)
    pp: int = 1
    swaps: int = 0


@dataclass
class LLMServeResult:
    """A serving run: per-request times (ns) and per-replica statistics.

    Attributes:
        ids, arrival_ns, prompt_tokens, output_tokens, replica, first_ns, finish_ns, preemptions:
            one entry per request, in request order.
        replicas: per-replica statistics.
        slo_ttft_s, slo_tpot_s: the SLOs (s) attainment counts, or None.
        info: what ran (scheduler, router, replicas, ...), for the summary.
        mfu: model FLOPs utilization over the run (:func:`~.flops.serving_mfu`), when the
            caller knows the model and GPU (None otherwise).
    """

    ids: list[int]
    arrival_ns: list[int]
    prompt_tokens: list[int]
    output_tokens: list[int]
    replica: list[int]
    first_ns: list[int]
    finish_ns: list[int]
    preemptions: list[int]
    replicas: list[ReplicaStats]
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    info: dict[str, object] = field(default_factory=dict)
    mfu: float | None = None

    @classmethod
    def collect(
        cls,
        seqs: list[Seq],
        replicas: list[Replica],
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        info: dict[str, object],
    ) -> "LLMServeResult":
        """Gather a finished run's requests and replicas."""
        stats = [
            ReplicaStats(
                r.index,
                r.role,
                r.kv.num_blocks,
                r.steps,
                r.busy_ns,
                r.preemptions,
                r.kv_samples,
                r.records,
                r.pp,
                r.swaps,
            )
            for r in replicas
        ]
        return cls(
            [s.req.id for s in seqs],
            [s.req.arrival_ns for s in seqs],
            [s.prompt for s in seqs],
            [s.output for s in seqs],
            [s.replica for s in seqs],
            [s.first_ns for s in seqs],
            [s.finish_ns for s in seqs],
            [s.preemptions for s in seqs],
            stats,
            slo_ttft_s,
            slo_tpot_s,
            info,
        )

    # -- per request (s) -------------------------------------------------------------------------

    def ttft_s(self) -> list[float]:
        return [(f - a) / 1e9 for f, a in zip(self.first_ns, self.arrival_ns)]

    def tpot_s(self) -> list[float | None]:
        return [
            (e - f) / 1e9 / (o - 1) if o > 1 else None
            for f, e, o in zip(self.first_ns, self.finish_ns, self.output_tokens)
        ]

    def e2e_s(self) -> list[float]:
        return [(e - a) / 1e9 for e, a in zip(self.finish_ns, self.arrival_ns)]

    @property
    def num_requests(self) -> int:
        return len(self.ids)

    @property
    def span_s(self) -> float:
        """From the first arrival to the last finish (s)."""
        if not self.ids:
            return 0.0
        return (max(self.finish_ns) - min(self.arrival_ns)) / 1e9

    @property
    def total_preemptions(self) -> int:
        return sum(r.preemptions for r in self.replicas)

    def slo_met(self) -> list[bool] | None:
        """Per request, whether it met the SLOs given (None when none is)."""
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            return None
        out = []
        for ttft, tpot in zip(self.ttft_s(), self.tpot_s()):
            ok = self.slo_ttft_s is None or ttft <= self.slo_ttft_s
            ok = ok and (self.slo_tpot_s is None or tpot is None or tpot <= self.slo_tpot_s)
            out.append(ok)
        return out

    def slo_attainment(self) -> float | None:
        met = self.slo_met()
        return None if met is None or not met else sum(met) / len(met)

    # -- the document ----------------------------------------------------------------------------

    def stats(self) -> dict[str, float | None]:
        """The latency statistics and rates (the JSON document's scalar fields)."""
        out: dict[str, float | None] = {}
        for name, vals in (
            ("ttft", self.ttft_s()),
            ("tpot", [x for x in self.tpot_s() if x is not None]),
            ("e2e", self.e2e_s()),
        ):
            s = sorted(vals)
            out[f"{name}_mean_s"] = sum(s) / len(s) if s else None
            for q in (50, 90, 99):
                out[f"{name}_p{q}_s"] = percentile(s, q) if s else None
        span = self.span_s
        out["tokens_per_s"] = sum(self.output_tokens) / span if span > 0 else None
        out["requests_per_s"] = self.num_requests / span if span > 0 else None
        out["slo_attainment"] = self.slo_attainment()
        out["mfu"] = self.mfu
        return out

    def kv_use(self, max_points: int = KV_POINTS) -> list[dict[str, object]]:
        """Each replica's KV use over time (the ``kv_use`` field)."""
        return [
            {
                "replica": r.index,
                "role": r.role,
                "blocks": r.blocks,
                "samples": [[t / 1e9, round(u / r.blocks, 6)] for t, u in thin(r.kv_samples, max_points)],
            }
            for r in self.replicas
        ]

    def to_dict(self) -> dict[str, object]:
        """The JSON document (fields in the module docstring)."""
        rows = []
        for i, ttft, tpot, e2e in zip(range(self.num_requests), self.ttft_s(), self.tpot_s(), self.e2e_s()):
            rows.append(
                {
                    "id": self.ids[i],
                    "arrival_s": self.arrival_ns[i] / 1e9,
                    "prompt_tokens": self.prompt_tokens[i],
                    "output_tokens": self.output_tokens[i],
                    "replica": self.replica[i],
                    "ttft_s": ttft,
                    "tpot_s": tpot,
                    "e2e_s": e2e,
                    "preemptions": self.preemptions[i],
                }
            )
        return {
            **self.stats(),
            "preemptions": self.total_preemptions,
            "swaps": sum(r.swaps for r in self.replicas),
            "requests": rows,
            "kv_use": self.kv_use(),
        }


def thin(samples: list[tuple[int, int]], max_points: int) -> list[tuple[int, int]]:
    """At most ``max_points`` of a step series: all of them when few enough, else the first and
    the largest in each of ``max_points - 1`` equal time intervals (peaks are kept)."""
    if len(samples) <= max_points:
        return list(samples)
    t0, t1 = samples[0][0], samples[-1][0]
    width = (t1 - t0) / (max_points - 1) or 1
    best: dict[int, tuple[int, int]] = {}
    for t, u in samples[1:]:
        k = min(int((t - t0) / width), max_points - 2)
        if k not in best or u > best[k][1]:
            best[k] = (t, u)
    return [samples[0]] + [best[k] for k in sorted(best)]
