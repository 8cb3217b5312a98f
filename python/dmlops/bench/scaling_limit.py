"""How far this machine lets a convolution scale: python -m dmlops.bench.scaling_limit [--threads 1,8,16]

More cores do not run the same kernel proportionally faster: the clock falls as more cores run
vector FMAs, and the cores share the L3, the memory and their bandwidth. This separates what the
machine allows from what dmlops' parallel runtime and task split add or lose. For a layer (by
default the benchmark's batch-8 3x3 128@28 convolution, float32, padding 1), at each thread
count P, in rounds that alternate the counts and the three measurements:

- FMA loop: dmlops' register-only FMA loop on P threads, the arithmetic alone;
- P independent calls: P Python threads (the calls release the GIL), each calling the layer at
  batch 1 on its own arrays on one dmlops thread: no data shared, no parallel runtime, no task
  split; what P cores give this kernel when nothing ties them together;
- one call: the layer at its batch on P dmlops threads.

It prints the medians of the rounds: throughput and speed-up over the first thread count. One
call that scales like the independent calls loses nothing to the runtime; what the independent
calls lose against the FMA loop, the kernel loses to the machine.

With --per-cpu (Linux) it first times the FMA loop and the batch-1 layer on one thread pinned to
each CPU the process may use, one CPU at a time: a cloud VM's virtual CPUs need not be equal (on
a 16-core Xeon VM one thread ran the kernel at 64-100% of the fastest CPU's speed, depending on
the CPU). The CPUs' speeds added up bound what all of them together can reach.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Optional

import numpy as np

import dmlops
from dmlops import _core

from ._harness import median_ms, time_calls, usable_cpus
from ._report import default_threads

MAX_THREADS = 1024   # as dmlops.set_num_threads
MAX_BYTES = 1 << 31  # the arrays of every layer together
STDOUT = object()    # out's default: sys.stdout as it is when called (pytest's capture replaces it)


def _layer(batch: int, channels: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, size, size)).astype(np.float32)
    w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", x.shape), dmlops.TensorDesc("float32", w.shape),
                                  start_padding=1, end_padding=1)
    return (lambda: desc(x, w)), 2 * batch * channels * channels * 9 * size * size


def _check(rounds: int, channels: int, size: int, seconds: float, batch: int = 1, singles: int = 0) -> None:
    """A ValueError naming the first argument out of range, or the bytes of the arrays: a batch
    layer's and `singles` batch-1 layers' (an input, a filter and an output each)."""
    for name, value in (("rounds", rounds), ("batch", batch), ("channels", channels), ("size", size)):
        if value < 1:
            raise ValueError(f"scaling_limit: {name} must be >= 1, not {value}")
    if not 0 < seconds <= 60:
        raise ValueError(f"scaling_limit: seconds must be in (0, 60], not {seconds}")
    total = 4 * (2 * channels * size * size + 9 * channels * channels) * (singles + batch)
    if total > MAX_BYTES:
        raise ValueError(f"scaling_limit: the layers' arrays would take {total} bytes (at most {MAX_BYTES}); "
                         "ask for fewer threads or a smaller batch, channels or size")


def _output(out):
    return sys.stdout if out is STDOUT else out


def _independent_gflops(calls: list, flops: int, count: int) -> float:
    """Each of len(calls) Python threads runs its own call `count` times on one dmlops thread,
    all starting together; the total FLOPs over the slowest thread's time."""
    seconds = [0.0] * len(calls)
    start = threading.Barrier(len(calls))

    def work(i: int) -> None:
        with dmlops.threads(1):
            calls[i]()
            start.wait()
            t0 = time.perf_counter()
            for _ in range(count):
                calls[i]()
            seconds[i] = time.perf_counter() - t0

    workers = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return flops * count * len(calls) / max(seconds) / 1e9


def _pinned(cpu: int, measure):
    """measure() on a Python thread pinned to `cpu` (the calling thread's affinity is untouched)."""
    result: list = []
    errors: list = []

    def work() -> None:
        try:
            try:
                os.sched_setaffinity(0, {cpu})  # 0: this thread alone
            except OSError as error:  # e.g. a CPU that the process' cpuset no longer allows
                raise ValueError(f"scaling_limit: cannot pin a thread to CPU {cpu}: {error}") from error
            result.append(measure())
        except BaseException as error:  # re-raised on the caller's thread
            errors.append(error)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


def per_cpu(rounds: int = 3, channels: int = 128, size: int = 28, seconds: float = 0.05,
            cpus: Optional[list] = None, out=STDOUT) -> list:
    """The FMA loop and the batch-1 layer on one dmlops thread, pinned to each CPU of `cpus` (by
    default every CPU this process may use) in turn, in `rounds` rounds that visit every CPU;
    returns one dict per CPU with the medians: cpu, fma_gflops, kernel_gflops, and kernel_share
    (its kernel speed over the fastest CPU's)."""
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("scaling_limit: per_cpu needs os.sched_setaffinity (Linux) to pin a thread to a CPU")
    usable = sorted(os.sched_getaffinity(0))
    cpus = usable if cpus is None else list(cpus)
    if not cpus or any(cpu not in usable for cpu in cpus):
        raise ValueError(f"scaling_limit: cpus must be a non-empty list of the CPUs this process may use ({usable})")
    _check(rounds, channels, size, seconds)
    call, flops = _layer(1, channels, size, 0)

    def measure() -> tuple:
        fma = _core.fma_peak_gflops(1, 1e3 * seconds)
        with dmlops.threads(1):  # on the calling (pinned) thread; the harness' schedule, as run()'s
            ms = median_ms(time_calls({"kernel": call}, 1, 100, seconds))["kernel"]
        return fma, flops / ms / 1e6

    samples: dict = {cpu: [] for cpu in cpus}
    for _ in range(rounds):
        for cpu in cpus:
            samples[cpu].append(_pinned(cpu, measure))
    rows = [{"cpu": cpu, "fma_gflops": statistics.median(f for f, _ in samples[cpu]),
             "kernel_gflops": statistics.median(k for _, k in samples[cpu])} for cpu in cpus]
    out = _output(out)
    fastest = max(r["kernel_gflops"] for r in rows)
    for r in rows:
        r["kernel_share"] = r["kernel_gflops"] / fastest
    if out is not None:
        print(f"one thread pinned to each CPU in turn: 3x3 convolution {channels}@{size}, batch 1; "
              f"medians of {rounds} rounds", file=out)
        print(f"{'cpu':>5} | {'FMA loop GF/s':>13} | {'kernel GF/s':>11} {'of fastest':>10}", file=out)
        for r in rows:
            print(f"{r['cpu']:5d} | {r['fma_gflops']:13.0f} | {r['kernel_gflops']:11.0f} {r['kernel_share']:9.0%}",
                  file=out)
        together = sum(r["kernel_share"] for r in rows)
        print(f"at their speeds alone, the {len(rows)} CPUs together are worth {together:.2f} of the fastest one: "
              f"a call on all of them runs the kernel at most about {together:.2f}x as fast as one thread there.",
              file=out)
    return rows


def run(threads: list, rounds: int = 5, batch: int = 8, channels: int = 128, size: int = 28,
        seconds: float = 0.05, out=STDOUT) -> list:
    """Measures every thread count `rounds` times, alternating; returns one dict per count with
    the medians: fma_gflops, independent_gflops, one_call_ms, one_call_gflops, and each one's
    speed-up over the first count (fma_speedup, independent_speedup, one_call_speedup).
    `seconds`: about how long each measurement runs (at 100 GFLOP/s per thread)."""
    if not threads or any(not 1 <= t <= MAX_THREADS for t in threads):
        raise ValueError(f"scaling_limit: threads must be a non-empty list of counts from 1 to {MAX_THREADS}")
    _check(rounds, channels, size, seconds, batch, singles=max(threads))  # a layer per independent call
    singles = [_layer(1, channels, size, seed) for seed in range(max(threads))]
    single_flops = singles[0][1]
    one_call, batch_flops = _layer(batch, channels, size, len(singles))
    count = max(2, round(seconds * 100e9 / single_flops))
    samples: dict = {}
    for _ in range(rounds):
        for t in threads:
            samples.setdefault(("fma", t), []).append(_core.fma_peak_gflops(t, 1e3 * seconds))
            samples.setdefault(("independent", t), []).append(
                _independent_gflops([call for call, _ in singles[:t]], single_flops, count))
            with dmlops.threads(t):  # the harness' schedule: a warm-up, then about `seconds` of calls
                ms = median_ms(time_calls({"one_call": one_call}, 1, 100, seconds))["one_call"]
            samples.setdefault(("one_call", t), []).append(ms)
    out = _output(out)
    median = {key: statistics.median(values) for key, values in samples.items()}
    first = threads[0]
    rows = []
    for t in threads:
        rows.append({
            "threads": t,
            "fma_gflops": median[("fma", t)], "fma_speedup": median[("fma", t)] / median[("fma", first)],
            "independent_gflops": median[("independent", t)],
            "independent_speedup": median[("independent", t)] / median[("independent", first)],
            "one_call_ms": median[("one_call", t)], "one_call_gflops": batch_flops / median[("one_call", t)] / 1e6,
            "one_call_speedup": median[("one_call", first)] / median[("one_call", t)],
        })
    if out is not None:
        print(f"dmlops {dmlops.__version__} on {usable_cpus()} usable CPUs, kernels' ISA {_core.fma_isa()}; "
              f"3x3 convolution {channels}@{size}, batch {batch}; medians of {rounds} rounds", file=out)
        print(f"{'threads':>7} | {'FMA loop GF/s':>19} | {'independent calls GF/s':>23} | {'one call ms':>12} "
              f"{'GF/s':>6} {'speed-up':>8}", file=out)
        for r in rows:
            print(f"{r['threads']:7d} | {r['fma_gflops']:10.0f} ({r['fma_speedup']:5.2f}x) | "
                  f"{r['independent_gflops']:14.0f} ({r['independent_speedup']:5.2f}x) | {r['one_call_ms']:12.3f} "
                  f"{r['one_call_gflops']:6.0f} {r['one_call_speedup']:7.2f}x", file=out)
        print(f"speed-ups over {first} thread(s). Independent calls: P Python threads, each its own batch-1 layer on one "
              "dmlops thread (nothing shared); one call: the whole batch on P dmlops threads.", file=out)
    return rows


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops.bench.scaling_limit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default=",".join(map(str, default_threads())),
                        help="comma-separated thread counts (default: 1 and the usable CPUs)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every measurement (medians)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--channels", type=int, default=128, help="input and output channels")
    parser.add_argument("--size", type=int, default=28, help="height and width")
    parser.add_argument("--per-cpu", action="store_true",
                        help="first time the batch-1 layer on one thread pinned to each CPU in turn (Linux)")
    args = parser.parse_args(argv)
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: {args.threads!r} is not a comma-separated list of integers")
    try:
        if args.per_cpu:
            per_cpu(args.rounds, args.channels, args.size)
            print()
        run(threads, args.rounds, args.batch, args.channels, args.size)
    except ValueError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
