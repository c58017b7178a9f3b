"""GPU specifications, kept as data (``hardware/gpus.yaml``).

Units: ``peak_tflops`` in 10^12 FLOP/s (dense), ``memory_gib`` in 2^30 B, bandwidths in bytes
per ns (= GB/s, 10^9 B/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

import yaml

from ..errors import InputError, unknown_key_error
from ..units import parse_bandwidth


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model."""

    key: str
    name: str
    memory_gib: float
    hbm_bandwidth: float           #: bytes per ns
    nvlink_bandwidth: float        #: bytes per ns, per direction
    peak_tflops: dict = field(default_factory=dict)   #: dtype -> dense TFLOP/s
    efficiency: dict = field(default_factory=dict)    #: compute-model calibration (may be empty)

    def peak(self, dtype: str) -> float:
        """Dense peak in FLOP per ns (= TFLOP/s x 1000) for ``dtype``; fp8 falls back to bf16
        on GPUs without it."""
        if dtype not in self.peak_tflops:
            if dtype == "fp8" and "bf16" in self.peak_tflops:
                dtype = "bf16"
            else:
                raise InputError(f"{self.name} has no {dtype} peak; it has {', '.join(self.peak_tflops)}")
        return float(self.peak_tflops[dtype]) * 1000.0

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * (1 << 30)


def gpu_specs() -> dict[str, GpuSpec]:
    """Every shipped GPU, by key (``a100-80gb``, ``h100-80gb``, ...)."""
    data = yaml.safe_load((resources.files("podsim.hardware") / "gpus.yaml").read_text())
    out = {}
    for key, d in data.items():
        eff = d.get("efficiency") or {}
        if isinstance(eff, str):  # the name of another GPU whose fit this one shares
            eff = data[eff].get("efficiency") or {}
        out[key] = GpuSpec(key, d["name"], float(d["memory_gib"]), parse_bandwidth(d["hbm_bandwidth"]),
                           parse_bandwidth(d["nvlink_bandwidth"]), dict(d["peak_tflops"]), dict(eff))
    return out


_ALIASES = {"a100": "a100-80gb", "h100": "h100-80gb", "v100": "v100-32gb", "a100-sxm4-80gb": "a100-80gb",
            "a100-sxm4-40gb": "a100-40gb", "h100-sxm5-80gb": "h100-80gb", "b200 (hgx)": "b200",
            "h200-sxm-141gb": "h200", "b200": "b200"}


def get_gpu(name: str) -> GpuSpec:
    """A GPU by key, its datasheet name, or a short alias (``a100`` = ``a100-80gb``).

    Raises:
        InputError: for an unknown GPU, suggesting the closest key.
    """
    specs = gpu_specs()
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in specs:
        by_name = {s.name.lower(): k for k, s in specs.items()}
        key = by_name.get(name.lower(), key)
    if key not in specs:
        raise unknown_key_error(name, specs, None, what="GPU")
    return specs[key]
