"""Built-in sweep specs (``podsim sweep --example NAME``), kept as text so that they need no
data files: each runs in seconds on a laptop, and ``--write SPEC.yaml`` keeps it to edit."""

from __future__ import annotations

#: name -> (what it shows, the spec's YAML)
SWEEP_EXAMPLES: dict[str, tuple[str, str]] = {
    "collective": (
        (
            "ring all-reduce on two DGX H100s, 1 MiB to 1 GiB: NICs at half speed, NVLink twice as fast, "
            "or DGX A100s instead"
        ),
        """\
# podsim sweep --example collective: the bus bandwidth of a ring all-reduce on 16 GPUs (two DGX
# H100 servers), and what if the NICs were half as fast, NVLink twice as fast, or the servers
# DGX A100s.  Parameters: podsim collective's flags (size: one message size per point).
name: allreduce-what-if
run: collective
fixed: {collective: all_reduce, cluster: dgx-h100, gpus: 16, algo: ring}
grid: {size: [1M, 16M, 256M, 1G]}
what-if:
  - {name: baseline}
  - {name: half NIC, cluster: {nic_bandwidth_scale: 0.5}}
  - {name: 2x NVLink, cluster: {intra_bandwidth_scale: 2}}
  - {name: DGX A100, cluster: {preset: dgx-a100-superpod}}
""",
    ),
    "llm": (
        "Llama 3 8B on 8 and 16 H100s, TP 2 to 8, and with twice the GPU peak, or half the NIC bandwidth",
        """\
# podsim sweep --example llm: Llama 3 8B on 8 and 16 H100s, TP 2, 4 and 8, and what if the
# GPUs had twice the peak FLOP/s or the NICs half the bandwidth.  Parameters: podsim llm's flags.
name: llama3-8b-tp
run: llm
fixed: {model: llama3-8b, gpu: h100, global-batch: 64, seq-len: 4096, recompute: selective, sequence-parallel: true}
grid: {gpus: [8, 16], tp: [2, 4, 8]}
what-if:
  - {name: baseline}
  - {name: 2x peak, gpu: {peak_scale: 2}}
  - {name: half NIC, cluster: {nic_bandwidth_scale: 0.5}}
""",
    ),
    "goodput": (
        "Llama 3 8B's time to train 1T tokens on 1,024 to 16,384 H100s under failures, with 20 or 200 GB/s of "
        "checkpoint storage, and with twice the GPU peak",
        """\
# podsim sweep --example goodput: Llama 3 8B trained on 1T tokens by 1,024, 4,096 or 16,384 H100s
# (TP 8), checkpointing to storage of 20 or 200 GB/s: each point's step, goodput under failures
# (podsim's default rates, docs/goodput.md), time to train (the Monte Carlo's p10/p50/p90) and
# expected interruptions; and what if the GPUs had twice the peak FLOP/s (a faster step under the
# same failures: the same goodput, a shorter time to train).  Parameters: podsim goodput's flags.
name: llama3-8b-goodput
run: goodput
fixed: {model: llama3-8b, gpu: h100, global-batch: 4096, seq-len: 8192, tp: 8, sequence-parallel: true,
        distributed-optimizer: true, train-tokens: 1.0e+12, samples: 200}
grid: {gpus: [1024, 4096, 16384], storage-bandwidth: [20, 200]}
what-if:
  - {name: baseline}
  - {name: 2x peak, gpu: {peak_scale: 2}}
""",
    ),
    "serve-llm": (
        (
            "Llama 3 8B served on 4 H100s: mixed replicas or a prefill/decode split, each at its capacity "
            "under the SLOs, and with half the HBM bandwidth"
        ),
        """\
# podsim sweep --example serve-llm: Llama 3 8B on four H100s serving prompts of 1,000-3,000
# tokens and 256-token answers: four mixed replicas, or 1, 2 or 3 of them prefilling for the
# rest; each point's capacity (the highest request rate meeting TTFT <= 1 s and TPOT <= 15 ms
# for 99% of requests), its cost per million output tokens, and what if HBM were half as fast.
# Parameters: podsim serve-llm's flags.
name: llama3-8b-pd
run: serve-llm
fixed: {model: llama3-8b, gpu: h100, replicas: 4, workload: "poisson:20,prompt=uniform:1000-3000,output=256",
        requests: 300, slo-ttft: 1, slo-tpot: 0.015, find-capacity: true}
grid: {pd: ["off", "1:3", "2:2", "3:1"]}
what-if:
  - {name: baseline}
  - {name: half HBM, gpu: {hbm_bandwidth_scale: 0.5}}
""",
    ),
}
