"""Executables estimated with podsim's compute model, for models without a measured profile.

A stage of ``(nodes, GPUs per node)`` runs an even share of the model's layers (pipeline split)
with tensor parallelism over its GPUs.  Its latency for one request is the forward pass of those
layers at ``batch`` sequences of ``seq_len`` tokens, from :class:`podsim.llm.ops.LayerCosts` on
the GPU's fitted roofline (:class:`podsim.compute.model.ComputeModel`), plus the embedding on
the first stage and the output layer on the last; each tensor-parallel all-reduce takes a ring's
``2 (t-1)/t x bytes`` over the GPU's NVLink bandwidth plus ``collective_latency_ns``.  The
models are decoder transformers (causal attention); an encoder such as BERT is close to one at
batch 1.

Memory per GPU of a stage: its share of the weights (``llm.memory.stage_params`` x the dtype's
bytes) plus one layer's activations at the batch (the working set of an inference pass).
"""

from __future__ import annotations

import math

from ..compute.model import ComputeModel
from ..errors import InputError
from ..hardware.gpu import GpuSpec
from ..llm.kernels import output_kernels
from ..llm.layout import Layout
from ..llm.memory import layer_activation_bytes, stage_layers, stage_params
from ..llm.model import ModelConfig
from ..llm.ops import LayerCosts
from ..llm.stack import Stack
from .executable import Executable

COLLECTIVE_LATENCY_NS = 10_000  #: per tensor-parallel all-reduce (NCCL's small-message floor, order of 10 us)


def estimate_executable(
    name: str,
    model: ModelConfig,
    gpu: GpuSpec,
    stage_shapes: list[tuple[int, int]],
    batch: int = 1,
    seq_len: int | None = None,
    dtype: str = "fp16",
) -> Executable:
    """The executable ``name`` of ``model`` with ``stage_shapes`` on ``gpu``.

    Raises:
        InputError: for more stages than layers, a stage's GPU count that does not divide the
            attention heads, or a batch or sequence below 1.
    """
    seq = seq_len or model.seq_len
    stages = len(stage_shapes)
    if batch < 1 or seq < 1:
        raise InputError(f"batch and sequence length must be at least 1, got {batch} and {seq}")
    if stages > model.layers:
        raise InputError(f"{stages} stages for {model.layers} layers of {model.name}")
    cm = ComputeModel.for_gpu(gpu, dtype)
    lats, mem = [], []
    for s, (nodes, per_node) in enumerate(stage_shapes):
        t = nodes * per_node
        if model.heads % t:
            raise InputError(f"stage {s} of {name}: {t} GPUs do not divide {model.name}'s {model.heads} heads")
        lay = Layout(
            gpus=t * stages,
            tp=t,
            pp=stages,
            global_batch=batch,
            micro_batch=batch,
            seq_len=seq,
            precision="bf16" if dtype == "bf16" else "fp16",
            flash_attention=True,
        )
        # serving engines replay CUDA graphs: no host launch bound
        costs = LayerCosts(model, lay, cm, stack=Stack.for_gpu(gpu.key, host_ns=0))
        ns = 0.0
        layers = stage_layers(model, lay, s)
        for i in layers:
            for step in costs.forward(model.is_moe_layer(i)):
                if step.collective is None:
                    ns += step.ns
                elif t > 1:
                    ns += COLLECTIVE_LATENCY_NS + 2 * (t - 1) / t * step.nbytes / gpu.nvlink_bandwidth
        if s == 0:
            ns += costs.embedding(False).ns
        if s == stages - 1:  # the final norm and the logits; no loss when serving
            ns += sum(costs.kernel_ns(k) for k in output_kernels(model, lay, False) if k.module != "loss")
        lats.append(max(1, math.ceil(ns)))
        weights = stage_params(model, lay, s) * cm.elem_bytes
        mem.append(int(weights + layer_activation_bytes(model, lay, layers[0])))
    return Executable(
        name, model.name, tuple(stage_shapes), tuple(lats), int(model.total_params() * cm.elem_bytes), tuple(mem)
    )
