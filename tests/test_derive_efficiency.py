"""GPUs podsim has not measured: a sibling's fit scaled by published kernel measurements of both
(podsim/compute/derive.py, hardware/published_kernels.csv, the ``efficiency: {from: ...}`` form)."""

from __future__ import annotations

import pytest

from podsim.compute.derive import efficiency_scale, fraction_of_peak, published_kernels
from podsim.compute.model import ComputeModel
from podsim.errors import InputError
from podsim.hardware.gpu import SCALABLE, get_gpu, gpu_specs

SPECS = gpu_specs()
ROWS = published_kernels()


def test_mamf_gemm_ratio_by_hand() -> None:
    # stas00/ml-engineering MAMF table: B200 1745.0 of 2250, H100 794.5 of 989.4 TFLOP/s (our peaks)
    s = efficiency_scale("b200", "h100-80gb", SPECS, ROWS)
    assert s["gemm_max"][0] == pytest.approx((1745.0 / 2250) / (794.5 / 989.4), rel=1e-9)
    assert s["fp8_gemm_max"][0] == pytest.approx((3432.5 / 4500) / (1402.6 / 1978.9), rel=1e-9)
    # MI300X: 668.4 of 1307.4 (TunableOp) -- far below the H100's fraction
    assert efficiency_scale("mi300x", "h100-80gb", SPECS, ROWS)["gemm_max"][0] == pytest.approx(
        (668.4 / 1307.4) / (794.5 / 989.4), rel=1e-9
    )


def test_attention_ratio_by_hand_one_case() -> None:
    # cuDNN 9.19 SDPA, s 8192 causal: GB300 fwd 1887 / bwd 1385 of 2500; H200 fwd 644 / bwd 541 of 989.4
    only = [r for r in ROWS if r.case == "s8192 causal"]
    s = efficiency_scale("gb300", "h100-80gb", SPECS, only)["flash_max"]
    fwd, bwd = (1887 / 2500) / (644 / 989.4), (1385 / 2500) / (541 / 989.4)
    assert s[1] == 2 and s[0] == pytest.approx((fwd * bwd**2.5) ** (1 / 3.5), rel=1e-9)
    assert fwd > 1.1 and 0.95 < bwd < 1.05  # Blackwell Ultra's faster softmax shows in the forward


def test_memory_fraction_uses_hbm_bandwidth() -> None:
    r = next(r for r in ROWS if r.gpu == "h200" and r.kernel == "memory")
    assert fraction_of_peak(r, SPECS["h200"]) == pytest.approx(r.value / 4800)


@pytest.mark.parametrize("key", ["b200", "gb200", "gb300", "b300", "mi300x"])
def test_shipped_factors_follow_the_published_rows(key: str) -> None:
    g = SPECS[key]
    derived = efficiency_scale(key, g.efficiency_from, SPECS, ROWS, g.efficiency_measured_as)
    assert derived, key
    for p, (f, n) in derived.items():
        assert g.efficiency_scale.get(p) == pytest.approx(f, abs=6e-4), (key, p, n)
    base = SPECS[g.efficiency_from].efficiency
    for p, f in g.efficiency_scale.items():
        assert g.efficiency[p] == pytest.approx(base[p] * f, abs=1e-4)


def test_derived_model_uses_the_scaled_ceiling() -> None:
    cm = ComputeModel.for_gpu(get_gpu("gb200"), "bf16")
    assert cm.gemm_max == pytest.approx(0.793 * 0.908, abs=1e-4)
    from podsim.llm.training import calibration_of

    c = calibration_of(get_gpu("gb200"), False)
    assert c["status"] == "derived" and c["scale"]["gemm_max"] == pytest.approx(0.908)
    assert "published kernel measurements" in c["source"]


BASE = """\
ref:
  name: Ref
  memory_gib: 16
  hbm_bandwidth: 1 TB/s
  nvlink_bandwidth: 100 GB/s
  peak_tflops: {bf16: 100}
  efficiency: {gemm_max: 0.8, gemm_knee: 100, memory_max: 0.7, flash_max: 0.6, flash_knee: 40, launch_ns: 1000}
new:
  name: New
  memory_gib: 16
  hbm_bandwidth: 1 TB/s
  nvlink_bandwidth: 100 GB/s
  peak_tflops: {bf16: 200}
"""


def test_from_form_scales_and_keeps_the_rest(tmp_path) -> None:
    p = tmp_path / "gpus.yaml"
    p.write_text(BASE + "  efficiency: {from: ref, scale: {gemm_max: 0.5, flash_max: 1.1}}\n")
    g = gpu_specs(p)["new"]
    assert g.efficiency["gemm_max"] == pytest.approx(0.4) and g.efficiency["flash_max"] == pytest.approx(0.66)
    assert g.efficiency["gemm_knee"] == 100 and g.efficiency_from == "ref" and g.efficiency_scale["gemm_max"] == 0.5


@pytest.mark.parametrize(
    "eff, field",
    [
        ("{from: nope}", "new.efficiency.from"),
        ("{from: ref, scale: {gemm_knee: 2}}", "new.efficiency.scale.gemm_knee"),
        ("{from: ref, scale: {gemm_max: -1}}", "new.efficiency.scale.gemm_max"),
        ("{from: ref, measured_as: {flash_max: nope}}", "new.efficiency.measured_as.flash_max"),
        ("{from: ref, scales: {gemm_max: 1}}", "new.efficiency.scales"),
    ],
)
def test_bad_from_form_names_the_field(tmp_path, eff: str, field: str) -> None:
    p = tmp_path / "gpus.yaml"
    p.write_text(BASE + f"  efficiency: {eff}\n")
    with pytest.raises(InputError) as e:
        gpu_specs(p)
    assert field in str(e.value) and str(p) in str(e.value)


def test_scalable_parameters_are_model_fields() -> None:
    assert all(hasattr(ComputeModel, p) for p in SCALABLE)


def test_bad_rows_file(tmp_path) -> None:
    p = tmp_path / "k.csv"
    p.write_text("gpu,kernel,dtype,harness,case,value,unit,source\nb200,gemm,bf16,x,y,-3,TFLOP/s,z\n")
    with pytest.raises(InputError, match="row 2"):
        published_kernels(p)
