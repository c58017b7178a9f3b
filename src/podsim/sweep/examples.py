"""Built-in sweep specs (``podsim sweep --example NAME``), kept as text so that they need no
data files: each runs in seconds on a laptop, and ``--write SPEC.yaml`` keeps it to edit."""

from __future__ import annotations

#: name -> (what it shows, the spec's YAML)
SWEEP_EXAMPLES: dict[str, tuple[str, str]] = {
    "collective": (("ring all-reduce on two DGX H100s, 1 MiB to 1 GiB: NICs at half speed, NVLink twice as fast, "
                    "or DGX A100s instead"), """\
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
"""),
    "llm": ("Llama 3 8B on 8 and 16 H100s, TP 2 to 8, and with twice the GPU peak, or half the NIC bandwidth", """\
# podsim sweep --example llm: Llama 3 8B on 8 and 16 H100s, TP 2, 4 and 8, and what if the
# GPUs had twice the peak FLOP/s or the NICs half the bandwidth.  Parameters: podsim llm's flags.
name: llama3-8b-tp
run: llm
fixed: {model: llama3-8b, gpu: h100, global-batch: 64, seq-len: 4096, recompute: selective}
grid: {gpus: [8, 16], tp: [2, 4, 8]}
what-if:
  - {name: baseline}
  - {name: 2x peak, gpu: {peak_scale: 2}}
  - {name: half NIC, cluster: {nic_bandwidth_scale: 0.5}}
"""),
}
