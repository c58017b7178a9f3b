"""The GPUs the published runs and serving users run on beyond the SXM parts: H100 PCIe and NVL,
L40S, RTX PRO 6000 Blackwell, GeForce RTX 4090, each with its default platform.

Expected values are hand-derived from the vendor documents cited in gpus.yaml (the dense tensor
figure is half the datasheet's "with sparsity" one; GeForce's BF16 rate is its FP32-accumulate
one), never read back from the code.
"""

from __future__ import annotations

import json

import pytest

from podsim.cli import main
from podsim.hardware.cluster import build_fabric, load_cluster
from podsim.hardware.gpu import get_gpu
from podsim.llm.training import default_cluster
from podsim.network.fabric import LinkTier


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
