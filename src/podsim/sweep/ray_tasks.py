"""Run a search's or a sweep's tasks on Ray (``--ray [ADDRESS]``; the optional ``ray`` extra).

:func:`run_on_ray` starts a Ray instance on this machine (``address == "local"``) or connects
to a running cluster (``host:port`` as ``ray start --head`` prints it, or ``ray://host:port``
for Ray Client), runs ``fn(arg)`` for every argument as a Ray task of one CPU, and yields
``(index, result)`` as tasks finish.  No scheduler of podsim's own: Ray places the tasks.

A cluster address is checked before this process asks Ray to connect: its format, that the
host accepts a TCP connection within :data:`CONNECT_TIMEOUT_S` seconds, and that a trial
connection in a separate process succeeds within :data:`PROBE_TIMEOUT_S` seconds, since Ray's
own attempts retry for minutes (or for ever) on an address that answers but is wrong.  Every
failure is an :class:`~podsim.errors.InputError` naming ``--ray``, in at most 30 s.

Every machine of a cluster needs the same podsim version installed: Ray sends a task by name
(``podsim.sweep.runs.evaluate``, say), not podsim's code.  A local instance's workers search
the directory this process imports podsim from first, so a source checkout runs as itself.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import site
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from types import ModuleType
from typing import Any, TypeVar

import podsim

from ..errors import InputError, PodsimError
from ..optional import require

T = TypeVar("T")
R = TypeVar("R")

#: seconds to wait for a cluster's host to accept a TCP connection
CONNECT_TIMEOUT_S = 5.0
#: seconds a trial connection to a cluster may take (:func:`probe_cluster`)
PROBE_TIMEOUT_S = 25.0
#: tasks in flight per CPU of the cluster (and at least :data:`MIN_IN_FLIGHT`): enough to keep
#: every CPU busy while results are collected, few enough to cancel quickly
IN_FLIGHT_PER_CPU = 4
MIN_IN_FLIGHT = 64

#: ``--ray`` with no address: start a Ray instance on this machine
LOCAL_RAY = "local"

_WHERE = "--ray"
_FORMAT = "host:port as `ray start --head` prints it (e.g. 10.0.0.1:6379), or ray://host:port for Ray Client"
# connect as a driver and disconnect; print OK, or the error's chain (its root cause last)
_PROBE = """
import sys
import ray
try:
    ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, logging_level="ERROR")
except BaseException as e:
    chain = []
    while e is not None and len(chain) < 8:
        chain.append(type(e).__name__ + ": " + (str(e).strip().splitlines() or [""])[-1])
        e = e.__cause__ or e.__context__
    print(chr(10).join(chain))
    sys.exit(1)
ray.shutdown()
print("OK")
"""


@dataclass(frozen=True)
class RayAddress:
    """A parsed cluster address: ``host``, ``port`` (1-65535) and whether it is Ray Client's
    (``ray://``)."""

    host: str
    port: int
    client: bool = False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ray://' if self.client else ''}{host}:{self.port}"


def parse_address(address: str) -> RayAddress:
    """Parse ``host:port``, ``[ipv6]:port`` or ``ray://host:port``.

    Raises:
        InputError: anything else (no port, a port that is not a number in 1-65535, another
            scheme), with the expected form.
    """
    text = address.strip()
    client = text.startswith("ray://")
    rest = text[len("ray://") :] if client else text
    if "://" in rest:
        raise InputError(f"{address!r} is not a Ray cluster address: expected {_FORMAT}", where=_WHERE)
    bracketed = rest.startswith("[")
    if bracketed:  # [ipv6]:port
        host, sep, port = rest[1:].partition("]:")
    else:
        host, sep, port = rest.rpartition(":")
    if not sep or "/" in rest:
        raise InputError(f"{address!r} is not a Ray cluster address (no port): expected {_FORMAT}", where=_WHERE)
    if not host:
        raise InputError(f"{address!r} is not a Ray cluster address (no host): expected {_FORMAT}", where=_WHERE)
    if ":" in host or bracketed:
        try:
            ipaddress.IPv6Address(host)
            ok = bracketed
        except ValueError:
            ok = False
        if not ok:
            raise InputError(
                f"{address!r} is not a Ray cluster address: expected {_FORMAT} (an IPv6 host in brackets: [::1]:6379)",
                where=_WHERE,
            )
    if not port.isdecimal() or not 1 <= int(port) <= 65535:
        raise InputError(f"{address!r}: the port {port!r} is not a number in 1-65535; expected {_FORMAT}", where=_WHERE)
    return RayAddress(host, int(port), client)


def check_reachable(addr: RayAddress, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Check that ``addr`` accepts a TCP connection within ``timeout_s`` seconds.

    Raises:
        InputError: the host is unknown, refuses the connection or does not answer.
    """
    try:
        socket.create_connection((addr.host, addr.port), timeout=timeout_s).close()
    except socket.gaierror as e:
        raise InputError(
            f"cannot reach the Ray cluster at {addr}: unknown host {addr.host!r} ({e.strerror})", where=_WHERE
        ) from None
    except TimeoutError:
        raise InputError(
            f"cannot reach the Ray cluster at {addr}: no answer within {timeout_s:g} s "
            "(is the host up, the port open to this machine, and `ray start --head` running there?)",
            where=_WHERE,
        ) from None
    except OSError as e:
        raise InputError(
            f"cannot reach the Ray cluster at {addr}: {e.strerror or e} "
            "(is `ray start --head` running there, and is this the port it printed?)",
            where=_WHERE,
        ) from None


def probe_cluster(addr: RayAddress, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Connect to ``addr`` as Ray would, in a separate Python process stopped after
    ``timeout_s`` seconds: Ray's own connection attempts retry for minutes (or for ever) on an
    address that answers but is not a Ray cluster, and print a warning per attempt.

    Raises:
        InputError: the connection failed or took longer than ``timeout_s``; a cluster that
            wants a token says so.
    """
    env = dict(os.environ)
    env.setdefault("RAY_gcs_server_port_wait_time_s", "3")  # Ray's attempts (1 s apart; 20 by default)
    try:
        run = subprocess.run(
            [sys.executable, "-c", _PROBE, str(addr)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise InputError(
            f"cannot connect to the Ray cluster at {addr}: no answer as a Ray cluster within "
            f"{timeout_s:g} s (is this the address `ray start --head` printed, port 6379 by "
            "default?)",
            where=_WHERE,
        ) from None
    if run.returncode == 0 and run.stdout.strip().endswith("OK"):
        return
    text = run.stdout + run.stderr
    if "InvalidAuthToken" in text or "AuthenticationError" in text:
        raise InputError(
            f"the Ray cluster at {addr} refused this machine: it uses token authentication. Set "
            "RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN, or the head's ~/.ray/auth_token "
            "copied to this machine)",
            where=_WHERE,
        )
    lines = (
        [ln.strip() for ln in run.stdout.splitlines() if ln.strip()]
        or [ln.strip() for ln in run.stderr.splitlines() if ln.strip()]
        or [f"exit status {run.returncode}"]
    )
    raise InputError(
        f"cannot connect to the Ray cluster at {addr}: {lines[-1]} (is this the address "
        "`ray start --head` printed, port 6379 by default?)",
        where=_WHERE,
    )


def _podsim_path() -> list[str]:
    """The directory this podsim is imported from when it is not a site directory (a source
    checkout on ``sys.path``, an editable install): Ray's workers search it first, so that they
    run the same podsim as this process.  Empty for an installed podsim."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(podsim.__file__)))
    installed = {os.path.abspath(p) for p in site.getsitepackages() + [site.getusersitepackages()]}
    return [] if parent in installed else [parent]


def _one_line(e: BaseException) -> str:
    """The last non-empty line of an exception's message (Ray's span many lines)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _start(ray: ModuleType, address: str, addr: RayAddress | None) -> bool:
    """Start Ray (``address`` is ``"local"``) or connect to ``addr``; return whether this call
    did (and so must shut it down).  A Ray already initialised in this process is used as it is."""
    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    if address == LOCAL_RAY:
        from ray.job_config import JobConfig

        path = _podsim_path()  # workers import the podsim this process runs, not another install
        job = JobConfig(code_search_path=path) if path else None
        try:
            ray.init(address="local", num_cpus=os.cpu_count() or 1, job_config=job, **quiet)
        except Exception as e:  # noqa: BLE001 - ports, /dev/shm, a broken install: one line, no traceback
            raise InputError(f"could not start Ray on this machine: {_one_line(e)}", where=_WHERE) from None
        return True
    assert addr is not None
    if addr.client:
        if find_spec("grpc") is None:
            raise InputError(
                "a ray:// address (Ray Client) needs ray[client]: pip install 'ray[client]'; "
                "or give the GCS address host:6379 that `ray start --head` prints",
                where=_WHERE,
            )
    check_reachable(addr)
    probe_cluster(addr)
    try:
        ray.init(address=str(addr), **quiet)
    except Exception as e:  # noqa: BLE001 - it connected a moment ago: the cluster went away since
        raise InputError(f"cannot connect to the Ray cluster at {addr}: {_one_line(e)}", where=_WHERE) from None
    return True


def _unwrap(e: BaseException) -> BaseException:
    """A task's own error: a podsim error as itself (so the CLI prints its one line), a module
    the workers cannot import as an :class:`InputError`, anything else as Ray gave it."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, PodsimError):
        return cause
    text = str(e)
    missing = re.search(r"No module named '([^']+)'", text)
    if isinstance(cause, ImportError) or missing or "failed to import on the worker" in text:
        name = getattr(cause, "name", None) or (missing.group(1) if missing else "the task's module")
        return InputError(
            f"a Ray worker cannot import {name}: install the same podsim version "
            "(pip install podsim[ray]) on every machine of the cluster",
            where=_WHERE,
        )
    return e


def run_on_ray(fn: Callable[[T], R], args: Sequence[T], address: str) -> Iterator[tuple[int, R]]:
    """Run ``fn(arg)`` for each of ``args`` as Ray tasks of one CPU; yield ``(index into args,
    result)`` as tasks finish, each index once.

    ``fn`` must be a module-level function of an installed module (workers import it by name)
    and each ``arg`` picklable.  ``address``: ``"local"`` starts Ray on this machine with one
    worker per CPU and stops it at the end; otherwise the address of a running cluster
    (:func:`parse_address`), connected to and disconnected from at the end (the cluster keeps
    running).  A Ray already initialised in this process is used and left running.  At most
    :data:`IN_FLIGHT_PER_CPU` tasks per CPU of the cluster are submitted at a time.  When the
    caller stops early (``break``, Ctrl-C, an error), the tasks still queued or running are
    cancelled.

    Raises:
        InputError: ray is not installed; the address is malformed, unreachable or not a Ray
            cluster; a worker cannot import ``fn``'s module; or a task raised one.
        PodsimError: a task raised it (the task's own error, not Ray's wrapper).
    """
    if not args:
        return
    addr = None if address == LOCAL_RAY else parse_address(address)
    ray = require("ray", "--ray (running on a Ray cluster)", where=_WHERE)
    started = _start(ray, address, addr)
    pending: dict[Any, int] = {}
    try:
        remote = ray.remote(num_cpus=1)(fn)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        window = max(MIN_IN_FLIGHT, IN_FLIGHT_PER_CPU * cpus)
        todo = iter(range(len(args)))
        for i in todo:
            pending[remote.remote(args[i])] = i
            if len(pending) >= window:
                break
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            i = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as e:
                err = _unwrap(e)
                if err is e:
                    raise
                raise err from None
            nxt = next(todo, None)
            if nxt is not None:
                pending[remote.remote(args[nxt])] = nxt
            yield i, result
    finally:
        for ref in pending:
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001, S110 - already finished, or the cluster went away: nothing to stop
                pass
        if started:
            ray.shutdown()
