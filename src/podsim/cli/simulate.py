"""podsim simulate: a workload on an ASTRA-sim machine or a cluster; a one-GPU trace taken to N GPUs."""

from __future__ import annotations

import argparse
import os

from ..api.simulate import ParallelSpec, format_of, simulate, trace_formats
from ..errors import InputError
from ..report.layers import layer_breakdown, write_layers_csv
from ..report.traces import format_layer_section
from .options import (
    add_backend,
    add_cluster,
    add_outputs,
    check_outputs,
    clear_progress_line,
    count_arg,
    emit,
    positive_arg,
    progress_line,
)

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
  podsim simulate --workload vgg13 --format triosim --gpus 4 --parallel ddp   # any format, sniffed or named
  podsim simulate --triosim vgg13 --batch-size 128 --batch-size-sim 1024 --gpus 4 \
      --remote-bandwidth 64          # offload what does not fit in the GPU's memory at 64 GB/s

ASTRA-sim's flags are accepted unchanged (including --comm-group-configuration,
--num-queues-per-dim, --comm-scale, --injection-scale).  Times are integer ns."""


#: subcommand -> the name of its runner here (looked up when run, so that tests may replace one)
RUNNERS = {"simulate": "_run_simulate"}

def add_parser(sub) -> None:  # type: ignore[no-untyped-def]
    """Add this subcommand to ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("simulate", help="simulate a workload (Chakra, SimAI, TrioSim, PyTorch trace, ASTRA-sim 1.0 "
                       "text) on an ASTRA-sim network or a cluster",
                       epilog=EPILOG_SIMULATE, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--workload-configuration", "--workload", dest="workload_configuration", metavar="PATH",
                   help="the workload, in any trace format (sniffed; --format to name it): a Chakra ET prefix "
                        "(<PATH>.<rank>.et for every rank), an ASTRA-sim 1.0 text workload (.txt); with --cluster "
                        "also a SimAI/AICB .txt, a TrioSim trace directory, a podsim trace folder or a PyTorch "
                        "profiler (Kineto) .json; with --parallel, a one-GPU trace to run on --gpus GPUs")
    s.add_argument("--format", dest="trace_format", default=None, metavar="NAME",
                   help="the format of --workload, instead of sniffing it: " + ", ".join(trace_formats())
                        + " (docs/traces.md)")
    s.add_argument("--execution-trace", metavar="ET.json",
                   help="with a PyTorch profiler (Kineto) trace as the workload: its execution trace, linked "
                        "by record-function id (names, collective sizes)")
    s.add_argument("--whole-trace", action="store_true",
                   help="with a Kineto trace that has no ProfilerStep annotation: simulate all of it")
    s.add_argument("--triosim", metavar="DIR",
                   help="a TrioSim trace directory (trace.csv, tensor.csv) to run data parallel on --gpus "
                        "GPUs of --cluster (default dgx-h100)")
    s.add_argument("--pytorch", "--capture", metavar="DIR", dest="pytorch",
                   help="a podsim trace folder (kineto.json[.gz], et.json[.gz]) -- or a Kineto trace file with "
                        "--execution-trace -- to run in parallel on --gpus GPUs of --cluster (default dgx-h100)")
    s.add_argument("--gpu-memory", type=positive_arg, default=None, metavar="GIB",
                   help="with --triosim / --pytorch: memory per GPU in GiB (default: the cluster's GPU; TrioSim's "
                        "-capacity C is 2^C bytes)")
    s.add_argument("--remote-bandwidth", type=positive_arg, default=None, metavar="GBPS",
                   help="with --triosim / --pytorch: offload activations that do not fit to remote memory of this "
                        "bandwidth per GPU in GB/s (TrioSim's -bandwidth); without it a step that does not fit is "
                        "an error")
    s.add_argument("--layers", metavar="FILE.csv",
                   help="with --triosim / --pytorch: write the per-layer breakdown (forward, backward, optimizer, "
                        "comm, exposed comm; ns) of rank 0 as CSV")
    s.add_argument("--parallel", default=None, choices=["dp", "ddp", "tp", "pp"],
                   help="with --triosim / --pytorch: dp (one all-reduce after the backward), ddp (bucketed, "
                        "overlapped; default), tp (split convolutions / linear layers, all-reduce outputs) "
                        "or pp (one pipeline stage per GPU); with --workload: take its one-GPU step to --gpus "
                        "GPUs this way")
    s.add_argument("--micro-batch", "--micro-batch-size", dest="micro_batch_size", type=count_arg, default=None,
                   metavar="M",
                   help="with --parallel pp: micro-batch size (micro-batches = batch / M; default: one "
                        "micro-batch per stage)")
    s.add_argument("--schedule", "--pipeline-schedule", dest="pipeline_schedule", default="1f1b",
                   choices=["1f1b", "gpipe"],
                   help="with --parallel pp (default 1f1b)")
    s.add_argument("--dp", type=count_arg, default=1, metavar="D",
                   help="with --parallel pp: D data-parallel pipelines of --gpus / D stages each, gradients "
                        "all-reduced per stage (default 1)")
    s.add_argument("--bucket-mb", type=positive_arg, default=25.0, metavar="MB",
                   help="with --triosim --parallel ddp: gradient bucket size in MiB (default 25)")
    s.add_argument("--batch-size", type=count_arg, default=None, metavar="B",
                   help="with --triosim: the batch the trace was taken at (a --pytorch capture says it in "
                        "capture.json)")
    s.add_argument("--batch-size-sim", type=count_arg, default=None, metavar="B",
                   help="with --triosim: the batch per GPU to simulate (forward and backward times scale "
                        "with it; the optimizer and gradient sizes do not)")
    s.add_argument("--system-configuration", metavar="FILE", help="ASTRA-sim system JSON (optional with --cluster)")
    s.add_argument("--network-configuration", metavar="FILE", help="ASTRA-sim analytical network YAML")
    add_cluster(s, "run on a cluster (preset name or YAML) with NCCL-like collectives instead of an ASTRA-sim "
                   "network; rank r runs on GPU r")
    add_backend(s, "with --cluster")
    s.add_argument("--gpus", type=count_arg, default=None, metavar="N",
                   help="with --cluster and a SimAI .txt workload: GPUs to run it on (default: its all_gpus)")
    s.add_argument("--remote-memory-configuration", metavar="FILE", help="ASTRA-sim remote memory JSON")
    s.add_argument("--comm-group-configuration", metavar="FILE", default=None,
                   help="communicator groups JSON {id: [ranks]} ('empty' for none)")
    s.add_argument("--num-queues-per-dim", type=count_arg, default=1, metavar="N")
    s.add_argument("--comm-scale", type=positive_arg, default=1.0, metavar="X",
                   help="accepted and ignored, as ASTRA-sim 2.x does")
    s.add_argument("--injection-scale", type=positive_arg, default=1.0, metavar="X",
                   help="multiply endpoint-delay by X (when the system JSON sets it)")
    s.add_argument("--compute-scale", type=positive_arg, default=1.0, metavar="X", help=argparse.SUPPRESS)
    s.add_argument("--rendezvous-protocol", default=None, metavar="BOOL",
                   help="true: every message waits for an 8 KiB handshake from its receiver")
    s.add_argument("--logging-configuration", default=None, help=argparse.SUPPRESS)
    s.add_argument("--logging-folder", default=None, help=argparse.SUPPRESS)
    add_outputs(s)


def _run_simulate(args: argparse.Namespace) -> int:
    check_outputs(args)
    rv = (args.rendezvous_protocol or "false").lower()
    if rv not in ("0", "1", "false", "true"):
        raise InputError(f"expected true or false, got {args.rendezvous_protocol!r}", where="--rendezvous-protocol")
    if args.num_queues_per_dim < 1:
        raise InputError("must be >= 1", where="--num-queues-per-dim")
    groups = args.comm_group_configuration
    if groups is not None and "empty" in groups:
        groups = None
    workload, trace_format = args.workload_configuration, args.trace_format
    if args.layers and os.path.isdir(args.layers):
        raise InputError(f"{args.layers} is a folder; give the CSV file to write", where="--layers")
    one_gpu = bool(args.triosim or args.pytorch) or (bool(workload) and args.parallel is not None)
    if args.triosim or args.pytorch:
        if workload:
            raise InputError("give one of --workload-configuration, --triosim and --pytorch")
        if args.triosim and args.pytorch:
            raise InputError("give one trace: a TrioSim folder or a podsim trace folder")
        if trace_format is not None:
            raise InputError("--format names the format of --workload PATH; --triosim and --pytorch name their own",
                             where="--format")
        workload, trace_format = (args.triosim, "triosim") if args.triosim else (args.pytorch, "pytorch")
    elif not workload:
        raise InputError("missing --workload-configuration (or --triosim DIR, --pytorch DIR)")
    rank_layers = not one_gpu and format_of(workload, trace_format).layers
    if args.layers and not (one_gpu or rank_layers):
        raise InputError("per-layer breakdowns need a one-GPU trace to parallelize (--triosim DIR, --pytorch DIR, or "
                         "--workload PATH --parallel MODE) or a parallel job traced rank by rank (podsim trace "
                         "--world-size N --layout ...)", where="--layers")
    parallel = None
    if one_gpu:
        parallel = ParallelSpec(args.parallel or "ddp", args.gpus or 1, args.micro_batch_size, args.pipeline_schedule,
                                args.dp, args.bucket_mb, args.batch_size, args.batch_size_sim, args.gpu_memory,
                                args.remote_bandwidth)
    elif args.cluster is None:
        for flag, val in (("--system-configuration", args.system_configuration),
                          ("--network-configuration", args.network_configuration)):
            if val is None:
                raise InputError(f"missing {flag} (or give --cluster)")
    progress = progress_line()
    try:
        res = simulate(workload, args.system_configuration, args.network_configuration,
                       args.remote_memory_configuration, groups, num_queues_per_dim=args.num_queues_per_dim,
                       injection_scale=args.injection_scale, use_symmetry=not args.no_symmetry,
                       record_timeline=bool(args.trace or args.plot or args.layers),
                       progress=progress,
                       rendezvous=rv in ("1", "true"),
                       cluster=args.cluster, backend=args.backend, gpus=args.gpus,
                       execution_trace=args.execution_trace, whole_trace=args.whole_trace,
                       trace_format=trace_format, parallel=parallel)
    finally:
        clear_progress_line(progress)
    if args.comm_scale != 1.0:
        res.notes.append(f"--comm-scale {args.comm_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    if args.compute_scale != 1.0:
        res.notes.append(f"--compute-scale {args.compute_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    layers = layer_breakdown(res, 0) if one_gpu or (rank_layers and args.layers) else None
    code = emit(res, args)
    if layers is not None:
        print(format_layer_section(layers))
        if args.layers:
            write_layers_csv(layers, args.layers)
            print(f"  wrote {args.layers}")
    return code
