"""Timing and environment helpers shared by the side-by-side benchmark scripts (bench/compare_*.py).

Schedule (see time_calls): each measurement is the median of `repeat` timed calls taken in
ROUNDS rounds; in each round every implementation gets warm-up calls (>= BLOCK_WARMUP_S) and
then its share of back-to-back timed calls. Back-to-back calls see the caches and the
allocator in their steady state (as Google Benchmark does); the rounds spread a burst of load
from another process over all columns instead of one. `cold=True` interleaves single calls
instead, so every call starts with the caches full of another implementation's data.
With `time_budget` (seconds), each implementation's timed calls stop at about that much time
(at least 5 calls), and a block is warmed up again only if one call is shorter than the warm-up.

Also here: the correctness guards (require, same_bits), the copy baseline (Copier), the load
gauge (cpu_jiffies, other_load), and the command line, environment header, target lines and
closing lines the compare scripts share.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import numpy as np

ROUNDS = 10
# Long enough for another library's spinning worker threads (OpenMP spins a few ms after a
# parallel region) to go idle, without sleeping: a sleeping process comes back to cold caches
# and slow thread wake-ups on a VM.
BLOCK_WARMUP_S = 0.02


class WrongResult(AssertionError):
    pass


def require(ok: bool, message: str) -> None:
    """An assert that `python -O` cannot remove: timing a wrong answer is worse than no timing."""
    if not ok:
        raise WrongResult(message)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def import_torch():
    """(torch, torch.nn.functional), or (None, None): the comparisons still run without torch;
    their torch columns say so."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None, None
    return torch, F


def make_input(shape: tuple, dtype: str) -> np.ndarray:
    """Standard-normal floats or uniform bytes, from a fixed seed: the same data every run."""
    rng = np.random.default_rng(12345)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 256, size=shape, dtype=dtype)


def time_calls(fns: dict, warmup: int, repeat: int, cold: bool, time_budget: Optional[float] = None) -> dict:
    """Wall times in seconds of each callable (see the module docstring for the schedule)."""
    times: dict = {name: [] for name in fns}

    def timed(name: str, fn: Callable, calls: int) -> None:
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)

    def warm(fn: Callable, calls: int, cap: Optional[float] = None) -> float:
        """Runs fn `calls` times and for BLOCK_WARMUP_S (with a cap: at most ~cap s once it has
        run twice); returns its fastest call."""
        t0 = time.perf_counter()
        fastest = float("inf")
        for i in range(100):
            elapsed = time.perf_counter() - t0
            if (i >= calls and elapsed >= BLOCK_WARMUP_S) or (cap is not None and i >= 2 and elapsed >= cap):
                break
            t1 = time.perf_counter()
            fn()
            fastest = min(fastest, time.perf_counter() - t1)
        return fastest

    if time_budget is None:
        if cold:
            for fn in fns.values():
                warm(fn, warmup)
            for _ in range(repeat):
                for name, fn in fns.items():
                    timed(name, fn, 1)
        else:
            rounds = min(ROUNDS, repeat)
            for r in range(rounds):
                calls = repeat * (r + 1) // rounds - repeat * r // rounds
                for name, fn in fns.items():
                    warm(fn, warmup if r == 0 else 1)
                    timed(name, fn, calls)
        return times

    # Budgeted: one warm-up block per implementation (a call that alone takes longer than
    # BLOCK_WARMUP_S is its own warm-up), then at most ~time_budget s of timed calls each.
    one_call = {name: warm(fn, warmup, 0.25) for name, fn in fns.items()}
    reps = {name: max(5, min(repeat, int(time_budget / one_call[name]))) for name in fns}
    if cold:
        for i in range(max(reps.values())):
            for name, fn in fns.items():
                if i < reps[name]:
                    timed(name, fn, 1)
        return times
    rounds = min(ROUNDS, repeat)
    for r in range(rounds):
        for name, fn in fns.items():
            calls = reps[name] * (r + 1) // rounds - reps[name] * r // rounds
            if calls == 0:
                continue
            if r > 0 and one_call[name] < BLOCK_WARMUP_S:
                warm(fn, 1, 0.25)
            timed(name, fn, calls)
    return times


def median_ms(samples: dict) -> dict:
    """The median of each implementation's samples, in milliseconds."""
    return {name: statistics.median(ts) * 1e3 for name, ts in samples.items()}


def min_ms(samples: dict) -> dict:
    return {name: round(min(ts) * 1e3, 4) for name, ts in samples.items()}


class Copier:
    """Copies `nbytes` from one preallocated buffer to another on `threads` threads: the
    bandwidth ceiling of a data-movement operator. numpy's copyto runs in Python threads
    (it releases the GIL); torch's copy_ uses its own pool; callers take the faster."""

    def __init__(self, nbytes: int, threads: int, torch=None):
        rng = np.random.default_rng(7)
        self.src = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        self.dst = np.empty_like(self.src)
        self.threads = threads
        bounds = [nbytes * i // threads // 64 * 64 for i in range(threads)] + [nbytes]
        self.chunks = [(self.dst[a:b], self.src[a:b]) for a, b in zip(bounds, bounds[1:])]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.tsrc = torch.from_numpy(self.src) if torch is not None else None
        self.tdst = torch.from_numpy(self.dst) if torch is not None else None

    def numpy(self) -> None:
        if self.pool is None:
            np.copyto(self.dst, self.src)
        else:
            list(self.pool.map(lambda c: np.copyto(*c), self.chunks))

    def torch(self) -> None:
        self.tdst.copy_(self.tsrc)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_jiffies() -> Optional[tuple]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def other_load(start: Optional[tuple], own_start: float) -> Optional[float]:
    """Average number of CPUs kept busy by other processes since `start`: the noise gauge."""
    end = cpu_jiffies()
    if start is None or end is None or end[1] == start[1]:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    wall = (end[1] - start[1]) / hz / ncpu
    own = sum(os.times()[:2]) - own_start
    return max(0.0, ((end[0] - start[0]) / hz - own) / wall)


def load_average() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)



# ---------------------------------------------------------------------------------------------
# Command line, header, tables, targets and closing lines of the compare scripts.

def fmt(v: Optional[float], spec: str, na: str = "n/a") -> str:
    return na if v is None else format(v, spec)


def make_parser(doc: str, default_repeat: int = 30, quick_help: str = "few repeats and only the target case",
                cold: bool = True) -> argparse.ArgumentParser:
    """The options every compare script takes: --threads, --repeat, --json, --quick (and --cold)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeat", type=int, default=None,
                        help=f"timed calls per measurement (default {default_repeat}, quick 7)")
    parser.add_argument("--json", metavar="PATH", help="write every figure to this JSON file")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    if cold:
        parser.add_argument("--cold", action="store_true", help="interleave single calls (caches hold other data)")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Optional[list], default_repeat: int = 30,
               quick_repeat: int = 7, warmup: int = 5, quick_warmup: int = 2) -> argparse.Namespace:
    """parser.parse_args, plus args.threads_list (validated), args.repeat and args.warmup resolved
    for --quick."""
    args = parser.parse_args(argv)
    args.threads_list = [int(t) for t in args.threads.split(",") if t.strip()]
    if not args.threads_list or min(args.threads_list) < 1:
        parser.error("--threads needs positive integers, e.g. 1,2")
    if args.repeat is None:
        args.repeat = quick_repeat if args.quick else default_repeat
    args.warmup = quick_warmup if args.quick else warmup
    return args


def environment(args: argparse.Namespace, torch, dmlops) -> dict:
    """The run's environment (for the JSON), printed as the first two header lines."""
    env = {
        "cpu": cpu_model(), "logical_cpus": os.cpu_count(), "usable_cpus": usable_cpus(),
        "python": platform.python_version(), "numpy": np.__version__,
        "torch": torch.__version__ if torch is not None else None,
        "dmlops": getattr(dmlops, "__version__", "unknown"),
        "threads": args.threads_list, "repeat": args.repeat, "warmup": args.warmup, "cold": args.cold,
        "load_average_start": load_average(),
    }
    print(f"CPU: {env['cpu']} ({env['usable_cpus']} usable of {env['logical_cpus']} logical CPUs)")
    print(f"threads: {','.join(map(str, args.threads_list))}   python {env['python']}   numpy {env['numpy']}   "
          f"torch {env['torch'] or 'not installed'}   dmlops {env['dmlops']}")
    return env


def schedule_text(repeat: int, cold: bool) -> str:
    return "single calls interleaved (--cold)" if cold else f"back-to-back calls in {min(ROUNDS, repeat)} rounds"


def load_gauge_start() -> tuple:
    """What other_load needs at the end: (jiffies, own CPU seconds) now."""
    return cpu_jiffies(), sum(os.times()[:2])


def print_header_rule(header: str) -> None:
    print(header)
    print("-" * len(header))


def verdict_text(v: dict, pct: bool) -> tuple:
    """(value, goal, met, tag) of one target verdict: percentages or ratios ("1.50x"); `tag`
    marks the non-binding (informative) ones."""
    value = "n/a" if v["value"] is None else (f"{100 * v['value']:.0f}%" if pct else f"{v['value']:.2f}x")
    goal = f"{100 * v['goal']:.0f}%" if pct else f"{v['goal']:.1f}x"
    met = "n/a" if v["met"] is None else ("met" if v["met"] else "NOT MET")
    tag = "" if v["binding"] else "  (informative)"
    return value, goal, met, tag


def finish(env: dict, gauge_start: tuple, json_path: Optional[str], rows: list, verdicts: list) -> None:
    """The closing lines (end load average, other processes' CPUs) and the JSON file."""
    env["load_average_end"] = load_average()
    env["other_processes_cpus"] = busy = other_load(*gauge_start)
    print(f"\nload average at the end: {env['load_average_end']}; other processes kept "
          f"{'n/a' if busy is None else f'{busy:.2f}'} of {os.cpu_count()} CPUs busy on average during the run"
          f"{' - timings disturbed, rerun on a quiet machine' if busy is not None and busy > 0.1 else ''}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"environment": env, "results": rows, "targets": verdicts}, f, indent=2)
        print(f"wrote {json_path}")
