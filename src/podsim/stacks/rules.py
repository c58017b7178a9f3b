"""A training stack's framework rules applied to a layout.

Each rule sets a layout field the user left at its default (a flag the user gives wins); what
a rule changed is returned so the summary and the JSON can say so:

* ``attention`` -> ``flash_attention``; ``loss_fusion``; ``tp_overlap``; ``overlap_grad_reduce``;
  ``overlap_param_gather``; ``grad_reduce_dtype`` -> ``grad_reduce_bytes``;
* ``sequence_parallel``: TP shards the norms' activations along the sequence;
* ``data_parallel``: with no sharding flag, ``fsdp`` shards everything (``--zero 3``),
  ``distopt`` is Megatron's distributed optimizer; under PP, ``fsdp_reshard_after_forward:
  default`` (torchtitan's) keeps FSDP2's gathered weights through the step's micro-batches and
  reduce-scatters the gradients once after the last, which moves and holds what the distributed
  optimizer does (one all-gather of bf16 weights under the first forward, one reduce-scatter under
  the last backward; bf16 weights and fp32 gradients whole, fp32 master weights and Adam states
  sharded: 2 + 4 + 12 / DP bytes per parameter), so that is the layout it sets;
* ``micro_batch`` ``local``: with PP 1 and no ``--micro-batch``, a data-parallel rank takes its
  whole share of the global batch in one step (torchtitan's and FSDP's local batch, no gradient
  accumulation); ``one`` keeps Megatron's micro-batches of 1;
* ``pipeline_split`` ``even``: layers that PP x VPP does not divide are split as torchtitan
  does (:func:`even_split`: the extra layers on the stages after the first); ``megatron`` leaves
  the split to Megatron's flags.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from ..llm.layout import Layout
from ..llm.model import ModelConfig
from .stack import SoftwareStack

#: bytes per gradient element by ``grad_reduce_dtype``
REDUCE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
_DEFAULTS = {f.name: f.default for f in fields(Layout)}


def even_split(layers: int, stages: int) -> tuple[int, ...]:
    """``layers`` over ``stages`` virtual stages as torchtitan (@9dec370, ``generate_split_points``)
    splits them without explicit split points: ``layers // stages`` each, the remainder one each
    to the stages after the first, so the last keeps the base unless every other stage took one
    (126 over 8: 15, 16 x 6, 15; 61 over 4: 15, 16, 15, 15)."""
    if stages == 1:
        return (layers,)
    base, extra = divmod(layers, stages)
    middle = [base + (1 if i < extra else 0) for i in range(stages - 2)]
    return (base, *middle, layers - base - sum(middle))


def _split_given(lay: Layout) -> bool:
    return (
        lay.pipeline_layers is not None
        or lay.first_stage_layers is not None
        or lay.last_stage_layers is not None
        or lay.account_for_embedding
        or lay.account_for_loss
    )


def apply_rules(lay: Layout, model: ModelConfig, stack: SoftwareStack) -> tuple[Layout, dict[str, Any]]:
    """``lay`` with ``stack``'s rules where the layout kept its defaults; and the layout fields
    they changed (field -> new value)."""
    want: dict[str, Any] = {}
    if stack.get("attention") is not None:
        want["flash_attention"] = stack.get("attention") == "fused"
    for key in ("loss_fusion", "tp_overlap", "overlap_grad_reduce", "overlap_param_gather"):
        if stack.get(key) is not None:
            want[key] = stack.get(key)
    if stack.get("grad_reduce_dtype") is not None:
        want["grad_reduce_bytes"] = REDUCE_BYTES[stack.get("grad_reduce_dtype")]
    if stack.get("sequence_parallel") and lay.tp > 1:
        want["sequence_parallel"] = True
    changes = {k: v for k, v in want.items() if getattr(lay, k) == _DEFAULTS[k] and v != _DEFAULTS[k]}
    dp = stack.get("data_parallel")
    if lay.zero == 0 and not lay.distributed_optimizer and lay.dp * lay.cp > 1:  # sharded over DP x CP
        if dp == "fsdp" and lay.pp > 1 and stack.get("fsdp_reshard_after_forward") == "default":
            changes["distributed_optimizer"] = True  # FSDP2 kept gathered through the micro-batches
        elif dp == "fsdp":
            changes["zero"] = 3
        elif dp == "distopt":
            changes["distributed_optimizer"] = True
    if stack.get("micro_batch") == "local" and lay.pp == 1 and lay.micro_batch == _DEFAULTS["micro_batch"]:
        local = lay.global_batch // max(lay.dp, 1)
        if local > 1 and lay.global_batch % max(lay.dp, 1) == 0:
            changes["micro_batch"] = local
    n = lay.pp * lay.vpp
    if stack.get("pipeline_split") == "even" and model.layers % n and not _split_given(lay):
        changes["pipeline_layers"] = even_split(model.layers, n)
    return (replace(lay, **changes) if changes else lay), changes
