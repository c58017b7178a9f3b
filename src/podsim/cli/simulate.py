"""podsim simulate: a workload on an ASTRA-sim machine or a cluster; a one-GPU trace taken to N GPUs."""

from __future__ import annotations

import argparse
import os

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
    s.add_argument("--workload-configuration", metavar="PREFIX",
                   help="Chakra ET prefix: <PREFIX>.<rank>.et for every rank; or an ASTRA-sim 1.0 text "
                        "workload (.txt); with --cluster also a SimAI/AICB .txt, a TrioSim trace directory or a "
                        "PyTorch profiler (Kineto) .json")
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
    s.add_argument("--parallel", default="ddp", choices=["dp", "ddp", "tp", "pp"],
                   help="with --triosim / --pytorch: dp (one all-reduce after the backward), ddp (bucketed, "
                        "overlapped; default), tp (split convolutions / linear layers, all-reduce outputs) "
                        "or pp (one pipeline stage per GPU)")
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
    s.add_argument("--comm-scale", type=positive_arg, default=1.0, metavar="X", help="accepted and ignored, as ASTRA-sim 2.x does")
    s.add_argument("--injection-scale", type=positive_arg, default=1.0, metavar="X", help="multiply endpoint-delay by X (when the system JSON sets it)")
    s.add_argument("--compute-scale", type=positive_arg, default=1.0, metavar="X", help=argparse.SUPPRESS)
    s.add_argument("--rendezvous-protocol", default=None, metavar="BOOL",
                   help="true: every message waits for an 8 KiB handshake from its receiver")
    s.add_argument("--logging-configuration", default=None, help=argparse.SUPPRESS)
    s.add_argument("--logging-folder", default=None, help=argparse.SUPPRESS)
    add_outputs(s)


def _run_simulate(args: argparse.Namespace) -> int:
    from ..api import simulate
    from ..errors import InputError

    check_outputs(args)
    rv = (args.rendezvous_protocol or "false").lower()
    if rv not in ("0", "1", "false", "true"):
        raise InputError(f"expected true or false, got {args.rendezvous_protocol!r}", where="--rendezvous-protocol")
    if args.num_queues_per_dim < 1:
        raise InputError("must be >= 1", where="--num-queues-per-dim")
    groups = args.comm_group_configuration
    if groups is not None and "empty" in groups:
        groups = None
    workload = args.workload_configuration
    parallel_step = None
    memory_note = None
    remote = args.remote_memory_configuration
    if args.layers and os.path.isdir(args.layers):
        raise InputError(f"{args.layers} is a folder; give the CSV file to write", where="--layers")
    from ..formats.rank_traces import is_rank_trace
    rank_trace = bool(workload) and is_rank_trace(workload)
    if args.layers and not (args.triosim or args.pytorch or rank_trace):
        raise InputError("per-layer breakdowns need a one-GPU trace to parallelize (--triosim DIR or --pytorch DIR) "
                         "or a parallel job traced rank by rank (podsim trace --world-size N --layout ...)",
                         where="--layers")
    if args.triosim or args.pytorch:
        from ..parallelize import load_step, parallelize
        if workload:
            raise InputError("give one of --workload-configuration, --triosim and --pytorch")
        parallel_step = load_step(args.triosim, args.pytorch, args.whole_trace, args.batch_size, args.batch_size_sim,
                                  args.execution_trace)
        args.cluster = args.cluster or "dgx-h100"
        parallel_step, memory_note, remote = _fit_memory(parallel_step, args)
        workload = parallelize(parallel_step, args.parallel, args.gpus or 1,
                               batch=parallel_step.batch, micro_batch=args.micro_batch_size,
                               bucket_bytes=int(args.bucket_mb * 2**20), pipeline_schedule=args.pipeline_schedule,
                               pp_replicas=args.dp)
    elif not workload:
        raise InputError("missing --workload-configuration (or --triosim DIR, --pytorch DIR)")
    if args.cluster is None:
        for flag, val in (("--system-configuration", args.system_configuration),
                          ("--network-configuration", args.network_configuration)):
            if val is None:
                raise InputError(f"missing {flag} (or give --cluster)")
    progress = progress_line()
    try:
        res = simulate(workload, args.system_configuration, args.network_configuration,
                       remote, groups, num_queues_per_dim=args.num_queues_per_dim,
                       injection_scale=args.injection_scale, use_symmetry=not args.no_symmetry,
                       record_timeline=bool(args.trace or args.plot or args.layers) or parallel_step is not None,
                       progress=progress,
                       rendezvous=rv in ("1", "true"),
                       cluster=args.cluster, backend=args.backend, gpus=args.gpus,
                       execution_trace=args.execution_trace, whole_trace=args.whole_trace)
    finally:
        clear_progress_line(progress)
    layers = None
    if parallel_step is not None:
        from ..parallelize import summary
        from ..report.layers import layer_breakdown
        mode = f"pp x dp {args.dp}" if args.parallel == "pp" and args.dp > 1 else args.parallel
        res.notes.append(summary(parallel_step, mode, res.num_ranks, max(r.finish_ns for r in res.ranks)))
        res.notes.append(memory_note)
        layers = layer_breakdown(res, 0)
        res.info["layers"] = [{"layer": r.layer, "forward_ns": r.forward_ns, "backward_ns": r.backward_ns,
                               "optimizer_ns": r.optimizer_ns, "comm_ns": r.comm_ns,
                               "exposed_comm_ns": r.exposed_comm_ns} for r in layers]
    if args.comm_scale != 1.0:
        res.notes.append(f"--comm-scale {args.comm_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    if args.compute_scale != 1.0:
        res.notes.append(f"--compute-scale {args.compute_scale:g} was ignored, as ASTRA-sim 2.x ignores it")
    if rank_trace and args.layers:
        from ..report.layers import layer_breakdown
        layers = layer_breakdown(res, 0)
    code = emit(res, args)
    if layers is not None:
        from ..report.layers import format_layers, write_layers_csv
        print(f"\n  per layer, rank 0 ({len(layers)} layers; the 15 longest by compute + exposed comm):")
        print(format_layers(layers))
        if args.layers:
            write_layers_csv(layers, args.layers)
            print(f"  wrote {args.layers}")
    return code


def _fit_memory(step, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """(step with offloads marked, a note on memory per GPU, remote memory config or None)."""
    from ..errors import InputError
    from ..formats.astra_sim.remote_memory import RemoteMemoryConfig
    from ..hardware.cluster import load_cluster
    from ..parallelize import fit_memory
    from ..parallelize.plan import micro_batches

    if args.gpu_memory is not None:
        if args.gpu_memory <= 0:
            raise InputError(f"expected a positive number of GiB, got {args.gpu_memory:g}", where="--gpu-memory")
        capacity, source = int(args.gpu_memory * 2**30), "--gpu-memory"
    else:
        spec = load_cluster(args.cluster)
        if spec.gpu_memory_bytes is None:
            raise InputError(f"the cluster {args.cluster} names no GPU type: give --gpu-memory GIB", where="--cluster")
        capacity, source = int(spec.gpu_memory_bytes), spec.gpu
    if args.remote_bandwidth is not None and args.remote_bandwidth <= 0:
        raise InputError(f"expected a positive bandwidth in GB/s, got {args.remote_bandwidth:g}",
                         where="--remote-bandwidth")
    gpus = args.gpus or 1
    micro = micro_batches(gpus // max(args.dp, 1), step.batch, args.micro_batch_size) if args.parallel == "pp" else 1
    step, fp = fit_memory(step, args.parallel, gpus, capacity, offload=args.remote_bandwidth is not None,
                          micro_batches=micro, pipeline_schedule=args.pipeline_schedule, pp_replicas=args.dp)
    offloaded = sum(o.offload_bytes for o in step.ops)
    note = f"memory per GPU: {fp.describe()} of {capacity / 2**30:.2f} GiB ({source})"
    remote = args.remote_memory_configuration
    if offloaded:
        note += f"; {offloaded / 2**30:.2f} GiB of activations offloaded at {args.remote_bandwidth:g} GB/s"
        remote = RemoteMemoryConfig("PER_NODE_MEMORY_EXPANSION", 0.0, args.remote_bandwidth, None, 1,
                                    "--remote-bandwidth")
    return step, note, remote
