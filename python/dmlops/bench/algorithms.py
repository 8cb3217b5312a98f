"""Which convolution algorithm is fastest, layer by layer, on this CPU:
python -m dmlops.bench.algorithms [--threads 1,4] [--repeat 15] [--json FILE]

For each layer below, every algorithm of :func:`dmlops.convolution_algorithms` that applies
(forced with ``algorithm=``) is timed in interleaved rounds (the median of each: CPU time of the
calling thread at 1 thread, which other processes barely disturb; wall time otherwise, or as
``--clock`` says: a virtual machine may count time its vCPU was descheduled as CPU time), and the
table shows the one the library chooses beside the fastest: the evidence for the thresholds
between algorithms (e.g. how many input channels a 1x1 layer needs to run ``direct`` rather than
``gemm``). A row whose choice is more than 10% slower than the fastest is marked ``<<``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

import numpy as np

import dmlops

from ._harness import cpu_model, make_input, median_ms, time_calls

# (name, input shape, filter shape, stride, padding, groups): ResNet-50's 1x1 and 3x3 layers
# and its stem, plus the few-channel and grouped layers where one algorithm hands over to another.
LAYERS = (
    ("3x3 64@56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1),
    ("3x3 128@28", (1, 128, 28, 28), (128, 128, 3, 3), 1, 1, 1),
    ("3x3 256@14", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1),
    ("3x3 512@7", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1, 1),
    ("3x3 s2 256@28", (1, 256, 28, 28), (256, 256, 3, 3), 2, 1, 1),
    ("3x3 16@112", (1, 16, 112, 112), (16, 16, 3, 3), 1, 1, 1),
    ("3x3 32>32 g4@56", (1, 32, 56, 56), (32, 8, 3, 3), 1, 1, 4),
    ("7x7 s2 3>64@224", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1),
    ("1x1 64>64@56", (1, 64, 56, 56), (64, 64, 1, 1), 1, 0, 1),
    ("1x1 64>256@56", (1, 64, 56, 56), (256, 64, 1, 1), 1, 0, 1),
    ("1x1 256>64@56", (1, 256, 56, 56), (64, 256, 1, 1), 1, 0, 1),
    ("1x1 128>512@28", (1, 128, 28, 28), (512, 128, 1, 1), 1, 0, 1),
    ("1x1 512>128@28", (1, 512, 28, 28), (128, 512, 1, 1), 1, 0, 1),
    ("1x1 1024>256@14", (1, 1024, 14, 14), (256, 1024, 1, 1), 1, 0, 1),
    ("1x1 2048>512@7", (1, 2048, 7, 7), (512, 2048, 1, 1), 1, 0, 1),
    ("1x1 s2 256>512@56", (1, 256, 56, 56), (512, 256, 1, 1), 2, 0, 1),
)
SLOWER = 1.10  # a choice this much slower than the fastest is marked


def layer_calls(shape: tuple, fshape: tuple, stride: int, pad: int, groups: int) -> tuple:
    """The chosen algorithm and a call per algorithm that applies."""
    x = make_input(shape, "float32")
    w = make_input(fshape, "float32", seed=12346)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", shape), dmlops.TensorDesc("float32", fshape),
                                  strides=stride, start_padding=pad, end_padding=pad, group_count=groups)
    calls: dict[str, Callable] = {}
    for name in dmlops.convolution_algorithms():
        try:
            desc.plan(algorithm=name)
        except ValueError:
            continue
        calls[name] = (lambda name=name: desc(x, w, algorithm=name))
    return desc.plan().algorithm, calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops.bench.algorithms", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    parser.add_argument("--repeat", type=int, default=15, help="timed calls per algorithm (default 15)")
    parser.add_argument("--clock", choices=("auto", "thread", "wall"), default="auto",
                        help="thread: CPU time of the calling thread (1 thread only); wall; auto (default): "
                             "thread at 1 thread, else wall")
    parser.add_argument("--json", help="also write the medians to this file")
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    print(f"CPU: {cpu_model()}; ISA {dmlops._core.fma_isa()}; caches {dmlops._core.cache_sizes()}")
    rows, marked = [], 0
    for t in threads:
        with dmlops.threads(t):
            for name, *geometry in LAYERS:
                chosen, calls = layer_calls(*geometry)
                thread_clock = args.clock == "thread" or (args.clock == "auto" and t == 1)
                if thread_clock and t != 1:
                    parser.error("--clock thread measures the calling thread: use it with --threads 1")
                clock = time.thread_time if thread_clock else time.perf_counter
                ms = median_ms(time_calls(calls, warmup=3, repeat=args.repeat, time_budget=0.5, clock=clock))
                fastest = min(ms, key=ms.get)
                mark = "<<" if ms[chosen] > SLOWER * ms[fastest] else ""
                marked += bool(mark)
                times = "  ".join(f"{a} {m:.3f}" for a, m in ms.items())
                print(f"{t:3d} thr  {name:20s} chose {chosen:16s} fastest {fastest:16s} "
                      f"{ms[chosen] / ms[fastest]:5.2f}x {mark:2s} | {times}", flush=True)
                rows.append({"threads": t, "layer": name, "chosen": chosen, "fastest": fastest, "ms": ms})
    print(f"{marked} of {len(rows)} choices more than {SLOWER:.2f}x the fastest")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
