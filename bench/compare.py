"""Padding side by side: dmlops.pad vs numpy.pad vs torch.nn.functional.pad, and a plain copy.

    python bench/compare.py [--threads 1,2] [--repeat N] [--json out.json] [--quick]

Padding is memory-bound, so next to the three implementations we time a plain copy of the
output's bytes (source and destination both of the output size, preallocated) and report
dmlops' effective bandwidth (output bytes written + input bytes read, per second) as a
percentage of the copy's (2 x output bytes per copy: read + write).

Fairness rules:
- dmlops, numpy and torch all allocate their output on every call; dmlops with a
  preallocated ``out=`` is a separate column.
- dmlops and torch run with the same thread count (dmlops.set_num_threads,
  torch.set_num_threads); np.pad is single-threaded whatever the count. The copy is
  split over the same number of threads, by np.copyto in Python threads (numpy releases
  the GIL while copying) and by torch's Tensor.copy_; the faster of the two is the baseline,
  so the percentage is never flattered by a slow copy.
- Every case is checked before it is timed: dmlops (with and without out=) must equal
  np.pad bit for bit, and torch's result too where torch has the mode. A fast wrong answer
  stops the script.
- Where torch cannot run a case (pads larger than the input), a second witness is an
  index-gather reference written from the DirectML formulas, so np.pad is not the only judge.
- Each measurement is the median of --repeat timed calls (fewer for calls so slow that
  they would exceed TIME_BUDGET_S), taken in ROUNDS rounds: in each round every
  implementation gets warm-up calls (>= BLOCK_WARMUP_S) and then its share of back-to-back
  timed calls. Back-to-back calls see the caches and the allocator in their
  steady state (as Google Benchmark does); the rounds spread a burst of load from another
  process over all columns instead of one. --cold interleaves single calls instead, so every
  call starts with the caches full of another implementation's data (closer to DRAM).
- The run ends by saying how many CPUs other processes kept busy meanwhile: on a 2-core
  machine anything above ~0.1 means the figures are disturbed.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

import dmlops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (BLOCK_WARMUP_S, Copier, environment, finish, fmt, import_torch, load_gauge_start,  # noqa: E402
                      make_input, make_parser, median_ms, min_ms, parse_args, print_header_rule, require, same_bits,
                      schedule_text, time_calls, verdict_text)

torch, F = import_torch()

MODES = ("constant", "edge", "reflection", "symmetric", "wrap")
NUMPY_MODE = {"constant": "constant", "edge": "edge", "reflection": "reflect", "symmetric": "symmetric",
              "wrap": "wrap"}
# PyTorch has no symmetric (half-sample) mode.
TORCH_MODE = {"constant": "constant", "edge": "replicate", "reflection": "reflect", "wrap": "circular"}

# The targets for the TARGET case, modes TARGET_MODES, at 2 threads.
TARGET_CASE = "nchw-pad2"
TARGET_MODES = ("constant", "reflection", "edge")
TARGET_THREADS = 2
TARGET_COPY_FRACTION = 0.70
TARGET_VS_NUMPY = 3.0
TARGET_VS_TORCH = 1.5


@dataclass
class Case:
    name: str
    shape: tuple
    dtype: str
    start: tuple
    end: tuple
    modes: tuple
    torch_ok: bool = True  # False where torch cannot express the case (pads larger than the input)
    note: str = ""


CASES = [
    # The target: an NCHW activation padded by 2 on H and W (a 5x5 convolution's halo).
    Case(TARGET_CASE, (1, 64, 256, 256), "float32", (0, 0, 2, 2), (0, 0, 2, 2), MODES),
    Case("image-u8-pad16", (1, 3, 1080, 1920), "uint8", (0, 0, 16, 16), (0, 0, 16, 16), ("reflection",)),
    Case("vector-f64-pad1000", (10_000_000,), "float64", (1000,), (1000,), ("constant", "reflection")),
    Case("ncdhw-5d-pad1", (2, 8, 16, 64, 64), "float32", (0, 0, 1, 1, 1), (0, 0, 1, 1, 1),
         ("constant", "edge")),
    # Asymmetric pads several times the input: reflection folds repeatedly. torch's reflect
    # requires pad < input size, so only dmlops and numpy run it.
    Case("large-pad-reflect", (1, 64, 32, 32), "float32", (0, 0, 70, 45), (0, 0, 45, 70), ("reflection",),
         torch_ok=False, note="pads > input: torch n/a"),
]


def source_index(mode: str, o: np.ndarray, n: int, start: int) -> np.ndarray:
    """DirectML's input coordinate for output coordinates `o` on one axis (-1: the constant)."""
    i = o - start
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "reflection":
        if n == 1:
            return np.zeros_like(i)
        m = np.mod(i, 2 * (n - 1))
        return np.where(m < n, m, 2 * (n - 1) - m)
    m = np.mod(i, 2 * n)  # symmetric
    return np.where(m < n, m, 2 * n - 1 - m)


def gather_reference(x: np.ndarray, case: Case, mode: str) -> np.ndarray:
    """The padding as a gather with one index array per axis (constant value 0)."""
    index = [source_index(mode, np.arange(n + s + e), n, s) for n, s, e in zip(x.shape, case.start, case.end)]
    result = x[np.ix_(*[np.maximum(ix, 0) for ix in index])]
    fill = np.zeros(result.shape, dtype=bool)
    for axis, ix in enumerate(index):
        shape = [1] * x.ndim
        shape[axis] = -1
        fill |= (ix < 0).reshape(shape)
    result[fill] = 0
    return result


def torch_pad_fn(x: np.ndarray, case: Case, mode: str) -> Optional[Callable[[], "torch.Tensor"]]:
    """A call of F.pad computing the same padding, or None when torch cannot."""
    if torch is None or not case.torch_ok or mode not in TORCH_MODE:
        return None
    padded = [d for d in range(x.ndim) if case.start[d] or case.end[d]]
    first = padded[0]
    k = x.ndim - first  # torch pads the trailing k dims
    pad: list = []
    for d in reversed(range(first, x.ndim)):
        pad += [case.start[d], case.end[d]]
    xt = torch.from_numpy(x)  # shares memory: no copy
    out_shape = tuple(n + s + e for n, s, e in zip(x.shape, case.start, case.end))
    tmode = TORCH_MODE[mode]
    if tmode != "constant":
        # reflect/replicate/circular pad the last k <= 3 dims of a (k+1)- or (k+2)-D tensor.
        if k > 3:
            return None
        if x.ndim > k + 2 or x.ndim == k:
            xt = xt.reshape((-1,) + x.shape[first:])
        return lambda: F.pad(xt, pad, mode=tmode).reshape(out_shape)
    return lambda: F.pad(xt, pad, mode="constant", value=0)


# Timed calls of one implementation stop at about this many seconds (at least 5 calls), so
# the 100 ms cases do not stretch a run beyond the quiet spells of a shared machine.
TIME_BUDGET_S = 1.0


def run_case(case: Case, mode: str, threads: int, warmup: int, repeat: int, cold: bool) -> dict:
    x = make_input(case.shape, case.dtype)
    pads = list(zip(case.start, case.end))
    np_mode = NUMPY_MODE[mode]
    np_kwargs = {"constant_values": 0} if mode == "constant" else {}

    dmlops.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)

    expected = np.pad(x, pads, mode=np_mode, **np_kwargs)
    got = dmlops.pad(x, case.start, case.end, mode=mode)
    require(same_bits(got, expected), f"{case.name} {mode}: dmlops.pad differs from np.pad")
    out = np.full_like(expected, 0x5A if expected.dtype == np.uint8 else 7)  # not already the answer
    require(dmlops.pad(x, case.start, case.end, mode=mode, out=out) is out, "dmlops.pad(out=) did not return out")
    require(same_bits(out, expected), f"{case.name} {mode}: dmlops.pad(out=) differs from np.pad")

    tfn = torch_pad_fn(x, case, mode)
    if tfn is not None:
        require(same_bits(tfn().numpy(), expected), f"{case.name} {mode}: torch differs from np.pad")
    elif not case.torch_ok:
        require(same_bits(got, gather_reference(x, case, mode)), f"{case.name} {mode}: dmlops differs from the gather")

    copier = Copier(expected.nbytes, threads, torch)
    fns = {
        "dmlops": lambda: dmlops.pad(x, case.start, case.end, mode=mode),
        "dmlops_out": lambda: dmlops.pad(x, case.start, case.end, mode=mode, out=out),
        "numpy": lambda: np.pad(x, pads, mode=np_mode, **np_kwargs),
        "copy_numpy": copier.numpy,
    }
    if tfn is not None:
        fns["torch"] = tfn
    if torch is not None:
        fns["copy_torch"] = copier.torch
    samples = time_calls(fns, warmup, repeat, cold, time_budget=TIME_BUDGET_S)
    ms = median_ms(samples)
    copier.close()
    # The result again after timing: the buffers were reused many times.
    require(same_bits(out, expected), f"{case.name} {mode}: out= result changed during timing")

    out_bytes, in_bytes = expected.nbytes, x.nbytes
    copy_ms = min(ms["copy_numpy"], ms.get("copy_torch", float("inf")))
    copy_bw = 2 * out_bytes / (copy_ms * 1e-3)
    pad_bytes = out_bytes + in_bytes
    row = {
        "case": case.name, "shape": list(case.shape), "dtype": case.dtype, "mode": mode, "threads": threads,
        "start_padding": list(case.start), "end_padding": list(case.end),
        "input_bytes": in_bytes, "output_bytes": out_bytes,
        "ms": {k: round(v, 4) for k, v in ms.items()},
        "min_ms": min_ms(samples),
        "timed_calls": {k: len(ts) for k, ts in samples.items()},
        "ms_torch": round(ms["torch"], 4) if "torch" in ms else None,
        "copy_ms": round(copy_ms, 4),
        "copy_GBps": copy_bw / 1e9,
        "dmlops_GBps": pad_bytes / (ms["dmlops"] * 1e-3) / 1e9,
        "dmlops_out_GBps": pad_bytes / (ms["dmlops_out"] * 1e-3) / 1e9,
        "copy_fraction": pad_bytes / (ms["dmlops"] * 1e-3) / copy_bw,
        "copy_fraction_out": pad_bytes / (ms["dmlops_out"] * 1e-3) / copy_bw,
        "numpy_over_dmlops": ms["numpy"] / ms["dmlops"],
        "torch_over_dmlops": ms["torch"] / ms["dmlops"] if "torch" in ms else None,
        "torch_note": None if "torch" in ms else torch_unavailable_reason(case, mode),
        "checked_against": ["np.pad"] + (["torch"] if tfn is not None else [])
        + (["gather reference"] if tfn is None and not case.torch_ok else []),
    }
    return row


def torch_unavailable_reason(case: Case, mode: str) -> str:
    if torch is None:
        return "torch not installed"
    if mode not in TORCH_MODE:
        return f"torch has no {mode} mode"
    if not case.torch_ok:
        return case.note or "not expressible in torch"
    return "more than 3 padded trailing dims"


def print_table(rows: list) -> None:
    header = (f"{'case':<19} {'dtype':<7} {'mode':<10} {'thr':>3} | {'dmlops':>8} {'dml out=':>8} "
              f"{'numpy':>8} {'torch':>8} {'copy':>8} | {'np/dml':>6} {'th/dml':>6} | {'%copy':>5} {'%copy out=':>10}")
    print_header_rule(header)
    for r in rows:
        ms = r["ms"]
        print(f"{r['case']:<19} {r['dtype']:<7} {r['mode']:<10} {r['threads']:>3} | "
              f"{ms['dmlops']:8.3f} {ms['dmlops_out']:8.3f} {ms['numpy']:8.3f} {fmt(r['ms_torch'], '8.3f'):>8} "
              f"{r['copy_ms']:8.3f} | {r['numpy_over_dmlops']:6.2f} {fmt(r['torch_over_dmlops'], '6.2f'):>6} | "
              f"{100 * r['copy_fraction']:5.0f} {100 * r['copy_fraction_out']:10.0f}")


def check_targets(rows: list) -> list:
    verdicts = []
    for r in rows:
        if r["case"] != TARGET_CASE or r["mode"] not in TARGET_MODES:
            continue
        checks = {
            "copy_fraction": (r["copy_fraction"], TARGET_COPY_FRACTION),
            "copy_fraction_out": (r["copy_fraction_out"], TARGET_COPY_FRACTION),
            "numpy_over_dmlops": (r["numpy_over_dmlops"], TARGET_VS_NUMPY),
            "torch_over_dmlops": (r["torch_over_dmlops"], TARGET_VS_TORCH),
        }
        for name, (value, goal) in checks.items():
            verdicts.append({
                "mode": r["mode"], "threads": r["threads"], "metric": name, "value": value, "goal": goal,
                "met": None if value is None else value >= goal, "binding": r["threads"] == TARGET_THREADS,
            })
    return verdicts


def print_targets(verdicts: list) -> None:
    labels = {"copy_fraction": "% of copy bandwidth", "copy_fraction_out": "% of copy bandwidth (out=)",
              "numpy_over_dmlops": "speed-up vs np.pad", "torch_over_dmlops": "speed-up vs torch"}
    print(f"\nTargets ({TARGET_CASE}, float32 1x64x256x256 pad 2 on H and W; binding at {TARGET_THREADS} threads):")
    for v in verdicts:
        value, goal, met, tag = verdict_text(v, pct=v["metric"].startswith("copy"))
        print(f"  {v['mode']:<10} threads={v['threads']}  {labels[v['metric']]:<27} {value:>7} >= {goal:<5} {met}{tag}")


def main(argv: Optional[list] = None) -> int:
    parser = make_parser(__doc__)
    args = parse_args(parser, argv)
    threads_list, repeat, warmup = args.threads_list, args.repeat, args.warmup
    cases = [c for c in CASES if c.name == TARGET_CASE] if args.quick else CASES

    env = environment(args, torch, dmlops)
    schedule = schedule_text(repeat, args.cold)
    print(f"median of {repeat} timed calls per column (or as many as fit in {TIME_BUDGET_S:g} s, at least 5), "
          f"{schedule}, "
          f"after >= {warmup} calls and {BLOCK_WARMUP_S * 1e3:.0f} ms of warm-up; "
          f"load average {env['load_average_start']}")
    if torch is None:
        print("torch is not installed: torch columns are n/a and the copy baseline is np.copyto only")
    print("ms = median wall time per call; dmlops/numpy/torch allocate their output, 'dml out=' writes a "
          "preallocated one;\ncopy = faster of np.copyto (threads) and torch copy_ of the output's bytes; "
          "%copy = (out+in bytes)/t over 2*out bytes/t_copy.")
    print("Checked before timing: dmlops == np.pad bit-exact for every row, and == torch where torch has the mode\n"
          "(== an index-gather reference where torch cannot run the case).\n")

    gauge_start = load_gauge_start()
    rows = []
    for case in cases:
        for mode in case.modes:
            for threads in threads_list:
                rows.append(run_case(case, mode, threads, warmup, repeat, args.cold))
    print_table(rows)
    for case in cases:
        if case.note:
            print(f"note: {case.name}: {case.note}")
    print("note: symmetric has no torch equivalent (n/a); np.pad is single-threaded at every thread count.")
    verdicts = check_targets(rows)
    if verdicts:
        print_targets(verdicts)
    finish(env, gauge_start, args.json, rows, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
