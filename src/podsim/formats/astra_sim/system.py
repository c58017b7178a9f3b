"""ASTRA-sim system JSON -> :class:`SystemConfig`.

Every key ASTRA-sim 2.x reads is accepted; keys it merely tolerates (``boost-mode``,
``intra-dimension-scheduling``, ``inter-dimension-scheduling``) are accepted and recorded in
``SystemConfig.ignored``.  Any other key is an error that names the closest valid key:
ASTRA-sim silently ignores a misspelling, podsim does not.

Units: ``endpoint-delay`` ns; ``local-mem-bw`` GB/s with GB = 10^9 B (unlike the network's
GiB); ``peak-perf`` TFLOP/s.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from ...collectives.plan import Algo
from ...collectives.registry import PHASE_ALGORITHMS, one_name, phase_spellings
from ...errors import InputError, closest
from ...units import MAX_BYTES, MAX_NS
from ...workload.ops import CollectiveKind
from .common import check_keys, get_bool01, get_choice, get_float, get_int, load_json

IMPL_KEYS = {
    "all-reduce-implementation": CollectiveKind.ALL_REDUCE,
    "reduce-scatter-implementation": CollectiveKind.REDUCE_SCATTER,
    "all-gather-implementation": CollectiveKind.ALL_GATHER,
    "all-to-all-implementation": CollectiveKind.ALL_TO_ALL,
}
CUSTOM_KEYS = {k + "-custom": v for k, v in IMPL_KEYS.items()}
IGNORED_KEYS = ("boost-mode", "intra-dimension-scheduling", "inter-dimension-scheduling")
KEYS = (
    "scheduling-policy",
    "collective-optimization",
    "local-reduction-delay",
    "active-chunks-per-dimension",
    "preferred-dataset-splits",
    "endpoint-delay",
    "L",
    "o",
    "g",
    "G",
    "model-shared-bus",
    "local-mem-bw",
    "peak-perf",
    "roofline-enabled",
    "trace-enabled",
    "replay-only",
    "track-local-mem",
    "local-mem-trace-filename",
    "per-node-custom-implementation",
    *IMPL_KEYS,
    *CUSTOM_KEYS,
    *IGNORED_KEYS,
)
AlgorithmSpec = Algo
"""A native collective algorithm for one dimension (``name``, and ``window`` for direct)."""


def _names() -> dict[str, str]:
    """Every spelling a system JSON may use (lower case) -> the algorithm name it stands for:
    the registered algorithms, their aliases (NCCL's names for them) and their ``one*`` forms."""
    out: dict[str, str] = {}
    for name, cls in PHASE_ALGORITHMS.items():
        for spelling in (name, *PHASE_ALGORITHMS.aliases(name)):
            out[spelling.lower()] = name
            if cls.has_one_variant:
                out[one_name(spelling).lower()] = one_name(name)
    return out


def _windowed() -> re.Pattern[str]:
    """``directK`` and ``oneDirectK`` for every algorithm that takes a window."""
    names = "|".join(re.escape(n) for n, cls in PHASE_ALGORITHMS.items() if cls.windowed)
    return re.compile(rf"^(one)?({names})(\d*)$", re.IGNORECASE)


def parse_algorithm(text: object, source: str, where: str) -> AlgorithmSpec:
    """Parse one algorithm string, e.g. ``"ring"``, ``"direct4"``, ``"oneHalvingDoubling"``
    (any name of :data:`~podsim.collectives.registry.PHASE_ALGORITHMS`, in any case)."""
    if not isinstance(text, str):
        raise InputError(f"expected an algorithm name, got {text!r}", source, where)
    m = _windowed().match(text)
    if m:
        name = next(n for n in PHASE_ALGORITHMS if n.lower() == m.group(2).lower())
        window = int(m.group(3)) if m.group(3) else -1
        if m.group(3) and window < 1:
            raise InputError(f"{name} window must be >= 1, got {text!r}", source, where)
        return AlgorithmSpec(one_name(name) if m.group(1) else name, window)
    name = _names().get(text.lower())
    if name is not None:
        return AlgorithmSpec(name)
    spellings = phase_spellings()
    hint = closest(text, spellings)
    msg = f"unknown collective algorithm {text!r}" + (
        f"; did you mean {hint!r}?" if hint else f"; expected one of {', '.join(spellings)}"
    )
    raise InputError(msg, source, where)


@dataclass
class SystemConfig:
    """ASTRA-sim's system layer settings (see module docstring for units)."""

    scheduling_policy: str = "LIFO"
    collective_optimization: str = "baseline"
    local_reduction_delay: int = 1
    active_chunks_per_dimension: int = 1
    preferred_dataset_splits: int = 1
    endpoint_delay_ns: int = 10
    endpoint_delay_given: bool = False
    loggp: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # L, o, g, G
    model_shared_bus: bool = False
    local_mem_bw_GBps: float | None = None
    peak_perf_TFLOPS: float | None = None
    roofline_enabled: bool = False
    trace_enabled: bool = False
    replay_only: bool = False
    track_local_mem: bool = False
    local_mem_trace_filename: str = "local_mem_trace"
    implementations: dict[CollectiveKind, tuple[AlgorithmSpec, ...]] = field(default_factory=dict)
    custom_implementations: dict[CollectiveKind, str] = field(default_factory=dict)
    per_node_custom_implementation: str | None = None
    ignored: dict[str, object] = field(default_factory=dict)
    source: str = "<system>"

    def algorithms(self, kind: CollectiveKind) -> tuple[AlgorithmSpec, ...]:
        """The per-dimension algorithms configured for ``kind`` (ring if none given)."""
        return self.implementations.get(kind, (AlgorithmSpec("ring"),))


def parse_system(data: dict, source: str = "<system>", base_dir: str | None = None) -> SystemConfig:
    """Build a :class:`SystemConfig` from an already-loaded JSON object."""
    check_keys(data, KEYS, source)
    cfg = SystemConfig(source=source)
    cfg.scheduling_policy = get_choice(data, "scheduling-policy", "LIFO", ("LIFO", "FIFO", "EXPLICIT"), source)  # type: ignore[assignment]
    cfg.collective_optimization = get_choice(
        data, "collective-optimization", "baseline", ("baseline", "localBWAware"), source
    )  # type: ignore[assignment]
    cfg.local_reduction_delay = get_int(data, "local-reduction-delay", 1, source, lo=0, hi=int(MAX_NS))  # type: ignore[assignment]
    cfg.active_chunks_per_dimension = get_int(data, "active-chunks-per-dimension", 1, source, lo=1, hi=1 << 20)  # type: ignore[assignment]
    cfg.preferred_dataset_splits = get_int(data, "preferred-dataset-splits", 1, source, lo=1, hi=1 << 20)  # type: ignore[assignment]
    cfg.endpoint_delay_ns = get_int(data, "endpoint-delay", 10, source, lo=0, hi=int(MAX_NS))  # type: ignore[assignment]
    cfg.endpoint_delay_given = "endpoint-delay" in data
    cfg.loggp = tuple(get_float(data, k, 0.0, source, lo=0.0, hi=MAX_NS) for k in ("L", "o", "g", "G"))  # type: ignore[assignment]
    cfg.model_shared_bus = get_bool01(data, "model-shared-bus", False, source)
    if "local-mem-bw" in data:
        cfg.local_mem_bw_GBps = get_float(data, "local-mem-bw", None, source, positive=True, hi=MAX_BYTES / 1e9)
    if "peak-perf" in data:
        cfg.peak_perf_TFLOPS = get_float(data, "peak-perf", None, source, positive=True, hi=1e9)
    cfg.roofline_enabled = get_bool01(data, "roofline-enabled", False, source)
    cfg.trace_enabled = get_bool01(data, "trace-enabled", False, source)
    cfg.replay_only = get_bool01(data, "replay-only", False, source)
    cfg.track_local_mem = get_bool01(data, "track-local-mem", False, source)
    if "local-mem-trace-filename" in data:
        cfg.local_mem_trace_filename = str(data["local-mem-trace-filename"])
    for key, kind in IMPL_KEYS.items():
        if key in data:
            v = data[key]
            items = v if isinstance(v, list) else [v]
            if not items:
                raise InputError("empty list: expected one algorithm per dimension", source, key)
            cfg.implementations[kind] = tuple(parse_algorithm(x, source, f"{key}[{i}]") for i, x in enumerate(items))
    for key, kind in CUSTOM_KEYS.items():
        if key in data:
            v = data[key]
            items = v if isinstance(v, list) else [v]
            if len(items) != 1 or not isinstance(items[0], str):
                raise InputError("expected a list of exactly one Chakra ET prefix", source, key)
            cfg.custom_implementations[kind] = _resolve(items[0], base_dir)
    if "per-node-custom-implementation" in data:
        v = data["per-node-custom-implementation"]
        if not isinstance(v, str):
            raise InputError(
                "expected the path of a YAML file {node id: ET prefix}", source, "per-node-custom-implementation"
            )
        cfg.per_node_custom_implementation = _resolve(v, base_dir)
    for key in IGNORED_KEYS:
        if key in data:
            v = data[key]
            if not isinstance(v, (str, int, float)) or (isinstance(v, float) and not math.isfinite(v)):
                raise InputError(f"expected a name or a finite number (the key is ignored), got {v!r}", source, key)
            cfg.ignored[key] = v
    if cfg.roofline_enabled and (cfg.local_mem_bw_GBps is None or cfg.peak_perf_TFLOPS is None):
        raise InputError(
            "roofline-enabled needs 'local-mem-bw' (GB/s) and 'peak-perf' (TFLOP/s)", source, "roofline-enabled"
        )
    return cfg


def _resolve(path: str, base_dir: str | None) -> str:
    """Find a custom-collective ET prefix or file.

    ASTRA-sim resolves relative paths against its working folder (usually its repo root).
    podsim tries the path as given, then relative to the config file's folder, then each
    shorter tail of the path relative to that folder (so ``examples/system/x/y`` next to a
    config in ``.../system/`` is found as ``.../system/x/y``).  If nothing matches, the path is
    returned unchanged and the error comes when it is read.
    """

    def exists(p: str) -> bool:
        return os.path.exists(p) or os.path.exists(p + ".0.et")

    if os.path.isabs(path) or base_dir is None or exists(path):
        return path
    parts = path.replace("\\", "/").split("/")
    for k in range(len(parts)):
        cand = os.path.join(base_dir, *parts[k:])
        if exists(cand):
            return cand
    return path


def read_system(path: str | os.PathLike[str]) -> SystemConfig:
    """Read an ASTRA-sim system JSON file."""
    path = str(path)
    return parse_system(load_json(path), path, os.path.dirname(os.path.abspath(path)))
