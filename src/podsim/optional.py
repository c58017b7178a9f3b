"""Optional dependencies (torch, torchvision, transformers): imported when a feature needs
them, with a clear error saying what to install when they are missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import InputError

_INSTALL = {
    "torch": "pip install torch (pip install torch==2.13.0 takes the CPU build on this project's "
    "machines; a CUDA build on a GPU machine)",
    "torchvision": "pip install torchvision",
    "transformers": "pip install transformers",
    "ray": "pip install podsim[ray]",
}


def require(module: str, purpose: str, where: str | None = None) -> ModuleType:
    """Import ``module`` or raise an :class:`InputError` saying ``purpose`` needs it and how to
    install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise InputError(f"{purpose} needs {top}: {_INSTALL.get(top, f'pip install {top}')}", where=where) from None
