"""``--ray``: a search's or a sweep's tasks on a real Ray instance (issue #15, point 4), no
mocks.  One local instance started and stopped by :func:`run_tasks`, one cluster started with
``ray start --head`` as docs/ray.md says (shared by the tests of the address path), and one
with token authentication; never two at once (this machine has 2 CPUs).  Addresses that are
malformed, refused, silent or not a Ray cluster fail with an InputError naming ``--ray`` within
the bound.  Without ray the tests skip (``pip install ray``), or fail when
``PODSIM_REQUIRE_RAY=1``."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from podsim.errors import InputError
from podsim.sweep.executors import LOCAL_RAY, run_tasks
from podsim.sweep.ray_tasks import (
    CONNECT_TIMEOUT_S,
    PROBE_TIMEOUT_S,
    parse_address,
    probe_cluster,
)
from podsim.sweep.runs import evaluate
from podsim.units import parse_size

BOUND_S = 35  # an address that is wrong fails within this (5 s TCP + 25 s trial connection + slack)


def _need_ray() -> None:
    if find_spec("ray") is None:
        msg = "ray is not installed: pip install ray (or pip install -e '.[test]')"
        if os.environ.get("PODSIM_REQUIRE_RAY") == "1":
            pytest.fail(msg + "; PODSIM_REQUIRE_RAY=1 asks for these tests")
        pytest.skip(msg)


@pytest.fixture(autouse=True)
def _ray_installed() -> None:
    _need_ray()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _ray_is_running_here() -> bool:
    import ray

    return bool(ray.is_initialized())


def _start_head(env_extra: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, str]:
    """``ray start --head --block`` in its own session and temp folder (a short path: Ray's
    socket paths must fit 107 bytes); returns the process, its address and the folder."""
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="podsim-ray-", dir="/tmp")
    log = Path(tmp) / "head.log"
    ray_exe = Path(sys.executable).with_name("ray")
    cmd = [
        str(ray_exe) if ray_exe.exists() else "ray",
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={tmp}",
        "--block",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(env_extra)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    deadline = time.monotonic() + 90
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop_head(proc, tmp)
            pytest.fail(f"ray start --head did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc, f"127.0.0.1:{port}", tmp


def _stop_head(proc: subprocess.Popen[bytes], tmp: str) -> None:
    """Stop the head we started (its --block process stops its own Ray processes), by id."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the session start_new_session gave it
            proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def _llm_points() -> list[tuple[str, dict[str, object], dict[str, object], None]]:
    """Four real `podsim llm` points of a sweep (about 0.05 s each)."""
    return [
        (
            "llm",
            {"model": "llama3-8b", "gpu": "h100", "gpus": 8, "tp": tp, "global-batch": 16, "seq-len": 2048}
            | {"distributed-optimizer": True},
            {},
            None,
        )
        for tp in (1, 2, 4, 8)
    ]


def _from_tests_only(x: int) -> int:
    """A task in a module Ray's workers cannot import (tests/ is not installed)."""
    return x


# -- a local instance: started for the run, stopped after it (first, before any cluster) --


def test_local_instance_gives_the_in_process_results() -> None:
    points = _llm_points()
    t0 = time.perf_counter()
    got = list(run_tasks(evaluate, points, ray_address=LOCAL_RAY))
    elapsed = time.perf_counter() - t0
    print(f"local Ray: start, {len(points)} tasks and shutdown in {elapsed:.1f} s")
    assert sorted(i for i, _ in got) == list(range(len(points)))  # each index once
    assert {i: r for i, r in got} == {i: evaluate(p) for i, p in enumerate(points)}
    assert all("tokens_per_s" in r for _, r in got)
    assert not _ray_is_running_here()  # stopped: it was ours


# -- a cluster with token authentication (its own head, stopped at the end of the test) --


def test_a_token_cluster_says_how_to_give_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    if find_spec("ray._private.authentication") is None:
        pytest.skip("this ray has no token authentication")
    token = secrets.token_hex(32)
    proc, address, tmp = _start_head({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    try:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", os.path.join(tmp, "no-token-here"))
        t0 = time.perf_counter()
        with pytest.raises(InputError, match="token authentication. Set RAY_AUTH_MODE=token") as e:
            probe_cluster(parse_address(address))
        assert e.value.where == "--ray" and time.perf_counter() - t0 < BOUND_S
        monkeypatch.setenv("RAY_AUTH_MODE", "token")  # what docs/ray.md says to do
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
        probe_cluster(parse_address(address))
    finally:
        _stop_head(proc, tmp)


# -- a cluster started with `ray start --head`, shared by the tests below --


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    _need_ray()
    t0 = time.perf_counter()
    proc, address, tmp = _start_head({"RAY_AUTH_MODE": "disabled"})
    print(f"ray start --head: {time.perf_counter() - t0:.1f} s")
    try:
        yield address
    finally:
        _stop_head(proc, tmp)


def test_cluster_results_arrive_as_they_finish_each_index_once(cluster: str) -> None:
    # more tasks than the in-flight window (64), so the window refills as results arrive
    sizes = [f"{i} KiB" for i in range(1, 301)] + ["1.5 GiB", "2 GB"]
    got = list(run_tasks(parse_size, sizes, ray_address=cluster))
    assert sorted(i for i, _ in got) == list(range(len(sizes)))
    assert dict(got) == {i: parse_size(s) for i, s in enumerate(sizes)}
    points = _llm_points()
    assert dict(run_tasks(evaluate, points, ray_address=cluster)) == {i: evaluate(p) for i, p in enumerate(points)}
    assert not _ray_is_running_here()  # disconnected; the cluster runs on (the next tests use it)


def test_podsim_search_on_the_cluster_ranks_as_local_workers_do(
    cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole CLI path: `podsim search --ray ADDRESS` (screen and simulation passes on Ray)
    gives the table that local worker processes give."""
    import json

    from podsim.cli import main

    argv = [
        "search",
        "--model",
        "llama3-8b",
        "--gpu",
        "h100",
        "--gpus",
        "16",
        "--global-batch",
        "32",
        "--seq-len",
        "2048",
        "--tp-values",
        "1,2,8",
        "--pp-values",
        "1,2",
        "--micro-batch-values",
        "1,2",
        "--simulate-top",
        "4",
        "--top",
        "4",
    ]
    assert main(argv + ["--ray", cluster, "--json", str(tmp_path / "ray.json")]) == 0
    assert main(argv + ["--workers", "2", "--json", str(tmp_path / "local.json")]) == 0
    capsys.readouterr()
    on_ray, local = (json.loads((tmp_path / f).read_text()) for f in ("ray.json", "local.json"))
    assert on_ray["evaluated"] == local["evaluated"] > 4 and on_ray["simulated"] == 4
    assert on_ray["best"] == local["best"]
    assert not _ray_is_running_here()


def test_a_task_input_error_surfaces_as_itself(cluster: str) -> None:
    sizes = [f"{i} MiB" for i in range(1, 41)] + ["two bytes"]
    with pytest.raises(InputError, match="cannot read size 'two bytes'") as e:
        list(run_tasks(parse_size, sizes, ray_address=cluster))
    assert type(e.value) is InputError  # not Ray's RayTaskError
    assert not _ray_is_running_here()


def test_stopping_early_cancels_the_rest(cluster: str) -> None:
    points = _llm_points() * 50  # 200 tasks, about 5 s of work on 2 CPUs
    gen = run_tasks(evaluate, points, ray_address=cluster)
    assert isinstance(gen, Generator)
    i, first = next(gen)
    assert 0 <= i < len(points) and "tokens_per_s" in first
    t0 = time.perf_counter()
    gen.close()  # the caller breaks out: the rest is cancelled, this process disconnects
    assert time.perf_counter() - t0 < 5
    assert not _ray_is_running_here()
    assert dict(run_tasks(parse_size, ["2 KiB"], ray_address=cluster)) == {0: 2048}  # the cluster is free


def test_a_worker_that_cannot_import_the_task_says_so(cluster: str) -> None:
    with pytest.raises(InputError, match=r"--ray: a Ray worker cannot import .*every machine") as e:
        list(run_tasks(_from_tests_only, [1, 2], ray_address=cluster))
    assert "test_ray" in str(e.value)


# -- addresses that are wrong: no cluster needed --


@pytest.mark.parametrize(
    "address, expected",
    [
        ("nohost", "no port"),
        ("host:notaport", "'notaport' is not a number"),
        ("host:0", "not a number in 1-65535"),
        ("host:70000", "not a number in 1-65535"),
        ("http://host:6379", "not a Ray cluster address"),
        (":6379", "no host"),
        ("::1:6379", "IPv6 host in brackets"),
    ],
)
def test_a_malformed_address_says_what_is_expected(address: str, expected: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=expected) as e:
        list(run_tasks(parse_size, ["1 KiB"], ray_address=address))
    assert e.value.where == "--ray" and "host:port" in str(e.value)
    assert time.perf_counter() - t0 < 1


def test_addresses_parse() -> None:
    assert str(parse_address("10.0.0.1:6379")) == "10.0.0.1:6379"
    assert parse_address("ray://head:10001").client and parse_address("ray://head:10001").port == 10001
    assert parse_address("[::1]:6379").host == "::1" and str(parse_address("[::1]:6379")) == "[::1]:6379"


@pytest.mark.parametrize("address", ["127.0.0.1:1", "203.0.113.1:6379", "no-such-host.invalid:6379"])
def test_an_unreachable_address_fails_fast(address: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="Ray cluster at") as e:
        list(run_tasks(parse_size, ["1 KiB"], ray_address=address))
    elapsed = time.perf_counter() - t0
    print(f"{address}: {elapsed:.1f} s: {e.value}")
    assert e.value.where == "--ray" and str(e.value).startswith("--ray: ")
    assert elapsed < BOUND_S and CONNECT_TIMEOUT_S + PROBE_TIMEOUT_S <= 30
    assert "Traceback" not in str(e.value) and "\n" not in str(e.value)
    assert not _ray_is_running_here()


def test_a_silent_port_is_given_up_within_the_bound() -> None:
    """A port that accepts and never answers (Ray's own attempts wait for ever there)."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))  # every interface: Ray dials 127.0.0.1 as this machine's address
        s.listen(8)
        addr = parse_address(f"127.0.0.1:{s.getsockname()[1]}")
        t0 = time.perf_counter()
        with pytest.raises(InputError, match="no answer as a Ray cluster within 2 s") as e:
            probe_cluster(addr, timeout_s=2)
        assert e.value.where == "--ray" and time.perf_counter() - t0 < 6
