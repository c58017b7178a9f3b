"""podsim kernels: measure and fit kernel tables."""

from __future__ import annotations

import argparse
import sys

from ..api.kernels import KERNELS_PARAMS, KernelsJob, check_flags, compare_steps, fit_kernels, measure_kernels
from ..errors import InputError
from ..report.json_out import write_document
from ..report.kernels import format_kernel_fit, format_steps
from .options import add_params

#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"kernels": "_run_kernels"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.kernels.KernelsJob`."""
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
    add_params(k, KERNELS_PARAMS)
    k.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_kernels(args: argparse.Namespace) -> int:
    job = KernelsJob.from_values(vars(args))
    check_flags(job)
    if job.action == "steps":
        return _steps(job)
    if job.action == "fit":
        if not job.table:
            raise InputError("podsim kernels fit needs --table CSV (or 'measured')")
        print(format_kernel_fit(fit_kernels(job.table, job.gpu, job.precisions[0])))
        return 0
    if not job.out:
        raise InputError("podsim kernels measure needs --out CSV")

    def say(what: str) -> None:
        print(f"  measuring {what} ...", file=sys.stderr, flush=True)

    n = measure_kernels(job.out, job.precisions, job.quick, job.device, say)
    print(f"podsim kernels: wrote {n} rows to {job.out}")
    return 0


def _steps(job: KernelsJob) -> int:
    """podsim kernels steps: measured training steps against podsim's prediction."""
    if not job.steps:
        raise InputError("podsim kernels steps needs --steps CSV (or 'measured' with --gpu)", where="--steps")
    cmp = compare_steps(job.steps, job.gpu)
    print(format_steps(cmp))
    if job.json:
        write_document(cmp.to_dict(), job.json)
        print(f"  wrote {job.json}")
    return 0
