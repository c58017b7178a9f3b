"""A process group that records every collective and point-to-point call of a training step:
what it moved (kind, bytes), over which ranks, with which peer, from which line of the user's
code, and when the program waited for it.

Two torch.distributed backends use it:

* ``podsim_fake``: no communication at all.  Each call returns a completed work at once, so one
  process can run the training step of rank ``r`` of a job of ``N`` ranks (Echo's ex-situ
  tracing).  Outputs get plausible values (an all-gather's output holds copies of the input, a
  receive buffer zeros, or ones for integer tensors, so that pipelining's static-shape vote
  agrees); nothing a rank computes may depend on what other ranks send.
* ``podsim_gloo``: real communication through a gloo process group, recorded the same way, so a
  real job over several processes can be checked call by call against its fake-rank trace.

Each call is wrapped in a profiler range ``podsim::<kind>#<seq>`` and each wait for its work in
``podsim::wait#<seq>``, so the Kineto trace says when the program issued and waited for it;
:func:`records` returns the calls as dicts (written to ``comms.<rank>.json``).  torch is imported
by the caller; this module only uses the objects it is given.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

#: the calls recorded in this process since the last :func:`reset` (one list per process: each
#: traced rank runs in its own process group lifetime, and a capture resets it between steps)
_LOG: list[dict[str, Any]] = []
#: the next call's id: it keeps counting across resets, so a wait for an earlier step's work is
#: never taken for a wait on this step's call of the same position
_NEXT = [0]

#: method name -> (kind, which argument holds the tensors whose bytes count, peer argument)
#: sizes follow nccl-tests: an all-gather's output, a reduce-scatter's or all-to-all's input
_METHODS: dict[str, tuple[str, int, int | None]] = {
    "allreduce": ("all_reduce", 0, None),
    "allreduce_coalesced": ("all_reduce", 0, None),
    "allgather": ("all_gather", 0, None),
    "_allgather_base": ("all_gather", 0, None),
    "all_gather_single": ("all_gather", 0, None),
    "allgather_into_tensor_coalesced": ("all_gather", 0, None),
    "all_gather_single_coalesced": ("all_gather", 0, None),
    "reduce_scatter": ("reduce_scatter", 1, None),
    "_reduce_scatter_base": ("reduce_scatter", 1, None),
    "reduce_scatter_single": ("reduce_scatter", 1, None),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", 1, None),
    "reduce_scatter_single_coalesced": ("reduce_scatter", 1, None),
    "alltoall_base": ("all_to_all", 1, None),
    "all_to_all_single": ("all_to_all", 1, None),
    "alltoall": ("all_to_all", 1, None),
    "broadcast": ("broadcast", 0, None),
    "reduce": ("reduce", 0, None),
    "gather": ("gather", 1, None),
    "scatter": ("scatter", 0, None),
    "barrier": ("barrier", -1, None),
    "send": ("send", 0, 1),
    "recv": ("recv", 0, 1),
}

#: the real gloo method each recorded method calls (gloo's Backend spells some differently)
_GLOO_NAME = {
    "all_gather_single": "_allgather_base",
    "all_gather_single_coalesced": "allgather_into_tensor_coalesced",
    "reduce_scatter_single": "_reduce_scatter_base",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor_coalesced",
    "all_to_all_single": "alltoall_base",
}

_PODSIM_FILE = os.path.dirname(os.path.abspath(__file__))


def records() -> list[dict[str, Any]]:
    """The calls recorded since the last :func:`reset`: ``seq``, ``kind``, ``bytes``, ``group``
    (its name), ``group_desc``, ``ranks`` (global), ``peer`` (global rank, send/recv),
    ``tag``, ``site`` (``file:line`` of the user's call) and ``waited`` (whether the program
    waited for it)."""
    return [dict(r) for r in _LOG]


def reset() -> None:
    """Forget what was recorded."""
    _LOG.clear()


def _tensors(x: Any) -> list[Any]:
    """The tensors in an argument (a tensor, or nested lists of them)."""
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return [x] if hasattr(x, "element_size") and hasattr(x, "numel") else []


#: the function podsim runs a user's training step in: frames above it are podsim's driver
STEP_FRAME = "_run_user_step"


def _call_site() -> str:
    """Where the user's code made this call: ``file:line`` of the innermost frame outside torch
    and podsim below podsim's step driver, or, for a call torch made on its own (a backward hook
    of FSDP, say), torch's innermost ``torch/...py:line``."""
    stack = traceback.extract_stack()[:-3]
    for i, f in enumerate(stack):
        if f.name == STEP_FRAME:
            stack = stack[i + 1 :]
            break
    torch_frame = None
    for f in reversed(stack):
        fn = f.filename
        if "torch" + os.sep in fn:
            if torch_frame is None and "c10d" not in fn and "distributed_c10d" not in fn:
                torch_frame = f"torch{os.sep}{fn.rsplit('torch' + os.sep, 1)[1]}:{f.lineno}"
            continue
        if not fn.startswith(_PODSIM_FILE) and "<" not in fn:
            return f"{os.path.basename(fn)}:{f.lineno}"
    return torch_frame or "torch"


def _fill(method: str, args: tuple[Any, ...]) -> None:
    """Give a fake call's outputs plausible values (see the module docstring)."""
    if method in ("allgather", "_allgather_base", "all_gather_single"):
        outs, src = _tensors(args[0]), _tensors(args[1])
        if src and outs:
            flat = src[0].reshape(-1)
            for o in outs:
                o_flat = o.reshape(-1)
                n = flat.numel()
                for start in range(0, o_flat.numel(), max(n, 1)):
                    k = min(n, o_flat.numel() - start)
                    o_flat[start : start + k].copy_(flat[:k])
    elif method in ("_reduce_scatter_base", "reduce_scatter_single", "alltoall_base", "all_to_all_single"):
        out, src = _tensors(args[0]), _tensors(args[1])
        if out and src:
            o, s = out[0].reshape(-1), src[0].reshape(-1)
            o.copy_(s[: o.numel()]) if s.numel() >= o.numel() else o.zero_()
    elif method == "recv":
        for t in _tensors(args[0]):
            t.fill_(0 if t.is_floating_point() or t.is_complex() else 1)


def make_group_class(dist: Any, torch: Any) -> type:
    """The recording ProcessGroup class, built on this torch (imported lazily by the caller)."""

    class RecordedWork(dist.Work):  # type: ignore[misc, name-defined]
        """A recorded call's work: a wait is recorded and passed on to the real work, if any."""

        def __init__(self, entry: dict[str, Any], result: Any, inner: Any = None) -> None:
            super().__init__()
            self._entry, self._result, self._inner = entry, result, inner

        def wait(self, timeout: Any = None) -> bool:
            with torch.profiler.record_function(f"podsim::wait#{self._entry['seq']}"):
                self._entry["waited"] = True
                if self._inner is not None:
                    return bool(self._inner.wait() if timeout is None else self._inner.wait(timeout))
            return True

        def is_completed(self) -> bool:
            return True if self._inner is None else bool(self._inner.is_completed())

        def is_success(self) -> bool:
            return True

        def get_future(self) -> Any:
            if self._inner is not None:
                return self._inner.get_future()
            fut = torch.futures.Future()
            fut.set_result(self._result)
            return fut

        def result(self) -> Any:
            return self._result

    class RecordingGroup(dist.ProcessGroup):  # type: ignore[misc, name-defined]
        """A process group whose every call is recorded; ``inner`` (gloo) communicates, if any."""

        def __init__(self, rank: int, size: int, ranks: list[int], name: str, inner: Any = None) -> None:
            super().__init__(rank, size)
            self._ranks, self._name, self._size, self._inner = ranks, name, size, inner

        def getBackendName(self) -> str:  # noqa: N802 - torch's name
            return "podsim_gloo" if self._inner is not None else "podsim_fake"

        @property
        def group_name(self) -> str:
            return self._name

        def size(self) -> int:
            return self._size

        def _record(self, method: str, args: tuple[Any, ...]) -> Any:
            kind, at, peer_at = _METHODS[method]
            size = sum(int(t.numel()) * int(t.element_size()) for t in _tensors(args[at])) if at >= 0 else 0
            seq = _NEXT[0]
            _NEXT[0] += 1
            entry: dict[str, Any] = {
                "seq": seq,
                "kind": kind,
                "bytes": size,
                "group": self._name,
                "group_desc": str(getattr(self, "group_desc", "") or ""),
                "ranks": list(self._ranks),
                "site": _call_site(),
                "waited": False,
            }
            if peer_at is not None:
                entry["peer"] = self._ranks[int(args[peer_at])]
                entry["tag"] = int(args[peer_at + 1]) if len(args) > peer_at + 1 else 0
            _LOG.append(entry)
            with torch.profiler.record_function(f"podsim::{kind}#{seq}"):
                if self._inner is not None:
                    inner = getattr(self._inner, _GLOO_NAME.get(method, method))(*args)
                    return RecordedWork(entry, args[0], inner)
                with torch.no_grad():
                    _fill(method, args)
            return RecordedWork(entry, args[0])

    def _method(name: str) -> Any:
        def call(self: Any, *args: Any) -> Any:
            return self._record(name, args)

        call.__name__ = name
        return call

    for m in _METHODS:
        setattr(RecordingGroup, m, _method(m))
    return RecordingGroup


def register_backends(dist: Any, torch: Any) -> None:
    """Register ``podsim_fake`` and ``podsim_gloo`` with torch.distributed (once a process)."""
    if "PODSIM_FAKE" in dist.Backend._plugins:
        return
    group_class = make_group_class(dist, torch)

    def ranks_of(opts: Any) -> list[int]:
        return list(opts.global_ranks_in_group) or list(range(opts.group_size))

    def fake(opts: Any, _backend_opts: Any) -> Any:
        return group_class(opts.group_rank, opts.group_size, ranks_of(opts), str(opts.group_id))

    def gloo(opts: Any, _backend_opts: Any) -> Any:
        inner = dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
        return group_class(opts.group_rank, opts.group_size, ranks_of(opts), str(opts.group_id), inner)

    dist.Backend.register_backend("podsim_fake", fake, extended_api=True, devices=["cpu", "cuda"])
    dist.Backend.register_backend("podsim_gloo", gloo, extended_api=True, devices=["cpu"])
