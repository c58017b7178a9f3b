"""The step times of an LLM on one replica (``podsim infer``): one prefill over a batch of
prompts, then the decode steps that generate the output tokens."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import JobSpec, Param, nested, param, params_of
from .hardware import Hardware
from .model import ModelChoice
from .replica import ReplicaOptions
from .software import ServingSoftware


@dataclass(frozen=True)
class Batch:
    """The batch: B sequences of N prompt tokens, each generating K tokens."""

    batch: int = param(Param("batch", "count", 1, metavar="B", help="sequences in the batch (default 1)"))
    prompt_tokens: int | None = param(Param("prompt-tokens", "count", metavar="N", help="tokens per prompt (required)"))
    output_tokens: int | None = param(
        Param("output-tokens", "count", metavar="K", help="tokens generated per sequence (required)")
    )


@dataclass(frozen=True)
class InferOutputs:
    """What ``podsim infer`` writes."""

    write_profile: str | None = param(
        Param(
            "write-profile",
            "path",
            metavar="DIR",
            sweep=False,
            help="first write podsim's compute-model times of this model, GPU and cluster as Vidur's profiling CSVs "
            "under DIR (TP 1, 2, 4, 8 and --tp), for Vidur or --profile",
        )
    )
    json: str | None = param(
        Param("json", "path", metavar="OUT", sweep=False, help="the result as JSON (fields: docs/serving-llm.md)")
    )


@dataclass(frozen=True)
class InferJob(JobSpec):
    """Everything one ``podsim infer`` run depends on."""

    model: ModelChoice = nested(ModelChoice)
    hardware: Hardware = nested(Hardware)
    replica: ReplicaOptions = nested(ReplicaOptions)
    software: ServingSoftware = nested(ServingSoftware)
    batch: Batch = nested(Batch)
    outputs: InferOutputs = nested(InferOutputs)


#: every parameter of ``podsim infer``, in --help order
INFER_PARAMS: tuple[Param, ...] = params_of(InferJob)
