"""Where a training step's GPU time goes, kernel by kernel (``podsim llm --kernels``).

:func:`kernel_rows` lists, for one GPU, the kernels of one layer's forward and backward pass
(the first layer of the kind the model has most of), of the embedding and the output layer
with its loss, and of the once-per-iteration optimizer work, each with its shape, work and
time.  Fields of a row (also in ``--json`` under ``kernels``):

``name``, ``module``, ``kind`` (gemm / attention / memory), ``shape`` (GEMM ``m x n x k``,
attention ``batch x q x kv x head``, memory: empty), ``dtype``; ``gflop`` (10^9 FLOPs) and
``mbytes`` (10^6 B read + written); ``time_us``: the kernel alone on the GPU; ``step_us``: as
it runs in the step, with the TP collective beside it (``collective``) when one is overlapped;
``tflops`` and ``gbps``: achieved rates (10^12 FLOP/s, 10^9 B/s).
"""

from __future__ import annotations

from .kernels import Kernel, embedding_kernels, output_kernels
from .ops import LayerCosts

SECTIONS = (
    "layer_forward",
    "layer_backward",
    "embedding_forward",
    "embedding_backward",
    "output_forward",
    "output_backward",
    "optimizer",
)


def _shape(k: Kernel) -> str:
    if k.kind == "gemm":
        return f"{k.m:g} x {k.n:g} x {k.k:g}" + (f" (x{k.count})" if k.count > 1 else "")
    if k.kind.startswith("attention"):
        return f"{k.batch:g} x {k.m:g} x {k.n:g} x {k.k:g}"
    return ""


def _rows(costs: LayerCosts, kernels: list[Kernel]) -> list[dict]:
    out = []
    for t in costs.timed(kernels):
        k = t.kernel
        out.append(
            {
                "name": k.name,
                "module": k.module,
                "kind": k.kind,
                "shape": _shape(k),
                "dtype": k.dtype if k.kind == "gemm" else "",
                "gflop": round(k.flops / 1e9, 4),
                "mbytes": round(k.nbytes / 1e6, 4),
                "time_us": round(t.ns / 1e3, 3),
                "step_us": round(t.step_ns / 1e3, 3),
                "collective": t.collective,
                "tflops": round(k.flops / t.ns / 1e3, 1) if k.flops and t.ns else 0.0,
                "gbps": round(k.nbytes / t.ns, 1) if k.nbytes and t.ns else 0.0,
            }
        )
    return out


def kernel_rows(costs: LayerCosts, params_local: float, shard: float) -> dict[str, list[dict]]:
    """Every section's kernel rows (see the module docstring) for a GPU holding
    ``params_local`` parameters and updating ``shard`` of them."""
    m = costs.m
    moe = m.moe and m.layers - m.dense_layers >= m.dense_layers
    lay = costs.lay
    return {
        "layer_forward": _rows(costs, costs.layer_kernels(moe, False)),
        "layer_backward": _rows(costs, costs.layer_kernels(moe, True)),
        "embedding_forward": _rows(costs, embedding_kernels(m, lay, False)),
        "embedding_backward": _rows(costs, embedding_kernels(m, lay, True)),
        "output_forward": _rows(costs, output_kernels(m, lay, False, lay.loss_fusion)),
        "output_backward": _rows(costs, output_kernels(m, lay, True, lay.loss_fusion)),
        "optimizer": _rows(costs, costs.optimizer_kernels(params_local, shard)),
    }
