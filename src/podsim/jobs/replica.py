"""One model replica for inference: its GPUs (TP x PP, EP of them holding the experts), its
numerics and the engine's costs on them; the same flags in ``podsim infer`` and
``podsim serve-llm``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..params import Param, param

#: element types of served weights and KV cache
SERVING_DTYPES = ("bf16", "fp16", "fp8")


@dataclass(frozen=True)
class ReplicaOptions:
    """One model replica: its GPUs, numerics and the engine's costs on them."""

    tp: int = param(Param("tp", "count", 1, help="tensor-parallel GPUs of a replica"))
    pp: int = param(Param("pp", "count", 1, help="pipeline stages of a replica"))
    ep: int = param(Param("ep", "count", 1, help="expert-parallel degree (MoE models)"))
    precision: str = param(
        Param(
            "precision",
            "choice",
            "bf16",
            SERVING_DTYPES,
            help="weights and GEMMs (fp8: 1-byte weights, fp8 tensor cores); default bf16",
        )
    )
    kv_cache_dtype: str | None = param(
        Param("kv-cache-dtype", "choice", None, SERVING_DTYPES, help="the KV cache's element type (default bf16)")
    )
    host_overhead_ms: Any = param(
        Param(
            "host-overhead-ms",
            "text",
            0.0,
            metavar="MS|eager|cuda-graphs",
            unit="ms",
            help="CPU time per step that the GPU waits for (scheduling, input preparation, sampling; default 0), or "
            "eager / cuda-graphs: the host time measured on this GPU for such an engine, by the step's sequences "
            "(docs/serving-llm.md, 'Measured serving steps')",
        )
    )
    profile: str | None = param(
        Param(
            "profile",
            "path",
            metavar="DIR",
            help="step times from measured tables in Vidur's profile layout: DIR holds mlp.csv, attention.csv "
            "(all_reduce.csv for TP > 1, send_recv.csv for PP > 1), or Vidur's compute/<device>/<model>/ and "
            "network/<network device>/ folders (docs/serving-llm.md); memory, the logits and the host overhead "
            "stay podsim's model",
        )
    )
