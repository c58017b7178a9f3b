"""The GPUs the published runs and serving users run on beyond the SXM parts: H100 PCIe and NVL,
the power-limited 96 GB HBM2e H100 of torchtitan's benchmarks, L40S, RTX PRO 6000 Blackwell, GeForce
RTX 4090, each with its default platform.

Expected values are hand-derived from the vendor documents cited in gpus.yaml (the dense tensor
figure is half the datasheet's "with sparsity" one; GeForce's BF16 rate is its FP32-accumulate
one), never read back from the code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.compute.model import ComputeModel
from podsim.hardware.cluster import build_fabric, load_cluster
from podsim.hardware.gpu import get_gpu
from podsim.llm.stack import Stack
from podsim.llm.training import default_cluster
from podsim.network.fabric import LinkTier
from podsim.validation import shipped_rows


@pytest.mark.parametrize(
    "alias, bf16, fp8, memory_gb, bandwidth, tdp",
    [
        ("h100-pcie", 1513 / 2, 3026 / 2, 80, 2039, 350),  # whitepaper Table 3: 756/1513 sparse
        ("h100-nvl", 1671 / 2, 3341 / 2, 94, 3938, 400),  # datasheet NVL column, with sparsity
        ("l40s", 362.05, 733, 48, 864, 350),  # datasheet prints dense | sparse: 362.05 | 733*, 733 | 1,466*
        ("rtx pro 6000", 4000 / 8, 4000 / 4, 96, 1792, 600),  # 4000 sparse FP4 TOPS: /2 dense, /2 per step
        ("4090", 165.2, 330.3, 24, 1008, 450),  # Ada whitepaper, FP32 accumulate
    ],
)
def test_datasheet_figures(alias: str, bf16: float, fp8: float, memory_gb: float, bandwidth: float, tdp: float) -> None:
    g = get_gpu(alias)
    assert g.peak_tflops["bf16"] == pytest.approx(bf16, rel=2e-3)
    assert g.peak_tflops["fp8"] == pytest.approx(fp8, rel=2e-3)
    # the marketing GB (10^9 B) within 7% of what podsim holds in GiB (the driver's view)
    assert g.memory_gib * 2**30 / 1e9 == pytest.approx(memory_gb, rel=0.07)
    assert g.hbm_bandwidth == pytest.approx(bandwidth)
    assert g.tdp_w == tdp


@pytest.mark.parametrize(
    "gpu, preset, link_gbps, per_switch, nic",
    [
        ("h100-pcie", "pcie-h100", 64.0, 2, None),  # PCIe Gen5 x16: 128 GB/s both ways
        ("h100-nvl", "pcie-h100-nvl", 64.0, 2, None),
        ("l40s", "aws-g6e", 32.0, 2, 400 / 8 / 8),  # PCIe Gen4; 400 Gb/s an instance over 8 GPUs, in GB/s
        ("rtx-pro-6000", "aws-g7e", 64.0, 2, 1600 / 8 / 8),
        ("rtx-4090", "pcie-rtx4090", 32.0, 1, None),  # no peer-to-peer: each GPU alone under the host
    ],
)
def test_platforms(gpu: str, preset: str, link_gbps: float, per_switch: int, nic: float | None) -> None:
    c = default_cluster(get_gpu(gpu), None, None, None)
    assert c.name == preset and get_gpu(c.gpu).key == gpu
    assert c.intra["kind"] == "pcie" and c.intra["bandwidth"] == pytest.approx(link_gbps)
    assert c.intra["gpus_per_switch"] == per_switch
    fab = build_fabric(load_cluster(preset), 8)
    assert (fab.link_tier == LinkTier.NVLINK).sum() == 0  # no NVLink link in any of them
    if nic is None:
        assert c.inter["kind"] == "none"
    else:
        assert c.inter["nic_bandwidth"] == pytest.approx(nic)


def test_a_one_server_preset_refuses_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collective", "all_reduce", "--cluster", "pcie-rtx4090", "--gpus", "16"]) == 2
    assert "no inter_node fabric" in capsys.readouterr().err


def test_an_8_gpu_pcie_all_reduce_is_bounded_by_pcie(capsys: pytest.CaptureFixture[str]) -> None:
    # a ring's bus bandwidth cannot beat the 32 GB/s per direction each L40S has on PCIe Gen4
    assert main(["collective", "all_reduce", "--cluster", "aws-g6e", "--gpus", "8", "-b", "256M", "-e", "256M"]) == 0
    out = capsys.readouterr().out
    busbw = float(next(ln for ln in out.splitlines() if "Avg bus bandwidth" in ln).split(":")[1].split()[0])
    assert 16 < busbw <= 32


def test_an_unfitted_gpu_says_what_its_times_rest_on(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The L40S has no compute fit of its own: podsim infer says it runs on the A100's, in the
    summary and the JSON; the H100, fitted to its own kernels, says nothing of the kind."""
    out = tmp_path / "i.json"
    argv = ["infer", "--model", "llama2-7b", "--batch", "1", "--prompt-tokens", "128", "--output-tokens", "4"]
    assert main([*argv, "--gpu", "l40s", "--json", str(out)]) == 0
    assert "calibration derived: a100-80gb's fit" in capsys.readouterr().out
    cal = json.loads(out.read_text())["calibration"]
    assert cal["status"] == "derived" and cal["derived_from"] == "a100-80gb"
    assert main([*argv, "--gpu", "h100"]) == 0
    assert "calibration" not in capsys.readouterr().out
    serve = ["serve-llm", "--model", "llama2-7b", "--gpu", "l40s", "--workload", "poisson:2", "--requests", "10"]
    assert main([*serve, "--json", str(out)]) == 0
    assert "calibration derived: a100-80gb's fit" in capsys.readouterr().out
    assert json.loads(out.read_text())["calibration"]["derived_from"] == "a100-80gb"


# -- the H100 of torchtitan's published H100 benchmarks (Meta's Grand Teton hosts) ---------------
# NVIDIA H100 datasheet, dense = half the "with sparsity" figures: SXM (700 W) and NVL (400 W)
SXM_BF16, SXM_FP8 = 1979 / 2, 3958 / 2
NVL_BF16, NVL_FP8 = 1671 / 2, 3341 / 2
#: how far 500 W lies from the NVL's 400 W towards the SXM's 700 W
AT_500W = (500 - 400) / (700 - 400)
#: torchtitan's benchmark files whose "Hardware" section names that GPU
GRAND_TETON_FILES = ("llama3_h100_202412_torchtitan.md", "asyncTP_llama3_h100_2025-06_torchtitan.md")


def test_grand_teton_h100_figures() -> None:
    """torchtitan's "Hardware" section: '96GB HBM2e with 2.4 TB/sec peak memory bandwidth', 'the
    default 500W power limit'; its footnote: the peak 'is between SXM and NVL'."""
    g = get_gpu("h100-96gb-500w")
    assert get_gpu("h100-sxm5-96gb-500w").key == g.key
    assert g.hbm_bandwidth == pytest.approx(2400)
    assert g.memory_gib * 2**30 / 1e9 == pytest.approx(96, rel=0.07)
    assert g.memory_gib > 84.9  # the largest peak memory torchtitan logged on it (Table 6, in GiB)
    assert g.tdp_w == 500 and g.sm_count == 132 and g.architecture == "hopper"
    assert g.nvlink_bandwidth == pytest.approx(900 / 2) and g.nvlink_generation == 4
    for dtype, nvl, sxm in (("bf16", NVL_BF16, SXM_BF16), ("fp8", NVL_FP8, SXM_FP8)):
        assert nvl < g.peak_tflops[dtype] < sxm  # inside the authors' bracket
        # NVIDIA's ratings of the two 132-SM boards taken linearly in board power at 500 W
        assert g.peak_tflops[dtype] == pytest.approx(nvl + AT_500W * (sxm - nvl), rel=2e-3)
    # the H100 SXM's compute fit, on these peaks
    assert g.efficiency == get_gpu("h100-80gb").efficiency


def test_grand_teton_h100_platform() -> None:
    # 8 GPUs a host fully connected by NVLink, 400 Gb/s RDMA per GPU: the DGX H100 fabric
    c = default_cluster(get_gpu("h100-96gb-500w"), None, None, None)
    assert c.name == "dgx-h100" and c.gpus_per_node == 8
    assert c.intra["kind"] == "nvswitch" and c.intra["bandwidth"] == pytest.approx(900 / 2)
    assert c.inter["nic_bandwidth"] == pytest.approx(400 / 8)  # Gb/s -> GB/s


@pytest.mark.parametrize("dtype, nvl, sxm", [("bf16", NVL_BF16, SXM_BF16), ("fp8", NVL_FP8, SXM_FP8)])
def test_the_power_limited_h100_is_no_faster_on_a_compute_bound_gemm(dtype: str, nvl: float, sxm: float) -> None:
    capped = ComputeModel.for_gpu(get_gpu("h100-96gb-500w"), dtype)
    full = ComputeModel.for_gpu(get_gpu("h100-80gb"), dtype)
    m = n = k = 8192  # compute-bound on both: 2 x 8192^3 FLOP over 3 x 8192^2 operands
    assert capped.gemm_ns(m, n, k) > full.gemm_ns(m, n, k)
    # the same fit on both: the time goes as the inverse of the tensor peak
    ratio = (capped.gemm_ns(m, n, k) - capped.launch_ns) / (full.gemm_ns(m, n, k) - full.launch_ns)
    assert ratio == pytest.approx(sxm / (nvl + AT_500W * (sxm - nvl)), rel=3e-3)


def test_the_hbm2e_h100_is_slower_on_memory_bound_kernels() -> None:
    capped = ComputeModel.for_gpu(get_gpu("h100-96gb-500w"))
    full = ComputeModel.for_gpu(get_gpu("h100-80gb"))
    nbytes = 4 * 2**30
    ratio = (capped.memory_ns(nbytes) - capped.launch_ns) / (full.memory_ns(nbytes) - full.launch_ns)
    assert ratio == pytest.approx(3350 / 2400)  # 3.35 TB/s HBM3 (SXM datasheet) over 2.4 TB/s HBM2e


def test_the_grand_teton_rows_run_on_it() -> None:
    """Every shipped row from a torchtitan file whose "Hardware" section names the Grand Teton
    H100 runs on h100-96gb-500w, and no other row does."""
    rows = shipped_rows()
    gt = {r["row_id"] for r in rows if any(f in r["source"] for f in GRAND_TETON_FILES)}
    assert len(gt) == 30  # 2 fitted (Table 1) + 16 of the 2024-12 file + 12 of the 2025-06 file
    assert {r["row_id"] for r in rows if r["gpu"] == "h100-96gb-500w"} == gt


def test_a_whole_step_on_it_is_no_faster(tmp_path: Path) -> None:
    argv = ["llm", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16", "--seq-len", "8192", "--fsdp"]
    t = {}
    for gpu in ("h100-80gb", "h100-96gb-500w"):
        out = tmp_path / f"{gpu}.json"
        assert main([*argv, "--gpu", gpu, "--json", str(out)]) == 0
        t[gpu] = json.loads(out.read_text())["iteration_time_s"]
    assert t["h100-96gb-500w"] > t["h100-80gb"]


def test_it_takes_the_h100s_in_step_parameters() -> None:
    assert Stack.for_gpu("h100-96gb-500w") == Stack.for_gpu("h100-80gb")
