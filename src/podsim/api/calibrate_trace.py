"""``podsim calibrate trace DIR`` as a Python call: a training stack's kernel efficiencies read off
a profiled step of the user's own stack on one GPU.

The traces are PyTorch profiler (Kineto / Chrome) traces of a training step of one GPU (a
single-GPU run, or one rank of a data-parallel DDP / FSDP run: its GEMMs and attention have
the single-GPU shapes; collective kernels are not read).  Each trace's last profiled step is
split into categories by :func:`podsim.capture.breakdown.step_breakdown`; the mean over the
traces is the measurement.  podsim simulates the same step (``--model``, ``--gpu``,
``--seq-len``, ``--micro-batch``, ``--recompute``, ``--layers``) under the base stack with its
physical parameters neutral, and reads each parameter off the ratio of its kernels' time
(:data:`GROUPS`):

* ``gemm_efficiency`` = podsim's GEMM ms at relative efficiency 1 / the measured GEMM ms;
* ``attention_efficiency`` = the same for fused attention (forward and backward), a number at
  the traced sequence length (a base's table by length is replaced for the GPU's architecture);
* ``elementwise_traffic`` = the measured memory-bound kernels' ms (norms, RoPE, activation,
  residuals, loss, embedding) / podsim's at traffic 1.

Each is exact for the traced step (its kernels scale linearly in it); a value outside the
property's range is refused (the flags likely do not describe the traced step).  ``host_ns`` and
``fp8_overhead`` are held at the base's: a trace's host time says when the CPU issued kernels,
not how long it took while the GPU was busy.

Example::

    from podsim.api.calibrate_trace import TraceStep, calibrate_trace
    from podsim.llm.model import get_model
    cal = calibrate_trace("traces/", TraceStep(get_model("llama3-8b"), "h100", 8192), base="torchtitan")
    print(cal.fit.fitted)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..capture.breakdown import Breakdown, step_breakdown
from ..compute.steps import shipped_profiles
from ..errors import InputError
from ..hardware.gpu import get_gpu
from ..llm.layout import Layout
from ..llm.model import ModelConfig
from ..stacks.calibrate import Fit
from ..stacks.schema import BY_NAME
from ..stacks.stack import SoftwareStack, load_stack
from ..validation.training_steps import step_categories
from .calibration import Calibration
from .train import simulate_training

#: the memory-bound categories ``elementwise_traffic`` scales (not the optimizer's, not fp8 casts)
MEMORY_CATEGORIES = ("norm", "rope", "swiglu", "elementwise", "cross_entropy", "embedding")
#: each parameter read off a trace, with the measured categories its kernels land in
GROUPS: dict[str, tuple[str, ...]] = {
    "gemm_efficiency": ("gemm",),
    "attention_efficiency": ("attention_fwd", "attention_bwd"),
    "elementwise_traffic": MEMORY_CATEGORIES,
}
#: how each group is labelled in the printed fit
LABELS = {"gemm_efficiency": "GEMMs", "attention_efficiency": "attention", "elementwise_traffic": "memory-bound"}
#: the physical parameters a trace does not measure, held at the base's
HELD = ("host_ns", "fp8_overhead", "fp8_rowwise_overhead")
#: DIR as ``shipped:GPU``: podsim's own profiled training step of that GPU
SHIPPED = "shipped:"
#: the file names read from a trace folder
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class TraceStep:
    """The training step the traces hold, on one GPU.

    Attributes:
        model: the model (a zoo model or a config file's).
        gpu: the GPU it ran on (a podsim key or alias).
        seq_len: tokens per sequence.
        micro_batch: sequences in the step.
        recompute: ``none``, ``selective`` or ``full``.
        layers: the layers it ran, where fewer than the model's (None: the model's).
        precision: ``bf16``, ``fp8``, ...
    """

    model: ModelConfig
    gpu: str
    seq_len: int
    micro_batch: int = 1
    recompute: str = "none"
    layers: int | None = None
    precision: str = "bf16"


def trace_files(path: str | Path) -> list[Path]:
    """The traces at ``path``: the file, or a folder's ``*.json`` / ``*.json.gz``, sorted;
    ``shipped:GPU``: podsim's own profiled step of that GPU (:func:`shipped_profiles`).

    Raises:
        InputError: no such path, a folder without traces, an unknown shipped trace.
    """
    if str(path).startswith(SHIPPED):
        gpu, have = str(path)[len(SHIPPED) :], shipped_profiles()
        if gpu not in have:
            raise InputError(
                f"podsim ships no profiled step of {gpu!r} (shipped: {', '.join(have) or 'none'})", str(path)
            )
        return [have[gpu]]
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError("no such trace file or folder", str(p))
    files = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
    if not files:
        raise InputError(
            "no PyTorch profiler traces (*.json, *.json.gz: torch.profiler's export_chrome_trace or "
            "tensorboard_trace_handler) in this folder",
            str(p),
        )
    return files


def measured_categories(files: list[Path]) -> tuple[dict[str, float], list[Breakdown]]:
    """The mean device ms per category of each trace's last profiled step, and the breakdowns.

    Raises:
        InputError: an unreadable trace, one without a profiled step, a CPU capture.
    """
    steps = []
    for f in files:
        b = step_breakdown(f)
        if b.device != "cuda":
            raise InputError(
                "a CPU capture: it holds no GPU kernels to read a stack's efficiencies from (profile the step "
                "on the GPU, with ProfilerActivity.CUDA)",
                str(f),
            )
        steps.append(b)
    cats = {c for b in steps for c in b.ms}
    return {c: sum(b.ms.get(c, 0.0) for b in steps) / len(steps) for c in cats}, steps


def predicted_categories(step: TraceStep, stack: SoftwareStack) -> dict[str, float]:
    """podsim's device ms of ``step`` by measured category under ``stack`` (one GPU, one
    micro-batch: :func:`~podsim.validation.training_steps.step_categories`)."""
    layers = step.layers or step.model.layers
    model = replace(step.model, layers=layers) if layers != step.model.layers else step.model
    layout = Layout(
        1,
        global_batch=step.micro_batch,
        micro_batch=step.micro_batch,
        seq_len=step.seq_len,
        recompute=step.recompute,
        precision=step.precision,
    )
    res = simulate_training(
        model, layout, step.gpu, None, "analytical", record_timeline=False, software=stack, allow_oom=True
    )
    return step_categories(res, layers, step.recompute == "full")


def _group_ms(ms: dict[str, float], key: str) -> float:
    return sum(ms.get(c, 0.0) for c in GROUPS[key])


def calibrate_trace(
    path: str | Path, step: TraceStep, base: str, name: str | None = None, free: list[str] | None = None
) -> Calibration:
    """Read ``base``'s GEMM and attention efficiencies and elementwise traffic (or only those in
    ``free``) off the traces at ``path`` of ``step`` (a
    :class:`~podsim.api.calibration.Calibration` of kind ``trace``: each group's measured ms,
    podsim's error with the base's values before and with the read ones after).

    Raises:
        InputError: no traces, a CPU capture, a bad trace, an unknown base or GPU, a step podsim
            cannot simulate, a ``free`` name a trace does not measure.
    """
    for key in free or ():
        if key not in GROUPS:
            raise InputError(
                f"{key!r} is not read off a trace (podsim calibrate trace reads {', '.join(GROUPS)})", where="--free"
            )
    wanted = [k for k in GROUPS if not free or k in free]
    files = trace_files(path)
    st = load_stack(base, "training")
    spec = get_gpu(step.gpu)
    step = replace(step, gpu=spec.key)
    measured, steps = measured_categories(files)
    neutral = st.with_values({key: 1.0 for key in GROUPS})
    ideal = predicted_categories(step, neutral)
    before = predicted_categories(step, st)
    fitted: dict[str, float] = {}
    held: dict[str, float] = {}
    refusal = ""
    label = str(path) if str(path).startswith(SHIPPED) else Path(path).name or str(path)
    runs, meas, err_before = [], [], []
    for key in wanted:
        m, p = _group_ms(measured, key), _group_ms(ideal, key)
        if m <= 0 or p <= 0:  # no such kernels in the step: the base's value stays
            base_value = st.value_for(key, spec.architecture)
            if isinstance(base_value, float):
                held[key] = base_value
            continue
        value = m / p if key == "elementwise_traffic" else p / m
        prop = BY_NAME[key]
        if not prop.lo <= value <= prop.hi and not refusal:
            refusal = (
                f"{key} read off the traces is {value:.3g}, outside its range [{prop.lo:g}, {prop.hi:g}]: do --model, "
                f"--layers, --seq-len, --micro-batch and --recompute describe the traced step? (measured "
                f"{LABELS[key]} {m:.3g} ms, podsim {p:.3g} ms at {key} 1)"
            )
        fitted[key] = value
        runs.append({"row_id": label, "metric": f"{LABELS[key]} ms"})
        meas.append(m)
        err_before.append(_group_ms(before, key) / m - 1)
    if not fitted:
        raise InputError(
            "the traces hold no GEMM, attention or memory-bound kernels podsim can place "
            "(a training step of a transformer on the GPU is needed)",
            str(path),
        )
    after_ms = predicted_categories(step, st.with_values(fitted)) if not refusal else before
    err_after = [_group_ms(after_ms, k) / m - 1 for k, m in zip(fitted, meas)]
    for key in HELD:
        v = st.value_for(key, spec.architecture)
        if isinstance(v, float):
            held[key] = v
    idle = sum(b.idle_ms for b in steps) / len(steps)
    window = sum(b.step_ms for b in steps) / len(steps)
    note = (
        f"read off {len(files)} profiled step(s) on {spec.name}; attention at {step.seq_len} tokens; "
        f"the device idled {idle:,.1f} of {window:,.1f} ms waiting on the host (host_ns is held: fit it with "
        "podsim calibrate training on a measured iteration time)"
    )
    fit = Fit(fitted, held, sorted(held), err_before, err_after, 3, refusal)
    return Calibration(
        st,
        name or f"{st.name}-traced",
        runs,
        meas,
        fit,
        source=str(path),
        kind="trace",
        note=note,
        architectures=[spec.architecture],
    )
