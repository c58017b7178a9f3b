"""A Llama-shaped decoder in plain PyTorch, built from a shape with random weights (no download).

The model a single-GPU PyTorch training stack (torchtitan's ``llama3`` model, a hand-written
trainer) runs, written here so that every kernel it launches is known and labelled:

* token embedding (``vocab x hidden``), then ``layers`` blocks of
  ``x + attention(rms_norm(x))`` and ``x + swiglu_mlp(rms_norm(x))``, a final RMS norm and an
  untied output projection to the vocabulary, cross entropy on the logits;
* attention: separate ``wq`` / ``wk`` / ``wv`` projections (grouped-query: ``kv_heads`` key and
  value heads, each repeated to the query heads as torchtitan's ``repeat_kv`` does: a copy),
  rotary position embedding (the rotate-half form, in fp32), causal
  ``scaled_dot_product_attention`` (the backend is the caller's: ``sdpa_kernel``), ``wo``;
* MLP: ``w2(silu(w1 x) * w3 x)``, width ``ffn_hidden``.

Every forward region is wrapped in ``record_function("podsim::<region>")`` (``embedding``,
``norm``, ``qkv``, ``rope``, ``attention``, ``attn_out``, ``mlp_up``, ``swiglu``, ``mlp_down``,
``residual``, ``output``, ``loss``) so that :mod:`podsim.capture.breakdown` can put each kernel of
a profiled step, the backward's included, in its place.  Outside a profiler the annotations
cost ~1 us a region on the host and nothing on the GPU.

``podsim trace --model`` takes a ``module:callable``: :func:`trace_builder` makes one for a shape.
torch is imported when a model is built; it is an optional dependency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..optional import require


@dataclass(frozen=True)
class LlamaShape:
    """The shape of a Llama decoder (counts; ``rope_theta`` dimensionless)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def with_layers(self, layers: int) -> "LlamaShape":
        """The same shape cut (or grown) to ``layers`` blocks."""
        return replace(self, layers=layers)

    def params(self) -> int:
        """Parameters (embedding and output projection counted apart, norms included)."""
        h, d = self.hidden, self.head_dim
        attn = h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h
        mlp = 3 * h * self.ffn_hidden
        return self.layers * (attn + mlp + 2 * h) + 2 * self.vocab * h + h


#: Meta's Llama 3 shapes (the config.json files of meta-llama/Meta-Llama-3-8B and -70B)
SHAPES = {
    "llama3-8b": LlamaShape("llama3-8b", 32, 4096, 32, 8, 14336, 128256),
    "llama3-70b": LlamaShape("llama3-70b", 80, 8192, 64, 8, 28672, 128256),
    # a tiny shape of the same structure: the CPU checks of the benchmarks run it
    "tiny": LlamaShape("tiny", 2, 64, 4, 2, 128, 256),
}


def _torch() -> Any:
    return require("torch", "the Llama example model")


def build(shape: LlamaShape, device: str = "cpu", dtype: Any = None, seed: int = 0) -> Any:
    """The model (``torch.nn.Module``) of ``shape`` on ``device`` with random weights in ``dtype``
    (default fp32: master weights; run it under ``torch.autocast`` for bf16 compute).

    Calling it with token ids ``(batch, seq)`` returns the logits ``(batch, seq, vocab)``."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional
    region = torch.profiler.record_function

    class Rope:
        """cos / sin tables of the rotate-half rotary embedding for one sequence length."""

        def __init__(self) -> None:
            self.cache: dict[tuple, tuple[Any, Any]] = {}

        def tables(self, seq: int, dev: Any) -> tuple[Any, Any]:
            key = (seq, str(dev))
            if key not in self.cache:
                cos, sin = _rope_tables(torch, shape, torch.arange(seq, device=dev))
                self.cache[key] = (cos[None, None], sin[None, None])
            return self.cache[key]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h, d = shape.hidden, shape.head_dim
            self.attention_norm = nn.RMSNorm(h, eps=shape.norm_eps)
            self.wq = nn.Linear(h, shape.heads * d, bias=False)
            self.wk = nn.Linear(h, shape.kv_heads * d, bias=False)
            self.wv = nn.Linear(h, shape.kv_heads * d, bias=False)
            self.wo = nn.Linear(shape.heads * d, h, bias=False)
            self.ffn_norm = nn.RMSNorm(h, eps=shape.norm_eps)
            self.w1 = nn.Linear(h, shape.ffn_hidden, bias=False)
            self.w3 = nn.Linear(h, shape.ffn_hidden, bias=False)
            self.w2 = nn.Linear(shape.ffn_hidden, h, bias=False)

        def forward(self, x: Any, cos: Any, sin: Any) -> Any:
            b, s, _ = x.shape
            a, g, d = shape.heads, shape.kv_heads, shape.head_dim
            with region("podsim::norm"):
                y = self.attention_norm(x)
            with region("podsim::qkv"):
                q = self.wq(y).view(b, s, a, d).transpose(1, 2)
                k = self.wk(y).view(b, s, g, d).transpose(1, 2)
                v = self.wv(y).view(b, s, g, d).transpose(1, 2)
            with region("podsim::rope"):
                q, k = _rotate(torch, q, cos, sin), _rotate(torch, k, cos, sin)
            with region("podsim::attention"):
                k, v = _repeat_kv(k, a), _repeat_kv(v, a)
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            with region("podsim::attn_out"):
                o = self.wo(o.transpose(1, 2).reshape(b, s, a * d))
            with region("podsim::residual"):
                x = x + o
            return self.feed_forward(x)

        def feed_forward(self, x: Any) -> Any:
            """The block's second half: ``x + w2(silu(w1 y) * w3 y)``, ``y = rms_norm(x)``."""
            with region("podsim::norm"):
                y = self.ffn_norm(x)
            with region("podsim::mlp_up"):
                gate, up = self.w1(y), self.w3(y)
            with region("podsim::swiglu"):
                y = F.silu(gate) * up
            with region("podsim::mlp_down"):
                y = self.w2(y)
            with region("podsim::residual"):
                return x + y

    class Llama(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.shape = shape
            self.tok_embeddings = nn.Embedding(shape.vocab, shape.hidden)
            self.layers = nn.ModuleList(Block() for _ in range(shape.layers))
            self.norm = nn.RMSNorm(shape.hidden, eps=shape.norm_eps)
            self.output = nn.Linear(shape.hidden, shape.vocab, bias=False)
            self.rope = Rope()
            #: set by the trainer: each block re-run in the backward (activation checkpointing)
            self.checkpoint = False

        def forward(self, tokens: Any) -> Any:
            with region("podsim::embedding"):
                x = self.tok_embeddings(tokens)
            cos, sin = self.rope.tables(tokens.shape[1], tokens.device)
            for layer in self.layers:
                if self.checkpoint and self.training:
                    x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
                else:
                    x = layer(x, cos, sin)
            with region("podsim::norm"):
                x = self.norm(x)
            with region("podsim::output"):
                return self.output(x)

    with torch.device("meta"):
        model = Llama()
    if dtype is not None:  # allocated in its precision from the start: no fp32 copy on the way
        model = model.to(dtype)
    model = model.to_empty(device=device)
    torch.manual_seed(seed)
    std = 0.02
    with torch.no_grad():  # drawn where the weights live: a GPU fills a billion in milliseconds
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                out = name.endswith("w2.weight") or name.endswith("wo.weight")
                p.normal_(0.0, std / math.sqrt(2 * shape.layers) if out else std)
    return model


def loss_fn(autocast_device: str | None) -> Callable[[Any, Any, Any], Any]:
    """The training loss ``f(model, tokens, targets)``: cross entropy of the logits over the
    vocabulary, under bf16 autocast on ``autocast_device`` (None: in the model's precision)."""
    torch = _torch()
    F = torch.nn.functional
    region = torch.profiler.record_function

    def f(model: Any, tokens: Any, targets: Any) -> Any:
        if autocast_device is None:
            logits = model(tokens)
        else:
            with torch.autocast(autocast_device, dtype=torch.bfloat16):
                logits = model(tokens)
        with region("podsim::loss"):
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1))

    return f


def batch(shape: LlamaShape, micro_batch: int, seq_len: int, device: str = "cpu", seed: int = 0) -> tuple[Any, Any]:
    """Random token ids and next-token targets, ``(micro_batch, seq_len)`` each."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, shape.vocab, (micro_batch, seq_len + 1), generator=gen)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def trace_builder(shape: LlamaShape, seq_len: int, dtype: str = "bf16") -> Callable[[int], tuple]:
    """A ``module:callable`` target for ``podsim trace --model``: ``f(batch_size)`` returns
    ``(model, tokens, targets, loss_fn)`` of ``shape`` at ``seq_len`` tokens, weights in
    ``dtype`` (``bf16`` or ``fp32``), built on a GPU where there is one (a billion weights drawn
    in milliseconds; the tracer moves the model to its device)."""

    def f(batch_size: int) -> tuple:
        torch = _torch()
        x, y = batch(shape, batch_size, seq_len)
        where = "cuda" if torch.cuda.is_available() else "cpu"
        return build(shape, where, dtype=torch.bfloat16 if dtype == "bf16" else None), x, y, loss_fn(None)

    return f


class ServingStep:
    """One serving engine's forward step over a batch of the model, with a static KV cache.

    A step is a list of *parts*, each of ``sequences`` sequences: a ``prefill`` part processes
    ``tokens`` new tokens per sequence from context 0 (causal attention over them), a ``decode``
    part one new token per sequence at ``context`` cached tokens (attention over the cache).  As
    vLLM does, the parts' tokens go through the GEMMs, norms and the MLP together, attention runs
    per part, each new token's key and value are written into the cache (region ``kv_write``),
    and each sequence's last token is turned into logits and a greedy sample (region ``sample``).

    ``slots`` sequences of ``max_context`` tokens are cached per layer (bf16,
    ``(slots, kv_heads, max_context, head_dim)`` for keys and for values).  Shapes are static for
    a given step, so a step can be captured in a CUDA graph (:meth:`capture`).
    """

    def __init__(self, model: Any, parts: list[tuple[str, int, int, int]], max_context: int) -> None:
        """``parts``: ``(kind, sequences, tokens, context)`` each (``tokens`` 1 for a decode)."""
        torch = _torch()
        self.torch = torch
        self.model = model
        self.parts = parts
        sh = model.shape
        dev = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self.slots = sum(n for _k, n, _t, _c in parts)
        shape = (self.slots, sh.kv_heads, max_context, sh.head_dim)
        self.cache = [
            (torch.zeros(shape, device=dev, dtype=dtype), torch.zeros(shape, device=dev, dtype=dtype))
            for _ in range(sh.layers)
        ]
        tokens, positions = [], []
        for kind, n, t, c in parts:
            if kind == "decode":
                t = 1
            tokens.append(torch.randint(0, sh.vocab, (n * t,), device=dev))
            positions.append((torch.arange(t, device=dev) + c).repeat(n))
        self.tokens = torch.cat(tokens)
        self.positions = torch.cat(positions)
        self.out: Any = None
        self.graph: Any = None

    def forward(self) -> Any:
        """The step: the sampled token of every sequence (``(sequences,)`` token ids)."""
        torch = self.torch
        F = torch.nn.functional
        region = torch.profiler.record_function
        m, sh = self.model, self.model.shape
        a, g, d = sh.heads, sh.kv_heads, sh.head_dim
        with torch.no_grad():
            with region("podsim::embedding"):
                x = m.tok_embeddings(self.tokens)
            with region("podsim::rope"):  # (tokens, 1, head_dim): each token at its own position
                cos, sin = (t[:, None] for t in _rope_tables(torch, sh, self.positions))
            for li, layer in enumerate(m.layers):
                ck, cv = self.cache[li]
                with region("podsim::norm"):
                    y = layer.attention_norm(x)
                with region("podsim::qkv"):
                    q, k, v = layer.wq(y), layer.wk(y), layer.wv(y)
                with region("podsim::rope"):
                    q = _rotate(torch, q.view(-1, a, d), cos, sin)
                    k = _rotate(torch, k.view(-1, g, d), cos, sin)
                v = v.view(-1, g, d)
                outs, row, slot = [], 0, 0
                for kind, n, t, c in self.parts:
                    t = 1 if kind == "decode" else t
                    rows = slice(row, row + n * t)
                    qp = q[rows].view(n, t, a, d).transpose(1, 2)
                    kp = k[rows].view(n, t, g, d).transpose(1, 2)
                    vp = v[rows].view(n, t, g, d).transpose(1, 2)
                    with region("podsim::kv_write"):
                        ck[slot : slot + n, :, c : c + t].copy_(kp)
                        cv[slot : slot + n, :, c : c + t].copy_(vp)
                    with region("podsim::attention"):
                        if kind == "decode":  # every cached key and value of the sequence, and its own
                            kp, vp = ck[slot : slot + n, :, : c + 1], cv[slot : slot + n, :, : c + 1]
                        kp, vp = _repeat_kv(kp, a), _repeat_kv(vp, a)
                        o = F.scaled_dot_product_attention(qp, kp, vp, is_causal=kind != "decode")
                    outs.append(o.transpose(1, 2).reshape(n * t, a * d))
                    row += n * t
                    slot += n
                with region("podsim::attn_out"):
                    o = layer.wo(torch.cat(outs) if len(outs) > 1 else outs[0])
                with region("podsim::residual"):
                    x = x + o
                x = layer.feed_forward(x)
            last, row = [], 0
            for kind, n, t, _c in self.parts:  # each sequence's last token
                t = 1 if kind == "decode" else t
                last.append(torch.arange(n, device=x.device) * t + row + t - 1)
                row += n * t
            with region("podsim::norm"):
                h = m.norm(x[torch.cat(last)])
            with region("podsim::output"):
                logits = m.output(h)
            with region("podsim::sample"):
                self.out = torch.argmax(logits.float(), dim=-1)
        return self.out

    def capture(self) -> None:
        """Capture :meth:`forward` in a CUDA graph (after a warm-up on a side stream, as vLLM
        captures its decode steps); :meth:`replay` then runs it."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.forward()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.forward()

    def replay(self) -> Any:
        """The captured step (:meth:`capture`), or the eager one."""
        if self.graph is None:
            return self.forward()
        self.graph.replay()
        return self.out


def _rope_tables(torch: Any, shape: LlamaShape, positions: Any) -> tuple[Any, Any]:
    """cos and sin of the rotate-half rotary embedding at ``positions`` (``(tokens, head_dim)``, fp32)."""
    d = shape.head_dim
    inv = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d))
    ang = positions.float()[:, None] * inv[None]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos(), ang.sin()


def _rotate(torch: Any, x: Any, cos: Any, sin: Any) -> Any:
    """The rotate-half rotary embedding of ``x`` (head size last; ``cos`` / ``sin`` broadcast
    to it), in fp32, back in ``x``'s precision."""
    x32 = x.float()
    half = x32.shape[-1] // 2
    rot = torch.cat((-x32[..., half:], x32[..., :half]), dim=-1)
    return (x32 * cos + rot * sin).to(x.dtype)


def _repeat_kv(x: Any, heads: int) -> Any:
    """torchtitan's ``repeat_kv``: ``(batch, kv_heads, seq, head_dim)`` with every KV head copied
    to its ``heads / kv_heads`` query heads (a copy; ``x`` itself where they are equal)."""
    b, g, s, d = x.shape
    if g == heads:
        return x
    return x[:, :, None].expand(b, g, heads // g, s, d).reshape(b, heads, s, d)
