"""What the GPU measurement scripts of this folder share: the checkout's podsim on the import
path, quiet profiler logs, and the provenance of a run (``# key: value`` lines of their CSVs)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
# Kineto and the C++ side log every profiler start and stop: quiet unless asked (read at torch's import)
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
try:   # the checkout's podsim (the GPU machine runs these from a copy of the tree, nothing installed)
    import podsim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))


def quiet_torch(torch: Any) -> None:
    """Silence what torch says at every run and is known: dynamo dropping the profiler regions
    in compiled code, the profiler clearing its events between cycles."""
    import logging
    import warnings
    torch._logging.set_logs(dynamo=logging.ERROR)
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")


def provenance(torch: Any, device: str, argv: list[str]) -> dict[str, str]:
    """What the rows were measured on (every value a string)."""
    p: dict[str, str] = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "torch": torch.__version__, "python": platform.python_version(),
                         "host": platform.platform(), "command": " ".join([Path(sys.argv[0]).name, *argv])}
    try:
        p["podsim_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                            capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if not device.startswith("cuda"):
        p["device"] = "cpu"
        return p
    props = torch.cuda.get_device_properties(0)
    p.update(device=torch.cuda.get_device_name(0), memory_gib=f"{props.total_memory / GIB:.1f}",
             sms=str(props.multi_processor_count), capability=f"{props.major}.{props.minor}",
             cuda=str(torch.version.cuda), cudnn=str(torch.backends.cudnn.version()))
    try:
        import triton
        p["triton"] = triton.__version__
    except ImportError:
        pass
    query = "driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,power.limit,power.max_limit,temperature.gpu"
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
        got = smi.stdout.strip().splitlines()
        if smi.returncode == 0 and got:
            for k, v in zip(query.split(","), got[0].split(",")):
                p[k.replace(".", "_")] = v.strip()
        else:
            p["nvidia_smi"] = "not readable"
    except (OSError, subprocess.SubprocessError):
        p["nvidia_smi"] = "not readable"
    return p


