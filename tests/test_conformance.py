"""Real inputs from the peers (../shared/data): ASTRA-sim's microbenchmarks, configs and
regression test, and a PyTorch-derived Chakra trace."""

import json
import math
import tarfile

import pytest

import podsim
from podsim.formats.astra_sim import read_network, read_system
from podsim.formats.chakra import read_trace, read_workload
from podsim.workload import OpKind

pytestmark = pytest.mark.conformance
GIB = 2**30 / 1e9


def test_astra_sim_regression_reference_117780(refdata):
    """ASTRA-sim's own regression test: 117780 cycles (= ns) on every one of the 8 ranks."""
    rr = refdata / "astra-sim" / "reference-run"
    expected = set()
    for line in (rr / "refs" / "stdout.txt").read_text().splitlines():
        if "finished," in line:
            expected.add(int(line.split("finished,")[1].split("cycles")[0]))
    assert expected == {117780}
    prefix = refdata / "astra-sim/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    for sym in (True, False):
        res = podsim.simulate(
            prefix,
            rr / "inputs/system_cfg.json",
            rr / "inputs/network_cfg.yml",
            rr / "inputs/remote_memory_cfg.json",
            use_symmetry=sym,
        )
        assert [x.finish_ns for x in res.ranks] == [117780] * 8
        assert all(x.exposed_comm_ns == 117780 and x.comm_ns == 117780 for x in res.ranks)


def _h(m, lat=500.0, bw=50.0, hops=1):
    return int(hops * lat + m / (bw * GIB))


def _r(m, lmb):
    return 3 * int(m / (lmb * 1e9) * 1e9)


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("n", [4, 8, 16])
def test_every_microbenchmark_with_ring_4chunks(refdata, coll, n):
    """All 12 microbenchmarks on Ring_<n>npus.yml with Ring_4chunks.json, against the
    closed forms (4 chunks of 256 KiB run one after another; local-mem-bw 1600 GB/s)."""
    a = refdata / "astra-sim"
    prefix = a / f"workload/microbenchmarks/{coll}/{n}npus_1MB/{coll}"
    res = podsim.simulate(
        prefix, a / "system/native_collectives/Ring_4chunks.json", a / f"network/analytical/Ring_{n}npus.yml"
    )
    c = (1 << 20) // 4
    lmb = 1600
    if coll == "all_reduce":
        m = c // n
        per = (2 * n - 1) * 10 + (2 * n - 2) * _h(m) + (n - 1) * _r(m, lmb)
    elif coll == "reduce_scatter":
        m = c // n
        per = n * 10 + (n - 1) * _h(m) + (n - 1) * _r(m, lmb)
    elif coll == "all_gather":
        per = n * 10 + (n - 1) * _h(c)
    else:
        k = n * (n - 1) // 2
        per = (k + 1) * 10 + k * _h(c // n)
    assert {x.finish_ns for x in res.ranks} == {4 * per}
    assert len(res.ranks) == n


def test_hgx_h100_validated_inputs(refdata):
    a = refdata / "astra-sim"
    res = podsim.simulate(
        a / "workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce",
        a / "system/native_collectives/HGX-H100-validated.json",
        a / "network/analytical/HGX-H100-validated.yml",
    )
    assert {x.finish_ns for x in res.ranks} == {55222}  # derived in test_collectives_closed_form


def test_all_configs_parse(refdata):
    a = refdata / "astra-sim"
    for f in a.glob("system/**/*.json"):
        read_system(f)
    for f in a.glob("network/**/*.yml"):
        assert read_network(f).num_npus in (4, 8, 16)


def test_custom_collective_traces_read(refdata):
    """The MSCCL-derived custom ring all-reduce: 35 nodes per rank (14 SEND, 14 RECV, 7 COMP)."""
    prefix = refdata / "astra-sim/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce"
    wl = read_workload(prefix)
    assert wl.num_ranks == 8
    for r in range(8):
        p = wl.program_of(r)
        kinds = [int(k) for k in p.kind]
        assert (len(p), kinds.count(OpKind.SEND), kinds.count(OpKind.RECV), kinds.count(OpKind.COMPUTE)) == (
            35,
            14,
            14,
            7,
        )
        assert set(int(x) for x in p.duration_ns[p.kind == OpKind.COMPUTE]) == {7000}
        assert set(int(x) for x in p.size_bytes[p.kind == OpKind.SEND]) == {131072}


def test_pytorch_chakra_trace(refdata, tmp_path):
    """mlcommons/chakra's feeder test trace: 3,664 nodes (3,643 COMP, 21 COMM_COLL)."""
    with tarfile.open(refdata / "chakra/feeder_tests_trace.tar.gz") as tf:
        tf.extractall(tmp_path, filter="data") if hasattr(tarfile, "data_filter") else tf.extractall(tmp_path)
    et = next(tmp_path.rglob("*.et"))
    tr = read_trace(et)
    types = [n.type for n in tr.nodes]
    assert len(tr.nodes) == 3664 and types.count(4) == 3643 and types.count(7) == 21
    assert sum(len(n.data_deps) for n in tr.nodes) == 181878
    assert sum(n.duration_micros for n in tr.nodes) == 381795
    # simulate it as one rank on a 2-NPU ring (rank 1 runs the same trace)
    (tmp_path / "w").mkdir()
    for r in range(2):
        (tmp_path / "w" / f"chakra.{r}.et").write_bytes(et.read_bytes())
    net = tmp_path / "n.yml"
    net.write_text("topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    sysf = tmp_path / "s.json"
    sysf.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "preferred-dataset-splits": 1,
                "local-mem-bw": 50,
                "all-reduce-implementation": ["ring"],
            }
        )
    )
    res = podsim.simulate(tmp_path / "w" / "chakra", sysf, net)
    assert res.finish_ns > 0
    assert any("control dependencies" in n for n in res.notes)
    # GPU compute is serialised, so the finish time is at least the GPU kernels' total
    p = res.ranks[0]
    assert p.finish_ns >= p.compute_ns > 0
    assert math.isclose(p.exposed_comm_ns, p.finish_ns - p.compute_ns)


def test_custom_collective_from_chakra_ets(refdata):
    """custom_collective.json runs the MSCCL-derived ring all-reduce ETs.  Per rank: 7 rounds
    of (send 128 KiB to the next rank, receive from the previous, 7 us COMP), then 7 rounds of
    (send, receive).  A send completes when its message arrives, after
    h = int(500 + 131072 / 53.687) = 2941 ns, so 7 * (2941 + 7000) + 7 * 2941 = 90,174 ns."""
    a = refdata / "astra-sim"
    h = int(500 + 131072 / (50 * GIB))
    expect = 7 * (h + 7000) + 7 * h
    assert expect == 90174
    for sym in (True, False):
        res = podsim.simulate(
            a / "workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce",
            a / "system/custom_collectives/custom_collective.json",
            a / "network/analytical/Ring_8npus.yml",
            use_symmetry=sym,
        )
        assert [x.finish_ns for x in res.ranks] == [expect] * 8


def test_inspect_reports_the_documented_counts(refdata, tmp_path):
    """The feeder trace's counts as documented by its publishers' notes."""
    import subprocess
    import sys

    with tarfile.open(refdata / "chakra/feeder_tests_trace.tar.gz") as tf:
        tf.extractall(tmp_path)
    et = next(tmp_path.rglob("*.et"))
    p = subprocess.run([sys.executable, "-m", "podsim", "inspect", str(et)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "nodes        3,664: COMM_COLL_NODE 21, COMP_NODE 3,643" in p.stdout
    assert "CPU ops      2,448" in p.stdout
    assert "181,878 data, 3,664 control" in p.stdout
    assert "381,795 us in all; 157 nodes of 0 us" in p.stdout
