"""Transformer model shapes: the zoo, HuggingFace ``config.json`` files, parameter counts.

A :class:`ModelConfig` is the shape of a decoder-only transformer: layers, hidden size,
attention heads (with grouped-query KV heads), MLP width and activation (GELU: two matrices;
SwiGLU: three), vocabulary, and optionally mixture-of-experts (routed experts of their own
width, top-k, shared experts, dense layers first).  Counts are plain integers (parameters).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import InputError, unknown_key_error
from ..fileio import load_json, load_yaml, read_text
from ..registry import Registry

#: the largest value each size may take (beyond any model trained; they bound the work and memory a
#: typo could ask for)
_MAX = {
    "layers": 100_000,
    "hidden": 1 << 20,
    "heads": 1 << 16,
    "ffn": 1 << 24,
    "vocab": 1 << 27,
    "seq_len": 1 << 24,
    "experts": 1 << 16,
}


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int  #: dense MLP width
    vocab: int
    seq_len: int = 2048  #: default / maximum sequence length
    kv_heads: int | None = None  #: grouped-query attention; None = heads
    head_dim: int | None = None  #: None = hidden / heads
    activation: str = "gelu"  #: gelu (2 matrices) | swiglu (3 matrices)
    bias: bool = True  #: linear biases (GPT) or none (LLaMA)
    learned_positions: bool = True  #: a learned position embedding (GPT) or rotary (LLaMA)
    tied_embeddings: bool = True  #: output layer shares the input embedding
    dropout: float = 0.1  #: hidden dropout (GPT / Megatron 0.1; LLaMA-style models 0)
    experts: int = 0  #: routed experts per MoE layer (0 = dense model)
    top_k: int = 0  #: routed experts per token
    moe_ffn: int | None = None  #: routed expert width (None = ffn)
    shared_experts: int = 0  #: always-active experts per MoE layer
    dense_layers: int = 0  #: leading layers that stay dense in an MoE model
    description: str = ""

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= _MAX[f]:
                raise InputError(
                    f"model {self.name!r}: {f} must be a positive integer (at most {_MAX[f]:,}), got {v!r}"
                )
        for f in ("kv_heads", "head_dim", "moe_ffn"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= _MAX["hidden"]):
                raise InputError(f"model {self.name!r}: {f} must be a positive integer or unset, got {v!r}")
        for f in ("experts", "top_k", "shared_experts", "dense_layers"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= _MAX["experts"]:
                raise InputError(
                    f"model {self.name!r}: {f} must be an integer from 0 to {_MAX['experts']:,}, got {v!r}"
                )
        if self.head_dim is None and self.hidden % self.heads:
            raise InputError(
                f"model {self.name!r}: hidden size {self.hidden} is not a multiple of its "
                f"{self.heads} attention heads (give head_dim when it is not hidden / heads)"
            )
        if self.dense_layers > self.layers:
            raise InputError(f"model {self.name!r}: {self.dense_layers} dense layers of {self.layers} in all")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise InputError(f"model {self.name!r}: dropout must be in [0, 1), got {self.dropout!r}")
        if self.activation not in ("gelu", "swiglu"):
            raise InputError(f"model {self.name!r}: activation must be gelu or swiglu, got {self.activation!r}")
        kv = self.kv
        if self.heads % kv:
            raise InputError(f"model {self.name!r}: {self.heads} attention heads are not a multiple of {kv} KV heads")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise InputError(f"model {self.name!r}: top_k must be 1..{self.experts}, got {self.top_k}")

    @property
    def kv(self) -> int:
        """KV heads."""
        return self.kv_heads or self.heads

    @property
    def dhead(self) -> int:
        """Head dimension."""
        return self.head_dim or self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn or self.ffn

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP (2 for GELU, 3 for SwiGLU)."""
        return 3 if self.activation == "swiglu" else 2

    # -- parameter counts ---------------------------------------------------------------------

    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer (with biases if the model has them)."""
        h, d = self.hidden, self.dhead
        q, kv = self.heads * d, self.kv * d
        w = h * q + 2 * h * kv + q * h
        b = (q + 2 * kv + h) if self.bias else 0
        return w + b

    def mlp_params(self, width: int | None = None) -> int:
        """One dense MLP of ``width`` (default ``ffn``)."""
        f = width or self.ffn
        w = self.mlp_matrices * self.hidden * f
        b = ((self.mlp_matrices - 1) * f + self.hidden) if self.bias else 0
        return w + b

    def norm_params(self) -> int:
        """The two norms of a layer (weight and, for GPT's LayerNorm, bias)."""
        return 2 * self.hidden * (2 if self.bias else 1)

    def is_moe_layer(self, i: int) -> bool:
        return self.moe and i >= self.dense_layers

    def layer_params(self, i: int) -> int:
        """All parameters of layer ``i`` (0-based)."""
        p = self.attention_params() + self.norm_params()
        if self.is_moe_layer(i):
            p += (self.experts + self.shared_experts) * self.mlp_params(self.expert_ffn)
            p += self.hidden * self.experts  # router
        else:
            p += self.mlp_params()
        return p

    def layer_matrix_params(self, i: int) -> int:
        """Only the weight matrices of layer ``i`` (every expert counted; no biases, norms)."""
        h, d = self.hidden, self.dhead
        att = 2 * h * self.heads * d + 2 * h * self.kv * d
        if self.is_moe_layer(i):
            return att + (self.experts + self.shared_experts) * self.mlp_matrices * h * self.expert_ffn
        return att + self.mlp_matrices * h * self.ffn

    def embedding_params(self) -> int:
        """Input embedding (+ learned positions)."""
        return self.vocab * self.hidden + (self.seq_len * self.hidden if self.learned_positions else 0)

    def output_params(self) -> int:
        """Final norm and (if untied) the output projection."""
        norm = self.hidden * (2 if self.bias else 1)
        return norm + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def total_params(self) -> int:
        """Every parameter of the model."""
        return self.embedding_params() + sum(self.layer_params(i) for i in range(self.layers)) + self.output_params()

    def active_params(self) -> int:
        """Parameters a token passes through (routed experts counted ``top_k`` times)."""
        total = self.embedding_params() + self.output_params()
        for i in range(self.layers):
            p = self.attention_params() + self.norm_params()
            if self.is_moe_layer(i):
                p += (self.top_k + self.shared_experts) * self.mlp_params(self.expert_ffn) + self.hidden * self.experts
            else:
                p += self.mlp_params()
            total += p
        return total

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


# -- the zoo ----------------------------------------------------------------------------------

_FIELDS = {f.name for f in fields(ModelConfig)}


@lru_cache(maxsize=1)
def model_registry() -> Registry[ModelConfig]:
    """The shipped models (``llm/models.yaml``) by name.  Adding a model is one entry there."""
    text = (resources.files("podsim.llm") / "models.yaml").read_text()
    reg: Registry[ModelConfig] = Registry("model", flag="--model")
    for name, spec in load_yaml(text).items():
        reg.register(name, ModelConfig(name=name, **spec))
    return reg


def zoo() -> dict[str, ModelConfig]:
    """The shipped models (``llm/models.yaml``), by name."""
    return dict(model_registry().items())


def get_model(name: str) -> ModelConfig:
    """A zoo model by name.

    Raises:
        InputError: for an unknown name, suggesting the closest.
    """
    models = model_registry()
    if name not in models:
        raise unknown_key_error(name, models.names(), None, what="model")
    return models.get(name)


# -- HuggingFace config.json ------------------------------------------------------------------

_REQUIRED_HF = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
#: HuggingFace ``hidden_act`` values and the MLP they mean
_ACTIVATIONS = {
    **{
        a: "gelu"
        for a in (
            "gelu",
            "gelu_new",
            "gelu_fast",
            "gelu_pytorch_tanh",
            "gelu_python",
            "gelu_accurate",
            "quick_gelu",
            "relu",
            "relu2",
            "gelu_10",
        )
    },
    **{a: "swiglu" for a in ("silu", "swish", "swiglu")},
}


def from_hf_config(path: str | Path) -> ModelConfig:
    """A model from a HuggingFace-style ``config.json`` (LLaMA, Mistral/Mixtral, Qwen, GPT-2/NeoX,
    DeepSeek-V3 style MoE keys).

    Raises:
        InputError: naming the file and the missing key or bad value.
    """
    src = str(path)
    data = load_json(read_text(path, "model config"), src)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", src)
    for key in _REQUIRED_HF:
        if key not in data:
            alt = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}.get(key)
            if alt and alt in data:
                data[key] = data[alt]
            else:
                raise InputError(f"missing key {key!r}", src, key)

    def count(key: str, default: object = None, zero: bool = False) -> int | None:
        """An integer field (a whole-number float such as 4096.0 is taken), named in errors."""
        v = data.get(key, default)
        if v is None:
            if key in _REQUIRED_HF:
                raise InputError("expected a positive integer, got null", src, key)
            return None
        ok = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
        if isinstance(v, bool) or not ok or not (0 if zero else 1) <= v <= 2**40:
            raise InputError(f"expected a {'non-negative' if zero else 'positive'} integer, got {v!r}", src, key)
        return int(v)

    def flag(key: str, default: bool) -> bool:
        """A true/false field (unset or null: ``default``)."""
        v = data.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise InputError(f"expected true or false, got {v!r}", src, key)
        return v

    def fraction(keys: tuple[str, ...], default: float) -> float:
        """The first of ``keys`` set (not null): a dropout probability in [0, 1)."""
        key = next((k for k in keys if data.get(k) is not None), None)
        if key is None:
            return default
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise InputError(f"expected a probability in [0, 1), got {v!r}", src, key)
        return float(v)

    h = count("hidden_size")
    act_raw = data.get("hidden_act", data.get("activation_function", "gelu"))
    if not isinstance(act_raw, str) or act_raw.lower() not in _ACTIVATIONS:
        raise InputError(
            f"unknown activation {act_raw!r}; expected one of {', '.join(sorted(_ACTIVATIONS))}", src, "hidden_act"
        )
    swiglu = _ACTIVATIONS[act_raw.lower()] == "swiglu"
    ffn = count("intermediate_size") or count("n_inner") or 4 * h  # type: ignore[operator]
    experts = (
        count("num_local_experts", zero=True)
        or count("n_routed_experts", zero=True)
        or count("num_experts", zero=True)
        or 0
    )
    llama_like = swiglu
    try:
        return ModelConfig(
            name=str(data.get("_name_or_path") or Path(path).parent.name or Path(path).stem),
            layers=count("num_hidden_layers"),
            hidden=h,
            heads=count("num_attention_heads"),  # type: ignore[arg-type]
            ffn=ffn,
            vocab=count("vocab_size"),  # type: ignore[arg-type]
            seq_len=count("max_position_embeddings") or count("n_positions") or 2048,
            kv_heads=count("num_key_value_heads") if data.get("num_key_value_heads") else None,
            head_dim=count("head_dim") if data.get("head_dim") else None,
            activation="swiglu" if swiglu else "gelu",
            bias=flag("attention_bias", not llama_like),
            learned_positions=not llama_like and "rope_theta" not in data,
            tied_embeddings=flag("tie_word_embeddings", not llama_like),
            dropout=fraction(("hidden_dropout", "resid_pdrop", "hidden_dropout_prob"), 0.0 if llama_like else 0.1),
            experts=experts,
            top_k=count("num_experts_per_tok", zero=True) or 0,
            moe_ffn=count("moe_intermediate_size") if data.get("moe_intermediate_size") else None,
            shared_experts=count("n_shared_experts", zero=True) or 0,
            dense_layers=count("first_k_dense_replace", zero=True) or 0,
            description=f"from {Path(path).name}",
        )
    except InputError as e:
        raise e.with_source(src) from None
    except (TypeError, ValueError) as e:
        raise InputError(f"bad value: {e}", src) from None


def load_model(model: str | None, model_config: str | Path | None) -> ModelConfig:
    """A zoo model by name (``--model``), or one from a HuggingFace-style config file
    (``--model-config``): exactly one of them.

    Raises:
        InputError: neither or both given, or an unknown name / bad file.
    """
    if model and model_config:
        raise InputError("give either --model or --model-config, not both", where="--model")
    if not (model or model_config):
        raise InputError("give --model NAME (see --list) or --model-config FILE", where="--model")
    return get_model(model) if model else from_hf_config(model_config)  # type: ignore[arg-type]


def with_overrides(model: ModelConfig, **kw: object) -> ModelConfig:
    """A copy with some fields changed (e.g. ``seq_len``)."""
    bad = [k for k in kw if k not in _FIELDS]
    if bad:
        raise unknown_key_error(bad[0], _FIELDS, None, what="model field")
    return replace(model, **kw)  # type: ignore[arg-type]
