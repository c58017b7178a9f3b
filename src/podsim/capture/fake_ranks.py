"""``podsim trace --world-size N --layout ... --fake-ranks``: trace a parallel training job rank by
rank on one device, without the cluster (Echo's ex-situ tracing).

For each distinct rank (see :mod:`podsim.capture.parallel`), one after another, a fresh Python
process on this one device (torch's DTensor caches plans by mesh shape across process-group
lifetimes, so a second rank in the same interpreter could reach the first one's destroyed
groups) initialises torch.distributed as rank ``r`` of ``N`` on podsim's recording fake backend
(:mod:`podsim.capture.recorder`): every collective and point-to-point call returns at once and
is recorded, while the compute runs and is timed for real.  The user's builder (or a ready-made
one for a HuggingFace config) builds the parallel model for that rank on torch's ``DeviceMesh``;
warm-up steps then one profiled step run, and the rank's files are written:

* ``kineto.<r>.json``: the profiler's trace of the step (``podsim::<kind>#<seq>`` ranges mark
  each call, ``podsim::wait#<seq>`` each wait for one);
* ``comms.<r>.json``: the calls: kind, bytes, group and its global ranks, peer, call site.

``capture.json`` records ``world_size``, ``layout`` and ``ranks_traced``.  With ``nproc`` instead
(:func:`run_ranks`), the same job runs for real over gloo in ``N`` processes, recorded the same
way, each rank writing the same files: the check of the fake ranks against reality.

Everything is written to a temporary folder beside ``out`` and moved into place at the end, so
a failed trace leaves no half-written folder.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..fileio import atomic_write_text
from ..formats.pytorch_trace import read_kineto, step_window
from ..formats.rank_traces import compose
from .hf_parallel import build as build_hf
from .megatron import build as build_megatron
from .models import _cross_entropy, torch_module, user_callable
from .parallel import DIMS, MeshLayout, ParallelContext, TrainingStep, parse_layout
from .recorder import STEP_FRAME, records, register_backends, reset
from .run import _free_port, job_process, spawn_errors


@dataclass
class RankCapture:
    """What a rank-by-rank trace wrote and measured."""

    folder: Path
    world_size: int
    layout: MeshLayout
    ranks_traced: list[int]
    step_ms: dict[int, float]  #: each traced rank's profiled step (ms)
    trace_s: float  #: wall time of the whole trace (s)
    fake: bool


def _builder(model: str, batch_size: int, ctx: ParallelContext) -> tuple[list[Any], Callable[[], Any]]:
    """(parameters, one training step's forward + backward) of ``model`` on the rank ``ctx``
    says."""
    kind, _, rest = model.partition(":")
    if kind == "hf" and rest:
        got: Any = build_hf(rest, batch_size, ctx)
    elif kind == "megatron" and rest:
        got = build_megatron(rest, batch_size, ctx)
    elif kind == "torchvision" or not rest:
        raise InputError(
            f"{model}: a parallel job needs a builder: hf:CONFIG.json (ready-made FSDP2 / TP / "
            "pipelining), megatron:CONFIG.json (Megatron-Core's GPT) or module:callable, called as "
            "callable(batch_size, parallel)",
            where="--model",
        )
    else:
        got = user_callable(kind, rest)(batch_size, ctx)
    if isinstance(got, TrainingStep):
        return list(got.parameters), got.step
    if isinstance(got, tuple) and len(got) in (3, 4):
        net, x, y = got[:3]
        loss_fn = got[3] if len(got) == 4 else _cross_entropy
        return list(net.parameters()), lambda: loss_fn(net, x, y).backward()
    raise InputError(
        f"{model}(batch_size, parallel) must return (model, inputs, targets[, loss_fn]) or a "
        "podsim.capture.TrainingStep",
        where="--model",
    )


def trace_rank(
    rank: int,
    world_size: int,
    layout: MeshLayout,
    model: str,
    batch_size: int,
    folder: str,
    steps: int,
    device: str,
    optimizer: str,
    seq_len: int,
    fake: bool,
) -> None:
    """Run rank ``rank``'s training step (``steps`` warm-up steps and one profiled) on the fake
    (or, in a process of a real job, the recording gloo) backend and write its files to
    ``folder``.

    Raises:
        InputError: when building or running the step fails (naming the rank), or when a job of
            more than one rank issues no collective (the builder ignored the world size).
    """
    torch = torch_module()
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.profiler import ProfilerActivity, profile, schedule

    register_backends(dist, torch)
    if fake:
        _groups_on_the_fake_backend(dist)
        dist.init_process_group("podsim_fake", store=dist.HashStore(), rank=rank, world_size=world_size)
    else:  # the job's processes share this machine's cores: no more threads than cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        dist.init_process_group("podsim_gloo", rank=rank, world_size=world_size)
    who = f"rank {rank} of {world_size} ({', '.join(f'{d}={v}' for d, v in layout.coords(rank).items())})"
    out = Path(folder)
    tmp = out / f"kineto.{rank}.json.tmp"
    try:
        mesh = init_device_mesh(device, layout.shape, mesh_dim_names=DIMS)
        ctx = ParallelContext(rank, world_size, layout, mesh, device, seq_len)
        try:
            params, step = _builder(model, batch_size, ctx)
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code: say what failed, cleanly
            raise InputError(
                f"building {model} for {who} failed: {_root_cause(e)}{_hint(e, fake, device)}", where="--model"
            ) from e
        opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(params, lr=1e-3)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        total = steps + 1
        with (
            warnings.catch_warnings(),
            profile(
                activities=activities,
                record_shapes=False,
                schedule=schedule(wait=0, warmup=steps, active=1),
                on_trace_ready=lambda p: p.export_chrome_trace(str(tmp)),
            ) as prof,
        ):
            warnings.filterwarnings("ignore")
            for _ in range(total):
                reset()
                opt.zero_grad(set_to_none=True)
                try:
                    _run_user_step(step)
                except Exception as e:  # noqa: BLE001 - the user's code
                    hint = _hint(e, fake, device)
                    raise InputError(
                        f"the training step of {model} on {who} failed: {_root_cause(e)}{hint}", where="--model"
                    ) from e
                opt.step()
                if device == "cuda":
                    torch.cuda.synchronize()
                prof.step()
        calls = records()
        if world_size > 1 and not calls:
            raise InputError(
                f"{model} issued no collective or send/receive in its training step on {who}: the "
                f"builder did not use the world size {world_size} it was given (build the parallel "
                "model on parallel.mesh)",
                where="--model",
            )
        outside = sorted({r for c in calls for r in c["ranks"] if r >= world_size})
        if outside:
            raise InputError(
                f"{model} on {who} communicated with ranks {outside} outside the world of {world_size}", where="--model"
            )
        tmp.replace(out / f"kineto.{rank}.json")
        atomic_write_text(
            out / f"comms.{rank}.json",
            json.dumps({"rank": rank, "coords": layout.coords(rank), "calls": calls}, indent=0) + "\n",
        )
    finally:
        tmp.unlink(missing_ok=True)
        dist.destroy_process_group()


def _groups_on_the_fake_backend(dist: Any) -> None:
    """Make ``new_group`` create every group on the world's (fake) backend, whatever backend the
    program asks for: a ``backend="gloo"`` group (Megatron-Core makes some for CPU-side work)
    would otherwise wait forever for peers that are not there.  Each rank is traced in a
    process of its own, so this does not outlive the trace."""
    c10d = dist.distributed_c10d
    original = c10d.new_group
    if getattr(original, "_podsim_fake", False):
        return
    signature = inspect.signature(original)

    def new_group(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.arguments.pop("backend", None)
        bound.arguments.pop("pg_options", None)
        return original(*bound.args, **bound.kwargs)

    new_group._podsim_fake = True  # type: ignore[attr-defined]
    c10d.new_group = new_group
    dist.new_group = new_group


def _hint(e: BaseException, fake: bool, device: str) -> str:
    """What to do about a failed step: a model that needs a GPU, or a pipeline that reads what
    another rank sent (its shapes) when traced alone."""
    cause = e
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if device == "cpu" and "CUDA" in str(cause):
        return ": this model needs a GPU (CUDA); trace it with --device cuda on a machine with one"
    tb = e.__traceback__
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    if fake and any("pipelining" in f for f in files):
        return (
            " (a rank traced alone cannot read what other ranks send: pipelines need static shapes, "
            "PipelineStage(input_args=..., output_args=..., input_grads=..., output_grads=...))"
        )
    return ""


def _root_cause(e: BaseException) -> str:
    """``Type: first line`` of the innermost exception ``e`` was raised from (torch's pipelining
    wraps the real error in a long message of its own)."""
    while e.__cause__ is not None:
        e = e.__cause__
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def _run_user_step(step: Callable[[], Any]) -> None:
    """Run one training step (the recorder takes call sites from the frames below this one)."""
    step()


assert _run_user_step.__name__ == STEP_FRAME


def _join(context: Any, timeout_s: float, what: str) -> None:
    """Wait for spawned processes, at most ``timeout_s`` seconds (errors as :class:`InputError`).

    Raises:
        InputError: a process failed (its own message), died, or ran past the timeout (then
            every process is stopped)."""
    deadline = time.monotonic() + timeout_s
    with spawn_errors():
        while not context.join(timeout=min(5.0, max(0.1, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                for p in context.processes:
                    if p.is_alive():
                        p.kill()
                raise InputError(
                    f"stopped after {timeout_s:g} s: {what} had not finished (a training step that waits "
                    "for something no rank sends never ends)",
                    where="--rank-timeout",
                )


def _fresh_folder(out: Path) -> Path:
    """A temporary folder beside ``out`` to write into (moved into place by :func:`_finish`).

    Raises:
        InputError: when ``out`` is a file, or a folder that holds files other than a podsim trace.
    """
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", str(out), "--out")
    if out.is_dir() and any(out.iterdir()) and not (out / "capture.json").is_file():
        raise InputError(
            "the folder holds other files (not a podsim trace folder): give a new or empty folder", str(out), "--out"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))


def _finish(tmp: Path, out: Path) -> None:
    """Move the finished trace into place (an earlier trace there is replaced)."""
    if out.exists():
        old = out.with_name(f".{out.name}.old.{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)


def _fake_worker(_index: int, rank: int, world_size: int, args: tuple[Any, ...], path: list[str]) -> None:
    """A fresh process tracing one rank on the fake backend (libraries' warnings are not shown:
    they would repeat for every rank)."""
    sys.path[:0] = [p for p in path if p not in sys.path]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace_rank(rank, world_size, *args)


def trace_ranks(
    model: str,
    batch_size: int,
    out: str | Path,
    world_size: int,
    layout_spec: str,
    steps: int = 2,
    device: str = "cpu",
    optimizer: str = "adam",
    seq_len: int = 128,
    nproc: int = 0,
    progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 1800.0,
) -> RankCapture:
    """Trace a parallel job: with ``nproc`` 0, its distinct ranks one by one in this process on
    the fake backend; with ``nproc`` = ``world_size``, every rank for real over gloo in that many
    processes.  ``batch_size`` is each data-parallel rank's batch.  A rank (or the real job) that
    runs longer than ``timeout_s`` seconds is stopped with an error.

    Raises:
        InputError: for a layout that does not divide the world, a bad device or optimizer, or
            any rank's failure (see :func:`trace_rank`).
    """
    torch_module()
    layout = parse_layout(layout_spec, world_size)
    if device not in ("cpu", "cuda"):
        raise InputError(f"device must be cpu or cuda, not {device!r}", where="--device")
    if optimizer not in ("adam", "sgd"):
        raise InputError(f"optimizer must be adam or sgd, not {optimizer!r}", where="--optimizer")
    if nproc and nproc != world_size:
        raise InputError(
            f"a real job runs every rank: --nproc {nproc} must equal --world-size {world_size}", where="--nproc"
        )
    if nproc and device != "cpu":
        raise InputError("a real job for checking runs over gloo on the CPU", where="--device")
    fake = not nproc
    ranks = layout.distinct_ranks() if fake else list(range(world_size))
    out_dir = Path(out)
    tmp = _fresh_folder(out_dir)
    start = time.perf_counter()
    args = (layout, model, batch_size, str(tmp), steps, device, optimizer, seq_len, fake)
    step_ms: dict[int, float] = {}
    try:
        import torch.multiprocessing as mp

        if fake:  # one rank after another, each in a fresh process (see the module docstring)
            for i, r in enumerate(ranks):
                _join(
                    mp.start_processes(
                        _fake_worker,
                        args=(r, world_size, args, list(sys.path)),
                        nprocs=1,
                        join=False,
                        start_method="spawn",
                    ),
                    timeout_s,
                    f"rank {r}",
                )
                if progress is not None:
                    progress(i + 1, len(ranks))
        else:
            _join(
                mp.start_processes(
                    job_process,
                    args=(nproc, _free_port(), trace_rank, args, list(sys.path)),
                    nprocs=nproc,
                    join=False,
                    start_method="spawn",
                ),
                timeout_s,
                f"the {nproc} processes",
            )
        for r in ranks:
            lo, hi, _ = step_window(read_kineto(tmp / f"kineto.{r}.json"))
            step_ms[r] = round((hi - lo) / 1000, 6)
        elapsed = time.perf_counter() - start
        torch = torch_module()
        info = {
            "model": model,
            "batch_size": batch_size,
            "device": device,
            "optimizer": optimizer,
            "warmup_steps": steps,
            "fake_ranks": fake,
            "world_size": world_size,
            "layout": layout.to_json(),
            "ranks_traced": ranks,
            "step_ms_per_rank": {str(r): v for r, v in step_ms.items()},
            "trace_s": round(elapsed, 3),
            "torch": torch.__version__,
            "captured": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": {"kineto": "kineto.<rank>.json", "comms": "comms.<rank>.json"},
        }
        atomic_write_text(tmp / "capture.json", json.dumps(info, indent=1) + "\n")
        compose(tmp)  # ranks that disagree on a group's calls are refused here, before the folder is kept
        _finish(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return RankCapture(out_dir, world_size, layout, ranks, step_ms, elapsed, fake)
