"""GPU specifications, kept as data (``hardware/gpus.yaml``).

Units: ``peak_tflops`` in 10^12 FLOP/s (dense, no sparsity), ``memory_gib`` in 2^30 B (what the
driver reports), bandwidths in bytes per ns (= GB/s, 10^9 B/s), ``boost_clock_mhz`` in MHz,
``tdp_w`` in W.  Every shipped entry cites its figures in ``sources``; see docs/hardware.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from ..errors import InputError, unknown_key_error, yaml_error
from ..fileio import load_yaml, read_text
from ..registry import Registry
from ..units import parse_bandwidth

#: the dtypes a ``peak_tflops`` mapping may name
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")
_REQUIRED = ("name", "memory_gib", "hbm_bandwidth", "nvlink_bandwidth", "peak_tflops")
_OPTIONAL = (
    "efficiency",
    "sources",
    "nvlink_generation",
    "sm_count",
    "boost_clock_mhz",
    "tdp_w",
    "vendor",
    "architecture",
    "aliases",
    "preset",
)
_KEYS = frozenset(_REQUIRED + _OPTIONAL)
_VENDORS = ("nvidia", "amd")
#: what a dtype falls back to on a GPU without it (fp4 -> fp8 -> bf16)
_FALLBACK = {"fp4": "fp8", "fp6": "fp8", "fp8": "bf16"}


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model.

    The first seven fields keep their positional order (``GpuSpec(key, name, memory_gib,
    hbm_bandwidth, nvlink_bandwidth, peak_tflops, efficiency)``); the rest are optional.

    Attributes:
        key: the key in gpus.yaml (``h100-80gb``).
        name: the datasheet name (``H100-SXM5-80GB``).
        memory_gib: HBM capacity as the driver reports it, in GiB (2^30 B).
        hbm_bandwidth: peak HBM bandwidth, bytes per ns (= GB/s).
        nvlink_bandwidth: scale-up (NVLink / Infinity Fabric) bandwidth per GPU, per direction,
            bytes per ns (= GB/s).
        peak_tflops: dtype -> dense peak in TFLOP/s (10^12 FLOP/s, no sparsity).
        efficiency: the compute model's calibration (may be empty).
        sources: where the figures come from (document, table or page, URL).
        nvlink_generation: NVLink generation (4 = Hopper, 5 = Blackwell); None where the GPU has
            none (AMD's Infinity Fabric) or it is not recorded.
        sm_count: streaming multiprocessors (NVIDIA) or compute units (AMD).
        boost_clock_mhz: boost (peak engine) clock, MHz.
        tdp_w: board power (TDP / TGP), W.
        vendor: ``nvidia`` or ``amd``.
        architecture: ``volta``, ``ampere``, ``hopper``, ``blackwell``, ``blackwell-ultra``, ``cdna3``...
    """

    key: str
    name: str
    memory_gib: float
    hbm_bandwidth: float  #: bytes per ns
    nvlink_bandwidth: float  #: bytes per ns, per direction
    peak_tflops: dict = field(default_factory=dict)  #: dtype -> dense TFLOP/s
    efficiency: dict = field(default_factory=dict)  #: compute-model calibration (may be empty)
    sources: tuple[str, ...] = ()
    nvlink_generation: int | None = None
    sm_count: int | None = None
    boost_clock_mhz: float | None = None
    tdp_w: float | None = None
    vendor: str = "nvidia"
    architecture: str = ""
    #: whose compute-model fit ``efficiency`` is: this GPU's key, another GPU's (a derived fit:
    #: ``efficiency: <key>`` or ``efficiency: {from: <key>, scale: ...}`` in the file), or ""
    #: (none: the A100 fit applies)
    efficiency_from: str = ""
    #: parameter -> factor the sibling's fit was scaled by (published kernel measurements of both
    #: GPUs, podsim/compute/derive.py); empty when the fit is the GPU's own or borrowed as is
    efficiency_scale: dict = field(default_factory=dict)
    #: parameter -> the GPU whose published kernels stood in for this one's (the same die)
    efficiency_measured_as: dict = field(default_factory=dict)
    #: other names users give it (``h100``); lower case
    aliases: tuple[str, ...] = ()
    #: the cluster preset a run on this GPU uses without --cluster ("": --cluster is needed)
    preset: str = ""

    def peak(self, dtype: str) -> float:
        """Dense peak in FLOP per ns (= TFLOP/s x 1000) for ``dtype``.  A GPU without fp4 (or
        fp6) falls back to fp8, and one without fp8 to bf16 (fp4 -> fp8 -> bf16).

        Raises:
            InputError: when neither the dtype nor its fall-backs have a peak.
        """
        d = dtype
        while d not in self.peak_tflops and d in _FALLBACK:
            d = _FALLBACK[d]
        if d not in self.peak_tflops:
            raise InputError(f"{self.name} has no {dtype} peak; it has {', '.join(self.peak_tflops)}")
        return float(self.peak_tflops[d]) * 1000.0

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * (1 << 30)


#: the largest figure a GPU spec may give (TFLOP/s, GiB, MHz, W, a count or a scale factor)
MAX_FIGURE = 1e9
#: the compute model's calibration parameters (podsim/compute/model.py): ``*_max`` are fractions
#: of peak in (0, 1], ``*_knee`` sizes and ``launch_ns`` a time, both >= 0
EFFICIENCY_KEYS = (
    "gemm_max",
    "gemm_knee",
    "memory_max",
    "flash_max",
    "flash_knee",
    "launch_ns",
    "fp8_gemm_max",
    "fp8_gemm_knee",
)


def _number(v: object, source: str, where: str, *, integer: bool = False) -> float:
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if not ok or isinstance(v, bool) or not 0 < v <= MAX_FIGURE:  # also refuses NaN and inf
        what = "a positive integer" if integer else "a positive number"
        raise InputError(f"expected {what} (at most {MAX_FIGURE:.0e}), got {v!r}", source, where)
    return v


def _efficiency(eff: dict, source: str, where: str) -> dict:
    """A fitted calibration: known parameters, fractions of peak in (0, 1], knees and the launch
    time finite and >= 0."""
    for k, v in eff.items():
        if k not in EFFICIENCY_KEYS:
            e = unknown_key_error(str(k), EFFICIENCY_KEYS, source, what="parameter")
            raise InputError(e.message, source, f"{where}.{k}")
        frac = str(k).endswith("_max")
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (0 < v <= 1 if frac else 0 <= v <= MAX_FIGURE)
        if not ok:
            want = "a fraction of peak in (0, 1]" if frac else "a finite number >= 0"
            raise InputError(f"expected {want}, got {v!r}", source, f"{where}.{k}")
    return eff


def _spec(key: str, d: object, data: dict, source: str) -> GpuSpec:
    if not isinstance(d, dict):
        raise InputError(f"expected a mapping with {', '.join(_REQUIRED)}", source, key)
    for k in d:
        if k not in _KEYS:
            e = unknown_key_error(str(k), _KEYS, source)
            raise InputError(e.message, source, f"{key}.{k}")
    for k in _REQUIRED:
        if k not in d:
            raise InputError(f"missing required field {k!r}", source, key)
    peaks = d["peak_tflops"]
    if not isinstance(peaks, dict) or not peaks:
        raise InputError("expected a mapping dtype -> TFLOP/s", source, f"{key}.peak_tflops")
    for dt, v in peaks.items():
        if dt not in DTYPES:
            e = unknown_key_error(str(dt), DTYPES, source, what="dtype")
            raise InputError(e.message, source, f"{key}.peak_tflops.{dt}")
        _number(v, source, f"{key}.peak_tflops.{dt}")
    if "bf16" not in peaks:  # what fp8 and fp4 fall back to, and attention and norms run in
        raise InputError(
            "missing bf16: every GPU needs its bf16 (or fp16-equivalent) peak", source, f"{key}.peak_tflops"
        )
    eff = d.get("efficiency") or {}
    if not isinstance(eff, (dict, str)):
        raise InputError(
            f"expected a mapping of fitted parameters or a GPU key, got {eff!r}", source, f"{key}.efficiency"
        )
    if isinstance(eff, dict) and "from" not in eff:
        _efficiency(eff, source, f"{key}.efficiency")
    eff_from = key if eff else ""
    scale: dict[str, float] = {}
    measured_as: dict[str, str] = {}
    if isinstance(eff, dict) and "from" in eff:  # a sibling's fit, scaled by published kernel ratios
        eff, scale, measured_as = _scaled_efficiency(key, eff, data, source)
        eff_from = str(d["efficiency"]["from"])
    elif isinstance(eff, str):  # the name of another GPU whose fit this one shares
        eff_from = eff
        if eff not in data or not isinstance(data[eff], dict):
            e = unknown_key_error(eff, data, source, what="GPU")
            raise InputError(e.message, source, f"{key}.efficiency")
        eff = data[eff].get("efficiency") or {}
        if not isinstance(eff, dict) or "from" in eff:
            raise InputError(
                f"efficiency names {d['efficiency']!r}, which itself names another GPU", source, f"{key}.efficiency"
            )
        _efficiency(eff, source, f"{d['efficiency']}.efficiency")
    sources = d.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
        raise InputError("expected a list of strings", source, f"{key}.sources")
    vendor = d.get("vendor", "nvidia")
    if vendor not in _VENDORS:
        e = unknown_key_error(str(vendor), _VENDORS, source, what="vendor")
        raise InputError(e.message, source, f"{key}.vendor")
    aliases = d.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(x, str) and x.strip() for x in aliases):
        raise InputError("expected a list of names", source, f"{key}.aliases")
    preset = d.get("preset") or ""
    if not isinstance(preset, str):
        raise InputError(f"expected the name of a cluster preset, got {preset!r}", source, f"{key}.preset")
    opt = {}
    for k, integer in (("nvlink_generation", True), ("sm_count", True), ("boost_clock_mhz", False), ("tdp_w", False)):
        if d.get(k) is not None:
            opt[k] = _number(d[k], source, f"{key}.{k}", integer=integer)
    return GpuSpec(
        key,
        str(d["name"]),
        float(_number(d["memory_gib"], source, f"{key}.memory_gib")),
        parse_bandwidth(d["hbm_bandwidth"], source, f"{key}.hbm_bandwidth"),
        parse_bandwidth(d["nvlink_bandwidth"], source, f"{key}.nvlink_bandwidth"),
        {str(k): float(v) for k, v in peaks.items()},
        dict(eff),
        tuple(sources),
        vendor=str(vendor),
        architecture=str(d.get("architecture", "")),
        efficiency_from=eff_from,
        efficiency_scale=scale,
        efficiency_measured_as=measured_as,
        aliases=tuple(a.strip().lower() for a in aliases),
        preset=preset.strip(),
        **opt,
    )


#: the compute-model parameters a derived fit may scale
SCALABLE = ("gemm_max", "fp8_gemm_max", "flash_max", "memory_max")


def _scaled_efficiency(key: str, eff: dict, data: dict, source: str) -> tuple[dict, dict, dict]:
    """``efficiency: {from: <gpu>, scale: {param: factor}, measured_as: {param: <gpu>}}``: the
    sibling's fitted parameters with ``scale`` applied (fields: :data:`SCALABLE`)."""
    where = f"{key}.efficiency"
    for k in eff:
        if k not in ("from", "scale", "measured_as"):
            e = unknown_key_error(str(k), ("from", "scale", "measured_as"), source)
            raise InputError(e.message, source, f"{where}.{k}")
    sib = eff["from"]
    if not isinstance(sib, str) or sib not in data or not isinstance(data[sib], dict):
        e = unknown_key_error(str(sib), data, source, what="GPU")
        raise InputError(e.message, source, f"{where}.from")
    base = data[sib].get("efficiency")
    if not isinstance(base, dict) or "from" in base:
        raise InputError(f"efficiency.from names {sib!r}, which has no fit of its own", source, f"{where}.from")
    _efficiency(base, source, f"{sib}.efficiency")
    scale = eff.get("scale") or {}
    measured_as = eff.get("measured_as") or {}
    if not isinstance(scale, dict) or not isinstance(measured_as, dict):
        raise InputError("expected a mapping parameter -> value", source, where)
    for table, name in ((scale, "scale"), (measured_as, "measured_as")):
        for p in table:
            if p not in SCALABLE:
                e = unknown_key_error(str(p), SCALABLE, source, what="parameter")
                raise InputError(e.message, source, f"{where}.{name}.{p}")
    out = dict(base)
    for p, f in scale.items():
        f = float(_number(f, source, f"{where}.scale.{p}"))
        fitted = out.get(p if p != "fp8_gemm_max" or "fp8_gemm_max" in out else "gemm_max")
        if fitted is not None:
            out[p] = round(float(fitted) * f, 4)
            if not 0 < out[p] <= 1:
                raise InputError(
                    f"scales {sib}'s {p} of {fitted} to {out[p]}; expected a fraction of peak in (0, 1]",
                    source,
                    f"{where}.scale.{p}",
                )
        scale[p] = f
    for p, g in measured_as.items():
        if not isinstance(g, str) or g not in data:
            e = unknown_key_error(str(g), data, source, what="GPU")
            raise InputError(e.message, source, f"{where}.measured_as.{p}")
    return out, dict(scale), {str(k): str(v) for k, v in measured_as.items()}


def check_precision(precision: str, gpu: GpuSpec) -> None:
    """Refuse a precision ``gpu``'s tensor cores cannot run (``--precision`` of ``podsim llm``,
    ``search``, ``infer`` and ``serve-llm``): fp8 needs fp8 tensor cores (Ada, Hopper and
    later), the block-scaled formats (mxfp8, nvfp4) Blackwell's microscaling ones (an fp4
    peak).  (Serving engines run fp8 checkpoints on Ampere as weight-only kernels, fp8
    weights computed in bf16; podsim does not model those.)

    Raises:
        InputError: naming the precision, the GPU and what to use instead.
    """
    if precision in ("mxfp8", "nvfp4") and "fp4" not in gpu.peak_tflops:
        raise InputError(
            f"--precision {precision} needs block-scaled (microscaling) tensor cores, which the "
            f"{gpu.name} lacks: use fp8 there, or a Blackwell GPU (b200, b300, gb200, gb300)"
        )
    if precision in ("fp8", "fp8-rowwise") and "fp8" not in gpu.peak_tflops:
        raise InputError(
            f"--precision {precision} needs fp8 tensor cores, which the {gpu.name} lacks (its peaks: "
            f"{', '.join(gpu.peak_tflops)}): use bf16 there, or a GPU with fp8 (Ada, Hopper, Blackwell, MI300)"
        )


def gpu_specs(path: str | Path | None = None) -> dict[str, GpuSpec]:
    """Every GPU in a gpus.yaml-style file, by key (``a100-80gb``, ``h100-80gb``, ...).

    Args:
        path: a YAML file of the same form as the shipped ``hardware/gpus.yaml``; None reads the
            shipped one.

    Raises:
        InputError: for a missing or malformed file, naming the GPU and key at fault (an unknown
            key included).
    """
    if path is None:
        text = (resources.files("podsim.hardware") / "gpus.yaml").read_text()
        source = "podsim/hardware/gpus.yaml"
    else:
        p = Path(path)
        if not p.exists():
            raise InputError("no such GPU file", str(p))
        text, source = read_text(p, "GPU file"), str(p)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, source, column=False) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping of GPU key -> spec", source)
    specs = {str(key): _spec(str(key), d, data, source) for key, d in data.items()}
    seen: dict[str, str] = {}
    for key, spec in specs.items():
        for name in spec.aliases:
            other = seen.get(name) or (name if name in specs and name != key else None)
            if other is not None:
                raise InputError(f"alias {name!r} names both {other} and {key}", source, f"{key}.aliases")
            seen[name] = key
    return specs


@lru_cache(maxsize=1)
def gpu_registry() -> Registry[GpuSpec]:
    """The shipped GPUs (``hardware/gpus.yaml``) by key, with their ``aliases:`` and their
    datasheet names (lower case) as other names.  Adding a GPU is one entry in that file."""
    reg: Registry[GpuSpec] = Registry("GPU", flag="--gpu")
    specs = gpu_specs()
    for key, spec in specs.items():
        reg.register(key, spec, aliases=spec.aliases)
    for key, spec in specs.items():
        if spec.name.lower() not in reg:
            reg.alias(spec.name.lower(), key)
    return reg


def gpu_of_device(name: str) -> GpuSpec | None:
    """The GPU a device name as drivers report it names (``NVIDIA H100 80GB HBM3``, the
    profiler's ``deviceProperties``), or None: the longest run of its words, joined by ``-``
    or a space, that is a GPU key or alias."""
    words = name.lower().replace("nvidia", " ").split()
    reg = gpu_registry()
    for n in range(len(words), 0, -1):
        for i in range(len(words) - n + 1):
            for sep in ("-", " "):
                cand = sep.join(words[i : i + n])
                if cand in reg:
                    return reg.get(cand)
    return None


def get_gpu(name: str) -> GpuSpec:
    """A GPU by key, its datasheet name, or a short alias (``a100`` = ``a100-80gb``).

    Raises:
        InputError: for an unknown GPU, suggesting the closest key.
    """
    reg = gpu_registry()
    if name.lower() not in reg:
        raise unknown_key_error(name, reg.names(), None, what="GPU")
    return reg.get(name.lower())
