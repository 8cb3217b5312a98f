"""dmlops on a CPU it shares: python -m dmlops.bench.sharing [--threads 2] [--calls 60] [--rounds 3]

The everyday case of a notebook that cross-checks against PyTorch: dmlops runs right after a
torch call whose OpenMP workers still spin (torch's default settings, several milliseconds), or
while another process keeps a core busy. For a few cases this times a dmlops call at the given
thread count (default: the usable CPUs)

- alone: back to back, nothing else running;
- after torch: each dmlops call right after a torch convolution with torch's default OpenMP
  settings (run this module without GOMP_SPINCOUNT or OMP_WAIT_POLICY set; it says so otherwise);
- after 1-thread torch: the same, with torch on one thread, so that none of its workers runs or
  spins when dmlops starts;
- beside a busy process: another process spins on one core while these calls run;

in interleaved rounds, and prints the medians and, per scenario, the median over the rounds of its
time over the same round's time alone; "after torch" also over "after 1-thread torch". (A cloud
VM's speed drifts with its neighbours: timed one scenario after the other, a 0.25 ms outlier
alone once made the pad beside the busy process read 3.0x.)

Both torch calls leave the caches as they leave them: a 1x64x256x256 pad (33 MB read and
written) took 1.6-2.9x its time alone after either one on a 2-core Zen 5 with a 32 MB L3, as much
as after one numpy thread read 32 MB. That part no thread pool can share away; the second ratio
is what torch's threads cost. Three runnable threads (two of dmlops', the busy one) on two CPUs
get two thirds of a CPU each, so a 2-thread call's fair share is 1.5x its time alone; the goal is
at most 1.7x on 2 CPUs.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from typing import Callable, Optional

import numpy as np

import dmlops

from ._harness import usable_cpus

GOAL = 1.7


def _spin(stop, go, ready) -> None:  # the busy process: spins while `go` is set, until `stop` is
    ready.set()
    while not stop.is_set():
        if not go.wait(0.01):
            continue
        for _ in range(100_000):
            pass


def cases() -> dict:
    rng = np.random.default_rng(12345)
    x64 = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w64 = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    x256 = rng.standard_normal((1, 256, 56, 56)).astype(np.float32)
    w1x1 = rng.standard_normal((64, 256, 1, 1)).astype(np.float32)
    image = rng.standard_normal((1, 64, 256, 256)).astype(np.float32)
    return {
        "conv 3x3 64@56": lambda: dmlops.convolution(x64, w64, start_padding=(1, 1), end_padding=(1, 1)),
        "conv 1x1 256>64@56": lambda: dmlops.convolution(x256, w1x1),
        "pad reflection 1x64x256x256": lambda: dmlops.pad(image, (0, 0, 2, 2), (0, 0, 2, 2), mode="reflection"),
    }


def median_ms(call: Callable, calls: int, before: Optional[Callable] = None) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(calls):
        if before is not None:
            before()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


SCENARIOS = ("alone", "after 1-thread torch", "after torch", "busy process")


def run(threads: int, calls: int, out=sys.stdout, rounds: int = 3) -> list:
    """Times every case in every scenario, in `rounds` interleaved rounds (a machine whose speed
    drifts, as a cloud VM's does with its neighbours, moves every scenario of a round alike);
    returns rows of dicts: each scenario's median time, and under "ratios" the median over the
    rounds of each scenario's time over the same round's time alone (and, for "after torch",
    over its time after 1-thread torch)."""
    try:
        import torch
    except ImportError:
        torch = None
    dmlops.set_num_threads(threads)
    torch_call = torch_one_thread = None
    if torch is not None:
        torch.set_num_threads(threads)
        tx = torch.randn(1, 64, 56, 56)
        tw = torch.randn(64, 64, 3, 3)
        torch_call = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)  # noqa: E731

        def torch_one_thread() -> None:
            torch.set_num_threads(1)
            torch_call()
            torch.set_num_threads(threads)
    context = multiprocessing.get_context("spawn")
    stop, go, ready = context.Event(), context.Event(), context.Event()
    busy = context.Process(target=_spin, args=(stop, go, ready), daemon=True)
    busy.start()
    calls_of = cases()
    times: dict = {name: {k: [] for k in SCENARIOS} for name in calls_of}
    try:
        ready.wait(60)  # started (its imports done), before anything is timed
        for _ in range(rounds):
            for name, call in calls_of.items():
                t = times[name]
                t["alone"].append(median_ms(call, calls))
                if torch_call is not None:
                    t["after 1-thread torch"].append(median_ms(call, calls, before=torch_one_thread))
                    t["after torch"].append(median_ms(call, calls, before=torch_call))
                go.set()
                time.sleep(0.05)  # let it spin
                try:
                    t["busy process"].append(median_ms(call, calls))
                finally:
                    go.clear()
    finally:
        stop.set()
        busy.join(5)
    rows = []
    for name, t in times.items():
        row = {"case": name, "threads": threads, "rounds": rounds, "ratios": {}}
        for k in SCENARIOS:
            if not t[k]:
                continue
            row[k] = statistics.median(t[k])
            row["ratios"][k] = statistics.median(a / b for a, b in zip(t[k], t["alone"]))
        if t["after torch"]:
            row["ratios"]["after torch / after 1-thread torch"] = statistics.median(
                a / b for a, b in zip(t["after torch"], t["after 1-thread torch"]))
        rows.append(row)
    if out is not None:
        cpus = usable_cpus()
        print(f"dmlops {dmlops.__version__} on {cpus} usable CPUs, {threads} threads; medians of {calls} calls, "
              f"{rounds} interleaved rounds (ratios: the median of each round's); "
              f"torch {torch.__version__ if torch is not None else 'not installed'}", file=out)
        settings = {k: os.environ[k] for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if k in os.environ}
        print("torch's OpenMP: " + (f"{settings} (not its default)" if settings else "its default wait policy"),
              file=out)
        print(f"{'case':<30} {'alone ms':>9} {'after 1-thread torch':>21} {'after torch':>25} "
              f"{'busy process':>18}", file=out)
        for r in rows:
            cells = [f"{r[k]:8.3f} ({r['ratios'][k]:.2f}x)" if k in r else "-"
                     for k in ("after 1-thread torch", "after torch", "busy process")]
            if "after torch" in r:
                cells[1] += f" {r['ratios']['after torch / after 1-thread torch']:.2f}x"
            print(f"{r['case']:<30} {r['alone']:9.3f} {cells[0]:>21} {cells[1]:>25} {cells[2]:>18}", file=out)
        print(f"goal on 2 CPUs: each at most {GOAL}x the time alone (fair share 1.5x); after torch, the second "
              "figure is over the time after 1-thread torch (what torch's threads cost, its caches aside)", file=out)
    return rows


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops.bench.sharing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=usable_cpus(), help="dmlops' (and torch's) thread count")
    parser.add_argument("--calls", type=int, default=60, help="timed calls per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every figure")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.calls < 1 or args.rounds < 1:
        parser.error("--threads, --calls and --rounds must be >= 1")
    run(args.threads, args.calls, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
