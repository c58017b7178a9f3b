"""``podsim validate``: predict every published measurement podsim can run and compare.

The rows ship with podsim (:mod:`podsim.validation.rows`): the ``fitted`` set (what the
parameters were fitted to) and the ``reported`` set (never fitted to).  The report gives each
row's error, then mean and max |error| per set, per GPU type within a set, and per source.

Rows run in worker processes (``jobs``).  The workers ignore SIGINT: a Ctrl-C (which a
terminal sends to the whole process group) interrupts the parent only, which cancels the
queued rows and terminates the workers at once, then lets the KeyboardInterrupt go on.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..report.validate import format_checks
from .predict import handler
from .rows import read_rows, shipped_rows


@dataclass
class Check:
    """One compared row."""

    row_id: str
    config: str
    metric: str
    unit: str
    measured: float
    predicted: float
    set: str = "fitted"
    gpu: str = ""
    source: str = ""
    #: why the row is shown but not averaged (a software podsim does not model), or ""
    outside: str = ""
    #: the software stack the row ran with (its ``stack`` column), or ""
    stack: str = ""

    @property
    def error(self) -> float:
        """Relative error (predicted / measured - 1)."""
        return self.predicted / self.measured - 1 if self.measured else 0.0

    def to_dict(self) -> dict:
        return {
            "row_id": self.row_id,
            "set": self.set,
            "gpu": self.gpu,
            "config": self.config,
            "metric": self.metric,
            "unit": self.unit,
            "measured": self.measured,
            "predicted": round(self.predicted, 6),
            "error_pct": round(100 * self.error, 3),
            "source": self.source,
            "outside_the_model": self.outside or None,
            "stack": self.stack or None,
        }


def _config(r: dict) -> str:
    if r.get("kind") == "serving_step":
        return r.get("label", "")
    if r.get("kind") == "training_step":
        return (
            f"{r.get('model')} {r.get('layers')}L s{r.get('seq_len')} b{r.get('micro_batch')} {r.get('mode')} "
            f"{r.get('attention')} {r.get('optimizer')}" + (" ckpt" if r.get("checkpoint") == "full" else "")
        )
    parts = [r.get("model") or r.get("gpu") or ""]
    if r.get("gpus"):
        parts.append(f"{r['gpus']} x {r.get('gpu') or 'GPU'}")
    if r.get("tp"):
        lay = f"tp{r['tp']} pp{r.get('pp') or 1}"
        for k in ("cp", "ep", "vpp"):
            if r.get(k) and r[k] != "1":
                lay += f" {k}{r[k]}"
        parts.append(lay)
    if r.get("days"):  # a whole run under failures
        parts.append(f"{r['days']} days")
    if r.get("precision") and r["metric"] != "hardware_tflops_per_gpu":
        parts.append(r["precision"])
    if r["row_id"].startswith("korthikanti_fig7"):
        parts.append(r.get("recompute", ""))
    if r.get("batch"):  # an inference row
        parts.append(f"b{r['batch']} {r.get('prompt_tokens')}+{r.get('output_tokens')} tok")
    return ", ".join(p for p in parts if p)


def _predict(r: dict, backend: str) -> tuple[float, str | None]:
    """One row's prediction, or the reason it cannot run (a module-level function: it runs in
    worker processes)."""
    h = handler(r)
    assert h is not None
    try:
        return (h(r, backend) if h.__name__ == "throughput" else h(r)), None
    except InputError as e:
        return 0.0, e.message


def _ignore_sigint() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: its queued rows cancelled, its worker processes terminated (the
    executor's own shutdown would wait for every queued row)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.terminate()
    for w in workers:
        w.join(5)


def _predict_all(
    rows: list[dict],
    backend: str,
    jobs: int,
    progress: Callable[[str], None] | None,
    count: Callable[[int, int], None] | None = None,
) -> list[tuple[float, str | None]]:
    """Every row's prediction, in order; ``jobs`` worker processes (1: in this process).  The
    rows are independent simulations, so the results do not depend on ``jobs``.
    ``count(done, total)`` is told each row done (and ``0`` first).

    Raises:
        KeyboardInterrupt: on Ctrl-C, after the workers were stopped."""
    total = len(rows)
    if count is not None:
        count(0, total)
    if jobs <= 1 or total < 2:
        out = []
        for r in rows:
            if progress is not None:
                progress(r["row_id"])
            out.append(_predict(r, backend))
            if count is not None:
                count(len(out), total)
        return out
    results: list[tuple[float, str | None] | None] = [None] * total
    pool = ProcessPoolExecutor(max_workers=min(jobs, total), initializer=_ignore_sigint)
    try:
        # the largest simulations first (by GPU count), so that none is left alone at the end
        order = sorted(range(total), key=lambda i: -int(float(rows[i].get("gpus") or 0)))
        futures = {pool.submit(_predict, rows[i], backend): i for i in order}
        for done, f in enumerate(as_completed(futures), 1):
            i = futures[f]
            results[i] = f.result()
            if progress is not None:
                progress(rows[i]["row_id"])
            if count is not None:
                count(done, total)
    except BaseException:  # Ctrl-C, or a row that failed: no waiting for the queued rows
        _stop(pool)
        raise
    pool.shutdown()
    return [x for x in results if x is not None]


def default_jobs() -> int:
    """Worker processes ``podsim validate`` uses by default: the CPUs, at most 8."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def run_validation(
    rows: str | Path | list[dict[str, str]] | None = None,
    only: str | None = None,
    progress: Callable[[str], None] | None = None,
    sets: tuple[str, ...] = ("fitted", "reported"),
    backend: str = "analytical",
    jobs: int = 1,
    count: Callable[[int, int], None] | None = None,
) -> tuple[list[Check], int]:
    """Predict every row podsim can run: the shipped ``sets``, or the rows of the CSV ``rows``
    (set ``user``; or those rows as :func:`read_rows` returned them, so a caller that read the
    file to check it need not read it again); ``only`` keeps row ids starting with it; ``jobs``
    worker processes.
    ``progress(text)`` gets each row's id, then a ``not runnable: ...`` line for
    each row that could not run; ``count(done, total)`` the rows done so far.
    Returns the checks and the number of rows skipped (no handler, or not runnable)."""
    if isinstance(rows, list):
        table = rows
    else:
        table = read_rows(rows, "user") if rows is not None else shipped_rows(sets)
    checks, skipped = [], 0
    failures: list[str] = []
    todo = []
    for r in table:
        if only and not r["row_id"].startswith(only):
            continue
        if handler(r) is None:
            skipped += 1
            continue
        todo.append(r)
    for r, (predicted, err) in zip(todo, _predict_all(todo, backend, jobs, progress, count)):
        if err is not None:  # a row podsim cannot run as transcribed: skipped, and said
            skipped += 1
            failures.append(f"{r['row_id']}: {err}")
            continue
        notes = r.get("notes", "")
        outside = (
            notes.split(";")[0].removeprefix("outside the model:").strip()
            if notes.startswith("outside the model:")
            else ""
        )
        checks.append(
            Check(
                r["row_id"],
                _config(r),
                r["metric"],
                r.get("unit", ""),
                float(r["value"]),
                predicted,
                r["set"],
                r.get("gpu", ""),
                r.get("source", ""),
                outside,
                r.get("stack", ""),
            )
        )
    if failures and progress is not None:
        for f in failures:
            progress(f"not runnable: {f}")
    return checks, skipped


__all__ = ["Check", "default_jobs", "format_checks", "run_validation", "read_rows", "shipped_rows"]
