"""Replay the measured vLLM serving runs request by request with ``podsim serve-llm`` and print,
for each run, the measured mean TTFT, mean end-to-end latency and median time per output token
against podsim's: with the ``vllm`` preset (its host time per step at 0 ms: the preset's own is
podsim's measurement of a CUDA-graph engine on the H200, and none of these runs is on an H200),
and with ``vllm`` calibrated to one of the runs by ``podsim calibrate inference RUN.measured.csv``.

The runs: ``$PODSIM_REFERENCE_DATA/calibration/serving/vllm_anchor_runs.csv`` (default
``../shared/data``; vLLM 0.19, 300 ShareGPT requests at 10 req/s Poisson each) and their
per-request files ``workloads/<run>.measured.csv``.  Each is replayed with the engine settings the
run records (model, GPU, TP, data-parallel replicas, ``max_num_seqs``, ``max_num_batched_tokens``,
and the KV blocks vLLM reported where it did).

    PODSIM_REFERENCE_DATA=../shared/data python scripts/replay_vllm_anchors.py [--fit-run ID] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from podsim.api.calibrate import (
    RUN_METRICS,
    CalibrateJob,
    calibrate,
    load_stack,
    read_serving_run,
    replay_run,
    serving_run_job,
    write_stack,
)
from podsim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
#: the run the stack is calibrated to by default: one GPU, one replica, TP 1, a dense model and a
#: KV cache that never fills, so its latencies are the engine's step times and the queue they make
FIT_RUN = "llmservingsim_RTXPRO6000_Llama-3.1-8B"
#: the runs' Hugging Face model ids as podsim's zoo names them
MODELS = {
    "meta-llama/Llama-3.1-8B": "llama3-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b",
}
#: the runs' GPU descriptions as podsim's GPU keys
GPUS = {"NVIDIA GeForce RTX 4090": "rtx-4090", "NVIDIA RTX PRO 6000": "rtx-pro-6000"}
#: the longest request a replay takes (prompt + output tokens): vLLM's max_model_len where the runs
#: record it; the others ran at their model's longer default.  Only requests longer than this would
#: be refused (the runs' longest is 5,445 tokens); the engine limits are given explicitly.
MAX_CONTEXT = 32768
#: what the summary table calls each metric (ms), and its column in vllm_anchor_runs.csv
METRICS = {
    "ttft_mean_ms": ("mean TTFT", "ttft_mean_ms"),
    "e2e_mean_ms": ("mean E2E", "e2e_mean_ms"),
    "tpot_median_ms": ("median TPOT", "tpot_p50_ms"),
}


def reference_dir() -> Path:
    """Where the peers' reference data is (``PODSIM_REFERENCE_DATA``, default ``../shared/data``)."""
    return Path(os.environ.get("PODSIM_REFERENCE_DATA", ROOT.parent / "shared" / "data"))


def anchor_runs(data: Path) -> list[dict[str, Any]]:
    """The runs of ``vllm_anchor_runs.csv``: id, per-request file, the summary's targets (ms), the
    serve-llm flags that replay it and a note where the replay is not the run's own deployment.

    Raises:
        InputError: a model or GPU this script does not know."""
    folder = data / "calibration" / "serving"
    out = []
    with open(folder / "vllm_anchor_runs.csv", newline="") as f:
        for r in csv.DictReader(f):
            gpu = next((key for text, key in GPUS.items() if r["gpu"].startswith(text)), None)
            if r["model"] not in MODELS or gpu is None:
                raise InputError(f"run {r['experiment_id']}: no podsim name for {r['model']!r} on {r['gpu']!r}")
            flags: dict[str, Any] = {
                "model": MODELS[r["model"]],
                "gpu": gpu,
                "tp": int(r["tp"]),
                "pp": int(r["pp"]),
                "replicas": int(r["dp_replicas"]),
                "max-num-seqs": int(r["max_num_seqs"]),
                "max-batched-tokens": int(r["max_num_batched_tokens"]),
                "max-context": MAX_CONTEXT,
            }
            blocks = re.search(r"num_gpu_blocks=(\d+)", r["notes"])
            if blocks:  # vLLM's own KV cache size, where the run logged it
                flags["kv-blocks"] = int(blocks.group(1))
            note = ""
            if "expert parallel" in r["notes"]:
                note = (
                    "vLLM ran 2 data-parallel ranks with the experts split over both (EP 2); podsim runs 2 "
                    "replicas holding every expert each (serve-llm's EP lives inside a replica's TP group)"
                )
            measured = folder / Path(r["workload_file"]).with_suffix(".measured.csv")
            summary = {m: float(r[col]) for m, (_, col) in METRICS.items()}
            out.append({"run": r["experiment_id"], "file": measured, "flags": flags, "summary": summary, "note": note})
    return out


def _job(run: dict[str, Any], out: str) -> CalibrateJob:
    """``podsim calibrate inference RUN.measured.csv --base vllm --out OUT`` with the run's flags."""
    return CalibrateJob.from_values(
        {"kind": "inference", "rows": str(run["file"]), "base": "vllm", "out": out, **run["flags"]}
    )


def replay_all(data: Path, fit_run: str = FIT_RUN) -> dict[str, Any]:
    """Calibrate ``vllm`` to ``fit_run`` and replay every run with the preset (host 0 ms) and with
    the calibrated stack (read back from the file the calibration writes).

    Raises:
        InputError: an unknown ``fit_run``, a refused fit, a run podsim cannot replay."""
    runs = anchor_runs(data)
    fit_to = next((r for r in runs if r["run"] == fit_run), None)
    if fit_to is None:
        raise InputError(f"no run {fit_run!r} (runs: {', '.join(r['run'] for r in runs)})")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "vllm-calibrated.yaml")
        cal = calibrate(_job(fit_to, out))
        if not cal.ok:
            raise InputError(f"the calibration to {fit_run} was refused: {cal.fit.refusal}")
        write_stack(cal, out)
        calibrated = load_stack(out, "serving")
    vllm = load_stack("vllm", "serving")
    preset = vllm.with_values({"host_overhead_ms": 0.0})
    rows = []
    for r in runs:
        run = read_serving_run(r["file"])
        job = serving_run_job(run, _job(r, "unused.yaml").run)
        measured = dict(zip(RUN_METRICS, run.targets))
        rows.append(
            {
                "run": r["run"],
                "fitted_to": r["run"] == fit_run,
                "flags": r["flags"],
                "note": r["note"] or None,
                "measured_ms": measured,
                "summary_ms": r["summary"],
                "preset_ms": dict(zip(RUN_METRICS, replay_run(job, run, preset))),
                "calibrated_ms": dict(zip(RUN_METRICS, replay_run(job, run, calibrated))),
            }
        )
    return {
        "fit_run": fit_run,
        "fitted": cal.fit.fitted,
        "held": cal.fit.held,
        "preset": "vllm with host_overhead_ms 0 (its cuda-graphs host time is podsim's H200 measurement)",
        "runs": rows,
    }


def _err(pred: float, meas: float) -> str:
    return f"{100 * (pred / meas - 1):+.1f}%"


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def format_table(d: dict[str, Any]) -> str:
    """The replay as a text table: per run and metric, measured and podsim's (error) with the
    preset and calibrated; then the mean absolute error of the runs not fitted to."""
    fitted = ", ".join(f"{k} {v:.4g}" for k, v in d["fitted"].items())
    lines = [
        "vLLM 0.19 runs (300 ShareGPT requests at 10 req/s each), replayed request by request by podsim serve-llm",
        f"  preset:     {d['preset']}",
        f"  calibrated: vllm fitted to {d['fit_run']}: {fitted}",
        "",
        f"  {'run':<40} {'metric':<17} {'measured':>9} {'preset':>18} {'calibrated':>18}",
    ]
    for r in d["runs"]:
        name = r["run"].removeprefix("llmservingsim_") + (" (fitted)" if r["fitted_to"] else "")
        for m in RUN_METRICS:
            meas, pre, cal = r["measured_ms"][m], r["preset_ms"][m], r["calibrated_ms"][m]
            lines.append(
                f"  {name:<40} {METRICS[m][0] + ' (ms)':<17} {_ms(meas):>9} "
                f"{f'{_ms(pre)} ({_err(pre, meas)})':>18} {f'{_ms(cal)} ({_err(cal, meas)})':>18}"
            )
            name = ""
    held_out = [r for r in d["runs"] if not r["fitted_to"]]
    if held_out:
        for key, label in (("preset_ms", "preset"), ("calibrated_ms", "calibrated")):
            errs = [abs(r[key][m] / r["measured_ms"][m] - 1) for r in held_out for m in RUN_METRICS]
            lines.append(
                f"  runs not fitted to, {label}: mean |error| {100 * sum(errs) / len(errs):.1f}%, "
                f"worst {100 * max(errs):.1f}%"
            )
    for r in d["runs"]:
        if r["note"]:
            lines.append(f"  note {r['run'].removeprefix('llmservingsim_')}: {r['note']}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit-run", default=FIT_RUN, help=f"the run vllm is calibrated to (default {FIT_RUN})")
    ap.add_argument("--json", metavar="OUT", help="also write the replay as JSON (times in ms)")
    args = ap.parse_args()
    data = reference_dir()
    if not (data / "calibration" / "serving" / "vllm_anchor_runs.csv").is_file():
        print(f"replay_vllm_anchors: no vLLM anchor runs under {data} (set PODSIM_REFERENCE_DATA)", file=sys.stderr)
        return 2
    try:
        d = replay_all(data, args.fit_run)
    except InputError as e:
        print(f"replay_vllm_anchors: {e}", file=sys.stderr)
        return 2
    print(format_table(d))
    if args.json:
        Path(args.json).write_text(json.dumps(d, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
