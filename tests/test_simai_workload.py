"""SimAI / AICB workload files: parsing, SimAI's execution semantics, groups, errors."""

from __future__ import annotations

import pytest
import yaml

import podsim
from podsim.errors import InputError
from podsim.formats.simai import read_simai_workload, simai_to_workload
from podsim.formats.simai.workload import simai_groups
from podsim.workload import OpKind

HEADER = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4 "
    "checkpoints: 0 checkpoint_initiates: 0\n"
)


def cluster(tmp_path) -> str:
    """Two servers of 2 GPUs, 100 GB/s NVSwitch, 10 GB/s rail NICs, no latencies; rings only."""
    doc = {
        "name": "t",
        "gpus_per_node": 2,
        "intra_node": {"kind": "nvswitch", "bandwidth": "100 GB/s", "latency": "0 ns"},
        "inter_node": {
            "kind": "rail_optimized",
            "nic_bandwidth": "10 GB/s",
            "nic_latency": "0 ns",
            "switch_latency": "0 ns",
        },
        "nccl": {
            "channels": 1,
            "algorithms": ["ring"],
            "protocols": ["Simple"],
            "base_latency": {"ring": {"Simple": "0 ns"}},
            "hop_latency": {"nvlink": {"ring": {"Simple": "0 ns"}}, "net": {"ring": {"Simple": "0 ns"}}},
        },
    }
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def test_semantics(tmp_path) -> None:
    # layer a: fwd 1000 ns + TP all-reduce of 1e8 B; ig 2000 ns + TP all-reduce 1e8 B;
    # wg 3000 ns + DP all-reduce of 1e9 B (non-blocking); update delay 10 ns after each
    # collective.  TP pairs {0,1} share a server: a 2-GPU ring all-reduce sends S/2 twice at
    # 100 GB/s -> 1e8 B takes 1,000,000 ns.  DP pairs {0,2} cross servers at 10 GB/s -> 1e9 B
    # takes 100,000,000 ns.  Layer b: fwd 500, no comm; ig 700; wg 900, no comm.
    text = (
        HEADER + "2\n"
        "a -1 1000 ALLREDUCE 100000000 2000 ALLREDUCE 100000000 3000 ALLREDUCE 1000000000 10\n"
        "b -1 500 NONE 0 700 BROADCAST 16 900 NONE 0 10\n"
    )
    p = tmp_path / "w.txt"
    p.write_text(text)
    res = podsim.simulate(str(p), cluster=cluster(tmp_path), backend="analytical")
    # forward: 1000 + 1,000,000 + 10 + 500; backward: b: 700 + 900 (BROADCAST skipped);
    # a: 2000 + 1,000,000 + 10 + 3000; then the DP all-reduce 100,000,000 + 10 ends the rank
    fwd = 1000 + 1_000_000 + 10 + 500
    bwd = 700 + 900 + 2000 + 1_000_000 + 10 + 3000
    assert res.finish_ns == fwd + bwd + 100_000_000 + 10
    assert res.num_ranks == 4


def test_weight_gradient_collective_does_not_block(tmp_path) -> None:
    # layer b's wg all-reduce (DP, 100,000,000 ns) overlaps layer a's backward compute
    text = HEADER + "2\na -1 1 NONE 0 5000000 NONE 0 1 NONE 0 1\nb -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1000000000 1\n"
    p = tmp_path / "w.txt"
    p.write_text(text)
    res = podsim.simulate(str(p), cluster=cluster(tmp_path), backend="analytical")
    # b: fwd 1 (layer a fwd 1 first): 2; backward b: ig 1, wg 1, then its DP collective from 4
    # to 4 + 100,000,000 (+1 update); a's ig 5,000,000 runs meanwhile
    assert res.finish_ns == 2 + 1 + 1 + 100_000_000 + 1


def test_small_forward_sizes_become_4096_and_groups(tmp_path) -> None:
    p = tmp_path / "w.txt"
    p.write_text(HEADER + "1\nx -1 1 ALLGATHER 100 1 NONE 0 1 REDUCESCATTER_EP 64 1\n")
    w = simai_to_workload(p)
    sizes = [int(s) for s, k in zip(w.programs[0].size_bytes, w.programs[0].kind) if k == OpKind.COLLECTIVE]
    assert 4096 in sizes
    groups = {(g.name, g.ranks) for g in simai_groups(8, 2, 1, 2)}
    assert ("tp", (0, 1)) in groups and ("dp", (1, 3, 5, 7)) in groups
    assert ("ep", (0, 2)) in groups and ("dp_ep", (0, 4)) in groups


@pytest.mark.parametrize(
    "text, message",
    [
        ("NOPE x\n1\n", "unknown parallelism policy 'NOPE'"),
        (HEADER + "2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", "declares 2 layers and has 1 layer lines"),
        (HEADER + "1\na -1 1 NONE 0 1 NONE 0 1 NONE 0\n", "line 3: expected 12 fields"),
        (HEADER + "1\na -1 x NONE 0 1 NONE 0 1 NONE 0 1\n", "line 3: forward compute time must be an integer"),
    ],
)
def test_errors(tmp_path, text, message) -> None:
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError, match=message):
        read_simai_workload(p)


@pytest.mark.conformance
def test_shared_simai_workloads(refdata) -> None:
    # every shipped SimAI/AICB workload parses, except AICB's L65B file, which declares 839
    # layers and has 32 (a known AICB bug): that one is a clear error
    files = sorted((refdata / "simai").rglob("*.txt"))
    assert len(files) >= 13
    for f in files:
        if f.name.startswith("L65B-M1-C05"):
            with pytest.raises(InputError, match="declares 839 layers and has"):
                read_simai_workload(f)
            continue
        hdr, layers = read_simai_workload(f)
        assert layers, f
    # the 9,216-GPU MoE example has 1,789 layers
    hdr, layers = read_simai_workload(refdata / "simai" / "example" / "workload_analytical.txt")
    assert (hdr.tp, hdr.ep, hdr.pp, hdr.ga, hdr.all_gpus, hdr.pp_comm) == (2, 16, 12, 24, 9216, 50331648)
    assert len(layers) == 1789
    # SimAI's micro all-reduce example: fwd 556,000 ns + all-reduce of 16 MiB then 64 MiB on 8 GPUs
    res = podsim.simulate(str(refdata / "simai" / "example" / "microAllReduce.txt"), cluster="dgx-a100-superpod")
    t16 = podsim.collective("all_reduce", "dgx-a100-superpod", 8, min_bytes="16M", max_bytes="64M", factor=4)
    colls = sum(int(r.time_us * 1000 + 0.5) for r in t16.rows)
    assert abs(res.finish_ns - (2 * 556_000 + colls + 2 * 1 + 2 * 1 + 2 * 1)) <= 4
