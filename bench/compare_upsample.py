"""Upsample2D / Resample side by side: dmlops vs a numpy formulation vs
torch.nn.functional.interpolate, and a plain copy of the output's bytes.

    python bench/compare_upsample.py [--threads 1,2] [--repeat N] [--json out.json] [--quick] [--cold]

The issue's targets (float32 1x64x128x128 and 1x16x8x64x64, x2, on this 2-core machine):
nearest at least 70% of plain-copy bandwidth and at least 1.5x torch's interpolate(mode="nearest");
bilinear at least 1.5x torch's interpolate(mode="bilinear", align_corners=False).

Fairness rules (those of bench/compare.py, the padding comparison):
- dmlops, numpy and torch all allocate their output on every call; dmlops with a preallocated
  ``out=`` is a separate column.
- dmlops and torch run with the same thread count (dmlops.set_num_threads, torch.set_num_threads);
  numpy is single-threaded whatever the count. The copy is split over the same number of threads
  (np.copyto in Python threads, and torch's Tensor.copy_); the faster of the two is the baseline.
- Upsample2D on a 5-D NCDHW tensor never mixes depth slices, so torch runs it as its 4-D kernel on
  the (N, C*D, H, W) view (a free reshape), which is also torch's fastest formulation.
- Every case is checked before it is timed: dmlops (with and without out=) against the numpy
  formulation (nearest: bit for bit; linear: to float32 rounding), and torch's result too: bit for
  bit for nearest; for linear within 1e-4 relative to the data (torch computes its source
  coordinates in float32, dmlops in float64); for antialiased downsampling away from the borders
  (torch leaves out taps outside the input, ONNX and DirectML repeat the edge pixel).
- Each measurement is the median of --repeat timed calls, taken in ROUNDS rounds: in each round
  every implementation gets warm-up calls (>= BLOCK_WARMUP_S) and then its share of back-to-back
  timed calls; --cold interleaves single calls instead.
- The run ends by saying how many CPUs other processes kept busy meanwhile: on a 2-core machine
  anything above ~0.1 means the figures are disturbed.
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
                      make_input, make_parser, median_ms, min_ms, parse_args, print_header_rule, require,
                      same_bits, schedule_text, time_calls, verdict_text)

torch, F = import_torch()

TARGET_CASES = ("nchw-x2", "ncdhw-x2")
TARGET_THREADS = 2
TARGET_COPY_FRACTION = 0.70
TARGET_VS_TORCH = 1.5


@dataclass
class Case:
    name: str
    shape: tuple
    dtype: str
    scale: float  # on H and W
    modes: tuple
    antialiased: bool = False
    note: str = ""


CASES = [
    Case("nchw-x2", (1, 64, 128, 128), "float32", 2, ("nearest_neighbor", "linear")),
    Case("ncdhw-x2", (1, 16, 8, 64, 64), "float32", 2, ("nearest_neighbor", "linear")),
    Case("nchw-f16-x2", (1, 64, 128, 128), "float16", 2, ("nearest_neighbor", "linear")),
    Case("image-u8-x3", (1, 3, 360, 640), "uint8", 3, ("nearest_neighbor",)),
    Case("nchw-x1.75", (1, 64, 128, 128), "float32", 1.75, ("nearest_neighbor", "linear"),
         note="resample scales (1, 1, 1.75, 1.75); torch nearest-exact / bilinear"),
    Case("aa-quarter", (1, 16, 512, 512), "float32", 0.25, ("linear",), antialiased=True,
         note="resample x0.25 antialiased; torch antialias=True (borders differ, checked inside)"),
]


def is_upsample(case: Case) -> bool:
    return float(case.scale).is_integer() and case.scale >= 1 and not case.antialiased


def dmlops_fn(x: np.ndarray, case: Case, mode: str, out: Optional[np.ndarray] = None) -> Callable[[], np.ndarray]:
    if is_upsample(case):
        s = int(case.scale)
        return lambda: dmlops.upsample_2d(x, (s, s), mode, out=out)
    scales = (1.0,) * (x.ndim - 2) + (case.scale, case.scale)
    return lambda: dmlops.resample(x, scales, mode, antialiased=case.antialiased, out=out)


def axis_table(n: int, m: int, scale: float):
    """Half-pixel linear indices and weights of one axis (spec section 3), float64."""
    c = np.clip((np.arange(m) + 0.5) / scale - 0.5, 0, n - 1)
    i0 = np.floor(c).astype(np.intp)
    return i0, np.minimum(i0 + 1, n - 1), c - i0


def numpy_fn(x: np.ndarray, case: Case, mode: str) -> Optional[Callable[[], np.ndarray]]:
    """The numpy formulation a user would write: one broadcast copy for integer nearest, fancy
    indexing for fractional nearest, and two separable blends (float32 weights) for linear."""
    n_h, n_w = x.shape[-2:]
    m_h, m_w = int(np.floor(n_h * case.scale)), int(np.floor(n_w * case.scale))
    lead = x.shape[:-2]
    if case.antialiased:
        return None
    if mode == "nearest_neighbor":
        if is_upsample(case):
            s = int(case.scale)
            return lambda: np.broadcast_to(x[..., :, None, :, None], lead + (n_h, s, n_w, s)).reshape(lead + (m_h, m_w))
        rows = np.minimum(np.floor((np.arange(m_h) + 0.5) / case.scale), n_h - 1).astype(np.intp)
        cols = np.minimum(np.floor((np.arange(m_w) + 0.5) / case.scale), n_w - 1).astype(np.intp)
        return lambda: x[..., rows[:, None], cols]
    h0, h1, wh = axis_table(n_h, m_h, case.scale)
    w0, w1, ww = axis_table(n_w, m_w, case.scale)
    acc = np.float32 if x.dtype != np.float64 else np.float64
    wh = wh.astype(acc)[:, None]
    ww = ww.astype(acc)

    def run():
        xa = x.astype(acc, copy=False)
        t = xa[..., w0] * (1 - ww) + xa[..., w1] * ww
        return (t[..., h0, :] * (1 - wh) + t[..., h1, :] * wh).astype(x.dtype, copy=False)
    return run


def torch_fn(x: np.ndarray, case: Case, mode: str) -> Optional[Callable[[], "torch.Tensor"]]:
    if torch is None:
        return None
    xt = torch.from_numpy(x)  # shares memory: no copy
    x4 = xt.reshape((-1,) + x.shape[-3:]) if x.ndim == 4 else xt.reshape((x.shape[0], -1) + x.shape[-2:])
    m = tuple(int(np.floor(n * case.scale)) for n in x.shape[-2:])
    out_shape = x.shape[:-2] + m
    if mode == "nearest_neighbor":
        # integer scales: torch's "nearest" repeats pixels; fractional: "nearest-exact" is the
        # half-pixel, round-half-up rule of RESAMPLE1
        tmode = "nearest" if is_upsample(case) else "nearest-exact"
        return lambda: F.interpolate(x4, scale_factor=case.scale, mode=tmode).reshape(out_shape)
    return lambda: F.interpolate(x4, scale_factor=case.scale, mode="bilinear", align_corners=False,
                                 antialias=case.antialiased).reshape(out_shape)


def close(a: np.ndarray, b: np.ndarray, relative: float) -> bool:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a.shape == b.shape and float(np.max(np.abs(a64 - b64))) <= relative * max(1.0, float(np.max(np.abs(b64))))


def run_case(case: Case, mode: str, threads: int, warmup: int, repeat: int, cold: bool) -> dict:
    x = make_input(case.shape, case.dtype)
    dmlops.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)

    got = dmlops_fn(x, case, mode)()
    nfn = numpy_fn(x, case, mode)
    checked = []
    if nfn is not None:
        expected = nfn()
        if mode == "nearest_neighbor":
            require(same_bits(got, expected), f"{case.name} {mode}: dmlops differs from numpy")
        else:
            require(close(got, expected, 1e-3 if case.dtype == "float16" else 1e-5),
                    f"{case.name} {mode}: dmlops differs from numpy")
        checked.append("numpy")
    out = np.full_like(got, 7)  # not already the answer
    require(dmlops_fn(x, case, mode, out)() is out, "dmlops out= did not return out")
    require(same_bits(out, got), f"{case.name} {mode}: dmlops out= differs from dmlops")

    tfn = torch_fn(x, case, mode)
    if tfn is not None:
        t = tfn().numpy()
        if mode == "nearest_neighbor":
            require(same_bits(t, got), f"{case.name} {mode}: torch differs from dmlops")
        elif case.antialiased:
            inner = (Ellipsis, slice(8, -8), slice(8, -8))
            require(close(t[inner], got[inner], 1e-4), f"{case.name} {mode}: torch differs from dmlops inside")
        else:
            require(close(t, got, 1e-3 if case.dtype == "float16" else 1e-4), f"{case.name} {mode}: torch differs")
        checked.append("torch")

    copier = Copier(got.nbytes, threads, torch)
    fns = {"dmlops": dmlops_fn(x, case, mode), "dmlops_out": dmlops_fn(x, case, mode, out), "copy_numpy": copier.numpy}
    if nfn is not None:
        fns["numpy"] = nfn
    if tfn is not None:
        fns["torch"] = tfn
        fns["copy_torch"] = copier.torch
    samples = time_calls(fns, warmup, repeat, cold)
    ms = median_ms(samples)
    copier.close()
    require(same_bits(out, got), f"{case.name} {mode}: out= result changed during timing")

    copy_ms = min(ms["copy_numpy"], ms.get("copy_torch", float("inf")))
    copy_bw = 2 * got.nbytes / (copy_ms * 1e-3)
    moved = got.nbytes + x.nbytes
    return {
        "case": case.name, "shape": list(case.shape), "dtype": case.dtype, "mode": mode, "threads": threads,
        "scale": case.scale, "antialiased": case.antialiased, "input_bytes": x.nbytes, "output_bytes": got.nbytes,
        "ms": {k: round(v, 4) for k, v in ms.items()},
        "min_ms": min_ms(samples),
        "copy_ms": round(copy_ms, 4),
        "copy_fraction": moved / (ms["dmlops"] * 1e-3) / copy_bw,
        "copy_fraction_out": moved / (ms["dmlops_out"] * 1e-3) / copy_bw,
        "numpy_over_dmlops": ms["numpy"] / ms["dmlops"] if "numpy" in ms else None,
        "torch_over_dmlops": ms["torch"] / ms["dmlops"] if "torch" in ms else None,
        "checked_against": checked,
    }


def print_table(rows: list) -> None:
    header = (f"{'case':<12} {'dtype':<7} {'mode':<8} {'thr':>3} | {'dmlops':>8} {'dml out=':>8} {'numpy':>8} "
              f"{'torch':>8} {'copy':>7} | {'np/dml':>6} {'th/dml':>6} | {'%copy':>5} {'%copy out=':>10}")
    print_header_rule(header)
    for r in rows:
        ms = r["ms"]
        mode = "nearest" if r["mode"] == "nearest_neighbor" else ("linear-aa" if r["antialiased"] else "linear")
        print(f"{r['case']:<12} {r['dtype']:<7} {mode:<8} {r['threads']:>3} | {ms['dmlops']:8.3f} {ms['dmlops_out']:8.3f} "
              f"{fmt(ms.get('numpy'), '8.3f'):>8} {fmt(ms.get('torch'), '8.3f'):>8} {r['copy_ms']:7.3f} | "
              f"{fmt(r['numpy_over_dmlops'], '6.2f'):>6} {fmt(r['torch_over_dmlops'], '6.2f'):>6} | "
              f"{100 * r['copy_fraction']:5.0f} {100 * r['copy_fraction_out']:10.0f}")


def check_targets(rows: list) -> list:
    verdicts = []
    for r in rows:
        if r["case"] not in TARGET_CASES:
            continue
        checks = {"torch_over_dmlops": (r["torch_over_dmlops"], TARGET_VS_TORCH)}
        if r["mode"] == "nearest_neighbor":
            checks["copy_fraction"] = (r["copy_fraction"], TARGET_COPY_FRACTION)
            checks["copy_fraction_out"] = (r["copy_fraction_out"], TARGET_COPY_FRACTION)
        for name, (value, goal) in checks.items():
            verdicts.append({"case": r["case"], "mode": r["mode"], "threads": r["threads"], "metric": name,
                             "value": value, "goal": goal, "met": None if value is None else value >= goal,
                             "binding": r["threads"] == TARGET_THREADS})
    return verdicts


def print_targets(verdicts: list) -> None:
    labels = {"copy_fraction": "% of copy bandwidth", "copy_fraction_out": "% of copy bandwidth (out=)",
              "torch_over_dmlops": "speed-up vs torch"}
    print(f"\nTargets (float32 x2; binding at {TARGET_THREADS} threads):")
    for v in verdicts:
        value, goal, met, tag = verdict_text(v, pct=v["metric"].startswith("copy"))
        mode = "nearest" if v["mode"] == "nearest_neighbor" else "linear"
        print(f"  {v['case']:<9} {mode:<8} threads={v['threads']}  {labels[v['metric']]:<27} {value:>7} >= {goal:<5} "
              f"{met}{tag}")


def main(argv: Optional[list] = None) -> int:
    parser = make_parser(__doc__, quick_help="few repeats and only the target cases")
    args = parse_args(parser, argv)
    threads_list, repeat, warmup = args.threads_list, args.repeat, args.warmup
    cases = [c for c in CASES if c.name in TARGET_CASES] if args.quick else CASES

    env = environment(args, torch, dmlops)
    schedule = schedule_text(repeat, args.cold)
    print(f"median of {repeat} timed calls, {schedule}, each block after >= {warmup} calls and "
          f"{BLOCK_WARMUP_S * 1e3:.0f} ms of warm-up; load average {env['load_average_start']}")
    print("ms = median wall time per call; dmlops/numpy/torch allocate their output, 'dml out=' writes a "
          "preallocated one;\ncopy = faster of np.copyto (threads) and torch copy_ of the output's bytes; "
          "%copy = (out+in bytes)/t over 2*out bytes/t_copy.\n")

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
    print("note: ncdhw-x2 runs torch's 4-D kernel on the (N, C*D, H, W) view; numpy is single-threaded;\n"
          "      the numpy formulation of antialiased resampling is not written (n/a).")
    verdicts = check_targets(rows)
    if verdicts:
        print_targets(verdicts)
    finish(env, gauge_start, args.json, rows, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
