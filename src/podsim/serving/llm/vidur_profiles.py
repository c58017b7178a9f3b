"""podsim's compute-model times written as Vidur's profiling tables (``podsim infer
--write-profile DIR``): the layout is :mod:`.vidur_tables`', which reads them back."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...collectives.nccl.planner import CollectivePlanner, FabricDelay
from ...errors import InputError
from ...fileio import atomic_write_text
from ...hardware.cluster import build_fabric
from ...hardware.gpu import get_gpu
from ...llm.model import ModelConfig
from ...llm.training import default_cluster
from ...workload import CollectiveKind
from .step_timer import step_timer
from .steps import LLMStepTimer
from .vidur_tables import (
    ATTENTION_OPS,
    MLP_OPS,
    MS,
    STATS,
    VIDUR_MODELS,
    _col,
    batch_grid,
    chunk_grid,
    kv_grid,
    token_grid,
    vidur_names,
)


def _stats(v_ns: float | None) -> list[str]:
    """The five time_stats columns of one op (ms): a model has no spread."""
    if v_ns is None:
        return [""] * len(STATS)
    ms = repr(v_ns / MS)
    return [ms, ms, ms, ms, "0.0"]


def _csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def mlp_ops_ns(timer: LLMStepTimer, tokens: int) -> dict[str, float]:
    """One layer's nine mlp.csv ops over ``tokens`` tokens (ns) from podsim's compute model: they
    add up to its GEMM and element-wise times (an MoE layer's router and expert GEMMs are put in
    mlp_up_proj and mlp_down_proj in the ratio of their matrices)."""
    gemm, elem, _ = timer._token_costs(tokens)
    m, cm, tp = timer.model, timer.cm, timer.tp
    t, d, h = float(tokens), m.dhead, m.hidden
    qkv = cm.gemm_ns(t, (m.heads // tp + 2 * timer.kv_heads_per_gpu) * d, h)
    o = cm.gemm_ns(t, h, m.heads // tp * d)
    rest = gemm - qkv - o
    if m.moe:
        up = rest * (m.mlp_matrices - 1) / m.mlp_matrices
    else:
        up = cm.gemm_ns(t, m.ffn / tp * (m.mlp_matrices - 1), h)
    # the element-wise passes of podsim's model by kernel: (activation bytes per token, kernels)
    width = (m.expert_ffn if m.moe else m.ffn) * (m.top_k if m.moe else 1) / tp
    passes = {
        "mlp_act": (2 * width, 1),
        "input_layernorm": (2 * h, 1),
        "post_attention_layernorm": (2 * h, 1),
        "attn_rope": (2 * h, 1),
        "add": (4 * h, 2),
    }
    share = {k: cm.memory_ns(t * b * cm.elem_bytes, n) for k, (b, n) in passes.items()}
    total = sum(share.values())
    out = {"attn_pre_proj": qkv, "attn_post_proj": o, "mlp_up_proj": up, "mlp_down_proj": rest - up}
    out.update({k: elem * v / total if total else 0.0 for k, v in share.items()})
    return out


def write_vidur_profiles(
    out_dir: str | Path,
    model: ModelConfig,
    gpu: str,
    tps: Sequence[int] = (1, 2, 4, 8),
    *,
    precision: str = "bf16",
    cluster: str | None = None,
    device: str | None = None,
    network_device: str | None = None,
    vidur_model: str | None = None,
    vocab_size: int | None = None,
    block_size: int = 16,
    max_tokens: int = 8192,
    max_seq_len: int | None = None,
    max_batch: int = 128,
) -> list[Path]:
    """Write podsim's compute-model times of ``model`` on ``gpu`` at each TP of ``tps`` as Vidur's
    profiling CSVs under ``out_dir`` (the layout in this module's docstring), over Vidur's own
    grids: tokens up to ``max_tokens``, KV lengths and prefill chunks up to ``max_seq_len``
    (default: the model's context), decode batches up to ``max_batch``.  The network tables hold
    the all-reduce of each TP > 1 and the sends between stages (inside a node, between nodes)
    over the sizes of this model's token counts' activations.  Folder names and the
    ``vocab_size`` column default to Vidur's for the models it knows (:data:`VIDUR_MODELS`).

    Returns:
        The four files written.

    Raises:
        InputError: for a TP the model or the cluster cannot take, or bad grid bounds.
    """
    spec_gpu = get_gpu(gpu)
    spec = default_cluster(spec_gpu, None, None, cluster)
    max_seq_len = max_seq_len or model.seq_len
    for name, v in (("max_tokens", max_tokens), ("max_seq_len", max_seq_len), ("max_batch", max_batch)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, got {v}", where=name)
    if not tps:
        raise InputError("no TP to write tables for", where="--tp")
    dev, vname, net = vidur_names(model, spec_gpu.key)
    dev, vname, net = device or dev, vidur_model or vname, network_device or net
    vocab = vocab_size or VIDUR_MODELS.get(model.name, (None, model.vocab))[1]
    out = Path(out_dir)
    mlp_header = [_col(op, s) for op in MLP_OPS for s in STATS] + [
        "n_head",
        "n_kv_head",
        "n_embd",
        "n_expanded_embd",
        "vocab_size",
        "use_gated_mlp",
        "num_tokens",
        "num_tensor_parallel_workers",
    ]
    att_header = [_col(op, s) for op in ATTENTION_OPS for s in STATS] + [
        "n_embd",
        "n_q_head",
        "n_kv_head",
        "block_size",
        "num_tensor_parallel_workers",
        "max_model_len",
        "batch_size",
        "prefill_chunk_size",
        "kv_cache_size",
        "is_prefill",
        "attention_backend",
    ]
    net_header = ["time_stats.{op}." + s for s in STATS] + [
        "rank",
        "num_workers",
        "size",
        "collective",
        "devices_per_node",
        "max_devices_per_node",
    ]
    tokens = token_grid(max_tokens)
    kvs = kv_grid(max_seq_len)
    gated = "True" if model.mlp_matrices == 3 else "False"
    ffn = model.expert_ffn if model.moe else model.ffn
    mlp_rows: list[Sequence[object]] = []
    att_rows: list[Sequence[object]] = []
    ar_rows: list[Sequence[object]] = []
    act_bytes = None
    for tp in sorted(set(tps)):
        timer = step_timer(model, spec_gpu, tp=tp, precision=precision, cluster=spec)
        eb = timer.cm.elem_bytes
        act_bytes = [int(t * model.hidden * eb) for t in tokens]
        for t in tokens:
            ops = mlp_ops_ns(timer, t)
            mlp_rows.append(
                [x for op in MLP_OPS for x in _stats(ops[op])]
                + [model.heads, model.kv, model.hidden, ffn, vocab, gated, t, tp]
            )
        shape = [model.hidden, model.heads, model.kv, block_size, tp, max_seq_len]
        zero = _stats(0.0)
        chunks = chunk_grid(max_seq_len)
        for n in chunks:  # chunked prefills: contexts of whole chunks
            for c in range(0, max_seq_len - n + 1, n):
                att_rows.append(
                    _stats(timer._attention_ns([(n, c)])) + _stats(None) + zero + shape + [1, n, c, "True", "podsim"]
                )
        for n in kvs:  # whole prompts
            if n > 0 and n not in chunks:
                att_rows.append(
                    _stats(timer._attention_ns([(n, 0)])) + _stats(None) + zero + shape + [1, n, 0, "True", "podsim"]
                )
        for b in batch_grid(max_batch):  # decodes
            for c in kvs[1:]:
                att_rows.append(
                    _stats(None)
                    + _stats(timer._attention_ns([(1, c)] * b))
                    + zero
                    + shape
                    + [b, 0, c, "False", "podsim"]
                )
        if tp > 1:
            ranks = tuple(range(tp))
            per_node = min(tp, spec.gpus_per_node)
            for size in act_bytes:
                ns = timer._collective_ns(CollectiveKind.ALL_REDUCE, ranks, size)
                ar_rows.append(_stats(ns) + [0, tp, size, "all_reduce", per_node, spec.gpus_per_node])
    # sends between pipeline stages: GPU 0 to 1 (one node), GPU 0 to the next node's first
    gpn = spec.gpus_per_node
    fabric = build_fabric(spec, max(2, 2 * gpn))
    delay = FabricDelay(fabric, CollectivePlanner(fabric, spec.nccl).timer)
    sr_rows: list[Sequence[object]] = [
        _stats(float(delay.delay_ns(0, dst, size))) + [0, 2, size, "send_recv", per, gpn]
        for per, dst in ((2, 1), (1, gpn))
        if per == 1 or gpn > 1
        for size in act_bytes or []
    ]
    compute = out / "compute" / dev / vname
    network = out / "network" / net
    files: list[tuple[Path, list[str], list[Sequence[object]]]] = [
        (compute / "mlp.csv", mlp_header, mlp_rows),
        (compute / "attention.csv", att_header, att_rows),
        (network / "all_reduce.csv", [h.format(op="all_reduce") for h in net_header], ar_rows),
        (network / "send_recv.csv", [h.format(op="send_recv") for h in net_header], sr_rows),
    ]
    for path, header, rows in files:
        atomic_write_text(path, _csv_text(header, rows))
    return [p for p, _, _ in files]


# -- reading --------------------------------------------------------------------------------------
