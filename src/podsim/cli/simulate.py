"""podsim simulate: a workload on an ASTRA-sim machine or a cluster; a one-GPU trace taken to N GPUs."""

from __future__ import annotations

import argparse
import os

from ..api.jobs import SIMULATE_PARAMS, SimulateJob, echo
from ..api.simulate import run_job
from ..errors import InputError
from ..report.layers import layer_breakdown, write_layers_csv
from ..report.traces import format_layer_section
from .options import add_params, check_outputs, clear_progress_line, emit, progress_line

EPILOG_SIMULATE = """examples:
  podsim simulate --workload-configuration=traces/all_reduce \\
      --system-configuration=system.json --network-configuration=network.yml
  podsim simulate --workload-configuration=traces/all_reduce --cluster dgx-h100 --backend flow \\
      --trace trace.json          # NCCL-like collectives on a DGX H100 fabric, link counters
  podsim simulate --workload-configuration=w/llm --system-configuration=s.json \\
      --network-configuration=n.yml --remote-memory-configuration=m.json \\
      --json out/result.json --trace out/trace.json
  podsim simulate --triosim sample_trace/vgg13 --batch-size 128 --batch-size-sim 256 --gpus 4 \
      --parallel ddp --layers layers.csv --plot timeline.png   # TrioSim's flags, a one-GPU trace
  podsim simulate --pytorch traces/resnet50 --gpus 8 --parallel tp --trace tp.json
  podsim simulate --workload-configuration traces/ddp2 --cluster dgx-h100   # every rank of a capture
  podsim simulate --workload-configuration traces/ddp2 --cluster dgx-h100 --slow-gpus 1:1.1 \
      --hiccup 10:200ms --trace faults.json   # stragglers: their cost, who waits on whom (docs/faults.md)
  podsim simulate --workload vgg13 --format triosim --gpus 4 --parallel ddp   # any format, sniffed or named
  podsim simulate --triosim vgg13 --batch-size 128 --batch-size-sim 1024 --gpus 4 \
      --remote-bandwidth 64          # offload what does not fit in the GPU's memory at 64 GB/s

ASTRA-sim's flags are accepted unchanged (including --comm-group-configuration,
--num-queues-per-dim, --comm-scale, --injection-scale).  Times are integer ns."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"simulate": "_run_simulate"}


def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers): its flags are the parameters of
    :class:`~podsim.jobs.simulate.SimulateJob`."""
    s = sub.add_parser(
        "simulate",
        help="simulate a workload (Chakra, SimAI, TrioSim, PyTorch trace, ASTRA-sim 1.0 "
        "text) on an ASTRA-sim network or a cluster",
        epilog=EPILOG_SIMULATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params(s, SIMULATE_PARAMS)
    s.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _run_simulate(args: argparse.Namespace) -> int:
    check_outputs(args)
    job = SimulateJob.from_values(vars(args))
    layers_csv = job.one_gpu.layers
    if layers_csv and os.path.isdir(layers_csv):
        raise InputError(f"{layers_csv} is a folder; give the CSV file to write", where="--layers")
    progress = progress_line()
    try:
        outcome = run_job(job, progress=progress)
    finally:
        clear_progress_line(progress)
    res = outcome.result
    layers = layer_breakdown(res, 0) if outcome.one_gpu or (outcome.rank_layers and layers_csv) else None
    code = emit(res, args, echo(job))
    if layers is not None:
        print(format_layer_section(layers))
        if layers_csv:
            write_layers_csv(layers, layers_csv)
            print(f"  wrote {layers_csv}")
    return code
