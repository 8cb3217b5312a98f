"""The Dask path's cost: ``python -m dmlops.bench.dask [--smoke] [--chunk N] [--json out.json]``.

For each case (an array that fits in memory) it checks that ``dmlops.dask`` gives the in-memory
result bit for bit, then times both (the schedule of dmlops.bench: warm-up, median of repeated
calls) and measures the peak memory Python allocates during each (tracemalloc sees every numpy
array, dmlops' outputs included). The Dask result is stored into a preallocated array
(``da.store``), so its peak counts what the chunks in flight hold, not the result.

Columns: ``in-memory ms``, ``dask ms``, ``overhead`` (dask / in-memory; the target is <= 1.3x on
2 cores with chunks of a few MB), ``peak in-memory`` and ``peak dask`` (MiB), and ``peak /
chunk``: the Dask peak over the largest output chunk's bytes. It is bounded by the tasks in
flight (the threaded scheduler runs one per CPU), each holding its output chunk, its input
region and the kernel's own arrays, whatever the array's size; the in-memory peak grows with it.

Requires the dask extra (``pip install "dmlops[dask]"``).
"""
from __future__ import annotations

import argparse
import json
import sys
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np

import dmlops
import dmlops.dask as dd

from ._harness import make_input, median_ms, time_calls, usable_cpus


@dataclass
class Case:
    name: str
    shape: tuple
    chunks: tuple
    memory: Callable[[np.ndarray], np.ndarray]
    lazy: Callable[[Any], Any]


def cases(smoke: bool, chunk: int) -> list:
    """Cases of a 3-D volume (N=1, C=4, D=H=W=s), chunked in cubes of ``chunk`` along D, H, W."""
    s = 24 if smoke else 128
    c = max(4, chunk // 8) if smoke else chunk
    shape, chunks = (1, 4, s, s, s), (1, 4, c, c, c)
    w = make_input((4, 4, 3, 3, 3), "float32", seed=1) * np.float32(0.1)
    b = make_input((1, 4, 1, 1, 1), "float32", seed=2)
    conv = dict(start_padding=(1, 1, 1), end_padding=(1, 1, 1), fused_activation="relu")
    pool = dict(strides=(2, 2, 2), p=2)
    return [
        Case("pad 3x3x3 reflection", shape, chunks, lambda x: dmlops.pad(x, (0, 0, 3, 3, 3), (0, 0, 3, 3, 3),
                                                                           "reflection"),
             lambda x: dd.pad(x, (0, 0, 3, 3, 3), (0, 0, 3, 3, 3), "reflection")),
        Case("convolution 3x3x3 4->4 bias relu", shape, chunks, lambda x: dmlops.convolution(x, w, b, **conv),
             lambda x: dd.convolution(x, w, b, **conv)),
        Case("upsample_2d x2 linear", shape, chunks, lambda x: dmlops.upsample_2d(x, 2, "linear"),
             lambda x: dd.upsample_2d(x, 2, "linear")),
        Case("resample x2 linear (D, H, W)", shape, chunks, lambda x: dmlops.resample(x, (1, 1, 2, 2, 2), "linear"),
             lambda x: dd.resample(x, (1, 1, 2, 2, 2), "linear")),
        Case("lp_pooling 2x2x2 s2 p2", shape, chunks, lambda x: dmlops.lp_pooling(x, (2, 2, 2), **pool),
             lambda x: dd.lp_pooling(x, (2, 2, 2), **pool)),
    ]


def peak_mib(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def run_case(case: Case, quick: bool) -> dict:
    x = make_input(case.shape, "float32")
    expected = case.memory(x)
    lazy = case.lazy(da.from_array(x, chunks=case.chunks))
    target = np.empty(lazy.shape, lazy.dtype)

    def via_dask() -> None:
        da.store(lazy, target, lock=False, scheduler="threads")

    via_dask()
    exact = bool(np.array_equal(target.view(np.uint8), expected.view(np.uint8)))
    ms = median_ms(time_calls({"memory": lambda: case.memory(x), "dask": via_dask}, warmup=2,
                              repeat=5 if quick else 20, time_budget=0.5 if quick else 3.0))
    chunk = max(int(np.prod([max(c) for c in lazy.chunks])) * lazy.dtype.itemsize, 1)
    peak_memory, peak_dask = peak_mib(lambda: case.memory(x)), peak_mib(via_dask)
    return dict(case=case.name, shape=case.shape, chunks=case.chunks, exact=exact, ms=ms,
                overhead=ms["dask"] / ms["memory"], peak_mib={"memory": peak_memory, "dask": peak_dask},
                output_mib=expected.nbytes / 2**20, largest_output_chunk_mib=chunk / 2**20,
                peak_per_chunk=peak_dask * 2**20 / chunk)


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops.bench.dask", description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny volumes (the test suite's run)")
    parser.add_argument("--chunk", type=int, default=64, help="chunk edge along D, H and W (default 64)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    workers = usable_cpus()
    rows = []
    with dask.config.set(num_workers=workers):
        for case in cases(args.smoke, args.chunk):
            rows.append(run_case(case, args.smoke))
    print(f"dmlops.dask vs in-memory dmlops, float32, {workers} CPUs, threaded scheduler with {workers} workers, "
          f"dmlops {dmlops.__version__}, dask {dask.__version__}")
    print(f"{'case':34} {'shape':>18} {'chunks':>16} {'exact':>5} {'in-memory ms':>12} {'dask ms':>9} "
          f"{'overhead':>8} {'peak in-memory MiB':>18} {'peak dask MiB':>13} {'peak / chunk':>12}")
    for r in rows:
        print(f"{r['case']:34} {str(r['shape'][2:]):>18} {str(r['chunks'][2:]):>16} {str(r['exact']):>5} "
              f"{r['ms']['memory']:12.2f} {r['ms']['dask']:9.2f} {r['overhead']:7.2f}x "
              f"{r['peak_mib']['memory']:18.1f} {r['peak_mib']['dask']:13.1f} {r['peak_per_chunk']:12.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpus": workers, "dask": dask.__version__, "results": rows}, f, indent=1)
    failed = [r["case"] for r in rows if not r["exact"]]
    if failed:
        print("FAILED (dask result differs from the in-memory one):", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
