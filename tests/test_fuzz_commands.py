"""Seeded fuzz of the newer commands' flags (issue 29): search, sweep, infer, serve-llm, trace,
validate, fabric, collective, stack, llm, kernels and calibrate under bad or extreme values.

For each command a small valid command line is the seed; a fixed, seeded draw replaces one
flag's value (or a value of the file it reads) with a bad or extreme one (``nan``, ``inf``,
``-1``, ``0``, ``1e300``, ``1.5``, ``x``, the Unicode digit ``²``, ``2147483648``, an empty
string).  Each case runs in this
process (``podsim.cli.main``) under a time budget, from an empty folder.

A case passes when podsim exits 0 with no ``nan`` / ``inf`` in what it printed, or exits 2
with one line ``podsim: error: ...`` (or argparse's ``podsim CMD: error: ...``) first; a
traceback, an internal error, any other exit status or a hang fails it.

The table :data:`REFUSED` holds one case per root cause the issue's corpus found (each must
exit 2 naming the flag, file or field); ``python tests/test_fuzz_commands.py`` prints every
case's outcome.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from podsim.cli import main

SEED = 20261127
CASE_BUDGET_S = 20.0  #: a case running longer is a hang (generous: the machine may be loaded)
BAD_VALUES = ("nan", "inf", "-1", "0", "1e300", "1.5", "x", "²", "2147483648", "")
CASES_PER_COMMAND = 30

#: a small, fast, valid command line per command (run from a folder holding the files of FILES)
SEEDS: dict[str, list[str]] = {
    "llm": "llm --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --seq-len 1024 --tp 2".split(),
    "goodput": "goodput --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --seq-len 1024 --tp 2 --days 2 "
    "--reliability rates.yaml --storage-bandwidth 50 --detect 60 --samples 50 --seed 3 --json g.json".split(),
    "search": "search --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --seq-len 1024 --workers 1 --top 2 "
    "--tp-values 1,2 --pp-values 1".split(),
    "serve-llm": "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5,prompt=200,output=20 "
    "--max-num-seqs 64".split(),
    "infer": "infer --model gpt3-125m --gpu h100 --batch 2 --prompt-tokens 128 --output-tokens 8".split(),
    "fabric": "fabric --cluster dgx-h100 --gpus 16".split(),
    "collective": "collective all_reduce --cluster dgx-h100 --gpus 16 -b 1K -e 64K".split(),
    "validate": "validate --rows rows.csv --jobs 1".split(),
    "sweep": "sweep --workers 1 sweep.yaml".split(),
    "stack": "stack show mine.yaml".split(),
    "kernels": "kernels fit --table measured --gpu h100".split(),
}

_ROWS_HEADER = (
    "row_id,model,layers,hidden,heads,kv_heads,ffn_hidden,vocab,seq_len,activation,experts,top_k,gpu,gpus,"
    "gpus_per_node,system,tp,pp,cp,ep,vpp,sequence_parallel,global_batch,micro_batch,precision,recompute,metric,"
    "value,unit"
)
_ROW = (
    "t1,Llama 3 8B,32,4096,32,8,14336,128256,8192,swiglu,0,0,h100-80gb,8,8,,1,1,1,1,1,no,64,1,bf16,,"
    "tokens_per_s_per_gpu,9000,tok/s"
)
FILES = {
    "rates.yaml": "gpus_per_switch: 16\nkinds:\n  gpu: {rate: 2.0e-5, per: gpu, replace: true}\n"
    "  software: {rate: 0}\n",
    "rows.csv": f"{_ROWS_HEADER}\n{_ROW}\n",
    "sweep.yaml": "run: llm\nfixed: {model: gpt3-125m, gpu: h100, global-batch: 16, seq-len: 1024}\n"
    "grid: {gpus: [8], tp: [1, 2]}\n",
    "mine.yaml": 'name: mine\nkind: training\nbase: megatron-core\nsources:\n  gemm_efficiency: "my runs"\n'
    "training:\n  gemm_efficiency: 0.8\n",
}

#: one case per root cause of the issue's corpus: (command line, files to write, what the
#: one-line error must say)
REFUSED: list[tuple[str, dict[str, str], str]] = [
    ("serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5,seed=²", {}, "seed must be a whole"),
    ("serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5,prefixes=²:10", {}, "prefixes must"),
    ("serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:1e-9", {}, "past the"),
    ("serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5,seed=1,seed=2", {}, "given twice"),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --swap-space 8",
        {},
        "--swap-space: only used with --preemption swap",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --pd-bandwidth 10",
        {},
        "--pd-bandwidth: only used with --pd",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --capacity-target 0.9",
        {},
        "--capacity-target: only used with --find-capacity",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --kv-blocks 2147483648",
        {},
        "room for",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --max-num-seqs 2147483648",
        {},
        "--max-num-seqs: a step of",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --requests 20 --workload poisson:5 --spec-decode 2147483648:0.5",
        {},
        "1 to 64",
    ),
    (
        "serve-llm --model llama3-8b --gpu h100 --workload t.csv",
        {"t.csv": "arrived_at,num_prefill_tokens,num_decode_tokens,num_decode_tokens\n0,100,10,20\n"},
        "t.csv: column 'num_decode_tokens' appears twice",
    ),
    (
        "serve-llm --model llama3-8b --gpu a100 --workload poisson:5 --requests 10 --precision fp8",
        {},
        "fp8 tensor cores",
    ),
    ("infer --model gpt3-125m --gpu a100 --batch 2 --prompt-tokens 128 --output-tokens 8 --precision fp8", {}, "fp8"),
    (
        "infer --model gpt3-125m --gpu h100 --batch 2147483648 --prompt-tokens 128 --output-tokens 8",
        {},
        "--batch: at most",
    ),
    (
        "search --model llama3-8b --gpu h100 --gpus 8 --workers 1 --tp-values 8 --requests 30 --chunk-values 2048 "
        "--scheduler-values vllm --workload poisson:2,prompt=500,output=50 --slo-ttft 1 --router bogus",
        {},
        "--router: unknown router 'bogus'",
    ),
    (
        "search --model gpt3-125m --gpu h100 --workers 1 --gpus 8 --global-batch 16 --seq-len 1024 "
        "--gpu-prices p.yaml --objective cost",
        {"p.yaml": "h100-80gb: {usd_per_gpu_hour: 2}\nbogus-gpu: {usd_per_gpu_hour: 3}\n"},
        "unknown GPU 'bogus-gpu'",
    ),
    (
        "sweep --workers 1 s.yaml",
        {"s.yaml": "run: llm\nfixed: {model: gpt3-125m, gpu: h100, global-batch: 16, global-batch: 32}\n"},
        "s.yaml: line 2",
    ),
    (
        "sweep --workers 1 s.yaml",
        {
            "s.yaml": "run: llm\nfixed: {model: gpt3-125m, gpu: h100, global-batch: 16, seq-len: 1024, tp: 1}\n"
            "grid: {gpus: [8], tp: [1, 2]}\n"
        },
        "grid.tp: 'tp' is in fixed too",
    ),
    ("trace --model hf:x.json --batch-size 2 --out o --world-size 4 --layout tp=2,tp=4 --fake-ranks", {}, "tp twice"),
    (
        "trace --model hf:x.json --batch-size 2 --out o --world-size 4 --layout tp=2,,pp=2 --fake-ranks",
        {},
        "empty part",
    ),
    ("trace --model hf:x.json --batch-size 2 --out o --json j.json", {}, "--json: only used with a parallel job"),
    (
        "trace --model hf:x.json --batch-size 2 --out o --world-size 2147483648 --layout tp=2 --fake-ranks",
        {},
        "at most",
    ),
    ("validate --rows r.csv", {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace(',9000,', ',-5,')}\n"}, "finite number > 0"),
    ("validate --rows r.csv", {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace('swiglu', 'tanhh')}\n"}, "activation must be"),
    ("validate --rows r.csv", {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace('h100-80gb', 'bogus')}\n"}, "cannot run"),
    (
        "validate --rows r.csv",
        {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace('tokens_per_s_', 'toks_')}\n"},
        "no prediction",
    ),
    ("validate --rows r.csv", {"r.csv": f"{_ROWS_HEADER}\n"}, "no rows"),
    (
        "validate --rows r.csv",
        {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace('h100-80gb,8,8,', 'h100-80gb,8,3,')}\n"},
        "the first: t1: gpus_per_node 3: 8 GPUs do not fill whole servers of 3 GPUs",
    ),
    (
        "validate --rows r.csv",
        {"r.csv": f"{_ROWS_HEADER}\n{_ROW.replace('swiglu,0,0,', 'swiglu,0,2,')}\n"},
        "top_k is for",
    ),
    ("validate --rows r.csv", {"r.csv": f"{_ROWS_HEADER}\n{_ROW}\n{_ROW}\n"}, "row_id 't1' is given twice"),
    ("validate --rows r.csv --set fitted", {"r.csv": f"{_ROWS_HEADER}\n{_ROW}\n"}, "--set: picks among"),
    (
        "fabric --cluster c.yaml --gpus 16",
        {"c.yaml": "name: c\ngpu: bogus\ngpus_per_node: 8\nintra_node: {kind: nvswitch, bandwidth: 450 GB/s}\n"},
        "c.yaml: gpu: unknown GPU 'bogus'",
    ),
    (
        "stack show s.yaml",
        {"s.yaml": "name: mine\nkind: training\nbase: s.yaml\n"},
        "makes a cycle",
    ),
    (
        "llm --model-config c.json --gpu h100 --gpus 8 --global-batch 16 --seq-len 1024",
        {
            "c.json": '{"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 50257, '
            '"num_hidden_layers": 24}'
        },
        "c.json: the key 'num_hidden_layers' appears twice in one JSON object",
    ),
    (
        "llm --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --seq-len 1024 --sequence-parallel",
        {},
        "--sequence-parallel: sequence parallelism shards the activations over the tensor-parallel ranks, and --tp 1",
    ),
    ("llm --model gpt3-125m --gpu h100 --gpus 8 --global-batch 2147483648 --seq-len 1024", {}, "micro-batches"),
    ("llm --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --granularity round", {}, "--granularity:"),
    (
        "llm --model gpt3-125m --gpu h100 --gpus 8 --global-batch 16 --pp 2 --first-stage-layers 100",
        {},
        "--first-stage-layers / --last-stage-layers: an uneven split (first 100) of the 12 layers",
    ),
    ("kernels fit --table measured --gpu h100 --out o.csv", {}, "--out: podsim kernels fit does not read --out"),
    (
        "search --model llama3-8b --gpu h100 --gpus 8 --workers 1 --tp-values 8 --requests 30 --chunk-values 2048 "
        "--scheduler-values vllm --workload poisson:2,prompt=500,output=50 --slo-ttft 1",
        {},
        "none of the 1 ways to serve could serve; --find-capacity: every rate tried",
    ),
    (
        "sweep --workers 1 s.yaml",
        {"s.yaml": "run: serve-llm\nfixed: {model: llama3-8b, gpu: h100, workload: 'poisson:1e-9', requests: 20}\n"},
        "every one of the 1 points failed; the first: --workload: 20 requests at 1e-09/s",
    ),
]


class _Hang(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in podsim eats it."""


@contextlib.contextmanager
def _budget(seconds: float) -> Iterator[None]:
    def ring(signum, frame):  # type: ignore[no-untyped-def]
        raise _Hang()

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(argv: list[str], folder: Path, files: dict[str, str]) -> tuple[int | None, str, str]:
    """``podsim ARGV`` in ``folder`` with ``files`` written there: (exit status, stdout,
    stderr); None for a hang."""
    for name, text in files.items():
        (folder / name).write_text(text)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with _budget(CASE_BUDGET_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc: int | None = main(argv)
    except _Hang:
        rc = None
    finally:
        os.chdir(cwd)
    return rc, out.getvalue(), err.getvalue()


_ERROR = re.compile(r"^podsim( [a-z-]+)?: error: ")
_NONFINITE = re.compile(r"(?<![A-Za-z])(nan|inf)(?![A-Za-z])", re.IGNORECASE)


def verdict(rc: int | None, out: str, err: str) -> str | None:
    """Why a case failed, or None."""
    if rc is None:
        return f"no answer in {CASE_BUDGET_S:g} s"
    if "Traceback" in err or "internal error" in err:
        return "internal error: " + err.strip().splitlines()[-1][:200]
    if rc == 0:
        bad = _NONFINITE.search(out)
        return f"printed {bad.group(0)!r}" if bad else None
    if rc != 2:
        return f"exit {rc}"
    first = next((ln for ln in err.splitlines() if ln.startswith("podsim")), "")  # after any progress lines
    return None if _ERROR.match(first) else f"exit 2 without a one-line error first: {first[:160]!r}"


#: the input file of a command whose values are drawn too
FILE_OF = {"validate": "rows.csv", "sweep": "sweep.yaml", "stack": "mine.yaml", "goodput": "rates.yaml"}
_TOKEN = re.compile(r"(?<=[:,{\[ ])[A-Za-z0-9_.-]+(?=[,}\]\n])")


def mutants(command: str, rng: random.Random) -> list[tuple[list[str], dict[str, str]]]:
    """``CASES_PER_COMMAND`` cases: the seed's command line with one flag's value replaced, or
    (for a command reading a file, every other case) one value of its file."""
    argv = SEEDS[command]
    flags = [
        i for i, a in enumerate(argv) if a.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--")
    ]
    name = FILE_OF.get(command)
    out = []
    for k in range(CASES_PER_COMMAND):
        bad = rng.choice(BAD_VALUES)
        if name is not None and (k % 2 or not flags):
            text = FILES[name]
            m = rng.choice([m for m in _TOKEN.finditer(text) if not text[: m.start()].endswith("name: ")])
            out.append((argv, {**FILES, name: text[: m.start()] + bad + text[m.end() :]}))
        else:
            i = rng.choice(flags)
            out.append((argv[: i + 1] + [bad] + argv[i + 2 :], FILES))
    return out


@pytest.mark.parametrize("command", sorted(SEEDS))
def test_a_commands_flags_under_bad_values(command: str, tmp_path: Path) -> None:
    rc, out, err = run(SEEDS[command], tmp_path, FILES)
    assert rc == 0, f"the seed fails: {err[-300:]}"
    failures = []
    for k, (argv, files) in enumerate(mutants(command, random.Random(f"{SEED}:{command}"))):
        folder = tmp_path / f"c{k}"
        folder.mkdir()
        why = verdict(*run(argv, folder, files))
        if why:
            changed = [n for n in files if files[n] != FILES.get(n)]
            what = f" ({changed[0]}: {files[changed[0]]!r})" if changed else ""
            failures.append(f"podsim {' '.join(argv)}{what}: {why}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "line, files, said", REFUSED, ids=[f"{i}:{c.split()[0]}" for i, (c, _, _) in enumerate(REFUSED)]
)
def test_each_root_cause_of_the_corpus_is_one_clear_error(line: str, files: dict, said: str, tmp_path: Path) -> None:
    if line.startswith("trace"):
        (tmp_path / "x.json").write_text('{"model_type": "llama", "num_hidden_layers": 2}\n')
    rc, out, err = run(line.split(), tmp_path, files)
    assert verdict(rc, out, err) is None and rc == 2, (rc, out[-300:], err[-300:])
    assert said in next(ln for ln in err.splitlines() if ln.startswith("podsim")), err


def main_() -> None:
    """Print every case's outcome (``-v``: the passing ones too)."""
    import tempfile

    for command in sorted(SEEDS):
        for argv, files in [(SEEDS[command], FILES), *mutants(command, random.Random(f"{SEED}:{command}"))]:
            with tempfile.TemporaryDirectory() as tmp:
                rc, out, err = run(argv, Path(tmp), files)
            why = verdict(rc, out, err)
            if why or "-v" in sys.argv:
                print(f"{'FAIL' if why else 'ok  '} podsim {' '.join(argv)}: {why or rc}")


if __name__ == "__main__":
    main_()
