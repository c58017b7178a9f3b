"""Injected faults (slow GPUs, NICs, links, host hiccups): hand-derived costs, the report of who
waits on whom, the trace, and the bad-input messages."""

from __future__ import annotations

import json

import pytest

import podsim
from podsim.api.collective import collective
from podsim.api.train import simulate_training
from podsim.cli import main
from podsim.engine.faults import FaultSpec, SlowGpus
from podsim.errors import InputError
from podsim.jobs.faults import parse_hiccup, parse_slow_gpus, parse_slow_links, parse_slow_nics
from podsim.llm.layout import Layout
from podsim.llm.model import zoo
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

FWD_NS, BWD_NS = 1_000_000, 500_000  # each rank's compute before and after the all-reduce


def ddp_step(n: int) -> Workload:
    """Every rank: 1 ms of compute, a 64 MiB all-reduce over all ranks, 0.5 ms of compute."""
    b = ProgramBuilder("step")
    c = b.add(OpKind.COMPUTE, "fwd", duration_ns=FWD_NS, node_id=1)
    a = b.add(
        OpKind.COLLECTIVE,
        "grads",
        collective=int(CollectiveKind.ALL_REDUCE),
        size_bytes=64 << 20,
        node_id=2,
        data_deps=[c],
    )
    b.add(OpKind.COMPUTE, "opt", duration_ns=BWD_NS, node_id=3, data_deps=[a])
    return Workload([b.build()], [0] * n, name="ddp")


def test_one_gpu_10_percent_slower_costs_10_percent_of_its_compute() -> None:
    ok = podsim.simulate(ddp_step(16), cluster="dgx-h100")
    bad = podsim.simulate(ddp_step(16), cluster="dgx-h100", faults=FaultSpec(parse_slow_gpus("3:1.1")))
    # rank 3 reaches the all-reduce 0.1 x 1 ms late (everyone waits), then its own 0.5 ms takes
    # 0.55 ms: the step grows by 0.1 x its whole compute, 150,000 ns
    assert bad.finish_ns - ok.finish_ns == round(0.1 * (FWD_NS + BWD_NS))
    assert bad.ranks[3].finish_ns == bad.finish_ns
    assert bad.ranks[0].finish_ns == ok.finish_ns + round(0.1 * FWD_NS)
    f = bad.faults
    assert f["baseline_step_ns"] == ok.finish_ns and f["cost_ns"] == 150_000
    assert f["injected"][0]["cost_ns"] == 150_000
    w = f["waits"]
    # the 15 others waited 0.1 ms each for rank 3, at the one all-reduce
    assert w["waited_for"] == [{"rank": 3, "others_waited_ns": 15 * 100_000}]
    top = w["top_waits"][0]
    assert (top["last_rank"], top["waiting_ranks"], top["max_wait_ns"]) == (3, 15, 100_000)
    assert ok.info["equivalent_ranks"] and bad.info["simulated_ranks"] == 16


def test_host_hiccup_delays_the_affected_step_and_is_amortised() -> None:
    ok = podsim.simulate(ddp_step(16), cluster="dgx-h100")
    spec = FaultSpec(hiccup=parse_hiccup("10:2ms,host=1"))
    bad = podsim.simulate(ddp_step(16), cluster="dgx-h100", faults=spec)
    # host 1 (GPUs 8..15) starts 2 ms late: the all-reduce, and so everyone's end, 2 ms later
    assert bad.finish_ns - ok.finish_ns == 2_000_000
    h = bad.faults["hiccup"]
    assert h["typical_step_ns"] == ok.finish_ns
    assert h["mean_step_ns"] == pytest.approx(ok.finish_ns + 2_000_000 / 10)
    assert bad.faults["injected"][0]["cost_ns_per_step"] == pytest.approx(200_000)


def test_each_fault_alone_and_together() -> None:
    spec = FaultSpec(parse_slow_gpus("3:1.1"), hiccup=parse_hiccup("5:1ms"))
    res = podsim.simulate(ddp_step(16), cluster="dgx-h100", faults=spec)
    rows = {r["flag"]: r for r in res.faults["injected"]}
    assert rows["--slow-gpus"]["cost_ns"] == 150_000
    assert rows["--hiccup"]["cost_ns"] == 1_000_000
    # together: host 0 (rank 3 on it) 1 ms late, rank 3's compute 10% longer -- both on one path
    assert res.faults["cost_ns"] == 1_150_000
    assert res.faults["hiccup"]["typical_step_ns"] == rows["--slow-gpus"]["alone_step_ns"]


def test_trace_shows_the_fault_and_the_waits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = FaultSpec(parse_slow_gpus("3:1.1"))
    res = podsim.simulate(ddp_step(16), cluster="dgx-h100", faults=spec)
    slow = res.timelines[3]
    assert any(s.stream == "fault" and "1.1x" in s.name for s in slow)
    assert all(s.args.get("slowed") == 1.1 for s in slow if s.category == "compute")
    waits = [s for s in res.timelines[0] if s.stream == "wait"]
    assert [(s.name, s.start_ns, s.end_ns) for s in waits] == [("waiting for rank 3", FWD_NS, FWD_NS + 100_000)]
    assert not any(s.stream == "wait" for s in slow)
    from podsim.report import write_trace

    write_trace(res, tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    named = {(e["pid"], e["name"]) for e in events if e.get("ph") == "X"}
    assert (0, "waiting for rank 3") in named and (3, "slow GPU: computes 1.1x") in named


def test_faults_need_a_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="--slow-gpus: faults are injected on a cluster"):
        podsim.simulate(ddp_step(4), "system.json", "network.yml", faults=FaultSpec(parse_slow_gpus("1:2")))


def test_halved_nic_doubles_a_bandwidth_bound_all_reduce() -> None:
    # a ring across 2 DGX H100 servers: each GPU's channels cross its own 400 Gb/s NIC (50 GB/s,
    # link efficiency 0.94 in the preset), and every GPU sends 2(n-1)/n of the bytes.  With
    # GPU 5's NIC at half that, its share, 1/8 of a server's traffic, sets the pace: the time
    # that grows with the size (1 GiB more) is 2(n-1)/n x 1 GiB / 8 / (0.5 x 50 GB/s x 0.94)
    sizes = dict(min_bytes="1G", max_bytes="2G", algorithm="ring")
    ok = collective("all_reduce", "dgx-h100", 16, **sizes)
    bad = collective("all_reduce", "dgx-h100", 16, **sizes, faults=FaultSpec(slow_nics=parse_slow_nics("5:0.5")))
    grow_bad_us = bad.rows[1].time_us - bad.rows[0].time_us
    assert grow_bad_us == pytest.approx(2 * 15 / 16 * 2**30 / 8 / (0.5 * 50e9 * 0.94) * 1e6, rel=1e-4)
    # the healthy ring is NIC-bound too (to within 5%: latencies): the halved NIC doubles the whole time
    healthy_us = 2 * 15 / 16 * 2**31 / 8 / (50e9 * 0.94) * 1e6
    assert ok.rows[1].time_us == pytest.approx(healthy_us, rel=0.05)
    assert bad.rows[1].time_us / ok.rows[1].time_us == pytest.approx(2.0, rel=0.03)
    assert bad.faults["sizes"][1]["baseline_time_us"] == pytest.approx(ok.rows[1].time_us, abs=1e-3)


def test_a_slow_link_off_the_route_costs_nothing() -> None:
    # 2 DGX H100 servers hang off the same rail switches: a ring between them never climbs to a
    # spine, so a spine link at a tenth of its bandwidth changes nothing; the NIC it replaces does
    sizes = dict(min_bytes="1G", max_bytes="1G", algorithm="ring")
    ok = collective("all_reduce", "dgx-h100", 16, **sizes)
    spine = FaultSpec(slow_links=parse_slow_links("seg0.rail0<->spine0:0.1"))
    assert collective("all_reduce", "dgx-h100", 16, **sizes, faults=spine).rows[0].time_us == ok.rows[0].time_us
    nic = FaultSpec(slow_links=parse_slow_links("gpu0<->seg0.rail0:0.1"))
    assert collective("all_reduce", "dgx-h100", 16, **sizes, faults=nic).rows[0].time_us > 5 * ok.rows[0].time_us


def test_random_fraction_is_seeded_and_counts_right() -> None:
    a = SlowGpus("2%:1.2,seed=7", 1.2, fraction=0.02, seed=7).factors(1000)
    b = parse_slow_gpus("2%:1.2,seed=7").factors(1000)
    c = parse_slow_gpus("2%:1.2,seed=8").factors(1000)
    assert a == b and len(a) == 20 and set(a.values()) == {1.2}
    assert a != c
    spread = parse_slow_gpus("random:1.0-1.2,seed=1").factors(64)
    assert len(spread) == 64 and all(1.0 <= f <= 1.2 for f in spread.values())
    assert spread == parse_slow_gpus("random:1.0-1.2,seed=1").factors(64)


def test_llm_tensor_parallel_group_computes_at_its_slowest() -> None:
    model = zoo()["llama3-8b"]
    lay = Layout(gpus=16, tp=8, global_batch=16, seq_len=2048)
    ok = simulate_training(model, lay, "h100", record_timeline=False)
    bad = simulate_training(model, lay, "h100", faults=FaultSpec(parse_slow_gpus("3:1.1")))
    # the TP group of rank 3 (ranks 0..7) computes 1.1x; its compute grows by 10%
    slow = bad.result.ranks[0].compute_ns
    assert slow == pytest.approx(1.1 * ok.result.ranks[0].compute_ns, rel=1e-4)
    # its timeline's fused parts were re-laid at the new durations: their compute adds up to it
    from podsim.intervals import length, merged

    parts = [(x.start_ns, x.end_ns) for x in bad.result.timelines[3] if x.category == "compute"]
    assert length(merged(parts)) == bad.result.ranks[3].compute_ns
    assert bad.result.ranks[8].compute_ns == ok.result.ranks[8].compute_ns
    # and the step by at most 10% of its compute (the data-parallel all-reduce overlaps some)
    grow = bad.result.finish_ns - ok.result.finish_ns
    assert 0 < grow <= 0.1 * ok.result.ranks[0].compute_ns * 1.0001


def test_llm_without_faults_is_unchanged() -> None:
    model = zoo()["llama3-8b"]
    lay = Layout(gpus=16, tp=8, global_batch=16, seq_len=2048)
    a = simulate_training(model, lay, "h100", record_timeline=False)
    b = simulate_training(model, lay, "h100", record_timeline=False, faults=FaultSpec())
    assert a.result.finish_ns == b.result.finish_ns and a.result.info["simulated_ranks"] == 1
    # every rank simulated at factor 1 gives the representatives' answer
    c = simulate_training(model, lay, "h100", record_timeline=False, faults=FaultSpec(parse_slow_gpus("3:1.0")))
    assert c.result.finish_ns == a.result.finish_ns


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--slow-gpus", "16:1.1", "rank 16 does not exist: the job has 16 GPUs"),
        ("--slow-gpus", "3:0", "the factor must be a number > 0"),
        ("--slow-gpus", "3:nan", "the factor must be a number > 0"),
        ("--slow-gpus", "3", "expected RANKS:FACTOR"),
        ("--slow-gpus", "2%:1.2,sed=3", "unknown option 'sed=3'"),
        ("--slow-nics", "99:0.5", "rank 99 does not exist"),
        ("--slow-nics", "5:1.5", "must be <= 1"),
        ("--slow-links", "gpu0->spine9:0.5", "no link 'gpu0->spine9'"),
        ("--hiccup", "0:200ms", "EVERY an integer >= 1"),
        ("--hiccup", "10:200ms,host=9", "host 9 does not exist"),
    ],
)
def test_bad_fault_is_one_clear_line(flag: str, value: str, message: str, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    argv = ["llm", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "8", "--global-batch", "16"]
    argv += ["--seq-len", "1024", flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and flag in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_llm_json_has_the_faults_section(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    argv = ["llm", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "8", "--global-batch", "16"]
    argv += ["--seq-len", "1024", "--slow-gpus", "9:1.2", "--slow-nics", "0:0.5", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "faults (each fault simulated alone, then all 2 together)" in text
    doc = json.loads(out.read_text())
    f = doc["faults"]
    assert [r["flag"] for r in f["injected"]] == ["--slow-gpus", "--slow-nics"]
    assert f["step_ns"] > f["baseline_step_ns"] and f["injected"][0]["cost_ns"] > 0
    assert doc["inputs"]["slow-gpus"] == "9:1.2" and doc["inputs"]["slow-nics"] == "0:0.5"
    assert doc["faults"]["waits"]["waited_for"][0]["rank"] in range(8, 16)


def test_collective_refuses_compute_faults() -> None:
    with pytest.raises(InputError, match="only --slow-nics and --slow-links apply"):
        collective("all_reduce", "dgx-h100", 16, faults=FaultSpec(parse_slow_gpus("1:2")))


def test_sweep_points_take_the_fault_flags() -> None:
    from podsim.sweep.spec import spec_from_text
    from podsim.sweep.sweep import run_sweep

    text = """\
run: collective
fixed: {collective: all_reduce, cluster: dgx-h100, gpus: 16, algo: ring, size: 1G}
points: [{algo: ring}, {slow-nics: "5:0.5"}]
"""
    healthy, halved = run_sweep(spec_from_text(text, "sweep.yaml", None), workers=1).rows
    assert healthy["baseline_time_us"] is None
    assert halved["baseline_time_us"] == pytest.approx(healthy["time_us"], rel=1e-9)
    # the same hand derivation as above: one NIC at 25 GB/s x 0.94 paces the ring
    assert halved["time_us"] > 2 * 15 / 16 * 2**30 / 8 / (0.5 * 50e9 * 0.94) * 1e6
