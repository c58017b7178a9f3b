import json

import pytest

from podsim.errors import InputError
from podsim.formats.astra_sim import (
    parse_algorithm,
    parse_network,
    parse_remote_memory,
    parse_system,
    read_network,
    read_system,
)
from podsim.network.topology import BlockKind


def test_network_bandwidth_is_gib_and_latency_ns(tmp_path):
    p = tmp_path / "n.yml"
    p.write_text(
        "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 400 ]\nlatency: [ 500, 936.25 ]\n"
    )
    t = read_network(p)
    assert t.num_npus == 8 and t.shape == (4, 2)
    assert t.dims[0].kind is BlockKind.RING and t.dims[1].kind is BlockKind.SWITCH
    assert t.dims[0].bandwidth == pytest.approx(50 * 2**30 / 1e9)  # 53.687 B/ns
    assert t.dims[1].latency_ns == 936.25


def test_network_units_extension():
    t = parse_network(
        {"topology": ["FullyConnected"], "npus_count": [4], "bandwidth": ["400 GB/s"], "latency": ["1 us"]}
    )
    assert t.dims[0].bandwidth == pytest.approx(400.0) and t.dims[0].latency_ns == 1000


def test_network_list_lengths_must_agree():
    with pytest.raises(InputError, match="npus_count has 2.*bandwidth has 1"):
        parse_network(
            {"topology": ["Ring", "Ring"], "npus_count": [4, 4], "bandwidth": [50], "latency": [500, 500]}, "n.yml"
        )


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("bandwidth", [0], "bandwidth must be > 0"),
        ("npus_count", [1], "npus_count must be an integer >= 2"),
        ("latency", [-3], "latency must be >= 0"),
        ("topology", ["Rign"], "did you mean 'Ring'"),
    ],
)
def test_network_bad_values(field, value, match):
    data = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]}
    data[field] = value
    with pytest.raises(InputError, match=match):
        parse_network(data, "n.yml")


def test_network_misspelled_key():
    with pytest.raises(InputError, match="did you mean 'npus_count'"):
        parse_network({"topology": ["Ring"], "npu_count": [8], "bandwidth": [50], "latency": [500]}, "n.yml")


def test_system_reads_every_key(tmp_path):
    cfg = {
        "scheduling-policy": "FIFO",
        "collective-optimization": "localBWAware",
        "local-reduction-delay": 2,
        "active-chunks-per-dimension": 2,
        "preferred-dataset-splits": 8,
        "endpoint-delay": 20,
        "L": 1,
        "o": 2,
        "g": 3,
        "G": 0.5,
        "model-shared-bus": 0,
        "local-mem-bw": 1600,
        "peak-perf": 900,
        "roofline-enabled": 1,
        "trace-enabled": 0,
        "replay-only": 0,
        "track-local-mem": 0,
        "local-mem-trace-filename": "m",
        "all-reduce-implementation": ["ring", "doubleBinaryTree"],
        "reduce-scatter-implementation": ["halvingDoubling", "direct"],
        "all-gather-implementation": ["oneRing"],
        "all-to-all-implementation": ["direct4", "oneDirect"],
        "boost-mode": 0,
    }
    p = tmp_path / "s.json"
    p.write_text(json.dumps(cfg))
    s = read_system(p)
    assert s.scheduling_policy == "FIFO" and s.collective_optimization == "localBWAware"
    assert s.active_chunks_per_dimension == 2 and s.preferred_dataset_splits == 8
    assert s.endpoint_delay_ns == 20 and s.loggp == (1, 2, 3, 0.5)
    assert s.local_mem_bw_GBps == 1600 and s.peak_perf_TFLOPS == 900 and s.roofline_enabled
    a2a = [a for k, a in s.implementations.items() if k.name == "ALL_TO_ALL"][0]
    assert a2a[0].name == "direct" and a2a[0].window == 4 and a2a[1].name == "oneDirect"
    assert s.ignored == {"boost-mode": 0}


@pytest.mark.parametrize(
    "key,hint",
    [
        ("prefered-dataset-splits", "preferred-dataset-splits"),
        ("active-chunk-per-dimension", "active-chunks-per-dimension"),
        ("scheduling_policy", "scheduling-policy"),
        ("all-reduce-implementations", "all-reduce-implementation"),
    ],
)
def test_system_misspelled_keys_suggest(key, hint):
    with pytest.raises(InputError, match=f"unknown key '{key}'; did you mean '{hint}'"):
        parse_system({key: 1}, "s.json")


def test_system_bad_values():
    with pytest.raises(InputError, match="did you mean 'LIFO'"):
        parse_system({"scheduling-policy": "LIFOO"}, "s.json")
    with pytest.raises(InputError, match="local-mem-bw.*> 0"):
        parse_system({"local-mem-bw": 0}, "s.json")
    with pytest.raises(InputError, match="did you mean 'halvingDoubling'"):
        parse_algorithm("halvingDoubleing", "s.json", "x")


def test_remote_memory():
    r = parse_remote_memory(
        {
            "memory-type": "PER_NODE_MEMORY_EXPANSION",
            "remote-mem-latency": 5,
            "remote-mem-bw": 128,
            "num-nodes": 8,
            "num-npus-per-node": 8,
        }
    )
    assert r.npus_per_node == 8 and r.bandwidth == 128
    with pytest.raises(InputError, match="remote-mem-bw"):
        parse_remote_memory({"memory-type": "MEMORY_POOL"}, "m.json")
    with pytest.raises(InputError, match="did you mean 'MEMORY_POOL'"):
        parse_remote_memory({"memory-type": "MEMORY_POL", "remote-mem-bw": 1}, "m.json")
