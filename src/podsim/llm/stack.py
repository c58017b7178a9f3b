"""Software-stack and interference parameters of a training step (``llm/stack.yaml``).

``host_ns``: CPU ns to launch one kernel; ``gemm_efficiency`` / ``attention_efficiency``: the
throughput GEMMs and fused attention reach in a whole training step relative to the compute
model's kernels; ``*_compute_slowdown``: the fraction a kernel slows
while an overlapped collective runs beside it; ``*_comm_slowdown``: the fraction the collective
slows.  ``te_*`` is Transformer Engine's TP communication overlap, ``nccl_*`` NCCL collectives
on their own stream (data-parallel, pipeline, bulk TP overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import InputError
from ..fileio import load_yaml
from ..hardware.gpu import get_gpu
from ..stacks.stack import SoftwareStack

#: a stack.yaml value read from the GPU's shipped measured training steps
#: (``compute/tables/steps/<gpu>.csv``) instead of written down
MEASURED = "measured"
IN_STEP = ("gemm_efficiency", "attention_efficiency")


#: the in-step efficiencies measured on each GPU with shipped training steps, as
#: ``scripts/in_step_efficiency.py`` computes them from ``compute/tables/steps/<gpu>.csv`` (a test
#: recomputes them): data, so that this module needs nothing that simulates
IN_STEP_FILE = "compute/tables/steps/in_step_efficiency.yaml"


def measured_values(gpu_key: str, keys: list[str]) -> dict[str, float]:
    """The values of ``keys`` (``gemm_efficiency``, ``attention_efficiency``) measured in whole
    training steps on ``gpu_key`` (:data:`IN_STEP_FILE`; how: docs/compute.md, "Measured
    training steps").

    Raises:
        InputError: a key that is not measured, or a GPU without shipped measurements.
    """
    other = [k for k in keys if k not in IN_STEP]
    if other:
        raise InputError(
            f"{other[0]} cannot be 'measured' (only {', '.join(IN_STEP)} are read from measured training steps)",
            "podsim/llm/stack.yaml",
            gpu_key,
        )
    got = in_step_table().get(gpu_key)
    if got is None:
        raise InputError(
            f"llm/stack.yaml asks for {gpu_key}'s measured in-step efficiency, but podsim ships no "
            f"measured training steps of {gpu_key} (compute/tables/steps/{gpu_key}.csv)",
            "podsim/llm/stack.yaml",
        )
    return {k: float(got[k]) for k in keys}


@lru_cache(maxsize=None)
def _shipped_yaml(package: str, name: str) -> Any:
    """A YAML file shipped in ``package``, parsed once (callers read it, never change it)."""
    return load_yaml((resources.files(package) / name).read_text())


def in_step_table() -> dict[str, dict[str, float]]:
    """GPU key -> its measured ``gemm_efficiency`` and ``attention_efficiency`` (:data:`IN_STEP_FILE`)."""
    data = _shipped_yaml("podsim", IN_STEP_FILE) or {}
    return {str(k): dict(v) for k, v in data.items()}


def _resolved(value: float | str, gpu_key: str, key: str) -> float:
    """A stack.yaml value, ``measured`` read from the GPU's measured training steps."""
    return measured_values(gpu_key, [key])[key] if value == MEASURED else float(value)


def interpolate_log(table: tuple[tuple[float, float], ...], x: float) -> float:
    """``table``'s value at ``x`` (points ``(x_i, y_i)`` ascending in x), linear in log(x)
    between points, the end values held beyond the ends; 1 for an empty table."""
    if not table:
        return 1.0
    if x <= table[0][0]:
        return table[0][1]
    for (x0, y0), (x1, y1) in zip(table, table[1:]):
        if x <= x1:
            t = math.log(x / x0) / math.log(x1 / x0)
            return y0 + t * (y1 - y0)
    return table[-1][1]


def _architecture(gpu_key: str) -> str:
    """The architecture of a shipped GPU (``ampere``, ``hopper``, ...); '' for a GPU of the user's
    own file (a per-architecture stack value takes its ``default`` there)."""
    try:
        return get_gpu(gpu_key).architecture
    except InputError:
        return ""


#: the GPU on which ``llm/stack.yaml``'s ``fp8_rowwise_overhead`` was measured (torchao's rowwise
#: kernel measurements, ``compute/tables/fp8_rowwise_h100.csv``)
FP8_ROWWISE_GPU = "h100-80gb"


@dataclass(frozen=True)
class Stack:
    """How the software stack and overlapped communication cost time."""

    host_ns: float = 130000.0
    #: achieved GEMM / fused-attention throughput in a training step over the compute
    #: model's (sustained clocks under a full step's power draw, the attention kernels of the
    #: stack): kernel times are divided by it
    gemm_efficiency: float = 1.0
    attention_efficiency: float = 1.0
    te_compute_slowdown: float = 0.10
    te_comm_slowdown: float = 0.10
    nccl_compute_slowdown: float = 0.16
    nccl_comm_slowdown: float = 0.10
    #: time of the memory-bound elementwise kernels relative to Transformer Engine's fused ones
    elementwise_traffic: float = 1.0
    #: time of the fp8 cast / transpose / amax kernels relative to Transformer Engine's
    fp8_overhead: float = 1.0
    #: time of a rowwise-scaled fp8 recipe's casts and transposes (``--precision fp8-rowwise``)
    #: relative to the memory roofline of the bytes they move
    fp8_rowwise_overhead: float = 1.0
    #: the software stack's fused-attention efficiency by sequence length, ((tokens, x), ...)
    #: ascending (empty: none; ``attention_efficiency`` alone)
    attention_by_seq: tuple[tuple[float, float], ...] = ()

    @classmethod
    def for_gpu(cls, gpu_key: str, software: SoftwareStack | None = None, **override: float) -> "Stack":
        """The parameters for ``gpu_key`` (the ``default`` entry unless the GPU has its own) under
        the software stack ``software`` (None: Megatron-Core's, the GPU's own values): its
        ``host_ns`` replaces the GPU's, its efficiencies (for the GPU's architecture) multiply the
        GPU's in-step ones, its ``elementwise_traffic`` and ``fp8_overhead`` scale those kernels;
        ``override`` last."""
        data = _shipped_yaml("podsim.llm", "stack.yaml")
        values = dict(data.get("default") or {})
        own = data.get(gpu_key) or {}
        if isinstance(own, str):  # the name of the GPU whose parameters this one shares
            own = data.get(own) or {}
        values.update(own)
        by_seq: tuple[tuple[float, float], ...] = ()
        if software is not None:
            arch = _architecture(gpu_key)
            for key in ("gemm_efficiency", "attention_efficiency"):
                rel = software.value_for(key, arch)
                if key in override:
                    continue
                if isinstance(rel, dict):  # a table by sequence length: the kernel's length picks
                    by_seq, rel = tuple((float(n), float(x)) for n, x in sorted(rel.items())), 1.0
                if rel is not None:
                    values[key] = _resolved(values[key], gpu_key, key) * rel
            for key in ("host_ns", "elementwise_traffic", "fp8_overhead", "fp8_rowwise_overhead"):
                if software.get(key) is not None:
                    values[key] = software.get(key)
        values.update(override)
        known = {f.name for f in fields(cls)}
        bad = sorted(set(values) - known)
        if bad:
            raise InputError(
                f"unknown stack parameter {bad[0]!r} (known: {', '.join(sorted(known))})", "podsim/llm/stack.yaml"
            )
        wanted = sorted(k for k, v in values.items() if v == MEASURED)
        if wanted:
            values.update(measured_values(gpu_key, wanted))
        return cls(**{k: float(v) for k, v in values.items()}, attention_by_seq=by_seq)

    def attention_efficiency_at(self, seq: float) -> float:
        """``attention_efficiency`` for a fused-attention kernel over ``seq`` keys (tokens): times
        the stack's table by sequence length where it has one (interpolated in log(seq), the end
        values held beyond the ends)."""
        return self.attention_efficiency * interpolate_log(self.attention_by_seq, seq)

    def kernel_scale(self, module: str, rowwise: bool = False) -> float:
        """How much slower than Transformer Engine's a memory-bound kernel of ``module`` runs
        under this stack (the optimizer's fused Adam as Megatron's); ``rowwise``: the fp8 casts
        are a rowwise-scaled recipe's."""
        if module == "fp8":
            return self.fp8_rowwise_overhead if rowwise else self.fp8_overhead
        if module == "optimizer":
            return 1.0
        return self.elementwise_traffic

    def overlapped_ns(self, compute_ns: float, comm_ns: float, engine: str, chunks: int = 1) -> float:
        """How long a kernel of ``compute_ns`` lasts when a collective of ``comm_ns`` runs
        beside it (``engine``: ``te`` or ``nccl``): the longer of the two, slowed while both
        run, plus the chunk of a pipelined (``chunks``) overlap that cannot hide."""
        a = self.te_compute_slowdown if engine == "te" else self.nccl_compute_slowdown
        b = self.te_comm_slowdown if engine == "te" else self.nccl_comm_slowdown
        c = comm_ns * (1 + b)
        both = min(compute_ns, c)
        return max(compute_ns + a * both, c) + (both / chunks if chunks > 1 else 0.0)
