"""Timing, inputs and the machine-load gauge of the benchmark report (python -m dmlops.bench).

Schedule (see time_calls): each implementation first gets a warm-up block (at least `warmup`
calls and block_warmup seconds; a call that alone takes longer is its own warm-up), then about
`time_budget` seconds of timed calls (at most `repeat`, at least 5 unless `repeat` is smaller),
spread over ROUNDS rounds; in each round every implementation runs its share back to back. Back-to-back
calls see the caches and the allocator in their steady state (as Google Benchmark does); the
rounds spread a burst of load from another process over all columns instead of one. The
figure reported is the median.

Also here: the fixed-seed inputs (make_input), the threaded copy (Copier) the copy-bandwidth
limit is measured with, and the load gauge (cpu_jiffies, other_load) that says how much other
processes disturbed a run.
"""
from __future__ import annotations

import os
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Callable, Optional

import numpy as np

import dmlops

ROUNDS = 10
# Long enough for another library's spinning worker threads (OpenMP spins a few ms after a
# parallel region) to go idle, without sleeping: a sleeping process comes back to cold caches
# and slow thread wake-ups on a VM.
BLOCK_WARMUP_S = 0.02


# The seed of every input; filters and other second operands use SEED + 1.
SEED = 12345


@lru_cache(maxsize=2)  # a case runs once per thread count on the same input
def make_input(shape: tuple, dtype: str, seed: int = SEED) -> np.ndarray:
    """Standard-normal floats or uniform bytes, from a fixed seed: the same data every run.
    The calls that ask for the same input share the array (torch.from_numpy warns about
    read-only arrays, so it stays writable): nothing may write into it."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 256, size=shape, dtype=dtype)


def time_calls(fns: dict, warmup: int, repeat: int, time_budget: float,
               block_warmup: float = BLOCK_WARMUP_S, clock: Callable[[], float] = time.perf_counter,
               setup: Optional[Callable[[], None]] = None) -> dict:
    """Wall times in seconds of each callable (see the module docstring for the schedule), or
    the times of another ``clock`` (``time.thread_time`` for calls that run on the calling
    thread alone: robust to other processes on a shared machine). ``setup``, when given, runs
    untimed before every call."""
    times: dict = {name: [] for name in fns}
    prepare = setup or (lambda: None)

    def warm(fn: Callable, calls: int, cap: float) -> float:
        """Runs fn `calls` times and for block_warmup seconds (at most ~cap s once it has run
        twice); returns its fastest call."""
        t0 = time.perf_counter()
        fastest = float("inf")
        for i in range(100):
            elapsed = time.perf_counter() - t0
            if (i >= calls and elapsed >= block_warmup) or (i >= 2 and elapsed >= cap):
                break
            prepare()
            t1 = time.perf_counter()
            fn()
            fastest = min(fastest, time.perf_counter() - t1)
        return fastest

    one_call = {name: warm(fn, warmup, 0.25) for name, fn in fns.items()}
    fewest = min(5, repeat)
    reps = {name: max(fewest, min(repeat, int(time_budget / max(one_call[name], 1e-9)))) for name in fns}
    rounds = min(ROUNDS, max(reps.values()))
    for r in range(rounds):
        for name, fn in fns.items():
            calls = reps[name] * (r + 1) // rounds - reps[name] * r // rounds
            if calls == 0:
                continue
            if r > 0 and one_call[name] < block_warmup:
                warm(fn, 1, 0.25)
            for _ in range(calls):
                prepare()
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    return times


def median_ms(samples: dict) -> dict:
    """The median of each implementation's samples, in milliseconds."""
    return {name: statistics.median(ts) * 1e3 for name, ts in samples.items()}


class Copier:
    """Copies `nbytes` from one preallocated buffer to another on `threads` threads, one slice
    each: np.copyto releases the GIL, so Python threads copy in parallel.

    The yardsticks of data movement (calls()) are two plain copies of the same bytes, each the
    faster of the same two methods, np.copyto on `threads` Python threads and dmlops.pad without
    padding on dmlops' pool, and differing only in where they write: into an existing buffer
    (INTO), or into a new array (FRESH), as an operator writes its output. Both methods count in
    both: Python threads alone are no yardstick above one thread (each call wakes a
    ThreadPoolExecutor and hands the GIL round its workers; on 2 cores at 4 threads a 7 MB copy
    took 1.5x its 1-thread time, where dmlops' pool took half), and an allocating copy timed
    that way made data movement look 1-2x faster than a copy."""

    # The names of the copies into an existing buffer / into a new array among calls().
    INTO = ("np.copyto", "dmlops.pad")
    FRESH = ("np.empty+copyto", "dmlops.pad new")

    def __init__(self, nbytes: int, threads: int):
        rng = np.random.default_rng(7)
        self.src = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        self.dst = np.empty_like(self.src)
        bounds = [nbytes * i // threads // 64 * 64 for i in range(threads)] + [nbytes]
        self.slices = [slice(a, b) for a, b in zip(bounds, bounds[1:])]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def copy_into(self, dst: np.ndarray) -> np.ndarray:
        if self.pool is None:
            np.copyto(dst, self.src)
        else:
            list(self.pool.map(lambda s: np.copyto(dst[s], self.src[s]), self.slices))
        return dst

    def __call__(self) -> None:
        self.copy_into(self.dst)

    def calls(self) -> dict:
        """The plain copies of src, by name (INTO, then FRESH). A new array's pages come from
        the allocator as an operator's output does: reused below glibc's malloc cache (32 MB),
        else fresh pages the OS zeroes on first touch."""
        no_pad = (0,)
        return {"np.copyto": self, "dmlops.pad": lambda: dmlops.pad(self.src, no_pad, no_pad, out=self.dst),
                "np.empty+copyto": lambda: self.copy_into(np.empty_like(self.src)),
                "dmlops.pad new": lambda: dmlops.pad(self.src, no_pad, no_pad)}

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


def load_gauge_start() -> tuple:
    """What other_load needs at the end: (jiffies, own CPU seconds) now."""
    return cpu_jiffies(), sum(os.times()[:2])
