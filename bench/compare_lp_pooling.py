"""Lp pooling side by side: dmlops.lp_pooling vs a numpy formulation vs torch lp_pool2d/3d,
and a plain copy of the input bytes.

    python bench/compare_lp_pooling.py [--threads 1,2] [--repeat N] [--json out.json] [--quick]

Columns (median wall time per call, ms):
- dmlops      the case as DirectML states it (with its padding), output allocated per call;
- dml out=    the same into a preallocated output;
- dml nopad   the case without padding: the geometry torch can compute;
- torch       torch.nn.functional.lp_pool2d/3d on that unpadded geometry (it has no padding);
- torch+pad   F.pad then lp_pool: torch computing the padded case (informative);
- numpy       np.pad + sliding_window_view + sum of |x|^p (single-threaded);
- copy        the input's bytes copied once: faster of np.copyto over Python threads and
              torch's copy_, on the same thread count.

Targets (the issue, float32 1x64x112x112, window 3x3, stride 2, padding 1, p = 2, binding at
TARGET_THREADS): dmlops at least 2x faster than torch on the unpadded equivalent, and
dmlops (padded) within 2x of the copy.

Fairness and checks:
- dmlops and torch run with the same thread count; numpy is single-threaded regardless.
- Every case is checked before it is timed: dmlops (padded, out= and unpadded) against the
  numpy formulation computed in float64, and torch against dmlops where torch means the same
  thing. torch's lp_pool takes x**p without |x|, so for odd p it is checked on |x| only
  (on signed inputs it returns negative values or NaN; the timing uses the signed input).
- Timing schedule, copy baseline and load gauge: bench/_harness.py.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

import dmlops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (BLOCK_WARMUP_S, Copier, environment, finish, fmt, import_torch, load_gauge_start,  # noqa: E402
                      make_input, make_parser, median_ms, min_ms, parse_args, print_header_rule, require,
                      schedule_text, time_calls, verdict_text)

torch, F = import_torch()

TARGET_CASE = "resnet-stem-p2"
TARGET_THREADS = 2
TARGET_VS_TORCH = 2.0
TARGET_COPY_RATIO = 2.0


@dataclass
class Case:
    name: str
    shape: tuple
    dtype: str
    window: tuple
    strides: tuple
    start: tuple
    end: tuple
    p: int


STEM = dict(shape=(1, 64, 112, 112), window=(3, 3), strides=(2, 2), start=(1, 1), end=(1, 1))
CASES = [
    Case(TARGET_CASE, dtype="float32", p=2, **STEM),
    Case("resnet-stem-p1", dtype="float32", p=1, **STEM),
    Case("resnet-stem-p3", dtype="float32", p=3, **STEM),
    Case("resnet-stem-f16-p2", dtype="float16", p=2, **STEM),
    Case("stride1-56-p2", (1, 64, 56, 56), "float32", (3, 3), (1, 1), (1, 1), (1, 1), 2),
    Case("ncdhw-5d-p2", (1, 16, 32, 64, 64), "float32", (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), 2),
]


def numpy_lp_pool(x: np.ndarray, window, strides, start, end, p: int) -> np.ndarray:
    """The spec's formula in numpy: pad with zeros, take every window, sum |x|^p, root."""
    spatial = tuple(range(2, x.ndim))
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(start, end)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, window, axis=spatial)
    windows = windows[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
    taps = tuple(range(x.ndim, windows.ndim))
    if p == 1:
        return np.abs(windows).sum(axis=taps)
    if p == 2:
        return np.sqrt(np.square(windows).sum(axis=taps))
    return (np.abs(windows) ** p).sum(axis=taps) ** (1.0 / p)


def torch_lp_pool(xt, case: Case, padded: bool):
    """torch's lp_pool on the unpadded geometry, or (padded) after F.pad."""
    if padded:
        pads = []
        for s, e in zip(reversed(case.start), reversed(case.end)):
            pads += [s, e]
        xt = F.pad(xt, pads)
    pool = F.lp_pool2d if len(case.window) == 2 else F.lp_pool3d
    return pool(xt, case.p, case.window, case.strides)


def close(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    rtol = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}[dtype]
    return a.shape == b.shape and np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=1e-6)


def run_case(case: Case, threads: int, warmup: int, repeat: int, cold: bool) -> dict:
    x = make_input(case.shape, case.dtype)
    zeros = tuple(0 for _ in case.window)
    dmlops.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)

    def dml(padded: bool = True, out: Optional[np.ndarray] = None) -> np.ndarray:
        return dmlops.lp_pooling(x, case.window, strides=case.strides, start_padding=case.start if padded else zeros,
                                 end_padding=case.end if padded else zeros, p=case.p, out=out)

    # Correctness first.
    expected = numpy_lp_pool(x.astype(np.float64), case.window, case.strides, case.start, case.end, case.p)
    got = dml()
    require(close(got, expected, case.dtype), f"{case.name}: dmlops differs from the numpy formulation")
    out = np.full_like(got, 7)
    require(dml(out=out) is out and close(out, expected, case.dtype), f"{case.name}: dmlops out= differs")
    expected_nopad = numpy_lp_pool(x.astype(np.float64), case.window, case.strides, zeros, zeros, case.p)
    got_nopad = dml(padded=False)
    require(close(got_nopad, expected_nopad, case.dtype), f"{case.name}: unpadded dmlops differs from numpy")
    torch_note = None
    fns: dict = {
        "dmlops": dml,
        "dmlops_out": lambda: dml(out=out),
        "dmlops_nopad": lambda: dml(padded=False),
        "numpy": lambda: numpy_lp_pool(x, case.window, case.strides, case.start, case.end, case.p),
    }
    if torch is None:
        torch_note = "torch not installed"
    else:
        xt = torch.from_numpy(x)
        try:
            # torch raises x to p without |x|: check it where that agrees, on |x| for odd p.
            check_x = torch.from_numpy(np.abs(x)) if case.p % 2 else xt
            check_in = np.abs(x) if case.p % 2 else x
            want = dmlops.lp_pooling(check_in, case.window, strides=case.strides, p=case.p)
            require(close(torch_lp_pool(check_x, case, False).numpy(), want, case.dtype),
                    f"{case.name}: torch differs from dmlops")
            want_pad = dmlops.lp_pooling(check_in, case.window, strides=case.strides, start_padding=case.start,
                                         end_padding=case.end, p=case.p)
            require(close(torch_lp_pool(check_x, case, True).numpy(), want_pad, case.dtype),
                    f"{case.name}: torch (padded) differs from dmlops")
            fns["torch"] = lambda: torch_lp_pool(xt, case, False)
            fns["torch_pad"] = lambda: torch_lp_pool(xt, case, True)
            if case.p % 2:
                torch_note = "odd p: torch checked on |x| (it has no |x|)"
        except (RuntimeError, NotImplementedError) as e:  # e.g. a dtype torch's CPU pooling lacks
            torch_note = f"torch n/a: {str(e).splitlines()[0][:60]}"

    copier = Copier(x.nbytes, threads, torch)
    fns["copy_numpy"] = copier.numpy
    if torch is not None:
        fns["copy_torch"] = copier.torch
    samples = time_calls(fns, warmup, repeat, cold)
    ms = median_ms(samples)
    copier.close()
    require(close(out, expected, case.dtype), f"{case.name}: out= result changed during timing")

    copy_ms = min(ms["copy_numpy"], ms.get("copy_torch", float("inf")))
    return {
        "case": case.name, "shape": list(case.shape), "dtype": case.dtype, "window": list(case.window),
        "strides": list(case.strides), "start_padding": list(case.start), "end_padding": list(case.end),
        "p": case.p, "threads": threads, "input_bytes": x.nbytes,
        "ms": {k: round(v, 4) for k, v in ms.items()},
        "min_ms": min_ms(samples),
        "copy_ms": round(copy_ms, 4),
        "torch_over_dmlops": ms["torch"] / ms["dmlops_nopad"] if "torch" in ms else None,
        "dmlops_over_copy": ms["dmlops"] / copy_ms,
        "dmlops_out_over_copy": ms["dmlops_out"] / copy_ms,
        "numpy_over_dmlops": ms["numpy"] / ms["dmlops"],
        "torch_note": torch_note,
    }


def print_table(rows: list) -> None:
    header = (f"{'case':<19} {'dtype':<7} {'p':>2} {'thr':>3} | {'dmlops':>7} {'dml out=':>8} {'dml nopad':>9} "
              f"{'torch':>7} {'torch+pad':>9} {'numpy':>8} {'copy':>6} | {'torch/nopad':>11} {'dml/copy':>8} "
              f"{'out=/copy':>9} {'numpy/dml':>9}")
    print_header_rule(header)
    for r in rows:
        ms = r["ms"]
        print(f"{r['case']:<19} {r['dtype']:<7} {r['p']:>2} {r['threads']:>3} | {ms['dmlops']:7.3f} "
              f"{ms['dmlops_out']:8.3f} {ms['dmlops_nopad']:9.3f} {fmt(ms.get('torch'), '7.3f'):>7} "
              f"{fmt(ms.get('torch_pad'), '9.3f'):>9} {ms['numpy']:8.2f} {r['copy_ms']:6.3f} | "
              f"{fmt(r['torch_over_dmlops'], '10.2f'):>10}x {r['dmlops_over_copy']:7.2f}x "
              f"{r['dmlops_out_over_copy']:8.2f}x {r['numpy_over_dmlops']:8.1f}x")


def check_targets(rows: list) -> list:
    verdicts = []
    target_rows = [r for r in rows if r["case"] == TARGET_CASE]
    # Strict: against the fastest copy at any thread count (threaded copies can be slower).
    fastest_copy = min((r["copy_ms"] for r in target_rows), default=None)
    for r in target_rows:
        strict = r["ms"]["dmlops"] / fastest_copy
        for metric, value, goal, higher in (
            ("torch_over_dmlops", r["torch_over_dmlops"], TARGET_VS_TORCH, True),
            ("dmlops_over_copy", r["dmlops_over_copy"], TARGET_COPY_RATIO, False),
            ("dmlops_out_over_copy", r["dmlops_out_over_copy"], TARGET_COPY_RATIO, False),
            ("dmlops_over_fastest_copy", strict, TARGET_COPY_RATIO, False),
        ):
            met = None if value is None else (value >= goal if higher else value <= goal)
            binding = r["threads"] == TARGET_THREADS and metric != "dmlops_over_fastest_copy"
            verdicts.append({"threads": r["threads"], "metric": metric, "value": value, "goal": goal,
                             "higher_is_better": higher, "met": met, "binding": binding})
    return verdicts


def print_targets(verdicts: list) -> None:
    labels = {"torch_over_dmlops": "speed-up vs torch (unpadded)", "dmlops_over_copy": "time / copy time",
              "dmlops_out_over_copy": "time / copy time (out=)",
              "dmlops_over_fastest_copy": "time / fastest copy (any thr)"}
    print(f"\nTargets ({TARGET_CASE}: float32 1x64x112x112, 3x3, stride 2, padding 1, p = 2; "
          f"binding at {TARGET_THREADS} threads):")
    for v in verdicts:
        value, goal, met, tag = verdict_text(v, pct=False)
        op = ">=" if v["higher_is_better"] else "<="
        print(f"  threads={v['threads']}  {labels[v['metric']]:<30} {value:>7} {op} {goal}  {met}{tag}")


def main(argv: Optional[list] = None) -> int:
    parser = make_parser(__doc__)
    args = parse_args(parser, argv)
    threads_list, repeat, warmup = args.threads_list, args.repeat, args.warmup
    cases = [c for c in CASES if c.name == TARGET_CASE] if args.quick else CASES

    env = environment(args, torch, dmlops)
    schedule = schedule_text(repeat, args.cold)
    print(f"median of {repeat} timed calls, {schedule}, each block after >= {warmup} calls and "
          f"{BLOCK_WARMUP_S * 1e3:.0f} ms of warm-up; load average {env['load_average_start']}")
    print("ms per call; torch/nopad = torch time / dmlops time on the unpadded geometry; dml/copy = dmlops (padded) "
          "time / time to copy the input's bytes.\nChecked before timing: every dmlops column against numpy in "
          "float64; torch against dmlops (on |x| for odd p).\n")

    gauge_start = load_gauge_start()
    rows = [run_case(case, threads, warmup, repeat, args.cold) for case in cases for threads in threads_list]
    print_table(rows)
    for r in rows:
        if r["torch_note"] and r["threads"] == threads_list[0]:
            print(f"note: {r['case']}: {r['torch_note']}")
    verdicts = check_targets(rows)
    if verdicts:
        print_targets(verdicts)
    finish(env, gauge_start, args.json, rows, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
