"""Timing and environment helpers shared by the side-by-side benchmark scripts (bench/compare_*.py).

Schedule (see time_calls): each measurement is the median of `repeat` timed calls taken in
ROUNDS rounds; in each round every implementation gets warm-up calls (>= BLOCK_WARMUP_S) and
then its share of back-to-back timed calls. Back-to-back calls see the caches and the
allocator in their steady state (as Google Benchmark does); the rounds spread a burst of load
from another process over all columns instead of one. `cold=True` interleaves single calls
instead, so every call starts with the caches full of another implementation's data.
"""
from __future__ import annotations

import os
import platform
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


def time_calls(fns: dict, warmup: int, repeat: int, cold: bool) -> dict:
    """Wall times in seconds of each callable (see the module docstring for the schedule)."""
    times: dict = {name: [] for name in fns}

    def timed(name: str, fn: Callable, calls: int) -> None:
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)

    def warm(fn: Callable, calls: int) -> None:
        t_end = time.perf_counter() + BLOCK_WARMUP_S
        for i in range(100):
            if i >= calls and time.perf_counter() >= t_end:
                break
            fn()

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


class Copier:
    """Copies `nbytes` from one preallocated buffer to another on `threads` threads: the
    bandwidth ceiling of a data-movement operator. numpy's copyto runs in Python threads
    (it releases the GIL); torch's copy_ uses its own pool; callers take the faster."""

    def __init__(self, nbytes: int, threads: int, torch=None):
        rng = np.random.default_rng(7)
        self.src = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        self.dst = np.empty_like(self.src)
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
