"""The shipped A100 presets against real nccl-tests measurements (conformance).

Targets from the issue: busbw within 10% on average for messages >= 1 MiB, one preset for
every GPU count, and the right shape below 1 MiB (latency-bound: time nearly flat).
"""

from __future__ import annotations

import numpy as np
import pytest

import podsim
from podsim.formats.nccl_tests import read_nccl_tests_log, read_vtrain_lut

pytestmark = pytest.mark.conformance


def busbw_errors(preset: str, table, backend: str = "analytical") -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in table.rows if r.bytes >= 1024]
    sizes = np.array([r.bytes for r in rows])
    res = podsim.collective(
        "all_reduce", preset, table.gpus, min_bytes=int(sizes[0]), max_bytes=int(sizes[-1]), factor=2, backend=backend
    )
    pred = {r.bytes: r.time_us for r in res.rows}
    meas = np.array([r.time_us for r in rows])
    t = np.array([pred[s] for s in sizes])
    return sizes, np.abs(meas / t - 1)


def test_azure_preset_matches_nccl_tests(refdata) -> None:
    logs = sorted((refdata / "nccl" / "azure-nd-a100-v4").glob("allreduce_*gpus.log"))
    assert len(logs) == 6, "expected the six Azure ND A100 v4 logs"
    big_errs = []
    for path in logs:
        table = read_nccl_tests_log(path)
        if table.gpus == 1:
            continue
        sizes, err = busbw_errors("azure-nd-a100-v4", table)
        big = sizes >= (1 << 20)
        assert err[big].mean() < 0.15, f"{table.gpus} GPUs: mean busbw error {err[big].mean():.1%}"
        big_errs.append(err[big])
    assert np.concatenate(big_errs).mean() < 0.10


def test_dgx_a100_preset_matches_vtrain(refdata) -> None:
    errs = []
    for path in sorted((refdata / "nccl" / "vtrain-a100").glob("AR_GPU*_LUT")):
        table = read_vtrain_lut(path)
        table.rows = [r for r in table.rows if (r.bytes >> 20) & ((r.bytes >> 20) - 1) == 0]  # powers of 2
        _sizes, err = busbw_errors("dgx-a100-superpod", table)
        errs.append(err)
    assert np.concatenate(errs).mean() < 0.10


def test_small_messages_are_latency_bound(refdata) -> None:
    # measured: 16 GPUs take 34.66 us at 1 KiB and 41.21 us at 8 KiB; the model must also be
    # nearly flat there (within 30% of the measurement at both ends)
    table = read_nccl_tests_log(refdata / "nccl" / "azure-nd-a100-v4" / "allreduce_16gpus.log")
    res = podsim.collective("all_reduce", "azure-nd-a100-v4", 16, min_bytes=1024, max_bytes=8192)
    assert res.rows[-1].time_us / res.rows[0].time_us < 1.5
    for r in (res.rows[0], res.rows[-1]):
        m = next(x for x in table.rows if x.bytes == r.bytes)
        assert abs(r.time_us / m.time_us - 1) < 0.30


def test_flow_backend_agrees_on_isolated_collectives(refdata) -> None:
    # an isolated, symmetric collective: max-min flows and the busiest-link closed form agree
    a = podsim.collective("all_reduce", "azure-nd-a100-v4", 16, min_bytes="1M", max_bytes="1G", factor=32)
    f = podsim.collective(
        "all_reduce", "azure-nd-a100-v4", 16, min_bytes="1M", max_bytes="1G", factor=32, backend="flow"
    )
    for x, y in zip(a.rows, f.rows):
        assert y.time_us == pytest.approx(x.time_us, rel=0.01)


def published(refdata, row_id: str) -> float:
    import csv

    with open(refdata / "calibration" / "published_measurements.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["row_id"] == row_id:
                return float(row["value"])
    raise KeyError(row_id)


def test_dgx_h100_preset_matches_published_busbw(refdata) -> None:
    # nccl-tests maintainers: ~370 GB/s ring and ~480 GB/s NVLS busbw on 8 H100s at large sizes
    ring = podsim.collective("all_reduce", "dgx-h100", 8, min_bytes="4G", max_bytes="4G", algorithm="ring")
    nvls = podsim.collective("all_reduce", "dgx-h100", 8, min_bytes="4G", max_bytes="4G")
    assert nvls.rows[0].algorithm == "nvls"
    assert ring.rows[0].busbw_gbps == pytest.approx(published(refdata, "nccl_h100_ring_eff"), rel=0.05)
    assert nvls.rows[0].busbw_gbps == pytest.approx(published(refdata, "nccl_h100_nvls_busbw"), rel=0.05)
    # A100 NVLink: ~230 GB/s at large sizes on 8 GPUs (maintainer statement)
    a100 = podsim.collective("all_reduce", "dgx-a100-superpod", 8, min_bytes="4G", max_bytes="4G")
    assert a100.rows[0].busbw_gbps == pytest.approx(published(refdata, "nccl_a100_nvlink_busbw"), rel=0.05)
