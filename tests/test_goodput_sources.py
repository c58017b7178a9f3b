"""The shipped failure rates against the figures they cite (issue 30's check of the sources,
docs/goodput.md): Kokolis et al. 2024's RSC-1 rate and its projected job MTTFs, and the Llama 3
run's Table 5 counts as reported_goodput.csv groups them."""

from __future__ import annotations

import pytest

from podsim.reliability.rates import default_reliability
from podsim.validation.rows import shipped_rows

#: RSC-1's r_f: failures per node-day of 8 x A100 (6.50 per 1,000 node-days)
RSC1_PER_NODE_DAY = 6.50e-3


def _mttf_h(gpus: int) -> float:
    rates = default_reliability().job_rates_per_s(gpus, 8)
    return 1 / sum(rates.values()) / 3600


def test_the_default_rates_add_up_to_rsc1s_rate_and_its_projections() -> None:
    # by hand: 2,048 nodes x 6.50e-3 / 24 h = 0.555 failures an hour -> 1.80 h (the paper's 1.8 h);
    # 16,384 nodes -> 4.44 an hour -> 0.225 h (0.23 h); one node fails every 1 / 6.5e-3 = 153.8 days
    assert _mttf_h(16384) == pytest.approx(24 / (2048 * RSC1_PER_NODE_DAY), rel=2e-3)
    assert round(_mttf_h(16384), 1) == 1.8
    assert round(_mttf_h(131072), 2) == 0.23
    # a switch of 32 GPUs is counted whole: at 8 GPUs (one node under a whole switch) the
    # switch's 10% share counts 4x: 8 GPUs x 0.75 + host 0.15 x 8 + switch 0.10 x 32 = 10.4
    # GPU-rates instead of 8, so the node's 24 / 6.5e-3 = 3,692 h shrink to 3,692 x 8 / 10.4 h
    assert _mttf_h(8) == pytest.approx(24 / RSC1_PER_NODE_DAY * 8 / 10.4, rel=2e-3)


def test_llama3_table5_counts_group_into_the_reported_rows() -> None:
    # Table 5 of arXiv 2407.21783 (18 causes), grouped by podsim's kinds by hand
    table5 = {
        "gpu": 148 + 19 + 17 + 6 + 6,  # faulty GPU, SRAM, system processor, SDC, thermal + sensor
        "hbm": 72,
        "host": 32 + 3 + 3 + 2 + 2 + 2 + 2,  # maintenance, SSD, PSU, chassis, IO board, CPU, memory
        "nic": 7,
        "switch": 35,
        "software": 54 + 2 + 7,  # software bug, dependency, NCCL watchdog timeouts
    }
    rows = {r["metric"]: float(r["value"]) for r in shipped_rows(("reported",)) if r["row_id"].startswith("goodput_")}
    assert rows["interruptions"] == 419 == sum(table5.values())
    for kind, n in table5.items():
        assert rows[f"interruptions_{kind}"] == n
    assert rows["effective_training_pct"] == 90
