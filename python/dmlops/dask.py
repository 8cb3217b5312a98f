"""dmlops on Dask arrays: ``pad``, ``convolution``, ``resample``, ``upsample_2d`` and
``lp_pooling`` taking and returning ``dask.array.Array`` (``pip install "dmlops[dask]"``).

Each function takes the in-memory function's arguments, validates them when it is called (the
same TypeError / ValueError, before any task exists) and returns a lazy array whose every output
chunk is one task: it reads only the input region that chunk needs, calls the in-memory dmlops
function on it with paddings (or pixel offsets) shifted to the chunk, and so gives the in-memory
result bit for bit, for any input chunking.

- One graph layer per call: an output chunk's task reads the input blocks its region overlaps
  (a view of the block when the region lies in one, no copy), and each small piece of a
  neighbouring block (a halo of at most half a block) through a task that copies just that
  piece out, so that a task holds, and a dask.distributed worker moves, its own block and
  thin halos, not its neighbours' blocks.
- Interior and borders: when a windowed or resampled chunk's region crosses blocks, its task
  makes one call on a view of the block it reads most of, for the outputs that read only that
  block, and a thin call per side of each axis it crosses for the outputs before and after
  them (a slab, whole along the later axes; its region assembled from the halos), all
  writing into the one output chunk through ``out=``; so no task copies its own block.
- Output chunks follow the input's chunks mapped through the operator (``o * stride`` for
  windows, ``o * scale`` for resampling, shifted by the padding), so no output is computed twice.
- Windowed operators (convolution, Lp pooling): an output chunk ``[o0, o1)`` reads the padded
  input ``[o0 * stride, (o1 - 1) * stride + (window - 1) * dilation + 1)``; the part outside
  the input becomes the chunk's own start / end padding. Channels stay whole per group (a
  group reads all its input channels). Transposed convolution is chunked along N and groups
  only: its kernel adds each sum's terms in an order set by how it cuts the flattened input
  into blocks, so a spatial chunk would give other bits.
- Padding: the first and last chunk along an axis take in the padding next to them (when it is
  at most half a chunk), and pad their own input range locally when its padding folds within
  that range as the whole axis's does (constant, edge, and reflection, symmetric or wrap near
  the border); a chunk further out in a reflection, symmetric or wrap padding gathers just
  the runs of indices it reads.
- Resampling: a chunk resamples every axis of its region in one call. With linear
  interpolation each pass rounds to the arithmetic type (float32, or float64; float16 runs in
  float32 and is rounded once at the end, as in memory), so the passes must run in the order
  the in-memory kernel runs them on the whole array; the kernel picks its order from the
  call's sizes, which is replayed here for each chunk, and a chunk for which it would pick
  another order runs one call per axis in the whole array's order instead. Along an axis, a
  chunk reads the input range its taps touch, with pixel offsets shifted by the chunk's first
  output and input indices. Shifted offsets can change the float64 rounding of the source
  coordinate, so the taps of every chunk are recomputed at graph-build time exactly as the
  kernel computes them and compared with the whole axis's; a chunk whose shifted taps differ
  reads the input from index 0 instead (the same coordinates), or at worst the whole axis.

Threads: inside a task, dmlops runs on ``max(1, cpus // slots)`` threads, where ``slots`` is
the number of tasks that run at once beside it: a dask.distributed worker's ``nthreads``, the
local schedulers' ``num_workers`` (default: one per CPU); the synchronous scheduler runs one
task at a time and gives it every CPU.

Cost: the tasks do the in-memory call's work on their chunks; what a chunked path adds is
Dask's own (graph, scheduling: about a millisecond per few tasks) and, to hand back one numpy
array, a copy of the output (``.compute()`` concatenates the chunks into a new array;
``da.store`` copies each into its target). For a memory-bound operator that copy costs about
as much as the operator. :func:`store` avoids it: the tasks' kernels write their chunks
straight into a preallocated numpy array (see ``python -m dmlops.bench.dask``).

``unfold`` and ``fold`` are not provided: unfold's output puts every window's taps on the
channel axis (``C * prod(window)`` channels), which no spatial chunking shrinks, and fold sums
overlapping windows across chunk borders, which breaks the in-memory summation order.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import multiprocessing
import os
import sys
import threading
from typing import Any, Callable, Optional, Sequence

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from . import _core
from .convolution import DIRECTION, MODE, _activation_spec, _arrays, _group_count, _naming_swaps
from .convolution import convolution as _convolution
from ._activation import Activation
from ._args import check_bool_value, int_tuple, integer, number, per_axis
from ._tensor import array_dtype_name
from ._threads import threads
from .lp_pooling import lp_pooling as _lp_pooling
from .padding import PADDING_MODE
from .padding import pad as _pad
from .resample import INTERPOLATION_MODE, _scale_size, resample_args, resample_in_order
from .resample import resample as _resample
from .resample import upsample_2d as _upsample_2d

__all__ = ["convolution", "lp_pooling", "pad", "resample", "store", "upsample_2d"]

Ranges = list  # per axis: a list of (lo, hi) runs of input indices


# ---------------------------------------------------------------------------------------------
# The graph: one task per output chunk, reading a region of the input's blocks.


def _as_dask(x: Any, what: str) -> da.Array:
    if isinstance(x, da.Array):
        return x
    if isinstance(x, np.ndarray):
        return da.from_array(x, chunks="auto" if x.ndim else ())  # Dask's array.chunk-size
    raise TypeError(f"{what} must be a dask.array.Array or a numpy.ndarray, not {type(x).__name__}")


def _whole(x: Any, what: str) -> Any:
    """A small operand (filter, bias) as one block, or None."""
    if x is None:
        return None
    x = _as_dask(x, what)
    return x.rechunk(x.shape) if x.npartitions > 1 else x


def _meta(x: da.Array) -> np.ndarray:
    """A 1-element numpy array of x's dtype and rank: what the validation calls look at."""
    return np.zeros((1,) * x.ndim, x.dtype)


def _bounds(chunks: Sequence[int]) -> list[int]:
    return list(itertools.accumulate(chunks, initial=0))


def _pieces(name: str, bounds: list, ranges: Ranges) -> tuple[tuple, tuple, list]:
    """Where the input region ``ranges`` (per axis, runs of indices) comes from: its shape, per
    piece (source slices in its block, destination slices in the region) and the blocks' keys.
    A region inside one block is a view of it (destination None)."""
    per_axis = []
    for b, runs in zip(bounds, ranges):
        axis, at = [], 0
        for lo, hi in runs:
            for block in range(bisect.bisect_right(b, lo) - 1, bisect.bisect_left(b, hi)):
                a, z = max(lo, b[block]), min(hi, b[block + 1])
                axis.append((block, slice(a - b[block], z - b[block]), slice(at, at + z - a)))
                at += z - a
        per_axis.append((axis, at))
    shape = tuple(at for _, at in per_axis)
    keys, places = [], []
    for combo in itertools.product(*(axis for axis, _ in per_axis)):
        keys.append((name,) + tuple(block for block, _, _ in combo))
        places.append((tuple(s for _, s, _ in combo), tuple(d for _, _, d in combo)))
    if len(places) == 1:
        places = [(places[0][0], None)]
    return shape, tuple(places), keys


def _region(shape: tuple, places: tuple, blocks: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
    """A call's input region: a view of its one block, or its pieces copied into one array
    (none: an empty region, all its outputs' windows in the padding)."""
    if places and places[0][1] is None:
        return blocks[0][places[0][0]]
    region = np.empty(shape, dtype)
    for (source, destination), block in zip(places, blocks):
        region[destination] = block[source]
    return region


def _task_threads() -> int:
    """The dmlops threads one task may use (see the module docstring)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    distributed = sys.modules.get("distributed")  # a worker has imported it
    if distributed is not None:
        try:
            return max(1, cpus // distributed.get_worker().state.nthreads)
        except ValueError:  # not inside a worker
            pass
    if threading.current_thread() is threading.main_thread() and multiprocessing.parent_process() is None:
        return cpus  # the synchronous scheduler: one task at a time
    return max(1, cpus // (dask.config.get("num_workers", None) or cpus))


def _run(fn: Callable, region: np.ndarray, operands: tuple, kwargs: dict, out: Optional[np.ndarray] = None) -> Any:
    """One call: the in-memory function on its region, on the threads the scheduler leaves
    the task, into ``out`` when given."""
    with threads(_task_threads()):
        return fn(region, *operands, **kwargs) if out is None else fn(region, *operands, out=out, **kwargs)


class _Call:
    """One in-memory call of a task: ``fn(region, **kwargs)``, the region of ``shape``
    assembled from the task's blocks number ``blocks`` by ``places`` (see :func:`_pieces`),
    written to the task's output at ``target`` (None: the call's result is the output)."""

    __slots__ = ("fn", "kwargs", "shape", "places", "blocks", "target")

    def __init__(self, fn: Callable, kwargs: dict, shape: tuple, places: tuple, blocks: tuple,
                 target: Optional[tuple]):
        self.fn, self.kwargs, self.shape, self.places, self.blocks, self.target = (fn, kwargs, shape, places, blocks,
                                                                                   target)


class _Work:
    """What a task computes: its output chunk's shape and dtype (the input's too), the number
    of input blocks (or halo pieces) among its arguments, and its calls."""

    __slots__ = ("shape", "dtype", "blocks", "calls")

    def __init__(self, shape: tuple, dtype: Any, blocks: int, calls: tuple):
        self.shape, self.dtype, self.blocks, self.calls = shape, dtype, blocks, calls


def _compute(work: _Work, out: Optional[np.ndarray], inputs: tuple) -> np.ndarray:
    """A chunk: ``inputs`` are the blocks its calls read, then the operands. One call gives
    the chunk; several (an interior and its borders) fill one output through out=; with
    ``out`` every call writes there."""
    blocks, operands = inputs[:work.blocks], inputs[work.blocks:]
    region = lambda c: _region(c.shape, c.places, [blocks[i] for i in c.blocks], work.dtype)  # noqa: E731
    if out is None and work.calls[0].target is None:
        return _run(work.calls[0].fn, region(work.calls[0]), operands, work.calls[0].kwargs)
    out = np.empty(work.shape, work.dtype) if out is None else out
    for c in work.calls:
        _run(c.fn, region(c), operands, c.kwargs, out if c.target is None else out[c.target])
    return out


def _task(work: _Work, *inputs: Any) -> np.ndarray:
    """A task of the graph: its output chunk, a new array."""
    return _compute(work, None, inputs)


def _task_into(work: _Work, target: np.ndarray, at: tuple, *inputs: Any) -> None:
    """A task of :func:`store`: its output chunk, written into ``target[at]``."""
    _compute(work, target[at], inputs)


def _halo(block: np.ndarray, source: tuple) -> np.ndarray:
    """A small piece of a block, copied: a task reading it then needs only the piece (what a
    dask.distributed worker moves and holds), not the whole neighbouring block."""
    return block[source].copy()


def _first(lo: int, hi: int, true: Callable[[int], bool]) -> int:
    """The first o in [lo, hi) where ``true(o)`` holds (it holds from there on), else hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if true(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _parts(plan: Callable, bounds: list, spans: tuple, split: dict) -> list:
    """An output chunk's parts (per axis, output spans): along each axis of ``split`` whose
    region crosses input blocks, the outputs that read only the block it reads most of (the
    interior) and the outputs before and after them (borders). The parts are the interior and,
    per crossing axis, a slab per border: interior along the crossing axes before it, whole
    along those after (so at most 1 + 2 * axes calls, not one per face, edge and corner); the
    interior reads a view of one block, the slabs assemble their halos. One part (the chunk)
    when a crossing axis is not split, or no output reads that block only. ``split[axis](o)``
    is the input range [lo, hi) output o reads along the axis; both ends grow with o."""
    ranges = plan(spans)[0]
    inner, borders = list(spans), []
    for a, (b, runs) in enumerate(zip(bounds, ranges)):
        lo, hi = runs[0][0], runs[-1][1]
        first, last = bisect.bisect_right(b, lo) - 1, bisect.bisect_left(b, hi) - 1
        if first == last:
            continue
        if a not in split:
            return [spans]
        j = max(range(first, last + 1), key=lambda k: min(hi, b[k + 1]) - max(lo, b[k]))
        o0, o1 = spans[a]
        start = _first(o0, o1, lambda o: split[a](o)[0] >= b[j])
        stop = _first(start, o1, lambda o: split[a](o)[1] > b[j + 1])
        middle = plan(spans[:a] + ((start, stop),) + spans[a + 1:])[0][a] if start < stop else [(0, 0)]
        middle = middle[0][0], middle[-1][1]  # what the interior reads (resampling may read more)
        sides = [s for s in ((o0, start), (stop, o1)) if s[0] < s[1]]
        # (a border whose windows lie in the padding only would be a call without input)
        if not b[j] <= middle[0] < middle[1] <= b[j + 1] or any(split[a](s0)[0] >= split[a](s1 - 1)[1]
                                                                 for s0, s1 in sides):
            return [spans]
        inner[a] = (start, stop)
        borders.append((a, sides))
    return [tuple(inner)] + [tuple(inner[:a]) + (side,) + spans[a + 1:] for a, sides in borders for side in sides]


def _graph(op: str, x: da.Array, chunks: tuple, dtype: Any, plan: Callable, key: Any,
           operands: Sequence[Any] = (), split: Optional[dict] = None) -> da.Array:
    """A lazy array of ``chunks`` whose block of output spans ``spans`` (per axis, [o0, o1))
    is ``fn(region, *operands, **kwargs)``, where ``plan(spans)`` gives ``(ranges, fn,
    kwargs)`` and region is x's rows ``ranges``; ``key`` holds every argument the plan
    depends on (it names the graph's layer). One task per output chunk. Along the axes of
    ``split`` (fn then takes out=; see :func:`_parts`), a chunk whose region crosses blocks
    runs as an interior call on a view of one block and thin border calls. A task reads whole
    the blocks it views or reads much of; of another block it reads a piece of at most half
    the block (a halo), which a task of its own copies out first."""
    deps = [x] + [o for o in operands if o is not None]
    name = f"dmlops-{op}-{tokenize(x, chunks, dtype, *[o.name for o in deps[1:]], key)}"
    bounds = [_bounds(c) for c in x.chunks]
    out_bounds = [_bounds(c) for c in chunks]
    keys = [None if o is None else (o.name,) + (0,) * o.ndim for o in operands]
    layer: dict = {}
    halos: dict = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        spans = tuple((b[i], b[i + 1]) for b, i in zip(out_bounds, index))
        parts = _parts(plan, bounds, spans, split) if split else [spans]
        calls = []
        for part in parts:
            ranges, fn, kwargs = plan(part)
            target = None if len(parts) == 1 else tuple(slice(o0 - s0, o1 - s0) for (o0, o1), (s0, _) in
                                                        zip(part, spans))
            calls.append((fn, kwargs, *_pieces(x.name, bounds, ranges), target))
        # per block the task reads: the box of it that its calls read (a halo when it is small
        # and no call views the block whole)
        boxes: dict = {}
        for _, _, _, places, blocks, _ in calls:
            for (source, _), block in zip(places, blocks):
                box = [(s.start, s.stop) for s in source]
                old = boxes.setdefault(block, (box, len(places) == 1))
                boxes[block] = ([(min(a, c), max(b, d)) for (a, b), (c, d) in zip(old[0], box)],
                                old[1] or len(places) == 1)
        inputs, slots, shift = [], {}, {}
        for block, (box, viewed) in boxes.items():
            size = math.prod(b - a for a, b in box)
            if not viewed and 2 * size <= math.prod(x.chunks[a][i] for a, i in enumerate(block[1:])):
                at = (block, tuple(box))
                if at not in halos:
                    halos[at] = (f"{name}-halo", len(halos))
                    layer[halos[at]] = (_halo, block, tuple(slice(a, b) for a, b in box))
                inputs.append(halos[at])
                shift[block] = [a for a, _ in box]
            else:
                inputs.append(block)
                shift[block] = [0] * len(box)
            slots[block] = len(inputs) - 1
        work = []
        for fn, kwargs, shape, places, blocks, target in calls:
            places = tuple((tuple(slice(s.start - d, s.stop - d) for s, d in zip(source, shift[block])), destination)
                           for (source, destination), block in zip(places, blocks))
            work.append(_Call(fn, kwargs, shape, places, tuple(slots[b] for b in blocks), target))
        task = _Work(tuple(b - a for a, b in spans), np.dtype(dtype), len(inputs), tuple(work))
        layer[(name,) + index] = (_task, task, *inputs, *keys)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return da.Array(graph, name, chunks, meta=np.empty((0,) * len(chunks), dtype))


_SECTIONS = """
    Parameters
    ----------
    x : dask.array.Array or numpy.ndarray
        The input, any chunking (a numpy array is chunked as ``da.from_array`` does by default:
        ``chunks="auto"``, chunks of Dask's ``array.chunk-size``, 128 MiB unless configured).{extra}
    *args, **kwargs
        As for :func:`dmlops.{name}`, without ``out``.

    Returns
    -------
    dask.array.Array
        Lazy; computing it gives the in-memory result's bits.

    Raises
    ------
    TypeError, ValueError
        The in-memory function's, for the same arguments, raised by this call (before any task
        runs).

"""


def _documented(name: str, extra: str = "") -> Callable[[Callable], Callable]:
    """Adds the sections every function here shares to its docstring, before its Examples."""
    def add(fn: Callable) -> Callable:
        head, examples = (fn.__doc__ or "").split("\n    Examples\n", 1)
        fn.__doc__ = head.rstrip() + "\n" + _SECTIONS.format(name=name, extra=extra) + "    Examples\n" + examples
        return fn
    return add


def _split(cuts: Sequence[int], size: int, limit: int, first: int = 1, last: Optional[int] = None) -> tuple[int, ...]:
    """Chunk sizes of ``[0, size)`` cut at ``cuts``, every chunk then split into pieces of at
    most ``limit``; every cut is moved into ``[first, last]`` (so the chunks at the ends keep an
    output that reads the input)."""
    last = size - 1 if last is None else last
    points = sorted({0, size} | {int(c) for c in cuts if 0 < c < size})
    fine = []
    for a, b in zip(points, points[1:]):
        pieces = -(-(b - a) // limit)
        fine += [a + (b - a) * i // pieces for i in range(1, pieces)]
    points = sorted({0, size} | {min(max(c, first), last) for c in list(points[1:-1]) + fine if first <= last})
    return tuple(b - a for a, b in zip(points, points[1:]))


def _offsets(chunks: Sequence[int]) -> list[tuple[int, int]]:
    b = _bounds(chunks)
    return [(int(b[i]), int(b[i + 1])) for i in range(len(chunks))]


# ---------------------------------------------------------------------------------------------
# Windowed operators: convolution (forward), Lp pooling.


class _Window:
    """One spatial axis of a forward window: input size n, window extent, stride, padding."""

    def __init__(self, n: int, extent: int, stride: int, start: int, end: int, out: int):
        self.n, self.extent, self.stride, self.start, self.end, self.out = n, extent, stride, start, end, out

    def chunks(self, in_chunks: Sequence[int]) -> tuple[int, ...]:
        s, p = self.stride, self.start
        # outputs [a, b) have windows overlapping the input; every chunk keeps one of them
        a = max(0, (p - self.extent) // s + 1)
        b = min(self.out, (p + self.n - 1) // s + 1)
        # cut where the window's centre crosses an input chunk's start
        cuts = [-(-(2 * (c + p) - self.extent + 1) // (2 * s)) for c in _bounds(in_chunks)[1:-1]]
        return _split(cuts, self.out, max(1, -(-(max(in_chunks) + p + self.extent) // s)), a + 1, b - 1)

    def reach(self, o: int) -> tuple[int, int]:
        """The input range output o's window reads (empty in the padding)."""
        return max(0, o * self.stride - self.start), min(self.n, o * self.stride + self.extent - self.start)

    def local(self, o0: int, o1: int) -> tuple[int, int, int, int]:
        """The input range [lo, hi) outputs [o0, o1) read, and their local start / end padding."""
        if (o0, o1) == (0, self.out):  # the whole axis (perhaps none of its windows reads the input)
            return 0, self.n, self.start, self.end
        p_lo = o0 * self.stride - self.start
        p_hi = (o1 - 1) * self.stride + self.extent - self.start
        lo, hi = max(0, p_lo), min(self.n, p_hi)
        return lo, hi, lo - p_lo, p_hi - hi


def _spatial_plans(x: da.Array, out_sizes: Sequence[int], window: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int], start: Sequence[int], end: Sequence[int]) -> list[_Window]:
    return [_Window(n, (k - 1) * d + 1, s, p, e, m)
            for n, k, s, d, p, e, m in zip(x.shape[2:], window, strides, dilations, start, end, out_sizes[2:])]


def _window_regions(axes: list, spans: tuple) -> tuple[Ranges, tuple, tuple]:
    """The spatial input ranges of the outputs ``spans`` and their local start / end paddings."""
    local = [ax.local(*spans[a + 2]) for a, ax in enumerate(axes)]
    return [[(lo, hi)] for lo, hi, _, _ in local], tuple(w[2] for w in local), tuple(w[3] for w in local)


@_documented("lp_pooling")
def lp_pooling(x: Any, window_size: Sequence[int], *, strides: Optional[Sequence[int]] = None,
               start_padding: Optional[Sequence[int]] = None, end_padding: Optional[Sequence[int]] = None,
               dilations: Optional[Sequence[int]] = None, p: int = 2) -> da.Array:
    """:func:`dmlops.lp_pooling` on a Dask array: the same arguments (no ``out``), the same
    errors raised here, the in-memory result bit for bit.

    Output chunks: N and C follow x's chunks; each spatial axis cuts where x's chunks start,
    divided by the stride. A chunk reads its windows' input rows plus the halo
    ``(window - 1) * dilation + 1 - stride``.


    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> x = np.random.default_rng(0).standard_normal((1, 2, 9, 10)).astype(np.float32)
    >>> y = dmlops.dask.lp_pooling(da.from_array(x, chunks=(1, 1, 4, 3)), (3, 3), strides=(2, 2), p=3)
    >>> np.array_equal(y.compute(), dmlops.lp_pooling(x, (3, 3), strides=(2, 2), p=3))
    True
    """
    op = "LpPooling1"
    x = _as_dask(x, f"{op}: input")
    meta = _meta(x)
    spatial = x.ndim - 2
    window = per_axis(window_size, spatial, f"{op}: window_size")
    strides = per_axis(strides, spatial, f"{op}: strides", 1)
    start = per_axis(start_padding, spatial, f"{op}: start_padding", 0)
    end = per_axis(end_padding, spatial, f"{op}: end_padding", 0)
    dil = per_axis(dilations, spatial, f"{op}: dilations", 1)
    p = integer(p, f"{op}: p")
    out_sizes = _core.lp_pooling_infer(op, (array_dtype_name(meta, f"{op}: input dtype"), x.shape, None), None,
                                       strides, window, start, end, dil, p)
    axes = _spatial_plans(x, out_sizes, window, strides, dil, start, end)
    chunks = x.chunks[:2] + tuple(a.chunks(c) for a, c in zip(axes, x.chunks[2:]))

    def plan(spans: tuple) -> tuple:
        ranges, s, e = _window_regions(axes, spans)
        return [[spans[0]], [spans[1]]] + ranges, _lp_pooling, dict(
            window_size=window, strides=strides, start_padding=s, end_padding=e, dilations=dil, p=p)

    return _graph("lp_pooling", x, chunks, x.dtype, plan, (window, strides, start, end, dil, p),
                  split={a + 2: ax.reach for a, ax in enumerate(axes)})


# ---------------------------------------------------------------------------------------------
# Convolution


def _conv_chunk(region: np.ndarray, filter: np.ndarray, bias: Optional[np.ndarray], *, groups: tuple[int, int],
                group_size: int, filter_rows: int, out: Optional[np.ndarray] = None, **kwargs: Any) -> np.ndarray:
    g0, g1 = groups
    filter = filter[g0 * filter_rows:g1 * filter_rows]
    if bias is not None:
        bias = bias[:, g0 * group_size:g1 * group_size]
    return _convolution(region, filter, bias, group_count=g1 - g0, out=out, **kwargs)


@_documented("convolution", "\n    filter, bias : numpy.ndarray or dask.array.Array\n        Read whole, as one block.")
def convolution(x: Any, filter: Any, bias: Any = None, *, strides: Optional[Sequence[int]] = None,
                dilations: Optional[Sequence[int]] = None, start_padding: Optional[Sequence[int]] = None,
                end_padding: Optional[Sequence[int]] = None, output_padding: Optional[Sequence[int]] = None,
                group_count: int = 1, mode: str = "cross_correlation", direction: str = "forward",
                fused_activation: Any = None, output_sizes: Optional[Sequence[int]] = None) -> da.Array:
    """:func:`dmlops.convolution` (forward or transposed) on a Dask array: the same arguments
    (no ``out``; ``filter`` and ``bias`` numpy or Dask arrays, read as one block), the same
    errors raised here, the in-memory result bit for bit.

    Output chunks: N follows x's chunks; the output channels are split into whole groups (one
    chunk when ``group_count`` is 1: every output channel reads every input channel); forward,
    each spatial axis cuts where x's chunks start, mapped through the stride and the padding.
    Backward (transposed), the spatial axes stay whole: the kernel adds a sum's terms in an
    order that depends on how it cuts the flattened input into blocks, which a spatial chunk
    would change.


    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((1, 2, 12, 12)).astype(np.float32)
    >>> w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    >>> y = dmlops.dask.convolution(da.from_array(x, chunks=(1, 2, 5, 7)), w, start_padding=(1, 1),
    ...                             end_padding=(1, 1), fused_activation="relu")
    >>> y.chunks[2:], np.array_equal(y.compute(), dmlops.convolution(x, w, start_padding=(1, 1),
    ...                                                              end_padding=(1, 1), fused_activation="relu"))
    (((5, 5, 2), (7, 5)), True)
    """
    op = "Convolution"
    x = _as_dask(x, f"{op}: input")
    filter = _whole(filter, f"{op}: filter")
    bias = _whole(bias, f"{op}: bias")
    mode = MODE.parse(mode, f"{op}: mode")
    direction = DIRECTION.parse(direction, f"{op}: direction")
    D = x.ndim - 2
    arrays = _arrays(dict(strides=strides, dilations=dilations, start_padding=start_padding,
                          end_padding=end_padding, output_padding=output_padding), D)
    groups = _group_count(group_count)
    activation = Activation.of(fused_activation, f"{op}: fused_activation")
    spec = lambda a: None if a is None else (array_dtype_name(_meta(a), f"{op}: dtype"), a.shape, None)  # noqa: E731
    out_spec = None
    if output_sizes is not None:
        sizes = per_axis(output_sizes, D, f"{op}: output_sizes")
        if len(sizes) == D and filter.ndim >= 2:
            sizes = (x.shape[0], filter.shape[0] if direction == "forward" else filter.shape[1] * groups) + sizes
        out_spec = (spec(x)[0], sizes, None)
    if bias is not None and bias.ndim == 1 and x.ndim >= 3:  # PyTorch's (OutC,), as the in-memory call takes it
        bias = bias.reshape((1, bias.shape[0]) + (1,) * (x.ndim - 2))
    out_sizes = _naming_swaps(lambda: _core.convolution_infer(spec(x), spec(filter), spec(bias), out_spec, mode,
                                                              direction, *arrays, groups, _activation_spec(activation)),
                              x.shape, filter.shape)
    strides_, dil, start, end, _ = arrays
    forward = direction == "forward"
    # A transposed convolution keeps its spatial axes whole: its kernel adds a sum's terms in
    # the order (block of input positions, tap), and the blocks are cut from the flattened
    # input, so a spatial chunk would add them in another order (other bits).
    axes = _spatial_plans(x, out_sizes, filter.shape[2:], strides_, dil, start, end) if forward else []
    in_group, out_group = x.shape[1] // groups, out_sizes[1] // groups
    per_chunk = max(1, x.chunks[1][0] // in_group) if groups > 1 else 1
    group_chunks = _split([], groups, per_chunk)
    spatial = tuple(a.chunks(c) for a, c in zip(axes, x.chunks[2:])) if forward else tuple((m,) for m in out_sizes[2:])
    chunks = (x.chunks[0], tuple(g * out_group for g in group_chunks)) + spatial
    group_spans = {(g0 * out_group, g1 * out_group): (g0, g1) for g0, g1 in _offsets(group_chunks)}
    common = dict(mode=mode, direction=direction, strides=strides_, dilations=dil, fused_activation=activation,
                  group_size=out_group, filter_rows=out_group if forward else in_group)
    if not forward:
        common.update(start_padding=start, end_padding=end, output_sizes=tuple(out_sizes[2:]))

    def plan(spans: tuple) -> tuple:
        g0, g1 = group_spans[spans[1]]
        ranges: Ranges = [[spans[0]], [(g0 * in_group, g1 * in_group)]]
        if not forward:
            return ranges + [[(0, n)] for n in x.shape[2:]], _conv_chunk, dict(common, groups=(g0, g1))
        spatial, s, e = _window_regions(axes, spans)
        return ranges + spatial, _conv_chunk, dict(common, groups=(g0, g1), start_padding=s, end_padding=e)

    key = (mode, direction, arrays, groups, activation and activation._spec(), out_sizes)
    return _graph("convolution", x, chunks, x.dtype, plan, key, (filter, bias),
                  split={a + 2: ax.reach for a, ax in enumerate(axes)})


# ---------------------------------------------------------------------------------------------
# Padding


def _sources(mode: str, n: int, i: np.ndarray) -> np.ndarray:
    """The input index each padded position ``i`` (relative to the input's start) reads; -1
    for the constant."""
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "reflection":
        if n == 1:
            return np.zeros_like(i)
        k = np.mod(i, 2 * (n - 1))
        return np.where(k < n, k, 2 * (n - 1) - k)
    k = np.mod(i, 2 * n)  # symmetric
    return np.where(k < n, k, 2 * n - 1 - k)


def _pad_chunk(region: np.ndarray, *, takes: tuple, crops: tuple, out: Optional[np.ndarray] = None,
               **kwargs: Any) -> np.ndarray:
    for axis, index in takes:
        region = np.take(region, index, axis=axis)
    if all(c == slice(None) for c in crops):
        return _pad(region, out=out, **kwargs)
    if out is None:
        return _pad(region, **kwargs)[crops]
    out[...] = _pad(region, **kwargs)[crops]
    return out


def _pad_chunks(chunks: Sequence[int], start: int, end: int) -> tuple[int, ...]:
    """An axis's output chunks: x's, the first and last grown by the paddings when these are at
    most half x's largest chunk (no sliver of padding as a task of its own), else the paddings
    cut into chunks no larger than x's largest."""
    limit = max(chunks)
    middle, head, tail = list(chunks), (), ()
    if start <= limit // 2:
        middle[0] += start
    else:
        head = _split([], start, limit)
    if end <= limit // 2:
        middle[-1] += end
    else:
        tail = _split([], end, limit)
    return tuple(c for c in head + tuple(middle) + tail if c)


def _pad_axis(mode: str, n: int, p: int, o0: int, o1: int) -> tuple:
    """How outputs [o0, o1) of an axis (input size n, start padding p) are made: the runs of
    input indices they read, the gather index into those (or None), the local start and end
    padding, and the slice of the local result that is the chunk."""
    length = o1 - o0
    lo, hi = min(max(o0 - p, 0), n), min(max(o1 - p, 0), n)
    before, after = min(max(p - o0, 0), length), min(max(o1 - p - n, 0), length)  # around [lo, hi)
    if mode in ("constant", "edge"):
        if hi > lo:
            return [(lo, hi)], None, before, after, slice(None)
        if before:  # only start padding: pad the first element, crop it off
            return [(0, 1)], None, length, 0, slice(0, length)
        return [(n - 1, n)], None, 0, length, slice(1, length + 1)  # the same with the last one
    src = _sources(mode, n, np.arange(o0 - p, o1 - p, dtype=np.int64))
    # The chunk's padding folds within [lo, hi) as the whole axis's does: pad that range locally.
    if hi > lo and np.array_equal(_sources(mode, hi - lo, np.arange(-before, hi - lo + after, dtype=np.int64)) + lo,
                                  src):
        return [(lo, hi)], None, before, after, slice(None)
    if src[-1] - src[0] == length - 1 and np.all(np.diff(src) == 1):
        return [(int(src[0]), int(src[-1]) + 1)], None, 0, 0, slice(None)
    needed = np.unique(src)  # else gather just the indices it reads
    breaks = np.flatnonzero(np.diff(needed) != 1) + 1
    return ([(int(r[0]), int(r[-1]) + 1) for r in np.split(needed, breaks)], np.searchsorted(needed, src), 0, 0,
            slice(None))


@_documented("pad")
def pad(x: Any, start_padding: Sequence[int], end_padding: Sequence[int], mode: str = "constant",
        value: Any = 0) -> da.Array:
    """:func:`dmlops.pad` on a Dask array: the same arguments (no ``out``), the same errors
    raised here, the in-memory result bit for bit (any mode, paddings larger than the input).

    Output chunks: x's chunks, the first and last along each axis grown by the padding when it
    is at most half x's largest chunk; a longer padding is cut into chunks no larger than x's
    largest. A chunk whose padding folds within its own input range (constant, edge, and
    reflection, symmetric or wrap near the border) reads that range and pads it; a chunk
    further out in a reflection, symmetric or wrap padding gathers exactly the input indices
    it reads (at most its own size per axis, never the whole axis).


    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> x = np.arange(5)
    >>> y = dmlops.dask.pad(da.from_array(x, chunks=2), (7,), (9,), "reflection")
    >>> y.chunks, np.array_equal(y.compute(), dmlops.pad(x, (7,), (9,), "reflection"))
    (((1, 2, 2, 2, 2, 2, 1, 1, 2, 2, 2, 2),), True)
    """
    op = "Padding1"
    x = _as_dask(x, f"{op}: input")
    meta = _meta(x)
    mode = PADDING_MODE.parse(mode, f"{op}: padding_mode")
    start = per_axis(start_padding, x.ndim, f"{op}: start_padding")
    end = per_axis(end_padding, x.ndim, f"{op}: end_padding")
    value = number(value, f"{op}: padding_value")
    check_bool_value(meta, value, f"{op}: padding_value")
    _core.padding_infer(op, (array_dtype_name(meta, f"{op}: input dtype"), x.shape, None), None, mode, start, end,
                        value, True)
    chunks = tuple(_pad_chunks(c, s, e) for c, s, e in zip(x.chunks, start, end))
    # per axis, per output chunk: (runs, gather index, start padding, end padding, crop)
    axes = [{(o0, o1): _pad_axis(mode, n, p, o0, o1) for o0, o1 in _offsets(c)} for n, p, c in zip(x.shape, start, chunks)]

    def plan(spans: tuple) -> tuple:
        ways = [axes[a][span] for a, span in enumerate(spans)]
        takes = tuple((a, w[1]) for a, w in enumerate(ways) if w[1] is not None)
        return [w[0] for w in ways], _pad_chunk, dict(
            takes=takes, crops=tuple(w[4] for w in ways), start_padding=tuple(w[2] for w in ways),
            end_padding=tuple(w[3] for w in ways), mode=mode, value=value)

    return _graph("pad", x, chunks, x.dtype, plan, (start, end, mode, value))


# ---------------------------------------------------------------------------------------------
# Resampling


class _Axis:
    """One resampled axis, with the kernel's arithmetic replayed in float64 (Python floats):
    the taps of every output, exactly as dmlops computes them. Replaying is Python loops over
    the outputs, so an axis is made once per geometry (:meth:`of`) and remembers its chunks."""

    def __init__(self, n: int, out: int, scale: float, io: float, oo: float, mode: str, rounding: Optional[str],
                 antialiased: bool):
        self.n, self.out, self.scale, self.io, self.oo = n, out, scale, io, oo
        self.mode, self.rounding, self.antialiased = mode, rounding, antialiased
        self.taps = self.replay(n, out, io, oo)
        self.local = functools.lru_cache(maxsize=4096)(self.local)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def of(*args: Any) -> "_Axis":
        return _Axis(*args)

    def replay(self, n: int, count: int, io: float, oo: float) -> list[tuple[int, tuple[float, ...]]]:
        """(first index, weights) of outputs 0..count-1 of an input of n (nearest: no weights)."""
        scale, top, taps = self.scale, float(n - 1), []
        wide = self.mode == "linear" and self.antialiased and scale < 1.0
        for o in range(count):
            x = (float(o) - oo) / scale - io
            if self.mode == "nearest_neighbor":
                r = (math.floor(x + 0.5) if self.rounding is None else
                     math.floor(x) if self.rounding == "decreasing" else math.ceil(x))
                taps.append((min(max(r, 0), n - 1), ()))
            elif wide:  # push_antialiased
                support = 1.0 / scale
                i, hi = float(math.ceil(x - support)), float(math.floor(x + support))
                total, first, weights = 0.0, -1, []
                while i <= hi:
                    w = 1.0 - abs(i - x) * scale
                    if w > 0.0:
                        total += w
                        index = int(min(max(i, 0.0), top))
                        if first < 0:
                            first = index
                        if index - first == len(weights):
                            weights.append(w)
                        else:
                            weights[-1] += w
                    i += 1.0
                taps.append((first, tuple(w / total for w in weights)))
            else:  # push_linear
                c = min(max(x, 0.0), top)
                i0 = math.floor(c)
                w = c - i0
                taps.append((i0, (1.0,)) if w == 0.0 else (i0, (1.0 - w, w)))
        return taps

    def reach(self, o: int) -> tuple[int, int]:
        """The input range output o's taps read."""
        first, weights = self.taps[o]
        return first, first + max(1, len(weights))

    def identity(self) -> bool:
        return self.n == self.out and all(f == o and len(w) <= 1 for o, (f, w) in enumerate(self.taps))

    def chunks(self, in_chunks: Sequence[int]) -> tuple[int, ...]:
        cuts = [int(math.floor(c * self.scale)) for c in _bounds(in_chunks)[1:-1]]
        return _split(cuts, self.out, max(1, math.ceil(max(in_chunks) * self.scale)))

    def local(self, o0: int, o1: int) -> tuple[int, int, float, float, int, slice]:
        """How outputs [o0, o1) are computed: input [lo, hi), the offsets, the outputs the call
        makes and the slice of them that is the chunk. The shifted offsets must be FLOATs and
        must give the same taps (shifted by lo) as the whole axis; else input from 0, output
        offset shifted; else the whole axis and a slice of it."""
        taps = self.taps[o0:o1]
        lo = min(f for f, _ in taps)
        hi = max(f + max(1, len(w)) for f, w in taps)
        oo = self.oo - o0
        for start in (lo, 0):
            io = self.io + start
            if float(np.float32(io)) == io and float(np.float32(oo)) == oo and (
                    self.replay(hi - start, o1 - o0, io, oo) == [(f - start, w) for f, w in taps]):
                return start, hi, io, oo, o1 - o0, slice(None)
        return 0, self.n, self.io, self.oo, o1, slice(o0, o1)


def _resample_chunk(region: np.ndarray, *, scales: Sequence[float], io: Sequence[float], oo: Sequence[float],
                    sizes: Sequence[int], pass_order: Optional[tuple], crops: tuple, interpolation_mode: str,
                    rounding_direction: Optional[str], antialiased: bool, out: Optional[np.ndarray] = None) -> np.ndarray:
    """One output chunk (or part of one): one call on the region, linear interpolation's passes
    in ``pass_order`` (the whole array's), then the chunk is cropped out. The call writes into
    ``out`` when it is the chunk uncropped."""
    direct = out is not None and all(c == slice(None) for c in crops)
    target = out if direct else None
    if pass_order is None:
        region = _resample(region, scales, interpolation_mode, input_pixel_offsets=io, output_pixel_offsets=oo,
                           rounding_direction=rounding_direction, antialiased=antialiased, output_sizes=sizes,
                           out=target)
    else:
        region = resample_in_order(region, scales, pass_order, input_pixel_offsets=io, output_pixel_offsets=oo,
                                   rounding_direction=rounding_direction, antialiased=antialiased,
                                   output_sizes=sizes, out=target)
    if direct:
        return region
    region = region[crops]
    if out is None:
        return region
    out[...] = region
    return out


def _resample_graph(x: da.Array, out_sizes: Sequence[int], scales: Sequence[float], io: Sequence[float],
                    oo: Sequence[float], mode: str, rounding: Optional[str], antialiased: bool) -> da.Array:
    """One task per output chunk, resampling every axis of its region in one call. With linear
    interpolation each pass rounds to the arithmetic type, so a chunk's passes run in the order
    the in-memory kernel picks for the whole array (read from its plan), which may not be the
    order it would pick for the chunk's sizes: the call is told the order. Nearest neighbour
    only gathers, in any order the same bits."""
    axes = {a: _Axis.of(n, m, s, i, o, mode, rounding, antialiased)
            for a, (n, m, s, i, o) in enumerate(zip(x.shape, out_sizes, scales, io, oo))}
    axes = {a: ax for a, ax in axes.items() if not ax.identity()}
    if not axes:
        return x.map_blocks(np.copy)
    order: Optional[tuple] = None
    if mode == "linear":
        spec = (array_dtype_name(_meta(x), "Resample: input dtype"), tuple(x.shape), None)
        tiles = _core.resample_plan("Resample", spec, (spec[0], tuple(out_sizes), None), mode, rounding, list(scales),
                                    list(io), list(oo), antialiased)["tiles"]
        order = tuple(tiles[f"pass{p}"] for p in range(1, len(x.shape) + 1) if f"pass{p}" in tiles)
    chunks = tuple(axes[a].chunks(c) if a in axes else c for a, c in enumerate(x.chunks))

    def plan(spans: tuple) -> tuple:
        ranges, out, crops = [], [], []
        scales_, io_, oo_ = [1.0] * x.ndim, [0.5] * x.ndim, [-0.5] * x.ndim  # the identity
        for a, span in enumerate(spans):
            if a in axes:
                lo, hi, io_[a], oo_[a], size, crop = axes[a].local(*span)
                scales_[a] = axes[a].scale
            else:
                (lo, hi), size, crop = span, span[1] - span[0], slice(None)
            ranges.append([(lo, hi)])
            out.append(size)
            crops.append(crop)
        return ranges, _resample_chunk, dict(scales=tuple(scales_), io=tuple(io_), oo=tuple(oo_), sizes=tuple(out),
                                             pass_order=order, crops=tuple(crops), interpolation_mode=mode,
                                             rounding_direction=rounding, antialiased=antialiased)

    key = (tuple(out_sizes), tuple(scales), tuple(io), tuple(oo), mode, rounding, antialiased)
    return _graph("resample", x, chunks, x.dtype, plan, key, split={a: ax.reach for a, ax in axes.items()})


@_documented("resample")
def resample(x: Any, scales: Sequence[float], interpolation_mode: str = "nearest_neighbor", *,
             input_pixel_offsets: Optional[Sequence[float]] = None,
             output_pixel_offsets: Optional[Sequence[float]] = None, rounding_direction: Optional[str] = None,
             antialiased: bool = False, output_sizes: Optional[Sequence[int]] = None) -> da.Array:
    """:func:`dmlops.resample` on a Dask array: the same arguments (no ``out``), the same errors
    raised here, the in-memory result bit for bit.

    Output chunks: along each resampled axis, x's chunk starts times the scale. A chunk reads
    the input range its taps touch along every axis and resamples all of them in one call, its
    passes in the in-memory kernel's order (see the module docstring).


    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> x = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    >>> y = dmlops.dask.resample(da.from_array(x, chunks=(2, 3)), (1.5, 0.6), "linear", antialiased=True)
    >>> np.array_equal(y.compute(), dmlops.resample(x, (1.5, 0.6), "linear", antialiased=True))
    True
    """
    op = "Resample"
    x = _as_dask(x, f"{op}: input")
    meta = _meta(x)
    mode, rounding, scales, io, oo, antialiased, output_sizes = resample_args(
        x.shape, scales, interpolation_mode, input_pixel_offsets, output_pixel_offsets, rounding_direction, antialiased,
        output_sizes)
    dtype = array_dtype_name(meta, f"{op}: input dtype")
    if mode == "linear" and x.dtype == np.bool_:  # the in-memory call's own message
        _resample(meta, scales, mode)
    out_spec = None if output_sizes is None else (dtype, output_sizes, None)
    sizes, scales32, io, oo = _core.resample_infer(op, (dtype, x.shape, None), out_spec, mode, rounding, scales, io,
                                                   oo, antialiased)
    io = io or [0.5] * x.ndim
    oo = oo or [-0.5] * x.ndim
    return _resample_graph(x, sizes, scales32, io, oo, mode, rounding, antialiased)


@_documented("upsample_2d")
def upsample_2d(x: Any, scale_size: Any = (2, 2), interpolation_mode: str = "nearest_neighbor") -> da.Array:
    """:func:`dmlops.upsample_2d` on a Dask array (4-D NCHW or 5-D NCDHW): the same arguments
    (no ``out``), the same errors raised here, the in-memory result bit for bit. It runs as
    :func:`resample` with scales ``(1, ..., sh, sw)`` and pixel-centred offsets, which is what
    the in-memory kernel runs too.


    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> x = np.random.default_rng(0).standard_normal((1, 1, 5, 5)).astype(np.float16)
    >>> y = dmlops.dask.upsample_2d(da.from_array(x, chunks=(1, 1, 2, 3)), 3, "linear")
    >>> y.chunks[2:], np.array_equal(y.compute(), dmlops.upsample_2d(x, 3, "linear"))
    (((6, 6, 3), (9, 6)), True)
    """
    op = "Upsample2D"
    x = _as_dask(x, f"{op}: input")
    meta = _meta(x)
    scale = _scale_size(scale_size)
    mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
    if mode == "linear" and x.dtype == np.bool_:
        _upsample_2d(np.zeros((1,) * x.ndim, x.dtype), scale, mode)  # the in-memory call's own message
    sizes = _core.upsample_2d_infer((array_dtype_name(meta, f"{op}: input dtype"), x.shape, None), None, scale, mode)
    scales = (1.0,) * (x.ndim - 2) + tuple(float(s) for s in scale)
    return _resample_graph(x, sizes, scales, (0.5,) * x.ndim, (-0.5,) * x.ndim, mode, None, False)


# ---------------------------------------------------------------------------------------------
# Into one preallocated array


def _unhaloed(tasks: dict[Any, Any], work: _Work, inputs: tuple[Any, ...]) -> tuple[_Work, tuple[Any, ...]]:
    """A task that reads its halo pieces from their blocks in place, as it may when every task
    runs in this process (nothing is moved): no halo task, no copy of a piece."""
    direct = list(inputs)
    shifts: list[Optional[list[int]]] = []
    for i in range(work.blocks):
        halo = tasks.get(direct[i]) if isinstance(direct[i], tuple) else None
        if isinstance(halo, tuple) and halo[0] is _halo:
            direct[i] = halo[1]
            shifts.append([s.start for s in halo[2]])
        else:
            shifts.append(None)
    calls = tuple(_Call(c.fn, c.kwargs, c.shape, tuple(
        (source if shifts[b] is None else tuple(slice(s.start + d, s.stop + d) for s, d in zip(source, shifts[b])),
         destination) for (source, destination), b in zip(c.places, c.blocks)), c.blocks, c.target)
        for c in work.calls)
    return _Work(work.shape, work.dtype, work.blocks, calls), tuple(direct)


def store(y: Any, out: Any, *, scheduler: str = "threads") -> Any:
    """Computes ``y`` into ``out``, a preallocated array of its shape and dtype, and returns
    ``out``.

    When ``y`` is a result of this module and ``out`` a writeable numpy array, each task's
    kernels write its output chunk straight into ``out`` through ``out=``: no chunk is
    allocated, nothing is copied, and the tasks read their halos from the neighbouring blocks
    in place (no halo task). (``da.store`` copies every finished chunk into place, which
    for a memory-bound operator costs about as much as the operator.) Writing into an array of
    this process needs the tasks in this process: ``scheduler`` is then ``"threads"`` (the
    default) or ``"sync"``. Anything else (another Dask array, a zarr array as ``out``) goes
    to ``da.store(y, out, scheduler=scheduler)`` (with a lock unless ``out`` is numpy).

    Parameters
    ----------
    y : dask.array.Array
        What to compute, e.g. ``dmlops.dask.pad(x, ...)``.
    out : numpy.ndarray or array-like
        ``y.shape`` and ``y.dtype``; any strides.
    scheduler : str
        Dask's scheduler name.

    Returns
    -------
    out

    Raises
    ------
    TypeError
        ``y`` is not a Dask array, or ``out``'s dtype is not ``y``'s.
    ValueError
        ``out``'s shape is not ``y``'s, a numpy ``out`` is read-only, or the scheduler runs
        tasks outside this process while ``out`` is a numpy array.

    Examples
    --------
    >>> import numpy as np, dask.array as da, dmlops, dmlops.dask
    >>> x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    >>> y = dmlops.dask.upsample_2d(da.from_array(x, chunks=(1, 1, 2, 2)), 2, "linear")
    >>> out = np.empty(y.shape, y.dtype)
    >>> dmlops.dask.store(y, out) is out, np.array_equal(out, dmlops.upsample_2d(x, 2, "linear"))
    (True, True)
    """
    if not isinstance(y, da.Array):
        raise TypeError(f"store: y must be a dask.array.Array, not {type(y).__name__}")
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape is None or tuple(shape) != y.shape:
        raise ValueError(f"store: out has shape {shape}, y has {y.shape}")
    if np.dtype(dtype) != y.dtype:
        raise TypeError(f"store: out has dtype {dtype}, y has {y.dtype}")
    layer = y.dask.layers.get(y.name)
    tasks = dict(layer) if layer is not None else {}
    ours = [k for k, t in tasks.items() if isinstance(k, tuple) and k[0] == y.name]
    if not isinstance(out, np.ndarray) or not ours or not all(isinstance(tasks[k], tuple) and tasks[k][0] is _task
                                                               for k in ours):
        # (a lock for other targets: a zarr chunk that two tasks write is read, changed and written)
        da.store(y, out, lock=not isinstance(out, np.ndarray), scheduler=scheduler)
        return out
    if not out.flags.writeable:
        raise ValueError("store: out is read-only")
    if scheduler not in ("threads", "threading", "sync", "synchronous", "single-threaded"):
        raise ValueError(f"store: scheduler {scheduler!r} runs tasks outside this process, where they cannot write "
                         "into out (a numpy array); use 'threads' or 'sync', or a zarr array as out")
    name = f"dmlops-store-{tokenize(y.name, id(out), out.__array_interface__['data'][0])}"
    bounds = [_bounds(c) for c in y.chunks]
    writes = {}
    for k in ours:
        at = tuple(slice(b[i], b[i + 1]) for b, i in zip(bounds, k[1:]))
        work, inputs = _unhaloed(tasks, tasks[k][1], tasks[k][2:])
        writes[(name,) + k[1:]] = (_task_into, work, out, at, *inputs)
    layers, dependencies = dict(y.dask.layers), dict(y.dask.dependencies)
    del layers[y.name]
    layers[name], dependencies[name] = writes, dependencies.pop(y.name)
    keys = [(name,) + k[1:] for k in ours]
    dask.base.compute_as_if_collection(da.Array, HighLevelGraph(layers, dependencies), keys, scheduler=scheduler)
    return out
