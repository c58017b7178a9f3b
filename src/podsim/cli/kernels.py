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
                              "  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 64 --kernel-table h100.csv\n\n"
                              "The table's columns are in docs/compute.md; podsim llm --kernel-table times every\n"
                              "kernel by interpolating it.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("action", choices=["measure", "fit"],
                   help="measure: time GEMMs, attention, memory-bound kernels into --out; "
                        "fit: fit the roofline model's efficiencies to --table")
    k.add_argument("--out", metavar="CSV", help="the kernel table to write (measure)")
    k.add_argument("--table", metavar="CSV|measured", help="the kernel table to fit (fit)")
    k.add_argument("--gpu", default="h100-80gb", metavar="NAME", help="the GPU the table was measured on (fit)")
    k.add_argument("--dtype", action="append", choices=["bf16", "fp16", "fp8", "fp32"], metavar="DTYPE",
                   help="precision to measure (repeatable; default bf16)")
    k.add_argument("--quick", action="store_true", help="a few shapes only (to try the tool)")
    k.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu only tests the tool")
    k.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_kernels(args: argparse.Namespace) -> int:
    from ..compute.measure import measure
    from ..errors import InputError

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
