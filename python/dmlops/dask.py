"""dmlops on Dask arrays: ``pad``, ``convolution``, ``resample``, ``upsample_2d`` and
``lp_pooling`` taking and returning ``dask.array.Array`` (``pip install "dmlops[dask]"``).

Each function takes the in-memory function's arguments, validates them when it is called (the
same TypeError / ValueError, before any task exists) and returns a lazy array whose every output
chunk is one task: it reads only the input region that chunk needs, calls the in-memory dmlops
function on it with paddings (or pixel offsets) shifted to the chunk, and so gives the in-memory
result bit for bit, for any input chunking.

- Output chunks follow the input's chunks mapped through the operator (``o * stride`` for
  windows, ``o * scale`` for resampling, shifted by the padding), so no output is computed twice.
- Windowed operators (convolution, Lp pooling): an output chunk ``[o0, o1)`` reads the padded
  input ``[o0 * stride, (o1 - 1) * stride + (window - 1) * dilation + 1)``; the part outside
  the input becomes the chunk's own start / end padding. Channels stay whole per group (a
  group reads all its input channels). Transposed convolution is chunked along N and groups
  only: its kernel adds each sum's terms in an order set by how it cuts the flattened input
  into blocks, so a spatial chunk would give other bits.
- Padding: an output chunk reads the set of input indices its outputs map to. Constant and edge
  modes read one contiguous range and pad it locally; reflection, symmetric and wrap may fold
  far from the border, so a chunk gathers just the runs of indices it reads and moves them.
- Resampling runs one axis after the other, in the order the in-memory kernel runs its passes
  (every pass rounds to the arithmetic type: float32, or float64; float16 runs in float32 and
  is rounded once at the end, as in memory). Along an axis, an output chunk reads the input
  range its taps touch, with pixel offsets shifted by the chunk's first output and input
  indices. Shifted offsets can change the float64 rounding of the source coordinate, so the
  taps of every chunk are recomputed at graph-build time exactly as the kernel computes them
  and compared with the whole axis's; a chunk whose shifted taps differ reads the input from
  index 0 instead (the same coordinates), or at worst the whole axis.

Threads: inside a task, dmlops runs on ``max(1, cpus // slots)`` threads, where ``slots`` is
the number of tasks that run at once beside it: a dask.distributed worker's ``nthreads``, the
local schedulers' ``num_workers`` (default: one per CPU); the synchronous scheduler runs one
task at a time and gives it every CPU.

``unfold`` and ``fold`` are not provided: unfold's output puts every window's taps on the
channel axis (``C * prod(window)`` channels), which no spatial chunking shrinks, and fold sums
overlapping windows across chunk borders, which breaks the in-memory summation order.
"""

from __future__ import annotations

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
from dask.array.core import concatenate3
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
from .resample import INTERPOLATION_MODE, _scale_size, resample_args
from .resample import resample as _resample
from .resample import upsample_2d as _upsample_2d

__all__ = ["convolution", "lp_pooling", "pad", "resample", "upsample_2d"]

Ranges = list  # per axis: a list of (lo, hi) runs of input indices


# ---------------------------------------------------------------------------------------------
# The graph: one task per output chunk, reading a region of the input's blocks.


def _as_dask(x: Any, what: str) -> da.Array:
    if isinstance(x, da.Array):
        return x
    if isinstance(x, np.ndarray):
        return da.from_array(x, chunks=x.shape or ())
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


def _bounds(chunks: Sequence[int]) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(chunks, dtype=np.int64)))


def _read(name: str, bounds: list, ranges: Ranges) -> Any:
    """The task that assembles input rows ``ranges`` (per axis, runs of indices) from blocks."""
    pieces = []
    for b, runs in zip(bounds, ranges):
        axis = []
        for lo, hi in runs:
            first = int(np.searchsorted(b, lo, side="right")) - 1
            last = int(np.searchsorted(b, hi, side="left"))
            for block in range(first, last):
                a, z = max(lo, int(b[block])), min(hi, int(b[block + 1]))
                axis.append((block, slice(a - int(b[block]), z - int(b[block]))))
        pieces.append(axis)

    def nest(axis: int, key: tuple, index: tuple) -> Any:
        if axis == len(pieces):
            return (np.ndarray.__getitem__, (name,) + key, index)
        return [nest(axis + 1, key + (blk,), index + (s,)) for blk, s in pieces[axis]]

    return (concatenate3, nest(0, (), ()))


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


def _run(fn: Callable, region: np.ndarray, operands: tuple, kwargs: dict) -> np.ndarray:
    """One task: the in-memory function on its region, on the threads the scheduler leaves it."""
    with threads(_task_threads()):
        return fn(region, *operands, **kwargs)


def _graph(op: str, x: da.Array, chunks: tuple, dtype: Any, plan: Callable, key: Any,
           operands: Sequence[Any] = ()) -> da.Array:
    """A lazy array of ``chunks`` whose block ``index`` is ``fn(region, *operands, **kwargs)``,
    where ``plan(index)`` gives ``(ranges, fn, kwargs)`` and region is x's rows ``ranges``;
    ``key`` holds every argument the plan depends on (it names the graph's layer)."""
    deps = [x] + [o for o in operands if o is not None]
    name = f"dmlops-{op}-{tokenize(x, chunks, dtype, *[o.name for o in deps[1:]], key)}"
    bounds = [_bounds(c) for c in x.chunks]
    keys = tuple(None if o is None else (o.name,) + (0,) * o.ndim for o in operands)
    layer = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        ranges, fn, kwargs = plan(index)
        layer[(name,) + index] = (_run, fn, _read(x.name, bounds, ranges), (tuple, list(keys)), kwargs)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return da.Array(graph, name, chunks, meta=np.empty((0,) * len(chunks), dtype))


_SECTIONS = """
    Parameters
    ----------
    x : dask.array.Array or numpy.ndarray
        The input, any chunking (a numpy array becomes one chunk).{extra}
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


def _window_regions(axes: list, spans: list, index: tuple) -> tuple[Ranges, tuple, tuple]:
    """The spatial input ranges of output block ``index`` and its local start / end paddings."""
    local = [ax.local(*spans[a + 2][index[a + 2]]) for a, ax in enumerate(axes)]
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
    spans = [_offsets(c) for c in chunks]

    def plan(index: tuple) -> tuple:
        ranges, s, e = _window_regions(axes, spans, index)
        return [[spans[0][index[0]]], [spans[1][index[1]]]] + ranges, _lp_pooling, dict(
            window_size=window, strides=strides, start_padding=s, end_padding=e, dilations=dil, p=p)

    return _graph("lp_pooling", x, chunks, x.dtype, plan, (window, strides, start, end, dil, p))


# ---------------------------------------------------------------------------------------------
# Convolution


def _conv_chunk(region: np.ndarray, filter: np.ndarray, bias: Optional[np.ndarray], *, groups: tuple[int, int],
                group_size: int, filter_rows: int, **kwargs: Any) -> np.ndarray:
    g0, g1 = groups
    filter = filter[g0 * filter_rows:g1 * filter_rows]
    if bias is not None:
        bias = bias[:, g0 * group_size:g1 * group_size]
    return _convolution(region, filter, bias, group_count=g1 - g0, **kwargs)


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
    spans = [_offsets(c) for c in (chunks[0], group_chunks) + chunks[2:]]
    common = dict(mode=mode, direction=direction, strides=strides_, dilations=dil, fused_activation=activation,
                  group_size=out_group, filter_rows=out_group if forward else in_group)
    if not forward:
        common.update(start_padding=start, end_padding=end, output_sizes=tuple(out_sizes[2:]))

    def plan(index: tuple) -> tuple:
        g0, g1 = spans[1][index[1]]
        ranges: Ranges = [[spans[0][index[0]]], [(g0 * in_group, g1 * in_group)]]
        if not forward:
            return ranges + [[(0, n)] for n in x.shape[2:]], _conv_chunk, dict(common, groups=(g0, g1))
        spatial, s, e = _window_regions(axes, spans, index)
        return ranges + spatial, _conv_chunk, dict(common, groups=(g0, g1), start_padding=s, end_padding=e)

    key = (mode, direction, arrays, groups, activation and activation._spec(), out_sizes)
    return _graph("convolution", x, chunks, x.dtype, plan, key, (filter, bias))


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


def _pad_chunk(region: np.ndarray, *, takes: tuple, crops: tuple, **kwargs: Any) -> np.ndarray:
    for axis, index in takes:
        region = np.take(region, index, axis=axis)
    return _pad(region, **kwargs)[crops]


@_documented("pad")
def pad(x: Any, start_padding: Sequence[int], end_padding: Sequence[int], mode: str = "constant",
        value: Any = 0) -> da.Array:
    """:func:`dmlops.pad` on a Dask array: the same arguments (no ``out``), the same errors
    raised here, the in-memory result bit for bit (any mode, paddings larger than the input).

    Output chunks: x's chunks shifted by the start padding; each padded region is cut into
    chunks no larger than x's largest. Constant and edge chunks read one input range and pad it;
    reflection, symmetric and wrap chunks gather exactly the input indices they read (a chunk
    far out in a large reflection reads at most its own size per axis, never the whole axis).


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
    out_sizes, _ = _core.padding_infer(op, (array_dtype_name(meta, f"{op}: input dtype"), x.shape, None), None,
                                       mode, start, end, value, True)
    chunks = tuple(_split([b + s for b in _bounds(c)], m, max(c)) for c, s, m in zip(x.chunks, start, out_sizes))
    spans = [_offsets(c) for c in chunks]
    folded = mode not in ("constant", "edge")

    def plan(index: tuple) -> tuple:
        ranges: Ranges = []
        takes, crops, s, e = [], [], [], []
        for a, (n, p) in enumerate(zip(x.shape, start)):
            o0, o1 = spans[a][index[a]]
            length = o1 - o0
            if folded:
                src = _sources(mode, n, np.arange(o0 - p, o1 - p, dtype=np.int64))
                if src[-1] - src[0] == length - 1 and np.all(np.diff(src) == 1):
                    ranges.append([(int(src[0]), int(src[-1]) + 1)])
                else:
                    needed = np.unique(src)
                    breaks = np.flatnonzero(np.diff(needed) != 1) + 1
                    runs = [(int(r[0]), int(r[-1]) + 1) for r in np.split(needed, breaks)]
                    ranges.append(runs)
                    takes.append((a, np.searchsorted(needed, src)))
                s.append(0)
                e.append(0)
                crops.append(slice(None))
                continue
            lo, hi = min(max(o0 - p, 0), n), min(max(o1 - p, 0), n)
            before, after, crop = min(max(p - o0, 0), length), 0, slice(None)
            if hi == lo and before:  # only start padding: pad the first element, crop it off
                lo, hi, crop = 0, 1, slice(0, length)
            elif hi == lo:  # only end padding: the same with the last element
                lo, hi, after, crop = n - 1, n, length, slice(1, length + 1)
            else:
                after = length - before - (hi - lo)
            ranges.append([(lo, hi)])
            s.append(before)
            e.append(after)
            crops.append(crop)
        return ranges, _pad_chunk, dict(takes=tuple(takes), crops=tuple(crops), start_padding=tuple(s),
                                        end_padding=tuple(e), mode=mode, value=value)

    return _graph("pad", x, chunks, x.dtype, plan, (start, end, mode, value))


# ---------------------------------------------------------------------------------------------
# Resampling


class _Axis:
    """One resampled axis, with the kernel's arithmetic replayed in float64 (Python floats):
    the taps of every output, exactly as dmlops computes them."""

    def __init__(self, n: int, out: int, scale: float, io: float, oo: float, mode: str, rounding: Optional[str],
                 antialiased: bool):
        self.n, self.out, self.scale, self.io, self.oo = n, out, scale, io, oo
        self.mode, self.rounding, self.antialiased = mode, rounding, antialiased
        self.taps = self.replay(n, out, io, oo)

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

    def identity(self) -> bool:
        return self.n == self.out and all(f == o and len(w) <= 1 for o, (f, w) in enumerate(self.taps))

    def tap_count(self) -> int:
        return sum(max(1, len(w)) for _, w in self.taps)

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


def _resample_chunk(region: np.ndarray, *, axis: int, scale: float, offsets: tuple[float, float], size: int,
                    crop: slice, cast: tuple, **kwargs: Any) -> np.ndarray:
    rank = region.ndim
    if cast[0] is not None:
        region = region.astype(cast[0])
    scales, io, oo = [1.0] * rank, [0.5] * rank, [-0.5] * rank  # the identity on the other axes
    scales[axis], (io[axis], oo[axis]) = scale, offsets
    sizes = list(region.shape)
    sizes[axis] = size
    y = _resample(region, scales, input_pixel_offsets=io, output_pixel_offsets=oo, output_sizes=sizes, **kwargs)
    y = y[(slice(None),) * axis + (crop,)]
    return y if cast[1] is None else y.astype(cast[1])


def _pass_order(shape: Sequence[int], out: Sequence[int], axes: dict) -> list[int]:
    """The order dmlops' separable filter runs its passes in (filter.cpp's pass_order)."""
    filtered = sorted(axes)
    taps = {a: float(axes[a].tap_count()) / float(out[a]) for a in filtered}
    last = len(shape) - 1

    def cost(order: Sequence[int]) -> float:
        sizes = [float(n) for n in shape]
        total = 0.0
        for a in order:
            sizes[a] = float(out[a])
            elements = 1.0
            for n in sizes:
                elements *= n
            total += elements * taps[a] * (3.0 if a == last else 1.0)
        return total

    if len(filtered) > 5:
        return sorted(filtered, key=lambda a: float(out[a]) / float(shape[a]))
    best, best_cost = filtered, cost(filtered)
    for order in itertools.permutations(filtered):  # lexicographic, as std::next_permutation
        c = cost(order)
        if c < best_cost:
            best, best_cost = list(order), c
    return best


def _resample_graph(x: da.Array, out_sizes: Sequence[int], scales: Sequence[float], io: Sequence[float],
                    oo: Sequence[float], mode: str, rounding: Optional[str], antialiased: bool) -> da.Array:
    axes = {a: _Axis(n, m, s, i, o, mode, rounding, antialiased)
            for a, (n, m, s, i, o) in enumerate(zip(x.shape, out_sizes, scales, io, oo))}
    axes = {a: ax for a, ax in axes.items() if not ax.identity()}
    if not axes:
        return x.map_blocks(np.copy)
    order = _pass_order(x.shape, out_sizes, axes)
    # float16 runs its passes in float32 and is rounded once, at the end (as in memory)
    final = x.dtype
    work = np.dtype(np.float32) if mode == "linear" and final == np.float16 else None
    for step, a in enumerate(order):
        ax = axes[a]
        cast = (work if step == 0 else None, final if work is not None and step == len(order) - 1 else None)
        chunks = x.chunks[:a] + (ax.chunks(x.chunks[a]),) + x.chunks[a + 1:]
        spans = [_offsets(c) for c in chunks]
        dtype = final if work is None or cast[1] is not None else work

        def plan(index: tuple, a: int = a, ax: _Axis = ax, cast: tuple = cast, spans: list = spans) -> tuple:
            lo, hi, i_off, o_off, size, crop = ax.local(*spans[a][index[a]])
            ranges: Ranges = [[spans[d][index[d]]] for d in range(x.ndim)]
            ranges[a] = [(lo, hi)]
            return ranges, _resample_chunk, dict(axis=a, scale=ax.scale, offsets=(i_off, o_off), size=size,
                                                 crop=crop, cast=cast, interpolation_mode=mode,
                                                 rounding_direction=rounding, antialiased=antialiased)

        key = (a, ax.n, ax.out, ax.scale, ax.io, ax.oo, mode, rounding, antialiased, cast)
        x = _graph("resample", x, chunks, dtype, plan, key)
    return x


@_documented("resample")
def resample(x: Any, scales: Sequence[float], interpolation_mode: str = "nearest_neighbor", *,
             input_pixel_offsets: Optional[Sequence[float]] = None,
             output_pixel_offsets: Optional[Sequence[float]] = None, rounding_direction: Optional[str] = None,
             antialiased: bool = False, output_sizes: Optional[Sequence[int]] = None) -> da.Array:
    """:func:`dmlops.resample` on a Dask array: the same arguments (no ``out``), the same errors
    raised here, the in-memory result bit for bit.

    Output chunks: along each resampled axis, x's chunk starts times the scale. The axes run one
    after the other, in the in-memory kernel's pass order (see the module docstring), so a
    chunk of each pass reads only the input rows its taps touch along that axis.


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
