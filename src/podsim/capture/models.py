"""What ``podsim trace --model`` names: a torchvision model, a HuggingFace model built from a
local config (no download), or the user's own ``module:callable``.

Each resolves to a :class:`TrainingSetup`: the model, one batch of inputs and targets, and the
loss.  torch (and torchvision / transformers for those kinds) are imported here only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..optional import require


@dataclass
class TrainingSetup:
    """A model with one batch: ``loss_fn(model, inputs, targets)`` returns the loss tensor."""

    name: str
    model: Any
    inputs: Any
    targets: Any
    loss_fn: Callable[[Any, Any, Any], Any]


def torch_module() -> Any:
    """torch, or a clear error saying how to get it."""
    return require("torch", "capturing a trace")


@functools.lru_cache(maxsize=1)
def _torchvision_op_stubs() -> Any:
    """Declare torchvision's two custom ops that its import registers fake kernels for.

    torchvision's wheels on PyPI for Linux are CUDA builds whose compiled ops cannot load beside
    a CPU-only torch; ``import torchvision`` then fails with "operator torchvision::nms does not
    exist" although its model definitions are plain Python.  Declaring the ops' schemas (no
    kernels: calling them raises) lets the import finish.  The library handle is cached because
    torch drops the declarations when it is garbage-collected.
    """
    torch = torch_module()
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        if not hasattr(torch.ops.torchvision, op):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return lib


def torchvision_models() -> Any:
    """``torchvision.models``, also beside a CPU-only torch whose build torchvision's compiled
    ops do not match (see :func:`_torchvision_op_stubs`).

    Raises:
        InputError: torchvision is not installed.
    """
    try:
        return require("torchvision.models", "torchvision models", "--model")
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    _torchvision_op_stubs()
    return require("torchvision.models", "torchvision models", "--model")


def transformers_module() -> Any:
    """transformers, importable beside a CPU-only torch (it imports torchvision when that is
    installed: see :func:`torchvision_models`).

    Raises:
        InputError: transformers is not installed.
    """
    transformers = require("transformers", "HuggingFace models", "--model")
    if importlib.util.find_spec("torchvision") is not None:
        torchvision_models()
    return transformers


#: the sizes of a HuggingFace config that must be whole numbers >= 1 where given
HF_SIZES = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "n_layer",
    "n_embd",
    "n_head",
    "n_positions",
)


def hf_config(path: str) -> tuple[Any, Any]:
    """The transformers module and the config read from ``path`` (a config.json, or its folder).

    Raises:
        InputError: naming the file: it does not exist, or a size (:data:`HF_SIZES`) is not a
            whole number >= 1."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such config file", path, "--model")
    transformers = transformers_module()
    config = transformers.AutoConfig.from_pretrained(str(p.parent if p.name == "config.json" else p))
    for key in HF_SIZES:
        v = getattr(config, key, None)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{key} must be a whole number >= 1, got {v!r}", path, key)
    return transformers, config


def user_callable(module: str, name: str) -> Callable[..., Any]:
    """The callable ``name`` of ``module`` (``--model module:callable``).

    Raises:
        InputError: the module cannot be imported, or has no such callable.
    """
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise InputError(f"cannot import module {module!r}: {e}", where="--model") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise InputError(f"module {module!r} has no callable {name!r}", where="--model")
    return fn


def _cross_entropy(model: Any, x: Any, y: Any) -> Any:
    torch = torch_module()
    return torch.nn.functional.cross_entropy(model(x), y)


def resolve(spec: str, batch_size: int, seq_len: int = 128, image_size: int = 224) -> TrainingSetup:
    """The model ``spec`` names, with a random batch of ``batch_size``.

    ``torchvision:NAME`` (images of ``image_size``, 1,000 classes); ``hf:CONFIG.json`` (a causal
    LM built from the config, random tokens of ``seq_len``); ``module:callable`` with
    ``callable(batch_size)`` returning ``(model, inputs, targets)`` (cross-entropy loss) or
    ``(model, inputs, targets, loss_fn)``.

    Raises:
        InputError: for an unknown kind, a missing package, a callable that is not found, or
            any error while building the model (its type and message; ``--debug`` shows where).
    """
    try:
        return _resolve(spec, batch_size, seq_len, image_size)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's or a library's code: say what failed, cleanly
        raise InputError(f"building {spec} failed: {type(e).__name__}: {e}", where="--model") from e


def _resolve(spec: str, batch_size: int, seq_len: int, image_size: int) -> TrainingSetup:
    """:func:`resolve` without the error wrapping."""
    torch = torch_module()
    if batch_size < 1:
        raise InputError(f"the batch size must be at least 1, got {batch_size}", where="--batch-size")
    kind, _, rest = spec.partition(":")
    if not rest:
        raise InputError(
            f"model {spec!r}: expected torchvision:NAME, hf:CONFIG.json or module:callable", where="--model"
        )
    if kind == "torchvision":
        tv = torchvision_models()
        if not hasattr(tv, rest):
            raise InputError(f"torchvision has no model {rest!r}", where="--model")
        model = getattr(tv, rest)(weights=None)
        x = torch.randn(batch_size, 3, image_size, image_size)
        y = torch.randint(0, 1000, (batch_size,))
        return TrainingSetup(spec, model, x, y, _cross_entropy)
    if kind == "hf":
        transformers, config = hf_config(rest)
        model = transformers.AutoModelForCausalLM.from_config(config)
        x = torch.randint(0, int(config.vocab_size), (batch_size, seq_len))
        return TrainingSetup(spec, model, x, x, lambda m, a, b: m(input_ids=a, labels=b).loss)
    got = user_callable(kind, rest)(batch_size)
    if not isinstance(got, tuple) or len(got) not in (3, 4):
        raise InputError(f"{spec}({batch_size}) must return (model, inputs, targets[, loss_fn])", where="--model")
    loss = got[3] if len(got) == 4 else _cross_entropy
    return TrainingSetup(spec, got[0], got[1], got[2], loss)
