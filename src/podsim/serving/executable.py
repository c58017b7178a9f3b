"""A served model's executable (DLSIM's word): one way to run it, as pipeline stages of GPUs with
each stage's latency for one request.  Profiles (:mod:`.profiles`) read them from YAML,
:mod:`.estimate` computes them from podsim's compute model, the simulator places and runs them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Executable:
    """One way to run ``model``: stage shapes and per-stage latencies (ns) for one request."""

    name: str
    model: str
    stage_shapes: tuple[tuple[int, int], ...]
    stage_latencies_ns: tuple[int, ...]
    weight_bytes: int = 0  #: the model's weights, all stages together
    #: bytes one GPU of each stage needs, when known (estimated executables: weights + activations)
    stage_gpu_bytes: tuple[int, ...] = ()

    @property
    def num_stages(self) -> int:
        return len(self.stage_shapes)

    def gpus(self, stage: int) -> int:
        nodes, per_node = self.stage_shapes[stage]
        return nodes * per_node

    def weight_bytes_per_gpu(self, stage: int) -> int:
        """Memory one GPU of ``stage`` needs: as estimated, or the stage's share of the weights
        (stages split the layers evenly) split again over the stage's GPUs."""
        if self.stage_gpu_bytes:
            return self.stage_gpu_bytes[stage]
        return self.weight_bytes // self.num_stages // self.gpus(stage)
