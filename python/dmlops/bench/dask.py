"""The Dask path's cost: ``python -m dmlops.bench.dask [--smoke] [--size S] [--chunk N] [--chunks D,H,W] [--no-zarr]
[--json out.json]``.

Each case is a float32 volume (N=1, C=4, D=H=W=S; S=256 by default: 256 MiB) in chunks of 4
channels and N^3 voxels (N=128 by default: 32 MiB a chunk, 8 chunks; an upsampled output chunk
is 128 MiB), or of the edges ``--chunks D,H,W``. Dask's guidance is chunks of about 100 MB (its ``array.chunk-size`` setting,
printed in the header, is what ``chunks="auto"`` aims at) and tasks of 100 ms or more; the
memory-bound operators spend only a few milliseconds on a chunk of that size.

The Dask input holds the chunks in memory as contiguous arrays, as they come from a chunked
store: not ``da.from_array(x)``, whose blocks are strided views of x. A view cut along the
last axis (rows of 512 bytes every 1,024) is read more slowly than a contiguous chunk by every
reader, numpy's own copy and sum included: the memory system fetches the skipped half of each
row pitch too. Views cut along the outer axes only are read at the contiguous speed.

The benchmark first checks that ``dmlops.dask`` gives the in-memory result bit for bit, then
times, interleaved (the schedule of dmlops.bench: warm-up, rounds, median):

- ``in-memory``: ``dmlops.<op>(x)``, the call as a user makes it (a new output array);
- ``compute``: building the graph from a chunked ``dask.array`` of x and ``.compute()`` on the
  threaded scheduler (one worker per CPU): the tasks, then Dask concatenating the chunks into
  one new array;
- ``chunks``: the same tasks computed as separate arrays (``dask.compute`` of the graph's
  blocks): ``.compute()`` without the concatenation, which is Dask's own (it allocates the
  whole output and copies every chunk into its place);
- ``store``: building the graph and ``da.store`` into a preallocated numpy array: each chunk is
  copied into it as it is done;
- ``into``: building the graph and ``dmlops.dask.store`` into that array: each task's kernels
  write its chunk in place (no chunk array, no copy);
- ``out=``: the in-memory call writing into that array (no new output: its first-touch page
  faults, which the in-memory call pays, are already paid);
- the floors: ``copy`` (a new copy of the output, what ``.compute()``'s concatenation costs at
  least) and ``copyto`` (a copy into the preallocated target, what ``da.store`` costs at least).

``compute x``, ``store x`` and ``into x`` are those times over the in-memory call's; ``floor x``
beside the first two is (in-memory + copy) / in-memory and (in-memory + copyto) / in-memory:
the ratio that path would have if everything but that one copy of the output were free. For a
memory-bound operator that copy takes about as long as the operator itself, so neither
``.compute()`` nor ``da.store`` can reach 1.3x there; ``dmlops.dask.store`` has no such copy.
``/ out=`` is ``into`` over ``out=``: the same writes, chunked against whole.

With zarr installed (and without ``--no-zarr``) it also times writing the result into an
uncompressed in-memory zarr array with the output's chunks: ``da.store`` of the Dask graph
against the in-memory call followed by writing its result into the same zarr array.

New memory: a call that writes a new array pays the page faults of its first touch. On a
virtual machine whose host takes freed memory back (Linux's free page reporting through a
virtio balloon, as on the 2-core development machine), memory freed more than about a second
earlier costs several times more on its next first touch than memory freed just now (the
header prints both, per GiB). Which of the two a call gets depends on what ran before it, so
every timed call is preceded, untimed, by touching and freeing as much memory as the largest
path allocates (twice the output plus the input): every column then starts from memory freed
just now, as on a machine without that behaviour.

Peak memory (tracemalloc, which sees every numpy array, dmlops' outputs included) is given per
column in MiB, and for ``store`` also over the largest output chunk: it is bounded by the
tasks in flight, whatever the array's size, while the in-memory call holds the whole output
(``into`` holds no output chunk at all: only thin halos and border regions).

Requires the dask extra (``pip install "dmlops[dask]"``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable, Optional

import dask
import dask.array as da
import numpy as np

import dmlops
import dmlops.dask as dd

from ._harness import (cpu_model, load_average, load_gauge_start, make_input, median_ms, other_load, time_calls,
                       usable_cpus)


@dataclass
class Case:
    name: str
    memory: Callable[..., np.ndarray]  # (x, out=None)
    lazy: Callable[[Any], Any]


def cases() -> list:
    w = make_input((4, 4, 3, 3, 3), "float32", seed=1) * np.float32(0.1)
    b = make_input((1, 4, 1, 1, 1), "float32", seed=2)
    conv = dict(start_padding=(1, 1, 1), end_padding=(1, 1, 1), fused_activation="relu")
    pool = dict(strides=(2, 2, 2), p=2)
    pads = (0, 0, 3, 3, 3)
    half = (1, 1, 0.5, 0.5, 0.5)  # a trilinear downsampling (x2 on D, H, W would hold 2 GiB outputs)
    return [
        Case("pad 3 reflection", lambda x, out=None: dmlops.pad(x, pads, pads, "reflection", out=out),
             lambda x: dd.pad(x, pads, pads, "reflection")),
        Case("convolution 3x3x3 4->4 bias relu", lambda x, out=None: dmlops.convolution(x, w, b, **conv, out=out),
             lambda x: dd.convolution(x, w, b, **conv)),
        Case("upsample_2d x2 linear", lambda x, out=None: dmlops.upsample_2d(x, 2, "linear", out=out),
             lambda x: dd.upsample_2d(x, 2, "linear")),
        Case("resample x0.5 linear antialiased",
             lambda x, out=None: dmlops.resample(x, half, "linear", antialiased=True, out=out),
             lambda x: dd.resample(x, half, "linear", antialiased=True)),
        Case("lp_pooling 2x2x2 s2 p2", lambda x, out=None: dmlops.lp_pooling(x, (2, 2, 2), **pool, out=out),
             lambda x: dd.lp_pooling(x, (2, 2, 2), **pool)),
    ]


def peak_mib(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def touch(nbytes: int) -> None:
    """Allocates nbytes, writes every page, frees them (the priming before each timed call)."""
    np.ones(max(nbytes // 4, 1), np.float32)


def new_memory_ms(nbytes: int, idle: float = 2.0) -> tuple[float, float]:
    """ms per GiB of first-touching nbytes of new memory right after freeing as much, and after
    ``idle`` seconds without allocating (see the module docstring)."""
    touch(nbytes)
    t0 = time.perf_counter()
    touch(nbytes)
    at_once = time.perf_counter() - t0
    time.sleep(idle)
    t0 = time.perf_counter()
    touch(nbytes)
    later = time.perf_counter() - t0
    return at_once * 1e3 * 2**30 / nbytes, later * 1e3 * 2**30 / nbytes


def zarr_target(shape: tuple, chunks: tuple, dtype: Any) -> Optional[Any]:
    """An uncompressed zarr array in memory, or None without zarr."""
    try:
        import zarr
    except ImportError:
        return None
    if hasattr(zarr, "create_array"):  # zarr 3
        return zarr.create_array(store=zarr.storage.MemoryStore(), shape=shape, chunks=chunks, dtype=dtype,
                                 compressors=None)
    return zarr.zeros(shape, chunks=chunks, dtype=dtype, compressor=None)  # zarr 2


def run_case(case: Case, shape: tuple, chunks: tuple, quick: bool, with_zarr: bool) -> dict:
    x = make_input(shape, "float32")
    # contiguous chunks in memory (see the module docstring)
    xd = da.from_array(x, chunks=chunks).map_blocks(np.ascontiguousarray).persist(scheduler="threads")
    expected = case.memory(x)
    lazy = case.lazy(xd)
    exact = bool(np.array_equal(lazy.compute(scheduler="threads").view(np.uint8), expected.view(np.uint8)))
    target = np.zeros(lazy.shape, lazy.dtype)
    into = np.zeros(lazy.shape, lazy.dtype)
    exact = exact and bool(np.array_equal(dd.store(lazy, into).view(np.uint8), expected.view(np.uint8)))
    calls = {
        "in-memory": lambda: case.memory(x),
        "in-memory out=": lambda: case.memory(x, out=target),
        "compute": lambda: case.lazy(xd).compute(scheduler="threads"),
        "chunks": lambda: dask.compute(*case.lazy(xd).to_delayed().ravel(), scheduler="threads"),
        "store": lambda: da.store(case.lazy(xd), target, lock=False, scheduler="threads"),
        "dmlops.dask.store": lambda: dd.store(case.lazy(xd), target),
        "copy": lambda: expected.copy(),
        "copyto": lambda: np.copyto(target, expected),
    }
    z = zarr_target(lazy.shape, tuple(max(c) for c in lazy.chunks), lazy.dtype) if with_zarr else None
    if z is not None:
        def zarr_memory() -> None:
            z[...] = case.memory(x)

        calls["zarr in-memory"] = zarr_memory
        calls["zarr store"] = lambda: da.store(case.lazy(xd), z, lock=False, scheduler="threads")
    fresh = 2 * expected.nbytes + x.nbytes  # .compute(): every chunk and their concatenation
    ms = median_ms(time_calls(calls, warmup=1, repeat=5 if quick else 15, time_budget=0.5 if quick else 4.0,
                              setup=lambda: touch(fresh)))
    peaks = {name: peak_mib(calls[name]) for name in ("in-memory", "compute", "store", "dmlops.dask.store")}
    chunk = max(int(np.prod([max(c) for c in lazy.chunks])) * lazy.dtype.itemsize, 1)
    base = ms["in-memory"]
    row = dict(case=case.name, shape=shape, chunks=chunks, tasks=lazy.npartitions, exact=exact, ms=ms,
               compute_x=ms["compute"] / base, chunks_x=ms["chunks"] / base, store_x=ms["store"] / base, into_x=ms["dmlops.dask.store"] / base,
               into_out_x=ms["dmlops.dask.store"] / ms["in-memory out="],
               compute_floor_x=(base + ms["copy"]) / base, store_floor_x=(base + ms["copyto"]) / base,
               peak_mib=peaks, output_mib=expected.nbytes / 2**20, largest_output_chunk_mib=chunk / 2**20,
               store_peak_per_chunk=peaks["store"] * 2**20 / chunk)
    if z is not None:
        row["zarr_x"] = ms["zarr store"] / ms["zarr in-memory"]
    return row


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops.bench.dask", description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny volume, few repeats (the test suite's run)")
    parser.add_argument("--size", type=int, default=256, help="D = H = W of the volume (default 256)")
    parser.add_argument("--chunk", type=int, default=128, help="chunk edge along D, H and W (default 128)")
    parser.add_argument("--chunks", help="chunk edges D,H,W instead (e.g. 128,64,256: rows whole along W), or auto: "
                        "Dask's own choice for its array.chunk-size (what chunks='auto' gives)")
    parser.add_argument("--no-zarr", action="store_true", help="leave out the zarr columns")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    size, chunk = (24, 12) if args.smoke else (args.size, args.chunk)
    if args.chunks == "auto":
        edges = tuple(max(c) for c in da.core.normalize_chunks("auto", (1, 4, size, size, size), dtype=np.float32)[2:])
    else:
        edges = (chunk,) * 3 if args.chunks is None or args.smoke else tuple(
            int(c) if c.strip().isdigit() else 0 for c in args.chunks.split(","))
    if len(edges) != 3 or min(edges) < 1:
        parser.error(f"--chunks takes three positive edges D,H,W or auto, not {args.chunks!r}")
    shape, chunks = (1, 4, size, size, size), (1, 4) + edges
    workers = usable_cpus()
    gauge, load_start = load_gauge_start(), load_average()
    with dask.config.set(num_workers=workers):
        rows = [run_case(case, shape, chunks, args.smoke, not args.no_zarr) for case in cases()]
    others = other_load(*gauge)
    volume = 4 * size**3 * 4
    probe = volume if args.smoke else max(volume, 2**30)  # at least 1 GiB: less shows less of the effect
    at_once, later = new_memory_ms(probe, 0.2 if args.smoke else 2.0)
    chunk_mib = 4 * math.prod(edges) * 4 / 2**20
    print(f"dmlops.dask vs in-memory dmlops: float32 volume {shape} ({4 * size**3 * 4 / 2**20:.1f} MiB) in chunks of "
          f"{chunks} ({chunk_mib:.1f} MiB; Dask's array.chunk-size is {dask.config.get('array.chunk-size')}); "
          f"{workers} CPUs ({cpu_model()}), threaded scheduler with {workers} workers; dmlops {dmlops.__version__}, "
          f"dask {dask.__version__}")
    print(f"load average {load_start} at the start, {load_average()} at the end; other processes kept "
          f"{'n/a' if others is None else f'{others:.1f}'} CPUs busy on average")
    print(f"new memory, first touch: {at_once:.0f} ms per GiB right after as much was freed, {later:.0f} ms per GiB "
          f"after {0.2 if args.smoke else 2.0:g} s idle (measured on {probe / 2**20:.0f} MiB); every timed call below "
          "starts from memory freed just now (see the module docstring)")
    zarr_column = any("zarr_x" in r for r in rows)
    print(f"{'case':33} {'tasks':>5} {'exact':>5} {'in-memory ms':>12} {'out= ms':>7} {'compute ms':>10} "
          f"{'store ms':>9} {'into ms':>8} {'compute x':>9} {'floor x':>7} {'chunks x':>8} {'store x':>7} {'floor x':>7} {'into x':>6} "
          f"{'/ out=':>6}" + (f" {'zarr x':>6}" if zarr_column else "")
          + f" {'peak MiB: in-memory':>19} {'compute':>7} {'store':>6} {'into':>6} {'store / chunk':>13}")
    for r in rows:
        ms, peak = r["ms"], r["peak_mib"]
        print(f"{r['case']:33} {r['tasks']:5} {str(r['exact']):>5} {ms['in-memory']:12.1f} {ms['in-memory out=']:7.1f} "
              f"{ms['compute']:10.1f} {ms['store']:9.1f} {ms['dmlops.dask.store']:8.1f} {r['compute_x']:8.2f}x "
              f"{r['compute_floor_x']:6.2f}x {r['chunks_x']:7.2f}x {r['store_x']:6.2f}x {r['store_floor_x']:6.2f}x {r['into_x']:5.2f}x "
              f"{r['into_out_x']:5.2f}x" + (f" {r['zarr_x']:5.2f}x" if "zarr_x" in r else "")
              + f" {peak['in-memory']:19.1f} {peak['compute']:7.1f} {peak['store']:6.1f} "
              f"{peak['dmlops.dask.store']:6.1f} {r['store_peak_per_chunk']:13.1f}")
    print("compute x / store x / into x: the Dask path's time (graph built and run: .compute(), da.store, "
          "dmlops.dask.store) over the in-memory call's; floor x: the in-memory time plus one copy of the output "
          "(a new array for compute, the preallocated target for store), over the in-memory time; chunks x: the "
          "tasks of .compute() without Dask's concatenation of their chunks, over the in-memory time; / out=: "
          "dmlops.dask.store over the in-memory call writing into the same preallocated array"
          + ("; zarr x: da.store into an uncompressed zarr array over the in-memory call plus writing its result "
             "there" if zarr_column else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpus": workers, "cpu": cpu_model(), "dask": dask.__version__, "load_average_start": load_start,
                       "other_processes_cpus": others,
                       "new_memory_ms_per_gib": {"at_once": at_once, "after_idle": later}, "results": rows}, f, indent=1)
    failed = [r["case"] for r in rows if not r["exact"]]
    if failed:
        print("FAILED (dask result differs from the in-memory one):", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
