"""Model executables for serving and the profiles they come from.

An executable is one way to run a model: its pipeline stages, each a sub-mesh shape
``(nodes, GPUs per node)`` whose GPUs all work on the stage (intra-op parallelism), and each
stage's latency for one request.  Profiles are YAML files::

    gpu: V100-SXM2-16GB            # what the latencies were measured on
    models:
      Bert_2.6B:
        parameters: 2.6e9          # for memory: weights = parameters x bytes_per_parameter
        bytes_per_parameter: 2
        executables:
          Bert_2.6B_2_device_inter: {stages: [[1, 1], [1, 1]], latencies_s: [0.0730, 0.0734]}
          # optional: measured memory per GPU of each stage (weights + activations), GB
          Bert_2.6B_1_device: {stages: [[1, 1]], latencies_s: [0.1452], memory_gb_per_gpu: [6.1]}

Without ``memory_gb_per_gpu`` a GPU of a stage is taken to hold the stage's share of the
weights (``parameters`` x ``bytes_per_parameter``, stages split evenly, split again over the
stage's GPUs).  An executable without ``latencies_s`` is estimated with podsim's compute model
(:mod:`podsim.serving.estimate`) when its model has an ``estimate:`` block::

    models:
      llama3-8b:
        estimate: {model: llama3-8b, gpu: h100, batch: 1, seq_len: 512, dtype: bf16}   # or hf_config: PATH
        executables:
          llama3-8b_1_device: {stages: [[1, 1]]}
          llama3-8b_2_device_intra: {stages: [[1, 2]]}

podsim ships DLSIM's V100 numbers (``dlsim-v100``, the default).  Units: latencies in integer
ns inside, seconds in files; memory in bytes.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml

from ..errors import InputError, yaml_error
from ..fileio import load_yaml
from ..hardware.gpu import get_gpu
from ..llm.model import from_hf_config, get_model
from .estimate import estimate_executable
from .executable import Executable

BUILTIN = "dlsim-v100"


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


#: the largest count, size (GB) or factor a profile may give
MAX_FIGURE = 1e15
#: the longest stage latency (s): beyond, times overflow int64 ns
MAX_LATENCY_S = 9.2e8


def _positive(x: object, source: str, where: str, zero_ok: bool = False, hi: float = MAX_FIGURE) -> float:
    """A finite positive number from YAML (``2.6e9`` may come as a string), at most ``hi``."""
    try:
        v = float(x) if isinstance(x, (int, float, str)) and not isinstance(x, bool) else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok) or v > hi:
        raise InputError(f"expected a finite positive number (at most {hi:.3g}), got {x!r}", source, where)
    return v


def _estimator(spec: object, source: str, where: str):  # type: ignore[no-untyped-def]
    """A function (name, stage shapes) -> Executable from an ``estimate:`` block:
    ``{model: ZOO_NAME | hf_config: PATH, gpu: NAME, batch: 1, seq_len: N, dtype: fp16}``."""
    if not isinstance(spec, dict) or "gpu" not in spec or ("model" not in spec) == ("hf_config" not in spec):
        raise InputError(
            "expected {model: NAME or hf_config: PATH, gpu: NAME, batch: B, seq_len: S, dtype: D}", source, where
        )
    try:
        model = get_model(str(spec["model"])) if "model" in spec else from_hf_config(str(spec["hf_config"]))
        gpu = get_gpu(str(spec["gpu"]))
    except InputError as e:
        raise InputError(e.message, source, where) from None
    batch, seq = spec.get("batch", 1), spec.get("seq_len")
    for key, v in (("batch", batch), ("seq_len", seq)):
        if v is not None and not (_is_int(v) and v > 0):
            raise InputError(f"{key} must be a positive whole number, got {v!r}", source, f"{where}.{key}")
    dtype = str(spec.get("dtype", "fp16"))

    def make(name: str, stages: list[tuple[int, int]]) -> Executable:
        try:
            return estimate_executable(name, model, gpu, stages, int(batch), int(seq) if seq else None, dtype)
        except InputError as e:
            raise InputError(e.message, source, f"{where} ({name})") from None

    return make


def load_profiles(path: str | Path | None = None) -> dict[str, Executable]:
    """Executables by name, from a profile YAML (default: the shipped DLSIM V100 profile).

    Raises:
        InputError: for a missing file or a malformed entry, naming the model, executable and
            field.
    """
    if path is None or str(path) == BUILTIN:
        text = resources.files("podsim.serving").joinpath("profiles", f"{BUILTIN}.yaml").read_text()
        source = f"{BUILTIN} (built in)"
    else:
        p = Path(path)
        if not p.is_file():
            raise InputError("no such profile file", str(p))
        try:
            text, source = p.read_bytes().decode("utf-8"), str(p)
        except UnicodeDecodeError:
            raise InputError("not a UTF-8 text file", str(p)) from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise yaml_error(e, source) from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise InputError("expected a mapping with 'models: {MODEL: {executables: {...}}}'", source)
    out: dict[str, Executable] = {}
    for model, m in data["models"].items():
        if not isinstance(m, dict) or not isinstance(m.get("executables"), dict):
            raise InputError(
                "expected 'executables: {NAME: {stages: ..., latencies_s: ...}}'", source, f"models.{model}"
            )
        weights = int(
            _positive(m.get("parameters", 0), source, f"models.{model}.parameters", zero_ok=True)
            * _positive(m.get("bytes_per_parameter", 2), source, f"models.{model}.bytes_per_parameter", hi=64)
        )
        est = _estimator(m.get("estimate"), source, f"models.{model}.estimate") if "estimate" in m else None
        for name, e in m["executables"].items():
            where = f"models.{model}.executables.{name}"
            if not isinstance(e, dict):
                raise InputError("expected {stages: [[nodes, gpus], ...], latencies_s: [...]}", source, where)
            stages, lats = e.get("stages"), e.get("latencies_s")
            if (
                not isinstance(stages, list)
                or not stages
                or not all(isinstance(s, list) and len(s) == 2 and all(_is_int(x) and x > 0 for x in s) for s in stages)
            ):
                raise InputError(
                    f"stages must be a list of [nodes, GPUs per node] pairs of positive integers, got {stages!r}",
                    source,
                    where,
                )
            if name in out:
                raise InputError(f"executable {name!r} is defined twice", source, where)
            if lats is None and est is not None:  # no measurement: podsim's compute model
                out[name] = est(str(name), [(int(a), int(b)) for a, b in stages])
                continue
            mem = e.get("memory_gb_per_gpu")
            if mem is not None and (not isinstance(mem, list) or len(mem) != len(stages)):
                raise InputError(
                    f"memory_gb_per_gpu must be {len(stages)} numbers (one per stage), got {mem!r}", source, where
                )
            stage_bytes = tuple(
                int(_positive(x, source, f"{where}.memory_gb_per_gpu", hi=1e9) * 1e9) for x in mem or []
            )
            if (
                not isinstance(lats, list)
                or len(lats) != len(stages)
                or not all(_is_number(x) and 0 < x <= MAX_LATENCY_S for x in lats)
            ):
                raise InputError(
                    f"latencies_s must be {len(stages)} positive numbers (one per stage), got {lats!r} "
                    "(or give the model an 'estimate:' block to have them estimated)",
                    source,
                    where,
                )
            out[name] = Executable(
                name,
                str(model),
                tuple((int(a), int(b)) for a, b in stages),
                tuple(round(float(x) * 1e9) for x in lats),
                weights,
                stage_bytes,
            )
    return out
