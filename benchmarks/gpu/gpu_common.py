"""What the GPU measurement scripts of this folder share: the checkout's podsim on the import
path, quiet profiler logs, and the provenance of a run (``# key: value`` lines of their CSVs)."""

from __future__ import annotations

import datetime as _dt
import gzip
import os
import platform
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
# Kineto and the C++ side log every profiler start and stop: quiet unless asked (read at torch's import)
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
try:  # the checkout's podsim (the GPU machine runs these from a copy of the tree, nothing installed)
    import podsim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))
from podsim.capture.breakdown import step_breakdown  # noqa: E402  (after the checkout's podsim is on the path)


def quiet_torch(torch: Any) -> None:
    """Silence what torch says at every run and is known: dynamo dropping the profiler regions
    in compiled code, the profiler clearing its events between cycles."""
    import logging
    import warnings

    torch._logging.set_logs(dynamo=logging.ERROR)
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")


def provenance(torch: Any, device: str, argv: list[str]) -> dict[str, str]:
    """What the rows were measured on (every value a string)."""
    p: dict[str, str] = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.platform(),
        "command": " ".join([Path(sys.argv[0]).name, *argv]),
    }
    try:
        p["podsim_commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if not device.startswith("cuda"):
        p["device"] = "cpu"
        return p
    props = torch.cuda.get_device_properties(0)
    p.update(
        device=torch.cuda.get_device_name(0),
        memory_gib=f"{props.total_memory / GIB:.1f}",
        sms=str(props.multi_processor_count),
        capability=f"{props.major}.{props.minor}",
        cuda=str(torch.version.cuda),
        cudnn=str(torch.backends.cudnn.version()),
    )
    try:
        import triton

        p["triton"] = triton.__version__
    except ImportError:
        pass
    query = "driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,power.limit,power.max_limit,temperature.gpu"
    try:
        smi = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        got = smi.stdout.strip().splitlines()
        if smi.returncode == 0 and got:
            for k, v in zip(query.split(","), got[0].split(",")):
                p[k.replace(".", "_")] = v.strip()
        else:
            p["nvidia_smi"] = "not readable"
    except (OSError, subprocess.SubprocessError):
        p["nvidia_smi"] = "not readable"
    return p


def add_arguments(ap: Any, name: str, unit: str, steps: int) -> None:
    """The options both scripts take (``name``: the script's stem, for the default output;
    ``unit``: what a row measures, for the help; ``steps``: timed steps by default)."""
    ap.add_argument(
        "--out",
        default=None,
        metavar="CSV|DIR",
        help=f"the rows (a folder: <folder>/{name}/<gpu>.csv; default benchmarks/gpu/results/{name}-<quick|gpu>.csv)",
    )
    ap.add_argument("--quick", action="store_true", help="tiny shapes, the same code path (the tests run it)")
    ap.add_argument("--device", default=None, choices=["cuda", "cpu"], help="default: cuda, or cpu with --quick")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=480.0,
        metavar="S",
        help=f"device seconds to spend; the {unit}s that would not finish are skipped (default 480)",
    )
    ap.add_argument("--steps", type=int, default=None, help=f"timed steps per {unit} (default {steps}; quick 3)")
    ap.add_argument("--only", default=None, metavar="TEXT", help=f"run the {unit}s whose label contains TEXT")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--debug", action="store_true", help=f"print tracebacks of failed {unit}s")


def settle_arguments(args: Any, name: str) -> None:
    """The defaults that depend on other options: the device (cpu with --quick) and the output."""
    if args.device is None:
        args.device = "cpu" if args.quick else "cuda"
    if args.out is None:
        args.out = str(ROOT / "benchmarks" / "gpu" / "results" / f"{name}-{'quick' if args.quick else 'gpu'}.csv")


def output_path(out: str, name: str, gpu: str, quick: bool) -> Path:
    """The CSV to write: ``out``, or ``out/<name>/<gpu>.csv`` when ``out`` is a folder (the GPU
    machine's $OUT, where both scripts write); its folder made."""
    path = Path(out)
    if path.is_dir():
        path = path / name / f"{gpu or ('cpu-quick' if quick else 'unknown-gpu')}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_PROFILE[:] = [path.with_suffix(".profile.json.gz")]
    return path


#: where the run's first profiled step is kept, gzipped, for a look at its raw trace (set by
#: :func:`output_path`: ``<csv>.profile.json.gz``); later profiles are not kept
SAMPLE_PROFILE: list[Path] = []


def _keep_first_profile(trace: Path) -> None:
    """Gzip ``trace`` to the run's sample path if nothing is kept there yet."""
    if SAMPLE_PROFILE and not SAMPLE_PROFILE[0].exists() and trace.exists():
        tmp = SAMPLE_PROFILE[0].with_suffix(".tmp")
        with trace.open("rb") as src, gzip.open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.replace(SAMPLE_PROFILE[0])


def profiled_breakdown(run_step: Callable[[], object], cuda: bool, folder: Path) -> Any:
    """One profiled step's breakdown (:func:`podsim.capture.breakdown.step_breakdown`): ``run_step``
    twice under the profiler, the first as its warm-up; the run's first trace is kept
    (:data:`SAMPLE_PROFILE`)."""
    from torch.profiler import ProfilerActivity, profile, schedule  # noqa: PLC0415 -- torch is optional

    path = folder / "profile.json"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with (
        warnings.catch_warnings(),
        profile(
            activities=acts,
            schedule=schedule(wait=0, warmup=1, active=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        ) as prof,
    ):
        warnings.simplefilter("ignore")  # "Profiler clears events at the end of each cycle": known
        for _ in range(2):
            run_step()
            prof.step()
    b = step_breakdown(path)
    _keep_first_profile(path)
    path.unlink(missing_ok=True)
    return b


def failure_status(e: BaseException) -> str:
    """A failed configuration's ``status``: ``oom``, or the error's type and first line."""
    if "out of memory" in str(e).lower() or type(e).__name__ == "OutOfMemoryError":
        return "oom"
    first = (str(e).splitlines() or [""])[0]
    return f"error: {type(e).__name__}: {first[:160]}"


def open_device(args: Any, name: str) -> tuple[Any, float]:
    """torch (its known warnings quiet unless --debug) and the device's memory in bytes (64 GiB
    taken for a CPU); exits with status 2 when --device cuda finds no GPU."""
    from podsim.optional import require

    torch = require("torch", f"{name} (measuring steps)")
    if not args.debug:
        quiet_torch(torch)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{name}: no CUDA device visible to PyTorch (use --quick for the CPU check)", file=sys.stderr)
        raise SystemExit(2)
    return torch, (torch.cuda.get_device_properties(0).total_memory if args.device == "cuda" else 64.0 * GIB)
