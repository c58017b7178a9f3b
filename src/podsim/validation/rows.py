"""The published rows ``podsim validate`` runs, shipped inside the package.

Two sets, told apart in every report:

* ``fitted`` (``calibration.csv``): the measurements podsim's parameters were fitted to
  (Megatron-LM SC'21 Tables 1-2 on A100, Megatron-Core's H100 weak-scaling table, Llama 3 405B
  on 8K-16K H100, Korthikanti et al.'s memory figures, NCCL bus bandwidths) and podsim's own
  measured single-GPU training steps (``compute/tables/steps/<gpu>.csv``) and serving steps
  (``serving/profiles/steps/<gpu>.csv``), where shipped;
* ``reported`` (``reported.csv``): every other published figure found, never used to set a
  parameter -- podsim's error on them is its error on data it has not seen.

Both are podsim's own transcriptions with their citations (``source``, ``source_loc``,
``url``); the columns are documented in docs/calibration.md.  A user's own rows in the same
columns can be added with ``podsim validate --rows FILE``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from ..compute.steps import StepSet, read_steps, shipped_steps
from ..errors import InputError, closest
from ..fileio import check_columns, read_text
from ..serving.llm.measured_steps import ServingStepSet, read_serving_steps, shipped_serving_steps

#: each set's files (the inference step times are reported rows of their own columns)
SETS = {
    "fitted": ("calibration.csv", "calibration_stacks.csv"),
    "reported": ("reported.csv", "reported_inference.csv", "reported_stacks.csv", "reported_goodput.csv"),
}
REQUIRED = ("row_id", "metric", "value")
#: integer columns and their least value (an empty cell means unset); at most 2^31, as the CLI's
COUNTS = {
    **dict.fromkeys(
        (
            "layers",
            "hidden",
            "heads",
            "ffn_hidden",
            "vocab",
            "seq_len",
            "gpus",
            "gpus_per_node",
            "tp",
            "pp",
            "cp",
            "ep",
            "etp",
            "vpp",
            "global_batch",
            "micro_batch",
            "batch",
            "prompt_tokens",
            "output_tokens",
        ),
        1,
    ),
    **dict.fromkeys(
        ("kv_heads", "experts", "top_k", "head_dim", "moe_ffn_hidden", "shared_experts", "dense_layers"), 0
    ),
}
MAX_COUNT = 2**31
#: columns that take one of a few words (an empty cell means unset), as docs/calibration.md
#: describes them; anything else would silently fall back to a default
CHOICES = {
    "activation": ("gelu", "swiglu", "squared-relu", "relu2"),
    "sharding": ("none", "ddp", "distopt", "zero1", "zero2", "zero3", "fsdp"),
    "recompute": ("none", "selective", "full", "n/a", "seq", "sel", "seqsel"),
    "sequence_parallel": ("yes", "no"),
    "tied_embeddings": ("yes", "no"),
    "flops_count": ("causal", "full"),
    "tp_overlap": ("te", "async", "none"),
    "kv_cache_dtype": ("auto", "bf16", "fp16", "fp8"),
}


def _measured(
    steps: StepSet | ServingStepSet,
    set_name: str,
    kind: str,
    metric: str,
    script: str,
    extra: Callable[[Any], dict[str, str]],
) -> list[dict[str, str]]:
    """podsim's own measurements as rows to predict, ``ok`` rows only: each row's columns, and
    ``metric`` (its ``step_ms`` in s) on one GPU, ``kind``, the source (``script`` and the
    provenance) and what ``extra`` adds."""
    prov = steps.provenance
    where = ", ".join(
        x
        for x in (
            prov.get("device", ""),
            prov.get("date", "")[:10],
            f"torch {prov['torch']}" if prov.get("torch") else "",
        )
        if x
    )
    out = []
    for r in steps.rows:
        if not r.ok:
            continue
        d = dict(r.values)
        d.update(
            row_id=r.row_id,
            metric=metric,
            value=repr(r.step_ms / 1000.0),
            unit="s",
            gpu=r.gpu,
            gpus="1",
            kind=kind,
            set=set_name,
            source=f"podsim {script} ({where})",
            source_loc=r.source,
            **extra(r),
        )
        out.append(d)
    return out


def step_rows(steps: StepSet, set_name: str) -> list[dict[str, str]]:
    """Measured training steps (``podsim/compute/steps.py``): metric ``step_time_s``, ``kind``
    ``training_step``."""
    return _measured(steps, set_name, "training_step", "step_time_s", "benchmarks/gpu/training_steps.py", lambda r: {})


def serving_step_rows(steps: ServingStepSet, set_name: str) -> list[dict[str, str]]:
    """Measured serving steps (``podsim/serving/llm/measured_steps.py``): metric ``step_s``,
    ``kind`` ``serving_step`` (the step's own kind as ``step_kind``)."""
    return _measured(
        steps,
        set_name,
        "serving_step",
        "step_s",
        "benchmarks/gpu/inference_steps.py",
        lambda r: {"step_kind": r.kind, "label": r.label},
    )


def read_rows(path: str | Path, set_name: str) -> list[dict[str, str]]:
    """The rows of one CSV (``#`` lines are comments), each with ``set`` = ``set_name``; a
    training-steps CSV (``benchmarks/gpu/training_steps.py``'s) is read as :func:`step_rows`.

    Raises:
        InputError: for an unreadable file, a missing or repeated column, a row longer than the
            header, an empty or repeated row id, a value that is not a number > 0 or a count out
            of range (the word columns: :func:`check_choices`).
    """
    src = str(path)
    text = read_text(path, "rows file")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    check_columns(reader.fieldnames, src)
    if "step_ms" in (reader.fieldnames or []) and "metric" not in (reader.fieldnames or []):
        if "kind" in (reader.fieldnames or []):  # serving steps (benchmarks/gpu/inference_steps.py)
            return serving_step_rows(read_serving_steps(path), set_name)
        return step_rows(read_steps(path), set_name)
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column {missing[0]!r} (rows need {', '.join(REQUIRED)})", src)
    out = []
    ids: set[str] = set()
    for n, r in enumerate(reader, start=2):
        where = f"row {n} ({(r.get('row_id') or '').strip()})"
        if None in r:
            raise InputError(f"the row has more cells than the header's {len(reader.fieldnames or [])}", src, where)
        try:
            value = float(r["value"])
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"value must be a finite number > 0 (a measurement), got {r['value']!r}", src, where)
        r = {k: (v or "").strip() for k, v in r.items()}
        if not r["row_id"] or r["row_id"] in ids:
            why = "given twice" if r["row_id"] else "empty"
            raise InputError(f"row_id {r['row_id']!r} is {why}: each row needs its own", src, where)
        ids.add(r["row_id"])
        for col, lo in COUNTS.items():
            v = r.get(col, "")
            if v and not (v.isdecimal() and lo <= int(v) <= MAX_COUNT):
                raise InputError(f"{col} must be an integer from {lo} to 2^31, got {v!r}", src, where)
        if r.get("experts", "") in ("", "0"):
            for col in ("top_k", "etp", "moe_ffn_hidden", "shared_experts"):
                if r.get(col, "") not in ("", "0"):
                    raise InputError(f"{col} is for a mixture of experts; this row has no experts", src, where)
        r["set"] = set_name
        out.append(r)
    return out


def check_choices(r: dict[str, str], source: str) -> None:
    """Refuse a row whose word columns (:data:`CHOICES`) hold a word they do not take (a
    misspelt ``swiglu`` would silently run as gelu).  The rows of a published-measurements
    table are checked once mapped to these columns (``podsim calibrate training``).

    Raises:
        InputError: naming ``source``, the row and the column, with the closest word."""
    for col, words in CHOICES.items():
        v = r.get(col, "")
        if v and v not in words:
            hint = closest(v, words)
            raise InputError(
                f"{col} must be one of {', '.join(words)} (or empty), got {v!r}"
                + (f"; did you mean {hint!r}?" if hint else ""),
                source,
                f"row {r.get('row_id', '')}",
            )


def shipped_rows(sets: tuple[str, ...] = ("fitted", "reported")) -> list[dict[str, str]]:
    """The rows shipped with podsim, the ``fitted`` set first."""
    out: list[dict[str, str]] = []
    for s in sets:
        for name in SETS[s]:
            p = resources.files("podsim.validation") / name
            if p.is_file():
                out += read_rows(Path(str(p)), s)
        if s == "fitted":  # podsim's own measured training steps (compute/tables/steps/<gpu>.csv)
            for steps in shipped_steps():
                out += step_rows(steps, s)
            for serving in shipped_serving_steps():
                out += serving_step_rows(serving, s)
    return out
