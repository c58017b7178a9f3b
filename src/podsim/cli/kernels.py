"""podsim kernels: measure and fit kernel tables."""

from __future__ import annotations

import argparse
import sys

from ..api.kernels import DTYPES, compare_steps, fit_kernels, measure_kernels
from ..errors import InputError
from ..report.json_out import write_document
from ..report.kernels import format_kernel_fit, format_steps

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"kernels": "_run_kernels"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    k = sub.add_parser(
        "kernels",
        help="measure kernel times on a real GPU (PyTorch) into a kernel table",
        epilog="examples:\n  podsim kernels measure --out h100.csv            # on a CUDA machine\n"
        "  podsim kernels measure --out t.csv --dtype bf16 --dtype fp8\n"
        "  podsim kernels fit --table h100.csv --gpu h100   # the roofline's efficiencies\n"
        "  podsim kernels steps --steps steps.csv   # measured training steps against podsim\n"
        "  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 64 "
        "--kernel-table h100.csv\n\n"
        "The table's columns are in docs/compute.md; podsim llm --kernel-table times every\n"
        "kernel by interpolating it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    k.add_argument(
        "action",
        choices=["measure", "fit", "steps"],
        help="measure: time GEMMs, attention, memory-bound kernels into --out; "
        "fit: fit the roofline model's efficiencies to --table; steps: compare measured "
        "training steps (benchmarks/gpu/training_steps.py) with podsim, by kernel category",
    )
    k.add_argument("--out", metavar="CSV", help="the kernel table to write (measure)")
    k.add_argument("--table", metavar="CSV|measured", help="the kernel table to fit (fit)")
    k.add_argument(
        "--gpu",
        default="h100-80gb",
        metavar="NAME",
        help="the GPU the table was measured on (fit); with steps --steps measured: whose shipped steps",
    )
    k.add_argument(
        "--steps",
        metavar="CSV|measured",
        help="steps: a training-steps CSV, or 'measured' for the steps podsim ships of --gpu",
    )
    k.add_argument("--json", metavar="OUT", help="steps: the comparison as JSON (fields: docs/compute.md)")
    k.add_argument(
        "--dtype",
        action="append",
        choices=list(DTYPES),
        metavar="DTYPE",
        help="precision to measure (repeatable; default bf16)",
    )
    k.add_argument("--quick", action="store_true", help="a few shapes only (to try the tool)")
    k.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu only tests the tool")
    k.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_kernels(args: argparse.Namespace) -> int:
    if args.action == "steps":
        return _steps(args)
    if args.action == "fit":
        if not args.table:
            raise InputError("podsim kernels fit needs --table CSV (or 'measured')")
        print(format_kernel_fit(fit_kernels(args.table, args.gpu, (args.dtype or ["bf16"])[0])))
        return 0
    if not args.out:
        raise InputError("podsim kernels measure needs --out CSV")

    def say(what: str) -> None:
        print(f"  measuring {what} ...", file=sys.stderr, flush=True)

    n = measure_kernels(args.out, tuple(args.dtype or ["bf16"]), args.quick, args.device, say)
    print(f"podsim kernels: wrote {n} rows to {args.out}")
    return 0


def _steps(args: argparse.Namespace) -> int:
    """podsim kernels steps: measured training steps against podsim's prediction."""
    if not args.steps:
        raise InputError("podsim kernels steps needs --steps CSV (or 'measured' with --gpu)", where="--steps")
    cmp = compare_steps(args.steps, args.gpu)
    print(format_steps(cmp))
    if args.json:
        write_document(cmp.to_dict(), args.json)
        print(f"  wrote {args.json}")
    return 0
