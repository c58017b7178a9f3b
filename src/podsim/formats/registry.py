"""Trace formats: one registry of the workload files podsim reads and writes.

Each format is a :class:`TraceFormat`: its name and aliases, ``sniff(path)`` (whether a path is
in this format), ``to_workload`` (the whole job as a :class:`~podsim.workload.Workload`),
``to_step`` where the format can give one GPU's training step (a
:class:`~podsim.formats.one_gpu_step.OneGpuStep`, what :mod:`podsim.parallelize` takes to many
GPUs) and ``write`` where podsim can write it.  :func:`trace_format` finds a path's format by
asking each format's ``sniff`` in the order of :data:`SNIFF_ORDER` (the order they are
registered here); a path no format claims is read as a Chakra prefix, whose reader then says
which rank files it expected.  ``podsim simulate --workload PATH --format NAME`` and
``podsim convert --to NAME`` take the names of :data:`TRACE_FORMATS`.

Sniffing order (the first that says yes wins):

1. ``execution-trace``: a ``.json`` / ``.json.gz`` file whose start has ``"schema"`` and no
   ``"traceEvents"`` (a PyTorch execution trace alone);
2. ``triosim``: a folder with ``trace.csv``;
3. ``rank-traces``: a folder with ``capture.json`` naming a ``world_size`` and
   ``comms.<rank>.json`` files (``podsim trace --world-size N``);
4. ``pytorch``: a ``.json`` / ``.json.gz`` file (a Kineto trace), or a folder with
   ``kineto.json`` or ``kineto.<rank>.json`` (a ``podsim trace`` folder);
5. ``astra-sim-text``: a ``.txt`` file whose first word is an ASTRA-sim 1.0 policy;
6. ``simai``: any other ``.txt`` file (SimAI / AICB);
7. ``chakra``: ``<prefix>.<rank>.et`` files (``<prefix>.0.et`` exists); a path no format claims
   is read as a Chakra prefix too, so its reader's error names the rank files it expected.

Adding a format: write its reader (a module of ``podsim.formats``), add one ``TraceFormat`` entry
below at its place in the sniffing order, a test (tests/test_trace_formats.py shows how) and a
line in docs/traces.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..registry import Registry
from ..workload import Group, Workload
from .astra_sim.text_workload import is_text_workload, read_text_workload
from .chakra import discover_ranks, rank_file, read_workload, write_workload_with_groups
from .one_gpu_step import OneGpuStep, read_pytorch_step, read_triosim_step, to_triosim
from .pytorch_trace import (
    capture_to_workload,
    execution_trace_to_workload,
    is_execution_trace,
    pytorch_to_workload,
)
from .rank_traces import compose, is_rank_trace
from .simai import simai_to_workload
from .triosim import read_triosim, triosim_to_workload
from .triosim_write import write_triosim

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class ReadOptions:
    """What a reader may need besides the path.

    Attributes:
        gpus: ranks to run a workload on where the format does not say (each format's
            ``to_workload`` documents its default), or None.
        execution_trace: a PyTorch execution trace to link with a Kineto trace file.
        whole_trace: with a Kineto trace that marks no ``ProfilerStep``: take all of it.
        comm_groups: ASTRA-sim communicator groups ``{id: ranks}``, for formats that resolve
            them while reading (``reads_comm_groups``).
    """

    gpus: int | None = None
    execution_trace: PathLike | None = None
    whole_trace: bool = False
    comm_groups: dict[str, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class TraceFormat:
    """One trace format.

    Attributes:
        name: its name (``--format NAME``, ``podsim convert --to NAME``).
        description: one line, for help texts and docs.
        sniff: whether a path is in this format (cheap: reads at most a file's start).
        to_workload: the path's whole job.
        to_step: the path's one-GPU training step (its batch set when the trace says it), or
            None where the format has none.
        write: writes a workload (``writes == "workload"``) or a one-GPU step (``"step"``) to
            an output path (a prefix or a folder) and returns the paths written; None where
            podsim does not write the format.
        writes: what ``write`` takes: ``"workload"`` or ``"step"``.
        aliases: other names it answers to.
        rank_files: the path is a prefix of one file per rank (Chakra): the reader resolves
            communicator groups itself, and a run is labelled by the prefix.
        ranks: the number of ranks a path's files hold, where its files say (rank files).
        layers: its workloads name each op's layer, so ``--layers`` can break a rank down.
    """

    name: str
    description: str
    sniff: Callable[[Path], bool]
    to_workload: Callable[[Path, ReadOptions], Workload]
    to_step: Callable[[Path, ReadOptions], OneGpuStep] | None = None
    write: Callable[[Workload | OneGpuStep, Path], tuple[str, ...]] | None = None
    writes: str = "workload"
    aliases: tuple[str, ...] = field(default_factory=tuple)
    rank_files: bool = False
    ranks: Callable[[Path], int] | None = None
    layers: bool = False


#: every trace format podsim reads, in sniffing order
TRACE_FORMATS: Registry[TraceFormat] = Registry("trace format", flag="--format")


def _register(f: TraceFormat) -> None:
    TRACE_FORMATS.register(f.name, f, aliases=f.aliases)


def _is_json_file(p: Path) -> bool:
    return str(p).endswith((".json", ".json.gz")) and p.is_file()


def is_capture(p: Path) -> bool:
    """Whether ``p`` is a ``podsim trace`` folder (``kineto.json`` or ``kineto.<rank>.json``)."""
    return p.is_dir() and (any(p.glob("kineto.json*")) or any(p.glob("kineto.[0-9]*.json*")))


# -- 1. a PyTorch execution trace alone ---------------------------------------------------------


def _execution_trace_workload(p: Path, o: ReadOptions) -> Workload:
    """Its collectives on ``gpus`` ranks (default 2)."""
    return execution_trace_to_workload(p, o.gpus or 2)


_register(
    TraceFormat(
        "execution-trace",
        "a PyTorch execution trace alone (.json): its collectives, timed by the network only",
        lambda p: _is_json_file(p) and is_execution_trace(p),
        _execution_trace_workload,
        aliases=("pytorch-et",),
    )
)


# -- 2. TrioSim ---------------------------------------------------------------------------------


def _triosim_write(step: Workload | OneGpuStep, out: Path) -> tuple[str, ...]:
    if not isinstance(step, OneGpuStep):
        raise InputError("TrioSim's format holds one GPU's training step, not a multi-rank workload", str(out))
    return tuple(str(x) for x in write_triosim(to_triosim(step), out))


_register(
    TraceFormat(
        "triosim",
        "a TrioSim trace folder (trace.csv, tensor.csv): one GPU's step",
        lambda p: (p / "trace.csv").is_file(),
        lambda p, o: triosim_to_workload(read_triosim(p)),
        to_step=lambda p, o: read_triosim_step(p),
        write=_triosim_write,
        writes="step",
    )
)


# -- 3. a parallel job traced rank by rank --------------------------------------------------------


def _rank_traces_step(p: Path, o: ReadOptions) -> OneGpuStep:
    """Rank 0's step, as of a ``podsim trace`` folder."""
    return read_pytorch_step(p, o.execution_trace, o.whole_trace)


_register(
    TraceFormat(
        "rank-traces",
        "a parallel job traced rank by rank (podsim trace --world-size N): every rank of the job",
        is_rank_trace,
        lambda p, o: compose(p, o.gpus),
        to_step=_rank_traces_step,
        aliases=("rank-trace", "fake-ranks"),
        layers=True,
    )
)


# -- 4. PyTorch profiler (Kineto) traces and podsim trace folders --------------------------------


def _pytorch_workload(p: Path, o: ReadOptions) -> Workload:
    """A Kineto file: its step on ``gpus`` ranks (default 1), linked with ``execution_trace``;
    a ``podsim trace`` folder: every rank it holds (``gpus``, if given, must be that many)."""
    if p.is_file():
        return pytorch_to_workload(p, o.execution_trace, o.whole_trace, o.gpus or 1)
    w = capture_to_workload(p)
    if o.gpus is not None and o.gpus != w.num_ranks:
        raise InputError(
            f"the capture has {w.num_ranks} ranks, not {o.gpus}: simulate it on its own ranks, or "
            "scale its rank 0 with --pytorch DIR --gpus N --parallel ...",
            str(p),
        )
    return w


def _pytorch_step(p: Path, o: ReadOptions) -> OneGpuStep:
    return read_pytorch_step(p, o.execution_trace, o.whole_trace)


_register(
    TraceFormat(
        "pytorch",
        "a PyTorch profiler (Kineto) trace .json (with --execution-trace), or a podsim trace folder "
        "(kineto[.<rank>].json, et[.<rank>].json)",
        lambda p: _is_json_file(p) or is_capture(p),
        _pytorch_workload,
        to_step=_pytorch_step,
        aliases=("kineto", "capture", "pytorch-trace"),
    )
)


# -- 5. ASTRA-sim 1.0 text workloads ------------------------------------------------------------


def _text_workload(p: Path, o: ReadOptions) -> Workload:
    if o.gpus is None:
        raise InputError("an ASTRA-sim 1.0 text workload does not say how many GPUs run it: give --gpus", str(p))
    return read_text_workload(p, o.gpus)


_register(
    TraceFormat(
        "astra-sim-text",
        "an ASTRA-sim 1.0 text workload (.txt; DATA, MODEL, HYBRID_... policies) on --gpus NPUs",
        lambda p: str(p).endswith(".txt") and is_text_workload(p),
        _text_workload,
        aliases=("astra-sim-1.0", "text"),
    )
)


# -- 6. SimAI / AICB workloads ------------------------------------------------------------------

_register(
    TraceFormat(
        "simai",
        "a SimAI / AICB workload (.txt) on --gpus GPUs (default: its all_gpus)",
        lambda p: str(p).endswith(".txt"),
        lambda p, o: simai_to_workload(p, o.gpus),
        aliases=("aicb",),
    )
)


# -- 7. Chakra execution traces ------------------------------------------------------------------


def _chakra_workload(p: Path, o: ReadOptions) -> Workload:
    """``<prefix>.<rank>.et`` of ``gpus`` ranks (default: the rank files found)."""
    return read_workload(p, o.gpus or discover_ranks(p), o.comm_groups)


def _chakra_write(w: Workload | OneGpuStep, out: Path) -> tuple[str, ...]:
    if isinstance(w, OneGpuStep):
        raise InputError("a Chakra prefix holds a workload, not a one-GPU step", str(out))
    paths, groups = write_workload_with_groups(w, out)
    return (*paths, *([groups] if groups else []))


def _chakra_sniff(p: Path) -> bool:
    return os.path.isfile(rank_file(p, 0))


_register(
    TraceFormat(
        "chakra",
        "Chakra execution traces: <prefix>.<rank>.et for every rank",
        _chakra_sniff,
        _chakra_workload,
        write=_chakra_write,
        aliases=("chakra-et", "et"),
        rank_files=True,
        ranks=discover_ranks,
    )
)

#: the formats in the order :func:`trace_format` asks them
SNIFF_ORDER: tuple[str, ...] = TRACE_FORMATS.names()
#: the format of a path no format claims (its reader says what it expected)
FALLBACK = "chakra"


def trace_format(path: PathLike, name: str | None = None) -> TraceFormat:
    """The format named ``name`` (or an alias), or else the first in :data:`SNIFF_ORDER` whose
    ``sniff`` claims ``path`` (:data:`FALLBACK` when none does).

    Raises:
        InputError: for an unknown name, with the closest one.
    """
    if name is not None:
        return TRACE_FORMATS.get(name)
    p = Path(path)
    for _, f in TRACE_FORMATS.items():
        if f.sniff(p):
            return f
    return TRACE_FORMATS.get(FALLBACK)


def sniffed(path: PathLike) -> str | None:
    """The name of the format whose ``sniff`` claims ``path`` first, or None when none does."""
    p = Path(path)
    return next((n for n, f in TRACE_FORMATS.items() if f.sniff(p)), None)


def to_workload(path: PathLike, name: str | None = None, options: ReadOptions = ReadOptions()) -> Workload:
    """The workload at ``path`` in format ``name`` (default: sniffed), with ``options.comm_groups``
    applied: read with them (rank-file formats) or replacing the workload's groups.

    Raises:
        InputError: for an unknown format name or a bad file.
    """
    f = trace_format(path, name)
    w = f.to_workload(Path(path), options)
    if options.comm_groups and not f.rank_files:
        w = with_groups(w, options.comm_groups)
    return w


def with_groups(w: Workload, groups: dict[str, tuple[int, ...]]) -> Workload:
    """``w`` with its communicator groups replaced by ``groups`` ``{id: ranks}``."""
    return Workload(w.programs, w.rank_program, [Group(k, tuple(v)) for k, v in groups.items()], w.name)


def to_step(path: PathLike, name: str | None = None, options: ReadOptions = ReadOptions()) -> OneGpuStep:
    """One GPU's training step at ``path`` in format ``name`` (default: sniffed).

    Raises:
        InputError: for a path no format claims, a format without one-GPU steps, or a bad file.
    """
    if name is None and sniffed(path) is None:
        raise InputError(
            f"{path}: no such folder or file, or not a one-GPU trace; expected a TrioSim folder, a "
            f"podsim trace folder or a Kineto trace JSON (formats: {_step_formats()})"
        )
    f = trace_format(path, name)
    if f.to_step is None:
        raise InputError(
            f"{path} is a {f.name} trace ({f.description}), which holds no one-GPU training step to "
            f"parallelize; formats that do: {_step_formats()}",
            where="--format" if name else None,
        )
    return f.to_step(Path(path), options)


def _step_formats() -> str:
    """The names of the formats that hold a one-GPU step."""
    return ", ".join(n for n, f in TRACE_FORMATS.items() if f.to_step is not None)


def write(source: Workload | OneGpuStep, out: PathLike, name: str) -> tuple[str, ...]:
    """Write ``source`` (a workload or a one-GPU step, as the format takes) in format ``name``
    to ``out``; returns the paths written.

    Raises:
        InputError: for an unknown format or one podsim does not write.
    """
    f = TRACE_FORMATS.get(name)
    if f.write is None:
        raise InputError(f"podsim does not write {f.name} traces; it writes: {', '.join(writable())}", where="--to")
    return f.write(source, Path(out))


def writable() -> tuple[str, ...]:
    """The names of the formats podsim writes, sorted."""
    return tuple(sorted(n for n, f in TRACE_FORMATS.items() if f.write is not None))
