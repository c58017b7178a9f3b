"""LLM training workloads from model configurations: models, memory, layouts."""

from .model import ModelConfig, from_hf_config, get_model, zoo

__all__ = ["ModelConfig", "from_hf_config", "get_model", "zoo"]
