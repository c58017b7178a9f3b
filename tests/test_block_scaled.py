"""Blackwell's block-scaled training formats (mxfp8, nvfp4), rack-scale NVLink domains that a
job fills in part, and the uneven pipeline split validate uses when no Megatron rule divides
a model's layers.  Expected values are derived by hand from the formats' definitions."""

from __future__ import annotations

import pytest

from podsim.api.train import simulate_training
from podsim.errors import InputError
from podsim.hardware.cluster import build_fabric, domain_size, load_cluster
from podsim.llm.kernels import mlp_kernels, optimizer_kernels
from podsim.llm.layout import QUANT_BYTES, Layout
from podsim.llm.model import get_model
from podsim.validation.predict import balanced_split, precision_of


def test_quantized_bytes_include_block_scales() -> None:
    # MXFP8: 1 B + one 1-byte E8M0 scale per 32 elements; NVFP4: 0.5 B + one 1-byte E4M3 per 16
    assert QUANT_BYTES["mxfp8"] == pytest.approx(1.03125)
    assert QUANT_BYTES["nvfp4"] == pytest.approx(0.5625)
    assert Layout(8, precision="nvfp4").compute_dtype == "fp4"
    assert Layout(8, precision="mxfp8").compute_dtype == "fp8"
    assert not Layout(8, precision="bf16").quantized


def test_nvfp4_layer_gemms_run_in_fp4_and_casts_write_fp4() -> None:
    m = get_model("llama3-8b")
    fp8 = {k.name: k for k in mlp_kernels(m, Layout(8, precision="fp8", seq_len=8192), False)}
    fp4 = {k.name: k for k in mlp_kernels(m, Layout(8, precision="nvfp4", seq_len=8192), False)}
    assert fp8["fc1 fprop"].dtype == "fp8" and fp4["fc1 fprop"].dtype == "fp4"
    # the norm reads bf16 (2 B) and writes FC1's quantized input: T h (2 + q)
    T, h = 8192, 4096
    assert fp4["norm fwd"].nbytes == pytest.approx(T * h * (2 + 0.5625))
    assert fp8["norm fwd"].nbytes == pytest.approx(T * h * (2 + 1.0))


def test_weight_cast_reads_bf16_writes_two_quantized_copies() -> None:
    lay = Layout(8, tp=1, precision="nvfp4")
    ks = {k.name: k for k in optimizer_kernels(1e9, 1e9 / 8, lay)}
    assert ks["nvfp4 weight cast-transpose"].nbytes == pytest.approx(1e9 * (2 + 2 * 0.5625))


def test_nvfp4_gemm_time_halves_at_twice_the_peak() -> None:
    # GB200: fp4 10,000 vs fp8 5,000 dense TFLOP/s; a large GEMM is compute-bound in both
    from podsim.compute.model import ComputeModel
    from podsim.hardware.gpu import get_gpu

    g = get_gpu("gb200")
    t8 = ComputeModel.for_gpu(g, "fp8").gemm_ns(16384, 16384, 16384) - ComputeModel.for_gpu(g).launch_ns
    t4 = ComputeModel.for_gpu(g, "fp4").gemm_ns(16384, 16384, 16384) - ComputeModel.for_gpu(g).launch_ns
    assert t4 / t8 == pytest.approx(0.5, rel=1e-6)


def test_block_scaled_formats_need_blackwell() -> None:
    m = get_model("llama3-8b")
    with pytest.raises(InputError, match="block-scaled"):
        simulate_training(m, Layout(8, global_batch=8, precision="mxfp8"), "h100-80gb", record_timeline=False)
    r = simulate_training(m, Layout(8, global_batch=8, precision="mxfp8", seq_len=8192), "b200", record_timeline=False)
    assert r.iteration_time_s > 0


@pytest.mark.parametrize(
    "label,want",
    [
        ("FP8", "fp8"),
        ("fp8-cs", "fp8"),
        ("FP8-DS", "fp8"),
        ("MXFP8", "mxfp8"),
        ("FP8-MX", "mxfp8"),
        ("NVFP4", "nvfp4"),
        ("bf16", "bf16"),
    ],
)
def test_published_precision_labels(label: str, want: str) -> None:
    assert precision_of(label) == want


@pytest.mark.parametrize(
    "gpus,per_domain", [(72, 72), (144, 72), (64, 64), (128, 64), (256, 64), (1024, 64), (96, 48), (100, 20)]
)
def test_jobs_spread_over_the_fewest_nvl72_racks_in_whole_trays(gpus: int, per_domain: int) -> None:
    spec = load_cluster("gb200-nvl72")
    assert domain_size(spec, gpus) == per_domain
    assert gpus % per_domain == 0 and per_domain % 4 == 0
    assert -(-gpus // 72) <= gpus // per_domain  # never fewer racks than the job needs


def test_servers_are_still_filled_whole() -> None:
    spec = load_cluster("dgx-h100")
    assert domain_size(spec, 12) == 8
    with pytest.raises(InputError, match="whole servers"):
        build_fabric(spec, 12)
    fab = build_fabric(load_cluster("gb200-nvl72"), 256)
    assert fab.gpus_per_node == 64 and fab.num_gpus == 256


def test_balanced_split_counts_embedding_and_loss() -> None:
    # DeepSeek-V3: 61 layers + embedding + loss = 63 over 4 stages: 16,16,16,15 with the extra
    # layers in the middle, then one fewer on the first (embedding) and last (loss) stage
    assert balanced_split(61, 4) == (15, 16, 16, 14)
    for layers, stages in [(61, 16), (61, 8), (126, 16), (95, 6)]:
        split = balanced_split(layers, stages)
        assert sum(split) == layers and len(split) == stages
        loads = [c + (i == 0) + (i == stages - 1) for i, c in enumerate(split)]
        assert max(loads) - min(loads) <= 1


def test_causal_count_halves_only_the_attention_scores() -> None:
    # Llama 3 8B, one sequence of 8192: NeMo's llama formula per sequence is
    # s l h^2 (12 + 12 g/a + 18 f/h + 6 s/h) + 6 s h V; the full count has 12 s/h
    from podsim.llm.flops import causal_model_flops, iteration_flops

    m = get_model("llama3-8b")
    lay = Layout(8, global_batch=1, seq_len=8192)
    s, l, h, g, a, f, V = 8192, 32, 4096, 8, 32, 14336, 128256
    nemo = s * l * h * h * (12 + 12 * g / a + 18 * f / h + 6 * s / h) + 6 * s * h * V
    full = s * l * h * h * (12 + 12 * g / a + 18 * f / h + 12 * s / h) + 6 * s * h * V
    assert causal_model_flops(m, lay) == pytest.approx(nemo, rel=1e-9)
    assert iteration_flops(m, lay)[0] == pytest.approx(full, rel=1e-9)


def test_validate_compares_nemo_rows_with_the_causal_count() -> None:
    from podsim.validation.predict import counts_causal

    assert counts_causal({"framework": "megatron-bridge"}) and counts_causal({"framework": "NeMo"})
    assert not counts_causal({"framework": "megatron-core"}) and not counts_causal({"framework": "meta-4d"})
