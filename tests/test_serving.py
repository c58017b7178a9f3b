"""Inference serving (podsim.serving): DLSIM's event model on hand-derived cases, its files,
workload generation, bad input, and the shipped workloads and placements."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.serving import (
    ServeWorkload,
    generate_workload,
    load_profiles,
    read_placement,
    read_workload,
    simulate_serving,
    write_workload,
)
from podsim.serving.placement import Placement, ServeCluster, check_placement
from podsim.serving.stats import percentile, summarize

MS = 1_000_000
CLUSTER = ServeCluster(1, 2, 16 * 10**9)
EXES = load_profiles()


def _workload(reqs: list[tuple[int, float]], models: int = 2, slo: float = 1.0) -> ServeWorkload:
    return ServeWorkload(
        [m for m, _ in reqs], [t for _, t in reqs], models, 1.0, [1.0 / models] * models, 10.0, [slo] * models, "hand"
    )


def _placement(tmp_path: Path, entries: list[tuple[str, str, list[list[int]]]]) -> Placement:
    """entries: (service, executable, [GPU ids of each stage on node 0])."""
    data = [
        {
            "service_name": s,
            "model_name": e.rsplit("_", 2)[0] if "device" in e else e,
            "executable_name": e,
            "mesh_group": [{"node_ids": [0], "devices": [gpus]} for gpus in stages],
        }
        for s, e, stages in entries
    ]
    for d in data:
        d["model_name"] = EXES[d["executable_name"]].model
    p = tmp_path / "placement.json"
    p.write_text(json.dumps(data))
    return read_placement(p)


#: one Bert-2.6B on GPU 0 of node 0, as a placement entry
ENTRY = {
    "service_name": "a",
    "model_name": "Bert_2.6B",
    "executable_name": "Bert_2.6B_1_device",
    "mesh_group": [{"node_ids": [0], "devices": [[0]]}],
}


def _two_services(path: Path, second_gpu: int = 1) -> Path:
    """A placement file: service a on GPU 0, service b on ``second_gpu`` (node 0)."""
    path.write_text(
        json.dumps([ENTRY, dict(ENTRY, service_name="b", mesh_group=[{"node_ids": [0], "devices": [[second_gpu]]}])])
    )
    return path


def _latencies_ms(r) -> list[float]:  # type: ignore[no-untyped-def]
    return [round((f - a) / MS, 6) for f, a in zip(r.finish_ns, r.arrival_ns)]


def test_two_requests_on_one_gpu(tmp_path: Path) -> None:
    # Bert_2.6B_1_device, 145.2 ms: the first runs at once; the second (at 50 ms) finds the GPU
    # busy until 145.2 ms, waits, and pays DLSIM's 4 ms single-stage dispatch overhead
    pl = _placement(tmp_path, [("a", "Bert_2.6B_1_device", [[0]])])
    r = simulate_serving(_workload([(0, 0.0), (0, 0.05)], 1), pl, EXES, CLUSTER)
    assert _latencies_ms(r) == [145.2, 244.4]  # 145.2 + 4 + 145.2 - 50
    assert r.slices[0] == [(0, 0, 0, 145_200_000), (1, 0, 149_200_000, 294_400_000)] and r.slices[1] == []


def test_two_stage_pipeline_overlaps_requests(tmp_path: Path) -> None:
    # Bert_2.6B_2_device_inter: 73.0 ms on GPU 1 then 73.4 ms on GPU 0 (as DLSIM's placement);
    # r0 at 0: 0-73, then 73-146.4.  r1 at 10 ms: stage 0 is busy until 73 -> 76-149 (its 3 ms
    # multi-stage overhead), while r0 runs stage 1; at 149 stage 1 is idle again -> 149-222.4
    pl = _placement(tmp_path, [("a", "Bert_2.6B_2_device_inter", [[1], [0]])])
    r = simulate_serving(_workload([(0, 0.0), (0, 0.01)], 1), pl, EXES, CLUSTER)
    assert r.slices[1] == [(0, 0, 0, 73 * MS), (1, 0, 76 * MS, 149 * MS)]
    assert r.slices[0] == [(0, 1, 73 * MS, 146_400_000), (1, 1, 149 * MS, 222_400_000)]
    assert _latencies_ms(r) == [146.4, 212.4]


def test_intra_op_mesh_shared_by_two_models(tmp_path: Path) -> None:
    # both models on the 2-GPU mesh (98.5 ms each): both GPUs run every request; model 1's
    # request waits for model 0's
    pl = _placement(
        tmp_path, [("m0", "Bert_2.6B_2_device_intra", [[0, 1]]), ("m1", "Bert_2.6B_2_device_intra", [[0, 1]])]
    )
    r = simulate_serving(_workload([(0, 0.0), (1, 0.01)]), pl, EXES, CLUSTER)
    want = [(0, 0, 0, 98_500_000), (1, 0, 102_500_000, 201_000_000)]
    assert r.slices[0] == r.slices[1] == want
    assert _latencies_ms(r) == [98.5, 191.0]


def test_replica_choice(tmp_path: Path) -> None:
    # one service, replicas on GPU 0 and GPU 1 (Bert_125M, 18.93 ms); requests at 0, 1, 2 ms
    pl = _placement(tmp_path, [("s", "Bert_125M_1_device", [[0]]), ("s", "Bert_125M_1_device", [[1]])])
    w = _workload([(0, 0.0), (0, 0.001), (0, 0.002)], 1)
    fifo = simulate_serving(w, pl, EXES, CLUSTER)
    # r0: both idle, the first; r1: replica 1 is idle; r2: replica 0 frees at 18.93, replica 1 at
    # 19.93: replica 0, after its 4 ms overhead
    assert fifo.executor_of == [0, 1, 0]
    assert _latencies_ms(fifo) == [18.93, 18.93, 18.93 + 4 + 18.93 - 2]
    assert simulate_serving(w, pl, EXES, CLUSTER, scheduler="rr").executor_of == [0, 1, 0]
    lo = simulate_serving(
        _workload([(0, 0.0), (0, 0.001), (0, 0.05)], 1), pl, EXES, CLUSTER, scheduler="least-outstanding"
    )
    assert lo.executor_of == [0, 1, 0]  # at 50 ms both are done: the first
    none = simulate_serving(w, pl, EXES, CLUSTER, overhead_ns=(0, 0))
    assert _latencies_ms(none)[2] == round(2 * 18.93 - 2, 6)


def test_slo_dropping_and_attainment(tmp_path: Path) -> None:
    # four requests at once on one GPU (145.2 ms each), SLO 0.3 s: the first two make it, the
    # third would finish at 3 x 145.2 + 2 x 4 = 443.6 ms and is dropped, as is the fourth
    pl = _placement(tmp_path, [("a", "Bert_2.6B_1_device", [[0]])])
    w = _workload([(0, 0.0)] * 4, 1, slo=0.3)
    kept = simulate_serving(w, pl, EXES, CLUSTER)
    assert summarize(kept)["slo_attainment"] == 0.5 and summarize(kept)["dropped"] == 0
    dropped = simulate_serving(w, pl, EXES, CLUSTER, drop_late=True)
    doc = summarize(dropped)
    assert dropped.executor_of == [0, 0, -1, -1] and doc["dropped"] == 2 and doc["slo_attainment"] == 0.5
    assert doc["requests"][2]["finish_s"] is None


def test_percentiles_interpolate_as_numpy() -> None:
    # numpy.quantile's default (DLSIM's statistics): rank q (n - 1), linearly between neighbours
    v = [float(i) for i in range(1, 144)]
    assert percentile(v, 99) == pytest.approx(1 + 0.99 * 142) and percentile(v, 50) == 72.0
    assert percentile([2.0], 99) == 2.0 and math.isnan(percentile([], 50))


@pytest.mark.conformance
def test_dlsim_workloads_round_trip(refdata, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    counts = {
        "test_workload_8to2_6.667Hz_20s": 143,
        "test_workload_8to2_10Hz_20s": 218,
        "test_workload_8to2_30Hz_60s": 1799,
        "test_workload_8to2_50Hz_60s": 2976,
    }
    for name, n in counts.items():
        src = refdata / "dlsim" / "workload" / name
        w = read_workload(src)
        assert len(w) == n and w.name == name and w.slos_s == [0.25, 0.25] and w.arrivals_s[0] == 0.0
        write_workload(w, tmp_path / name)
        assert (tmp_path / name).read_bytes() == src.read_bytes()


@pytest.mark.conformance
def test_model_parallelism_halves_mean_latency(refdata) -> None:  # type: ignore[no-untyped-def]
    # AlpaServe's motivating result on DLSIM's 6.667 Hz, 80/20 workload of two Bert-2.6B: sharing
    # both GPUs by model parallelism (inter- or intra-op) roughly halves the mean latency of one
    # GPU per model
    w = read_workload(refdata / "dlsim" / "workload" / "test_workload_8to2_6.667Hz_20s")
    mean = {}
    for name in ("baseline", "interop", "intraop"):
        pl = read_placement(refdata / "dlsim" / "placements" / f"placement_{name}.json")
        assert check_placement(pl, EXES, CLUSTER) == []
        r = simulate_serving(w, pl, EXES, CLUSTER)
        assert all(f is not None for f in r.finish_ns)
        mean[name] = statistics.mean(r.latencies_s())
    assert 0.4 < mean["interop"] / mean["baseline"] < 0.6 and 0.4 < mean["intraop"] / mean["baseline"] < 0.6


def test_generated_workloads() -> None:
    a = generate_workload(2, 50.0, 200.0, proportions=[0.8, 0.2], seed=7)
    b = generate_workload(2, 50.0, 200.0, proportions=[0.8, 0.2], seed=7)
    assert a.arrivals_s == b.arrivals_s and a.model_ids == b.model_ids and a.arrivals_s[0] == 0.0
    assert len(a) == pytest.approx(50 * 200, rel=0.05)
    assert a.model_ids.count(1) / len(a) == pytest.approx(0.2, abs=0.02)
    g = generate_workload(1, 100.0, 500.0, cv=4.0, seed=3)
    gaps = [y - x for x, y in zip(g.arrivals_s, g.arrivals_s[1:])]
    assert statistics.mean(gaps) == pytest.approx(1 / 100, rel=0.15)
    assert statistics.pstdev(gaps) / statistics.mean(gaps) == pytest.approx(4.0, rel=0.15)
    per = generate_workload(2, 0, 300.0, rates=[20.0, 5.0], seed=1)
    assert per.model_ids.count(0) / per.model_ids.count(1) == pytest.approx(4.0, rel=0.15)
    assert per.arrivals_s == sorted(per.arrivals_s)


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_w = tmp_path / "w"
    write_workload(_workload([(0, 0.0), (1, 0.5)]), good_w)
    pl = tmp_path / "p.json"
    entry = ENTRY
    _two_services(pl)
    assert main(["serve", "-w", str(good_w), "-p", str(pl)]) == 0
    capsys.readouterr()
    bad_w = {
        "props": ('2,6.667,"[0.8, 0.3]",20,"[0.25, 0.25]",x\n0,0.0\n', "sum to 1"),
        "order": ('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n0,0.5\n1,0.1\n', "time order"),
        "meta": ('2,6.667,[0.8 0.2],20,"[0.25, 0.25]",x\n0,0.0\n', "list of numbers"),
        "fields": ('2,6.667,"[0.8, 0.2]",20\n0,0.0\n', "metadata row"),
        "eval": ('2,6.667,"__import__(\'os\')",20,"[0.25, 0.25]",x\n0,0.0\n', "list of numbers"),
        "model": ('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n5,0.0\n', "model_id must be one of 0..1"),
    }
    for key, (text, message) in bad_w.items():
        f = tmp_path / f"w_{key}"
        f.write_text(text)
        assert main(["serve", "-w", str(f), "-p", str(pl)]) == 2, key
        assert message in capsys.readouterr().err, key
    bad_p = {
        "exe": (dict(entry, executable_name="Bert_9B_1_device"), "unknown executable 'Bert_9B_1_device'"),
        "model": (dict(entry, model_name="Bert_125M"), "runs model 'Bert_2.6B', not 'Bert_125M'"),
        "gpu": (dict(entry, mesh_group=[{"node_ids": [0], "devices": [[5]]}]), "names GPU 5 of node 0"),
        "shape": (dict(entry, mesh_group=[{"node_ids": [0], "devices": [[0, 1]]}]), "needs a (1 node, 1 GPU) mesh"),
        "stages": (dict(entry, executable_name="Bert_2.6B_2_device_inter"), "has 2 stage(s) but mesh_group has 1"),
    }
    for key, (e, message) in bad_p.items():
        f = tmp_path / f"p_{key}.json"
        f.write_text(json.dumps([e, e]))
        assert main(["serve", "-w", str(good_w), "-p", str(f)]) == 2, key
        assert message in capsys.readouterr().err, key
    # memory: four Bert-2.6B replicas (5.2 GB of fp16 weights each) on one 16 GB GPU
    f = tmp_path / "p_mem.json"
    f.write_text(json.dumps([entry, dict(entry, service_name="b")] * 2))
    assert main(["serve", "-w", str(good_w), "-p", str(f)]) == 2
    assert "holds 20.80 GB of weights" in capsys.readouterr().err
    assert main(["serve", "-w", str(good_w), "-p", str(f), "--memory-check", "warn"]) == 0
    assert "note: GPU 0 of node 0 holds 20.80 GB" in capsys.readouterr().out
    # more models than services
    f = tmp_path / "p_one.json"
    f.write_text(json.dumps([entry]))
    assert main(["serve", "-w", str(good_w), "-p", str(f)]) == 2
    assert "model i goes to the i-th service" in capsys.readouterr().err


def test_cli_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = tmp_path / "w"
    write_workload(generate_workload(2, 5.0, 10.0, proportions=[0.5, 0.5], slos_s=[0.5, 0.5], seed=2, name="gen"), w)
    pl = tmp_path / "p.yaml"
    pl.write_text(
        "- service_name: a\n  model_name: Bert_2.6B\n  executable_name: Bert_2.6B_2_device_inter\n"
        "  mesh_group: [{node_ids: [0], devices: [[0]]}, {node_ids: [0], devices: [[1]]}]\n"
        "- service_name: b\n  model_name: Bert_125M\n  executable_name: Bert_125M_1_device\n"
        "  mesh_group: [{node_ids: [0], devices: [[1]]}]\n"
    )
    trace, js = tmp_path / "t.json", tmp_path / "r.json"
    assert main(["serve", "-w", str(w), "-p", str(pl), "--chrome-trace", str(trace), "--json", str(js)]) == 0
    assert "SLO attainment" in capsys.readouterr().out
    doc = json.loads(js.read_text())
    for key in ("latency_mean_s", "latency_p99_s", "slo_attainment", "per_model", "requests"):
        assert key in doc
    assert set(doc["per_model"]) == {"0", "1"} and len(doc["requests"]) == doc["num_requests"]
    req = doc["requests"][0]
    assert set(req) >= {"id", "model_id", "arrival_s", "finish_s", "latency_s"}
    events = json.loads(trace.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert all("request" in e["args"] for e in slices) and {e["tid"] for e in slices} == {0, 1}
    # stage 0 of model 0 on GPU 0, its stage 1 and all of model 1 on GPU 1
    assert all(e["tid"] == 0 for e in slices if e["args"]["model_id"] == 0 and e["args"]["stage"] == 0)
    pytest.importorskip("matplotlib")
    cdf = tmp_path / "c.png"
    assert main(["serve", "-w", str(w), "-p", str(pl), "--cdf", str(cdf), "--scheduler", "rr"]) == 0
    assert cdf.read_bytes()[:4] == b"\x89PNG"


def test_serve_workload_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "skewed.csv"
    assert (
        main(
            [
                "serve-workload",
                "generate",
                "--models",
                "2",
                "--rate",
                "6.667",
                "--proportions",
                "0.8,0.2",
                "--duration",
                "20",
                "--slos",
                "0.25",
                "--seed",
                "4",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    w = read_workload(out)
    assert w.num_models == 2 and w.proportions == [0.8, 0.2] and w.slos_s == [0.25, 0.25] and w.name == "skewed.csv"
    assert out.read_text().splitlines()[0] == '2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",skewed.csv'
    again = tmp_path / "again.csv"
    assert (
        main(
            [
                "serve-workload",
                "generate",
                "--models",
                "2",
                "--rate",
                "6.667",
                "--proportions",
                "0.8,0.2",
                "--duration",
                "20",
                "--slos",
                "0.25",
                "--seed",
                "4",
                "--name",
                "skewed.csv",
                "-o",
                str(again),
            ]
        )
        == 0
    )
    assert again.read_bytes() == out.read_bytes()  # seeded: the same file
    capsys.readouterr()
    for argv, message in (
        (["--rate", "5", "--proportions", "0.5,0.6"], "sum to 1"),
        (["--rate", "5", "--rates", "1,2"], "one of them"),
        (["--rates", "1,x"], "comma-separated finite numbers"),
    ):
        assert (
            main(
                ["serve-workload", "generate", "--models", "2", "--duration", "5", "-o", str(tmp_path / "x.csv")] + argv
            )
            == 2
        ), argv
        assert message in capsys.readouterr().err, argv
    assert not (tmp_path / "x.csv").exists()


def test_closed_loop_clients_by_hand(tmp_path: Path) -> None:
    from podsim.serving import ClosedLoop

    pl = _placement(tmp_path, [("a", "Bert_2.6B_1_device", [[0]])])
    # one client, no think time, 0.5 s: a request every 145.2 ms (the GPU is free each time: no
    # overhead): at 0, 145.2, 290.4, 435.6; the next would be at 580.8, after the end
    one = simulate_serving(ClosedLoop([1], 0.0, 0.5, [1.0]), pl, EXES, ServeCluster(1, 1, 16 * 10**9))
    assert [a / MS for a in one.arrival_ns] == [0.0, 145.2, 290.4, 435.6]
    assert _latencies_ms(one) == [145.2] * 4
    # two clients: both at 0 (the second waits for the first, + 4 ms); then each resends as its
    # request ends and always finds the other's queued: 298.4 ms = 145.2 + 4 + 145.2 + 4
    two = simulate_serving(ClosedLoop([2], 0.0, 0.5, [1.0]), pl, EXES, ServeCluster(1, 1, 16 * 10**9))
    assert [round(a / MS, 6) for a in two.arrival_ns] == [0.0, 0.0, 145.2, 294.4, 443.6]
    assert _latencies_ms(two) == [145.2, 294.4, 298.4, 298.4, 298.4]
    # the realized arrivals are a workload like any other
    assert two.workload.model_ids == [0] * 5 and len(two.workload.arrivals_s) == 5
    with pytest.raises(InputError, match="closed-loop clients"):
        ClosedLoop([0], 0.0, 1.0, [1.0])


def test_little_law_in_a_closed_loop(tmp_path: Path) -> None:
    # 10 clients, 50 ms mean think time, on a 2-GPU intra-op mesh (98.5 ms + 4 ms per request when
    # busy): throughput X = 1 / 102.5 ms, and N = X (R + Z) gives the mean latency R
    from podsim.serving import ClosedLoop

    pl = _placement(tmp_path, [("a", "Bert_2.6B_2_device_intra", [[0, 1]])])
    r = simulate_serving(ClosedLoop([10], 0.05, 60.0, [1.0], seed=5), pl, EXES, CLUSTER)
    doc = summarize(r)
    assert doc["throughput_rps"] == pytest.approx(1 / 0.1025, rel=0.01)
    assert doc["latency_mean_s"] == pytest.approx(10 / doc["throughput_rps"] - 0.05, rel=0.03)


def test_request_trace_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.serving.workload import read_request_trace

    f = tmp_path / "trace.csv"
    f.write_text("user,arrival_s,model_id\nx,0.0,0\ny,0.05,1\nz,0.01,0\n")
    w = read_request_trace(f)
    assert w.model_ids == [0, 0, 1] and w.arrivals_s == [0.0, 0.01, 0.05] and w.num_models == 2
    pl = _two_services(tmp_path / "p.json")
    out = tmp_path / "r.json"
    assert main(["serve", "-w", str(f), "-p", str(pl), "--slos", "0.2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    # model 0: 145.2 ms, then 145.2 + 4 + 145.2 - 10 = 284.4 ms (over the 0.2 s SLO); model 1 alone
    assert [round(r["latency_s"], 6) for r in doc["requests"]] == [0.1452, 0.2844, 0.1452]
    assert doc["slo_attainment"] == pytest.approx(2 / 3)
    (tmp_path / "bad.csv").write_text("arrival_s,who\n0.0,a\n")
    capsys.readouterr()
    assert main(["serve", "-w", str(tmp_path / "bad.csv"), "-p", str(pl)]) == 2
    assert "needs model_id and arrival_s columns" in capsys.readouterr().err


def test_estimated_executables(tmp_path: Path) -> None:
    # no measured profile: podsim's compute model times the forward pass (Llama 3 8B, H100, bf16,
    # one request of 512 tokens)
    prof = tmp_path / "est.yaml"
    prof.write_text(
        "models:\n  llama3-8b:\n    estimate: {model: llama3-8b, gpu: h100, batch: 1, seq_len: 512, "
        "dtype: bf16}\n    executables:\n      one: {stages: [[1, 1]]}\n      intra: {stages: [[1, 2]]}\n"
        "      inter: {stages: [[1, 1], [1, 1]]}\n"
    )
    ex = load_profiles(prof)
    one, intra, inter = ex["one"], ex["intra"], ex["inter"]
    # the roofline bound: 2 x 8.03e9 parameters x 512 tokens of FLOP at H100's 989.4 TFLOP/s = 8.3 ms
    assert one.stage_latencies_ns[0] >= 2 * 8.03e9 * 512 / 989.4e12 * 1e9
    # two pipeline stages split the work (each stage a half, within the embedding / output layer)
    assert sum(inter.stage_latencies_ns) == pytest.approx(one.stage_latencies_ns[0], rel=0.05)
    assert intra.stage_latencies_ns[0] < one.stage_latencies_ns[0]
    # memory per GPU: Llama 3 8B's 8.03e9 bf16 weights (plus one layer's activations) on one GPU,
    # half of them on each of two
    assert one.weight_bytes_per_gpu(0) == pytest.approx(2 * 8.03e9, rel=0.02)
    assert intra.weight_bytes_per_gpu(0) == pytest.approx(one.weight_bytes_per_gpu(0) / 2, rel=0.02)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "models:\n  m:\n    estimate: {model: no-such-model, gpu: h100}\n    executables:\n"
        "      one: {stages: [[1, 1]]}\n"
    )
    with pytest.raises(InputError, match="estimate"):
        load_profiles(bad)
    missing = tmp_path / "missing.yaml"
    missing.write_text("models:\n  m:\n    executables:\n      one: {stages: [[1, 1]]}\n")
    with pytest.raises(InputError, match="latencies_s must be 1 positive numbers"):
        load_profiles(missing)


def test_dlsim_command_line_and_cluster_presets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w"
    write_workload(_workload([(0, 0.0), (1, 0.05)]), w)
    pl = tmp_path / "p.json"
    _two_services(pl, second_gpu=7)
    monkeypatch.chdir(tmp_path)
    # DLSIM's flags: --name, -n/-d/-c with underscores, --chrome_trace into chrome_trace/<name>.json
    assert (
        main(
            [
                "serve",
                "--name",
                "test_sim",
                "--num_nodes",
                "1",
                "--num_devices_per_node",
                "8",
                "--memory_capacity",
                "16",
                "-w",
                str(w),
                "-p",
                str(pl),
                "--chrome_trace",
            ]
        )
        == 0
    )
    assert (tmp_path / "chrome_trace" / "test_sim.json").is_file()
    # DLSIM's default cluster has 2 GPUs: GPU 7 does not exist; a DGX H100 node has 8 of 80 GB
    assert main(["serve", "-w", str(w), "-p", str(pl)]) == 2
    assert "names GPU 7 of node 0, but the cluster has 1 node(s) of 2 GPU(s)" in capsys.readouterr().err
    assert main(["serve", "--cluster", "dgx-h100", "-w", str(w), "-p", str(pl), "--dispatch-overhead", "none"]) == 0
    capsys.readouterr()
    for bad, message in (
        (["--dispatch-overhead", "soon"], "dlsim, none or a finite number of ms"),
        (["--cluster", "dgx-h100", "-c", "0"], "--memory_capacity: expected a finite number > 0"),
        (["-n", "0"], "--num_nodes: expected a positive integer"),
        (["-c", "nan"], "expected a finite number > 0"),
        (["--dispatch-overhead", "inf"], "finite number of ms"),
    ):
        assert main(["serve", "-w", str(w), "-p", str(pl), "-d", "8"] + bad) == 2, bad
        assert message in capsys.readouterr().err, bad


def test_review_edge_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from podsim.serving import ClosedLoop

    pl = _two_services(tmp_path / "p.json")
    # non-finite, negative, undecodable or missing input: clean errors
    cases = {
        "inf_models": ('inf,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n0,0.0\n', "model_num must be a positive whole"),
        "nan_time": ('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n0,nan\n', "arrival_s must be a finite number"),
        "neg_time": ('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n0,-1.0\n', "before 0"),
        "nan_id": ('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\nnan,0.0\n', "model_id must be a finite number"),
    }
    for key, (text, message) in cases.items():
        f = tmp_path / key
        f.write_text(text)
        assert main(["serve", "-w", str(f), "-p", str(pl)]) == 2, key
        assert message in capsys.readouterr().err, key
    (tmp_path / "latin1").write_bytes(b'2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",caf\xe9\n')
    for argv, message in (
        (["-w", str(tmp_path / "latin1")], "not a UTF-8 text file"),
        (["-w", str(tmp_path / "nope")], "no such workload file"),
        (["--closed-loop", "inf,1", "--duration", "1"], "finite numbers"),
        (["--closed-loop", "1,1", "--duration", "inf"], "finite number > 0"),
    ):
        assert main(["serve", "-p", str(pl)] + argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    # a generated workload without SLOs (inf) reads back
    g = tmp_path / "g.csv"
    assert main(["serve-workload", "generate", "--models", "2", "--rate", "5", "--duration", "2", "-o", str(g)]) == 0
    assert read_workload(g).slos_s == [math.inf, math.inf]
    assert main(["serve", "-w", str(g), "-p", str(pl)]) == 0
    for rate, duration, cv in (("5", "nan", "1"), ("nan", "2", "1"), ("5", "2", "inf")):
        assert (
            main(
                [
                    "serve-workload",
                    "generate",
                    "--models",
                    "1",
                    "--rate",
                    rate,
                    "--duration",
                    duration,
                    "--cv",
                    cv,
                    "-o",
                    str(g),
                ]
            )
            == 2
        ), (rate, duration, cv)
    capsys.readouterr()
    # closed loop, no think time, every request dropped (the SLO is below the service time):
    # the clients back off by the predicted latency instead of spinning at one instant
    r = simulate_serving(ClosedLoop([1, 1], 0.0, 1.0, [0.1, 0.1]), read_placement(pl), EXES, CLUSTER, drop_late=True)
    assert all(f is None for f in r.finish_ns) and 10 <= len(r.arrival_ns) <= 20
    # an edited workload writes its new values; the line ends it was read with are kept
    f = tmp_path / "lf.csv"
    f.write_text('2,6.667,"[0.8, 0.2]",20,"[0.25, 0.25]",x\n0,0.0\n1,0.5\n')
    w = read_workload(f)
    write_workload(w, tmp_path / "same.csv")
    assert (tmp_path / "same.csv").read_bytes() == f.read_bytes()
    w.slos_s = [0.5, 0.5]
    w.arrivals_s[1] = 0.75
    write_workload(w, tmp_path / "edited.csv")
    assert (tmp_path / "edited.csv").read_text() == '2,6.667,"[0.8, 0.2]",20,"[0.5, 0.5]",x\n0,0.0\n1,0.75\n'
    # DLSIM's command line names its inputs inside ./workload and ./placements
    (tmp_path / "workload").mkdir()
    (tmp_path / "placements").mkdir()
    (tmp_path / "workload" / "wl").write_text(f.read_text())
    (tmp_path / "placements" / "pl.json").write_text(pl.read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--name", "t", "-n", "1", "-d", "2", "-c", "16", "-w", "wl", "-p", "pl.json"]) == 0


def test_measured_memory_per_stage(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(
        "models:\n  M:\n    parameters: 1.0e9\n    executables:\n"
        "      M_1: {stages: [[1, 1]], latencies_s: [0.01], memory_gb_per_gpu: [17]}\n"
        "      M_2: {stages: [[1, 1], [1, 1]], latencies_s: [0.01, 0.01]}\n"
    )
    ex = load_profiles(prof)
    assert ex["M_1"].weight_bytes_per_gpu(0) == 17 * 10**9  # as measured
    assert ex["M_2"].weight_bytes_per_gpu(1) == 10**9  # 2 GB of fp16 weights over 2 stages
    pl = tmp_path / "pl.json"
    pl.write_text(
        json.dumps(
            [
                {
                    "service_name": "a",
                    "model_name": "M",
                    "executable_name": "M_1",
                    "mesh_group": [{"node_ids": [0], "devices": [[0]]}],
                }
            ]
        )
    )
    with pytest.raises(InputError, match="holds 17.00 GB"):
        check_placement(read_placement(pl), ex, CLUSTER)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "models:\n  M:\n    executables:\n      M_1: {stages: [[1, 1]], latencies_s: [0.01], "
        "memory_gb_per_gpu: [1, 2]}\n"
    )
    with pytest.raises(InputError, match="memory_gb_per_gpu must be 1 numbers"):
        load_profiles(bad)
