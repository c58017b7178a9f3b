"""Measure kernel times on a real GPU with PyTorch and write a kernel table (``table.py``).

``podsim kernels measure --out h100.csv`` times, in the chosen precisions:

* **gemm**: ``(m x k) @ (k x n)`` over a log-spaced grid of sizes, in random order, as a
  linear layer runs it (the weight stored ``n x k``), and batched products (``batch`` > 1) of
  the shapes unfused attention uses;
* **attention_fwd / attention_bwd**: fused scaled-dot-product attention, causal, with the
  backend PyTorch picks (cuDNN's flash attention on Hopper, as Transformer Engine uses), for
  sequence lengths, head counts and head sizes of LLMs (``m`` = ``n`` = sequence length,
  ``k`` = head size, ``batch`` = sequences x heads); the backward time is (forward + backward)
  minus forward;
* **memory**: memory-bound kernels (copy, add, layer norm, GELU, softmax), ``m`` = bytes
  read + written;
* **launch**: the GPU time between back-to-back tiny kernels.

Times are the median over repetitions of CUDA-event timings of a CUDA graph holding enough
calls (>= 10 ms) to hide the timer's resolution: GPU time, free of Python's launch overhead.
torch is imported here only; it is an optional dependency.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from ..optional import require

#: the columns of a kernel table (see table.py for their meaning)
COLUMNS = ("kernel", "dtype", "m", "n", "k", "batch", "time_us", "note")

GEMM_DIMS = (128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768)
QUICK_DIMS = (128, 1024)
MAX_GEMM_FLOPS = 6e12  # skip larger products (each would take > ~8 ms on an H100)


def _torch() -> Any:
    return require("torch", "measuring kernels")


def _timer(torch: Any, device: str, fn: Callable[[], Any], min_ms: float = 10.0, reps: int = 3) -> float:
    """Median GPU time of one call of ``fn`` in microseconds.

    On CUDA the calls are captured into a CUDA graph and replayed, so that the time is the
    GPU's (kernels and the gaps between them), not Python's launch overhead; where capture
    fails the calls run eagerly."""
    fn()
    if device == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    n = max(1, min(200, int(min_ms / once)))
    run: Callable[[], Any]
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n):
                fn()
        run = graph.replay
        run()
    except Exception:  # noqa: BLE001 - not capturable: time it eagerly
        torch.cuda.synchronize()

        def run() -> None:
            for _ in range(n):
                fn()

    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / n)
    return statistics.median(samples)


def _dtype(torch: Any, name: str) -> Any:
    return {
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp32": torch.float32,
        "fp8": getattr(torch, "float8_e4m3fn", None),
    }[name]


def measure_gemm(torch: Any, device: str, dtype: str, dims: tuple[int, ...], batched: bool = True) -> Iterator[tuple]:
    """Rows of single GEMMs over ``dims``^3 (too-large products skipped) and batched ones."""
    dt = _dtype(torch, dtype)
    shapes = [(m, n, k) for m in dims for n in dims for k in dims if 2.0 * m * n * k <= MAX_GEMM_FLOPS]
    random.Random(0).shuffle(shapes)  # no drift of clock or temperature along the grid
    for m, n, k in shapes:
        if dtype == "fp8":
            a = torch.randn(m, k, device=device).to(dt)
            b = torch.randn(n, k, device=device).to(dt).t()
            one = torch.ones((), device=device)

            def fn(a=a, b=b, one=one):  # type: ignore[no-untyped-def]
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        else:  # activations times a transposed weight, as a linear layer's forward
            a = torch.randn(m, k, device=device, dtype=dt)
            b = torch.randn(n, k, device=device, dtype=dt)
            fn = lambda a=a, b=b: torch.nn.functional.linear(a, b)  # noqa: E731
        yield ("gemm", dtype, m, n, k, 1, _timer(torch, device, fn), "")
        del a, b
    if dtype == "fp8" or not batched:
        return
    # batched products of unfused attention: scores (s x d)(d x s) and context (s x s)(s x d)
    for count in (16, 64, 256):
        for s in (512, 1024, 2048, 4096):
            for d in (64, 128):
                if count * s * s * 2 > 4 << 30:
                    continue
                for m, n, k in ((s, s, d), (s, d, s)):
                    a = torch.randn(count, m, k, device=device, dtype=dt)
                    b = torch.randn(count, k, n, device=device, dtype=dt)
                    yield (
                        "gemm",
                        dtype,
                        m,
                        n,
                        k,
                        count,
                        _timer(torch, device, lambda a=a, b=b: torch.bmm(a, b)),
                        "bmm",
                    )
                    del a, b


def measure_attention(torch: Any, device: str, dtype: str, quick: bool) -> Iterator[tuple]:
    """Causal flash attention forward and backward rows."""
    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    seqs = (1024, 4096) if quick else (512, 1024, 2048, 4096, 8192, 16384, 32768)
    heads_list = (8,) if quick else (8, 16, 32, 64)
    for d in (64, 128):
        for heads in heads_list:
            for s in seqs:
                if heads * s * d * 2 * 4 > 2 << 30 or (quick and device == "cpu" and s > 1024):
                    continue
                q, k_, v = (torch.randn(1, heads, s, d, device=device, dtype=dt, requires_grad=True) for _ in range(3))
                grad = torch.randn(1, heads, s, d, device=device, dtype=dt)

                def fwd(q=q, k_=k_, v=v) -> Any:
                    with torch.no_grad():
                        return F.scaled_dot_product_attention(q, k_, v, is_causal=True)

                def fwd_bwd(q=q, k_=k_, v=v, grad=grad) -> None:
                    o = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                    torch.autograd.grad(o, (q, k_, v), grad)

                tf, tfb = _timer(torch, device, fwd), _timer(torch, device, fwd_bwd)
                yield ("attention_fwd", dtype, s, s, d, heads, tf, "causal")
                yield ("attention_bwd", dtype, s, s, d, heads, max(tfb - tf, 0.0), "causal")
                del q, k_, v, grad


def measure_memory(torch: Any, device: str, dtype: str, quick: bool) -> Iterator[tuple]:
    """Memory-bound kernels; ``m`` is bytes read + written."""
    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    es = torch.tensor([], dtype=dt).element_size()
    sizes = [1 << p for p in ((16, 22) if quick else range(14, 31, 2))]
    for elems in sizes:
        x = torch.randn(elems, device=device, dtype=dt)
        y = torch.randn(elems, device=device, dtype=dt)
        out = torch.empty_like(x)
        h = 4096 if elems >= 4096 else elems
        x2 = x.view(-1, h)
        ln = torch.nn.LayerNorm(h, device=device, dtype=dt)
        kernels = (
            ("copy", 2, lambda: out.copy_(x)),
            ("add", 3, lambda: torch.add(x, y, out=out)),
            ("gelu", 2, lambda: F.gelu(x)),
            ("layernorm", 2, lambda: ln(x2)),
            ("softmax", 2, lambda: torch.softmax(x2, dim=-1)),
        )
        for note, passes, fn in kernels:
            with torch.no_grad():
                yield ("memory", dtype, elems * es * passes, 1, 1, 1, _timer(torch, device, fn), note)


#: transformer layers timed whole (TP shards as one GPU of a TP group runs them):
#: (label, hidden, local heads, local kv heads, head size, local ffn width, activation)
LAYERS = (
    ("llama3-8b", 4096, 32, 8, 128, 14336, "swiglu"),
    ("llama3-70b/tp8", 8192, 8, 1, 128, 3584, "swiglu"),
    ("gpt3-175b/tp8", 12288, 12, 12, 128, 6144, "gelu"),
    ("gpt3-2.7b", 2560, 32, 32, 80, 10240, "gelu"),
)


def measure_layers(torch: Any, device: str, dtype: str, quick: bool) -> Iterator[tuple]:
    """Whole layers in eager PyTorch (flash attention, no fusion beyond PyTorch's):
    ``layer_fwd`` / ``layer_bwd`` rows with ``m`` = sequence, ``n`` = hidden, ``k`` = local
    FFN width, ``batch`` = micro-batch; the note names the layer and its heads."""
    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    for label, h, a, kv, d, f, act in LAYERS[:1] if quick else LAYERS:
        for s, b in ((1024, 1),) if quick else ((2048, 1), (4096, 1), (8192, 1), (2048, 4)):
            if quick and device == "cpu":
                h, a, kv, d, f = 256, 4, 2, 64, 512

            def w(*shape: int) -> Any:
                return (torch.randn(*shape, device=device, dtype=dt) * 0.02).requires_grad_()

            wqkv, wo = w((a + 2 * kv) * d, h), w(h, a * d)
            up = 2 * f if act == "swiglu" else f
            w1, w2 = w(up, h), w(h, f)
            n1 = torch.nn.LayerNorm(h, device=device, dtype=dt)
            n2 = torch.nn.LayerNorm(h, device=device, dtype=dt)
            x = torch.randn(b, s, h, device=device, dtype=dt, requires_grad=True)

            def layer(x=x, wqkv=wqkv, wo=wo, w1=w1, w2=w2, n1=n1, n2=n2, a=a, kv=kv, d=d, act=act) -> Any:
                y = n1(x)
                qkv = F.linear(y, wqkv).view(b, s, a + 2 * kv, d).transpose(1, 2)
                q, k_, v = qkv.split((a, kv, kv), dim=1)
                if kv != a:
                    k_, v = k_.repeat_interleave(a // kv, 1), v.repeat_interleave(a // kv, 1)
                o = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                x = x + F.linear(o.transpose(1, 2).reshape(b, s, a * d), wo)
                y = F.linear(n2(x), w1)
                if act == "swiglu":
                    g, u = y.chunk(2, dim=-1)
                    y = F.silu(g) * u
                else:
                    y = F.gelu(y)
                return x + F.linear(y, w2)

            grad = torch.randn(b, s, h, device=device, dtype=dt)
            params = (x, wqkv, wo, w1, w2)

            def fwd() -> None:
                with torch.no_grad():
                    layer()

            def fwd_bwd() -> None:
                torch.autograd.grad(layer(), params, grad)

            tf, tfb = _timer(torch, device, fwd), _timer(torch, device, fwd_bwd)
            note = f"{label} heads={a} kv={kv} dhead={d} act={act}"
            yield ("layer_fwd", dtype, s, h, f, b, tf, note)
            yield ("layer_bwd", dtype, s, h, f, b, max(tfb - tf, 0.0), note)


def measure_launch(torch: Any, device: str) -> Iterator[tuple]:
    x = torch.zeros(1, device=device)
    yield ("launch", "fp32", 1, 1, 1, 1, _timer(torch, device, lambda: x.add_(1.0), min_ms=2.0), "1-element add")


def measure(
    out: str | Path,
    dtypes: tuple[str, ...] = ("bf16",),
    quick: bool = False,
    device: str = "cuda",
    progress: Callable[[str], None] | None = None,
) -> int:
    """Measure and write the kernel table to ``out`` (atomically); returns the row count."""
    torch = _torch()
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("no CUDA GPU visible to PyTorch (use --device cpu only to test the tool)")
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    rows: list[tuple] = []
    say = progress or (lambda _s: None)
    dims = QUICK_DIMS if quick else GEMM_DIMS
    for dt in dtypes:
        if _dtype(torch, dt) is None:
            raise InputError(f"this PyTorch has no {dt} type")
        say(f"gemm {dt}")
        rows += list(measure_gemm(torch, device, dt, dims, batched=not quick))
        if dt != "fp8":
            say(f"attention {dt}")
            rows += list(measure_attention(torch, device, dt, quick))
            say(f"memory {dt}")
            rows += list(measure_memory(torch, device, dt, quick))
            say(f"layers {dt}")
            rows += list(measure_layers(torch, device, dt, quick))
    rows += list(measure_launch(torch, device))
    write_rows(out, rows, header=f"podsim kernel table v1; device: {name}; torch {torch.__version__}")
    return len(rows)


def write_rows(out: str | Path, rows: list[tuple], header: str = "podsim kernel table v1") -> None:
    """Write kernel-table rows (``COLUMNS``) to ``out`` with a ``#`` comment line; atomic."""
    path = Path(out)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        f.write(f"# {header}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([*r[:6], f"{r[6]:.3f}" if math.isfinite(r[6]) else "nan", r[7]])
    tmp.replace(path)
