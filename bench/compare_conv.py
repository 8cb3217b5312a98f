"""Convolution side by side: dmlops vs a numpy formulation (im2col by sliding_window_view, one
tensordot) vs torch.nn.functional.conv2d / conv_transpose2d.

    python bench/compare_conv.py [--threads 1,2] [--repeat N] [--json out.json] [--quick] [--cold]

The cases are issue 4's layer list: the 3x3 ResNet-50 layers (stride 1 and 2), the 1x1
layers, MobileNet-v2 depthwise 3x3 layers, a transposed 4x4 stride-2 layer, a 3-D 3x3x3 layer,
float16 versions of the big 3x3 layers (torch's figure beside ours; "n/a" if it refuses),
batch 8 and a channels-last input view. GFLOP/s counts 2 x multiply-adds of the direct formula;
"% peak" divides by --peak GFLOP/s per thread (the issue's 90 for one core's float32 FMA; the
Zen 5 this was tuned on measures ~120 with AVX2 FMA and ~237 with AVX-512 FMA per core).
At 2 threads on a 2-core machine the libraries disturb each other (torch's OpenMP workers and
dmlops' pool compete for the same cores between blocks): for scaling figures, also time each
library alone.

Fairness rules (those of bench/compare.py):
- dmlops, numpy and torch allocate their output on every call; dmlops with a preallocated
  ``out=`` is a separate column.
- dmlops and torch run with the same thread count (dmlops.set_num_threads, torch.set_num_threads);
  numpy's tensordot runs on its BLAS, whose thread count this script does not control (the
  column is a formulation baseline, not a target).
- Every case is checked before it is timed: dmlops and torch against each other and the numpy
  formulation, to float32 accuracy scaled by the reduction length.
- Each measurement is the median of --repeat timed calls (bench/_harness.py's schedule).
- The run ends by saying how many CPUs other processes kept busy meanwhile: on a 2-core machine
  anything above ~0.1 means the figures are disturbed.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as h  # noqa: E402

import dmlops  # noqa: E402

torch, F = h.import_torch()


@dataclass
class Case:
    name: str
    x_shape: tuple
    w_shape: tuple
    padding: int = 1
    stride: int = 1
    groups: int = 1
    direction: str = "forward"
    channels_last: bool = False
    dtype: type = np.float32

    def flops(self) -> float:
        """Multiply-adds x 2 of the direct formula."""
        n, c = self.x_shape[:2]
        k = int(np.prod(self.w_shape[2:]))
        if self.direction == "forward":
            out = [(s + 2 * self.padding - w) // self.stride + 1 for s, w in zip(self.x_shape[2:], self.w_shape[2:])]
            return 2.0 * n * self.w_shape[0] * int(np.prod(out)) * (c // self.groups) * k
        return 2.0 * n * c * int(np.prod(self.x_shape[2:])) * self.w_shape[1] * k


def conv3x3(name, c, size, stride=1, **kw):
    return Case(name, (kw.pop("batch", 1), c, size, size), (c, c, 3, 3), stride=stride, **kw)


def conv1x1(name, c_in, c_out, size, stride=1):
    return Case(name, (1, c_in, size, size), (c_out, c_in, 1, 1), padding=0, stride=stride)


def depthwise(name, c, size, stride):
    return Case(name, (1, c, size, size), (c, 1, 3, 3), stride=stride, groups=c)


CASES = [
    conv3x3("resnet-3x3", 64, 56),
    conv3x3("3x3 128@28", 128, 28),
    conv3x3("3x3 256@14", 256, 14),
    conv3x3("3x3 512@7", 512, 7),
    conv3x3("3x3 s2 128@56", 128, 56, 2),
    conv3x3("3x3 s2 256@28", 256, 28, 2),
    conv3x3("3x3 s2 512@14", 512, 14, 2),
    conv1x1("1x1 64>256@56", 64, 256, 56),
    conv1x1("1x1 256>64@56", 256, 64, 56),
    conv1x1("1x1 1024>256@14", 1024, 256, 14),
    conv1x1("1x1 s2 512>1024", 512, 1024, 28, 2),
    depthwise("dw 144@56", 144, 56, 1),
    depthwise("dw s2 144@56", 144, 56, 2),
    depthwise("dw 576@14", 576, 14, 1),
    depthwise("dw s2 576@14", 576, 14, 2),
    Case("transp 4x4 s2", (1, 256, 16, 16), (256, 128, 4, 4), stride=2, direction="backward"),
    Case("3d 32@16^3", (1, 32, 16, 16, 16), (32, 32, 3, 3, 3)),
    conv3x3("f16 3x3 64@56", 64, 56, dtype=np.float16),
    conv3x3("f16 3x3 128@28", 128, 28, dtype=np.float16),
    conv3x3("batch8 128@28", 128, 28, batch=8),
    conv3x3("nhwc 64@56", 64, 56, channels_last=True),
]
TARGET = "resnet-3x3"


def make_inputs(case: Case):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(case.x_shape).astype(case.dtype)
    if case.channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    w = (rng.standard_normal(case.w_shape) / np.sqrt(np.prod(case.w_shape[1:]))).astype(case.dtype)
    return x, w


def dmlops_fn(case: Case, x, w, out=None) -> Callable[[], np.ndarray]:
    p, d = case.padding, len(case.x_shape) - 2
    kw = dict(strides=(case.stride,) * d, start_padding=(p,) * d, end_padding=(p,) * d, group_count=case.groups,
              direction=case.direction)
    return lambda: dmlops.convolution(x, w, out=out, **kw)


def numpy_fn(case: Case, x, w) -> Optional[Callable[[], np.ndarray]]:
    if case.direction != "forward" or case.groups != 1 or len(case.x_shape) != 4:
        return None
    p, s = case.padding, case.stride
    kh, kw = case.w_shape[2:]

    def run():
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::s, ::s]
        return np.tensordot(w, cols, axes=([1, 2, 3], [1, 4, 5])).transpose(1, 0, 2, 3)

    return run


def torch_fn(case: Case, x, w) -> Optional[Callable]:
    if torch is None:
        return None
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)  # channels-last stays a strided view
    if case.direction == "forward":
        conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.ndim]
        fn = lambda: conv(tx, tw, stride=case.stride, padding=case.padding, groups=case.groups)  # noqa: E731
    else:
        fn = lambda: F.conv_transpose2d(tx, tw, stride=case.stride, padding=case.padding, groups=case.groups)  # noqa: E731
    try:
        fn()
    except RuntimeError:  # e.g. no float16 convolution on this CPU build
        return None
    return fn


def run_case(case: Case, threads: int, warmup: int, repeat: int, cold: bool) -> dict:
    dmlops.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    x, w = make_inputs(case)
    ours = dmlops_fn(case, x, w)
    expected = ours()
    out = np.empty_like(expected)
    fns = {"dmlops": ours, "dmlops out=": dmlops_fn(case, x, w, out)}
    length = int(np.prod(case.w_shape[1:])) if case.direction == "forward" else case.x_shape[1] * 16
    tol = 4 * length * np.finfo(np.float32).eps * (np.abs(expected).max() + 1)
    if case.dtype == np.float16:  # one rounding to float16 on each side, plus torch's own path
        tol = 4 * np.finfo(np.float16).eps * (np.abs(expected).max() + 1)
    fns["dmlops out="]()
    h.require(np.array_equal(out, expected), f"{case.name}: out= differs")
    npf = numpy_fn(case, x, w)
    if npf is not None:
        h.require(np.abs(npf().astype(np.float32) - expected).max() <= tol, f"{case.name}: numpy formulation differs")
        fns["numpy"] = npf
    tf = torch_fn(case, x, w)
    if tf is not None:
        h.require(np.abs(tf().numpy().astype(np.float32) - expected).max() <= tol, f"{case.name}: torch differs")
        fns["torch"] = lambda: tf()
    times = h.time_calls(fns, warmup, repeat, cold)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"case": case.name, "threads": threads, "gflops": case.flops() / 1e9, **{f"{k} s": v for k, v in medians.items()}}


def print_table(rows: list, peak: float) -> None:
    head = (f"{'case':<17}{'thr':>4}{'dmlops ms':>11}{'GFLOP/s':>9}{'% peak':>8}{'out= ms':>9}{'numpy ms':>10}"
            f"{'torch ms':>10}{'torch GF/s':>11}{'torch/dmlops':>14}")
    h.print_header_rule(head)
    for r in rows:
        d, t = r["dmlops s"], r.get("torch s")
        print(f"{r['case']:<17}{r['threads']:>4}{d * 1e3:>11.3f}{r['gflops'] / d:>9.1f}"
              f"{100 * r['gflops'] / d / (peak * r['threads']):>8.0f}{r['dmlops out= s'] * 1e3:>9.3f}"
              f"{h.fmt(r.get('numpy s') and r['numpy s'] * 1e3, '.2f'):>10}{h.fmt(t and t * 1e3, '.3f'):>10}"
              f"{h.fmt(t and r['gflops'] / t, '.1f'):>11}{h.fmt(t and t / d, '.2f'):>14}")


def main(argv: Optional[list] = None) -> int:
    parser = h.make_parser(__doc__, default_repeat=20, cold=False)
    parser.add_argument("--cases", help="comma-separated substrings: only the cases whose name contains one")
    parser.add_argument("--peak", type=float, default=90.0, help="GFLOP/s of one thread's FMA peak (default 90)")
    parser.add_argument("--cold", action="store_true", help="interleave single calls (caches hold other data)")
    args = h.parse_args(parser, argv, default_repeat=20, warmup=3, quick_warmup=3)
    repeat = args.repeat or (7 if args.quick else 20)
    cases = [c for c in CASES if c.name == TARGET] if args.quick else CASES
    if args.cases:
        cases = [c for c in cases if any(part in c.name for part in args.cases.split(","))]
    print(f"CPU: {h.cpu_model()}; usable CPUs {h.usable_cpus()}; load average {h.load_average()}; "
          f"torch {torch.__version__ if torch else 'absent'}; AVX2 GEMM {'off' if os.environ.get('DMLOPS_DISABLE_AVX2') else 'on'}")
    gauge_start = h.load_gauge_start()
    rows = [run_case(c, t, args.warmup, repeat, args.cold) for t in args.threads_list for c in cases]
    print_table(rows, args.peak)
    load = h.other_load(*gauge_start)
    print(f"other processes kept {h.fmt(load, '.2f')} CPUs busy during the run"
          + (" (figures disturbed)" if load is not None and load > 0.1 else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "other_load": load, "time": time.time()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
