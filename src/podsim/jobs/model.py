"""The model of a job: a zoo model by name, or a HuggingFace-style ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param


@dataclass(frozen=True)
class ModelChoice:
    """Exactly one of ``model`` (a zoo name) and ``model_config`` (a file path)."""

    model: str | None = param(Param("model", "name", metavar="NAME", exclusive="model",
                                    help="a zoo model (podsim llm --list shows them)"))
    model_config: str | None = param(Param("model-config", "path", metavar="FILE", exclusive="model",
                                           help="a HuggingFace-style config.json"))
