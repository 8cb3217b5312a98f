"""The machine's limits, measured by every report at its start and again at its end (never
assumed). A limit is a ceiling and other processes can only lower what a measurement sees, so
each figure is the best one seen: the fastest call, the best run, the better of start and end.

- Copy bandwidth, per thread count: a large buffer copied with np.copyto (split into one slice
  per Python thread: copyto releases the GIL) and with dmlops.pad with zero padding into a
  preallocated output (dmlops' own pool); the faster is the limit. Bytes count the read and the
  write (2 x buffer size), like the operators' bytes read + written.
- FMA peak, per thread count: dmlops._core.fma_peak_gflops, a register-only float32 FMA loop in
  the widest ISA the kernels use (fma_isa()).
"""
from __future__ import annotations

import dmlops
from dmlops import _core

from ._harness import Copier, time_calls


def copy_bandwidth(nbytes: int, threads: int, repeat: int, budget: float, block_warmup: float) -> dict:
    dmlops.set_num_threads(threads)
    copier = Copier(nbytes, threads)
    try:
        into = {name: fn for name, fn in copier.calls().items() if name in Copier.INTO}
        ms = {name: min(t) * 1e3 for name, t in time_calls(into, 1, repeat, budget, block_warmup).items()}
    finally:
        copier.close()
    method = min(ms, key=lambda name: ms[name])
    return {"GBps": 2 * nbytes / (ms[method] * 1e-3) / 1e9, "method": method, "bytes": nbytes,
            "ms": {k: round(v, 4) for k, v in ms.items()}}


def fma_peak(threads: int, milliseconds: float, runs: int = 3) -> dict:
    return {"GFLOPs": max(_core.fma_peak_gflops(threads, milliseconds) for _ in range(runs)),
            "isa": _core.fma_isa(), "milliseconds": milliseconds}


def measure(threads_list: list, copy_bytes: int, fma_ms: float, repeat: int, budget: float,
            block_warmup: float, tick=lambda label: None) -> dict:
    limits: dict = {"isa": _core.fma_isa(), "copy": {}, "fma": {}}
    for t in threads_list:
        tick(f"copy bandwidth, {t} thread(s)")
        limits["copy"][t] = copy_bandwidth(copy_bytes, t, repeat, budget, block_warmup)
        tick(f"FMA peak, {t} thread(s)")
        limits["fma"][t] = fma_peak(t, fma_ms)
    return limits


def best(first: dict, second: dict) -> dict:
    """Per kind and thread count, the higher of two measurements (each marked with when)."""
    out = {"isa": first["isa"], "copy": {}, "fma": {}}
    for kind, key in (("copy", "GBps"), ("fma", "GFLOPs")):
        for t in first[kind]:
            a, b = dict(first[kind][t], when="start"), dict(second[kind][t], when="end")
            out[kind][t] = a if a[key] >= b[key] else b
    return out


def limit_value(limits: dict, kind: str, threads: int) -> float:
    """The limit in work units per second: bytes/s for "copy", FLOP/s for "fma"."""
    if kind == "copy":
        return limits["copy"][threads]["GBps"] * 1e9
    return limits["fma"][threads]["GFLOPs"] * 1e9

