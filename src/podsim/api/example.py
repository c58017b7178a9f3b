"""The built-in examples (``podsim example``): each writes its inputs with podsim's own writers
and runs on them."""

from __future__ import annotations

import os

from ..examples import CLUSTER_EXAMPLES, EXAMPLES, SERVE_EXAMPLES, write_example
from ..report.result import Result
from .simulate import simulate

__all__ = ["EXAMPLES", "SERVE_EXAMPLES", "run_example", "serve_example_args", "write_example"]


def serve_example_args(name: str) -> list[str] | None:
    """The ``podsim serve`` flags of a serving example (it runs on the files it writes), or None
    for an example that simulates a workload."""
    flags = SERVE_EXAMPLES.get(name)
    return None if flags is None else list(flags)


def run_example(name: str, paths: dict[str, str], use_symmetry: bool = True, record_timeline: bool = False) -> Result:
    """Simulate workload example ``name`` on the inputs ``write_example`` wrote (``paths``):
    on its cluster preset, or on its ASTRA-sim system, network and remote memory files.  The
    result's ``info["workload"]`` describes the example."""
    if name in CLUSTER_EXAMPLES:
        preset, backend = CLUSTER_EXAMPLES[name]
        res = simulate(
            paths["workload"],
            cluster=preset,
            backend=backend,
            use_symmetry=use_symmetry,
            record_timeline=record_timeline,
        )
    else:
        res = simulate(
            paths["workload"],
            paths["system"],
            paths["network"],
            paths["remote_memory"],
            use_symmetry=use_symmetry,
            record_timeline=record_timeline,
        )
    res.info["workload"] = f"built-in example '{name}': {EXAMPLES[name]}"
    return res


def example_input_name(path: str) -> str:
    """An input's file name; a Chakra prefix (no extension) as its ``<rank>.et`` files."""
    name = os.path.basename(path)
    return name if os.path.splitext(name)[1] else f"{name}.<rank>.et"
