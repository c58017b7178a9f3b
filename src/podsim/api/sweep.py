"""``podsim sweep`` as a Python call: any podsim run over a grid or list of parameter values and
hardware what-ifs, into one table (and a results store that lets it resume).

:func:`sweep` takes a :class:`~podsim.sweep.spec.SweepSpec` (or the path of its YAML,
docs/sweep.md) and returns a :class:`~podsim.sweep.sweep.SweepResult`: one row per point and
what-if, its columns the spec's parameters and the run kind's metrics (units in their names).
Each point runs through the same API call as the subcommand it names (:mod:`podsim.sweep.runs`).
The printed table and the CSV are in :mod:`podsim.report.sweep`.

Example::

    from podsim.api import sweep
    from podsim.api.sweep import example_spec
    res = sweep(example_spec("collective"), workers=1)
    for row in res.rows:
        print(row["what_if"], row["size"], row["busbw_gbps"])      # GB/s

The command line's own parameters (which spec, the store, where the runs go, what is written)
are those of :class:`SweepJob`.  Built-in specs: :func:`sweep_examples` (name -> what it
shows), :func:`example_spec`, :func:`write_example` (its YAML, to edit).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import unknown_key_error
from ..fileio import atomic_write_text
from ..jobs.sweep import SWEEP_PARAMS, SweepJob
from ..sweep.examples import SWEEP_EXAMPLES
from ..sweep.runs import RUNS
from ..sweep.spec import SweepSpec, load_spec, spec_from_text
from ..sweep.sweep import SweepResult, run_sweep

__all__ = [
    "RUNS",
    "SWEEP_PARAMS",
    "SweepJob",
    "SweepResult",
    "SweepSpec",
    "example_spec",
    "load_spec",
    "sweep",
    "sweep_examples",
    "write_example",
]


def sweep(
    spec: SweepSpec | str | os.PathLike[str],
    *,
    store: str | None = None,
    workers: int | None = None,
    ray: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Run every point of ``spec`` (a checked spec, or the path of a sweep YAML) under every
    what-if, in worker processes or on Ray; points the results store already holds are taken
    from it, not run again.

    ``store``: a DuckDB results store (default: the spec's ``store``; none: keep nothing).
    ``workers``: local worker processes (default: the CPUs, at most 8; 1: this process).
    ``ray``: run on a Ray cluster at this address instead (``"local"``: start one here).
    ``progress(done, total)``: called as points finish (``total``: the points to run now).

    Raises:
        InputError: a spec that cannot be read or checked, a store that cannot be opened, or
            Ray that cannot be reached.  A point podsim refuses is a row with an ``error``.
    """
    checked = spec if isinstance(spec, SweepSpec) else load_spec(Path(spec))
    return run_sweep(checked, store, workers, ray, progress)


def sweep_examples() -> dict[str, str]:
    """The built-in sweep specs: name -> what each shows."""
    return {name: what for name, (what, _) in SWEEP_EXAMPLES.items()}


def _example_text(name: str) -> str:
    if name not in SWEEP_EXAMPLES:
        raise unknown_key_error(name, SWEEP_EXAMPLES, None, "example")
    return SWEEP_EXAMPLES[name][1]


def example_spec(name: str) -> SweepSpec:
    """The built-in sweep spec ``name``, checked.

    Raises:
        InputError: an unknown name (the closest one named)."""
    return spec_from_text(_example_text(name), f"built-in example {name!r}", None, name)


def write_example(name: str, path: str | os.PathLike[str]) -> None:
    """Write the YAML of the built-in spec ``name`` to ``path`` (atomically), to edit and run.

    Raises:
        InputError: an unknown name."""
    atomic_write_text(path, _example_text(name))
