"""The kernel list of a training step (llm/kernels.py), its timing into steps (llm/ops.py),
overlap interference and host overhead (llm/stack.py), and `podsim llm --kernels`.
Expectations are worked out by hand from the shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.compute.model import ComputeModel
from podsim.hardware.gpu import get_gpu
from podsim.llm.kernels import (
    attention_kernels,
    mlp_kernels,
    optimizer_kernels,
    output_kernels,
)
from podsim.llm.layout import Layout
from podsim.llm.model import ModelConfig
from podsim.llm.ops import LayerCosts
from podsim.llm.stack import Stack
from podsim.workload import CollectiveKind

H100 = get_gpu("h100-80gb")
# h 64, 4 heads of 16, ffn 256, vocab 1000, 16-token sequences
GPT = ModelConfig("tiny-gpt", 2, 64, 4, 256, 1000, 16)
LLAMA = ModelConfig(
    "tiny-llama",
    2,
    64,
    4,
    224,
    1000,
    16,
    kv_heads=2,
    activation="swiglu",
    bias=False,
    learned_positions=False,
    tied_embeddings=False,
    dropout=0.0,
)


def _gemms(ks):  # type: ignore[no-untyped-def]
    return [(k.name, k.m, k.n, k.k, k.dtype) for k in ks if k.kind == "gemm"]


def test_forward_gemm_shapes_and_flops() -> None:
    lay = Layout(1, global_batch=2, micro_batch=2, seq_len=16)  # T = 32 tokens
    att = attention_kernels(GPT, lay, False)
    mlp = mlp_kernels(GPT, lay, False)
    assert _gemms(att) == [("qkv fprop", 32, 192, 64, "bf16"), ("attention proj fprop", 32, 64, 64, "bf16")]
    assert _gemms(mlp) == [("fc1 fprop", 32, 256, 64, "bf16"), ("fc2 fprop", 32, 64, 256, "bf16")]
    # 2 T (4 h^2 + 2 h f) = 2 x 32 x (16384 + 32768)
    assert sum(k.flops for k in att + mlp if k.kind == "gemm") == 2 * 32 * (4 * 64 * 64 + 2 * 64 * 256)
    # SwiGLU with GQA: QKV is h x (a + 2g) d = 64 x 128; FC1 is h x 2f
    llama = attention_kernels(LLAMA, lay, False) + mlp_kernels(LLAMA, lay, False)
    assert [g[1:4] for g in _gemms(llama)] == [(32, 128, 64), (32, 64, 64), (32, 448, 64), (32, 64, 224)]
    assert any(k.name.startswith("rotary") for k in llama) and not any(k.name.startswith("rotary") for k in att)


def test_backward_runs_two_gemms_per_forward_gemm_and_tp_divides() -> None:
    lay = Layout(4, tp=4, global_batch=1, seq_len=16, sequence_parallel=True)
    fwd = attention_kernels(GPT, lay, False) + mlp_kernels(GPT, lay, False)
    bwd = attention_kernels(GPT, lay, True) + mlp_kernels(GPT, lay, True)
    gf = sum(k.flops for k in fwd if k.kind == "gemm")
    gb = sum(k.flops for k in bwd if k.kind == "gemm")
    assert gb == 2 * gf == 2 * 2 * 16 * (4 * 64 * 64 + 2 * 64 * 256) / 4
    # flash attention: causal, 4 s^2 d per head halved; backward 2.5x
    fa = [k for k in fwd + bwd if k.kind == "attention"]
    assert [k.flops for k in fa] == [4 * 1 * 16 * 16 * 16 * 0.5, 2.5 * 4 * 1 * 16 * 16 * 16 * 0.5]
    # norms read R = T / t = 4 rows of h under SP: read 2 B + write 2 B an element
    norm = next(k for k in fwd if k.name == "norm fwd")
    assert norm.nbytes == 4 * 64 * 4


def test_fp8_runs_layer_gemms_in_fp8_and_adds_casts() -> None:
    lay = Layout(1, global_batch=1, seq_len=16, precision="fp8")
    fwd = attention_kernels(GPT, lay, False) + mlp_kernels(GPT, lay, False)
    assert {g[4] for g in _gemms(fwd)} == {"fp8"}
    cast = next(k for k in fwd if k.name == "attention output cast-transpose")
    assert cast.nbytes == 16 * 64 * (2 + 2)  # read bf16, write fp8 and its transpose
    # the output layer stays bf16
    assert {g[4] for g in _gemms(output_kernels(GPT, lay, False))} == {"bf16"}


def test_fp8_rowwise_casts_every_operand_both_ways_and_fuses_nothing() -> None:
    lay = Layout(1, global_batch=1, seq_len=16, precision="fp8-rowwise")  # T = 16 tokens
    ks = [k for b in (False, True) for k in attention_kernels(GPT, lay, b) + mlp_kernels(GPT, lay, b)]
    assert {g[4] for g in _gemms(ks)} == {"fp8"}
    # each linear T x k -> T x n: 8 B per input element (read bf16, write fp8 + a bf16 transpose;
    # read the transpose, write fp8), 10 per weight element, 8 per gradient element
    linears = [(64, 192), (64, 64), (64, 256), (256, 64)]  # (k, n): QKV, projection, FC1, FC2
    want = sum(8 * 16 * k + 10 * k * n + 8 * 16 * n for k, n in linears)
    assert sum(k.nbytes for k in ks if k.module == "fp8") == want
    assert not any("cast-transpose" in k.name for k in ks)  # no Transformer Engine casts
    norm = next(k for k in ks if k.name == "norm fwd")
    assert norm.nbytes == 16 * 64 * (2 + 2)  # the norm writes bf16 (the cast reads it again)
    # the weights are cast at every use, not once per iteration
    assert not [k for k in optimizer_kernels(1e6, 1e6, lay) if k.module == "fp8"]
    assert [k for k in optimizer_kernels(1e6, 1e6, Layout(1, global_batch=1, precision="fp8")) if k.module == "fp8"]


def test_fp8_rowwise_casts_take_the_stacks_rowwise_overhead() -> None:
    lay = Layout(1, global_batch=1, seq_len=16, precision="fp8-rowwise")
    cm = ComputeModel.for_gpu(H100, "fp8")
    cast = next(k for k in mlp_kernels(GPT, lay, False) if k.name == "fc1 input rowwise cast")
    for x in (1.0, 3.0):
        costs = LayerCosts(GPT, lay, cm, stack=Stack(fp8_rowwise_overhead=x, fp8_overhead=7.0))
        assert costs.kernel_ns(cast) == pytest.approx(cm.memory_ns(16 * 64 * 5) * x)
    te = Layout(1, global_batch=1, seq_len=16, precision="fp8")
    grad = next(k for k in attention_kernels(GPT, te, True) if k.name == "qkv grad cast-transpose")
    costs = LayerCosts(GPT, te, cm, stack=Stack(fp8_rowwise_overhead=3.0, fp8_overhead=7.0))
    assert costs.kernel_ns(grad) == pytest.approx(cm.memory_ns(grad.nbytes) * 7.0)


def test_cross_entropy_bytes_per_logit() -> None:
    lay = Layout(2, tp=2, global_batch=1, seq_len=16)  # 16 tokens x 500 vocabulary entries per GPU
    logits = 16 * 500
    loss = [k for b in (False, True) for k in output_kernels(GPT, lay, b) if k.module == "loss"]
    # fp32: to fp32 6, max 4, subtract 8, exp 8, sum 4, divide 8; backward: scale 8, to bf16 6
    assert sum(k.nbytes for k in loss) == 52 * logits
    fused = [k for b in (False, True) for k in output_kernels(GPT, lay, b, loss_fusion=True) if k.module == "loss"]
    assert sum(k.nbytes for k in fused) == 8 * logits


def test_optimizer_bytes() -> None:
    lay = Layout(8, global_batch=8, distributed_optimizer=True)
    ks = optimizer_kernels(8e6, 1e6, lay)
    # zero 4 B and scale 8 B per local parameter; norm 4 + clip 8 + Adam 28 + copy 6 per shard one
    assert sum(k.nbytes for k in ks) == 8e6 * 12 + 1e6 * 46
    assert sum(k.nbytes for k in optimizer_kernels(8e6, 1e6, Layout(1, global_batch=1))) == 8e6 * 4 + 1e6 * 46


def test_overlapped_time_by_hand() -> None:
    st = Stack(te_compute_slowdown=0.1, te_comm_slowdown=0.1, nccl_compute_slowdown=0.2, nccl_comm_slowdown=0.0)
    # GEMM 100, collective 50 -> 55 with its slowdown; the GEMM slows by 10% of the 55 both run,
    # and one of 4 pipelined chunks of the shorter one cannot hide: 105.5 + 13.75
    assert st.overlapped_ns(100, 50, "te", 4) == pytest.approx(119.25)
    # a collective longer than the kernel sets the time (the slowed kernel ends inside it)
    assert st.overlapped_ns(100, 300, "nccl") == pytest.approx(300.0)
    # a longer kernel: 300 plus 20% of the 100 both ran
    assert st.overlapped_ns(300, 100, "nccl") == pytest.approx(320.0)


def test_te_overlap_puts_tp_collectives_beside_their_gemms() -> None:
    cm = ComputeModel.for_gpu(H100)
    lay = Layout(8, tp=8, global_batch=1, seq_len=2048, sequence_parallel=True)
    m = ModelConfig("m", 2, 4096, 32, 16384, 32000, 2048)
    plain = LayerCosts(
        m,
        Layout(8, tp=8, global_batch=1, seq_len=2048, sequence_parallel=True, tp_overlap="none"),
        cm,
        stack=Stack(host_ns=0),
    )
    te = LayerCosts(m, lay, cm, comm_ns=lambda kind, nbytes, group: 50_000, stack=Stack(host_ns=0))
    colls = [s for s in plain.forward(False) if s.collective is not None]
    assert [s.collective for s in colls] == [CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER] * 2
    assert not any(s.overlap for s in colls)
    tcolls = [s for s in te.forward(False) if s.collective is not None]
    assert len(tcolls) == 4 and all(s.overlap for s in tcolls)
    # backward: 3 collectives per block (gradient all-gather, input re-gather, dgrad reduce-scatter)
    assert sum(1 for s in te.backward(False) if s.collective is not None) == 6
    # each overlapped GEMM's step is its time with the 50 us collective beside it
    steps = te.forward(False)
    i = next(i for i, s in enumerate(steps) if s.collective is not None)
    gemm = steps[i + 1]
    g = te.kernel_ns(next(k for k in te.layer_kernels(False, False) if k.name == "qkv fprop"))
    assert gemm.ns == pytest.approx(te.stack.overlapped_ns(g, 50_000, "te", 8))


def test_host_overhead_bounds_a_pass_of_short_kernels() -> None:
    cm = ComputeModel.for_gpu(H100)
    lay = Layout(1, global_batch=1, seq_len=16)
    fast = LayerCosts(GPT, lay, cm, stack=Stack(host_ns=0))
    slow = LayerCosts(GPT, lay, cm, stack=Stack(host_ns=1_000_000))  # 1 ms a launch
    n = sum(1 for k in fast.layer_kernels(False, False) if k.kind != "comm")
    assert sum(s.ns for s in fast.forward(False)) < n * 1_000_000
    assert sum(s.ns for s in slow.forward(False)) == pytest.approx(n * 1_000_000)


def test_cli_kernels_and_json_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "llm",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100",
                "--gpus",
                "8",
                "--tp",
                "8",
                "--sequence-parallel",
                "--global-batch",
                "4",
                "--seq-len",
                "2048",
                "--kernels",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "layer forward" in text and "qkv fprop" in text and "tp all-gather (te overlap)" in text
    d = json.loads(out.read_text())
    assert d["calibration"]["status"] == "fitted" and d["calibration"]["derived_from"] is None
    fwd = d["kernels"]["layer_forward"]
    qkv = next(r for r in fwd if r["name"] == "qkv fprop")
    # 2048 tokens, (32 + 2 x 8) x 128 / 8 = 768 outputs, 4096 inputs
    assert qkv["shape"] == "2048 x 768 x 4096" and qkv["gflop"] == pytest.approx(2 * 2048 * 768 * 4096 / 1e9, rel=1e-3)
    assert qkv["step_us"] >= qkv["time_us"] > 0
    assert {"layer_backward", "output_forward", "optimizer"} <= set(d["kernels"])


def test_recompute_modules_kernels_and_memory() -> None:
    from podsim.llm.memory import layer_activation_bytes

    lay = Layout(1, global_batch=1, seq_len=16, recompute="selective", recompute_modules=("core_attn", "mlp"))
    bwd = mlp_kernels(GPT, lay, True)
    # the MLP re-runs FC1 (same shape as its forward) and the activation before FC2's dgrad
    assert _gemms(bwd)[0] == ("fc1 fprop (recompute)", 16, 256, 64, "bf16")
    assert [k.name for k in bwd[:2]] == ["fc1 fprop (recompute)", "bias-gelu (recompute)"]
    # Korthikanti's 34 s b h per layer (no TP, flash): 10 + 4 + 4 (attention) + 16 (MLP) ->
    # without the MLP intermediates 18, without the norms' outputs too 14
    sbh = 16 * 1 * 64
    assert layer_activation_bytes(GPT, Layout(1, global_batch=1, seq_len=16), 0) == 34 * sbh
    assert layer_activation_bytes(GPT, lay, 0) == 18 * sbh
    both = Layout(1, global_batch=1, seq_len=16, recompute="selective", recompute_modules=("mlp", "layernorm"))
    assert layer_activation_bytes(GPT, both, 0) == 14 * sbh
    act = Layout(1, global_batch=1, seq_len=16, recompute="selective", recompute_modules=("act",))
    assert layer_activation_bytes(GPT, act, 0) == 26 * sbh


def test_full_recompute_of_n_layers_per_virtual_stage() -> None:
    from podsim.llm.flops import iteration_flops
    from podsim.llm.generate import generate

    m = ModelConfig("m8", 8, 64, 4, 256, 1000, 16)
    cm = ComputeModel.for_gpu(H100)
    lay = Layout(2, pp=2, vpp=2, global_batch=4, seq_len=16, recompute="full", recompute_layers=1)
    # virtual stages of 2 layers: (0,1) (2,3) on rank 0... the first of each is re-run
    assert [lay.recomputed_layer(m, 0, c, i) for c in range(2) for i in lay.chunk_layers(m, 0, c)] == [
        True,
        False,
        True,
        False,
    ]
    w = generate(m, lay, cm)
    names = [n for p in w.programs for n in p.names]
    # 4 micro-batches x 2 ranks x 2 chunks x 1 layer re-run before each backward
    layers_rerun = {n.split(" L")[1].split()[0] for n in names if "recompute" in n}
    assert layers_rerun == {"0", "2", "4", "6"}
    mf, hf = iteration_flops(m, lay)
    mf_all, hf_all = iteration_flops(m, Layout(2, pp=2, vpp=2, global_batch=4, seq_len=16, recompute="full"))
    # half the layers re-run: half the extra forward
    assert mf == mf_all and hf - mf == pytest.approx((hf_all - mf_all) / 2)


def test_zero3_gathers_every_unit_and_prefetches_layers() -> None:
    from podsim.llm.generate import generate

    m = ModelConfig("m2", 2, 64, 4, 256, 1000, 16)
    lay = Layout(4, zero=3, global_batch=8, micro_batch=2, seq_len=16)  # DP 4, 1 micro-batch each... x2
    assert lay.num_microbatches == 1
    lay = Layout(4, zero=3, global_batch=8, micro_batch=1, seq_len=16)  # 2 micro-batches per rank
    p = generate(m, lay, ComputeModel.for_gpu(H100)).programs[0]
    names = p.names
    gathers = [n for n in names if "zero-3 param all-gather" in n]
    scatters = [n for n in names if "zero-3 grad reduce-scatter" in n]
    # per micro-batch: forward gathers the embedding, 2 layers and the output layer; backward
    # gathers them again (resharded after use) -> 2 x 4 x 2 micro-batches; gradients of the
    # same 4 units reduce-scattered once per micro-batch
    assert len(gathers) == 16 and len(scatters) == 8
    assert sum("embedding" in n for n in gathers) == 4 and sum("output layer" in n for n in scatters) == 2
    # layer 1's forward weights are prefetched: its all-gather is issued before layer 0's compute
    first_l1 = next(i for i, n in enumerate(names) if "L1 zero-3 param all-gather" in n)
    first_l0_compute = next(i for i, n in enumerate(names) if " L0 " in f" {n} " and "zero-3" not in n)
    assert first_l1 < first_l0_compute


def test_calibration_status_per_gpu() -> None:
    from podsim.llm.training import calibration_of

    # fitted on their own measurements: A100 80GB (Table 1), H100 (kernel table)
    assert calibration_of(get_gpu("a100-80gb"), False)["status"] == "fitted"
    assert calibration_of(get_gpu("h100"), False)["status"] == "fitted"
    # the others borrow a measured sibling's fit on their own datasheet
    for gpu, sibling in (
        ("gb200", "h100-80gb"),
        ("b200", "h100-80gb"),
        ("h200", "h100-80gb"),
        ("gb300", "h100-80gb"),
        ("a100-40gb", "a100-80gb"),
    ):
        c = calibration_of(get_gpu(gpu), False)
        assert (c["status"], c["derived_from"]) == ("derived", sibling), gpu
    assert calibration_of(get_gpu("h100"), True)["status"] == "measured"
