"""Hardware of 2026 (issue #12, item 4): GPU data with sources, and the cluster presets.

Expected values are hand-derived from the vendor documents cited in gpus.yaml (the dense figure
is half the datasheet's "with sparsity" one; per-GPU figures are rack or board totals divided by
the GPU count), never read back from the code.
"""

from __future__ import annotations

import numpy as np
import pytest

from podsim.errors import InputError
from podsim.hardware.cluster import build_fabric, load_cluster, preset_names
from podsim.hardware.gpu import GpuSpec, get_gpu, gpu_specs
from podsim.network.fabric import LinkTier

SPECS = gpu_specs()


def nic_cables(fab) -> int:
    return int(np.sum(fab.link_tier == LinkTier.NIC)) // 2


@pytest.mark.parametrize("key", sorted(SPECS))
def test_every_gpu_is_sourced_and_sane(key: str) -> None:
    g = SPECS[key]
    assert g.sources and all(isinstance(s, str) and s.strip() for s in g.sources)
    assert g.peak_tflops and all(v > 0 for v in g.peak_tflops.values())
    assert g.memory_gib > 0 and g.hbm_bandwidth > 0 and g.nvlink_bandwidth > 0
    p = g.peak_tflops
    if "fp8" in p:
        assert p["fp8"] >= p["bf16"]
    if "fp4" in p:
        assert p["fp4"] >= p["fp8"]
    assert g.vendor in ("nvidia", "amd") and g.architecture


def test_the_2026_gpus_are_there() -> None:
    assert {"h100-80gb", "h200", "b200", "b300", "gb200", "gb300", "mi300x"} <= set(SPECS)


def test_hopper_figures() -> None:
    h100, h200 = get_gpu("h100"), get_gpu("h200")
    # H100 SXM datasheet: BF16 1,979 TFLOP/s with sparsity -> 989.4 dense; FP8 3,958 -> 1,978.9
    assert h100.peak_tflops["bf16"] == pytest.approx(989.4)
    assert h100.peak_tflops["fp8"] == pytest.approx(1978.9)
    assert h100.peak("bf16") == pytest.approx(989.4e3)  # FLOP per ns
    # 900 GB/s NVLink4 "bidirectional" = 450 GB/s per direction, generation 4
    assert h100.nvlink_bandwidth == pytest.approx(450.0) and h100.nvlink_generation == 4
    # H200 datasheet: 141 GB HBM3e at 4.8 TB/s; nvidia-smi 143,771 MiB = 140.4 GiB; H100 compute
    assert h200.hbm_bandwidth == pytest.approx(4800.0)
    assert h200.memory_gib == pytest.approx(143771 / 1024, abs=0.05)
    assert h200.peak_tflops["bf16"] == h100.peak_tflops["bf16"]
    assert h200.memory_bytes / 1e9 == pytest.approx(150.75, abs=0.1)  # 140.4 GiB in 10^9 B


def test_blackwell_figures() -> None:
    b200, gb200 = get_gpu("b200"), get_gpu("gb200")
    # HGX B200 (8 GPUs): FP8 72 PF sparse -> 72/8/2 = 4.5 PF dense; FP4 72 PF dense -> 9 PF
    assert b200.peak_tflops["fp8"] == pytest.approx(4500.0)
    assert b200.peak_tflops["bf16"] == pytest.approx(2250.0)  # 36 PF sparse / 8 / 2
    assert b200.peak_tflops["fp4"] == pytest.approx(9000.0)
    assert b200.memory_gib == pytest.approx(183359 / 1024, abs=0.05)
    # GB200 NVL72 (72 GPUs): BF16 360 PF sparse -> 2.5 PF dense; 576 TB/s HBM -> 8 TB/s
    assert gb200.peak_tflops["bf16"] == pytest.approx(360e3 / 72 / 2)
    assert gb200.peak_tflops["fp4"] == pytest.approx(1440e3 / 72 / 2)
    assert gb200.hbm_bandwidth == pytest.approx(576e3 / 72)
    assert gb200.tdp_w == 1200 and gb200.nvlink_generation == 5
    # 1.8 TB/s NVLink 5 per GPU = 900 GB/s per direction
    for g in (b200, gb200, get_gpu("b300"), get_gpu("gb300")):
        assert g.nvlink_bandwidth == pytest.approx(900.0) and g.nvlink_generation == 5


def test_blackwell_ultra_figures() -> None:
    b300, gb300 = get_gpu("b300"), get_gpu("gb300")
    # GB300 NVL72: FP4 1,080 PF dense / 72 = 15 PF; FP8 720 PF sparse / 72 / 2 = 5 PF
    assert gb300.peak_tflops["fp4"] == pytest.approx(15000.0)
    assert gb300.peak_tflops["fp8"] == pytest.approx(5000.0)
    assert gb300.tdp_w == 1400 and gb300.architecture == "blackwell-ultra"
    # HGX B300 (8 GPUs): FP4 108 PF dense / 8 = 13.5 PF; FP8 72 PF sparse / 8 / 2 = 4.5 PF
    assert b300.peak_tflops["fp4"] == pytest.approx(13500.0)
    assert b300.peak_tflops["fp8"] == pytest.approx(4500.0)
    # 288 GB marketed; the driver reports less (275,040 and 284,208 MiB)
    assert b300.memory_gib == pytest.approx(275040 / 1024, abs=0.05)
    assert gb300.memory_gib == pytest.approx(284208 / 1024, abs=0.05)


def test_mi300x_figures() -> None:
    mi = get_gpu("mi300x")
    assert mi.vendor == "amd" and mi.architecture == "cdna3"
    assert mi.peak_tflops["bf16"] == pytest.approx(1307.4)
    assert mi.peak_tflops["fp8"] == pytest.approx(2614.9)
    assert mi.memory_gib == 192 and mi.hbm_bandwidth == pytest.approx(5300.0)
    # 896 GB/s aggregate Infinity Fabric (both directions, 7 links) = 448 GB/s per direction
    assert mi.nvlink_bandwidth == pytest.approx(448.0) and mi.nvlink_generation is None
    assert mi.sm_count == 304


def test_fp4_falls_back_to_fp8_then_bf16() -> None:
    # GPUs with fp4 use it; Hopper falls back to its fp8; Ampere (no fp8) to bf16
    assert get_gpu("gb300").peak("fp4") == pytest.approx(15000e3)
    assert get_gpu("h100").peak("fp4") == pytest.approx(1978.9e3)
    assert get_gpu("a100").peak("fp4") == pytest.approx(312e3)
    assert get_gpu("a100").peak("fp8") == pytest.approx(312e3)
    with pytest.raises(InputError, match="no fp64 peak"):
        get_gpu("h100").peak("fp64")


def test_aliases() -> None:
    assert get_gpu("GB200").key == "gb200"
    assert get_gpu("B300").key == "b300"
    assert get_gpu("MI300X").key == "mi300x"
    assert get_gpu("AMD Instinct MI300X").key == "mi300x"
    assert get_gpu("H200-SXM-141GB").key == "h200"
    assert get_gpu("gb300-nvl72").key == "gb300"


def test_positional_constructor_still_works() -> None:
    g = GpuSpec("x", "X", 10.0, 100.0, 50.0, {"bf16": 100.0}, {})
    assert g.peak("fp4") == pytest.approx(100e3) and g.sources == () and g.nvlink_generation is None


def test_existing_efficiency_untouched() -> None:
    h = get_gpu("h100-80gb").efficiency
    assert h["gemm_max"] == pytest.approx(0.793) and h["fp8_gemm_knee"] == 151
    assert get_gpu("a100-80gb").efficiency["gemm_max"] == pytest.approx(0.82)
    # the H200 shares it as is; the Blackwells and the MI300X scale its ceilings (test_derive_efficiency.py)
    assert get_gpu("h200").efficiency == h
    for k in ("b200", "gb200", "gb300", "b300", "mi300x"):
        e = get_gpu(k).efficiency
        assert (e["gemm_knee"], e["flash_knee"], e["launch_ns"]) == (h["gemm_knee"], h["flash_knee"], h["launch_ns"])
        assert e["gemm_max"] != h["gemm_max"]


GOOD = """\
mygpu:
  name: My GPU
  memory_gib: 16
  hbm_bandwidth: 1 TB/s
  nvlink_bandwidth: 100 GB/s
  peak_tflops: {bf16: 100, fp8: 200}
  sources: ["made up for a test"]
"""


def test_user_gpu_file(tmp_path) -> None:
    p = tmp_path / "gpus.yaml"
    p.write_text(GOOD)
    g = gpu_specs(p)["mygpu"]
    assert g.hbm_bandwidth == pytest.approx(1000.0) and g.peak("fp4") == pytest.approx(200e3)


def test_unknown_key_is_an_input_error_naming_it(tmp_path) -> None:
    p = tmp_path / "gpus.yaml"
    p.write_text(GOOD + "  tdp_watts: 700\n")
    with pytest.raises(InputError) as e:
        gpu_specs(p)
    assert "tdp_watts" in str(e.value) and "tdp_w" in str(e.value)  # names the key and a hint
    assert "mygpu" in str(e.value) and str(p) in str(e.value)


def test_bad_values_are_input_errors(tmp_path) -> None:
    p = tmp_path / "gpus.yaml"
    p.write_text(GOOD.replace("fp8: 200", "fp9: 200"))
    with pytest.raises(InputError, match="fp9"):
        gpu_specs(p)
    p.write_text(GOOD.replace("memory_gib: 16", "memory_gib: -1"))
    with pytest.raises(InputError, match="memory_gib"):
        gpu_specs(p)


# ---- presets -------------------------------------------------------------------------------


def test_new_presets_exist() -> None:
    assert {"dgx-b200", "dgx-h200", "gb200-nvl72", "gb300-nvl72"} <= set(preset_names())


@pytest.mark.parametrize(
    "name,gpu,gpn,nvlink,nic",
    [
        ("dgx-b200", "b200", 8, 900.0, 50.0),  # NVLink 5 900 GB/s; 400 Gb/s = 50 GB/s
        ("dgx-h200", "h200", 8, 450.0, 50.0),  # NVLink 4 450 GB/s; 400 Gb/s
        ("gb200-nvl72", "gb200", 72, 900.0, 50.0),  # ConnectX-7 400 Gb/s per GPU
        ("gb300-nvl72", "gb300", 72, 900.0, 100.0),  # ConnectX-8 800 Gb/s = 100 GB/s per GPU
        ("dgx-b300", "b300", 8, 900.0, 100.0),  # ConnectX-8 800 Gb/s per GPU
    ],
)
def test_preset_figures(name, gpu, gpn, nvlink, nic) -> None:
    c = load_cluster(name)
    assert get_gpu(c.gpu).key == gpu
    assert c.gpus_per_node == gpn
    assert c.intra["bandwidth"] == pytest.approx(nvlink)
    assert c.inter["nic_bandwidth"] == pytest.approx(nic)
    assert "nvls" in c.nccl.algorithms


@pytest.mark.parametrize("name", ["gb200-nvl72", "gb300-nvl72"])
def test_nvl72_domains(name) -> None:
    c = load_cluster(name)
    one = build_fabric(c, 72)  # one NVLink domain: no NIC in use
    assert one.num_servers == 1 and nic_cables(one) == 0 and one.gpus_per_node == 72
    two = build_fabric(c, 144)  # two racks: every GPU's NIC is cabled
    assert two.num_servers == 2 and nic_cables(two) == 144 and two.gpus_per_node == 72


def test_mi300x_platform_is_a_mesh_without_nvls() -> None:
    c = load_cluster("mi300x-platform")
    assert get_gpu(c.gpu).key == "mi300x" and c.gpus_per_node == 8
    assert c.intra["kind"] == "nvlink_mesh" and c.intra["link_bandwidth"] == pytest.approx(64.0)
    assert c.inter["nic_bandwidth"] == pytest.approx(50.0) and "nvls" not in c.nccl.algorithms
    fab = build_fabric(c, 8)
    assert fab.num_servers == 1 and nic_cables(fab) == 0


def test_every_gpu_has_its_own_platform() -> None:
    from podsim.llm.training import default_cluster

    for gpu, preset in [("b300", "dgx-b300"), ("mi300x", "mi300x-platform"), ("h200", "dgx-h200")]:
        assert default_cluster(get_gpu(gpu), None, None, None).name == preset


@pytest.mark.parametrize("name", ["dgx-b200", "dgx-h200", "dgx-b300"])
def test_dgx_fabrics(name) -> None:
    fab = build_fabric(load_cluster(name), 144)  # 144 / 8 = 18 servers, one NIC per GPU
    assert fab.num_servers == 18 and fab.gpus_per_node == 8 and nic_cables(fab) == 144


# ---- the GPU registry: aliases and default presets are data (gpus.yaml) --------------------

#: every alias users script against (the names podsim has taken since issue #12)
OLD_ALIASES = {
    "a100": "a100-80gb",
    "h100": "h100-80gb",
    "v100": "v100-32gb",
    "a100-sxm4-80gb": "a100-80gb",
    "a100-sxm4-40gb": "a100-40gb",
    "h100-sxm5-80gb": "h100-80gb",
    "h100-sxm": "h100-80gb",
    "b200 (hgx)": "b200",
    "b200-sxm-180gb": "b200",
    "hgx-b200": "b200",
    "h200-sxm-141gb": "h200",
    "h200-sxm": "h200",
    "gb200-nvl72": "gb200",
    "gb200 nvl72": "gb200",
    "b200 (gb200)": "gb200",
    "gb300-nvl72": "gb300",
    "gb300 nvl72": "gb300",
    "b300 (gb300)": "gb300",
    "blackwell-ultra": "gb300",
    "b300-sxm6-ac": "b300",
    "b300 sxm6 ac": "b300",
    "hgx-b300": "b300",
    "b300 (hgx)": "b300",
    "mi300": "mi300x",
    "amd instinct mi300x": "mi300x",
    "instinct-mi300x": "mi300x",
}


@pytest.mark.parametrize("alias, key", sorted(OLD_ALIASES.items()))
def test_every_alias_still_names_its_gpu(alias: str, key: str) -> None:
    assert get_gpu(alias).key == key and get_gpu(alias.upper()).key == key


def test_every_shipped_gpu_names_a_preset_that_exists() -> None:
    from podsim.hardware.gpu import gpu_specs

    for key, spec in gpu_specs().items():
        assert spec.preset in preset_names(), key


def test_a_gpu_without_a_preset_needs_a_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from podsim.api.train import simulate_training
    from podsim.errors import InputError
    from podsim.hardware.gpu import gpu_specs
    from podsim.llm import get_model
    from podsim.llm.layout import Layout

    new = replace(get_gpu("h100"), key="h100-new", name="H100 (new)", preset="", aliases=())
    lay = Layout(8, tp=8, global_batch=8, seq_len=2048)
    with pytest.raises(InputError, match="no cluster preset for GPU h100-new .* give --cluster"):
        simulate_training(get_model("gpt3-1.3b"), lay, new, record_timeline=False)
    got = simulate_training(get_model("gpt3-1.3b"), lay, new, "dgx-h100", record_timeline=False)
    assert got.cluster == "dgx-h100"
    # an alias that names two GPUs is refused, naming both
    p = tmp_path / "gpus.yaml"
    entry = (
        "  name: X\n  memory_gib: 80\n  hbm_bandwidth: 3000 GB/s\n  nvlink_bandwidth: 450 GB/s\n"
        "  peak_tflops: {bf16: 900}\n  aliases: [fast]\n"
    )
    p.write_text("a:\n" + entry + "b:\n" + entry)
    with pytest.raises(InputError, match="alias 'fast' names both a and b"):
        gpu_specs(p)
