"""The ``podsim`` command line.  It parses arguments and calls the API, nothing more."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

from . import __version__

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

EPILOG_SERVE = """examples:
  podsim serve -n 1 -d 2 -c 16 -w test_workload_8to2_6.667Hz_20s -p placement_intraop.json --chrome_trace
  podsim serve --cluster dgx-a100-superpod -w w.csv -p placement.yaml --scheduler least-outstanding \\
      --json out.json --cdf latency.png
  podsim serve --closed-loop 8,2 --think-ms 50 --duration 60 --slos 0.25 -p placement_intraop.json

Model i of the workload goes to the i-th service of the placement (in order of first
appearance).  Latencies in ms; SLO attainment counts dropped requests as misses."""

EPILOG_SERVE_WORKLOAD = """examples:
  podsim serve-workload generate --models 2 --rate 6.667 --proportions 0.8,0.2 --duration 20 \\
      --slos 0.25 -o skewed.csv                       # DLSIM's generator (Poisson)
  podsim serve-workload generate --models 4 --rates 8,4,2,1 --cv 4 --duration 60 -o bursty.csv

Arrivals start at t = 0 (DLSIM's convention); the file is DLSIM's workload CSV."""

EPILOG_EXAMPLE = """examples:
  podsim example                 # the 1 MiB all-reduce on 8 NPUs (117,780 ns)
  podsim example layers --trace trace.json
  podsim example cluster --trace trace.json   # two DGX A100s, flow backend: link load counters
  podsim example --list"""


EPILOG_LLM = """examples:
  podsim llm --model gpt3-175b --gpu a100-80gb --gpus 1024 --tp 8 --pp 16 --global-batch 1536 \\
      --recompute selective --sequence-parallel --distributed-optimizer
  podsim llm --model llama3-70b --gpu h100-80gb --gpus 512 --tp 8 --pp 4 --vpp 5 \\
      --global-batch 512 --seq-len 8192 --json run.json --trace run.trace.json
  podsim llm --model-config config.json --gpu h100 --gpus 64 --tp 8 --global-batch 64
  podsim llm --model llama3-405b --gpu h100 --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 \\
      --last-stage-layers 7 --global-batch 2048 --seq-len 8192 --backend flow
  podsim llm --model llama3-405b --gpu h100 --gpus 8192 --tp 8 --pp 8 --vpp 8 \\
      --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \\
      --global-batch 2048 --seq-len 8192 --sequence-parallel --distributed-optimizer --backend flow
  podsim llm --model llama3-8b --gpu h100 --gpus 64 --fsdp --global-batch 64 --seq-len 8192
  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 32 --kernel-table measured
  podsim llm --model llama3-70b --gpu h100 --gpus 64 --tp 8 --sequence-parallel --global-batch 64 \
      --precision fp8 --kernels          # where a step's time goes, kernel by kernel
  podsim llm --model gpt3-13b --gpus 128 --tp 8 --global-batch 128 --simai w.txt --chakra et/gpt

DP = GPUs / (TP x PP x CP).  Model TFLOP/s and MFU use the model-FLOPs formula in docs/llm.md
(forward + backward, no recomputation); times in s, memory in GiB."""

EPILOG_COLLECTIVE = """examples:
  podsim collective all_reduce --cluster dgx-a100-superpod --gpus 16 -b 1K -e 4G
  podsim collective all_gather --cluster my_cluster.yaml --gpus 64 --backend flow --json ag.json
  podsim collective all_reduce --cluster dgx-h100 --gpus 8 --algo nvls
  podsim collective --list-clusters

busbw follows nccl-tests: algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather,
reduce_scatter and all_to_all.  Sizes: 1K = 1024 B, 4G = 4 GiB (or "16 MB" = 16e6 B).
GB/s = 1e9 B/s."""


#: ranks a Perfetto trace holds unless --trace-ranks says otherwise (every subcommand)
TRACE_RANKS = 64


def _announce(message: str) -> None:
    """A note on stderr before a long or large write."""
    print(f"podsim: {message}", file=sys.stderr, flush=True)


def _add_outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="OUT", help="write the result as JSON (fields: docs/outputs.md)")
    p.add_argument("--trace", metavar="OUT", help="write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev)")
    p.add_argument("--trace-ranks", type=_count, default=TRACE_RANKS, metavar="N",
                   help=f"ranks to include in the trace (default {TRACE_RANKS})")
    p.add_argument("--plot", metavar="OUT.png",
                   help="draw the first ranks' timeline as a PNG (needs matplotlib: pip install podsim[plot])")
    p.add_argument("--plot-ranks", type=_count, default=4, metavar="N", help="ranks to draw with --plot (default 4)")
    p.add_argument("--no-symmetry", action="store_true",
                   help="simulate every rank even when ranks are provably equivalent")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")



# -- argument types: every number a flag takes is checked here, the same way in every subcommand --

def _number(text: str, integer: bool, low: float, low_open: bool, what: str) -> float:
    """``text`` as an integer or a finite float from ``low`` (excluded when ``low_open``) up to
    2^31 (integers) or 1e15, else argparse's one-line error saying ``what`` was expected."""
    import math
    try:
        v: float = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    high = 2**31 if integer else 1e15
    if not (math.isfinite(v) and (v > low if low_open else v >= low) and v <= high):
        raise argparse.ArgumentTypeError(f"expected {what} (up to {high:.3g}), got {text!r}")
    return v


def _count(text: str) -> int:
    """A positive integer (a count of GPUs, layers, tokens...), at most 2^31."""
    return int(_number(text, True, 1, False, "a positive integer"))


def _natural(text: str) -> int:
    """A non-negative integer (a seed, a layer count that may be 0), at most 2^31."""
    return int(_number(text, True, 0, False, "an integer >= 0"))


def _positive(text: str) -> float:
    """A finite number > 0 (a size, a bandwidth, a duration, a rate, a scale)."""
    return _number(text, False, 0, True, "a finite number > 0")


def _non_negative(text: str) -> float:
    """A finite number >= 0."""
    return _number(text, False, 0, False, "a finite number >= 0")

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podsim", description="Simulate distributed deep-learning jobs on GPU clusters.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="run 'podsim COMMAND --help' for a command's options and examples")
    parser.add_argument("--version", action="version", version=f"podsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
    s.add_argument("--gpu-memory", type=_positive, default=None, metavar="GIB",
                   help="with --triosim / --pytorch: memory per GPU in GiB (default: the cluster's GPU; TrioSim's "
                        "-capacity C is 2^C bytes)")
    s.add_argument("--remote-bandwidth", type=_positive, default=None, metavar="GBPS",
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
    s.add_argument("--micro-batch", "--micro-batch-size", dest="micro_batch_size", type=_count, default=None,
                   metavar="M",
                   help="with --parallel pp: micro-batch size (micro-batches = batch / M; default: one "
                        "micro-batch per stage)")
    s.add_argument("--schedule", "--pipeline-schedule", dest="pipeline_schedule", default="1f1b",
                   choices=["1f1b", "gpipe"],
                   help="with --parallel pp (default 1f1b)")
    s.add_argument("--dp", type=_count, default=1, metavar="D",
                   help="with --parallel pp: D data-parallel pipelines of --gpus / D stages each, gradients "
                        "all-reduced per stage (default 1)")
    s.add_argument("--bucket-mb", type=_positive, default=25.0, metavar="MB",
                   help="with --triosim --parallel ddp: gradient bucket size in MiB (default 25)")
    s.add_argument("--batch-size", type=_count, default=None, metavar="B",
                   help="with --triosim: the batch the trace was taken at (a --pytorch capture says it in "
                        "capture.json)")
    s.add_argument("--batch-size-sim", type=_count, default=None, metavar="B",
                   help="with --triosim: the batch per GPU to simulate (forward and backward times scale "
                        "with it; the optimizer and gradient sizes do not)")
    s.add_argument("--system-configuration", metavar="FILE", help="ASTRA-sim system JSON (optional with --cluster)")
    s.add_argument("--network-configuration", metavar="FILE", help="ASTRA-sim analytical network YAML")
    s.add_argument("--cluster", metavar="PRESET_OR_YAML",
                   help="run on a cluster (preset name or YAML) with NCCL-like collectives instead of an "
                        "ASTRA-sim network; rank r runs on GPU r")
    s.add_argument("--backend", default="analytical", choices=["analytical", "flow"],
                   help="with --cluster: analytical (no contention) or flow (max-min fair links)")
    s.add_argument("--gpus", type=_count, default=None, metavar="N",
                   help="with --cluster and a SimAI .txt workload: GPUs to run it on (default: its all_gpus)")
    s.add_argument("--remote-memory-configuration", metavar="FILE", help="ASTRA-sim remote memory JSON")
    s.add_argument("--comm-group-configuration", metavar="FILE", default=None,
                   help="communicator groups JSON {id: [ranks]} ('empty' for none)")
    s.add_argument("--num-queues-per-dim", type=_count, default=1, metavar="N")
    s.add_argument("--comm-scale", type=_positive, default=1.0, metavar="X", help="accepted and ignored, as ASTRA-sim 2.x does")
    s.add_argument("--injection-scale", type=_positive, default=1.0, metavar="X", help="multiply endpoint-delay by X (when the system JSON sets it)")
    s.add_argument("--compute-scale", type=_positive, default=1.0, metavar="X", help=argparse.SUPPRESS)
    s.add_argument("--rendezvous-protocol", default=None, metavar="BOOL",
                   help="true: every message waits for an 8 KiB handshake from its receiver")
    s.add_argument("--logging-configuration", default=None, help=argparse.SUPPRESS)
    s.add_argument("--logging-folder", default=None, help=argparse.SUPPRESS)
    _add_outputs(s)

    i = sub.add_parser("inspect", help="summarize Chakra traces: nodes by type, dependencies, durations",
                       epilog="examples:\n  podsim inspect traces/llm            # <prefix>: every <prefix>.<rank>.et\n"
                              "  podsim inspect traces/llm.0.et --json summary.json\n\n"
                              "Durations are in microseconds, Chakra's own unit.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("trace", help="a .et file, or a prefix of <prefix>.<rank>.et files")
    i.add_argument("--ranks", type=_count, default=4, metavar="N", help="how many rank files to summarize (default 4)")
    i.add_argument("--json", metavar="OUT", help="write the summaries as JSON (fields: docs/outputs.md)")
    i.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    c = sub.add_parser("collective", help="nccl-tests in simulation: time a collective over a range of sizes",
                       epilog=EPILOG_COLLECTIVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("name", nargs="?", help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv")
    c.add_argument("--cluster", metavar="PRESET_OR_YAML", help="a preset name (--list-clusters) or a cluster YAML file")
    c.add_argument("--gpus", "-g", type=_count, metavar="N", help="number of GPUs")
    c.add_argument("--min-bytes", "-b", default="1K", metavar="SIZE", help="smallest size (default 1K)")
    c.add_argument("--max-bytes", "-e", default="1G", metavar="SIZE", help="largest size (default 1G)")
    c.add_argument("--factor", "-f", type=_count, default=2, metavar="X", help="size multiplier (default 2)")
    c.add_argument("--backend", default="analytical", choices=["analytical", "flow"],
                   help="analytical: busiest-link closed form; flow: max-min fair flows (default analytical)")
    c.add_argument("--dtype", "-d", default="float", metavar="TYPE", help="element type for the count column (default float)")
    c.add_argument("--algo", default=None, metavar="ALGO", help="force an algorithm (ring, tree, nvls, hierarchical)")
    c.add_argument("--proto", default=None, metavar="PROTO", help="force a protocol (LL, LL128, Simple)")
    c.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    c.add_argument("--list", "--list-clusters", dest="list_clusters", action="store_true",
                   help="list the shipped cluster presets")
    c.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    lm = sub.add_parser("llm", help="simulate one training iteration of an LLM under a parallel layout",
                        epilog=EPILOG_LLM, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = lm.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="NAME", help="a zoo model (--list shows them)")
    src.add_argument("--model-config", metavar="FILE", help="a HuggingFace-style config.json")
    src.add_argument("--list", action="store_true", help="list the zoo's models and the GPUs, then exit")
    lm.add_argument("--gpu", default="a100-80gb", metavar="NAME",
                    help="a GPU key or alias (see --list): v100-32gb, a100-40gb, a100-80gb, h100-80gb, h200, "
                         "b200, b300, gb200, gb300, mi300x")
    lm.add_argument("--gpus", type=_count, metavar="N", help="GPUs in the job (required)")
    lm.add_argument("--tp", type=_count, default=1, metavar="T")
    lm.add_argument("--pp", type=_count, default=1, metavar="P")
    lm.add_argument("--vpp", type=_count, default=1, metavar="V", help="virtual stages per pipeline rank (interleaved 1F1B)")
    lm.add_argument("--first-stage-layers", "--decoder-first-pipeline-num-layers", type=_natural, default=None,
                    metavar="L", help="uneven pipeline split: layers on the first pipeline rank (with --vpp V, "
                                      "a multiple of V, split evenly over its virtual stages)")
    lm.add_argument("--last-stage-layers", "--decoder-last-pipeline-num-layers", type=_natural, default=None,
                    metavar="L", help="uneven pipeline split: layers on the last pipeline rank (likewise)")
    lm.add_argument("--account-for-embedding-in-pipeline-split", action="store_true",
                    help="count the embedding as one layer of the split: the first virtual stage gets one "
                         "transformer layer fewer")
    lm.add_argument("--account-for-loss-in-pipeline-split", action="store_true",
                    help="count the loss (output layer) as one layer of the split: the last virtual stage gets "
                         "one transformer layer fewer")
    lm.add_argument("--pipeline-layers", metavar="N,N,...",
                    help="explicit split: layers per virtual stage, PP x VPP numbers (chunk 0 of ranks 0..PP-1, "
                         "then chunk 1, ...)")
    lm.add_argument("--ep", type=_count, default=1, metavar="E")
    lm.add_argument("--cp", type=_count, default=1, metavar="C")
    lm.add_argument("--global-batch", type=_count, metavar="B", help="sequences per iteration (required)")
    lm.add_argument("--micro-batch", "--micro-batch-size", dest="micro_batch", type=_count, default=1, metavar="M")
    lm.add_argument("--seq-len", type=_count, default=None, metavar="S", help="default: the model's")
    lm.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    lm.add_argument("--recompute-modules", default="core_attn", metavar="M,M,...",
                    help="selective recompute's modules: core_attn (default), act, mlp, layernorm")
    lm.add_argument("--recompute-num-layers", type=_count, default=None, metavar="N",
                    help="full recompute of only the first N layers of each virtual stage (Megatron's block "
                         "method)")
    lm.add_argument("--sequence-parallel", action="store_true")
    lm.add_argument("--schedule", "--pipeline-schedule", dest="schedule", default="1f1b",
                    choices=["1f1b", "gpipe", "interleaved"])
    opt = lm.add_mutually_exclusive_group()
    opt.add_argument("--distributed-optimizer", action="store_true")
    opt.add_argument("--zero", type=int, default=0, choices=[0, 1, 2, 3])
    opt.add_argument("--fsdp", dest="zero", action="store_const", const=3,
                     help="fully sharded data parallelism (= --zero 3)")
    lm.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"],
                    help="fp8: Transformer Engine's per-tensor scaling (delayed or current); mxfp8, nvfp4: "
                         "Blackwell's block-scaled formats (layer GEMMs at the fp8 / fp4 peak)")
    lm.add_argument("--no-flash-attention", action="store_true", help="unfused attention (Megatron of 2021)")
    lm.add_argument("--no-overlap-grad-reduce", action="store_true", help="reduce gradients after the backward")
    lm.add_argument("--no-overlap-param-gather", action="store_true",
                    help="the distributed optimizer's parameter all-gather follows the optimizer step instead of "
                         "running under the next forward")
    lm.add_argument("--tp-overlap", default="te", choices=["te", "async", "none"],
                    help="TP communication overlap: te = Transformer Engine's --tp-comm-overlap (default; needs "
                         "--sequence-parallel), async = Megatron-Core's default (backward only), none = blocking")
    lm.add_argument("--loss-fusion", action="store_true",
                    help="a fused cross-entropy kernel (Megatron's --cross-entropy-loss-fusion)")
    lm.add_argument("--kernels", action="store_true",
                    help="print the per-kernel list of one layer, the embedding, the output layer and the optimizer "
                         "with their times (also in --json under 'kernels')")
    lm.add_argument("--cluster", metavar="PRESET_OR_YAML", help="default: the preset for the GPU")
    lm.add_argument("--gpus-per-node", type=_count, metavar="K")
    lm.add_argument("--nic-bandwidth", metavar="BW", help="per-GPU NIC bandwidth, e.g. 200Gbps")
    lm.add_argument("--backend", default="analytical", choices=["analytical", "flow"])
    lm.add_argument("--granularity", default="bulk", choices=["bulk", "round"],
                    help="flow backend: a collective step's rounds as one set of flows (bulk, default) or every "
                         "round simulated (round: slower, exact under contention)")
    lm.add_argument("--kernel-table", metavar="CSV|measured",
                    help="time kernels by interpolating a measured kernel table (podsim kernels measure); "
                         "'measured' = the table podsim ships for --gpu (h100-80gb)")
    lm.add_argument("--json", metavar="OUT")
    lm.add_argument("--trace", metavar="OUT", help="write a Perfetto/Chrome trace JSON (open in ui.perfetto.dev)")
    lm.add_argument("--trace-ranks", type=_count, default=TRACE_RANKS, metavar="N",
                    help=f"ranks to include in the trace (default {TRACE_RANKS})")
    lm.add_argument("--simai", metavar="OUT.txt", help="also write pipeline stage 0 as a SimAI/AICB workload file")
    lm.add_argument("--chakra", metavar="PREFIX",
                    help="also write Chakra ET files PREFIX.<rank>.et and PREFIX.comm_groups.json (ASTRA-sim inputs)")
    lm.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    va = sub.add_parser("validate", help="compare predictions with every published measurement podsim can run",
                        epilog="examples:\n  podsim validate\n  podsim validate --set reported --json v.json\n"
                               "  podsim validate --only megatron_sc21_t1\n  podsim validate --rows my_runs.csv\n\n"
                               "Rows ship with podsim: the FITTED set (what its parameters were fitted to) and the\n"
                               "REPORTED set (published figures it was never fitted to); errors are shown per set,\n"
                               "per GPU type and per source.  Columns of a rows file: docs/calibration.md.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    va.add_argument("--rows", default=None, metavar="CSV",
                    help="your own rows (the columns of docs/calibration.md) instead of the shipped ones")
    va.add_argument("--set", dest="sets", action="append", choices=("fitted", "reported"),
                    help="only this set of the shipped rows (repeatable; default: both)")
    va.add_argument("--only", default=None, metavar="PREFIX", help="only rows whose id starts with PREFIX")
    va.add_argument("--backend", choices=("analytical", "flow"), default="analytical",
                    help="network backend for the throughput rows (default: analytical)")
    va.add_argument("--jobs", "-j", type=_count, default=None, metavar="N",
                    help="rows simulated in parallel, in N processes (default: the CPUs, at most 8)")
    va.add_argument("--json", metavar="OUT", help="write every row as JSON (fields: docs/calibration.md)")
    va.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    k = sub.add_parser("kernels", help="measure kernel times on a real GPU (PyTorch) into a kernel table",
                       epilog="examples:\n  podsim kernels measure --out h100.csv            # on a CUDA machine\n"
                              "  podsim kernels measure --out t.csv --dtype bf16 --dtype fp8\n"
                              "  podsim kernels fit --table h100.csv --gpu h100   # the roofline's efficiencies\n"
                              "  podsim llm --model llama3-8b --gpu h100 --gpus 8 --global-batch 64 --kernel-table h100.csv\n\n"
                              "The table's columns are in docs/compute.md; podsim llm --kernel-table times every\n"
                              "kernel by interpolating it.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("action", choices=["measure", "fit"],
                   help="measure: time GEMMs, attention, memory-bound kernels into --out; "
                        "fit: fit the roofline model's efficiencies to --table")
    k.add_argument("--out", metavar="CSV", help="the kernel table to write (measure)")
    k.add_argument("--table", metavar="CSV|measured", help="the kernel table to fit (fit)")
    k.add_argument("--gpu", default="h100-80gb", metavar="NAME", help="the GPU the table was measured on (fit)")
    k.add_argument("--dtype", action="append", choices=["bf16", "fp16", "fp8", "fp32"], metavar="DTYPE",
                   help="precision to measure (repeatable; default bf16)")
    k.add_argument("--quick", action="store_true", help="a few shapes only (to try the tool)")
    k.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu only tests the tool")
    k.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    tr = sub.add_parser("trace", help="profile one training step of a PyTorch model (profiler + execution trace)",
                        epilog="examples:\n  podsim trace --model torchvision:resnet50 --batch-size 8 --out traces/resnet50\n"
                               "  podsim trace --model mymodels:small_cnn --batch-size 32 --device cuda --out t/cnn\n"
                               "  podsim trace --model hf:gpt2/config.json --batch-size 4 --seq-len 256 --out t/gpt2\n"
                               "  podsim trace --model torchvision:resnet18 --batch-size 16 --nproc 2 --out t/ddp2   # DDP, gloo\n"
                               "  podsim simulate --workload-configuration t/cnn --cluster dgx-h100   # replay\n"
                               "  podsim simulate --pytorch traces/resnet50 --gpus 8 --parallel ddp   # scale out\n\n"
                               "module:callable names a function f(batch_size) returning (model, inputs, targets)\n"
                               "(cross-entropy loss) or (model, inputs, targets, loss_fn).  Needs torch.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    tr.add_argument("--model", required=True, metavar="MODEL", help="torchvision:NAME, hf:CONFIG.json or module:callable")
    tr.add_argument("--batch-size", type=_count, required=True, metavar="B")
    tr.add_argument("--steps", type=_count, default=3, metavar="K", help="warm-up steps before the profiled one (default 3)")
    tr.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    tr.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    tr.add_argument("--nproc", type=_count, default=1, metavar="N",
                    help="distributed capture: N processes of DistributedDataParallel (gloo on the CPU, NCCL on "
                         "GPUs), each writing kineto.<rank>.json and et.<rank>.json with the collectives")
    tr.add_argument("--bucket-mb", type=_positive, default=25.0, metavar="MB",
                    help="with --nproc: DDP's bucket_cap_mb (default 25)")
    tr.add_argument("--seq-len", type=_count, default=128, metavar="S", help="hf models: tokens per sequence")
    tr.add_argument("--out", required=True, metavar="DIR")
    tr.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    cv = sub.add_parser("convert", help="convert a workload (TrioSim, PyTorch traces, ASTRA-sim 1.0 text, SimAI, "
                        "Chakra) to Chakra ET; a one-GPU trace to TrioSim's format",
                        epilog="examples:\n  podsim convert sample_trace/vgg13 --to chakra et/vgg13\n"
                               "  podsim convert Resnet50_DataParallel.txt --gpus 16 --to chakra et/resnet\n"
                               "  podsim convert gpt13b.txt --to chakra et/gpt13b        # SimAI, its all_gpus\n"
                               "  podsim convert traces/resnet50 --to triosim traces/resnet50-triosim\n\n"
                               "--to chakra writes OUT.<rank>.et for every rank (and OUT.comm_groups.json when the\n"
                               "workload has communicator groups); run them with podsim simulate or ASTRA-sim.\n"
                               "--to triosim writes OUT/trace.csv and OUT/tensor.csv from a one-GPU trace (a podsim\n"
                               "trace folder, a Kineto trace or a TrioSim folder); run it with simulate --triosim.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cv.add_argument("input", help="a TrioSim trace directory, a podsim trace folder (every rank), a PyTorch Kineto "
                                  "or execution trace (.json), a .txt workload or a Chakra prefix")
    cv.add_argument("--to", required=True, choices=["chakra", "triosim"], help="the output format")
    cv.add_argument("output", metavar="OUT", help="the output prefix (chakra) or folder (triosim)")
    cv.add_argument("--gpus", type=_count, default=None, metavar="N",
                    help="ranks to write (required for ASTRA-sim 1.0 text; SimAI default: all_gpus)")
    cv.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    f = sub.add_parser("fabric", help="build a cluster's fabric: summary, SimAI topology file",
                       epilog="examples:\n  podsim fabric --cluster dgx-h100 --gpus 64\n"
                              "  podsim fabric --cluster my.yaml --gpus 16 --simai topo.txt   # SimAI/ns-3 topology",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--cluster", required=True, metavar="PRESET_OR_YAML", help="a preset, a cluster YAML or a SimAI topology")
    f.add_argument("--gpus", "-g", type=_count, required=True, metavar="N", help="number of GPUs")
    f.add_argument("--simai", metavar="OUT", help="write the fabric as a SimAI topology file")
    f.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    sv = sub.add_parser("serve", help="simulate inference serving: requests, model placements, per-GPU queues "
                        "(DLSIM's flags work)", epilog=EPILOG_SERVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sv.add_argument("-w", "--workload", help="a DLSIM workload CSV, or a request trace CSV with a header naming "
                    "model_id and arrival_s columns (replayed as recorded)")
    sv.add_argument("--closed-loop", metavar="C0,C1,...",
                    help="instead of -w: closed-loop clients per model (each sends, waits, thinks, sends again)")
    sv.add_argument("--think-ms", type=_non_negative, default=0.0, metavar="MS",
                    help="with --closed-loop: mean think time between a response and the next request (default 0)")
    sv.add_argument("--duration", type=_positive, default=None, metavar="S",
                    help="with --closed-loop: seconds clients keep sending (required)")
    sv.add_argument("--slos", default=None, metavar="S0,S1,...",
                    help="SLOs in seconds per model (or one for all): for --closed-loop and request traces, or to "
                         "override a workload's")
    sv.add_argument("--seed", type=_natural, default=0, help="with --closed-loop: seed of the think times")
    sv.add_argument("-p", "--placement", required=True, help="a placement (DLSIM's JSON, or YAML)")
    sv.add_argument("--cluster", metavar="PRESET_OR_YAML",
                    help="GPUs per node and memory from a cluster preset or YAML (nodes: -n, default what the "
                         "placement uses)")
    sv.add_argument("-n", "--num-nodes", "--num_nodes", dest="num_nodes", type=_count, default=None,
                    help="nodes (default 1, or what the placement uses with --cluster)")
    sv.add_argument("-d", "--num-devices-per-node", "--num_devices_per_node", dest="gpus_per_node", type=_count,
                    default=None, help="GPUs per node (default 2)")
    sv.add_argument("-c", "--memory-capacity", "--memory_capacity", dest="memory_gb", type=_positive, default=None,
                    help="GPU memory in GB (default 16)")
    sv.add_argument("--profile", default=None, metavar="FILE",
                    help="executables' stage shapes and latencies (YAML; default: DLSIM's V100 profile)")
    sv.add_argument("--scheduler", default="fifo", choices=["fifo", "rr", "least-outstanding"],
                    help="replica choice: fifo (DLSIM: first stage idle soonest), rr, least-outstanding")
    sv.add_argument("--dispatch-overhead", default="dlsim", metavar="dlsim|none|MS",
                    help="added to a stage's start when its mesh is busy: dlsim (3 ms multi-stage, 4 ms single-"
                         "stage), none, or a number of ms")
    sv.add_argument("--drop-late", action="store_true",
                    help="drop a request whose predicted finish misses its SLO (AlpaServe)")
    sv.add_argument("--memory-check", default="error", choices=["error", "warn", "off"],
                    help="placements whose weights exceed a GPU's memory: refuse (default), warn, or skip the check")
    sv.add_argument("--name", default=None, help="run name (default: the workload's); names the Chrome trace")
    sv.add_argument("--trace", "--chrome-trace", "--chrome_trace", dest="chrome_trace", nargs="?", const="",
                    default=None, metavar="OUT",
                    help="write a Chrome/Perfetto trace (default chrome_trace/<name>.json; --chrome_trace is "
                         "DLSIM's spelling)")
    sv.add_argument("--json", metavar="OUT", help="write the statistics and every request as JSON")
    sv.add_argument("--cdf", metavar="OUT.png", help="plot the latency CDF (needs matplotlib)")
    sv.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    sw = sub.add_parser("serve-workload", help="write serving workloads (DLSIM's CSV): open-loop Poisson or Gamma "
                        "arrivals", epilog=EPILOG_SERVE_WORKLOAD, formatter_class=argparse.RawDescriptionHelpFormatter)
    swsub = sw.add_subparsers(dest="action", metavar="ACTION")
    gen = swsub.add_parser("generate", help="generate arrivals")
    gen.add_argument("--models", type=_count, required=True, metavar="N", help="number of models")
    gen.add_argument("--rate", type=_positive, default=None, metavar="RPS",
                     help="total requests per second (with --proportions; default equal shares)")
    gen.add_argument("--proportions", default=None, metavar="P0,P1,...", help="each model's share of --rate")
    gen.add_argument("--rates", default=None, metavar="R0,R1,...", help="each model's own rate (instead of --rate)")
    gen.add_argument("--duration", type=_positive, required=True, metavar="S", help="seconds of arrivals")
    gen.add_argument("--cv", type=_non_negative, default=1.0, help="coefficient of variation of the gaps (1: Poisson; "
                     "other: Gamma)")
    gen.add_argument("--slos", default=None, metavar="S0,S1,...", help="each model's SLO in seconds (or one for all)")
    gen.add_argument("--seed", type=_natural, default=0)
    gen.add_argument("--name", default=None, help="the workload's name (default: the output file's)")
    gen.add_argument("-o", "--out", required=True, metavar="FILE")
    gen.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    e = sub.add_parser("example", help="run a built-in example", epilog=EPILOG_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("name", nargs="?", default="allreduce", help="example name (see --list)")
    e.add_argument("--list", action="store_true", help="list the examples")
    e.add_argument("--write", metavar="DIR", help="also keep the example's input files in DIR")
    _add_outputs(e)
    return parser


def _run_simulate(args: argparse.Namespace) -> int:
    from .api import simulate
    from .errors import InputError

    _check_outputs(args)
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
    if args.layers and not (args.triosim or args.pytorch):
        raise InputError("per-layer breakdowns need a one-GPU trace to parallelize: --triosim DIR or --pytorch DIR",
                         where="--layers")
    if args.triosim or args.pytorch:
        from .parallelize import load_step, parallelize
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
    progress = _progress()
    try:
        res = simulate(workload, args.system_configuration, args.network_configuration,
                       remote, groups, num_queues_per_dim=args.num_queues_per_dim,
                       injection_scale=args.injection_scale, use_symmetry=not args.no_symmetry,
                       record_timeline=bool(args.trace or args.plot) or parallel_step is not None,
                       progress=progress,
                       rendezvous=rv in ("1", "true"),
                       cluster=args.cluster, backend=args.backend, gpus=args.gpus,
                       execution_trace=args.execution_trace, whole_trace=args.whole_trace)
    finally:
        _clear_progress(progress)
    layers = None
    if parallel_step is not None:
        from .parallelize import summary
        from .report.layers import layer_breakdown
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
    code = _emit(res, args)
    if layers is not None:
        from .report.layers import format_layers, write_layers_csv
        print(f"\n  per layer, rank 0 ({len(layers)} layers; the 15 longest by compute + exposed comm):")
        print(format_layers(layers))
        if args.layers:
            write_layers_csv(layers, args.layers)
            print(f"  wrote {args.layers}")
    return code


def _fit_memory(step, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """(step with offloads marked, a note on memory per GPU, remote memory config or None)."""
    from .errors import InputError
    from .formats.astra_sim.remote_memory import RemoteMemoryConfig
    from .hardware.cluster import load_cluster
    from .parallelize import fit_memory
    from .parallelize.plan import micro_batches

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


def _progress():  # type: ignore[no-untyped-def]
    """A one-line progress display on stderr, only when it is a terminal."""
    if not sys.stderr.isatty():
        return None
    from .units import format_ns

    def show(now_ns: int, done: int, total: int) -> None:
        sys.stderr.write(f"\r  simulating: t = {format_ns(now_ns):>12}, {done}/{total} ranks finished ")
        sys.stderr.flush()
    return show


def _clear_progress(progress) -> None:  # type: ignore[no-untyped-def]
    if progress is not None:
        sys.stderr.write("\r" + " " * 70 + "\r")
        sys.stderr.flush()


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse output options that cannot be written, before simulating."""
    from .errors import InputError

    if args.trace and os.path.isdir(args.trace):
        raise InputError(f"--trace names the Perfetto trace to write, and {args.trace} is a folder; to simulate a "
                         f"podsim trace folder give --pytorch {args.trace}", where="--trace")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path and os.path.isdir(path):
            raise InputError(f"{path} is a folder; give the file to write", where=flag)
    if args.plot and args.plot_ranks < 1:
        raise InputError(f"expected at least 1 rank to draw, got {args.plot_ranks}", where="--plot-ranks")
    if args.trace_ranks < 1:
        raise InputError(f"expected at least 1 rank to write, got {args.trace_ranks}", where="--trace-ranks")


def _emit(res, args: argparse.Namespace) -> int:  # type: ignore[no-untyped-def]
    from .report import format_summary, write_json, write_trace

    print(format_summary(res))
    if args.json:
        write_json(res, args.json)
        print(f"\n  wrote {args.json}")
    if args.trace:
        shown = write_trace(res, args.trace, max_ranks=args.trace_ranks, announce=_announce)
        more = f", the first {shown} of {res.num_ranks} ranks (--trace-ranks)" if shown < res.num_ranks else ""
        print(f"  wrote {args.trace}{more} (open it at https://ui.perfetto.dev)")
    if args.plot:
        from .report.plot import plot_timeline
        drawn = plot_timeline(res, args.plot, max_ranks=args.plot_ranks)
        print(f"  wrote {args.plot} (the timeline of {drawn} rank{'s' if drawn > 1 else ''})")
    return 0


def _run_inspect(args: argparse.Namespace) -> int:
    import os

    from .formats.chakra.inspect import (
        format_summaries,
        summarize_prefix,
        summarize_trace,
    )

    if os.path.isfile(args.trace):
        n, sums = 1, [summarize_trace(args.trace)]
    else:
        n, sums = summarize_prefix(args.trace, args.ranks)
    print(format_summaries(n, sums))
    if args.json:
        import dataclasses
        import json

        from .fileio import atomic_write_text
        doc = {"rank_files": n, "summarized": [dataclasses.asdict(s) for s in sums]}
        atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def _run_collective(args: argparse.Namespace) -> int:
    import json

    from .collective_api import collective, format_table
    from .errors import InputError
    from .fileio import atomic_write_text
    from .hardware.cluster import load_cluster, preset_names

    if args.list_clusters:
        for n in preset_names():
            print(f"  {n:<20} {load_cluster(n).description}")
        return 0
    for flag, val in (("NAME", args.name), ("--cluster", args.cluster), ("--gpus", args.gpus)):
        if val is None:
            raise InputError(f"missing {flag} (see podsim collective --help)")

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r  size {done}/{total} ")
            sys.stderr.flush()

    try:
        table = collective(args.name, args.cluster, args.gpus, min_bytes=args.min_bytes,
                           max_bytes=args.max_bytes, factor=args.factor, backend=args.backend,
                           dtype=args.dtype, algorithm=args.algo, protocol=args.proto, progress=progress)
    finally:
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 30 + "\r")
    print(format_table(table))
    if args.json:
        atomic_write_text(args.json, json.dumps(table.to_dict(), indent=1) + "\n")
        print(f"# wrote {args.json}")
    return 0


def _pipeline_layers(text: str | None) -> tuple[int, ...] | None:
    """``--pipeline-layers 7,8,8,...`` as a tuple of ints (checked further by Layout.check)."""
    if text is None:
        return None
    from .errors import InputError
    out = []
    for part in text.replace(" ", "").split(","):
        try:
            out.append(int(part))
        except ValueError:
            raise InputError(f"--pipeline-layers takes comma-separated layer counts, e.g. 1,2,2,1; got {part!r} "
                             f"in {text!r}") from None
    return tuple(out)


def _run_llm(args: argparse.Namespace) -> int:
    import json

    from .errors import InputError
    from .fileio import atomic_write_text
    from .llm import from_hf_config, get_model
    from .llm.layout import Layout
    from .llm.run import simulate_training
    from .report import write_trace
    from .units import parse_bandwidth

    if args.list:
        from .hardware.gpu import gpu_specs
        from .llm.model import zoo
        print("models (--model):")
        for name, m in zoo().items():
            kind = f"MoE {m.experts}x, top-{m.top_k}" if m.experts else "dense"
            print(f"  {name:<20} {m.total_params() / 1e9:>8.1f} B params  {m.layers:>3} layers  hidden {m.hidden:>5}  "
                  f"{kind}")
        print("GPUs (--gpu):")
        for key, g in gpu_specs().items():
            print(f"  {key:<20} {g.name:<22} {g.memory_gib:>6g} GiB  bf16 {g.peak_tflops.get('bf16', 0):>7g} TFLOP/s")
        return 0
    if not (args.model or args.model_config):
        raise InputError("give --model NAME (see --list) or --model-config FILE")
    for flag, value in (("--gpus", args.gpus), ("--global-batch", args.global_batch)):
        if value is None:
            raise InputError(f"{flag} is required")
    model = get_model(args.model) if args.model else from_hf_config(args.model_config)
    lay = Layout(args.gpus, tp=args.tp, pp=args.pp, cp=args.cp, ep=args.ep, vpp=args.vpp,
                 global_batch=args.global_batch, micro_batch=args.micro_batch,
                 seq_len=args.seq_len or model.seq_len, sequence_parallel=args.sequence_parallel,
                 recompute=args.recompute, recompute_layers=args.recompute_num_layers,
                 recompute_modules=tuple(x.strip() for x in args.recompute_modules.split(",") if x.strip()),
                 schedule="interleaved" if args.vpp > 1 else args.schedule,
                 zero=args.zero, distributed_optimizer=args.distributed_optimizer, precision=args.precision,
                 overlap_grad_reduce=not args.no_overlap_grad_reduce,
                 first_stage_layers=args.first_stage_layers, last_stage_layers=args.last_stage_layers,
                 account_for_embedding=args.account_for_embedding_in_pipeline_split,
                 account_for_loss=args.account_for_loss_in_pipeline_split,
                 pipeline_layers=_pipeline_layers(args.pipeline_layers),
                 flash_attention=not args.no_flash_attention, tp_overlap=args.tp_overlap,
                 overlap_param_gather=not args.no_overlap_param_gather, loss_fusion=args.loss_fusion)
    nic = parse_bandwidth(args.nic_bandwidth, where="--nic-bandwidth") if args.nic_bandwidth else None
    compute = None
    if args.kernel_table:
        from .compute.table import table_model
        compute = table_model(args.kernel_table, args.gpu, lay.compute_dtype)
    progress = _progress()
    r = simulate_training(model, lay, args.gpu, args.cluster, args.backend, args.gpus_per_node, nic,
                          record_timeline=True, compute=compute, granularity=args.granularity, progress=progress)
    _clear_progress(progress)
    d = r.to_dict()
    b = d["breakdown"]
    print(f"podsim llm: {model.name} on {lay.gpus} x {r.gpu.name} ({d['cluster']}, {args.backend})")
    print(f"  compute    {r.compute_model}")
    cal = r.calibration
    print(f"  calibration {cal['status']}: {cal['source']}")
    print(f"  layout     TP {lay.tp} x PP {lay.pp} x DP {lay.dp}" + (f" x CP {lay.cp}" if lay.cp > 1 else "")
          + (f", EP {lay.ep}" if lay.ep > 1 else "") + (f", VPP {lay.vpp}" if lay.vpp > 1 else "")
          + f"; batch {lay.global_batch} x {lay.seq_len} tokens, micro-batch {lay.micro_batch} "
          f"({lay.num_microbatches} per pipeline); recompute {lay.recompute}"
          + (", SP" if lay.sequence_parallel else ""))
    rows = [("iteration time", f"{d['iteration_time_s']:.4f} s"),
            ("model TFLOP/s per GPU", f"{d['model_tflops_per_gpu']:.1f}"),
            ("  causal count (NeMo's)", f"{d['model_tflops_per_gpu_causal']:.1f}"),
            ("tokens per second per GPU", f"{d['tokens_per_s'] / lay.gpus:,.0f}"),
            ("MFU", f"{100 * d['mfu']:.1f} %"),
            ("tokens per second", f"{d['tokens_per_s']:,.0f}"),
            ("memory peak per GPU", f"{d['memory_peak_gib']:.2f} GiB of {r.gpu.memory_gib:g}"),
            ("  compute", f"{b['compute_s']:.4f} s"), ("  exposed communication", f"{b['exposed_comm_s']:.4f} s"),
            ("  pipeline bubble", f"{b['bubble_s']:.4f} s"), ("  other", f"{b['other_s']:.4f} s")]
    for k, v in rows:
        print(f"  {k:<24} {v:>20}")
    for note in d["notes"]:
        print(f"  warning: {note}" if "does not fit" in note else f"  note: {note}")
    if args.kernels:
        from .llm.kernel_report import format_kernels
        from .llm.stack import Stack
        print()
        print(format_kernels(r.kernels, Stack.for_gpu(r.gpu.key).host_ns))
    if args.json:
        atomic_write_text(args.json, json.dumps(d, indent=1) + "\n")
        print(f"  wrote {args.json}")
    if args.trace:
        shown = write_trace(r.result, args.trace, max_ranks=args.trace_ranks, announce=_announce)
        ranks = len(r.result.timelines)
        more = f", the first {shown} of {ranks} simulated ranks (--trace-ranks)" if shown < ranks else ""
        print(f"  wrote {args.trace}{more} (open it at https://ui.perfetto.dev)")
    if args.simai or args.chakra:
        from .compute.model import ComputeModel
        from .formats.chakra import write_workload_with_groups
        from .llm.export import write_simai
        from .llm.generate import generate
        cm = compute or ComputeModel.for_gpu(r.gpu, lay.compute_dtype)
        if args.simai:
            write_simai(model, lay, cm, args.simai)
            print(f"  wrote {args.simai} (SimAI workload, pipeline stage 0)")
        if args.chakra:
            paths, cg = write_workload_with_groups(generate(model, lay, cm), args.chakra)
            print(f"  wrote {len(paths)} Chakra ET files {args.chakra}.<rank>.et and {cg}")
    return 0


def _run_validate(args: argparse.Namespace) -> int:
    import json

    from .fileio import atomic_write_text
    from .validation import format_checks, run_validation

    def progress(row: str) -> None:
        if row.startswith("not runnable"):
            sys.stderr.write(("\r" if sys.stderr.isatty() else "") + f"note: {row}\n")
        elif sys.stderr.isatty():
            sys.stderr.write(f"\r  {row:<60}")
            sys.stderr.flush()

    sets = tuple(args.sets) if args.sets else ("fitted", "reported")
    from .validation import default_jobs
    checks, skipped = run_validation(args.rows, args.only, progress, sets, args.backend,
                                     args.jobs or default_jobs())
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 64 + "\r")
    print(format_checks(checks, skipped))
    if args.json:
        atomic_write_text(args.json, json.dumps({"rows": [c.to_dict() for c in checks], "skipped": skipped},
                                                indent=1) + "\n")
    return 0


def _run_kernels(args: argparse.Namespace) -> int:
    from .compute.measure import measure
    from .errors import InputError

    if args.action == "fit":
        from .compute.fit import fit_to_table
        from .compute.table import table_model
        if not args.table:
            raise InputError("podsim kernels fit needs --table CSV (or 'measured')")
        dtype = (args.dtype or ["bf16"])[0]
        tm = table_model(args.table, args.gpu, dtype)
        params, errs = fit_to_table(tm.rows, tm.gpu, dtype)
        print(f"podsim kernels fit: {tm.describe()} on {tm.gpu.name}")
        print("  efficiency: {" + ", ".join(f"{k}: {v:g}" for k, v in params.items()) + "}")
        for fam, e in errs.items():
            print(f"  {fam:<10} mean |time error| {100 * e:.1f}% (weighted by sqrt(time))")
        return 0
    if not args.out:
        raise InputError("podsim kernels measure needs --out CSV")
    def say(what: str) -> None:
        print(f"  measuring {what} ...", file=sys.stderr, flush=True)

    n = measure(args.out, tuple(args.dtype or ["bf16"]), args.quick, args.device, say)
    print(f"podsim kernels: wrote {n} rows to {args.out}")
    return 0


def _run_trace(args: argparse.Namespace) -> int:
    import os

    from .capture import capture

    if os.getcwd() not in sys.path:  # module:callable from the working folder, as `python -m` finds it
        sys.path.insert(0, os.getcwd())
    if not args.debug and "torch" not in sys.modules:
        # the execution-trace observer and Kineto log every start and stop (8-12 lines a capture,
        # through the progress bar): quiet unless --debug; read by torch at import, inherited by
        # the DDP processes
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # above USDT (5): Kineto prints nothing

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            bar = "#" * (20 * done // total)
            sys.stderr.write(f"\r  step {done}/{total} [{bar:<20}]")
            sys.stderr.flush()

    c = capture(args.model, args.batch_size, args.out, args.steps, args.device, args.optimizer, args.seq_len,
                progress, args.nproc, args.bucket_mb)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 40 + "\r")
    procs = f" x {c.nproc} processes (DDP)" if c.nproc > 1 else ""
    print(f"podsim trace: {c.model} on {c.device}{procs}, batch {args.batch_size}: profiled step {c.step_ms:.3f} ms")
    if c.nproc > 1:
        print(f"  wrote {c.folder}/kineto.<rank>.json, et.<rank>.json, {c.workload_prefix}.<rank>.et, capture.json "
              f"for ranks 0-{c.nproc - 1}")
    else:
        print(f"  wrote {c.kineto}, {c.execution_trace}, {c.workload_prefix}.0.et, {c.folder / 'capture.json'}")
    print(f"  replay it:   podsim simulate --workload-configuration {c.folder} --cluster dgx-h100")
    print(f"  scale it:    podsim simulate --pytorch {c.folder} --gpus 4 --parallel ddp|tp|pp")
    return 0


def _dlsim_path(path: str, folder: str) -> str:
    """``path``, or DLSIM's ``./workload/<path>`` / ``./placements/<path>`` where only that
    exists (DLSIM's command line names its inputs so)."""
    if not os.path.exists(path) and os.path.isfile(os.path.join(folder, path)):
        return os.path.join(folder, path)
    return path


def _run_serve(args: argparse.Namespace) -> int:
    import json

    from .errors import InputError
    from .fileio import atomic_write_text
    from .serving import load_profiles, read_placement, simulate_serving
    from .serving.placement import check_placement, serve_cluster
    from .serving.plot import plot_latency_cdf
    from .serving.simulator import parse_overhead
    from .serving.stats import format_summary, summarize
    from .serving.trace import write_serving_trace

    for flag, path in (("--json", args.json), ("--cdf", args.cdf), ("--chrome-trace", args.chrome_trace)):
        if path and os.path.isdir(path):
            raise InputError(f"{path} is a folder; give the file to write", where=flag)
    from .serving import ClosedLoop
    from .serving.workload import read_any_workload

    if (args.workload is None) == (args.closed_loop is None):
        raise InputError("give a workload (-w FILE) or closed-loop clients (--closed-loop C0,C1,...), one of them",
                         where="-w")
    slos = _floats(args.slos, "--slos")
    if args.closed_loop is not None:
        clients = _floats(args.closed_loop, "--closed-loop") or []
        if any(c != int(c) or c < 0 for c in clients):
            raise InputError(f"expected whole numbers of clients, got {args.closed_loop!r}", where="--closed-loop")
        if args.duration is None:
            raise InputError("closed-loop clients need --duration S", where="--duration")
        workload = ClosedLoop([int(c) for c in clients], args.think_ms / 1e3, args.duration,
                              _per_model(slos, len(clients), "--slos") or [float("inf")] * len(clients),
                              args.name or "closed-loop", args.seed)
    else:
        workload = read_any_workload(_dlsim_path(args.workload, "workload"))
        if slos:
            workload.slos_s = _per_model(slos, workload.num_models, "--slos")  # type: ignore[assignment]
    placement = read_placement(_dlsim_path(args.placement, "placements"))
    executables = load_profiles(args.profile)
    cluster = serve_cluster(placement, args.cluster, args.num_nodes, args.gpus_per_node, args.memory_gb)
    overhead = parse_overhead(args.dispatch_overhead)
    warnings = check_placement(placement, executables, cluster, args.memory_check)
    result = simulate_serving(workload, placement, executables, cluster, scheduler=args.scheduler,
                              overhead_ns=overhead, drop_late=args.drop_late)
    result.notes[:0] = warnings
    doc = summarize(result)
    print(format_summary(doc))
    name = args.name or workload.name or "serve"
    if args.chrome_trace is not None:
        out = args.chrome_trace or os.path.join("chrome_trace", f"{name}.json")
        write_serving_trace(result, out)
        print(f"\n  wrote {out} (open it at https://ui.perfetto.dev)")
    if args.json:
        atomic_write_text(args.json, json.dumps({"name": name, **doc}, indent=1) + "\n")
        print(f"  wrote {args.json}")
    if args.cdf:
        plot_latency_cdf(result, args.cdf)
        print(f"  wrote {args.cdf}")
    return 0


def _per_model(values: list[float] | None, models: int, flag: str) -> list[float] | None:
    """One value per model: a single value stands for all of them."""
    from .errors import InputError

    if values is None or len(values) == models:
        return values
    if len(values) == 1:
        return values * models
    raise InputError(f"{models} models but {len(values)} values", where=flag)


def _floats(text: str | None, flag: str) -> list[float] | None:
    from .errors import InputError

    if text is None:
        return None
    import math
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or not all(math.isfinite(v) for v in vals):
        raise InputError(f"expected comma-separated finite numbers, got {text!r}", where=flag)
    return vals


def _run_serve_workload(args: argparse.Namespace) -> int:
    from .errors import InputError
    from .serving import generate_workload, write_workload

    if args.action != "generate":
        raise InputError("say what to do: podsim serve-workload generate ... (see --help)")
    rates = _floats(args.rates, "--rates")
    props = _floats(args.proportions, "--proportions")
    slos = _per_model(_floats(args.slos, "--slos"), args.models, "--slos")
    if (rates is None) == (args.rate is None):
        raise InputError("give --rate (with optional --proportions) or --rates, one of them", where="--rate")
    name = args.name or os.path.basename(args.out)
    w = generate_workload(args.models, args.rate or 0.0, args.duration, proportions=props, rates=rates, cv=args.cv,
                          slos_s=slos, seed=args.seed, name=name)
    write_workload(w, args.out)
    print(f"podsim serve-workload: {len(w)} requests of {args.models} model(s) over {args.duration:g} s "
          f"({len(w) / args.duration:.3f} req/s) -> {args.out}")
    return 0


def _run_convert(args: argparse.Namespace) -> int:
    from .api import load_workload
    from .formats.chakra import write_workload_with_groups

    if args.to == "triosim":
        from .formats.triosim_write import write_triosim
        from .parallelize import load_step
        from .parallelize.trace import to_triosim
        triosim = os.path.isfile(os.path.join(args.input, "trace.csv"))
        step = load_step(args.input if triosim else None, None if triosim else args.input)
        trace, tensors = write_triosim(to_triosim(step), args.output)
        print(f"podsim convert: {step.source}: {len(step.ops)} ops of one GPU's step -> {trace} and {tensors} "
              f"(TrioSim's format; run it with podsim simulate --triosim {args.output})")
        return 0

    w = load_workload(args.input, args.gpus)
    paths, groups = write_workload_with_groups(w, args.output)
    print(f"podsim convert: {w.name}: {len(paths)} Chakra ET file{'s' if len(paths) != 1 else ''} "
          f"{args.output}.<rank>.et" + (f" and {groups}" if groups else ""))
    return 0


def _run_fabric(args: argparse.Namespace) -> int:
    from .formats.simai import write_topology
    from .hardware.cluster import build_fabric, load_cluster
    from .network.describe import describe_fabric

    fab = build_fabric(load_cluster(args.cluster), args.gpus)
    print(describe_fabric(fab))
    if args.simai:
        write_topology(fab, args.simai)
        print(f"  wrote {args.simai}")
    return 0


def _run_example(args: argparse.Namespace) -> int:
    from .api import simulate
    from .errors import InputError
    from .examples import CLUSTER_EXAMPLES, EXAMPLES, SERVE_EXAMPLES, write_example

    _check_outputs(args)
    if args.list:
        for k, v in EXAMPLES.items():
            print(f"  {k:<10} {v}")
        return 0
    if args.name not in EXAMPLES:
        raise InputError(f"unknown example {args.name!r}; examples: {', '.join(EXAMPLES)}")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_example(args.name, args.write or tmp)
        if args.write:
            print(f"podsim example: wrote the inputs of '{args.name}' to {args.write}/: "
                  + ", ".join(sorted({os.path.basename(v).split('.')[0] + ('.<rank>.et' if k == 'workload'
                                      and not v.endswith(('.csv', '.json')) else os.path.splitext(v)[1])
                                      for k, v in paths.items()})))
        if args.name in SERVE_EXAMPLES:
            argv = ["serve", *SERVE_EXAMPLES[args.name], "-w", paths["workload"], "-p", paths["placement"]]
            if args.json:
                argv += ["--json", args.json]
            if args.trace:
                argv += ["--trace", args.trace]
            print("podsim example: running podsim " + " ".join(argv))
            return main(argv)
        if args.name in CLUSTER_EXAMPLES:
            preset, backend = CLUSTER_EXAMPLES[args.name]
            res = simulate(paths["workload"], cluster=preset, backend=backend,
                           use_symmetry=not args.no_symmetry, record_timeline=bool(args.trace or args.plot))
        else:
            res = simulate(paths["workload"], paths["system"], paths["network"], paths["remote_memory"],
                           use_symmetry=not args.no_symmetry, record_timeline=bool(args.trace or args.plot))
        res.info["workload"] = f"built-in example '{args.name}': {EXAMPLES[args.name]}"
        return _emit(res, args)


#: options that name an output file, by their argparse dest
_OUTPUT_FILES = {"json": "--json", "trace": "--trace", "plot": "--plot", "layers": "--layers", "cdf": "--cdf",
                 "chrome_trace": "--chrome-trace"}


def _check_output_paths(args: argparse.Namespace) -> None:
    """Output paths that cannot be written are refused before any subcommand runs."""
    from .fileio import check_output_file
    own = args.command in ("simulate", "example")   # their _check_outputs says more about folders
    for dest, flag in _OUTPUT_FILES.items():
        v = getattr(args, dest, None)
        if isinstance(v, str) and v and not (own and os.path.isdir(v)):
            check_output_file(v, flag)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``podsim`` console script; returns the exit status."""
    from .errors import InputError, PodsimError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # --help (0) or a bad flag (2, with argparse's one-line message)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    if args.command is None:
        parser.print_help()
        return 2
    try:
        _check_output_paths(args)
        if args.command == "simulate":
            return _run_simulate(args)
        if args.command == "inspect":
            return _run_inspect(args)
        if args.command == "collective":
            return _run_collective(args)
        if args.command == "fabric":
            return _run_fabric(args)
        if args.command == "llm":
            return _run_llm(args)
        if args.command == "validate":
            return _run_validate(args)
        if args.command == "kernels":
            return _run_kernels(args)
        if args.command == "convert":
            return _run_convert(args)
        if args.command == "trace":
            return _run_trace(args)
        if args.command == "serve":
            return _run_serve(args)
        if args.command == "serve-workload":
            return _run_serve_workload(args)
        return _run_example(args)
    except PodsimError as e:
        if getattr(args, "debug", False):
            raise
        kind = "error" if isinstance(e, InputError) else "simulation error"
        print(f"podsim: {kind}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("podsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a path that is missing, a directory, unreadable or unwritable
        if getattr(args, "debug", False):
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"podsim: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: one line, the traceback under --debug
        if getattr(args, "debug", False):
            raise
        print(f"podsim: internal error: {type(e).__name__}: {e} (run again with --debug for the traceback, "
              "and please report it)", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
