"""dmlops.dask: every operator on Dask arrays equals the in-memory call bit for bit, for random
geometries and random chunkings (uneven, smaller than the window, along N and C too); errors
come from the graph build; the graph is lazy and each task reads only its region; the
threaded, processes, synchronous and dask.distributed schedulers and zarr stores on disk."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlops

da = pytest.importorskip("dask.array")  # the dask extra is part of the test extra
import dask  # noqa: E402
from dask.callbacks import Callback  # noqa: E402

import dmlops.dask as dd  # noqa: E402
from strategies import random_values  # noqa: E402

EXAMPLES = settings(max_examples=int(os.environ.get("DMLOPS_DASK_EXAMPLES", "120")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(np.ascontiguousarray(actual).view(np.uint8),
                                  np.ascontiguousarray(expected).view(np.uint8))


@st.composite
def chunkings(draw, shape) -> tuple:
    """Random chunk sizes per axis: uneven, down to 1."""
    result = []
    for n in shape:
        cuts = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=min(n - 1, 4), unique=True)) if n > 1 else []
        points = [0] + sorted(cuts) + [n]
        result.append(tuple(b - a for a, b in zip(points, points[1:])))
    return tuple(result)


def as_dask(draw, x: np.ndarray):
    chunks = draw(chunkings(x.shape))
    return da.from_array(x, chunks=chunks)


def check(lazy, expected: np.ndarray) -> None:
    """The lazy result, computed on the synchronous scheduler, has the in-memory bits."""
    assert lazy.shape == expected.shape and lazy.dtype == expected.dtype
    same_bits(lazy.compute(scheduler="sync"), expected)


def check_call(fn, x: np.ndarray, lazy_x, *args, **kwargs) -> None:
    """dmlops.dask's fn on lazy_x gives the in-memory fn's result on x, or raises its error."""
    try:
        expected = getattr(dmlops, fn)(x, *args, **kwargs)
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error), match="^" + re.escape(str(error)) + "$"):
            getattr(dd, fn)(lazy_x, *args, **kwargs)
        return
    check(getattr(dd, fn)(lazy_x, *args, **kwargs), expected)


# ---------------------------------------------------------------------------------------------
# Bit-exact against the in-memory call


@EXAMPLES
@given(data=st.data())
def test_pad_equals_in_memory(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    dtype = data.draw(st.sampled_from(["float32", "float16", "int16", "uint64", "bool"]))
    x = random_values(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape, dtype, "bits")
    mode = data.draw(st.sampled_from(["constant", "edge", "reflection", "symmetric", "wrap"]))
    pads = st.lists(st.integers(0, 3 * max(shape) + 2), min_size=rank, max_size=rank)
    start, end = data.draw(pads), data.draw(pads)
    value = 1 if dtype == "bool" else data.draw(st.sampled_from([0, 7, 1.5 if dtype.startswith("float") else 3]))
    check(dd.pad(as_dask(data.draw, x), start, end, mode, value), dmlops.pad(x, start, end, mode, value))


@EXAMPLES
@given(data=st.data())
def test_lp_pooling_equals_in_memory(data):
    D = data.draw(st.integers(1, 3))
    spatial = tuple(data.draw(st.lists(st.integers(1, 9), min_size=D, max_size=D)))
    shape = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))) + spatial
    dtype = data.draw(st.sampled_from(["float32", "float16", "float64"]))
    x = random_values(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape, dtype, "finite")
    window = [data.draw(st.integers(1, 4)) for _ in range(D)]
    dil = [data.draw(st.integers(1, 3)) for _ in range(D)]
    start = [data.draw(st.integers(0, 4)) for _ in range(D)]
    end = [data.draw(st.integers(0, 4)) for _ in range(D)]
    for a in range(D):  # the window must fit the padded input
        while (window[a] - 1) * dil[a] + 1 > spatial[a] + start[a] + end[a]:
            end[a] += 1
    strides = [data.draw(st.integers(1, 4)) for _ in range(D)]
    p = data.draw(st.sampled_from([1, 2, 3, 7]))
    kw = dict(strides=strides, start_padding=start, end_padding=end, dilations=dil, p=p)
    check(dd.lp_pooling(as_dask(data.draw, x), window, **kw), dmlops.lp_pooling(x, window, **kw))


@EXAMPLES
@given(data=st.data())
def test_convolution_equals_in_memory(data):
    D = data.draw(st.integers(1, 3))
    spatial = tuple(data.draw(st.lists(st.integers(1, 8 if D < 3 else 6), min_size=D, max_size=D)))
    groups = data.draw(st.sampled_from([1, 1, 2, 3]))
    in_c, out_c = groups * data.draw(st.integers(1, 3)), groups * data.draw(st.integers(1, 3))
    direction = data.draw(st.sampled_from(["forward", "backward"]))
    dtype = data.draw(st.sampled_from(["float32", "float16", "float64"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = random_values(rng, (data.draw(st.integers(1, 2)), in_c) + spatial, dtype, "finite")
    kernel = [data.draw(st.integers(1, 3)) for _ in range(D)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(D)]
    strides = [data.draw(st.integers(1, 3)) for _ in range(D)]
    start = [data.draw(st.integers(0, 3)) for _ in range(D)]
    end = [data.draw(st.integers(0, 3)) for _ in range(D)]
    kw: dict = dict(strides=strides, dilations=dil, start_padding=start, end_padding=end, group_count=groups,
                    direction=direction, mode=data.draw(st.sampled_from(["cross_correlation", "convolution"])),
                    fused_activation=data.draw(st.sampled_from([None, "relu", "sigmoid"])))
    if direction == "forward":
        for a in range(D):
            while (kernel[a] - 1) * dil[a] + 1 > spatial[a] + start[a] + end[a]:
                end[a] += 1
        w = random_values(rng, (out_c, in_c // groups) + tuple(kernel), dtype, "finite")
    else:
        w = random_values(rng, (in_c, out_c // groups) + tuple(kernel), dtype, "finite")
        nominal = [(n - 1) * s + (k - 1) * d + 1 - a - b for n, s, k, d, a, b in
                   zip(spatial, strides, kernel, dil, start, end)]
        if min(nominal) < 1 or data.draw(st.booleans()):
            kw["output_sizes"] = [data.draw(st.integers(1, 12)) for _ in range(D)]
    bias = random_values(rng, (1, out_c) + (1,) * D, dtype, "finite") if data.draw(st.booleans()) else None
    check(dd.convolution(as_dask(data.draw, x), w, bias, **kw), dmlops.convolution(x, w, bias, **kw))


SCALES = [1.0, 2.0, 3.0, 0.5, 0.7, 1.5, 2.5, 1 / 3, 0.25, 4.0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_resample_chunks_run_in_the_whole_arrays_pass_order(dtype):
    """Chunks of an antialiased downsampling whose own sizes would make the kernel pick another
    pass order than the whole array's (127 x 63 x 256 regions of a 256^3 volume did) run in one
    call each, told the whole array's order, and give the in-memory bits."""
    x = random_values(np.random.default_rng(3), (1, 2, 32, 32, 32), dtype, "finite")
    scales = (1, 1, 0.5, 0.5, 0.5)
    y = dd.resample(da.from_array(x, chunks=(1, 2, 16, 8, 32)), scales, "linear", antialiased=True)
    expected = dmlops.resample(x, scales, "linear", antialiased=True)
    np.testing.assert_array_equal(y.compute(scheduler="sync"), expected)
    differs = 0
    for task in dict(y.__dask_graph__()).values():
        if isinstance(task, tuple) and len(task) > 1 and hasattr(task[1], "calls"):
            for call in task[1].calls:
                k = call.kwargs
                own = dmlops._core.resample_plan("Resample", (dtype, call.shape, None), (dtype, k["sizes"], None),
                                                 "linear", None, list(k["scales"]), list(k["io"]), list(k["oo"]),
                                                 True)["tiles"]
                own_order = tuple(own[f"pass{p}"] for p in (1, 2, 3) if f"pass{p}" in own)
                differs += own_order != tuple(a for a in k["pass_order"] if a in own_order)
    assert differs > 0  # the case this test is about


@EXAMPLES
@given(data=st.data())
def test_resample_equals_in_memory(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    mode = data.draw(st.sampled_from(["nearest_neighbor", "linear"]))
    dtype = data.draw(st.sampled_from(["float32", "float16", "float64"] + (["int8", "bool"] if mode[0] == "n"
                                                                            else [])))
    x = random_values(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape, dtype, "finite")
    scales = [data.draw(st.sampled_from(SCALES)) for _ in range(rank)]
    kw: dict = dict(rounding_direction=data.draw(st.sampled_from([None, "increasing", "decreasing"])),
                    antialiased=data.draw(st.booleans()))
    if data.draw(st.booleans()):
        offsets = st.sampled_from([0.0, 0.5, -0.5, 0.25, 0.3, 1.0 / 3, 7.0])
        kw["input_pixel_offsets"] = [data.draw(offsets) for _ in range(rank)]
        kw["output_pixel_offsets"] = [data.draw(offsets) for _ in range(rank)]
    if data.draw(st.booleans()):
        kw["output_sizes"] = [data.draw(st.integers(1, 14)) for _ in range(rank)]
    check_call("resample", x, as_dask(data.draw, x), scales, mode, **kw)


@EXAMPLES
@given(data=st.data())
def test_upsample_2d_equals_in_memory(data):
    rank = data.draw(st.integers(4, 5))
    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    mode = data.draw(st.sampled_from(["nearest_neighbor", "linear"]))
    dtype = data.draw(st.sampled_from(["float32", "float16", "float64"] + (["uint8"] if mode[0] == "n" else [])))
    x = random_values(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape, dtype, "finite")
    scale = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)))
    check(dd.upsample_2d(as_dask(data.draw, x), scale, mode), dmlops.upsample_2d(x, scale, mode))


def test_resample_large_axis_needs_shifted_offsets_to_be_checked():
    """Scale 3 on a long axis: the source coordinate (o + 0.5) / 3 - 0.5 rounds differently when
    o and the input are shifted by a chunk's start (float64 has fewer fraction bits at 10^5),
    so the per-chunk taps are replayed and compared; the result is still the in-memory one."""
    x = np.random.default_rng(1).standard_normal((1, 200_003)).astype(np.float64)
    ax = dd._Axis(x.shape[1], 3 * x.shape[1], 3.0, 0.5, -0.5, "linear", None, False)
    shifted = ax.replay(10, 30, 0.5 + 199_990, -0.5 - 599_970)
    assert shifted != [(f - 199_990, w) for f, w in ax.taps[599_970:600_000]]  # the rounding differs
    check(dd.resample(da.from_array(x, chunks=(1, 50_000)), (1, 3), "linear"), dmlops.resample(x, (1, 3), "linear"))


def test_transposed_convolution_chunked_along_width():
    """A case where a spatial chunk of a transposed convolution would add the terms of a sum in
    another order (the kernel's blocks of flattened input positions): chunked along W, it
    still gives the in-memory bits, its spatial axes being computed whole."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 12, 23, 25)).astype(np.float32)
    w = rng.standard_normal((12, 3, 3, 1)).astype(np.float32)
    kw = dict(strides=(1, 2), dilations=(2, 2), start_padding=(1, 1), end_padding=(1, 2), group_count=2,
              direction="backward")
    check(dd.convolution(da.from_array(x, chunks=(1, 9, 5, 22)), w, **kw), dmlops.convolution(x, w, **kw))


def test_padding_far_out_reads_only_what_it_needs():
    """A reflection 1000 times the input: every chunk is computed, and none reads more than its
    own size of input indices per axis."""
    x = np.arange(7, dtype=np.int32)
    check(dd.pad(da.from_array(x, chunks=3), (7000,), (6999,), "reflection"),
          dmlops.pad(x, (7000,), (6999,), "reflection"))


# ---------------------------------------------------------------------------------------------
# Errors at graph-build time, laziness, bounded reads


@pytest.mark.parametrize("call", [
    lambda m, x: m.pad(x, (1, 1), (1,), "reflection"),
    lambda m, x: m.pad(x, (1, 1), (1, 1), "reflect"),
    lambda m, x: m.pad(x.astype(np.uint8), (1, 1), (1, 1), value=300),
    lambda m, x: m.convolution(x[None, None], np.zeros((1, 1, 9, 9), np.float32)),
    lambda m, x: m.convolution(x[None, None], np.zeros((1, 1, 2, 2), np.float64)),
    lambda m, x: m.convolution(x[None, None], np.zeros((1, 1, 2, 2), np.float32), group_count=2),
    lambda m, x: m.lp_pooling(x[None, None], (2, 2), p=0),
    lambda m, x: m.lp_pooling(x[None, None], (2,)),
    lambda m, x: m.resample(x, (2, 0), "linear"),
    lambda m, x: m.resample(x.astype(np.int32), (2, 2), "linear"),
    lambda m, x: m.resample(x, (2, 2), "bilinear"),
    lambda m, x: m.upsample_2d(x, 2),
    lambda m, x: m.upsample_2d(x[None, None].astype(bool), 2, "linear"),
])
def test_errors_are_the_in_memory_errors_and_come_at_build_time(call):
    x = np.zeros((4, 5), np.float32)
    with pytest.raises((TypeError, ValueError)) as expected:
        call(dmlops, x)
    with pytest.raises(expected.type) as got:
        call(dd, da.from_array(x, chunks=2))
    assert str(got.value) == str(expected.value)


def test_input_must_be_an_array():
    with pytest.raises(TypeError, match="Padding1: input must be a dask.array.Array or a numpy.ndarray, not list"):
        dd.pad([1, 2], (1,), (1,))


class Recorder:
    """An array-like of zeros that records every region read from it."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype, self.ndim, self.reads = shape, np.dtype(dtype), len(shape), []

    def __getitem__(self, index):
        sizes = [len(range(*s.indices(n))) for s, n in zip(index, self.shape)]
        if np.prod(sizes):  # dask reads an empty slice for the array's meta
            self.reads.append(tuple(s.indices(n)[0] for s, n in zip(index, self.shape)))
        return np.zeros(sizes, self.dtype)


CHUNK_CALLS = {
    "pad": lambda x, **o: dmlops.pad(x, (0, 1, 2, 3, 1), (1, 0, 3, 2, 2), "reflection", **o),
    "convolution": lambda x, **o: dmlops.convolution(x, W3[:, :x.shape[1]], B3, start_padding=(1, 1, 1), end_padding=(1, 1, 1),
                                                     fused_activation="relu", **o),
    "upsample_2d": lambda x, **o: dmlops.upsample_2d(x, 2, "linear", **o),
    "resample": lambda x, **o: dmlops.resample(x, (1, 1, 0.5, 0.75, 0.5), "linear", antialiased=True, **o),
    "nearest": lambda x, **o: dmlops.resample(x, (1, 1, 1.5, 2, 0.5), **o),
    "lp_pooling": lambda x, **o: dmlops.lp_pooling(x, (2, 3, 2), strides=(2, 1, 2), start_padding=(1, 0, 0), p=3, **o),
}
W3 = np.random.default_rng(5).standard_normal((3, 4, 3, 3, 3)).astype(np.float32)
B3 = np.random.default_rng(6).standard_normal((1, 3, 1, 1, 1)).astype(np.float32)


@pytest.mark.parametrize("op", sorted(CHUNK_CALLS))
@pytest.mark.parametrize("cut", [(2,), (3,), (4,), (2, 3), (3, 4), (2, 3, 4), (1, 2, 3, 4)])
def test_kernels_on_chunk_views(op, cut):
    """What a task hands the kernels: a block of a C-contiguous array (its last axis contiguous,
    its outer strides those of the whole array), written into a part of an output chunk
    (out= a strided view). The bits equal the call on a contiguous copy, into a new array."""
    whole = np.random.default_rng(4).standard_normal((2, 4, 11, 12, 13)).astype(np.float32)
    index = tuple(slice(1, n - 1 if n < 5 else n - 2) if a in cut else slice(None) for a, n in enumerate(whole.shape))
    view = whole[index]
    assert not view.flags.c_contiguous and view.strides[-1] == 4
    expected = CHUNK_CALLS[op](np.ascontiguousarray(view))
    same_bits(CHUNK_CALLS[op](view), expected)
    chunk = np.full(tuple(n + 3 for n in expected.shape), np.float32(7))
    part = chunk[tuple(slice(2, 2 + n) for n in expected.shape)]  # strided, offset
    assert CHUNK_CALLS[op](view, out=part) is part
    same_bits(part, expected)
    assert (chunk[:, :, :2] == 7).all() and (chunk[..., -1] == 7).all()  # nothing outside the part


def test_lazy_and_each_chunk_reads_its_region_only():
    """A 4-GB float32 volume in 512 chunks: building the graphs of a chain reads nothing;
    computing one output chunk reads the input chunks its region (with its halo) touches, not
    the array."""
    source = Recorder((1, 1, 1024, 1024, 1024))
    x = da.from_array(source, chunks=(1, 1, 128, 128, 128), asarray=False)
    w = np.ones((1, 1, 3, 3, 3), np.float32)
    y = dd.lp_pooling(dd.convolution(dd.upsample_2d(x, 2, "linear"), w, start_padding=(1, 1, 1),
                                     end_padding=(1, 1, 1)), (2, 2, 2), strides=(2, 2, 2))
    assert source.reads == [] and y.shape == (1, 1, 512, 1024, 1024)
    block = y.blocks[0, 0, 1, 2, 3].compute(scheduler="sync")
    assert block.shape == y.blocks[0, 0, 1, 2, 3].shape
    # pooled [64, 128) x [256, 384) x [384, 512) is convolved [128, 256) x [512, 768) x [768, 1024),
    # which reads three upsampled chunks per axis (its one-voxel halo), each of which reads three
    # input chunks along H and W (its own halo): 3 x 5 x 5 of the 512 input chunks
    starts = {(d, h, w) for _, _, d, h, w in source.reads}
    assert starts == {(d, h, w) for d in range(0, 384, 128) for h in range(0, 640, 128) for w in range(128, 768, 128)}


def test_chunks_follow_the_stride_and_never_overlap():
    x = da.zeros((1, 1, 100), chunks=(1, 1, 10), dtype=np.float32)
    y = dd.lp_pooling(x, (3,), strides=(2,), start_padding=(1,))
    assert y.chunks[2] == (5,) * 10 and sum(y.chunks[2]) == y.shape[2]
    y = dd.convolution(da.zeros((2, 4, 100), chunks=(1, 2, 10)), np.ones((4, 1, 2)), strides=(2,), group_count=2,
                       direction="backward")
    assert y.chunks == ((1, 1), (1, 1), (200,))  # spatial axes whole (see dmlops.dask.convolution)
    assert dd.resample(x, (1, 1, 0.5), "linear").chunks[2] == (5,) * 10
    assert dd.pad(x, (0, 0, 25), (0, 0, 3)).chunks[2] == (8, 8, 9) + (10,) * 9 + (13,)  # 3 <= 10 // 2: joins


def tasks(y) -> dict:
    """The dmlops tasks of y's graph by key, and the halo-copying ones."""
    graph = dict(y.dask)
    return ({k: t for k, t in graph.items() if isinstance(t, tuple) and t[0] is dd._task},
            {k: t for k, t in graph.items() if isinstance(t, tuple) and t[0] is dd._halo})


def test_graph_one_task_per_chunk_and_halos_as_pieces():
    """One layer: a task per output chunk. Padding: a short padding joins the border chunks,
    which pad their one input block locally (no gather, one call). A 3x3x3 convolution: a
    chunk's interior reads a view of its block, its 3 border slabs (one per axis it crosses)
    thin halo pieces of its 7 neighbours, each copied out by a task of its own; the calls'
    outputs tile the chunk.
    Resampling x2 on every axis: the interior is one call for all axes."""
    x = da.zeros((1, 2, 16, 16, 16), chunks=(1, 2, 8, 8, 8), dtype=np.float32)
    padded, halos = tasks(dd.pad(x, (0, 0, 3, 3, 3), (0, 0, 3, 3, 3), "reflection"))
    assert len(padded) == 8 and not halos
    for t in padded.values():
        (call,) = t[1].calls
        assert call.target is None and len(call.places) == 1 and call.places[0][1] is None  # one block, a view
        assert call.kwargs["takes"] == ()
    conv, halos = tasks(dd.convolution(x, np.ones((2, 2, 3, 3, 3), np.float32), start_padding=(1, 1, 1),
                                       end_padding=(1, 1, 1)))
    assert len(conv) == 8 and len(halos) == 8 * 7  # each chunk: its block, 7 pieces of its 7 neighbours
    for t in conv.values():
        work = t[1]
        views = [c for c in work.calls if c.places[0][1] is None]
        assert [k for k in t[2:] if isinstance(k, tuple) and k[0] == x.name] == [t[2 + views[0].blocks[0]]]
        assert len(views) == 1 and len(work.calls) == 4  # the interior, a border slab per axis
        assert views[0].shape[2:] == (8, 8, 8) and [s.stop - s.start for s in views[0].target[2:]] == [7, 7, 7]
        slabs = sorted([s.stop - s.start for s in c.target[2:]] for c in work.calls if c is not views[0])
        assert slabs == [[1, 8, 8], [7, 1, 8], [7, 7, 1]]  # whole along the axes after its own
        covered = np.zeros(work.shape, int)
        for c in work.calls:
            covered[c.target] += 1
        assert (covered == 1).all()
    for t in halos.values():  # one voxel deep: at most a face of a block
        assert np.prod([s.stop - s.start for s in t[2]]) <= 2 * 8 * 8
    resampled, halos = tasks(dd.resample(x, (1, 1, 2, 2, 2), "linear"))
    assert len(resampled) == 8
    whole = dmlops._core.resample_plan("Resample", ("float32", x.shape, None), None, "linear", None,
                                       [1, 1, 2, 2, 2], None, None, False)["tiles"]
    for t in resampled.values():  # every call in the whole array's pass order
        for call in t[1].calls:
            assert call.kwargs["pass_order"] == (whole["pass1"], whole["pass2"], whole["pass3"])


# ---------------------------------------------------------------------------------------------
# Schedulers, threads, zarr


def pipeline(x):
    w = np.random.default_rng(3).standard_normal((2, 1, 3, 3, 3)).astype(np.float32)
    b = np.array([0.1, -0.2], np.float32).reshape(1, 2, 1, 1, 1)
    up = dmlops.upsample_2d if isinstance(x, np.ndarray) else dd.upsample_2d
    conv = dmlops.convolution if isinstance(x, np.ndarray) else dd.convolution
    pool = dmlops.lp_pooling if isinstance(x, np.ndarray) else dd.lp_pooling
    y = conv(up(x, 2, "linear"), w, b, start_padding=(1, 1, 1), end_padding=(1, 1, 1), fused_activation="relu")
    return pool(y, (2, 2, 2), strides=(2, 2, 2), p=2)


VOLUME = np.random.default_rng(2).standard_normal((1, 1, 12, 14, 10)).astype(np.float32)
EXPECTED = pipeline(VOLUME)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_local_schedulers(scheduler):
    lazy = pipeline(da.from_array(VOLUME, chunks=(1, 1, 5, 6, 4)))
    same_bits(lazy.compute(scheduler=scheduler, num_workers=2), EXPECTED)


@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                  memory_limit="1GiB") as cluster, distributed.Client(cluster) as client:
        yield client


def test_distributed_cluster(cluster_client):
    lazy = pipeline(da.from_array(VOLUME, chunks=(1, 1, 4, 7, 5)))
    same_bits(lazy.compute(), EXPECTED)
    # each worker runs one task at a time, so a task may use every CPU of its process
    cpus = len(os.sched_getaffinity(0))
    assert {int(cluster_client.submit(dd._run, kernel_threads, np.zeros(1), (), {}, pure=False).result()[0])
            for _ in range(4)} == {cpus}


def kernel_threads(region):
    """What a task's kernels see: dmlops' thread count inside the task."""
    return np.full(region.shape, dmlops.get_num_threads())


def test_task_threads_follow_the_local_scheduler():
    cpus = len(os.sched_getaffinity(0))
    dmlops.set_num_threads(3)
    assert dd._run(kernel_threads, np.zeros(1), (), {}) == cpus  # the main thread: the synchronous scheduler
    assert dmlops.get_num_threads() == 3  # the task's count stays inside it
    x = da.zeros((4,), chunks=1).map_blocks(lambda b: dd._run(kernel_threads, b, (), {}))
    with dask.config.set(num_workers=2 * cpus):
        assert set(x.compute(scheduler="threads")) == {1}
    with dask.config.set(num_workers=1):
        assert set(x.compute(scheduler="threads")) == {cpus}


def test_zarr_on_disk(tmp_path):
    pytest.importorskip("zarr")
    da.from_array(VOLUME, chunks=(1, 1, 6, 7, 5)).to_zarr(str(tmp_path / "in.zarr"))
    pipeline(da.from_zarr(str(tmp_path / "in.zarr"))).to_zarr(str(tmp_path / "out.zarr"))
    same_bits(da.from_zarr(str(tmp_path / "out.zarr")).compute(), EXPECTED)



@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_store_writes_the_chunks_in_place(scheduler):
    """dmlops.dask.store: the tasks' kernels write straight into a numpy out (any strides), the
    in-memory bits; a graph not of dmlops.dask, or a zarr out, goes through da.store."""
    x = da.from_array(VOLUME, chunks=(1, 1, 5, 6, 4))
    for lazy, expected in [(pipeline(x), EXPECTED), (dd.pad(x, (0, 0, 2, 9, 1), (0, 0, 3, 0, 8), "symmetric"),
                                                     dmlops.pad(VOLUME, (0, 0, 2, 9, 1), (0, 0, 3, 0, 8), "symmetric")),
                           (dd.resample(x, (1, 1, 0.5, 1.5, 0.7), "linear", antialiased=True),
                            dmlops.resample(VOLUME, (1, 1, 0.5, 1.5, 0.7), "linear", antialiased=True)),
                           (dd.pad(x, (0, 0, 1, 1, 1), (0, 0, 1, 1, 1)) + 1, dmlops.pad(VOLUME, (0, 0, 1, 1, 1),
                                                                                         (0, 0, 1, 1, 1)) + 1)]:
        big = np.full((2,) + expected.shape, np.nan, expected.dtype)
        out = big[1, ..., ::-1][..., ::-1]  # strided, not owning its data
        ran: list = []
        with Callback(pretask=lambda key, dsk, state: ran.append(key)):
            assert dd.store(lazy, out, scheduler=scheduler) is out
        same_bits(out, expected)
        assert np.isnan(big[0]).all()
        assert ran and not [k for k in ran if k[0] == lazy.name + "-halo"]  # its halos read in place


def test_store_errors():
    lazy = dd.pad(da.from_array(VOLUME, chunks=5), (0, 0, 1, 1, 1), (0, 0, 1, 1, 1))
    out = np.zeros(lazy.shape, lazy.dtype)
    with pytest.raises(TypeError, match="^store: y must be a dask.array.Array, not ndarray$"):
        dd.store(VOLUME, out)
    with pytest.raises(ValueError, match=r"^store: out has shape \(1, 1, 14, 16, 12\), y has \(1, 1, 14, 16, 11\)$"):
        dd.store(lazy[..., :11], out)
    with pytest.raises(ValueError, match="^store: out has shape None"):
        dd.store(lazy, [1, 2])
    with pytest.raises(TypeError, match="^store: out has dtype float64, y has float32$"):
        dd.store(lazy, out.astype(np.float64))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="^store: out is read-only$"):
        dd.store(lazy, out)
    with pytest.raises(ValueError, match="^store: scheduler 'processes' runs tasks outside this process"):
        dd.store(lazy, np.empty(lazy.shape, lazy.dtype), scheduler="processes")


def test_store_into_zarr(tmp_path):
    zarr = pytest.importorskip("zarr")
    lazy = pipeline(da.from_array(VOLUME, chunks=(1, 1, 6, 7, 5)))
    z = zarr.open(str(tmp_path / "out.zarr"), mode="w", shape=lazy.shape, chunks=(1, 1, 3, 3, 3), dtype=lazy.dtype)
    assert dd.store(lazy, z) is z
    same_bits(z[...], EXPECTED)


def test_benchmark_smoke(capsys):
    """python -m dmlops.bench.dask --smoke: every case is checked bit for bit, then timed."""
    from dmlops.bench import dask as bench

    assert bench.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert out.count(" True ") == len(bench.cases()) and "compute x" in out and "floor x" in out
    assert "chunks x" in out and "new memory, first touch" in out


def test_benchmark_takes_dasks_own_chunks(capsys):
    """--chunks auto: the chunks Dask picks for its array.chunk-size (uneven: 24 = 15 + 9 here)."""
    from dmlops.bench import dask as bench

    with dask.config.set({"array.chunk-size": "64KiB"}):  # the 4 x 24^3 float32 volume is 216 KiB
        assert bench.main(["--smoke", "--chunks", "auto", "--no-zarr"]) == 0
    out = capsys.readouterr().out
    assert "in chunks of (1, 4, 15, 15, 15)" in out and out.count(" True ") == len(bench.cases())
    with pytest.raises(SystemExit):
        bench.main(["--chunks", "1,2"])


def test_benchmark_primes_memory_before_every_call():
    """time_calls' setup (the benchmark's touch of new memory) runs, untimed, right before each
    call of each implementation: warm-up and timed calls alike."""
    from dmlops.bench._harness import time_calls

    events = []
    fns = {name: (lambda name=name: events.append(name)) for name in ("a", "b")}
    times = time_calls(fns, warmup=2, repeat=6, time_budget=1.0, block_warmup=0.0,
                       setup=lambda: events.append("setup"))
    assert [len(t) for t in times.values()] == [6, 6]
    assert events[0::2] == ["setup"] * (len(events) // 2) and "setup" not in events[1::2]
    assert events[1::2].count("a") >= 6 + 2 and events[1::2].count("b") >= 6 + 2
