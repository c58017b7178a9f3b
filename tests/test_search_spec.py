"""podsim search speaks the vocabulary of the runs it searches over: a flag it shares with
podsim llm or podsim serve-llm is that command's declaration (the same kind, default, metavar,
unit and choices), each --X-values flag lists values of the flag X that podsim llm or
serve-llm takes, and the fields only one kind of search takes are marked on the job."""

from __future__ import annotations

import pytest

from podsim.api.search import check_kind
from podsim.errors import InputError
from podsim.jobs.kinds import PARAMS_BY_COMMAND
from podsim.jobs.search import SERVING_ONLY, TRAINING_ONLY, SearchCommand, SearchJob

SEARCH = {p.name: p for p in PARAMS_BY_COMMAND["search"]}
LLM = {p.name: p for p in PARAMS_BY_COMMAND["llm"]}
SERVE = {p.name: p for p in PARAMS_BY_COMMAND["serve-llm"]}
#: flags of the same name that mean something else in a search: a list of GPU counts, the
#: requests of every capacity run (1000, where serve-llm runs a whole trace), the JSON document;
#: --precision is a training search's, podsim llm's (its recipes a superset of serve-llm's choices)
DIFFERENT = {"gpus", "requests", "json", "stack", "precision"}


def _same_declaration(a, b) -> bool:  # type: ignore[no-untyped-def]
    keys = ("kind", "default", "choices", "metavar", "unit", "aliases", "exclusive", "negate", "item")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


@pytest.mark.parametrize("other", [LLM, SERVE], ids=["llm", "serve-llm"])
def test_a_shared_flag_is_the_other_commands_declaration(other: dict) -> None:
    shared = sorted(set(SEARCH) & set(other) - DIFFERENT)
    assert shared, "no flag in common"
    for name in shared:
        assert _same_declaration(SEARCH[name], other[name]), name


def test_the_shared_flags_include_the_model_hardware_and_service_level() -> None:
    assert {"model", "model-config", "gpu", "cluster", "backend", "global-batch", "seq-len"} <= set(SEARCH) & set(LLM)
    assert {"workload", "slo-ttft", "slo-tpot", "router", "max-context", "capacity-target", "gpu-hour-price"} <= set(
        SEARCH
    ) & set(SERVE)


def test_every_values_flag_lists_values_of_an_llm_or_serve_llm_flag() -> None:
    fields_set = {
        (p.field or p.column).replace("_", "-"): p for p in (*LLM.values(), *SERVE.values()) if p.const is None
    }  # not --fsdp, which sets zero to 3
    for name, p in SEARCH.items():
        if not name.endswith("-values") or name == "chunk-values":  # a step's budget: two serve-llm flags
            continue
        stem = name[: -len("-values")]
        assert stem in fields_set, name
        assert f"--{fields_set[stem].name}" in p.help, f"{name}'s help names the flag it lists"


@pytest.mark.parametrize(
    "flag, llm_flag", [("recompute-values", "recompute"), ("tp-overlap-values", "tp-overlap"), ("zero-values", "zero")]
)
def test_a_values_flag_takes_exactly_the_llm_flags_choices(flag: str, llm_flag: str) -> None:
    choices = LLM[llm_flag].choices
    parsed = SEARCH[flag].to_field(",".join(str(c) for c in choices))
    assert parsed == tuple(choices)
    with pytest.raises(InputError):
        SEARCH[flag].to_field("bogus" if isinstance(choices[0], str) else str(max(choices) + 1))


def test_the_scheduler_values_are_serve_llms_schedulers() -> None:
    job = SearchCommand.from_values(
        {"gpus": "8", "model": "llama3-8b", "workload": "poisson:2", "scheduler-values": "vllm,orca,lightllm"}
    ).job
    assert job.scheduler_values == ("vllm", "orca", "lightllm")
    assert set(SERVE["scheduler"].choices) >= {"vllm", "sarathi", "orca", "static", "lightllm"}
    with pytest.raises(InputError, match="--scheduler-values"):
        SEARCH["scheduler-values"].to_field("vllm,nope")


def test_the_fields_of_one_kind_of_search_are_marked() -> None:
    assert not set(TRAINING_ONLY) & set(SERVING_ONLY)
    assert {"global_batch", "seq_len", "vpp_values", "zero_values", "memory_reserve", "backend", "store"} <= set(
        TRAINING_ONLY
    )
    assert {"requests", "slo_ttft", "capacity_target", "scheduler_values", "router", "max_context"} <= set(SERVING_ONLY)
    for both in ("gpus", "model", "gpu", "cluster", "tp_values", "pp_values", "ep_values", "objective", "workers"):
        assert both not in TRAINING_ONLY and both not in SERVING_ONLY
    # a marked field is refused in the other kind of search, by its flag
    with pytest.raises(InputError, match="--backend is for a training search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", workload="poisson:2", backend="flow"))
    with pytest.raises(InputError, match="--max-context is for a serving search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", global_batch=8, max_context=4096))
    # and one both take is not
    check_kind(SearchJob(gpus=(8,), model="llama3-8b", workload="poisson:2", tp_values=(2,), cluster="dgx-h100"))
