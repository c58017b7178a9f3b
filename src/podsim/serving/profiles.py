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

podsim ships DLSIM's V100 numbers (``dlsim-v100``, the default).  Units: latencies in integer
ns inside, seconds in files; memory in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from ..errors import InputError

BUILTIN = "dlsim-v100"


@dataclass(frozen=True)
class Executable:
    """One way to run ``model``: stage shapes and per-stage latencies (ns) for one request."""

    name: str
    model: str
    stage_shapes: tuple[tuple[int, int], ...]
    stage_latencies_ns: tuple[int, ...]
    weight_bytes: int = 0          #: the model's weights, all stages together

    @property
    def num_stages(self) -> int:
        return len(self.stage_shapes)

    def gpus(self, stage: int) -> int:
        nodes, per_node = self.stage_shapes[stage]
        return nodes * per_node

    def weight_bytes_per_gpu(self, stage: int) -> int:
        """Weights one GPU of ``stage`` holds: the stage's share (stages split the layers
        evenly), split again over the stage's GPUs."""
        return self.weight_bytes // self.num_stages // self.gpus(stage)


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
        text, source = p.read_text(), str(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML: {e}", source) from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise InputError("expected a mapping with 'models: {MODEL: {executables: {...}}}'", source)
    out: dict[str, Executable] = {}
    for model, m in data["models"].items():
        if not isinstance(m, dict) or not isinstance(m.get("executables"), dict):
            raise InputError("expected 'executables: {NAME: {stages: ..., latencies_s: ...}}'", source, f"models.{model}")
        weights = int(float(m.get("parameters", 0)) * float(m.get("bytes_per_parameter", 2)))
        for name, e in m["executables"].items():
            where = f"models.{model}.executables.{name}"
            if not isinstance(e, dict):
                raise InputError("expected {stages: [[nodes, gpus], ...], latencies_s: [...]}", source, where)
            stages, lats = e.get("stages"), e.get("latencies_s")
            if not isinstance(stages, list) or not stages or not all(
                    isinstance(s, list) and len(s) == 2 and all(isinstance(x, int) and x > 0 for x in s) for s in stages):
                raise InputError(f"stages must be a list of [nodes, GPUs per node] pairs of positive integers, got "
                                 f"{stages!r}", source, where)
            if not isinstance(lats, list) or len(lats) != len(stages) or not all(
                    isinstance(x, (int, float)) and x > 0 for x in lats):
                raise InputError(f"latencies_s must be {len(stages)} positive numbers (one per stage), got {lats!r}",
                                 source, where)
            if name in out:
                raise InputError(f"executable {name!r} is defined twice", source, where)
            out[name] = Executable(name, str(model), tuple((int(a), int(b)) for a, b in stages),
                                   tuple(round(float(x) * 1e9) for x in lats), weights)
    return out
