"""Serving stacks: the presets and their citations, the error of a measured host overhead on a GPU
podsim has not measured, the engine's GEMM efficiency in ``podsim infer``, and ``podsim calibrate
inference`` end to end.

Expected values are hand-derived (a FLOP-bound GEMM at half the efficiency takes twice as long, a
weight-read-bound one as long) or planted: step times made by ``podsim infer``'s own call, or a
serving run's per-request latencies made by ``podsim serve-llm``'s, under a stack with a known host
overhead and GEMM efficiency, which the fit must recover."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
import yaml

from podsim.api.calibrate import (
    INFERENCE_COLUMNS,
    RUN_METRICS,
    SERVING_RUN_COLUMNS,
    is_serving_run,
    read_inference_runs,
    read_serving_run,
    run_targets,
)
from podsim.api.infer import infer
from podsim.api.serve_llm import serve_llm
from podsim.cli import main
from podsim.errors import InputError
from podsim.jobs.infer import InferJob
from podsim.jobs.serve_llm import ServeLLMJob
from podsim.stacks.stack import load_stack, measured_serving_gpus, presets

SERVING = ("vllm", "vllm-v0-eager", "sglang", "tensorrt-llm")


def test_serving_presets_load_and_cite_every_value(capsys):
    names = {s.name for s in presets("serving")}
    assert set(SERVING) <= names
    for name in SERVING:
        st = load_stack(name, "serving")
        assert set(st.values) == set(st.sources) and "host_overhead_ms" in st.values, name
        assert all(len(c) > 40 for c in st.sources.values()), name
        assert set(st.free) == {"host_overhead_ms", "engine_gemm_efficiency"}, name
    assert main(["stack", "--list"]) == 0
    out = capsys.readouterr().out
    assert "sglang" in out and "tensorrt-llm" in out
    assert main(["stack", "show", "sglang"]) == 0
    out = capsys.readouterr().out
    assert "overlap" in out and "source: LMSYS blog 'SGLang v0.4'" in out and "(podsim's default)" in out
    assert main(["stack", "show", "tensorrt-llm"]) == 0
    assert "overlap-scheduler.md @081661b" in capsys.readouterr().out


INFER = ["infer", "--model", "llama3-8b", "--gpu", "h100", "--prompt-tokens", "128", "--output-tokens", "4"]


def test_a_measured_host_overhead_on_an_unmeasured_gpu_says_what_to_do(capsys):
    assert "h100-80gb" not in measured_serving_gpus()
    assert main([*INFER, "--stack", "vllm"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for part in ("'vllm'", "cuda-graphs", "H100-SXM5-80GB (h100-80gb)", "measured GPUs: h200", "--host-overhead-ms MS"):
        assert part in err, part
    assert "podsim calibrate inference ROWS.csv --base vllm" in err
    # the flag, as the message says, wins over the stack's measurement
    assert main([*INFER, "--stack", "vllm", "--host-overhead-ms", "1.5"]) == 0
    # and a preset whose host time is a number runs on any GPU
    assert main([*INFER, "--stack", "sglang"]) == 0


def _job(**over: object) -> InferJob:
    values = {"model": "llama3-8b", "gpu": "h100", "batch": 1, "prompt-tokens": 2048, "output-tokens": 4}
    return InferJob.from_values({**values, **over})


def test_engine_gemm_efficiency_slows_flop_bound_gemms_only():
    base = load_stack("sglang")
    half = replace(base, values={**base.values, "engine_gemm_efficiency": 0.5})
    a, b = infer(_job(), software=base).report, infer(_job(), software=half).report
    # the prefill's GEMMs are FLOP-bound: twice the time (less their launch latency, a few us)
    assert b.prefill_parts_s["gemm"] / a.prefill_parts_s["gemm"] == pytest.approx(2.0, rel=0.01)
    # one decoding sequence's GEMMs read the weights: no change
    assert b.decode_parts_s["gemm"] == pytest.approx(a.decode_parts_s["gemm"], rel=1e-9)
    assert infer(_job(), software=half).stack["values"]["engine_gemm_efficiency"] == 0.5


ROWS = [  # model, gpu, tp, pp, batch, prompt_tokens, output_tokens
    ("llama3-8b", "h100", 1, 1, 1, 1024, 8),
    ("llama3-8b", "h100", 1, 1, 32, 512, 8),
    ("llama3-8b", "h100", 2, 1, 8, 2048, 8),
]


def _write_rows(path, truth, rows=ROWS, prefill: bool = True) -> None:
    """Step times of ``rows`` as ``podsim infer`` times them under the stack ``truth`` (ms)."""
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["row_id", *INFERENCE_COLUMNS])
        w.writeheader()
        for n, (model, gpu, tp, pp, batch, prompt, output) in enumerate(rows, 1):
            job = InferJob.from_values(
                {
                    "model": model,
                    "gpu": gpu,
                    "tp": tp,
                    "pp": pp,
                    "batch": batch,
                    "prompt-tokens": prompt,
                    "output-tokens": output,
                }
            )
            rep = infer(job, software=truth).report
            w.writerow(
                {
                    "row_id": f"ours_{n}",
                    "model": model,
                    "gpu": gpu,
                    "tp": tp,
                    "pp": pp,
                    "batch": batch,
                    "prompt_tokens": prompt,
                    "output_tokens": output,
                    "prefill_ms": f"{1e3 * rep.prefill_s:.9g}" if prefill else "",
                    "decode_ms": f"{1e3 * rep.decode_step_mean_s:.9g}",
                }
            )


def test_calibrate_inference_recovers_a_planted_host_overhead(tmp_path, capsys):
    """Our engine: vLLM's code path with 3 ms of host time per step and GEMMs at 0.8 of podsim's
    fit (planted); measured on an H100, which podsim has no vLLM measurement of, so the fit starts
    from 0 ms and says so.  The written stack then predicts as the truth does."""
    base = load_stack("vllm")
    truth = replace(base, values={"host_overhead_ms": 3.0, "engine_gemm_efficiency": 0.8})
    rows, out, js = tmp_path / "steps.csv", tmp_path / "ours.yaml", tmp_path / "fit.json"
    _write_rows(rows, truth)
    argv = ["calibrate", "inference", str(rows), "--base", "vllm", "--out", str(out), "--json", str(js)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "podsim calibrate inference: 3 run(s), base stack vllm" in text
    assert "fitted host_overhead_ms" in text and "ours_2 decode_ms" in text and f"wrote {out}" in text
    assert "with host_overhead_ms 0: vllm's 'cuda-graphs' is podsim's measurement on h200" in text
    d = json.loads(js.read_text())
    assert d["fitted"]["host_overhead_ms"] == pytest.approx(3.0, rel=0.01)
    assert d["fitted"]["engine_gemm_efficiency"] == pytest.approx(0.8, rel=0.01)
    assert len(d["runs"]) == 6 and all(abs(r["error_after"]) < 0.005 for r in d["runs"])
    assert all(r["error_before"] < 0 for r in d["runs"] if r["metric"] == "decode_ms")
    ours = load_stack(str(out), "serving")
    assert ours.base == "vllm" and ours.sources["host_overhead_ms"].startswith("fitted by podsim calibrate inference")
    assert "ours_1, ours_2, ours_3" in ours.sources["host_overhead_ms"]
    big = _job(tp=4, batch=64, **{"prompt-tokens": 4096, "output-tokens": 16})
    want, got = infer(big, software=truth).report, infer(big, software=ours).report
    assert got.decode_step_mean_s == pytest.approx(want.decode_step_mean_s, rel=0.01)
    assert got.prefill_s == pytest.approx(want.prefill_s, rel=0.01)


def test_calibrate_inference_refuses_a_fit_on_its_bound_and_writes_nothing(tmp_path, capsys):
    base = load_stack("sglang")
    slow = replace(base, values={"host_overhead_ms": 400.0})  # beyond the 100 ms the preset allows
    rows, out = tmp_path / "steps.csv", tmp_path / "ours.yaml"
    _write_rows(rows, slow, ROWS[:1])
    argv = ["calibrate", "inference", str(rows), "--base", "sglang", "--free", "host_overhead_ms", "--out", str(out)]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "refused: host_overhead_ms landed on its bound" in text and "no stack file written" in text
    assert not out.exists()


def test_fewer_step_times_than_free_parameters_says_which_it_held(tmp_path, capsys):
    truth = replace(load_stack("sglang"), values={"host_overhead_ms": 2.0})
    rows, out, js = tmp_path / "steps.csv", tmp_path / "ours.yaml", tmp_path / "fit.json"
    _write_rows(rows, truth, ROWS[:1], prefill=False)  # one decode time, two free parameters
    assert main(["calibrate", "inference", str(rows), "--base", "sglang", "--out", str(out), "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "held   engine_gemm_efficiency" in text and "fewer measured step times than free parameters" in text
    d = json.loads(js.read_text())
    assert d["held"] == {"engine_gemm_efficiency": 1.0}
    assert d["fitted"]["host_overhead_ms"] == pytest.approx(2.0, rel=0.01)
    data = yaml.safe_load(out.read_text())
    assert (
        list(data["serving"]) == ["host_overhead_ms"]
        and "held at the base's values: engine_gemm_efficiency" in (data["description"])
    )


@pytest.mark.parametrize(
    "header, row, message",
    [
        ("model,gpu,tp,pp,batch,prompt_tokens,output_tokens,decode_ms", "x", "missing column 'prefill_ms'"),
        (",".join(INFERENCE_COLUMNS), "llama3-8b,h100,1,1,1,128,8,,", "give prefill_ms or decode_ms"),
        (",".join(INFERENCE_COLUMNS), "llama3-8b,h100,1,1,1,128,1,,5", "decode_ms needs output_tokens >= 2"),
        (",".join(INFERENCE_COLUMNS), "llama3-8b,h100,0,1,1,128,8,,5", "tp must be a whole number >= 1"),
        (",".join(INFERENCE_COLUMNS), "llama3-8b,h100,1,1,1,128,8,-3,", "prefill_ms must be a number > 0"),
        (",".join(INFERENCE_COLUMNS), "llama3-8b,nope-gpu,1,1,1,128,8,,5", r"steps.csv: row 1: unknown GPU"),
    ],
)
def test_bad_serving_runs_are_clear_errors(tmp_path, header, row, message):
    p = tmp_path / "steps.csv"
    p.write_text(f"{header}\n{row}\n")
    with pytest.raises(InputError, match=message):
        read_inference_runs(p)


def test_shipped_step_times_read_as_serving_runs_and_free_names_are_checked(tmp_path, capsys):
    runs = read_inference_runs("shipped:infer_17,infer_18")
    assert [(r["row_id"][:8], r["prefill_ms"], r["decode_ms"]) for r in runs] == [
        ("infer_17", "688.05", ""),
        ("infer_18", "", "54.86"),
    ]
    assert runs[0]["gpu"] == "a100-80gb" and runs[0]["tp"] == "2" and runs[0]["precision"] == "fp16"
    with pytest.raises(InputError, match="no shipped prefill or decode-step row"):
        read_inference_runs("shipped:nothing_")
    out = tmp_path / "x.yaml"
    argv = ["calibrate", "inference", "shipped:infer_18", "--out", str(out)]
    assert main([*argv, "--base", "vllm", "--free", "host_ns"]) == 2
    err = capsys.readouterr().err
    assert "'host_ns' is not a physical serving parameter (host_overhead_ms, engine_gemm_efficiency)" in err
    assert main([*argv, "--base", "torchtitan"]) == 2
    assert "needs a serving stack" in capsys.readouterr().err


# -- a serving run: per-request TTFT and E2E, replayed by serve-llm ---------------------------------


def test_run_targets_are_the_mean_ttft_mean_e2e_and_median_tpot():
    # three requests: TPOT (e2e - ttft) / (out - 1) = 1000 / 10 = 100, 4000 / 20 = 200, 400 / 4 = 100 ms
    ttft, e2e, out = [100.0, 200.0, 300.0], [1100.0, 4200.0, 700.0], [11, 21, 5]
    assert run_targets(ttft, e2e, out, [True, True, True]) == pytest.approx([200.0, 2000.0, 100.0])
    # a failed request is left out of all three
    assert run_targets(ttft, e2e, out, [True, True, False]) == pytest.approx([150.0, 2650.0, 150.0])


def _write_run(tmp_path, truth, n=8):
    """A planted serving run of ``n`` requests on one H100 (Llama 3 8B): long prompts arriving 2 s
    apart, so each is served alone -- its TTFT a prefill (GEMM-bound: the engine's GEMM efficiency)
    and its decode steps weight-read-bound (the host time) -- timed by serve-llm's own call under
    the stack ``truth``; the file holds the per-request columns of a measured run."""
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrived_at,num_prefill_tokens,num_decode_tokens\n"
        + "".join(f"{2.0 * i},{4096 + 256 * i},{32 + 4 * i}\n" for i in range(n))
    )
    job = ServeLLMJob.from_values({"model": "llama3-8b", "gpu": "h100", "workload": str(trace)})
    res = serve_llm(job, software=truth).result
    run = tmp_path / "ours.measured.csv"
    with run.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*SERVING_RUN_COLUMNS, "has_error"])
        for i in range(n):
            ttft, e2e = (res.first_ns[i] - res.arrival_ns[i]) / 1e6, (res.finish_ns[i] - res.arrival_ns[i]) / 1e6
            w.writerow([2.0 * i, 4096 + 256 * i, 32 + 4 * i, f"{ttft:.9g}", f"{e2e:.9g}", 0])
    return run


RUN_FLAGS = ["--model", "llama3-8b", "--gpu", "h100"]


def test_calibrate_inference_on_a_serving_run_recovers_a_planted_engine(tmp_path, capsys):
    """Our engine: 2.5 ms of host time per step, GEMMs at 0.85 of podsim's fit (planted); its run
    replayed request by request must give back both, and the written stack cites the run and the
    replay's flags."""
    base = load_stack("sglang")
    truth = replace(base, values={"host_overhead_ms": 2.5, "engine_gemm_efficiency": 0.85})
    run = _write_run(tmp_path, truth)
    out, js = tmp_path / "ours.yaml", tmp_path / "fit.json"
    argv = ["calibrate", "inference", str(run), "--base", "sglang", "--out", str(out), "--json", str(js)]
    assert main([*argv, *RUN_FLAGS]) == 0
    text = capsys.readouterr().out
    assert "podsim calibrate inference: 1 run(s), base stack sglang" in text
    assert "replayed request by request as podsim serve-llm --model llama3-8b --gpu h100" in text
    for metric in RUN_METRICS:
        assert f"ours {metric}" in text
    d = json.loads(js.read_text())
    assert d["fitted"]["host_overhead_ms"] == pytest.approx(2.5, rel=0.02)
    assert d["fitted"]["engine_gemm_efficiency"] == pytest.approx(0.85, rel=0.02)
    assert [r["metric"] for r in d["runs"]] == list(RUN_METRICS)
    assert all(abs(r["error_after"]) < 0.01 for r in d["runs"])
    # sglang's own host time is 0: before the fit podsim is too fast on every target
    assert all(r["error_before"] < 0 for r in d["runs"])
    ours = load_stack(str(out), "serving")
    cite = ours.sources["host_overhead_ms"]
    assert "(runs: ours; replayed as podsim serve-llm --model llama3-8b --gpu h100)" in cite
    assert ours.get("host_overhead_ms") == pytest.approx(2.5, rel=0.02)


def test_a_serving_run_fit_with_one_free_parameter_and_failed_requests(tmp_path, capsys):
    truth = replace(load_stack("sglang"), values={"host_overhead_ms": 4.0})
    run = _write_run(tmp_path, truth)
    # a failed request (no times) is replayed but not fitted
    lines = run.read_text().splitlines()
    cells = lines[3].split(",")
    lines[3] = ",".join([*cells[:3], "", "", "1"])
    run.write_text("\n".join(lines) + "\n")
    assert read_serving_run(run).ok == [True, True, False, True, True, True, True, True]
    out, js = tmp_path / "ours.yaml", tmp_path / "fit.json"
    argv = ["calibrate", "inference", str(run), "--base", "sglang", "--free", "host_overhead_ms"]
    assert main([*argv, "--out", str(out), "--json", str(js), *RUN_FLAGS]) == 0
    d = json.loads(js.read_text())
    assert d["fitted"]["host_overhead_ms"] == pytest.approx(4.0, rel=0.02) and d["held"] == {}
    assert d["replay"] == "--model llama3-8b --gpu h100"


@pytest.mark.parametrize(
    "text, message",
    [
        ("arrived_at,num_prefill_tokens,num_decode_tokens,ttft_ms\n0,10,5,3\n", "missing column 'e2e_ms'"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens,ttft_ms,e2e_ms\n0,10,5,30,20\n", "e2e_ms 20 is below"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens,ttft_ms,e2e_ms\n0,10,0,3,20\n", "num_decode_tokens must"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens,ttft_ms,e2e_ms\n0,10,5,-3,20\n", "ttft_ms must be a number"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens,ttft_ms,e2e_ms,has_error\n0,10,5,,,1\n", "no requests"),
    ],
)
def test_bad_serving_run_files_are_clear_errors(tmp_path, text, message):
    p = tmp_path / "run.csv"
    p.write_text(text)
    assert is_serving_run(p)
    with pytest.raises(InputError, match=message):
        read_serving_run(p)


def test_serve_llm_flags_belong_to_a_serving_run(tmp_path, capsys):
    rows, out = tmp_path / "steps.csv", tmp_path / "ours.yaml"
    _write_rows(rows, load_stack("sglang"), ROWS[:1])
    assert not is_serving_run(rows) and not is_serving_run("shipped:infer_18")
    argv = ["calibrate", "inference", str(rows), "--base", "sglang", "--out", str(out)]
    assert main([*argv, "--max-num-seqs", "64"]) == 2
    err = capsys.readouterr().err
    assert "--max-num-seqs is a flag of a serving run's replay" in err and "name their own model" in err
    run = _write_run(tmp_path, load_stack("sglang"), n=2)
    argv = ["calibrate", "inference", str(run), "--base", "sglang", "--out", str(out)]
    assert main([*argv, "--model", "llama3-8b"]) == 2
    assert "a serving run needs --gpu: the GPU it ran on" in capsys.readouterr().err
    assert main([*argv, "--gpu", "h100"]) == 2
    assert "a serving run needs --model or --model-config" in capsys.readouterr().err
    assert not out.exists()
