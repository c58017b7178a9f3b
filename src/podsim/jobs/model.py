"""The model of a job: a zoo model by name, or a HuggingFace-style ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass

from ..llm.model import ModelConfig, load_model
from ..params import Param, param

#: ``--model`` and ``--model-config``: the same in every subcommand that takes a model
MODEL = Param("model", "name", metavar="NAME", exclusive="model", help="a zoo model (podsim llm --list shows them)")
MODEL_CONFIG = Param("model-config", "path", metavar="FILE", exclusive="model", help="a HuggingFace-style config.json")


@dataclass(frozen=True)
class ModelChoice:
    """Exactly one of ``model`` (a zoo name) and ``model_config`` (a file path)."""

    model: str | None = param(MODEL)
    model_config: str | None = param(MODEL_CONFIG)

    def load(self) -> ModelConfig:
        """The model: the zoo's, or read from the config file.

        Raises:
            InputError: neither or both given, an unknown name, a bad file."""
        return load_model(self.model, self.model_config)
