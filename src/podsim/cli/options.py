"""What every subcommand shares: argument types (every number a flag takes is checked the same
way), the output options, the progress line, output-path checks and the result printer."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import replace

from ..api.jobs import BACKEND, RAY, RESULT_OUTPUT_PARAMS, WORKERS, Param, add_arguments
from ..errors import InputError
from ..report import format_summary, write_json, write_trace
from ..report.outputs import check_output_paths as check_outputs_of
from ..report.outputs import progress_text
from ..report.plot import plot_timeline


def announce(message: str) -> None:
    """A note on stderr before a long or large write."""
    print(f"podsim: {message}", file=sys.stderr, flush=True)


def add_backend(p: argparse.ArgumentParser, context: str = "") -> None:
    """``--backend analytical|flow`` (the declared parameter), ``context`` opening its help."""
    add_params(p, (replace(BACKEND, help=(context + ": " if context else "") + BACKEND.help),))


def add_workers(p: argparse.ArgumentParser) -> None:
    """``--workers W | --ray [ADDRESS]`` (the declared parameters): where many runs go."""
    add_params(p, (WORKERS, RAY))


def add_outputs(p: argparse.ArgumentParser) -> None:
    """The outputs of a simulation of ranks (declared in :mod:`podsim.jobs.outputs`) and
    ``--debug``."""
    add_params(p, RESULT_OUTPUT_PARAMS)
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def bounded_number(text: str, integer: bool, low: float, low_open: bool, what: str) -> float:
    """``text`` as an integer or a finite float from ``low`` (excluded when ``low_open``) up to
    2^31 (integers) or 1e15, else argparse's one-line error saying ``what`` was expected."""
    try:
        v: float = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    high = 2**31 if integer else 1e15
    if not (math.isfinite(v) and (v > low if low_open else v >= low) and v <= high):
        raise argparse.ArgumentTypeError(f"expected {what} (up to {high:.3g}), got {text!r}")
    return v


def count_arg(text: str) -> int:
    """A positive integer (a count of GPUs, layers, tokens...), at most 2^31."""
    return int(bounded_number(text, True, 1, False, "a positive integer"))


def natural_arg(text: str) -> int:
    """A non-negative integer (a seed, a layer count that may be 0), at most 2^31."""
    return int(bounded_number(text, True, 0, False, "an integer >= 0"))


def positive_arg(text: str) -> float:
    """A finite number > 0 (a size, a bandwidth, a duration, a rate, a scale)."""
    return bounded_number(text, False, 0, True, "a finite number > 0")


def non_negative_arg(text: str) -> float:
    """A finite number >= 0."""
    return bounded_number(text, False, 0, False, "a finite number >= 0")


def host_overhead_arg(text: str) -> float | str:
    """``--host-overhead-ms``: a finite number >= 0 (ms), or ``eager`` / ``cuda-graphs`` (the host
    time measured on the GPU for such an engine)."""
    if text in ("eager", "cuda-graphs"):
        return text
    try:
        return non_negative_arg(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of ms >= 0, eager or cuda-graphs, got {text!r}") from None


#: the parser of a parameter's text by its name or else its kind (podsim.params): every number a
#: flag takes is checked the same way; kinds not listed take the text as it is
CONVERTERS = {
    "count": count_arg,
    "natural": natural_arg,
    "number": positive_arg,
    "nonneg": non_negative_arg,
    "host-overhead-ms": host_overhead_arg,
}


def add_params(p: argparse.ArgumentParser, params: Iterable[Param], skip: Iterable[str] = ()) -> None:
    """The flags of ``params`` (a job spec's parameters, :mod:`podsim.params`) on ``p``."""
    add_arguments(p, params, CONVERTERS, skip)


def progress_line():  # type: ignore[no-untyped-def]
    """A one-line progress display on stderr, only when it is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(now_ns: int, done: int, total: int) -> None:
        sys.stderr.write(progress_text(now_ns, done, total))
        sys.stderr.flush()

    return show


def count_status(what: str, done: int, total: int, elapsed_s: float) -> str:
    """``evaluated 120/639 layouts [###    ] 17.2/s, 30 s left``: a count, its rate and an estimate
    of the time left (s)."""
    bar = "#" * (20 * done // max(total, 1))
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    left = f", {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
    return f"{what.format(done=done, total=total)} [{bar:<20}] {rate:.1f}/s{left}"


def count_bar(what: str):  # type: ignore[no-untyped-def]
    """A ``progress(done, total)`` for counted work (``what``: ``"evaluated {done}/{total} layouts"``)
    showing :func:`count_status` on stderr when it is a terminal."""
    start = time.perf_counter()

    def show(done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write("\r  " + count_status(what, done, total, time.perf_counter() - start) + "   ")
            sys.stderr.flush()

    return show


def clear_progress_line(progress) -> None:  # type: ignore[no-untyped-def]
    if progress is not None:
        sys.stderr.write("\r" + " " * 70 + "\r")
        sys.stderr.flush()


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse output options that cannot be written, before simulating."""

    if args.trace and os.path.isdir(args.trace):
        raise InputError(
            f"--trace names the Perfetto trace to write, and {args.trace} is a folder; to simulate a "
            f"podsim trace folder give --pytorch {args.trace}",
            where="--trace",
        )
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path and os.path.isdir(path):
            raise InputError(f"{path} is a folder; give the file to write", where=flag)
    if args.plot and args.plot_ranks < 1:
        raise InputError(f"expected at least 1 rank to draw, got {args.plot_ranks}", where="--plot-ranks")
    if args.trace_ranks < 1:
        raise InputError(f"expected at least 1 rank to write, got {args.trace_ranks}", where="--trace-ranks")


def emit(res, args: argparse.Namespace, inputs: dict | None = None) -> int:  # type: ignore[no-untyped-def]
    """Print a simulation's summary and write the outputs its flags ask for (the JSON with the
    job's ``inputs`` when given)."""
    print(format_summary(res))
    if args.json:
        write_json(res, args.json, inputs)
        print(f"\n  wrote {args.json}")
    if args.trace:
        shown = write_trace(res, args.trace, max_ranks=args.trace_ranks, announce=announce)
        more = f", the first {shown} of {res.num_ranks} ranks (--trace-ranks)" if shown < res.num_ranks else ""
        print(f"  wrote {args.trace}{more} (open it at https://ui.perfetto.dev)")
    if args.plot:
        drawn = plot_timeline(res, args.plot, max_ranks=args.plot_ranks)
        print(f"  wrote {args.plot} (the timeline of {drawn} rank{'s' if drawn > 1 else ''})")
    return 0


def check_output_paths(args: argparse.Namespace) -> None:
    """Output paths that cannot be written are refused before any subcommand runs."""
    own = args.command in ("simulate", "example")  # their check_outputs says more about folders
    check_outputs_of(vars(args), folders_allowed=own)
