"""What a traced PyTorch op computes, from its execution-trace node: the kernels a GPU would run
for it, each as FLOPs and bytes, so that a step captured on one device can be re-timed on
another (:mod:`podsim.parallelize.retime`).

An op's node is read top-down: a node whose name is a known compute op is one kernel and its
children are not read; a node with children is the sum of its children; a node whose children
make no kernel (a leaf, or an op that only allocates below it) moves its input and output
tensors through memory (one kernel), unless it only makes a view or allocates itself.

==========================================================  ===================================
op (``aten::``)                                              kernel
==========================================================  ===================================
``mm`` (A[M,K] B[K,N]), ``addmm`` (bias, A, B)                GEMM M x N x K
``bmm``, ``baddbmm`` (A[b,M,K] B[b,K,N])                      b GEMMs M x N x K
``convolution``, ``_convolution``, ``cudnn_convolution``,     implicit GEMM: M = output elements /
``mkldnn_convolution``, ``miopen_convolution``                 O, N = O, K = C/groups x kernel
``convolution_backward`` (grad_out, input, weight, ...)       one such GEMM per gradient it makes
                                                              (input, weight: its non-empty outputs)
``_scaled_dot_product_{flash,efficient,cudnn}_attention``      attention: 4 B H Sq Skv D FLOPs
(q[B,H,Sq,D], k[B,H,Skv,D]) and their ``_backward``           (backward: 2.5x)
``cudnn_batch_norm``, ``native_batch_norm`` and their        batch norm over the input's elements
``_backward`` (input [N,C,...])                               and C channels
==========================================================  ===================================

Sizes come from the input shapes the trace recorded; a compute op whose shapes are missing or
malformed is counted as a memory-bound kernel and named in :attr:`Work.kind` ``unknown``.
Units: FLOPs, bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .pytorch_trace import EtNode

#: ops that only make a view, allocate or read metadata: no kernel
NO_KERNEL = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::as_strided",
        "aten::as_strided_",
        "aten::resize_",
        "aten::detach",
        "detach",
        "detach_",
        "aten::detach_",
        "aten::alias",
        "aten::slice",
        "aten::select",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::flatten",
        "aten::contiguous",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::lift_fresh",
        "aten::set_",
        "aten::result_type",
        "aten::size",
        "aten::stride",
        "aten::numel",
        "aten::is_nonzero",
    }
)
_GEMM = {"aten::mm": 0, "aten::addmm": 1, "aten::bmm": 0, "aten::baddbmm": 1}
_CONV = frozenset(
    {
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::mkldnn_convolution",
        "aten::miopen_convolution",
        "aten::convolution_overrideable",
    }
)
_ATTENTION = ("flash", "efficient", "cudnn")
#: batch norm's kernels (training and inference) by pass
_BATCH_NORM = {
    "aten::cudnn_batch_norm": "fwd",
    "aten::native_batch_norm": "fwd",
    "aten::_native_batch_norm_legit": "fwd",
    "aten::_native_batch_norm_legit_no_training": "fwd",
    "aten::miopen_batch_norm": "fwd",
    "aten::cudnn_batch_norm_backward": "bwd",
    "aten::native_batch_norm_backward": "bwd",
    "aten::miopen_batch_norm_backward": "bwd",
}


@dataclass(frozen=True)
class Work:
    """One kernel: ``kind`` gemm (``count`` GEMMs of ``m x n x k``), conv (its implicit GEMM,
    likewise), attention (``flops`` over ``seq`` queries of ``head_dim``), memory (``nbytes``
    moved) or unknown (a compute op whose shapes the trace lacks: timed as memory, and named);
    ``dtype`` the element type of its first input (``float``, ``c10::BFloat16``, ...); ``op`` the
    ET node's name."""

    kind: str
    op: str
    nbytes: int
    dtype: str = ""
    m: int = 0
    n: int = 0
    k: int = 0
    count: int = 1
    flops: float = 0.0
    seq: int = 0
    head_dim: int = 0
    #: a convolution's passes (``fwd``; ``bwd_data``, ``bwd_weight``: the gradients it makes) or a
    #: batch norm's (``fwd`` or ``bwd``)
    passes: tuple[str, ...] = ()
    #: a convolution's input channels per group and kernel elements (K = c_in x window); a batch norm's channels
    c_in: int = 0
    window: int = 0
    #: a convolution whose output is smaller than its input (a stride above 1)
    strided: bool = False


def _dims(shape: object) -> tuple[int, ...] | None:
    """A tensor's shape as non-negative ints, or None when it is not one."""
    if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < 1 << 48 for d in shape):
        return None
    return tuple(shape)


def _dtype(node: EtNode) -> str:
    t = node.types[0] if node.types else ""
    return t[t.find("(") + 1 : -1] if isinstance(t, str) and t.startswith("Tensor(") else ""


def _nbytes(node: EtNode) -> int:
    return node.tensor_bytes_in + node.tensor_bytes_out


def _gemm(node: EtNode, first: int) -> Work | None:
    a = _dims(node.shapes[first]) if len(node.shapes) > first + 1 else None
    b = _dims(node.shapes[first + 1]) if a is not None else None
    if a is None or b is None or len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
        return None
    count = a[0] if len(a) == 3 else 1
    return Work("gemm", node.name, _nbytes(node), _dtype(node), a[-2], b[-1], a[-1], count)


def _conv_gemm(
    node: EtNode, x: tuple[int, ...], w: tuple[int, ...], out_elems: int, passes: tuple[str, ...]
) -> Work | None:
    """The implicit GEMM of a convolution: input ``x`` [N, C, ...], weight ``w`` [O, C/g, k...],
    ``out_elems`` output elements; one such GEMM per pass (a backward's input and weight gradients)."""
    if len(w) < 3 or len(x) != len(w) or w[0] == 0 or out_elems <= 0 or not passes or not x[0]:
        return None
    k = math.prod(w[1:])
    m = out_elems // w[0]
    strided = math.prod(x[2:]) * 2 > 3 * (m // x[0])  # the input's feature map well above the output's
    return Work(
        "conv",
        node.name,
        _nbytes(node),
        _dtype(node),
        m,
        w[0],
        k,
        len(passes),
        passes=passes,
        c_in=w[1],
        window=math.prod(w[2:]),
        strided=strided,
    )


def _conv(node: EtNode) -> Work | None:
    if len(node.shapes) < 2:
        return None
    x, w = _dims(node.shapes[0]), _dims(node.shapes[1])
    if x is None or w is None or not x or math.prod(x) == 0 or not node.arg_bytes:
        return None
    itemsize = node.arg_bytes[0] // math.prod(x)
    out = node.tensor_bytes_out // itemsize if itemsize else 0
    return _conv_gemm(node, x, w, out, ("fwd",))


def _conv_backward(node: EtNode) -> Work | None:
    if len(node.shapes) < 3:
        return None
    g, x, w = (_dims(s) for s in node.shapes[:3])
    if g is None or x is None or w is None:
        return None
    # its output_mask shows in its outputs: an input or weight gradient not asked for is empty
    made = [b > 0 for _, b in node.outputs[:2]] if node.outputs else [True, True]
    passes = tuple(p for p, on in zip(("bwd_data", "bwd_weight"), made) if on)
    return _conv_gemm(node, x, w, math.prod(g), passes)


def _batch_norm(node: EtNode, step: str) -> Work | None:
    """Batch norm's forward or backward over input [N, C, ...] (its first tensor; ``m`` its elements)."""
    x = _dims(node.shapes[0]) if node.shapes else None
    if x is None or len(x) < 2:
        return None
    return Work("norm", node.name, _nbytes(node), _dtype(node), m=math.prod(x), passes=(step,), c_in=x[1])


def _attention(node: EtNode) -> Work | None:
    if len(node.shapes) < 2:
        return None
    q, k = _dims(node.shapes[0]), _dims(node.shapes[1])
    if q is None or k is None or len(q) != 4 or len(k) != 4:
        return None
    b, h, sq, d = q
    flops = 4.0 * b * h * sq * k[2] * d * (2.5 if node.name.endswith("_backward") else 1.0)
    return Work("attention", node.name, _nbytes(node), _dtype(node), flops=flops, seq=sq, head_dim=d)


def _compute(node: EtNode) -> Work | None | bool:
    """The kernel of a known compute op (None: one whose shapes are unusable); False: not one."""
    name = node.name
    if name in _GEMM:
        return _gemm(node, _GEMM[name])
    if name in _CONV:
        return _conv(node)
    if name == "aten::convolution_backward":
        return _conv_backward(node)
    if name in _BATCH_NORM:
        return _batch_norm(node, _BATCH_NORM[name])
    if name.startswith("aten::_scaled_dot_product_") and any(a in name for a in _ATTENTION):
        return _attention(node)
    return False


def op_work(node: EtNode, children: dict[int, list[EtNode]]) -> list[Work]:
    """The kernels of the op at ``node`` (see the module docstring): a node whose children make
    no kernel (``native_batch_norm`` allocating its outputs) is itself one memory-bound kernel."""
    return _work(node, children, {node.node_id})


def _work(n: EtNode, children: dict[int, list[EtNode]], seen: set[int]) -> list[Work]:
    got = _compute(n)
    if got is not False:
        return [got if isinstance(got, Work) else Work("unknown", n.name, _nbytes(n), _dtype(n))]
    out: list[Work] = []
    for c in children.get(n.node_id, ()):
        if c.node_id not in seen:  # a parent cycle ends here
            seen.add(c.node_id)
            out += _work(c, children, seen)
    if not out and n.name not in NO_KERNEL and _nbytes(n) > 0 and not n.name.startswith("[pytorch|"):
        out.append(Work("memory", n.name, _nbytes(n), _dtype(n)))
    return out
