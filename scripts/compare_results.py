"""Bit-identical check of podsim's results: the same commands under two checkouts, outputs compared.

Runs a fixed list of podsim commands (every subcommand; taken from README.md and docs/*.md, made
cheap) once under a base checkout (``--base DIR``, for example a git worktree of an older commit:
``git worktree add --detach /tmp/base 372328a``) and once under the current one (``--current``,
default: this checkout), each as ``PYTHONPATH=CHECKOUT/src python -m podsim ...`` in its own work
folder, then compares every file the commands wrote, byte for byte, after removing only what
legitimately varies between two runs: wall-clock times (keys in :data:`VARYING_KEYS`), the podsim
version, and the work folder's and checkout's absolute paths (replaced by placeholders).  Prints a
table (command, same or different, the first differing JSON path or CSV cell) and exits 1 when a
command's outputs differ or a command fails under either checkout.

Inputs: the example inputs podsim writes itself (``podsim example --write``), the one-GPU captures
shipped in the current checkout's ``data/captures``, and one multi-rank trace captured once with
``podsim trace --fake-ranks`` (CPU PyTorch) before both runs, so that both simulate the same
capture (a capture's measured times differ run to run; its ``--json`` summary is still compared,
without the times).  Needs neither ../shared nor a GPU.  Both runs use ``PYTHONHASHSEED=0``.

    python scripts/compare_results.py --base /tmp/base            # ~4 min per checkout here
    python scripts/compare_results.py --base /tmp/base --only llm,infer   # cases by name prefix
    python scripts/compare_results.py --list

The base run's outputs are kept in ``OUT/base`` and reused by the next call while the base
checkout's commit and the case list are unchanged (``--rerun-base`` runs it again).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: JSON keys (anywhere in a document) and CSV columns whose values are wall-clock times or the
#: podsim version: they differ between two runs of the same code, so they are left out
VARYING_KEYS = frozenset(
    {
        "wall_s",
        "wall_time_s",
        "elapsed_s",
        "runtime_s",
        "sim_wall_s",
        "simulation_wall_s",
        "wall_ms",
        "step_ms_per_rank",
        "capture_s",
        "trace_s",
        "podsim_version",
        "podsim_commit",
        "version",
        "created",
        "timestamp",
        "started",
        "finished",
        "seconds",
    }
)
#: output files not compared (PNG plots and DuckDB stores hold timestamps or library versions)
SKIP_SUFFIXES = (".png", ".duckdb", ".duckdb.wal", ".pyc")


@dataclass(frozen=True)
class Case:
    """One podsim command of the check.

    ``args`` may hold ``{data}`` (the current checkout's ``data`` folder) and ``{shared}`` (the
    folder of inputs made once for both runs).  The command runs in the checkout's work folder;
    every file it writes under ``out`` (a file or a folder relative to that folder) is compared,
    and with ``stdout`` its printed output too (for commands whose result is only printed)."""

    name: str
    args: tuple[str, ...]
    out: tuple[str, ...] = ()
    stdout: bool = False


def _c(name: str, cmd: str, *out: str, stdout: bool = False) -> Case:
    return Case(name, tuple(cmd.split()), tuple(out), stdout)


#: the commands, in the order they run (a later one may read what an earlier one wrote)
CASES: tuple[Case, ...] = (
    # example: the built-in examples, keeping their inputs for the commands below
    _c(
        "example-allreduce",
        "example --write ex --json example_allreduce.json --trace example_allreduce.trace.json",
        "ex",
        "example_allreduce.json",
        "example_allreduce.trace.json",
    ),
    _c("example-layers", "example layers --json example_layers.json", "example_layers.json"),
    _c("example-cluster", "example cluster --json example_cluster.json", "example_cluster.json"),
    _c(
        "example-serving",
        "example serving --write serving --json example_serving.json",
        "serving",
        "example_serving.json",
    ),
    # simulate: ASTRA-sim inputs (Chakra ET + system, network, remote memory), Chakra from llm,
    # SimAI text from llm, one-GPU PyTorch captures (ddp, tp, pp), TrioSim, a fake-rank capture
    _c(
        "simulate-astrasim",
        "simulate --workload-configuration=ex/all_reduce --system-configuration=ex/system.json "
        "--network-configuration=ex/network.yml --remote-memory-configuration=ex/remote_memory.json "
        "--json sim_astrasim.json --trace sim_astrasim.trace.json",
        "sim_astrasim.json",
        "sim_astrasim.trace.json",
    ),
    _c("inspect", "inspect ex/all_reduce --json inspect.json", "inspect.json"),
    _c(
        "llm-chakra",
        "llm --model gpt3-1.3b --gpus 16 --tp 2 --global-batch 16 --chakra llm_et/llm "
        "--simai llm_simai.txt --json llm_chakra.json",
        "llm_et",
        "llm_simai.txt",
        "llm_chakra.json",
    ),
    _c(
        "simulate-chakra-flow",
        "simulate --workload-configuration=llm_et/llm --cluster dgx-h100 --backend flow "
        "--json sim_chakra_flow.json --trace sim_chakra_flow.trace.json",
        "sim_chakra_flow.json",
        "sim_chakra_flow.trace.json",
    ),
    _c(
        "simulate-simai",
        "simulate --workload-configuration llm_simai.txt --cluster dgx-h100 --gpus 16 --json sim_simai.json",
        "sim_simai.json",
    ),
    _c(
        "simulate-pytorch-ddp",
        "simulate --pytorch {data}/captures/h100-resnet18-bs64 --gpus 8 --parallel ddp "
        "--layers sim_pt_ddp_layers.csv --json sim_pt_ddp.json",
        "sim_pt_ddp.json",
        "sim_pt_ddp_layers.csv",
    ),
    _c(
        "simulate-pytorch-pp",
        "simulate --pytorch {data}/captures/h100-resnet50-bs128 --gpus 4 --parallel pp "
        "--micro-batch 32 --json sim_pt_pp.json",
        "sim_pt_pp.json",
    ),
    _c(
        "simulate-pytorch-tp",
        "simulate --pytorch {data}/captures/h100-resnet18-bs64 --gpus 4 --parallel tp "
        "--cluster dgx-h100 --json sim_pt_tp.json",
        "sim_pt_tp.json",
    ),
    _c("convert-triosim", "convert {data}/captures/h100-resnet18-bs64 --to triosim tri", "tri"),
    _c(
        "simulate-triosim",
        "simulate --triosim tri --batch-size 64 --batch-size-sim 128 --gpus 4 --parallel pp --json sim_triosim.json",
        "sim_triosim.json",
    ),
    _c("convert-chakra", "convert llm_simai.txt --to chakra conv_et/simai --gpus 16", "conv_et"),
    _c(
        "simulate-capture",
        "simulate --workload-configuration {shared}/pp2 --cluster dgx-h100 --json sim_capture.json",
        "sim_capture.json",
    ),
    _c(
        "simulate-capture-gpus",
        "simulate --workload-configuration {shared}/mlp8 --cluster dgx-h100 --gpus 64 "
        "--layers sim_capture64_layers.csv --json sim_capture64.json",
        "sim_capture64.json",
        "sim_capture64_layers.csv",
    ),
    # trace: what a fake-rank capture traced (its measured times left out)
    _c(
        "trace",
        "trace --model podsim.examples.jobs:fixed_time_pipeline --batch-size 4 --world-size 2 "
        "--layout pp=2 --fake-ranks --out trace_pp2 --json trace_pp2.json",
        "trace_pp2.json",
    ),
    # collective
    _c(
        "collective-flow",
        "collective all_reduce --cluster azure-nd-a100-v4 --gpus 32 -b 1K -e 4G -f 2 --backend flow "
        "--json coll_flow.json",
        "coll_flow.json",
    ),
    _c(
        "collective-superpod",
        "collective all_reduce --cluster dgx-a100-superpod --gpus 1024 -b 1K -e 1G -f 4 --json coll_superpod.json",
        "coll_superpod.json",
    ),
    _c(
        "collective-kinds",
        "collective all_gather --cluster dgx-h100 --gpus 64 -b 1M -e 256M -f 16 --json coll_ag.json",
        "coll_ag.json",
    ),
    # llm: layouts of README.md and docs/llm.md (pp, vpp, sp, fsdp, fp8, cp, ep, flow backend)
    _c(
        "llm-70b-vpp-flow",
        "llm --model llama3-70b --gpu h100 --gpus 512 --tp 8 --pp 4 --vpp 5 --global-batch 512 "
        "--seq-len 8192 --sequence-parallel --distributed-optimizer --recompute selective --backend flow "
        "--json llm_70b.json",
        "llm_70b.json",
    ),
    _c(
        "llm-gb200-fp8",
        "llm --model llama3-8b --gpu gb200 --gpus 72 --global-batch 72 --seq-len 8192 "
        "--distributed-optimizer --precision fp8 --kernels --json llm_fp8.json",
        "llm_fp8.json",
        stdout=True,
    ),
    _c(
        "llm-175b-pp",
        "llm --model gpt3-175b --gpu a100-80gb --gpus 1024 --tp 8 --pp 16 --global-batch 1536 "
        "--micro-batch 1 --recompute full --json llm_175b.json --trace llm_175b.trace.json --trace-ranks 16",
        "llm_175b.json",
        "llm_175b.trace.json",
    ),
    _c(
        "llm-405b-uneven",
        "llm --model llama3-405b --gpu h100 --gpus 8192 --tp 8 --pp 8 --vpp 8 "
        "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --global-batch 2048 "
        "--seq-len 8192 --sequence-parallel --distributed-optimizer --json llm_405b.json",
        "llm_405b.json",
    ),
    _c(
        "llm-cp",
        "llm --model llama3-8b --gpu h100 --gpus 64 --tp 2 --cp 4 --global-batch 64 --seq-len 32768 "
        "--recompute full --json llm_cp.json",
        "llm_cp.json",
    ),
    _c(
        "llm-fsdp",
        "llm --model llama3-8b --gpu h100 --gpus 64 --fsdp --global-batch 128 --micro-batch 2 --json llm_fsdp.json",
        "llm_fsdp.json",
    ),
    _c(
        "llm-gpipe-zero1",
        "llm --model gpt3-1.3b --gpu a100-80gb --gpus 32 --tp 2 --pp 4 --schedule gpipe --zero 1 "
        "--global-batch 64 --precision fp16 --json llm_gpipe.json",
        "llm_gpipe.json",
    ),
    _c(
        "llm-moe-ep",
        "llm --model mixtral-8x7b --gpu h100 --gpus 64 --tp 2 --ep 8 --global-batch 256 --json llm_moe.json",
        "llm_moe.json",
    ),
    # infer (docs/serving-llm.md)
    _c(
        "infer-70b",
        "infer --model llama2-70b --gpu h100 --tp 4 --batch 8 --prompt-tokens 1024 --output-tokens 128 "
        "--json infer_70b.json",
        "infer_70b.json",
    ),
    _c(
        "infer-bloom",
        "infer --model bloom-176b --gpu a100 --tp 8 --batch 16 --prompt-tokens 512 --output-tokens 32 "
        "--json infer_bloom.json",
        "infer_bloom.json",
    ),
    _c(
        "infer-moe-fp8",
        "infer --model mixtral-8x7b --gpu h100 --tp 2 --ep 2 --batch 64 --prompt-tokens 2048 "
        "--output-tokens 256 --precision fp8 --json infer_moe.json",
        "infer_moe.json",
    ),
    _c(
        "infer-write-profile",
        "infer --model llama2-70b --gpu h100 --tp 4 --batch 8 --prompt-tokens 1024 "
        "--output-tokens 64 --write-profile prof --json infer_wp.json",
        "prof",
        "infer_wp.json",
    ),
    _c(
        "infer-profile",
        "infer --model llama2-70b --gpu h100 --tp 4 --batch 8 --prompt-tokens 1024 "
        "--output-tokens 64 --profile prof --json infer_prof.json",
        "infer_prof.json",
    ),
    # serve-llm (README.md, docs/serving-llm.md; fewer requests)
    _c(
        "serve-llm",
        "serve-llm --model llama3-8b --gpu h100 --replicas 2 "
        "--workload poisson:20,prompt=lognormal:1000:0.5,output=128 --requests 300 --slo-ttft 0.5 --slo-tpot 0.03 "
        "--gpu-hour-price 3 --json sl_basic.json --trace sl_basic.trace.json",
        "sl_basic.json",
        "sl_basic.trace.json",
    ),
    _c(
        "serve-llm-sarathi",
        "serve-llm --model llama3-70b --gpu h100 --tp 4 --replicas 2 "
        "--workload poisson:6,prompt=uniform:1000-3000,output=256 --requests 200 --scheduler sarathi "
        "--router least-outstanding --slo-ttft 1 --slo-tpot 0.05 --json sl_sarathi.json",
        "sl_sarathi.json",
    ),
    _c(
        "serve-llm-pd",
        "serve-llm --model llama3-70b --gpu h100 --tp 4 --pd 1:1 "
        "--workload poisson:6,prompt=uniform:1000-3000,output=256 --requests 200 --slo-ttft 1 --slo-tpot 0.05 "
        "--json sl_pd.json",
        "sl_pd.json",
    ),
    _c(
        "serve-llm-spec",
        "serve-llm --model llama3-8b --gpu h100 "
        "--workload gamma:30,cv=3,prompt=lognormal:1000:0.5,output=lognormal:200:0.5,prefixes=10:512 "
        "--requests 300 --spec-decode 4:0.7 --kv-blocks 4000 --json sl_spec.json",
        "sl_spec.json",
    ),
    _c(
        "serve-llm-capacity",
        "serve-llm --model llama3-8b --gpu a100 "
        "--workload poisson:2,prompt=uniform:500-1500,output=200 --requests 100 --slo-ttft 0.5 --slo-tpot 0.05 "
        "--find-capacity --json sl_cap.json",
        "sl_cap.json",
    ),
    # serve (DLSIM; README.md, docs/serving.md)
    _c(
        "serve",
        "serve -n 1 -d 2 -c 16 -w serving/workload.csv -p serving/placement.json --chrome_trace "
        "serve.trace.json --json serve.json",
        "serve.json",
        "serve.trace.json",
    ),
    _c(
        "serve-workload",
        "serve-workload generate --models 2 --rate 6.667 --proportions 0.8,0.2 --duration 20 "
        "--slos 0.25 --seed 7 -o sw.csv",
        "sw.csv",
    ),
    _c(
        "serve-least-outstanding",
        "serve -n 1 -d 2 -c 16 -w sw.csv -p serving/placement.json --scheduler least-outstanding --json serve_lo.json",
        "serve_lo.json",
    ),
    _c(
        "serve-closed-loop",
        "serve -n 1 -d 2 -c 16 --closed-loop 8,2 --think-ms 50 --duration 20 --slos 0.25 "
        "-p serving/placement.json --json serve_cl.json",
        "serve_cl.json",
    ),
    # search (docs/search.md, README.md; docs/serving-llm.md's serving search)
    _c(
        "search",
        "search --model llama3-8b --gpu h100 --gpus 64,128 --global-batch 256 --seq-len 4096 --top 5 "
        "--flow-top 2 --gpu-hour-price 3 --workers 1 --json search.json --report search.html",
        "search.json",
        "search.html",
    ),
    _c(
        "search-cost",
        "search --model llama3-8b --gpu h100 --gpus 64 --global-batch 256 --seq-len 4096 "
        "--objective cost --gpu-hour-price 3 --workers 1 --json search_cost.json",
        "search_cost.json",
    ),
    _c(
        "search-serving",
        "search --model llama3-8b --gpu h100 --gpus 4 "
        "--workload poisson:10,prompt=uniform:1000-3000,output=64 --slo-ttft 0.5 --slo-tpot 0.02 --tp-values 1,2 "
        "--scheduler-values vllm --chunk-values 512,2048 --pd-values off,2:2 --workers 1 --json search_serving.json",
        "search_serving.json",
    ),
    # sweep (docs/sweep.md)
    _c(
        "sweep-collective",
        "sweep --example collective --workers 1 --csv sweep_coll.csv --json sweep_coll.json",
        "sweep_coll.csv",
        "sweep_coll.json",
    ),
    _c(
        "sweep-llm",
        "sweep --example llm --write llm-sweep.yaml --workers 1 --csv sweep_llm.csv",
        "llm-sweep.yaml",
        "sweep_llm.csv",
    ),
    _c("sweep-serve-llm", "sweep --example serve-llm --workers 1 --csv sweep_sl.csv", "sweep_sl.csv"),
    # kernels (fitting the shipped kernel table: no GPU), validate (docs/calibration.md), fabric
    _c("kernels-fit", "kernels fit --table measured --gpu h100", stdout=True),
    _c(
        "validate-fitted",
        "validate --set fitted --only megatron_sc21 --jobs 1 --json validate_fitted.json",
        "validate_fitted.json",
    ),
    _c(
        "validate-reported",
        "validate --set reported --only mb260401 --jobs 1 --json validate_reported.json",
        "validate_reported.json",
    ),
    _c("fabric", "fabric --cluster dgx-h100 --gpus 64 --simai fabric_simai.txt", "fabric_simai.txt", stdout=True),
)

#: what is captured once, before both runs, into the shared folder (podsim trace arguments)
SHARED_CAPTURES: tuple[tuple[str, str], ...] = (
    (
        "pp2",
        "trace --model podsim.examples.jobs:fixed_time_pipeline --batch-size 4 --world-size 2 --layout pp=2 "
        "--fake-ranks --out {shared}/pp2",
    ),
    (
        "mlp8",
        "trace --model podsim.examples.jobs:mlp --batch-size 2 --world-size 8 --layout tp=2,fsdp "
        "--fake-ranks --out {shared}/mlp8",
    ),
)


# ---------------------------------------------------------------------------------------------
# running


def _env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(checkout / "src")
    env["PYTHONHASHSEED"] = "0"
    env["MPLBACKEND"] = "Agg"
    return env


def _podsim(checkout: Path, args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "podsim", *args],
        cwd=cwd,
        env=_env(checkout),
        text=True,
        capture_output=True,
        timeout=timeout_s,
    )


def _args(case: Case, data: Path, shared: Path) -> list[str]:
    return [a.format(data=data, shared=shared) for a in case.args]


def _signature(cases: tuple[Case, ...]) -> str:
    text = json.dumps([[c.name, list(c.args), list(c.out), c.stdout] for c in cases])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _commit(checkout: Path) -> str:
    r = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], text=True, capture_output=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def capture_shared(checkouts: list[Path], shared: Path, timeout_s: float) -> None:
    """Capture the shared traces once (with the first checkout that can), unless already there."""
    shared.mkdir(parents=True, exist_ok=True)
    for name, cmd in SHARED_CAPTURES:
        if (shared / name / ".done").exists():
            continue
        for checkout in checkouts:
            shutil.rmtree(shared / name, ignore_errors=True)
            r = _podsim(checkout, cmd.format(shared=shared).split(), shared, timeout_s)
            if r.returncode == 0:
                (shared / name / ".done").write_text(str(checkout))
                break
            print(f"  capture {name} failed under {checkout}: {r.stderr.strip().splitlines()[-1:]}")


def run_all(
    checkout: Path, work: Path, cases: tuple[Case, ...], data: Path, shared: Path, timeout_s: float
) -> dict[str, Any]:
    """Run ``cases`` in order under ``checkout`` in the fresh folder ``work``; returns per case
    its exit status, seconds and last error line (also written to ``work/.status.json``)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    status: dict[str, Any] = {}
    t_all = time.perf_counter()
    for case in cases:
        t0 = time.perf_counter()
        try:
            r = _podsim(checkout, _args(case, data, shared), work, timeout_s)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = 124, "", f"timed out after {timeout_s:.0f} s"
        dt = time.perf_counter() - t0
        (work / f".{case.name}.stdout").write_text(out)
        last = (err.strip().splitlines() or [""])[-1][:200]
        status[case.name] = {"rc": rc, "s": round(dt, 2), "error": last if rc else ""}
        print(
            f"  {case.name:<26} {'ok' if rc == 0 else f'FAILED rc={rc}':<12} {dt:6.1f} s" + (f"  {last}" if rc else ""),
            flush=True,
        )
    print(f"  total {time.perf_counter() - t_all:.0f} s", flush=True)
    (work / ".status.json").write_text(json.dumps(status, indent=1))
    return status


# ---------------------------------------------------------------------------------------------
# comparing


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VARYING_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _drop_added(a: Any, b: Any, path: str, added: list[str]) -> Any:
    """``b`` without the object keys that ``a`` lacks at the same place (fields the current
    checkout adds), their paths appended to ``added``."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {}
        for k, v in b.items():
            if k in a:
                out[k] = _drop_added(a[k], v, f"{path}.{k}", added)
            else:
                added.append(f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        return [_drop_added(a[i], y, f"{path}[{i}]", added) if i < len(a) else y for i, y in enumerate(b)]
    return b


def _first_json_diff(a: Any, b: Any, path: str = "$") -> str | None:
    """The first path at which ``a`` and ``b`` differ (key order included), with both values."""
    if type(a) is not type(b):
        return f"{path}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        if list(a) != list(b):
            missing = [k for k in a if k not in b]
            extra = [k for k in b if k not in a]
            if missing or extra:
                return f"{path}: keys only in base {missing[:5]}, only in current {extra[:5]}"
            return f"{path}: key order {list(a)[:8]} != {list(b)[:8]}"
        for k in a:
            d = _first_json_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_json_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return None
    return None if a == b else f"{path}: {_short(a)} != {_short(b)}"


def _short(v: Any) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _normal_text(text: str, work: Path, checkout: Path, data: Path) -> str:
    for p, tag in ((data, "<DATA>"), (work, "<WORK>"), (checkout, "<CHECKOUT>")):
        text = text.replace(str(p.resolve()), tag)
    return text


def _normal_csv(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return text
    keep = [i for i, h in enumerate(rows[0]) if h not in VARYING_KEYS]
    if len(keep) == len(rows[0]):
        return text
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] for i in keep if i < len(r)])
    return buf.getvalue()


def _first_csv_diff(a: str, b: str) -> str:
    ra, rb = list(csv.reader(io.StringIO(a))), list(csv.reader(io.StringIO(b)))
    head = ra[0] if ra else []
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x != y:
            for j, (u, v) in enumerate(zip(x, y)):
                if u != v:
                    col = head[j] if j < len(head) else str(j)
                    return f"row {i}, column {col}: {u[:40]!r} != {v[:40]!r}"
            return f"row {i}: {len(x)} != {len(y)} cells"
    return f"{len(ra)} != {len(rb)} rows"


def compare_file(
    fa: Path, fb: Path, wa: Path, wb: Path, ca: Path, cb: Path, data: Path, added: list[str]
) -> str | None:
    """None when the two files are the same (after normalisation), else the first difference.
    JSON fields only the current file has are not differences: their paths go to ``added``."""
    ba, bb = fa.read_bytes(), fb.read_bytes()
    if ba == bb:
        return None
    try:
        ta, tb = ba.decode("utf-8"), bb.decode("utf-8")
    except UnicodeDecodeError:
        n = next((i for i, (x, y) in enumerate(zip(ba, bb)) if x != y), min(len(ba), len(bb)))
        return f"binary, first differing byte {n} (sizes {len(ba)}, {len(bb)})"
    ta, tb = _normal_text(ta, wa, ca, data), _normal_text(tb, wb, cb, data)
    if ta == tb:
        return None
    if fa.suffix == ".json":
        try:
            ja, jb = json.loads(ta), json.loads(tb)
        except ValueError:
            ja = jb = None
        if ja is not None:
            new: list[str] = []
            sa, sb = _strip(ja), _drop_added(_strip(ja), _strip(jb), "$", new)
            added += [f"{fa.name}:{p}" for p in new]
            if json.dumps(sa) == json.dumps(sb):
                return None
            return _first_json_diff(sa, sb) or "the same values, formatted differently"
    if fa.suffix == ".csv":
        ta, tb = _normal_csv(ta), _normal_csv(tb)
        return None if ta == tb else _first_csv_diff(ta, tb)
    la, lb = ta.splitlines(), tb.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x[:50]!r} != {y[:50]!r}"
    return f"{len(la)} != {len(lb)} lines"


def _files(root: Path, rel: str) -> list[str]:
    p = root / rel
    if p.is_dir():
        return sorted(
            str(f.relative_to(root)) for f in p.rglob("*") if f.is_file() and not f.name.endswith(SKIP_SUFFIXES)
        )
    return [rel] if p.exists() else []


def compare_case(
    case: Case, wa: Path, wb: Path, ca: Path, cb: Path, data: Path, sa: dict[str, Any], sb: dict[str, Any]
) -> tuple[str, str]:
    """(``same``, ``DIFFERENT`` or ``FAILED``; the first difference or the error, or for ``same``
    the JSON fields the current checkout adds)."""
    ra, rb = sa.get(case.name, {}), sb.get(case.name, {})
    if ra.get("rc") != 0 or rb.get("rc") != 0:
        who = [
            f"{n} rc={r.get('rc')}: {r.get('error', '')}"
            for n, r in (("base", ra), ("current", rb))
            if r.get("rc") != 0
        ]
        return "FAILED", "; ".join(who)
    names: list[str] = []
    for rel in case.out:
        fa, fb = _files(wa, rel), _files(wb, rel)
        if fa != fb:
            return (
                "DIFFERENT",
                f"{rel}: files only in base {sorted(set(fa) - set(fb))[:3]}, "
                f"only in current {sorted(set(fb) - set(fa))[:3]}",
            )
        if not fa:
            return "FAILED", f"{rel}: not written"
        names += fa
    if case.stdout:
        names.append(f".{case.name}.stdout")
    added: list[str] = []
    for n in names:
        d = compare_file(wa / n, wb / n, wa, wb, ca, cb, data, added)
        if d:
            return "DIFFERENT", f"{n}: {d}"
    return "same", (
        "fields added: " + ", ".join(added[:4]) + (f" (+{len(added) - 4})" if len(added) > 4 else "") if added else ""
    )


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", type=Path, help="the base checkout (a git worktree of the commit to compare with)")
    ap.add_argument("--current", type=Path, default=REPO, help="the checkout under test (default: this one)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/podsim-compare"), help="work folder (default %(default)s)")
    ap.add_argument("--only", default="", help="run only the cases whose name starts with one of these (comma list)")
    ap.add_argument("--rerun-base", action="store_true", help="run the base again even if its outputs are kept")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one command may run (default %(default)s)")
    ap.add_argument("--list", action="store_true", help="print the commands and exit")
    a = ap.parse_args(argv)
    prefixes = tuple(p for p in a.only.split(",") if p)
    cases = tuple(c for c in CASES if not prefixes or c.name.startswith(prefixes))
    if a.list:
        for c in cases:
            print(f"{c.name:<26} podsim {' '.join(c.args)}")
        return 0
    if a.base is None:
        ap.error("--base DIR is required (e.g. git worktree add --detach /tmp/base 372328a)")
    if not cases:
        ap.error(f"no case starts with {a.only!r} (see --list)")
    base, current = a.base.resolve(), a.current.resolve()
    for c in (base, current):
        if not (c / "src" / "podsim" / "__init__.py").exists():
            ap.error(f"{c} is not a podsim checkout (no src/podsim)")
    out = a.out.resolve()
    data, shared = current / "data", out / "shared"
    wa, wb = out / "base", out / "current"

    print(f"base    {base} ({_commit(base)[:10]})\ncurrent {current} ({_commit(current)[:10]}, plus uncommitted work)")
    print("shared captures:")
    capture_shared([current, base], shared, a.timeout)

    stamp = {"commit": _commit(base), "cases": _signature(cases), "base": str(base), "data": str(data)}
    stamp_file = wa / ".stamp.json"
    if (
        not a.rerun_base
        and stamp_file.exists()
        and json.loads(stamp_file.read_text()) == stamp
        and (wa / ".status.json").exists()
    ):
        print(f"base: reusing {wa} (same commit and cases; --rerun-base to run it again)")
        sa = json.loads((wa / ".status.json").read_text())
    else:
        print("base:")
        sa = run_all(base, wa, cases, data, shared, a.timeout)
        stamp_file.write_text(json.dumps(stamp))
    print("current:")
    sb = run_all(current, wb, cases, data, shared, a.timeout)

    rows = [(c.name, *compare_case(c, wa, wb, base, current, data, sa, sb)) for c in cases]
    w = max(len(r[0]) for r in rows)
    print(f"\n{'command':<{w}}  {'result':<9}  first difference (or the JSON fields only the current run writes)")
    for name, res, note in rows:
        print(f"{name:<{w}}  {res:<9}  {note}")
    bad = [r for r in rows if r[1] != "same"]
    print(
        f"\n{len(rows) - len(bad)} of {len(rows)} commands give the same outputs"
        + (f"; {len(bad)} do not" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
