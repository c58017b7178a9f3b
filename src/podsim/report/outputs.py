"""The files podsim writes, by name: one registry of output formats.  Each declares its flag (and
the argparse destination the subcommands give it), what it holds and the usual suffix; the
command line checks every output path against it before any work, so no run ends in a path it
cannot write.

Adding an output format is one ``OUTPUTS.register`` here plus its writer in ``report/``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..fileio import check_output_file
from ..registry import Registry
from ..units import format_ns


@dataclass(frozen=True)
class OutputFormat:
    """An output file: its flag, the argparse destination that holds its path, what it holds."""

    flag: str
    dest: str
    holds: str
    suffix: str


OUTPUTS: Registry[OutputFormat] = Registry("output format")
OUTPUTS.register("json", OutputFormat("--json", "json", "the result, fields in docs/outputs.md", ".json"))
OUTPUTS.register("trace", OutputFormat("--trace", "trace", "a Perfetto / Chrome trace (ui.perfetto.dev)", ".json"))
OUTPUTS.register("plot", OutputFormat("--plot", "plot", "a timeline or latency plot (matplotlib)", ".png"))
OUTPUTS.register("layers", OutputFormat("--layers", "layers", "per-layer times of a one-GPU trace", ".csv"))
OUTPUTS.register("cdf", OutputFormat("--cdf", "cdf", "a latency CDF (matplotlib)", ".png"))
OUTPUTS.register("chrome-trace", OutputFormat("--chrome-trace", "chrome_trace", "DLSIM's Chrome trace", ".json"))


def check_output_paths(values: dict[str, Any], folders_allowed: bool = False) -> None:
    """Refuse, before a run, every output path in ``values`` (argparse's namespace as a dict)
    that cannot become a file; ``folders_allowed``: a subcommand that checks folders itself.

    Raises:
        InputError: naming the flag and the path."""
    for _, out in OUTPUTS.items():
        v = values.get(out.dest)
        if isinstance(v, str) and v and not (folders_allowed and os.path.isdir(v)):
            check_output_file(v, out.flag)


def progress_text(now_ns: int, done: int, total: int) -> str:
    """The progress line of a simulation: simulated time and ranks finished."""
    return f"\r  simulating: t = {format_ns(now_ns):>12}, {done}/{total} ranks finished "
