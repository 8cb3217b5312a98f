"""Unfold / Fold side by side: dmlops vs torch.nn.functional.unfold/fold vs numpy, and a plain copy.

    python bench/compare_unfold.py [--threads 1,2] [--repeat N] [--json out.json] [--quick] [--cold]

Unfold (im2col) is data movement that writes K times the input: next to the implementations we
time a plain copy of the output's bytes (preallocated source and destination) and report
%copy = t_copy / t_unfold, i.e. unfold's output bytes per second as a share of the copy's.
Fold (col2im) sums the columns back; it has no copy baseline.

Formulations compared (all produce the same bits; checked before timing):
- torch: F.unfold / F.fold (2 spatial dims only); for 3 spatial dims, F.pad + Tensor.unfold
  on each axis + permute + a contiguous copy.
- numpy unfold: np.pad + sliding_window_view + transpose, then the copy that makes the
  (N, C*K, L) layout (numpy cannot express it as a view). numpy fold: one strided
  slice-add per window tap, in tap order (so the float32 sums are the same as dmlops').

Fairness rules:
- Every implementation allocates its output on each call; dmlops with a preallocated out= is
  a separate column.
- dmlops and torch run with the same thread count (dmlops.set_num_threads, torch.set_num_threads);
  numpy is single-threaded whatever the count. The copy is split over the same number of
  threads (np.copyto in Python threads, torch copy_); the faster one is the baseline.
- Every case is checked before it is timed: dmlops (with and without out=) must equal torch and
  numpy bit for bit, and the out= result is checked again after timing.
- Medians of --repeat calls; the run ends by saying how many CPUs other processes kept busy
  meanwhile: on a 2-core machine anything above ~0.1 means the figures are disturbed.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import dmlops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (Copier, environment, finish, fmt, import_torch, load_gauge_start, make_input,  # noqa: E402
                      make_parser, median_ms, parse_args, print_header_rule, require, same_bits, time_calls,
                      verdict_text)

torch, F = import_torch()

# The issue's targets, for TARGET_CASE.
TARGET_CASE = "nchw-3x3-pad1"
TARGET_THREADS = 2
TARGET_UNFOLD_VS_TORCH = 1.5
TARGET_UNFOLD_COPY_FRACTION = 0.60
TARGET_FOLD_VS_TORCH = 1.5


@dataclass
class Case:
    name: str
    shape: tuple
    dtype: str
    window: tuple
    strides: tuple
    dilations: tuple
    start: tuple
    end: tuple
    note: str = ""

    @property
    def kwargs(self) -> dict:
        return dict(strides=self.strides, dilations=self.dilations, start_padding=self.start, end_padding=self.end)

    @property
    def spatial(self) -> tuple:
        return self.shape[2:]

    @property
    def blocks(self) -> tuple:
        return tuple((s + a + e - d * (w - 1) - 1) // st + 1 for s, w, st, d, a, e in
                     zip(self.spatial, self.window, self.strides, self.dilations, self.start, self.end))


CASES = [
    # The target: a ResNet-style activation, 3x3 window, padding 1 (a 3x3 convolution's im2col).
    Case(TARGET_CASE, (1, 64, 56, 56), "float32", (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    # 3 spatial dims: against sliding_window_view + copy (torch: Tensor.unfold per axis + copy).
    Case("ncdhw-3x3x3", (1, 16, 32, 32, 32), "float32", (3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0),
         note="torch column: Tensor.unfold chain + copy; torch has no 3-D fold"),
    # A downsampling layer in float16: strided reads; fold converts to float32 and back.
    Case("nchw-3x3-s2-f16", (1, 64, 112, 112), "float16", (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
]


# ---------------------------------------------------------------------------------------------
# numpy formulations

def numpy_unfold(x: np.ndarray, case: Case) -> np.ndarray:
    n, c = x.shape[:2]
    rank = len(case.window)
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(case.start, case.end)))
    extent = tuple(d * (w - 1) + 1 for w, d in zip(case.window, case.dilations))
    view = sliding_window_view(padded, extent, axis=tuple(range(2, 2 + rank)))  # (N, C, *positions, *extent)
    view = view[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in case.strides)
                + tuple(slice(None, None, d) for d in case.dilations)]
    order = (0, 1) + tuple(range(2 + rank, 2 + 2 * rank)) + tuple(range(2, 2 + rank))
    return view.transpose(order).reshape(n, c * math.prod(case.window), -1)  # the copy


def numpy_fold(cols: np.ndarray, case: Case) -> np.ndarray:
    n, rows, _ = cols.shape
    taps = math.prod(case.window)
    padded_sizes = tuple(s + a + e for s, a, e in zip(case.spatial, case.start, case.end))
    out = np.zeros((n, rows // taps) + padded_sizes, dtype=np.float32 if cols.dtype == np.float16 else cols.dtype)
    for kflat, k in enumerate(np.ndindex(*case.window)):
        where = tuple(slice(kd * d, kd * d + (b - 1) * s + 1, s)
                      for kd, d, b, s in zip(k, case.dilations, case.blocks, case.strides))
        out[(slice(None), slice(None)) + where] += cols[:, kflat::taps].reshape((n, rows // taps) + case.blocks)
    crop = tuple(slice(a, a + s) for a, s in zip(case.start, case.spatial))
    return out[(slice(None), slice(None)) + crop].astype(cols.dtype)


# ---------------------------------------------------------------------------------------------
# torch formulations (None where torch cannot express the case)

def torch_unfold_fn(x: np.ndarray, case: Case) -> tuple[Optional[Callable], str]:
    if torch is None:
        return None, "torch not installed"
    xt = torch.from_numpy(x)
    rank = len(case.window)
    if rank == 2:
        if case.start != case.end:
            return None, "F.unfold pads symmetrically only"
        fn = lambda: F.unfold(xt, case.window, dilation=case.dilations, padding=case.start, stride=case.strides)
    else:
        pad = [p for a, e in zip(reversed(case.start), reversed(case.end)) for p in (a, e)]
        extent = tuple(d * (w - 1) + 1 for w, d in zip(case.window, case.dilations))

        def fn():
            v = F.pad(xt, pad) if any(pad) else xt
            for d in range(rank):
                v = v.unfold(2 + d, extent[d], case.strides[d])
            v = v[(slice(None),) * (2 + rank) + tuple(slice(None, None, d) for d in case.dilations)]
            order = (0, 1) + tuple(range(2 + rank, 2 + 2 * rank)) + tuple(range(2, 2 + rank))
            return v.permute(order).reshape(x.shape[0], -1, math.prod(case.blocks))
    try:
        fn()
    except RuntimeError as e:  # e.g. a dtype torch's CPU kernel lacks
        return None, f"torch: {str(e).splitlines()[0][:60]}"
    return fn, ""


def torch_fold_fn(cols: np.ndarray, case: Case) -> tuple[Optional[Callable], str]:
    if torch is None:
        return None, "torch not installed"
    if len(case.window) != 2:
        return None, "F.fold is 2-D only"
    if case.start != case.end:
        return None, "F.fold pads symmetrically only"
    ct = torch.from_numpy(cols)
    fn = lambda: F.fold(ct, case.spatial, case.window, dilation=case.dilations, padding=case.start,
                        stride=case.strides)
    try:
        fn()
    except RuntimeError as e:
        return None, f"torch: {str(e).splitlines()[0][:60]}"
    return fn, ""


# ---------------------------------------------------------------------------------------------

def run_case(case: Case, threads: int, warmup: int, repeat: int, cold: bool) -> list:
    dmlops.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    x = make_input(case.shape, case.dtype)
    kwargs = case.kwargs

    # unfold: check, then time
    expected = numpy_unfold(x, case)
    got = dmlops.unfold(x, case.window, **kwargs)
    require(same_bits(got, expected), f"{case.name}: dmlops.unfold differs from numpy")
    out = np.full_like(expected, 7)
    require(dmlops.unfold(x, case.window, out=out, **kwargs) is out, "unfold(out=) did not return out")
    require(same_bits(out, expected), f"{case.name}: dmlops.unfold(out=) differs from numpy")
    tfn, tnote = torch_unfold_fn(x, case)
    if tfn is not None:
        require(same_bits(tfn().numpy(), expected), f"{case.name}: torch unfold differs from numpy")
    copier = Copier(expected.nbytes, threads, torch)
    fns = {"dmlops": lambda: dmlops.unfold(x, case.window, **kwargs),
           "dmlops_out": lambda: dmlops.unfold(x, case.window, out=out, **kwargs),
           "numpy": lambda: numpy_unfold(x, case),
           "copy_numpy": copier.numpy}
    if tfn is not None:
        fns["torch"] = tfn
    if torch is not None:
        fns["copy_torch"] = copier.torch
    samples = time_calls(fns, warmup, repeat, cold)
    copier.close()
    require(same_bits(out, expected), f"{case.name}: unfold out= result changed during timing")
    ms = median_ms(samples)
    copy_ms = min(ms["copy_numpy"], ms.get("copy_torch", math.inf))
    unfold_row = {
        "op": "unfold", "case": case.name, "shape": list(case.shape), "dtype": case.dtype, "threads": threads,
        "window": list(case.window), "strides": list(case.strides), "dilations": list(case.dilations),
        "start_padding": list(case.start), "end_padding": list(case.end),
        "input_bytes": x.nbytes, "output_bytes": expected.nbytes,
        "ms": {k: round(v, 4) for k, v in ms.items()},
        "copy_ms": round(copy_ms, 4),
        "copy_fraction": copy_ms / ms["dmlops"], "copy_fraction_out": copy_ms / ms["dmlops_out"],
        "numpy_over_dmlops": ms["numpy"] / ms["dmlops"],
        "torch_over_dmlops": ms["torch"] / ms["dmlops"] if "torch" in ms else None,
        "torch_note": tnote or None,
    }

    # fold of the unfolded columns: check, then time
    cols = expected
    expected_fold = numpy_fold(cols, case)
    got = dmlops.fold(cols, case.spatial, case.window, **kwargs)
    require(same_bits(got, expected_fold), f"{case.name}: dmlops.fold differs from numpy")
    fout = np.full_like(expected_fold, 7)
    require(dmlops.fold(cols, case.spatial, case.window, out=fout, **kwargs) is fout, "fold(out=) did not return out")
    require(same_bits(fout, expected_fold), f"{case.name}: dmlops.fold(out=) differs from numpy")
    ffn, fnote = torch_fold_fn(cols, case)
    if ffn is not None:
        require(same_bits(ffn().numpy(), expected_fold), f"{case.name}: torch fold differs from numpy")
    fns = {"dmlops": lambda: dmlops.fold(cols, case.spatial, case.window, **kwargs),
           "dmlops_out": lambda: dmlops.fold(cols, case.spatial, case.window, out=fout, **kwargs),
           "numpy": lambda: numpy_fold(cols, case)}
    if ffn is not None:
        fns["torch"] = ffn
    samples = time_calls(fns, warmup, repeat, cold)
    require(same_bits(fout, expected_fold), f"{case.name}: fold out= result changed during timing")
    ms = median_ms(samples)
    fold_row = {
        **{k: unfold_row[k] for k in ("case", "shape", "dtype", "threads", "window", "strides", "dilations",
                                      "start_padding", "end_padding")},
        "op": "fold", "input_bytes": cols.nbytes, "output_bytes": expected_fold.nbytes,
        "ms": {k: round(v, 4) for k, v in ms.items()}, "copy_ms": None, "copy_fraction": None,
        "copy_fraction_out": None, "numpy_over_dmlops": ms["numpy"] / ms["dmlops"],
        "torch_over_dmlops": ms["torch"] / ms["dmlops"] if "torch" in ms else None, "torch_note": fnote or None,
    }
    return [unfold_row, fold_row]


def print_table(rows: list) -> None:
    header = (f"{'case':<16} {'op':<6} {'dtype':<7} {'thr':>3} | {'dmlops':>8} {'dml out=':>8} {'numpy':>8} "
              f"{'torch':>8} {'copy':>8} | {'np/dml':>6} {'th/dml':>6} | {'%copy':>5} {'%copy out=':>10}")
    print_header_rule(header)
    for r in rows:
        ms = r["ms"]
        pct = lambda v: fmt(None if v is None else 100 * v, "5.0f")
        print(f"{r['case']:<16} {r['op']:<6} {r['dtype']:<7} {r['threads']:>3} | {ms['dmlops']:8.3f} "
              f"{ms['dmlops_out']:8.3f} {ms['numpy']:8.3f} {fmt(ms.get('torch'), '8.3f'):>8} "
              f"{fmt(r['copy_ms'], '8.3f'):>8} | {r['numpy_over_dmlops']:6.2f} "
              f"{fmt(r['torch_over_dmlops'], '6.2f'):>6} | {pct(r['copy_fraction']):>5} "
              f"{pct(r['copy_fraction_out']):>10}")


def check_targets(rows: list) -> list:
    goals = {("unfold", "torch_over_dmlops"): TARGET_UNFOLD_VS_TORCH,
             ("unfold", "copy_fraction"): TARGET_UNFOLD_COPY_FRACTION,
             ("unfold", "copy_fraction_out"): TARGET_UNFOLD_COPY_FRACTION,
             ("fold", "torch_over_dmlops"): TARGET_FOLD_VS_TORCH}
    verdicts = []
    for r in rows:
        if r["case"] != TARGET_CASE:
            continue
        for (op, metric), goal in goals.items():
            if r["op"] != op:
                continue
            value = r[metric]
            verdicts.append({"op": op, "threads": r["threads"], "metric": metric, "value": value, "goal": goal,
                             "met": None if value is None else value >= goal,
                             "binding": r["threads"] == TARGET_THREADS})
    return verdicts


def print_targets(verdicts: list) -> None:
    labels = {"copy_fraction": "% of copy bandwidth", "copy_fraction_out": "% of copy bandwidth (out=)",
              "torch_over_dmlops": "speed-up vs torch"}
    print(f"\nTargets ({TARGET_CASE}, float32 1x64x56x56, 3x3 window, padding 1; binding at {TARGET_THREADS} threads):")
    for v in verdicts:
        value, goal, met, tag = verdict_text(v, pct=v["metric"].startswith("copy"))
        print(f"  {v['op']:<6} threads={v['threads']}  {labels[v['metric']]:<27} {value:>7} >= {goal:<5} {met}{tag}")


def main(argv: Optional[list] = None) -> int:
    parser = make_parser(__doc__)
    args = parse_args(parser, argv)
    threads_list, repeat, warmup = args.threads_list, args.repeat, args.warmup
    cases = [c for c in CASES if c.name == TARGET_CASE] if args.quick else CASES

    env = environment(args, torch, dmlops)
    print(f"median of {repeat} timed calls ({'single calls interleaved' if args.cold else 'back-to-back, in rounds'}); "
          f"load average {env['load_average_start']}")
    print("ms = median wall time per call; dmlops/numpy/torch allocate their output, 'dml out=' writes a preallocated "
          "one;\ncopy = faster of np.copyto (threads) and torch copy_ of the unfold output's bytes; "
          "%copy = t_copy / t_unfold.")
    print("Checked before timing: dmlops == numpy == torch bit for bit (unfold and fold).\n")

    gauge_start = load_gauge_start()
    rows = []
    for case in cases:
        for threads in threads_list:
            rows.extend(run_case(case, threads, warmup, repeat, args.cold))
    print_table(rows)
    for case in cases:
        if case.note:
            print(f"note: {case.name}: {case.note}")
    for r in rows:
        if r["torch_note"]:
            print(f"note: {r['case']} {r['op']}: {r['torch_note']}")
    verdicts = check_targets(rows)
    if verdicts:
        print_targets(verdicts)
    finish(env, gauge_start, args.json, rows, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
