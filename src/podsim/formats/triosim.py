"""TrioSim's processed traces: ``trace.csv`` (one row per operator) and ``tensor.csv``.

``trace.csv`` columns (TrioSim's tracer, ``shared/reference/triosim-echo-dlsim.md`` 1.4):
``OperatorID, OperatorName, Operator_input, Operator_output, Operator_cudatime,
Operator_cudatimenooverlap, InputSize, OutputSize, gpuid, stage, tpflag``.  Times are
microseconds: ``cudatime`` spans the op's first kernel start to its last kernel end,
``cudatimenooverlap`` sums its kernels' durations (what TrioSim replays).  Lists are written
``[a; b]``; ``InputSize`` / ``OutputSize`` are element counts; ``stage`` is forward, backward or
optimizer; ``tpflag`` marks ops (and their backward) that tensor parallelism splits.

``tensor.csv``: ``Index, TensorID, TensorShape, TensorNumElement, TensorEachByte,
TensorType, TensorStorgeid, gpuid`` (sic); a tensor id may repeat (once per op using it), the
last row wins, as in TrioSim's loader.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..fileio import check_columns, read_text
from ..workload import OpKind, ProgramBuilder, Workload

TRACE_COLUMNS = (
    "OperatorID",
    "OperatorName",
    "Operator_input",
    "Operator_output",
    "Operator_cudatime",
    "Operator_cudatimenooverlap",
    "InputSize",
    "OutputSize",
    "gpuid",
    "stage",
    "tpflag",
)
TENSOR_COLUMNS = (
    "Index",
    "TensorID",
    "TensorShape",
    "TensorNumElement",
    "TensorEachByte",
    "TensorType",
    "TensorStorgeid",
    "gpuid",
)
STAGES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class TriosimOp:
    """One operator of a TrioSim trace (times in us, sizes in elements)."""

    op_id: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    span_us: int
    kernel_us: int
    input_sizes: tuple[int, ...]
    output_sizes: tuple[int, ...]
    stage: str
    tp_split: bool


@dataclass(frozen=True)
class TriosimTensor:
    """One tensor: its element count, bytes per element, role in its last row (input, weight,
    output...) and every role any row gives it."""

    tensor_id: int
    elements: int
    elem_bytes: int
    role: str
    roles: frozenset[str] = frozenset()

    @property
    def bytes(self) -> int:
        return self.elements * self.elem_bytes

    @property
    def is_parameter(self) -> bool:
        """A weight or bias (some row names it so; later rows may call it an input).  TrioSim
        labels an optional bias ``bias=None`` from the op schema even when it is present."""
        return self.elements > 0 and any(r == "weight" or r.startswith("bias") for r in self.roles)


@dataclass
class TriosimTrace:
    """A TrioSim trace directory."""

    source: str
    ops: list[TriosimOp]
    tensors: dict[int, TriosimTensor] = field(default_factory=dict)

    def parameter_bytes(self, op: TriosimOp) -> int:
        """Bytes of the parameters ``op`` reads (its weights and biases)."""
        return sum(self.tensors[t].bytes for t in op.inputs if t in self.tensors and self.tensors[t].is_parameter)

    def kernel_us(self, stage: str | None = None) -> int:
        """Summed kernel time (``cudatimenooverlap``, us), of one stage or all."""
        return sum(o.kernel_us for o in self.ops if stage is None or o.stage == stage)


#: the largest number a trace field may hold: times are us (10^15 us is 31 years) and ids,
#: element counts and bytes per element stay far inside int64 when multiplied
MAX_FIELD = 10**15
MAX_OP_BYTES = 1 << 62


def _ints(text: str, where: str, src: str) -> tuple[int, ...]:
    t = (text or "").strip()
    if not (t.startswith("[") and t.endswith("]")):
        raise InputError(f"expected a list like [1; 2], got {text!r}", src, where)
    body = t[1:-1].strip()
    if not body:
        return ()
    try:
        out = tuple(int(x) for x in body.replace(",", ";").split(";"))
    except ValueError:
        raise InputError(f"expected integers in {text!r}", src, where) from None
    if any(not -1 <= x <= MAX_FIELD for x in out):
        raise InputError(f"expected integers from -1 to {MAX_FIELD:.0e} in {text!r}", src, where)
    return out


def _int(text: str, where: str, src: str, hi: int = MAX_FIELD) -> int:
    try:
        f = float(text)
    except (TypeError, ValueError):
        raise InputError(f"expected a number, got {text!r}", src, where) from None
    if not 0 <= f <= hi:  # also refuses NaN and inf
        raise InputError(f"expected a number from 0 to {hi:.0e}, got {text!r}", src, where)
    return int(f)


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise InputError("no such file (a TrioSim trace directory holds trace.csv and tensor.csv)", str(path))
    reader = csv.DictReader(io.StringIO(read_text(path, "TrioSim trace file"), newline=""))
    check_columns(reader.fieldnames, str(path))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; expected {','.join(columns)}", str(path))
    return list(reader)


def read_triosim(directory: str | Path) -> TriosimTrace:
    """Read ``trace.csv`` and ``tensor.csv`` from ``directory``.

    Raises:
        InputError: naming the file, row and column of a missing column or a bad value.
    """
    d = Path(directory)
    tpath, npath = d / "trace.csv", d / "tensor.csv"
    ops = []
    src = str(tpath)
    for i, r in enumerate(_rows(tpath, TRACE_COLUMNS), start=2):
        where = f"row {i}"
        stage = (r["stage"] or "").strip()
        if stage not in STAGES:
            raise InputError(f"stage {stage!r} is not one of {', '.join(STAGES)}", src, f"{where}, column stage")
        ops.append(
            TriosimOp(
                _int(r["OperatorID"], f"{where}, column OperatorID", src),
                (r["OperatorName"] or "").strip(),
                _ints(r["Operator_input"], f"{where}, column Operator_input", src),
                _ints(r["Operator_output"], f"{where}, column Operator_output", src),
                _int(r["Operator_cudatime"], f"{where}, column Operator_cudatime", src),
                _int(r["Operator_cudatimenooverlap"], f"{where}, column Operator_cudatimenooverlap", src),
                _ints(r["InputSize"], f"{where}, column InputSize", src),
                _ints(r["OutputSize"], f"{where}, column OutputSize", src),
                stage,
                (r["tpflag"] or "0").strip() == "1",
            )
        )
    if not ops:
        raise InputError("no operators", src)
    tensors: dict[int, TriosimTensor] = {}
    nsrc = str(npath)
    for i, r in enumerate(_rows(npath, TENSOR_COLUMNS), start=2):
        where = f"row {i}"
        tid = _int(r["TensorID"], f"{where}, column TensorID", nsrc)
        role = (r["TensorType"] or "").strip()
        seen = tensors[tid].roles if tid in tensors else frozenset()
        tensors[tid] = TriosimTensor(
            tid,
            _int(r["TensorNumElement"], f"{where}, column TensorNumElement", nsrc),
            _int(r["TensorEachByte"], f"{where}, column TensorEachByte", nsrc, hi=1024),
            role,
            seen | {role},
        )
    return TriosimTrace(str(d), ops, tensors)


def triosim_to_workload(trace: TriosimTrace, time: str = "kernel") -> Workload:
    """The one-GPU workload of a TrioSim trace: its operators in order, each a compute op of
    its recorded time (``kernel``: summed kernel time, as TrioSim replays; ``span``: first
    kernel start to last kernel end).  Op names are the original operator names; the stage
    and TrioSim's operator id are kept in each op's extras."""
    if time not in ("kernel", "span"):
        raise InputError(f"time must be 'kernel' or 'span', not {time!r}")
    b = ProgramBuilder(Path(trace.source).name or "triosim")
    prev: list[int] = []
    for o in trace.ops:
        us = o.kernel_us if time == "kernel" else o.span_us
        size = sum(trace.tensors[t].bytes for t in o.inputs + o.outputs if t in trace.tensors)
        if size > MAX_OP_BYTES:
            raise InputError(
                f"operator {o.op_id} ({o.name}) touches {size:.3g} B of tensors, more than {MAX_OP_BYTES:.3g} B",
                trace.source,
            )
        prev = [
            b.add(
                OpKind.COMPUTE,
                o.name,
                data_deps=prev,
                node_id=o.op_id,
                duration_ns=us * 1000,
                size_bytes=size,
                extra={"stage": o.stage, "triosim_id": o.op_id, "tp_split": o.tp_split},
            )
        ]
    return Workload([b.build()], [0], [], f"TrioSim trace {trace.source}")
