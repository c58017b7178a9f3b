"""``podsim calibrate training`` and ``podsim calibrate inference`` as Python calls: fit a
stack's free parameters to the user's measured runs and write the fitted stack as a YAML file.

* training: runs are rows in the columns of ``podsim validate`` (docs/calibration.md) or of the
  published measurements table (``params_B, ..., dp, seq_par, zero_or_distopt, framework,
  metric, value``); each is predicted as ``podsim validate`` predicts it
  (:func:`podsim.validation.predict.throughput`) under the base stack with the free values being
  fitted;
* inference: runs are measured step times of a serving engine (:data:`INFERENCE_COLUMNS`: the
  model, GPU, TP, PP, batch, prompt and output tokens, ``prefill_ms`` and/or ``decode_ms``, the
  mean decode step); each is predicted by ``podsim infer``'s own call
  (:func:`podsim.api.infer.infer`) on the base serving stack with the free values being fitted;
* inference on a serving run: one row per request (:data:`SERVING_RUN_COLUMNS`: arrival, prompt
  and output tokens, the measured TTFT and end-to-end latency), replayed request by request by
  ``podsim serve-llm``'s own call (:func:`podsim.api.serve_llm.serve_llm`) with the engine
  settings the run was served with; the run's mean TTFT, mean end-to-end latency and median time
  per output token (:data:`RUN_METRICS`) are fitted.

Both go through one fitter (:func:`podsim.stacks.calibrate.fit`) and give a :class:`Calibration`.

Example::

    from podsim.api.calibrate import calibrate_training, read_training_runs
    cal = calibrate_training(read_training_runs("my_runs.csv"), base="torchtitan")
    print(cal.fit.fitted, cal.fit.after)
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import atomic_write_text, check_columns, read_text
from ..hardware.gpu import get_gpu
from ..jobs.infer import InferJob
from ..jobs.serve_llm import ServeLLMJob
from ..jobs.stacks import (
    CALIBRATE_PARAMS,
    STACK_PARAMS,
    CalibrateJob,
    ServingRunOptions,
    StackJob,
)
from ..llm.stack import Stack
from ..params import echo
from ..stacks.calibrate import MAX_RESIDUAL, fit
from ..stacks.schema import BY_NAME, fittable
from ..stacks.stack import SoftwareStack, load_stack, measured_serving_gpus, presets
from ..validation.predict import THROUGHPUT, throughput
from ..validation.rows import check_choices, read_rows, shipped_rows
from .calibrate_trace import TraceStep, calibrate_trace
from .calibration import Calibration, _table
from .infer import infer
from .serve_llm import serve_llm

__all__ = [
    "CALIBRATE_PARAMS",
    "INFERENCE_COLUMNS",
    "RUN_METRICS",
    "SERVING_RUN_COLUMNS",
    "STACK_PARAMS",
    "Calibration",
    "CalibrateJob",
    "StackJob",
    "TrainingCalibration",
    "calibrate",
    "ServingRun",
    "calibrate_inference",
    "calibrate_serving_run",
    "calibrate_training",
    "is_serving_run",
    "load_stack",
    "presets",
    "read_inference_runs",
    "read_serving_run",
    "read_training_runs",
    "replay_run",
    "replay_text",
    "run_targets",
    "serving_run_job",
    "write_stack",
]

#: ``ROWS.csv`` as ``shipped:PREFIX``: podsim's own published rows whose id starts with PREFIX
#: (several prefixes: ``shipped:A,B``)
SHIPPED = "shipped:"
#: the published-measurements table's columns podsim reads besides its own
PUBLISHED = ("seq_par", "zero_or_distopt", "dp")
#: the training parameters whose Megatron-Core value is the GPU's own (``llm/stack.yaml``), not 1
ROOT_VALUED = ("host_ns", "fp8_rowwise_overhead")
_NEUTRAL = {
    "gemm_efficiency": 1.0,
    "attention_efficiency": 1.0,
    "elementwise_traffic": 1.0,
    "fp8_overhead": 1.0,
    "engine_gemm_efficiency": 1.0,
    "host_overhead_ms": 0.0,
}
#: the columns of a measured serving run (``podsim calibrate inference``); ``prefill_ms`` (one
#: prefill of the batch, ms) or ``decode_ms`` (the mean decode step, ms) may be empty, not both
INFERENCE_COLUMNS = (
    "model",
    "gpu",
    "tp",
    "pp",
    "batch",
    "prompt_tokens",
    "output_tokens",
    "prefill_ms",
    "decode_ms",
)
#: optional columns of a serving run, passed to ``podsim infer`` as its flags
INFERENCE_OPTIONAL = ("row_id", "ep", "precision", "kv_cache_dtype", "cluster")
#: the step times a serving run measures (ms), and the shipped rows' metrics (s) read as each
STEP_METRICS = {"prefill_ms": ("prefill_s", "ttft_s"), "decode_ms": ("decode_step_s", "tpot_s")}
#: the columns of a measured serving run, one row per request (``podsim calibrate inference
#: RUN.csv`` with serve-llm's flags): arrival (s, ``podsim serve-llm --workload``'s column),
#: prompt and output tokens, time to first token and end-to-end latency (ms, from the arrival);
#: an optional ``has_error`` column (1: the request failed) leaves a request out of the targets
SERVING_RUN_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens", "ttft_ms", "e2e_ms")
#: what a serving run is fitted to (ms): the mean time to first token, the mean end-to-end
#: latency and the median time per output token (a request's (e2e - ttft) / (output tokens - 1))
RUN_METRICS = ("ttft_mean_ms", "e2e_mean_ms", "tpot_median_ms")


def _picked(row_id: str, prefixes: str) -> bool:
    """``row_id`` starts with one of the comma-separated ``prefixes`` (``shipped:A,B``)."""
    return any(row_id.startswith(p.strip()) for p in prefixes.split(",") if p.strip())


def _gpu_key(text: str, where: str, src: str) -> str:
    """A GPU key from a published ``gpu`` cell (``H100-80GB (h100_80gb; ...)``)."""
    head = text.split("(")[0].strip().lower().replace(" ", "-").replace("_", "-")
    for cand in (head, head.split("-")[0]):
        try:
            return get_gpu(cand).key
        except InputError:
            continue
    raise InputError(f"gpu {text!r} is not a GPU podsim knows (podsim llm --list)", src, where)


def _published_row(r: dict[str, str], src: str) -> dict[str, str]:
    """A row of the published-measurements table in podsim's columns."""
    where = f"row {r['row_id']}"
    out = dict(r)
    out["gpu"] = _gpu_key(r.get("gpu", ""), where, src)
    prec = (r.get("precision") or "bf16").lower()
    m = re.search(r"mxfp8|fp8|bf16|fp16|fp32", prec)
    out["precision"] = m.group(0) if m else "bf16"
    rec = (r.get("recompute") or "").lower().split()
    out["recompute"] = rec[0] if rec and rec[0] in ("none", "selective", "full") else ""
    shard = (r.get("zero_or_distopt") or "").lower()
    out["sharding"] = (
        "fsdp"
        if "fsdp" in shard or "zero-3" in shard or "zero3" in shard
        else "distopt"
        if "distributed optimizer" in shard
        else ""
    )
    sp = (r.get("seq_par") or "").lower()
    out["sequence_parallel"] = (
        "yes" if sp.startswith(("yes", "true")) else "no" if sp.startswith(("no", "false")) else ""
    )
    if not r.get("activation"):
        h, f = int(r.get("hidden") or 0), int(r.get("ffn_hidden") or 0)
        out["activation"] = "gelu" if f == 4 * h else "swiglu"
    return out


def read_training_runs(path: str | Path) -> list[dict[str, str]]:
    """The measured training runs of ``path`` (either column set, see the module docstring), or
    with ``shipped:PREFIX`` the shipped rows whose id starts with PREFIX.

    Raises:
        InputError: an unreadable file, a row that is not a training-throughput measurement.
    """
    src = str(path)
    if src.startswith(SHIPPED):
        prefix = src[len(SHIPPED) :]
        rows = [r for r in shipped_rows() if _picked(r["row_id"], prefix) and r.get("metric") in THROUGHPUT]
        if not rows:
            raise InputError(f"no shipped training row's id starts with {prefix!r} (podsim validate lists them)", src)
    else:
        rows = read_rows(path, "calibration")
    out = []
    for r in rows:
        if any(c in r for c in PUBLISHED):
            r = _published_row(r, src)
        check_choices(r, src)
        if r.get("metric") not in THROUGHPUT:
            raise InputError(
                f"metric must be one of {', '.join(THROUGHPUT)} (a training throughput), got {r.get('metric')!r}",
                src,
                f"row {r['row_id']}",
            )
        for col in ("hidden", "layers", "heads", "gpus", "global_batch"):
            if not r.get(col):
                raise InputError(f"{col} is needed to simulate the run", src, f"row {r['row_id']}")
        out.append(r)
    if not out:
        raise InputError("no runs to calibrate to", src)
    return out


#: the training calibration's former name
TrainingCalibration = Calibration


def base_values(base: SoftwareStack, gpu: str, names: list[str]) -> dict[str, float]:
    """Where each free training parameter starts: the base stack's value (on ``gpu``'s
    architecture), else Megatron-Core's on ``gpu`` (relative efficiencies 1, the GPU's host_ns)."""
    out = {}
    arch = get_gpu(gpu).architecture
    for k in names:
        v = base.value_for(k, arch)
        if isinstance(v, dict):
            raise InputError(
                f"stack {base.name!r} gives {k} as a table by sequence length ({_table(v)}) and podsim calibrate "
                f"fits one number: leave {k} out of --free, or set a number for it in a stack file of your own",
                where="--free",
            )
        if v is None:
            v = getattr(Stack.for_gpu(gpu), k) if k in ROOT_VALUED else _NEUTRAL[k]
        out[k] = float(v)
    return out


def free_bounds(stack: SoftwareStack, free: list[str] | None) -> dict[str, tuple[float, float]]:
    """What a fit of ``stack`` takes: its ``free`` parameters with their bounds, or ``free`` (the
    user's ``--free``), each with the stack's bounds for it, else the property's range (a lower
    bound of 0 raised to min(1, 1e-5 x the upper), so that a range over decades is searched in
    log space).

    Raises:
        InputError: a name that is not a physical parameter of the stack's kind; nothing to fit.
    """
    if not free:
        bounds = dict(stack.free)
    else:
        bounds = {}
        names = [p.name for p in fittable(stack.kind)]
        for k in free:
            prop = BY_NAME.get(k)
            if prop is None or prop.name not in names:
                raise InputError(f"{k!r} is not a physical {stack.kind} parameter ({', '.join(names)})", where="--free")
            bounds[k] = stack.free.get(k, (prop.lo if prop.lo > 0 else min(1.0, prop.hi * 1e-5), prop.hi))
    if not bounds:
        named = stack.name if stack.origin == "preset" else stack.origin
        raise InputError(f"stack {named!r} lists no free parameters: give --free NAME,NAME", where="--free")
    return bounds


def calibrate_training(
    runs: list[dict[str, str]],
    base: str,
    name: str | None = None,
    free: list[str] | None = None,
    source: str = "",
    max_residual: float = MAX_RESIDUAL,
) -> Calibration:
    """Fit ``base``'s free parameters (or ``free``, each with its bounds from the base's ``free``
    or the property's range) to ``runs``.

    Raises:
        InputError: an unknown base or parameter, a base with nothing free, a run podsim cannot simulate.
    """
    st = load_stack(base, "training")
    bounds = free_bounds(st, free)
    measured = [float(r["value"]) for r in runs]
    start = base_values(st, runs[0].get("gpu") or "h100-80gb", list(bounds))

    def predict(values: dict[str, float]) -> list[float]:
        trial = st.with_values(values)
        return [throughput(r, software=trial) for r in runs]

    result = fit(predict, measured, bounds, start, max_residual)
    archs = sorted({get_gpu(r.get("gpu") or "h100-80gb").architecture for r in runs})
    return Calibration(
        st, name or f"{st.name}-calibrated", runs, measured, result, source, "training", architectures=archs
    )


# -- inference -------------------------------------------------------------------------------


def _shipped_inference_runs(prefix: str, src: str) -> list[dict[str, str]]:
    """podsim's shipped inference step times (``podsim validate --only infer_``) whose id starts
    with ``prefix``, as serving runs: a prefill or TTFT row gives ``prefill_ms``, a decode-step
    or TPOT row ``decode_ms``."""
    metric_of = {m: col for col, ms in STEP_METRICS.items() for m in ms}
    out = []
    for r in shipped_rows():
        col = metric_of.get(r.get("metric", ""))
        if col is None or not _picked(r["row_id"], prefix) or not r.get("batch"):
            continue
        run = {k: r.get(k, "") for k in ("row_id", *INFERENCE_COLUMNS, *INFERENCE_OPTIONAL[1:])}
        run.update(prefill_ms="", decode_ms="")
        run[col] = f"{1e3 * float(r['value']):.6g}"
        out.append(run)
    if not out:
        raise InputError(
            f"no shipped prefill or decode-step row's id starts with {prefix!r} "
            "(podsim validate --only infer_ lists them)",
            src,
        )
    return out


def _positive(text: str, what: str, src: str, where: str, whole: bool) -> None:
    """Check a cell: a whole number >= 1 (``whole``) or a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0 and (not whole or (v == int(v) and v >= 1))):
        kind = "a whole number >= 1" if whole else "a number > 0"
        raise InputError(f"{what} must be {kind}, got {text!r}", src, where)


def read_inference_runs(path: str | Path) -> list[dict[str, str]]:
    """The measured serving runs of ``path`` (:data:`INFERENCE_COLUMNS`, optionally
    :data:`INFERENCE_OPTIONAL`; ``#`` lines are comments), or with ``shipped:PREFIX`` podsim's
    shipped inference step times whose id starts with PREFIX.

    Raises:
        InputError: an unreadable file, a missing column, a cell that is not a count or a time,
            a row with neither time, a decode time of a run with one output token.
    """
    src = str(path)
    if src.startswith(SHIPPED):
        rows = _shipped_inference_runs(src[len(SHIPPED) :], src)
    else:
        text = read_text(path, "rows file")
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        reader = csv.DictReader(lines)
        cols = reader.fieldnames or []
        check_columns(cols, src)
        missing = [c for c in INFERENCE_COLUMNS if c not in cols]
        if missing:
            raise InputError(f"missing column {missing[0]!r} (serving runs need {', '.join(INFERENCE_COLUMNS)})", src)
        rows = []
        for n, r in enumerate(reader, start=1):
            r = {k: (v or "").strip() for k, v in r.items() if k is not None}
            r["row_id"] = r.get("row_id") or f"row {n}"  # a label in the fit's table
            rows.append(r)
    for r in rows:
        where = r["row_id"] if r["row_id"].startswith("row ") else f"row {r['row_id']}"
        for col in ("model", "gpu"):
            if not r.get(col):
                raise InputError(f"{col} is needed to simulate the run", src, where)
        try:
            get_gpu(r["gpu"])
        except InputError as e:
            raise InputError(e.message, src, where) from None
        for col in ("tp", "pp", "batch", "prompt_tokens", "output_tokens", "ep"):
            if r.get(col) or col != "ep":
                _positive(r.get(col, ""), col, src, where, whole=True)
        times = [col for col in STEP_METRICS if r.get(col)]
        if not times:
            raise InputError("give prefill_ms or decode_ms (or both): the measured step times", src, where)
        for col in times:
            _positive(r[col], col, src, where, whole=False)
        if "decode_ms" in times and int(float(r["output_tokens"])) < 2:
            raise InputError("decode_ms needs output_tokens >= 2 (the first token comes from the prefill)", src, where)
    if not rows:
        raise InputError("no runs to calibrate to", src)
    return rows


def _infer_job(run: dict[str, str]) -> InferJob:
    """``podsim infer``'s job for a serving run (no stack: the calibration passes its trial one)."""
    values: dict[str, Any] = {
        "model": run["model"],
        "gpu": run["gpu"],
        "tp": int(float(run["tp"])),
        "pp": int(float(run["pp"])),
        "batch": int(float(run["batch"])),
        "prompt-tokens": int(float(run["prompt_tokens"])),
        "output-tokens": int(float(run["output_tokens"])),
    }
    if run.get("ep"):
        values["ep"] = int(float(run["ep"]))
    for col in ("precision", "kv_cache_dtype", "cluster"):
        if run.get(col):
            values[col.replace("_", "-")] = run[col]
    return InferJob.from_values(values)


def _serving_start(stack: SoftwareStack, runs: list[dict[str, str]], names: list[str]) -> tuple[dict[str, Any], str]:
    """Where each free serving parameter starts, and a note when that is not the base's own
    value: a measured host overhead (``eager`` / ``cuda-graphs``) is kept where every run's GPU
    has that measurement, else it starts at 0 ms."""
    gpus = {get_gpu(r["gpu"]).key for r in runs}
    measured = set(measured_serving_gpus())
    out: dict[str, Any] = {}
    note = ""
    for k in names:
        v = stack.get(k)
        if isinstance(v, str) and not gpus <= measured:
            note = (
                f"errors before the fit with {k} 0: {stack.name}'s {v!r} is podsim's measurement on "
                f"{', '.join(sorted(measured)) or 'no GPU'}, not on {', '.join(sorted(gpus - measured))}"
            )
            v = None
        out[k] = _NEUTRAL[k] if v is None else v
    return out, note


def calibrate_inference(
    runs: list[dict[str, str]],
    base: str,
    name: str | None = None,
    free: list[str] | None = None,
    source: str = "",
    max_residual: float = MAX_RESIDUAL,
) -> Calibration:
    """Fit the serving stack ``base``'s free parameters (or ``free``) to the measured step times
    of ``runs`` (:func:`read_inference_runs`), each predicted by ``podsim infer``'s call.

    Raises:
        InputError: an unknown base or parameter, a base with nothing free, a run ``podsim infer``
            cannot run (named by its row).
    """
    st = load_stack(base, "serving")
    bounds = free_bounds(st, free)
    jobs = [_infer_job(r) for r in runs]
    points = [(i, col) for i, r in enumerate(runs) for col in STEP_METRICS if r.get(col)]
    measured = [float(runs[i][col]) for i, col in points]
    start, note = _serving_start(st, runs, list(bounds))

    def predict(values: dict[str, Any]) -> list[float]:
        trial = st.with_values(values)
        reports: dict[int, Any] = {}
        out = []
        for i, col in points:
            if i not in reports:
                try:
                    reports[i] = infer(jobs[i], software=trial).report
                except InputError as e:
                    raise InputError(e.message, source or None, f"row {runs[i]['row_id']}") from None
            rep = reports[i]
            out.append(1e3 * (rep.prefill_s if col == "prefill_ms" else rep.decode_step_mean_s))
        return out

    result = fit(predict, measured, bounds, start, max_residual)
    labels = [{"row_id": runs[i]["row_id"], "metric": col} for i, col in points]
    return Calibration(st, name or f"{st.name}-calibrated", labels, measured, result, source, "inference", note)


# -- a serving run, replayed request by request ----------------------------------------------


@dataclass
class ServingRun:
    """A measured serving run: one entry per request, in the file's (arrival) order.

    Attributes:
        run_id: the run's name (the file's stem, less a ``.measured`` suffix).
        path: the file, which is also the replay's request trace.
        ttft_ms, e2e_ms: each request's measured time to first token and end-to-end latency (ms;
            NaN for a failed request).
        output_tokens: each request's output tokens.
        ok: whether a request counts in the targets (False: its ``has_error`` is set).
    """

    run_id: str
    path: str
    ttft_ms: list[float]
    e2e_ms: list[float]
    output_tokens: list[int]
    ok: list[bool]

    def first(self, n: int | None) -> ServingRun:
        """The run's first ``n`` requests (None: all), as ``--requests N`` replays them."""
        if n is None:
            return self
        return replace(
            self, ttft_ms=self.ttft_ms[:n], e2e_ms=self.e2e_ms[:n], output_tokens=self.output_tokens[:n], ok=self.ok[:n]
        )

    @property
    def targets(self) -> list[float]:
        """The measured :data:`RUN_METRICS` (ms)."""
        return run_targets(self.ttft_ms, self.e2e_ms, self.output_tokens, self.ok)


def run_targets(ttft_ms: list[float], e2e_ms: list[float], output_tokens: list[int], ok: list[bool]) -> list[float]:
    """A serving run's :data:`RUN_METRICS` (ms) from its requests' TTFT and end-to-end latency
    (ms): the mean TTFT, the mean E2E and the median time per output token, (e2e - ttft) /
    (output tokens - 1) over the requests of two or more output tokens; requests not ``ok`` are
    left out."""
    keep = [i for i, good in enumerate(ok) if good]
    tpot = [(e2e_ms[i] - ttft_ms[i]) / (output_tokens[i] - 1) for i in keep if output_tokens[i] > 1]
    if not keep or not tpot:
        raise InputError("a serving run needs requests of two or more output tokens (the time per output token)")
    return [
        statistics.fmean(ttft_ms[i] for i in keep),
        statistics.fmean(e2e_ms[i] for i in keep),
        statistics.median(tpot),
    ]


def _header(path: str | Path) -> list[str]:
    """The column names of a CSV (its first line that is not empty or a ``#`` comment)."""
    for line in read_text(path, "rows file").removeprefix("\ufeff").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return [c.strip() for c in next(csv.reader([line]))]
    return []


def is_serving_run(path: str | Path) -> bool:
    """Whether ``path`` holds a serving run's requests (a ``ttft_ms`` or ``e2e_ms`` column) rather
    than step times (``shipped:PREFIX`` never does).

    Raises:
        InputError: an unreadable file."""
    if str(path).startswith(SHIPPED):
        return False
    cols = _header(path)
    return "ttft_ms" in cols or "e2e_ms" in cols


def read_serving_run(path: str | Path) -> ServingRun:
    """The measured serving run of ``path`` (:data:`SERVING_RUN_COLUMNS`, optionally ``has_error``).

    Raises:
        InputError: an unreadable file, a missing column, a token count that is not a whole number
            >= 1, a time that is not a number > 0, an end-to-end latency below the TTFT, no request
            without an error.
    """
    src = str(path)
    text = read_text(path, "rows file").removeprefix("\ufeff")
    reader = csv.DictReader(io.StringIO(text))  # as the replay's request trace reads it
    cols = [c.strip() for c in reader.fieldnames or []]
    check_columns(cols, src)
    missing = [c for c in SERVING_RUN_COLUMNS if c not in cols]
    if missing:
        raise InputError(
            f"missing column {missing[0]!r} (a serving run needs {', '.join(SERVING_RUN_COLUMNS)})",
            src,
        )
    ttft, e2e, out, ok = [], [], [], []
    for n, raw in enumerate(reader, start=1):
        r = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
        where = f"row {n}"
        for col in ("num_prefill_tokens", "num_decode_tokens"):
            _positive(r[col], col, src, where, whole=True)
        good = r.get("has_error", "").lower() in ("", "0", "false", "no")
        if good:  # a failed request's times are not read: it is replayed, not fitted
            for col in ("ttft_ms", "e2e_ms"):
                _positive(r[col], col, src, where, whole=False)
            if float(r["e2e_ms"]) < float(r["ttft_ms"]):
                raise InputError(f"e2e_ms {r['e2e_ms']} is below ttft_ms {r['ttft_ms']}", src, where)
        ttft.append(float(r["ttft_ms"]) if good else math.nan)
        e2e.append(float(r["e2e_ms"]) if good else math.nan)
        out.append(int(float(r["num_decode_tokens"])))
        ok.append(good)
    if not any(ok):
        raise InputError("no requests without an error in the serving run", src)
    run_id = Path(src).stem.removesuffix(".measured")
    return ServingRun(run_id, src, ttft, e2e, out, ok)


def given_flags(opts: Any) -> dict[str, Any]:
    """The flags of an options group ``opts`` (a dataclass of params) that differ from their
    defaults (flag name -> value)."""
    default = echo(type(opts)())
    return {k: v for k, v in echo(opts).items() if v != default[k]}


def run_flags(opts: ServingRunOptions) -> dict[str, Any]:
    """The serve-llm flags of ``opts`` that differ from their defaults (flag name -> value)."""
    return given_flags(opts)


def _need_model_and_gpu(opts: ServingRunOptions, what: str, model_role: str) -> None:
    """InputError unless ``opts`` names a model and a GPU (``what``: a serving run, a trace)."""
    if not opts.model.model and not opts.model.model_config:
        raise InputError(f"{what} needs --model or --model-config: {model_role}", where="--model")
    if not opts.replica.gpu:
        raise InputError(f"{what} needs --gpu: the GPU it ran on", where="--gpu")


def replay_text(opts: ServingRunOptions) -> str:
    """The serve-llm flags of ``opts`` as a command line writes them (``--gpu rtx-4090 --tp 2``)."""
    return " ".join(f"--{k} {v}" for k, v in run_flags(opts).items())


def serving_run_job(run: ServingRun, opts: ServingRunOptions) -> ServeLLMJob:
    """``podsim serve-llm``'s job replaying ``run``: its requests as the workload, served with
    ``opts`` (no stack: the calibration passes the one it is trying).

    Raises:
        InputError: no model or no GPU given."""
    _need_model_and_gpu(opts, "a serving run", "the model it served")
    return ServeLLMJob.from_values({**echo(opts), "workload": run.path})


def replay_run(job: ServeLLMJob, run: ServingRun, software: SoftwareStack | None = None) -> list[float]:
    """The :data:`RUN_METRICS` (ms) of ``run`` as ``podsim serve-llm``'s call replays it (``job``:
    :func:`serving_run_job`) under ``software`` (default: the job's stack).

    Raises:
        InputError: what ``podsim serve-llm`` refuses (naming the flag or the request)."""
    result = serve_llm(job, software=software).result
    assert result is not None  # no --find-capacity: the run itself
    at = {rid: i for i, rid in enumerate(result.ids)}
    if len(at) != len(run.ttft_ms):
        raise InputError(f"the replay served {len(at)} requests of the run's {len(run.ttft_ms)}", run.path)
    ttft = [1e3 * (result.first_ns[at[i]] - result.arrival_ns[at[i]]) / 1e9 for i in range(len(at))]
    e2e = [1e3 * (result.finish_ns[at[i]] - result.arrival_ns[at[i]]) / 1e9 for i in range(len(at))]
    return run_targets(ttft, e2e, [result.output_tokens[at[i]] for i in range(len(at))], run.ok)


def calibrate_serving_run(
    run: ServingRun,
    opts: ServingRunOptions,
    base: str,
    name: str | None = None,
    free: list[str] | None = None,
    source: str = "",
    max_residual: float = MAX_RESIDUAL,
) -> Calibration:
    """Fit the serving stack ``base``'s free parameters (or ``free``) to a measured serving run's
    :data:`RUN_METRICS`, each trial replaying the run request by request with ``podsim
    serve-llm``'s call, served as ``opts`` says (the model, GPU, layout and engine settings it
    ran with).

    Raises:
        InputError: an unknown base or parameter, a base with nothing free, no model or GPU, a
            replay ``podsim serve-llm`` refuses.
    """
    st = load_stack(base, "serving")
    bounds = free_bounds(st, free)
    job = serving_run_job(run, opts)
    run = run.first(opts.replica.requests)
    start, note = _serving_start(st, [{"gpu": str(opts.replica.gpu)}], list(bounds))

    def predict(values: dict[str, Any]) -> list[float]:
        return replay_run(job, run, st.with_values(values))

    result = fit(predict, run.targets, bounds, start, max_residual)
    labels = [{"row_id": run.run_id, "metric": m} for m in RUN_METRICS]
    name = name or f"{st.name}-calibrated"
    return Calibration(st, name, labels, run.targets, result, source or run.path, "inference", note, replay_text(opts))


def write_stack(cal: Calibration, path: str | Path) -> None:
    """Write the fitted stack file (whole or not at all)."""
    atomic_write_text(path, cal.to_yaml())


def trace_step(job: CalibrateJob) -> TraceStep:
    """The traced step ``podsim calibrate trace`` describes with --model, --gpu, --seq-len,
    --micro-batch, --recompute, --layers and --precision.

    Raises:
        InputError: no model, GPU or sequence length; serving-run flags given."""
    _need_model_and_gpu(job.run, "a trace", "the model the traced step trained")
    if not job.step.seq_len:
        raise InputError("a trace needs --seq-len: tokens per sequence of the traced step", where="--seq-len")
    serving = {k for k in run_flags(job.run) if k not in ("model", "model-config", "gpu", "precision")}
    if serving:
        flag = sorted(serving)[0]
        raise InputError(f"--{flag} is a flag of a serving run's replay, not of a traced step", where=f"--{flag}")
    model = job.run.model.load()
    if job.step.layers is not None and job.step.layers > model.layers:
        raise InputError(
            f"{job.step.layers} is more than the {model.layers} layers of {model.name}: give the layers the "
            "traced step ran (fewer than the model's when it was cut down)",
            where="--layers",
        )
    return TraceStep(
        model,
        job.run.replica.gpu,
        job.step.seq_len,
        job.step.micro_batch,
        job.step.recompute,
        job.step.layers,
        job.run.replica.precision,
    )


#: what each kind of ``podsim calibrate`` reads its runs with and fits them with
CALIBRATIONS: dict[str, tuple[Callable[..., list[dict[str, str]]], Callable[..., Calibration]]] = {
    "training": (read_training_runs, calibrate_training),
    "inference": (read_inference_runs, calibrate_inference),
}


def calibrate(job: CalibrateJob) -> Calibration:
    """``podsim calibrate training|inference`` as one call: read the job's runs and fit its base
    stack (nothing written: :func:`write_stack` writes a fit that is :attr:`Calibration.ok`).
    An inference ROWS.csv with ``ttft_ms`` / ``e2e_ms`` columns is a serving run, replayed
    with the job's serve-llm flags (:func:`calibrate_serving_run`).

    Raises:
        InputError: a missing ROWS.csv, --base or --out; bad runs; an unknown stack or parameter;
            serve-llm flags with runs that are not a serving run.
    """
    what = "DIR" if job.kind == "trace" else "ROWS.csv"
    for flag, value in ((what, job.rows), ("--base", job.base), ("--out", job.out)):
        if not value:
            raise InputError(f"podsim calibrate {job.kind} needs {flag}")
    assert job.rows and job.base and job.out and job.kind
    name = job.name or Path(job.out).stem
    free = list(job.free) if job.free else None
    if job.kind == "trace":
        return calibrate_trace(job.rows, trace_step(job), job.base, name, free)
    given_step = given_flags(job.step)
    if given_step:
        flag = next(iter(given_step))
        raise InputError(
            f"--{flag} describes a traced step (podsim calibrate trace DIR); {job.rows} holds {job.kind} runs",
            where=f"--{flag}",
        )
    if job.kind == "inference" and is_serving_run(job.rows):
        run = read_serving_run(job.rows)
        return calibrate_serving_run(run, job.run, job.base, name, free, source=job.rows)
    given = list(run_flags(job.run))
    if given:
        raise InputError(
            f"--{given[0]} is a flag of a serving run's replay (a file of one row per request with "
            f"{', '.join(SERVING_RUN_COLUMNS)}); {job.rows} holds {job.kind} runs, which name their own "
            "model, GPU and layout",
            where=f"--{given[0]}",
        )
    read, fit_runs = CALIBRATIONS[job.kind]
    runs = read(job.rows)
    return fit_runs(runs, job.base, name, free, source=job.rows)
