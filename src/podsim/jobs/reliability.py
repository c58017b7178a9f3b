"""The reliability and checkpoint options of a training run's goodput (``podsim goodput``, and
``podsim llm --goodput`` / ``podsim search --goodput``): how long the run is, the failure
rates, the checkpoints and the restarts.  Each declared once, here, with its unit."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Param, param
from ..reliability.checkpoint import MODES

#: the defaults that are podsim's assumptions (docs/goodput.md says why)
STORAGE_GBPS = 200.0
SNAPSHOT_GBPS = 25.0
DETECT_S = 300.0
RESCHEDULE_S = 600.0
WARMUP_S = 300.0
HOT_SPARE_S = 60.0
SAMPLES = 1000
#: a GPU's NIC when the cluster names none (bytes/s): 400 Gb/s, for in-memory checkpoints
NIC_BYTES_PER_S = 50e9

#: ``--train-tokens``: declared once, here; ``podsim search`` takes it with a help of its own
TRAIN_TOKENS = Param(
    "train-tokens",
    "number",
    metavar="N",
    help="the run trains N tokens (e.g. 15e12); give it or --days",
)


@dataclass(frozen=True)
class GoodputOptions:
    """How long the run is, how often it fails, how it checkpoints and restarts."""

    days: float | None = param(
        Param(
            "days",
            "number",
            metavar="D",
            unit="days",
            help="the run lasts D days of wall clock (its time to train is then that of the tokens those days train)",
        )
    )
    train_tokens: float | None = param(TRAIN_TOKENS)
    reliability: str | None = param(
        Param(
            "reliability",
            "path",
            metavar="FILE.yaml",
            help="failure rates by kind replacing the shipped defaults' (docs/goodput.md)",
        )
    )
    checkpoint_interval: float | None = param(
        Param(
            "checkpoint-interval",
            "number",
            metavar="S",
            unit="s",
            help="training time between checkpoints in s (default: the interval that maximises goodput)",
        )
    )
    checkpoint_mode: str = param(
        Param(
            "checkpoint-mode",
            "choice",
            "sync",
            MODES,
            help="sync: training waits for the write; async: only for a snapshot to host memory; memory: "
            "in-memory checkpoints on a peer node",
        )
    )
    storage_bandwidth: float = param(
        Param(
            "storage-bandwidth",
            "number",
            STORAGE_GBPS,
            metavar="GB/s",
            unit="GB/s",
            help=f"the storage's aggregate write bandwidth in GB/s (10^9 B/s; default {STORAGE_GBPS:g})",
        )
    )
    storage_read_bandwidth: float | None = param(
        Param(
            "storage-read-bandwidth",
            "number",
            metavar="GB/s",
            unit="GB/s",
            help="the storage's aggregate read bandwidth in GB/s (default: --storage-bandwidth)",
        )
    )
    snapshot_bandwidth: float = param(
        Param(
            "snapshot-bandwidth",
            "number",
            SNAPSHOT_GBPS,
            metavar="GB/s",
            unit="GB/s",
            help=f"one GPU's device-to-host copy for async snapshots in GB/s (default {SNAPSHOT_GBPS:g})",
        )
    )
    detect: float = param(
        Param(
            "detect",
            "nonneg",
            DETECT_S,
            metavar="S",
            unit="s",
            help=f"time to notice a failure in s (a crash at once, a hang at the watchdog's timeout; "
            f"default {DETECT_S:g})",
        )
    )
    reschedule: float = param(
        Param(
            "reschedule",
            "nonneg",
            RESCHEDULE_S,
            metavar="S",
            unit="s",
            help=f"time to swap a failed node for a healthy one in s (default {RESCHEDULE_S:g})",
        )
    )
    warmup: float = param(
        Param(
            "warmup",
            "nonneg",
            WARMUP_S,
            metavar="S",
            unit="s",
            help=f"time to start the job again before the restore in s (processes, communicators; "
            f"default {WARMUP_S:g})",
        )
    )
    hot_spare: float = param(
        Param(
            "hot-spare",
            "nonneg",
            HOT_SPARE_S,
            metavar="S",
            unit="s",
            help=f"the what-if with hot spares: time to swap in a warm spare in s (default {HOT_SPARE_S:g})",
        )
    )
    seed: int = param(Param("seed", "natural", 0, metavar="S", help="the Monte Carlo's seed (default 0)"))
    samples: int = param(
        Param("samples", "count", SAMPLES, metavar="N", help=f"Monte Carlo runs (default {SAMPLES}, at most 100000)")
    )
