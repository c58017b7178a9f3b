"""Write a TrioSim processed trace (``trace.csv`` and ``tensor.csv``, the columns
:mod:`podsim.formats.triosim` reads): ``podsim convert --to triosim``.

Times are written in whole microseconds (TrioSim's unit; an op shorter than 0.5 us becomes 0),
lists as ``[a; b]``.  Each tensor gets one row per op that uses it, with the role it plays there
(``input``, ``weight``, ``output``), as TrioSim's tracer writes them.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..fileio import atomic_write_text
from .triosim import TENSOR_COLUMNS, TRACE_COLUMNS, TriosimTrace


def _list(xs: tuple[int, ...]) -> str:
    return "[" + "; ".join(str(x) for x in xs) + "]"


def write_triosim(trace: TriosimTrace, folder: str | Path) -> tuple[Path, Path]:
    """Write ``trace`` into ``folder`` (created if missing); returns the two paths."""
    d = Path(folder)
    ops = io.StringIO()
    w = csv.writer(ops, lineterminator="\n")
    w.writerow(TRACE_COLUMNS)
    tens = io.StringIO()
    t = csv.writer(tens, lineterminator="\n")
    t.writerow(TENSOR_COLUMNS)
    index = 0
    for o in trace.ops:
        w.writerow(
            [
                o.op_id,
                o.name,
                _list(o.inputs),
                _list(o.outputs),
                o.span_us,
                o.kernel_us,
                _list(o.input_sizes),
                _list(o.output_sizes),
                0,
                o.stage,
                int(o.tp_split),
            ]
        )
        for tid in o.inputs + o.outputs:
            tensor = trace.tensors.get(tid)
            if tensor is None:
                continue
            role = ("weight" if tensor.role == "weight" else "input") if tid in o.inputs else "output"
            t.writerow([index, tid, f"[{tensor.elements}]", tensor.elements, tensor.elem_bytes, role, tid, 0])
            index += 1
    tpath, npath = d / "trace.csv", d / "tensor.csv"
    atomic_write_text(tpath, ops.getvalue())
    atomic_write_text(npath, tens.getvalue())
    return tpath, npath
