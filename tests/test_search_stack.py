"""podsim search --stack: every layout the search screens and simulates runs on the software
stack, as podsim llm --stack runs it.

Expected values are derived by hand, not taken from a run: a stack that halves the GEMM and
attention throughput at least halves a compute-bound layout's tokens/s and cannot do much more
(the memory-bound kernels keep their time); 126 layers split evenly over 8 stages are 15, 16 x 6,
15 (the remainder one each to the stages after the first); FSDP shards every layout with data
parallelism; a row's command run alone gives the row's tokens/s."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from podsim.api import SearchJob, search
from podsim.api.search import check_kind
from podsim.cli import main
from podsim.errors import InputError
from podsim.hardware.gpu import get_gpu
from podsim.jobs.kinds import PARAMS_BY_COMMAND
from podsim.jobs.search import TRAINING_ONLY
from podsim.llm.model import get_model
from podsim.stacks.stack import SoftwareStack, load_stack
from podsim.sweep.search import search as search_layouts
from podsim.sweep.space import Space

#: a compute-bound layout: one GPU (no communication), micro-batches of 4 sequences of 2048
#: tokens (the host's kernel launches hide under the kernels)
ONE_GPU = dict(
    gpus=(1,),
    model="gpt3-1.3b",
    gpu="h100",
    global_batch=16,
    seq_len=2048,
    tp_values=(1,),
    pp_values=(1,),
    vpp_values=(1,),
    micro_batch_values=(4,),
    recompute_values=("none",),
    sequence_parallel_values=(False,),
    distributed_optimizer_values=(False,),
    workers=1,
)
#: a small space on 8 GPUs of a 12-layer model (the micro-batch values left to the stack)
SMALL = dict(
    gpus=(8,),
    model="gpt3-125m",
    gpu="h100",
    global_batch=16,
    seq_len=2048,
    tp_values=(1, 2),
    pp_values=(1,),
    vpp_values=(1,),
    recompute_values=("none",),
    workers=1,
)


def _stack_file(tmp_path: Path, training: dict, name: str = "slow") -> str:
    """A stack YAML on Megatron-Core with ``training``'s values (each cited)."""
    p = tmp_path / f"{name}.yaml"
    data = {
        "name": name,
        "kind": "training",
        "base": "megatron-core",
        "training": training,
        "sources": {k: "a test's value" for k in training},
    }
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _by_layout(rows: list[dict]) -> dict[tuple, dict]:
    return {tuple(r["layout"][k] for k in ("tp", "pp", "micro_batch", "recompute")): r for r in rows}


def test_the_flag_is_podsim_llms() -> None:
    """One vocabulary: the search's --stack is podsim llm's declaration, a training search's."""
    search_stack = next(p for p in PARAMS_BY_COMMAND["search"] if p.name == "stack")
    assert search_stack == next(p for p in PARAMS_BY_COMMAND["llm"] if p.name == "stack")
    assert "stack" in TRAINING_ONLY and SearchJob(gpus=(8,)).stack == "megatron-core"


def test_the_default_stack_is_the_search_without_a_stack() -> None:
    """megatron-core's rules set nothing podsim's layouts do not already hold, and its kernels
    are the GPU's: the same rows as a space without a stack, commands without --stack."""
    kw = dict(SMALL, pp_values=(1, 2), micro_batch_values=(1, 2))
    res = search(SearchJob(**kw, simulate_top=3))
    assert res.job.stack == "megatron-core"
    assert res.stack["name"] == "megatron-core" and res.stack["origin"] == "preset" and res.stack["applied"] == {}
    dims = dict(tp=(1, 2), pp=(1, 2), vpp=(1,), micro_batch=(1, 2), recompute=("none",))
    space = Space(gpus=(8,), global_batch=16, seq_len=2048, **dims)
    model = get_model("gpt3-125m")
    room = get_gpu("h100").memory_gib
    alone = search_layouts(model, "--model gpt3-125m", space, "h100", room, workers=1, simulate_top=3)
    assert res.rows == alone.rows and res.result.rejected == alone.rejected
    assert {r["method"] for r in res.rows} == {"simulated", "estimated"}
    assert not any("--stack" in r["command"] for r in res.rows)


def test_half_the_gemm_and_attention_throughput_halves_a_compute_bound_layouts_tokens(tmp_path: Path) -> None:
    """GEMMs and attention twice as long, the memory-bound kernels as they were: tokens/s at
    least halve, and (those kernels a small share) not much more, for the estimated rows and
    the simulated one alike; the rows' commands name the stack's file."""
    slow = _stack_file(tmp_path, {"gemm_efficiency": 0.5, "attention_efficiency": 0.5})
    kw = dict(ONE_GPU, micro_batch_values=(4, 8), recompute_values=("none", "full"), simulate_top=1)
    base = _by_layout(search(SearchJob(**kw)).rows)
    res = search(SearchJob(**kw, stack=slow))
    rows = _by_layout(res.rows)
    assert rows.keys() == base.keys() and len(rows) == 4
    assert {r["method"] for r in res.rows} == {"simulated", "estimated"}
    for key, r in rows.items():
        ratio = r["tokens_per_s"] / base[key]["tokens_per_s"]
        assert 0.5 <= ratio <= 0.6, (key, ratio)
        assert f"--stack {slow}" in r["command"]
    assert res.stack["name"] == "slow" and res.stack["origin"] == slow


def _scale(k: dict, st: SoftwareStack) -> float:
    """How much longer ``st`` runs kernel ``k`` on an H100 than Megatron-Core (its relative efficiencies
    divide a GEMM's or attention's throughput, its traffic multiplies a memory-bound kernel's)."""
    if k["kind"] == "gemm":
        return 1 / st.value_for("gemm_efficiency", "hopper")
    if k["kind"] == "attention":  # a table by sequence length: ONE_GPU's 2048 is one of its points
        return 1 / st.value_for("attention_efficiency", "hopper")[ONE_GPU["seq_len"]]
    if k["kind"] == "memory":
        own = {"fp8": st.get("fp8_overhead", 1.0), "optimizer": 1.0}
        return own.get(k["module"], st.get("elementwise_traffic", 1.0))
    return 1.0


def test_torchtitan_ranks_fewer_tokens_by_the_ratio_its_efficiencies_imply(tmp_path: Path) -> None:
    """A compute-bound layout's time is its kernels' (one GPU: no communication to hide them
    behind); each of Megatron-Core's kernels scaled by torchtitan's relative efficiency and
    traffic gives the ratio of their tokens/s, which the search's rows show."""
    st = load_stack("torchtitan")
    mc = search(SearchJob(**ONE_GPU)).rows[0]
    tt = search(SearchJob(**ONE_GPU, stack="torchtitan")).rows[0]
    # one GPU, micro-batches given: the rules change nothing that counts (TP overlap needs TP)
    assert dict(tt["layout"], tp_overlap="te") == mc["layout"]
    out = tmp_path / "k.json"
    assert main([*shlex.split(mc["command"])[1:], "--kernels", "--json", str(out)]) == 0
    kernels = json.loads(out.read_text())["kernels"]
    lay, layers = mc["layout"], get_model(ONE_GPU["model"]).layers
    mbs = lay["num_microbatches"]
    times = {"layer_forward": layers * mbs, "layer_backward": layers * mbs, "optimizer": 1}
    times.update({f"{p}_{d}": mbs for p in ("embedding", "output") for d in ("forward", "backward")})
    ours = sum(n * k["time_us"] for part, n in times.items() for k in kernels[part])
    theirs = sum(n * k["time_us"] * _scale(k, st) for part, n in times.items() for k in kernels[part])
    ratio = tt["tokens_per_s"] / mc["tokens_per_s"]
    assert ratio == pytest.approx(ours / theirs, rel=0.02)
    worst = max(st.value_for("gemm_efficiency", "hopper"), st.value_for("attention_efficiency", "hopper")[2048])
    assert ratio < worst


def test_126_layers_on_pp_8_are_a_candidate_only_under_an_even_split() -> None:
    """Llama 3 405B's 126 layers: PP 8 does not divide them, which Megatron's split refuses;
    torchtitan splits them 15, 16 x 6, 15."""
    kw = dict(
        gpus=(1024,),
        model="llama3-405b",
        gpu="h100",
        global_batch=512,
        seq_len=8192,
        tp_values=(8,),
        pp_values=(8,),
        vpp_values=(1,),
        micro_batch_values=(1,),
        recompute_values=("full",),
        workers=1,
    )
    with pytest.raises(InputError, match="no layout is left .* does not divide the N layers of the model"):
        search(SearchJob(**kw))
    res = search(SearchJob(**kw, stack="torchtitan"))
    even = [15, 16, 16, 16, 16, 16, 16, 15]
    assert res.rows and all(r["layout"]["pp"] == 8 for r in res.rows)
    assert all(r["layout"]["layers_per_virtual_stage"] == even for r in res.rows)
    assert res.stack["applied"]["pipeline_layers"] == even


def test_fsdp_shards_every_data_parallel_layout_once() -> None:
    """torchtitan's data parallelism is FSDP (ZeRO-3) and its TP plan sequence parallel: the
    search does not try Megatron's distributed optimizer or TP without SP under it, nor the
    same layout twice."""
    res = search(SearchJob(**SMALL, stack="torchtitan"))
    lays = [r["layout"] for r in res.rows]
    assert {(x["tp"], x["dp"]) for x in lays} == {(1, 8), (2, 4)} and len(lays) == 2
    for x in lays:
        assert x["zero"] == 3 and not x["distributed_optimizer"]
        assert x["sequence_parallel"] == (x["tp"] > 1)
    assert next(x for x in lays if x["tp"] == 2)["tp_overlap"] == "none"
    assert all("--stack torchtitan" in r["command"] and "--zero 3" in r["command"] for r in res.rows)
    # megatron-core: TP 2 with and without sequence parallelism, the distributed optimizer or not
    mc = [r["layout"] for r in search(SearchJob(**SMALL)).rows]
    assert {(x["tp"], x["sequence_parallel"]) for x in mc} == {(1, False), (2, False), (2, True)}
    assert {(x["zero"], x["distributed_optimizer"]) for x in mc} == {(0, False), (0, True)}


#: TP 1 and TP 2, each with ZeRO-3
BOTH = {(1, 3), (2, 3)}


@pytest.mark.parametrize(
    "given, reason, kept",
    [
        (dict(zero_values=(0, 3)), "--zero-values N: the stack's rules set N", BOTH),
        (dict(sequence_parallel_values=(False,)), "--sequence-parallel-values off: the stack's rules set on", {(1, 3)}),
        (dict(tp_overlap_values=("te", "none")), "--tp-overlap-values te: the stack's rules set none", BOTH),
    ],
)
def test_a_given_value_the_rules_would_replace_is_rejected(given: dict, reason: str, kept: set) -> None:
    """A value given that torchtitan's rules replace where podsim llm's flag is left at its
    default: podsim llm --stack torchtitan cannot run it, so the layout is rejected, with why."""
    res = search(SearchJob(**SMALL, **given, stack="torchtitan"))
    assert {(r["layout"]["tp"], r["layout"]["zero"]) for r in res.rows} == kept
    (why,) = [k for k in res.result.rejected if k.startswith(reason)]
    assert res.result.rejected[why] >= 1


def test_a_local_batch_fills_the_micro_batch_where_pp_is_1(tmp_path: Path) -> None:
    """``micro_batch: local``: with PP 1 a rank takes its whole share (16 / DP 4 = 4) in one step;
    with PP 2 the space's micro-batches are tried; a micro-batch of 1 given is rejected at PP 1."""
    local = _stack_file(tmp_path, {"micro_batch": "local"}, "local")
    kw = dict(SMALL, tp_values=(2,), pp_values=(1, 2), micro_batch_values=(1, 2, 4))
    kw["distributed_optimizer_values"] = (False,)
    rows = search(SearchJob(**kw, stack=local)).rows
    got = sorted((r["layout"]["pp"], r["layout"]["micro_batch"]) for r in rows if not r["layout"]["sequence_parallel"])
    assert got == [(1, 4), (2, 1), (2, 2), (2, 4)]
    res = search(SearchJob(**dict(kw, micro_batch_values=(1, 2)), stack=local))
    assert any(k.startswith("--micro-batch-values N: the stack's rules set N") for k in res.result.rejected)
    assert {(r["layout"]["pp"], r["layout"]["micro_batch"]) for r in res.rows} == {(1, 2), (2, 1), (2, 2)}


def test_an_unknown_stack_names_the_closest_preset(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match="unknown stack 'torchtitn'; did you mean 'torchtitan'"):
        search(SearchJob(**SMALL, stack="torchtitn"))
    args = ["search", "--model", "gpt3-125m", "--gpus", "8", "--global-batch", "16", "--stack", "torchtitn"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "did you mean 'torchtitan'" in err and "Traceback" not in err
    with pytest.raises(InputError, match="--stack is for a training search"):
        check_kind(SearchJob(gpus=(8,), model="llama3-8b", workload="poisson:2", stack="vllm"))


def test_the_json_the_summary_and_the_reproducing_command_name_the_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.json"
    flags = ["--model", "gpt3-125m", "--gpu", "h100", "--gpus", "8", "--global-batch", "16", "--tp-values", "1,2"]
    flags += ["--pp-values", "1", "--vpp-values", "1", "--recompute-values", "none"]
    assert main(["search", *flags, "--stack", "torchtitan", "--workers", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["stack"]["name"] == "torchtitan" and doc["inputs"]["stack"] == "torchtitan"
    assert doc["stack"]["applied"]["zero"] == 3 and doc["stack"]["values"]["data_parallel"] == "fsdp"
    assert "  stack      torchtitan (preset; set " in text
    best = doc["best"][0]
    assert "--stack torchtitan" in best["command"] and f"reproduce the best: {best['command']}" in text
    # the command alone runs the row's layout under the stack: the same tokens/s
    alone = tmp_path / "llm.json"
    assert main([*shlex.split(best["command"])[1:], "--json", str(alone)]) == 0
    run = json.loads(alone.read_text())
    assert run["tokens_per_s"] == best["tokens_per_s"] and run["stack"]["name"] == "torchtitan"


def test_a_results_store_keeps_the_stacks_apart(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    db = str(tmp_path / "r.duckdb")
    mc = search(SearchJob(**SMALL, store=db))
    assert mc.result.reused == 0
    tt = search(SearchJob(**SMALL, store=db, stack="torchtitan"))
    assert tt.result.reused == 0  # none of megatron-core's rows
    again = search(SearchJob(**SMALL, store=db, stack="torchtitan"))
    assert again.result.reused == len(tt.rows) and again.rows == tt.rows
    mc_again = search(SearchJob(**SMALL, store=db))  # the default's keys are those of a search before stacks
    assert mc_again.result.reused == len(mc.rows) and mc_again.rows == mc.rows
