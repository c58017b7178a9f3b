"""podsim kernels: measure and fit kernel tables."""

from __future__ import annotations

import argparse
import sys


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"kernels": "_run_kernels"}

def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    k = sub.add_parser("kernels", help="measure kernel times on a real GPU (PyTorch) into a kernel table",
                       epilog="examples:\n  podsim kernels measure --out h100.csv            # on a CUDA machine\n"
                              "  podsim kernels measure --out t.csv --dtype bf16 --dtype fp8\n"
                              "  podsim kernels fit --table h100.csv --gpu h100   # the roofline's efficiencies\n"
                              "  podsim kernels steps --steps steps.csv   # measured training steps against podsim\n"
                              "  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 64 --kernel-table h100.csv\n\n"
                              "The table's columns are in docs/compute.md; podsim llm --kernel-table times every\n"
                              "kernel by interpolating it.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("action", choices=["measure", "fit", "steps"],
                   help="measure: time GEMMs, attention, memory-bound kernels into --out; "
                        "fit: fit the roofline model's efficiencies to --table; steps: compare measured "
                        "training steps (benchmarks/gpu/training_steps.py) with podsim, by kernel category")
    k.add_argument("--out", metavar="CSV", help="the kernel table to write (measure)")
    k.add_argument("--table", metavar="CSV|measured", help="the kernel table to fit (fit)")
    k.add_argument("--gpu", default="h100-80gb", metavar="NAME",
                   help="the GPU the table was measured on (fit); with steps --steps measured: whose shipped steps")
    k.add_argument("--steps", metavar="CSV|measured",
                   help="steps: a training-steps CSV, or 'measured' for the steps podsim ships of --gpu")
    k.add_argument("--json", metavar="OUT", help="steps: the comparison as JSON (fields: docs/compute.md)")
    k.add_argument("--dtype", action="append", choices=["bf16", "fp16", "fp8", "fp32"], metavar="DTYPE",
                   help="precision to measure (repeatable; default bf16)")
    k.add_argument("--quick", action="store_true", help="a few shapes only (to try the tool)")
    k.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu only tests the tool")
    k.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_kernels(args: argparse.Namespace) -> int:
    from ..compute.measure import measure
    from ..errors import InputError

    if args.action == "steps":
        return _steps(args)
    if args.action == "fit":
        from ..compute.fit import fit_to_table
        from ..compute.table import table_model
        if not args.table:
            raise InputError("podsim kernels fit needs --table CSV (or 'measured')")
        dtype = (args.dtype or ["bf16"])[0]
        tm = table_model(args.table, args.gpu, dtype)
        params, errs = fit_to_table(tm.rows, tm.gpu, dtype)
        print(f"podsim kernels fit: {tm.describe()} on {tm.gpu.name}")
        print("  efficiency: {" + ", ".join(f"{k}: {v:g}" for k, v in params.items()) + "}")
        for fam, e in errs.items():
            print(f"  {fam:<10} mean |time error| {100 * e:.1f}% (weighted by sqrt(time))")
        return 0
    if not args.out:
        raise InputError("podsim kernels measure needs --out CSV")
    def say(what: str) -> None:
        print(f"  measuring {what} ...", file=sys.stderr, flush=True)

    n = measure(args.out, tuple(args.dtype or ["bf16"]), args.quick, args.device, say)
    print(f"podsim kernels: wrote {n} rows to {args.out}")
    return 0


def _steps(args: argparse.Namespace) -> int:
    """podsim kernels steps: measured training steps against podsim's prediction."""
    import json

    from ..compute.steps import read_steps, shipped_path
    from ..errors import InputError
    from ..fileio import atomic_write_text
    from ..hardware.gpu import get_gpu
    from ..validation.training_steps import compare, in_step_efficiency
    from ..llm.stack import Stack
    from ..report.steps import format_step_comparison

    if not args.steps:
        raise InputError("podsim kernels steps needs --steps CSV (or 'measured' with --gpu)", where="--steps")
    path = args.steps
    if path == "measured":
        key = get_gpu(args.gpu).key
        found = shipped_path(key)
        if found is None:
            raise InputError(f"podsim ships no measured training steps of {key} (run benchmarks/gpu/training_steps.py "
                             "on one and pass its CSV)", where="--gpu")
        path = str(found)
    steps = read_steps(path)
    gpus = sorted({r.gpu for r in steps.rows if r.ok and r.gpu})
    efficiency = None
    stack_values: dict[str, float] = {}
    if len(gpus) == 1 and any(r.category_ms.get("gemm") for r in steps.rows if r.ok and r.gpu):
        efficiency = in_step_efficiency(steps.rows, gpus[0])
        st = Stack.for_gpu(gpus[0])
        stack_values = {"gemm_efficiency": st.gemm_efficiency, "attention_efficiency": st.attention_efficiency}
    entries = compare(steps.rows, efficiency)
    prov = steps.provenance
    header = (f"podsim kernels steps: {len(entries)} measured steps of {', '.join(gpus) or 'no GPU'} from {path} "
              f"({prov.get('device', '?')}, {prov.get('date', '?')}, torch {prov.get('torch', '?')})")
    print(format_step_comparison(entries, efficiency, stack_values, header))
    if args.json:
        atomic_write_text(args.json, json.dumps({"file": path, "provenance": prov, "in_step_efficiency": efficiency,
                                                 "rows": entries}, indent=1) + "\n")
        print(f"  wrote {args.json}")
    return 0
