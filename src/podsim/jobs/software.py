"""The software stack a job runs on (``--stack``): a preset name (``podsim stack --list``) or a
stack YAML file (docs/stacks.md).  Training jobs default to ``megatron-core``; serving jobs
to none (the GPU's kernels and ``--host-overhead-ms`` alone)."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param
from ..stacks.stack import DEFAULT_TRAINING

#: ``--stack`` of the training jobs (llm, search, sweep)
TRAINING_STACK = Param(
    "stack",
    "name",
    DEFAULT_TRAINING,
    metavar="NAME|FILE.yaml",
    help="the software stack: a preset (podsim stack --list: megatron-core (default), nemo, megatron-lm, "
    "megatron-lm-2021, torchtitan, torchtitan-compile, fsdp, fsdp-compile, composer, deepspeed) or a stack "
    "YAML (podsim calibrate writes one); its framework rules fill the layout flags left at their defaults",
)
#: ``--stack`` of the serving jobs (infer, serve-llm)
SERVING_STACK = Param(
    "stack",
    "name",
    None,
    metavar="NAME|FILE.yaml",
    help="the serving engine's stack: a preset (podsim stack --list: vllm, vllm-v0-eager, sglang, "
    "tensorrt-llm) or a stack YAML; default none (the GPU's kernels, --host-overhead-ms alone); "
    "--host-overhead-ms given wins over its",
)


@dataclass(frozen=True)
class TrainingSoftware:
    """The software stack of a training job."""

    stack: str = param(TRAINING_STACK)


@dataclass(frozen=True)
class ServingSoftware:
    """The software stack of a serving job."""

    stack: str | None = param(SERVING_STACK)
