"""Checkpoints of a training job: how many bytes, and how long they block training and take to restore.

**State.**  A checkpoint holds the weights and the optimizer states (not the gradients): per
parameter 2 + 12 bytes with mixed precision and Adam (bf16 weights; fp32 master weights, first
and second moments), 4 + 8 with fp32 training (:func:`podsim.llm.memory.bytes_per_param`
unsharded).  The job writes each parameter's state once (data-parallel replicas hold the same
weights), so the whole checkpoint is ``total_params x (w + o)`` bytes; one GPU holds its shard
``weights + optimizer`` of its pipeline stage (:func:`podsim.llm.memory.memory`, the largest
stage's).

**Modes** (``sync``, ``async``, ``memory``), with ``S`` the whole state, ``s`` one GPU's:

* ``sync``: training stops while every GPU writes its shard: blocks ``S / write bandwidth``
  (the storage's aggregate write bandwidth, bytes/s);
* ``async``: training stops only while each GPU copies its shard to host memory (``s /
  snapshot bandwidth``, device to host), then the write runs in the background for ``S / write
  bandwidth`` (the durability lag: a failure within it falls back to the checkpoint before);
* ``memory``: in-memory checkpoints (each GPU's shard copied to a peer node's host memory over
  the network, as Gemini does): blocks ``s / NIC bandwidth``; a restart reads the shard back the
  same way instead of from storage (what persists to storage now and then is not counted).

A restart restores ``S / read bandwidth`` (sync, async) or ``s / NIC bandwidth`` (memory).
Times are float seconds (statistical expectations over hours, not event times); sizes int bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..llm.layout import Layout
from ..llm.memory import bytes_per_param, memory
from ..llm.model import ModelConfig

MODES = ("sync", "async", "memory")


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint holds.

    Attributes:
        total_bytes: the whole checkpoint (every parameter's weights and optimizer states once).
        per_gpu_bytes: one GPU's shard (the largest pipeline stage's weights + optimizer).
    """

    total_bytes: int
    per_gpu_bytes: int


@dataclass(frozen=True)
class CheckpointCost:
    """What checkpointing costs a run, in seconds.

    Attributes:
        mode: one of :data:`MODES`.
        blocking_s: training stopped per checkpoint.
        write_s: from the start of a checkpoint until it is durable (async: its lag).
        restore_s: reading the state back after a failure.
    """

    mode: str
    blocking_s: float
    write_s: float
    restore_s: float

    @property
    def lag_s(self) -> float:
        """How long after its snapshot a checkpoint becomes the one a failure falls back to
        (0 unless async): a failure within the lag loses one interval more, so each failure
        loses ``lag_s`` more on average (when the lag is shorter than the interval)."""
        return self.write_s if self.mode == "async" else 0.0


def checkpoint_state(model: ModelConfig, layout: Layout) -> CheckpointState:
    """The checkpoint of ``model`` trained under ``layout`` (see the module docstring)."""
    w, _, o = bytes_per_param(layout, shards=1)
    total = int(model.total_params() * (w + o))
    per_gpu = max(int(s.weights + s.optimizer) for s in memory(model, layout))
    return CheckpointState(total, per_gpu)


def _positive(value: float, flag: str, what: str) -> float:
    if not (value > 0 and value < float("inf")):
        raise InputError(f"expected a finite {what} > 0, got {value!r}", where=flag)
    return value


def checkpoint_cost(
    state: CheckpointState,
    mode: str,
    write_bytes_per_s: float,
    read_bytes_per_s: float,
    snapshot_bytes_per_s: float,
    nic_bytes_per_s: float,
) -> CheckpointCost:
    """The cost of checkpointing ``state`` in ``mode`` (bandwidths in bytes/s: the storage's
    aggregate write and read, one GPU's device-to-host copy, one GPU's NIC).

    Raises:
        InputError: an unknown mode, a bandwidth that is not a finite number > 0."""
    if mode not in MODES:
        raise InputError(f"expected one of {', '.join(MODES)}, got {mode!r}", where="--checkpoint-mode")
    write = _positive(write_bytes_per_s, "--storage-bandwidth", "bandwidth")
    read = _positive(read_bytes_per_s, "--storage-read-bandwidth", "bandwidth")
    snap = _positive(snapshot_bytes_per_s, "--snapshot-bandwidth", "bandwidth")
    nic = _positive(nic_bytes_per_s, "--nic-bandwidth", "bandwidth")
    to_storage = state.total_bytes / write
    from_storage = state.total_bytes / read
    if mode == "sync":
        return CheckpointCost(mode, to_storage, to_storage, from_storage)
    if mode == "async":
        return CheckpointCost(mode, state.per_gpu_bytes / snap, to_storage, from_storage)
    peer = state.per_gpu_bytes / nic
    return CheckpointCost(mode, peer, peer, peer)
