"""Unfold / Fold (docs/semantics/unfold.md) against the plain references in reference.py."""

from __future__ import annotations

import doctest
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlops
import dmlops.unfold
from reference import bits, fold_reference, unfold_reference, window_blocks
from strategies import (arrays, check_bad_outs, check_hostile_inputs, fuzz_garbage, garbage_settings, kwargs_source,
                        outs, run_and_check_inputs, show_call)

DTYPES = ("float32", "float16", "float64", "uint8", "uint16", "uint32", "uint64",
          "int8", "int16", "int32", "int64", "bool")
FOLD_DTYPES = DTYPES[:-1]  # sums of bools are not bools: fold rejects bool


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    # random bit patterns: every value, NaN payloads and subnormals included
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def random_summands(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Fold inputs: random bits for integers (sums wrap); finite values for floats, of mixed
    magnitudes so that sums round."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return random_array(rng, shape, dtype)
    scale = np.exp2(rng.integers(-6, 7, size=shape))
    return (rng.standard_normal(shape) * scale).astype(dtype)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray):
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(bits(actual), bits(expected))


def window_kwargs(strides, dilations, start, end) -> dict:
    return dict(strides=strides, dilations=dilations, start_padding=start, end_padding=end)


# ---------------------------------------------------------------------------------------------
# DirectML's worked examples (seed 004, DML_UNFOLD_OPERATOR_DESC; spec's FOLD check), verbatim

RAMP = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)

SEED_EXAMPLE_1 = [[0, 1, 2, 5, 6, 7, 10, 11, 12],
                  [1, 2, 3, 6, 7, 8, 11, 12, 13],
                  [2, 3, 4, 7, 8, 9, 12, 13, 14],
                  [5, 6, 7, 10, 11, 12, 15, 16, 17],
                  [6, 7, 8, 11, 12, 13, 16, 17, 18],
                  [7, 8, 9, 12, 13, 14, 17, 18, 19],
                  [10, 11, 12, 15, 16, 17, 20, 21, 22],
                  [11, 12, 13, 16, 17, 18, 21, 22, 23],
                  [12, 13, 14, 17, 18, 19, 22, 23, 24]]

SEED_EXAMPLE_2 = [[0, 0, 0, 0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17],
                  [0, 0, 0, 1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18],
                  [0, 0, 0, 2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19],
                  [0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22],
                  [1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23],
                  [2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24],
                  [5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22, 0, 0, 0],
                  [6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23, 0, 0, 0],
                  [7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24, 0, 0, 0]]

FOLD_CHECK = [[0, 5, 13, 9], [14, 38, 54, 32], [38, 86, 102, 56], [26, 57, 65, 35]]


@pytest.mark.parametrize("start,end,expected", [
    ((0, 0), (0, 0), SEED_EXAMPLE_1),
    ((1, 0), (1, 0), SEED_EXAMPLE_2),
])
def test_seed_unfold_examples(start, end, expected):
    expected = np.array([expected], dtype=np.float32)
    kwargs = window_kwargs((1, 1), (1, 1), start, end)
    y = dmlops.unfold(RAMP, (3, 3), **kwargs)
    assert y.shape == expected.shape and y.dtype == np.float32 and y.flags.c_contiguous
    np.testing.assert_array_equal(y, expected)
    desc = dmlops.UnfoldDesc(dmlops.TensorDesc("FLOAT32", (1, 1, 5, 5)), window_sizes=(3, 3), **kwargs)
    assert desc.output.sizes == expected.shape
    np.testing.assert_array_equal(desc(RAMP), expected)
    # the reference agrees with DirectML's examples too, so it is a sound oracle
    np.testing.assert_array_equal(unfold_reference(RAMP, (3, 3), (1, 1), (1, 1), start, end), expected)


def test_spec_fold_example():
    cols = np.arange(36, dtype=np.float32).reshape(1, 9, 4)
    expected = np.array([[FOLD_CHECK]], dtype=np.float32)
    np.testing.assert_array_equal(dmlops.fold(cols, (4, 4), (3, 3)), expected)
    desc = dmlops.FoldDesc(dmlops.TensorDesc("float32", (1, 9, 4)), dmlops.TensorDesc("float32", (1, 1, 4, 4)),
                           window_sizes=(3, 3))
    np.testing.assert_array_equal(desc(cols), expected)
    np.testing.assert_array_equal(fold_reference(cols, (4, 4), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0)), expected)


def test_issue_examples():
    x = RAMP
    cols = dmlops.unfold(x, window_sizes=(3, 3), strides=(1, 1), dilations=(1, 1), start_padding=(1, 0),
                         end_padding=(1, 0))
    np.testing.assert_array_equal(cols, [SEED_EXAMPLE_2])
    back = dmlops.fold(cols, output_sizes=(5, 5), window_sizes=(3, 3), start_padding=(1, 0), end_padding=(1, 0))
    # every pixel comes back times the number of blocks that read it
    coverage = dmlops.fold(dmlops.unfold(np.ones_like(x), (3, 3), start_padding=(1, 0), end_padding=(1, 0)),
                           (5, 5), (3, 3), start_padding=(1, 0), end_padding=(1, 0))
    np.testing.assert_array_equal(back, x * coverage)
    # rows 0 and 4 lie in 2 vertical blocks (one reaches into the padding), the others in 3
    np.testing.assert_array_equal(coverage[0, 0], [[2, 4, 6, 4, 2]] + [[3, 6, 9, 6, 3]] * 3 + [[2, 4, 6, 4, 2]])

    rng = np.random.default_rng(6)
    x6d_spatial = random_array(rng, (1, 2, 3, 2, 3, 2, 3, 2), "float32")
    vol = dmlops.unfold(x6d_spatial, window_sizes=(2,) * 6)  # input rank 8
    assert vol.shape == (1, 2 * 64, 2 * 1 * 2 * 1 * 2 * 1)
    assert_same_bits(vol, unfold_reference(x6d_spatial, (2,) * 6, (1,) * 6, (1,) * 6, (0,) * 6, (0,) * 6))
    assert isinstance(dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 2, 5)), window_sizes=(2,)), dmlops.UnfoldDesc)


def test_docstring_examples():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(dmlops.unfold):
        runner.run(test)
    assert runner.summarize(verbose=False).attempted >= 5
    assert runner.summarize(verbose=False).failed == 0


def test_matches_torch_layout_by_hand():
    # torch.nn.functional.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)) on a 1x2x3x4
    # ramp, worked out by hand from torch's documented layout: (C, kh, kw) rows, (oh, ow) columns.
    x = np.arange(24, dtype=np.int16).reshape(1, 2, 3, 4)
    y = dmlops.unfold(x, (2, 3), strides=(1, 2), dilations=(2, 1), start_padding=(1, 1), end_padding=(1, 1))
    assert y.shape == (1, 12, 3 * 2)
    # row (c=0, kh=0, kw=1): positions (oh*1 + 0*2 - 1, ow*2 + 1 - 1) -> rows -1, 0, 1; cols 0, 2
    np.testing.assert_array_equal(y[0, 1], [0, 0, 0, 2, 4, 6])
    # row (c=1, kh=1, kw=2): rows oh + 1, cols 2*ow + 1 -> (1,1) (1,3) (2,1) (2,3) (3,-) (3,-)
    np.testing.assert_array_equal(y[0, 11], [17, 19, 21, 23, 0, 0])


# ---------------------------------------------------------------------------------------------
# Random sweep: 1-6 spatial dimensions, every parameter, every dtype

def sweep_case(seed: int):
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 6
    max_size = {1: 14, 2: 8, 3: 5, 4: 4, 5: 3, 6: 3}[rank]
    max_window = {1: 5, 2: 4, 3: 3, 4: 2, 5: 2, 6: 2}[rank]
    spatial, window, strides, dilations, start, end = [], [], [], [], [], []
    for _ in range(rank):
        size, w = int(rng.integers(1, max_size + 1)), int(rng.integers(1, max_window + 1))
        dil, stride = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        a, e = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        extent = dil * (w - 1) + 1
        e = max(e, extent - size - a)  # at least one block
        for values, v in zip((spatial, window, strides, dilations, start, end), (size, w, stride, dil, a, e)):
            values.append(v)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    return rng, (n, c, *spatial), tuple(window), tuple(strides), tuple(dilations), tuple(start), tuple(end)


@pytest.mark.parametrize("seed", range(240))
def test_random_sweep_unfold_bit_exact(seed):
    rng, shape, window, strides, dilations, start, end = sweep_case(seed)
    x = random_array(rng, shape, DTYPES[seed % len(DTYPES)])
    y = dmlops.unfold(x, window, **window_kwargs(strides, dilations, start, end))
    assert_same_bits(y, unfold_reference(x, window, strides, dilations, start, end))


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8", "int64"])
@pytest.mark.parametrize("window,start,end,dilations", [
    ((3, 3), (1, 1), (1, 1), (1, 1)),      # ResNet's im2col: every tap but the centre column shifts
    ((5, 5), (2, 2), (2, 2), (1, 1)),
    ((3, 5), (0, 4), (2, 0), (1, 1)),      # all the padding on one side of each axis
    ((3, 3), (2, 2), (2, 2), (2, 2)),      # dilated rows and columns, still as wide as the input
    ((1, 7), (0, 3), (0, 3), (1, 1)),
])
@pytest.mark.parametrize("threads", [1, 3])
def test_same_padding_rows_copied_as_one_box(dtype, window, start, end, dilations, threads):
    # Stride 1 and output rows as wide as the input's: a tap's box is one copy spanning its rows,
    # then the elements between them zeroed. Odd sizes, several planes, and a single tall plane
    # that 3 threads cut into pieces of rows, reach boxes of every extent.
    rng = np.random.default_rng(sum(window) + sum(start) + threads)
    for shape in [(1, 2, 5, 9), (2, 3, 17, 23), (1, 1, 40, 7), (1, 2, 1, 12), (1, 1, 300, 56)]:
        x = random_array(rng, shape, dtype)
        with dmlops.threads(threads):
            y = dmlops.unfold(x, window, **window_kwargs((1, 1), dilations, start, end))
        assert y.shape[2] == shape[2] * shape[3]
        assert_same_bits(y, unfold_reference(x, window, (1, 1), dilations, start, end))
    kwargs = dict(window_sizes=window, dilations=dilations, start_padding=start, end_padding=end)
    assert "a box is one copy across its rows" in dmlops.UnfoldDesc(dmlops.TensorDesc(dtype, (2, 3, 17, 23)),
                                                                     **kwargs).plan().reason
    # Input rows with a longer pitch (a view into wider rows) are copied row by row, alike.
    wide = random_array(rng, (2, 3, 17, 30), dtype)[..., 3:26]
    strides = tuple(s // wide.itemsize for s in wide.strides)
    plan = dmlops.UnfoldDesc(dmlops.TensorDesc(dtype, wide.shape, strides), **kwargs).plan()
    assert "box is one copy" not in plan.reason
    with dmlops.threads(threads):
        y = dmlops.unfold(wide, window, **window_kwargs((1, 1), dilations, start, end))
    assert_same_bits(y, unfold_reference(wide, window, (1, 1), dilations, start, end))
    # A view of 20 columns in rows of 24, padded to 24 blocks wide: the box copy also reads the
    # 4 columns between the view's rows (inside its parent), and those outputs must be zeros.
    parent = random_array(rng, (1, 3, 11, 24), dtype)
    view = parent[..., 2:22]
    pad_kwargs = window_kwargs((1, 1), (1, 1), (1, 3), (1, 3))
    strides = tuple(s // view.itemsize for s in view.strides)
    plan = dmlops.UnfoldDesc(dmlops.TensorDesc(dtype, view.shape, strides), window_sizes=(3, 3),
                             start_padding=(1, 3), end_padding=(1, 3)).plan()
    assert "a box is one copy across its rows" in plan.reason
    with dmlops.threads(threads):
        y = dmlops.unfold(view, (3, 3), **pad_kwargs)
    assert y.shape[2] == 11 * 24
    assert_same_bits(y, unfold_reference(view, (3, 3), (1, 1), (1, 1), (1, 3), (1, 3)))


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64", "bool"])
@pytest.mark.parametrize("threads", [1, 3])
def test_stride_two_windows_three_wide_write_their_three_taps_at_once(dtype, threads):
    # A window 3 wide with stride 2 along the rows, padded by one at their start (ResNet's
    # stride-2 3x3): with the byte permute, a task writes a row of the window's three taps from
    # one pass over the input rows. Rows too short for it (under 64 output bytes), other row
    # windows, strides, paddings and dilations, end padding that outputs read past the row,
    # input rows of a longer pitch, a tall plane that 3 threads cut into pieces, and layouts that
    # leave it (a column step of 2, a dilated or unpadded window) must all match the reference.
    rng = np.random.default_rng(threads + len(dtype))
    size = np.dtype(dtype).itemsize
    cases = [((2, 3, 7, w), (3, 3), (2, 2), (1, 1), (1, e)) for w in (13, 64 // size * 2 - 1, 64 // size * 2 + 3, 150)
             for e in (0, 1, 2, 5)]
    cases += [((1, 2, 9, 140), window, strides, start, end) for window, strides, start, end in [
        ((1, 3), (1, 2), (0, 1), (0, 1)), ((2, 3), (3, 2), (1, 1), (2, 0)), ((5, 3), (1, 2), (2, 1), (2, 2)),
        ((3, 3), (2, 2), (0, 1), (0, 9)), ((3, 3), (2, 2), (1, 0), (1, 1)), ((3, 3), (2, 2), (1, 2), (1, 1))]]
    cases += [((1, 1, 301, 140), (3, 3), (2, 2), (1, 1), (1, 1))]
    # Three spatial axes: the rows of the blocks of the first two, padding along each.
    cases += [((2, 2, 4, 5, 140), (2, 3, 3), (1, 2, 2), (0, 1, 1), (1, 1, 2)),
              ((1, 2, 5, 3, 131), (3, 1, 3), (2, 1, 2), (1, 0, 1), (1, 2, 0))]
    for shape, window, strides, start, end in cases:
        x = random_array(rng, shape, dtype)
        for view in (x, random_array(rng, shape[:-1] + (shape[-1] + 5,), dtype)[..., 2:-3]):
            ones = (1,) * len(window)
            with dmlops.threads(threads):
                y = dmlops.unfold(view, window, **window_kwargs(strides, ones, start, end))
            assert_same_bits(y, unfold_reference(view, window, strides, ones, start, end))
    dilated = random_array(rng, (1, 2, 9, 140), dtype)
    for view, dilations in [(dilated, (1, 2)), (dilated, (2, 1)), (dilated[..., ::2], (1, 1))]:
        with dmlops.threads(threads):
            y = dmlops.unfold(view, (3, 3), **window_kwargs((2, 2), dilations, (1, 1), (1, 1)))
        assert_same_bits(y, unfold_reference(view, (3, 3), (2, 2), dilations, (1, 1), (1, 1)))
    # The plan names the path exactly where the byte permute runs (AVX512_VBMI).
    kwargs = dict(window_sizes=(3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1))
    desc_dtype = "uint8" if dtype == "bool" else dtype  # (a bool array unfolds as uint8)
    plan = dmlops.UnfoldDesc(dmlops.TensorDesc(desc_dtype, (1, 2, 9, 140)), **kwargs).plan()
    vbmi = "(avx512 vbmi)" in dmlops.UnfoldDesc(dmlops.TensorDesc(desc_dtype, (1, 2, 9, 140)), window_sizes=(2, 2),
                                                strides=(2, 2)).plan().reason
    # Tap triples only where AVX-512 runs in halves (Zen 4; the 16-core Xeon ran a row at a time faster).
    triples = vbmi and dmlops._core.cpu_features()["avx512_half_rate"]
    assert (plan.tiles["tap_triples"] == 1) == triples, plan
    assert ("the three taps of each row of the window's last axis" in plan.reason) == triples, plan
    short = dmlops.UnfoldDesc(dmlops.TensorDesc(desc_dtype, (1, 2, 9, 64 // size)), **kwargs).plan()
    assert short.tiles["tap_triples"] == 0, short


@pytest.mark.parametrize("seed", range(240))
def test_random_sweep_fold(seed):
    rng, shape, window, strides, dilations, start, end = sweep_case(seed)
    n, c, *spatial = shape
    blocks = window_blocks(spatial, window, strides, dilations, start, end)
    cols = random_summands(rng, (n, c * int(np.prod(window)), int(np.prod(blocks))), FOLD_DTYPES[seed % 11])
    y = dmlops.fold(cols, spatial, window, **window_kwargs(strides, dilations, start, end))
    # same terms, same order (increasing k), same precision: equal bit for bit
    assert_same_bits(y, fold_reference(cols, spatial, window, strides, dilations, start, end))


@pytest.mark.parametrize("seed", range(60))
def test_random_strided_views_and_out(seed):
    """Inputs with negative, zero and non-contiguous strides (read in place), and strided out=."""
    rng, shape, window, strides, dilations, start, end = sweep_case(seed + 1000)
    kwargs = window_kwargs(strides, dilations, start, end)
    dtype = DTYPES[seed % len(DTYPES)]

    def strided_view(values: np.ndarray) -> np.ndarray:
        base = np.zeros(tuple(s * 2 + 1 for s in values.shape), dtype=values.dtype)
        steps = [int(rng.choice([-2, -1, 1, 2])) for _ in values.shape]
        view = base[tuple(slice(None, None, s) for s in steps)][tuple(slice(0, s) for s in values.shape)]
        view[...] = values
        return view

    def strided_out(shape_, dtype_) -> np.ndarray:
        big = np.full(tuple(s * 2 for s in shape_), 7, dtype=dtype_)
        return np.flip(big[tuple(slice(None, None, 2) for _ in shape_)], axis=int(rng.integers(0, len(shape_))))

    x = strided_view(random_array(rng, shape, dtype))
    if rng.random() < 0.3:  # a broadcast (zero-stride) axis
        axis = int(rng.integers(0, x.ndim))
        x = np.broadcast_to(x.take([0], axis=axis), x.shape)
    if rng.random() < 0.5:  # transposed channels-last-style memory order
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
    expected = unfold_reference(x, window, strides, dilations, start, end)
    out = strided_out(expected.shape, x.dtype)
    assert dmlops.unfold(x, window, out=out, **kwargs) is out
    assert_same_bits(out, expected)

    if dtype == "bool":
        return
    cols = strided_view(random_summands(rng, expected.shape, dtype))
    folded = fold_reference(cols, shape[2:], window, strides, dilations, start, end)
    out = strided_out(folded.shape, cols.dtype)
    assert dmlops.fold(cols, shape[2:], window, out=out, **kwargs) is out
    assert_same_bits(out, folded)
    transposed = np.moveaxis(np.ascontiguousarray(np.moveaxis(cols, 2, 0)), 0, 2)  # column-major-ish
    assert_same_bits(dmlops.fold(transposed, shape[2:], window, **kwargs), folded)


@given(
    spatial=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    data=st.data(),
)
def test_property_unfold_and_fold_match_reference(spatial, data):
    rank = len(spatial)
    ints = lambda lo, hi: data.draw(st.lists(st.integers(lo, hi), min_size=rank, max_size=rank))
    window, strides, dilations, start, end = ints(1, 4), ints(1, 3), ints(1, 3), ints(0, 4), ints(0, 4)
    end = [max(e, d * (w - 1) + 1 - s - a) for e, d, w, s, a in zip(end, dilations, window, spatial, start)]
    kwargs = window_kwargs(strides, dilations, start, end)
    x = np.arange(2 * np.prod(spatial), dtype=np.int32).reshape(1, 2, *spatial)
    cols = dmlops.unfold(x, window, **kwargs)
    np.testing.assert_array_equal(cols, unfold_reference(x, window, strides, dilations, start, end))
    np.testing.assert_array_equal(dmlops.fold(cols, spatial, window, **kwargs),
                                  fold_reference(cols, spatial, window, strides, dilations, start, end))


# ---------------------------------------------------------------------------------------------
# Fold is unfold's adjoint; its arithmetic per dtype

@pytest.mark.parametrize("seed", range(30))
def test_fold_is_the_adjoint_of_unfold(seed):
    # <unfold(x), c> == <x, fold(c)>: with small integers in float64 both sides are exact
    rng, shape, window, strides, dilations, start, end = sweep_case(seed + 2000)
    kwargs = window_kwargs(strides, dilations, start, end)
    x = rng.integers(-50, 50, size=shape).astype(np.float64)
    cols_shape = dmlops.UnfoldDesc(dmlops.TensorDesc("float64", shape), window_sizes=window, **kwargs).output_shape
    c = rng.integers(-50, 50, size=cols_shape).astype(np.float64)
    assert np.sum(dmlops.unfold(x, window, **kwargs) * c) == np.sum(x * dmlops.fold(c, shape[2:], window, **kwargs))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_float_fold_is_close_to_a_float64_sum(dtype):
    rng = np.random.default_rng(11)
    window, spatial = (3, 5, 2), (7, 9, 4)  # up to 30 overlapping terms per element
    blocks = window_blocks(spatial, window, (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0))
    cols = rng.standard_normal((2, 3 * 30, int(np.prod(blocks)))).astype(dtype)
    y = dmlops.fold(cols, spatial, window)
    exact = fold_reference(cols.astype(np.float64), spatial, window, (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0))
    terms = fold_reference(np.ones_like(cols, dtype=np.float64), spatial, window, (1, 1, 1), (1, 1, 1), (0, 0, 0),
                           (0, 0, 0))
    magnitude = fold_reference(np.abs(cols.astype(np.float64)), spatial, window, (1, 1, 1), (1, 1, 1), (0, 0, 0),
                               (0, 0, 0))
    # float32 summation error <= (terms - 1) * eps32 * sum|x|, then one rounding to the dtype
    bound = terms * np.finfo(np.float32).eps * magnitude + np.abs(exact) * np.finfo(dtype).eps / 2
    assert np.all(np.abs(y.astype(np.float64) - exact) <= bound)
    if dtype == "float16":
        # float16 sums are float32 sums rounded once, not float16 sums
        assert_same_bits(y, fold_reference(cols.astype(np.float32), spatial, window, (1, 1, 1), (1, 1, 1), (0, 0, 0),
                                           (0, 0, 0)).astype(np.float16))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint32", "int64", "uint64"])
def test_integer_fold_wraps_like_numpy(dtype):
    info = np.iinfo(dtype)
    cols = np.full((1, 9, 9), info.max, dtype=dtype)  # 3x3 window, stride 1: centre gets 9 terms
    y = dmlops.fold(cols, (5, 5), (3, 3))
    with np.errstate(over="ignore"):
        expected = np.zeros((), dtype=dtype)
        for _ in range(9):
            expected = np.array(expected + np.array(info.max, dtype=dtype), dtype=dtype)
    assert y.dtype == np.dtype(dtype)
    assert y[0, 0, 2, 2] == expected
    assert y[0, 0, 0, 0] == info.max


def test_fold_drops_padding_and_leaves_uncovered_zero():
    # stride 3 > window 2: every third position is read by no block; padding entries vanish
    cols = np.arange(1, 9, dtype=np.int32).reshape(1, 2, 4)
    y = dmlops.fold(cols, (9,), (2,), strides=(3,), start_padding=(1,), end_padding=(1,))
    # blocks start at -1, 2, 5, 8: tap 0 reads -1 (padding), 2, 5, 8; tap 1 reads 0, 3, 6, 9 (padding)
    np.testing.assert_array_equal(y[0, 0], [5, 0, 2, 6, 0, 3, 7, 0, 4])


# Outputs larger than the last-level cache go out with streaming stores, through a buffer in L1
# or, where the runs are contiguous in the input and the CPU has AVX-512BW, put together in
# registers (run again without AVX-512: the buffer; an input strided along its last axis takes
# the buffer too), and fold prefetches inputs that large; a 1 MiB "L3" makes these small ones
# take those paths: 1-D, 2-D and 3-D windows with and without padding, strides and dilations, 1-
# to 8-byte elements, outputs that start at every alignment, a strided `out` (not streamed),
# thread counts that cut rows into pieces.
STREAMING_CHECK = """
import os, sys
import numpy as np, dmlops
from dmlops import _core
sys.path.insert(0, sys.argv[1])
from reference import fold_reference, unfold_reference
assert _core.cache_sizes()["l3"] == 1 << 20
rng = np.random.default_rng(7)
cases = [((2, 3, 20, 21, 22), "float32", (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 0, 2), (0, 1, 1)),
         ((1, 16, 140, 150), "float16", (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
         ((2, 5, 40000), "uint8", (5,), (1,), (2,), (3,), (1,)),
         ((1, 8, 200, 100), "float64", (2, 2), (1, 3), (1, 1), (0, 2), (1, 0)),
         # no padding along the last axis: whole rows go into the buffer as blocks
         ((1, 4, 12, 30, 34), "float32", (3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0)),
         ((2, 5, 9, 41, 37), "int16", (2, 3, 2), (1, 2, 1), (2, 1, 1), (1, 0, 0), (0, 1, 0)),
         ((1, 20, 120, 90), "uint8", (2, 3), (1, 1), (1, 1), (0, 0), (0, 0)),
         ((1, 6, 10, 40, 64), "float16", (3, 3, 3), (1, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
         # windows 3 wide with stride 2, padded by one along the last axis: taps three at once, staged
         # in whole blocks of axis 0 (1x16x140x150 above too), unless such a block is over 16 KiB
         ((2, 8, 120, 300), "uint8", (3, 3), (2, 2), (1, 1), (1, 1), (1, 3)),
         ((1, 4, 6, 24, 40), "float64", (2, 3, 3), (1, 1, 2), (1, 1, 1), (0, 1, 1), (1, 1, 0)),
         ((1, 2, 3, 200, 300), "float32", (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1))]
# With the byte permute (AVX512_VBMI, which names itself in a stride-2 plan) where AVX-512 runs in
# halves (Zen 4), the first three such cases take the tap triples; the last one's blocks of axis 0
# are 60 KB.
vbmi = "(avx512 vbmi)" in dmlops.UnfoldDesc(dmlops.TensorDesc("float16", (1, 1, 9)), window_sizes=(2,),
                                            strides=(2,)).plan().reason
vbmi = vbmi and _core.cpu_features()["avx512_half_rate"]
triples = [dmlops.UnfoldDesc(dmlops.TensorDesc(dtype, shape), window_sizes=window, strides=strides, dilations=dilations,
                             start_padding=start, end_padding=end).plan().tiles["tap_triples"]
           for shape, dtype, window, strides, dilations, start, end in cases[-4:]]
assert triples == ([1, 1, 1, 0] if vbmi else [0, 0, 0, 0]), triples
bw = _core.cpu_features()["avx512bw"] and os.environ.get("DMLOPS_DISABLE_AVX512") != "1"
triples = [0] * (len(cases) - len(triples)) + triples
for (shape, dtype, window, strides, dilations, start, end), triple in zip(cases, triples):
    x = rng.integers(0, 200, shape).astype(dtype)
    kwargs = dict(strides=strides, dilations=dilations, start_padding=start, end_padding=end)
    expected = unfold_reference(x, window, strides, dilations, start, end)
    assert expected.nbytes > 1 << 20
    desc = dmlops.UnfoldDesc(dmlops.TensorDesc(dtype, shape), window_sizes=window, **kwargs)
    assert desc.plan().tiles["streamed"] == 1
    assert desc.plan().tiles["assembled"] == (bw and strides[-1] == 1 and not triple)
    for threads in (1, 2, 5):
        with dmlops.threads(threads):
            assert np.array_equal(dmlops.unfold(x, window, **kwargs).view(np.uint8), expected.view(np.uint8))
            for offset in (1, 3, 8):  # elements of the output view past a 64-byte boundary
                buffer = np.full(expected.size + 16, 7, dtype)
                out = buffer[offset:offset + expected.size].reshape(expected.shape)
                dmlops.unfold(x, window, out=out, **kwargs)
                assert np.array_equal(out.view(np.uint8), expected.view(np.uint8))
                assert (buffer[:offset] == 7).all() and (buffer[offset + expected.size:] == 7).all()
            strided = np.zeros(expected.shape[:2] + (2 * expected.shape[2],), dtype)[..., ::2]
            dmlops.unfold(x, window, out=strided, **kwargs)
            assert np.array_equal(np.ascontiguousarray(strided).view(np.uint8), expected.view(np.uint8))
            spread = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)
            spread[..., ::2] = x
            assert np.array_equal(dmlops.unfold(spread[..., ::2], window, **kwargs).view(np.uint8),
                                  expected.view(np.uint8))
            # fold reads such inputs from memory, prefetched ahead: the same sums
            fold_desc = dmlops.FoldDesc(dmlops.TensorDesc(dtype, expected.shape), dmlops.TensorDesc(dtype, shape),
                                        window_sizes=window, **kwargs)
            assert fold_desc.plan().tiles["prefetched"] == (dtype != "float16")
            folded = dmlops.fold(expected, shape[2:], window, **kwargs)
            assert np.array_equal(folded.view(np.uint8), fold_reference(expected, shape[2:], window, strides, dilations,
                                                                        start, end).view(np.uint8))
print("ok")
"""


@pytest.mark.parametrize("switch", [None, "DMLOPS_DISABLE_AVX512"])
def test_outputs_larger_than_the_cache_stream_bit_exactly(switch):
    env = {**os.environ, "DMLOPS_CACHE_SIZES": "32K,256K,1M"}
    if switch:
        env[switch] = "1"
    result = subprocess.run([sys.executable, "-c", STREAMING_CHECK, os.path.dirname(os.path.abspath(__file__))],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_nan_payloads_and_negative_zero_unfold_bit_exactly():
    payloads = np.array([0x7FC00123, 0xFF800001, 0x80000000, 0x7F800001], dtype=np.uint32).view(np.float32)
    y = dmlops.unfold(payloads.reshape(1, 1, 4), (2,), start_padding=(1,), end_padding=(1,))
    assert_same_bits(y[0, 0, 1:], payloads)
    assert_same_bits(y[0, 1, :4], payloads)
    assert_same_bits(y[0, [0, 1], [0, 4]], np.zeros(2, np.float32))  # padding is +0.0
    halves = np.array([0x7E01, 0xFC01, 0x8000], dtype=np.uint16).view(np.float16).reshape(1, 1, 3)
    assert_same_bits(dmlops.unfold(halves, (1,))[0, 0], halves[0, 0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_keeps_its_dtype(dtype):
    x = random_array(np.random.default_rng(1), (2, 3, 5, 4), dtype)
    y = dmlops.unfold(x, (2, 3), strides=(2, 1), start_padding=(1, 0), end_padding=(0, 2))
    assert y.dtype == x.dtype
    assert_same_bits(y, unfold_reference(x, (2, 3), (2, 1), (1, 1), (1, 0), (0, 2)))
    if dtype != "bool":
        cols = random_summands(np.random.default_rng(2), y.shape, dtype)
        z = dmlops.fold(cols, (5, 4), (2, 3), strides=(2, 1), start_padding=(1, 0), end_padding=(0, 2))
        assert z.dtype == x.dtype
        assert_same_bits(z, fold_reference(cols, (5, 4), (2, 3), (2, 1), (1, 1), (1, 0), (0, 2)))


def test_bool_unfold_stays_bool_and_fold_refuses_it():
    mask = np.array([[[True, False, True]]])
    y = dmlops.unfold(mask, (2,), end_padding=(1,))
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, [[[True, False, True], [False, True, False]]])
    with pytest.raises(TypeError, match="Fold: input has dtype bool.*astype"):
        dmlops.fold(y, (3,), (2,), end_padding=(1,))
    d = dmlops.FoldDesc(dmlops.TensorDesc("uint8", (1, 2, 3)), dmlops.TensorDesc("uint8", (1, 1, 3)),
                        window_sizes=(2,), end_padding=(1,))
    with pytest.raises(TypeError, match="bool"):
        d(y)
    np.testing.assert_array_equal(d(y.view(np.uint8)), [[[1, 0, 2]]])


# ---------------------------------------------------------------------------------------------
# threads

@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_thread_counts_give_identical_results(threads):
    rng = np.random.default_rng(threads)
    x = random_array(rng, (2, 5, 31, 29), "float32")
    kwargs = window_kwargs((2, 1), (1, 2), (1, 3), (2, 0))
    expected = unfold_reference(x, (3, 3), (2, 1), (1, 2), (1, 3), (2, 0))
    cols = random_summands(rng, expected.shape, "float32")
    folded = fold_reference(cols, (31, 29), (3, 3), (2, 1), (1, 2), (1, 3), (2, 0))
    dmlops.set_num_threads(threads)
    assert dmlops.get_num_threads() == threads
    assert_same_bits(dmlops.unfold(x, (3, 3), **kwargs), expected)
    assert_same_bits(dmlops.fold(cols, (31, 29), (3, 3), **kwargs), folded)
    # one plane, one long row: unfold splits rows by blocks, fold splits the plane into slabs
    signal = random_array(rng, (1, 1, 200_003), "int16")
    one_d = window_kwargs((3,), (2,), (5,), (4,))
    cols = dmlops.unfold(signal, (4,), **one_d)
    assert_same_bits(cols, unfold_reference(signal, (4,), (3,), (2,), (5,), (4,)))
    assert_same_bits(dmlops.fold(cols, (200_003,), (4,), **one_d),
                     fold_reference(cols, (200_003,), (4,), (3,), (2,), (5,), (4,)))
    big = random_summands(rng, (1, 9, 64 * 300), "float16")  # a tall plane folded in slabs
    assert_same_bits(dmlops.fold(big, (66, 302), (3, 3)), fold_reference(big, (66, 302), (3, 3), (1, 1), (1, 1),
                                                                         (0, 0), (0, 0)))


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_rows_of_every_batch_channel_and_tap_in_pieces(threads):
    # Each task finds its row (batch, channel, tap) and piece from the first task's and counts on:
    # several batches and channels, rows cut into pieces (few rows for the threads), and taps
    # whose boxes are empty, partial or whole, all land where the reference puts them.
    rng = np.random.default_rng(threads + 40)
    for shape, window, kwargs in [
        ((3, 2, 9, 40), (3, 2), window_kwargs((2, 3), (1, 2), (2, 1), (0, 3))),
        ((2, 1, 64, 6), (5, 3), window_kwargs((1, 1), (1, 1), (4, 1), (4, 1))),   # taps with no input
        ((4, 3, 7, 11), (2, 2), window_kwargs((3, 2), (2, 3), (0, 0), (1, 0))),
        ((1, 2, 30, 30), (3, 3), window_kwargs((2, 2), (1, 1), (1, 1), (1, 1))),  # stride-2 narrowing
    ]:
        x = random_array(rng, shape, "float16")
        with dmlops.threads(threads):
            y = dmlops.unfold(x, window, **kwargs)
        assert_same_bits(y, unfold_reference(x, window, *(kwargs[k] for k in (
            "strides", "dilations", "start_padding", "end_padding"))))


@pytest.mark.parametrize("threads", [1, 3])
def test_windows_wider_than_the_tap_table(threads):
    # A 2-D unfold keeps each tap's valid outputs per axis in a table of at most 1024 taps an axis;
    # a wider window (1030 taps on the last axis) computes them per row: same result.
    rng = np.random.default_rng(threads)
    x = random_array(rng, (1, 2, 3, 1040), "int16")
    kwargs = window_kwargs((1, 4), (1, 1), (1, 3), (0, 2))
    with dmlops.threads(threads):
        y = dmlops.unfold(x, (2, 1030), **kwargs)
    assert y.shape == (1, 2 * 2 * 1030, 3 * 4)
    assert_same_bits(y, unfold_reference(x, (2, 1030), (1, 4), (1, 1), (1, 3), (0, 2)))


def test_concurrent_python_threads():
    rng = np.random.default_rng(3)
    inputs = [random_array(rng, (2, 8, 20, 20), "float64") for _ in range(6)]
    expected = [unfold_reference(x, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)) for x in inputs]
    results: dict = {}

    def work(i):
        for _ in range(5):
            results[i] = dmlops.unfold(inputs[i], (3, 3), start_padding=(1, 1), end_padding=(1, 1))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(6):
        assert_same_bits(results[i], expected[i])


# ---------------------------------------------------------------------------------------------
# descriptors

def make_unfold_desc(**overrides):
    fields = dict(input=dmlops.TensorDesc("int16", (2, 3, 6, 5)), window_sizes=(2, 3), strides=(2, 1),
                  dilations=(1, 2), start_padding=(1, 0), end_padding=(0, 2))
    fields.update(overrides)
    return dmlops.UnfoldDesc(**fields)


def make_fold_desc(**overrides):
    fields = dict(input=dmlops.TensorDesc("float16", (2, 18, 9)), output=dmlops.TensorDesc("float16", (2, 3, 6, 5)),
                  window_sizes=(2, 3), strides=(2, 1), dilations=(1, 2), start_padding=(1, 0), end_padding=(0, 2))
    fields.update(overrides)
    return dmlops.FoldDesc(**fields)


def test_descriptor_fields_and_defaults():
    d = make_unfold_desc()
    assert d.input == dmlops.TensorDesc("int16", (2, 3, 6, 5))
    assert d.output == dmlops.TensorDesc("int16", (2, 18, 9)) and d.output_shape == (2, 18, 9)
    assert (d.window_sizes, d.strides, d.dilations) == ((2, 3), (2, 1), (1, 2))
    assert (d.start_padding, d.end_padding) == ((1, 0), (0, 2))
    with pytest.raises(AttributeError):
        d.strides = (1, 1)
    plain = dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 1, 4, 4, 4)), window_sizes=(2, 2, 2))
    assert plain.strides == plain.dilations == (1, 1, 1) and plain.start_padding == plain.end_padding == (0, 0, 0)
    f = make_fold_desc()
    assert f.output_shape == (2, 3, 6, 5) and f.input.sizes == (2, 18, 9)


def test_descriptor_to_dict_is_dxdispatch_json():
    assert make_unfold_desc().to_dict() == {
        "InputTensor": {"DataType": "INT16", "Sizes": [2, 3, 6, 5]},
        "OutputTensor": {"DataType": "INT16", "Sizes": [2, 18, 9]},
        "DimensionCount": 2,
        "WindowSizes": [2, 3],
        "Strides": [2, 1],
        "Dilations": [1, 2],
        "StartPadding": [1, 0],
        "EndPadding": [0, 2],
    }
    assert list(make_fold_desc().to_dict()) == ["InputTensor", "OutputTensor", "DimensionCount", "WindowSizes",
                                                "Strides", "Dilations", "StartPadding", "EndPadding"]


@pytest.mark.parametrize("desc", [
    make_unfold_desc(),
    make_fold_desc(),
    make_unfold_desc(input=dmlops.TensorDesc("uint64", (2, 3, 6, 5), strides=(90, 1, 15, 3))),
    dmlops.UnfoldDesc(dmlops.TensorDesc("float64", (1, 1, 2, 2, 2, 2, 2, 2)), window_sizes=(1,) * 6),
])
def test_descriptor_round_trips(desc):
    assert type(desc).from_dict(desc.to_dict()) == desc
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert hash(pickle.loads(pickle.dumps(desc))) == hash(desc)
    assert eval(repr(desc), {"UnfoldDesc": dmlops.UnfoldDesc, "FoldDesc": dmlops.FoldDesc,
                             "TensorDesc": dmlops.TensorDesc}) == desc


def test_descriptor_equality_compares_every_field():
    d = make_unfold_desc()
    assert d == make_unfold_desc()
    for change in [dict(window_sizes=(2, 2)), dict(strides=(1, 1)), dict(dilations=(1, 1)),
                   dict(start_padding=(0, 0)), dict(end_padding=(0, 1)),
                   dict(input=dmlops.TensorDesc("int16", (2, 3, 7, 5)))]:
        assert d != make_unfold_desc(**change), change
    f = make_fold_desc()
    assert f == make_fold_desc() and f != d
    assert f != make_fold_desc(output=dmlops.TensorDesc("float16", (2, 3, 5, 5)))  # same block count


def test_descriptors_execute_on_arrays():
    rng = np.random.default_rng(4)
    d, f = make_unfold_desc(), make_fold_desc()
    x = random_array(rng, (2, 3, 6, 5), "int16")
    assert_same_bits(d(x), unfold_reference(x, (2, 3), (2, 1), (1, 2), (1, 0), (0, 2)))
    out = np.empty((2, 18, 9), np.int16)
    assert d(x, out=out) is out
    cols = random_summands(rng, (2, 18, 9), "float16")
    assert_same_bits(f(cols), fold_reference(cols, (6, 5), (2, 3), (2, 1), (1, 2), (1, 0), (0, 2)))
    with pytest.raises(TypeError, match="dtype int32 but the descriptor says int16"):
        d(x.astype(np.int32))
    with pytest.raises(ValueError, match=r"shape \(2, 3, 5, 6\)"):
        d(np.zeros((2, 3, 5, 6), np.int16))
    with pytest.raises(TypeError, match="dtype float64 but the descriptor says float16"):
        f(cols.tolist())


@pytest.mark.parametrize("change,message", [
    ({"Bogus": 1}, "unknown field"),
    ({"DimensionCount": 3}, "DimensionCount"),
    ({"Strides": [1]}, "Strides has 1 entries but DimensionCount is 2"),
    ({"OutputTensor": {"DataType": "INT16", "Sizes": [2, 18, 8]}}, "output has sizes"),
    ({"WindowSizes": [0, 3]}, r"window_sizes\[0\] is 0"),
])
def test_descriptor_from_dict_rejects(change, message):
    d = make_unfold_desc().to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=message):
        dmlops.UnfoldDesc.from_dict(d)


def test_fold_from_dict_needs_the_output():
    d = make_fold_desc().to_dict()
    del d["OutputTensor"]
    with pytest.raises(ValueError, match="'OutputTensor' is missing"):
        dmlops.FoldDesc.from_dict(d)
    d = make_unfold_desc().to_dict()
    del d["OutputTensor"]
    assert dmlops.UnfoldDesc.from_dict(d) == make_unfold_desc()  # unfold infers it


# ---------------------------------------------------------------------------------------------
# bad input: a clear exception, nothing written

X = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
C9 = np.zeros((2, 27, 9), np.float32)  # X unfolded by 3x3


@pytest.mark.parametrize("call,error,message", [
    # entries per array != spatial rank
    (lambda: dmlops.unfold(X, (3,)), ValueError, "Unfold: window_sizes has 1 entries but there are 2 spatial dim"),
    (lambda: dmlops.unfold(X, (3, 3), strides=(1,)), ValueError, "Unfold: strides has 1 entries but there are 2"),
    (lambda: dmlops.unfold(X, (3, 3), strides=()), ValueError, "strides has 0 entries"),
    (lambda: dmlops.unfold(X, (3, 3), dilations=(1, 1, 1)), ValueError, "dilations has 3 entries"),
    (lambda: dmlops.unfold(X, (3, 3), start_padding=(1,)), ValueError, "start_padding has 1 entries"),
    (lambda: dmlops.unfold(X, (3, 3), end_padding=(1, 1, 1)), ValueError, "end_padding has 3 entries"),
    (lambda: dmlops.fold(C9, (5, 5), (3, 3, 1)), ValueError, "Fold: window_sizes has 3 entries but there are 2"),
    (lambda: dmlops.fold(C9, (5, 5), (3, 3), dilations=(1,)), ValueError, "Fold: dilations has 1 entries"),
    # zero window / stride / dilation, negative padding
    (lambda: dmlops.unfold(X, (3, 0)), ValueError, r"Unfold: window_sizes\[1\] is 0; it must be >= 1"),
    (lambda: dmlops.unfold(X, (3, 3), strides=(0, 1)), ValueError, r"Unfold: strides\[0\] is 0; it must be >= 1"),
    (lambda: dmlops.unfold(X, (3, 3), dilations=(1, 0)), ValueError, r"dilations\[1\] is 0; it must be >= 1"),
    (lambda: dmlops.unfold(X, (3, 3), start_padding=(0, -1)), ValueError, r"start_padding\[1\] is -1"),
    (lambda: dmlops.fold(C9, (5, 5), (3, 3), strides=(1, 0)), ValueError, r"Fold: strides\[1\] is 0"),
    (lambda: dmlops.unfold(X, (3, 2**50)), ValueError, "too large"),
    # no block fits
    (lambda: dmlops.unfold(X, (6, 3)), ValueError, "Unfold: on spatial dimension 0 the window extent 6"),
    (lambda: dmlops.unfold(X, (3, 3), dilations=(1, 3)), ValueError, "window extent 7 .* larger than the padded"),
    (lambda: dmlops.fold(C9, (2, 5), (3, 3)), ValueError, "Fold: on spatial dimension 0 the window extent 3"),
    # fold rows not divisible by prod(window), block count mismatch, channels
    (lambda: dmlops.fold(np.zeros((2, 10, 9), np.float32), (5, 5), (3, 3)), ValueError,
     r"Fold: input sizes\[1\] is 10, which is not divisible by prod\(window_sizes\) = 9"),
    (lambda: dmlops.fold(np.zeros((2, 27, 8), np.float32), (5, 5), (3, 3)), ValueError,
     r"Fold: input sizes\[2\] is 8 but the window slides to 9 blocks: \(3, 3\) per spatial dimension"),
    (lambda: dmlops.fold(C9, (5, 6), (3, 3)), ValueError, "input sizes.2. is 9 but the window slides to 12"),
    # ranks out of range
    (lambda: dmlops.unfold(np.zeros((2, 3), np.float32), (1,)), ValueError,
     "Unfold: input has 2 dimensions; it must have 3 to 8"),
    (lambda: dmlops.unfold(np.zeros((1,) * 9, np.float32), (1,) * 7), ValueError, "9 dimensions"),
    (lambda: dmlops.fold(np.zeros((2, 9), np.float32), (5,), (3,)), ValueError,
     "Fold: input has 2 dimensions; it must have 3"),
    (lambda: dmlops.fold(np.zeros((2, 9, 3, 1), np.float32), (5,), (3,)), ValueError, "Fold: input has 4 dim"),
    (lambda: dmlops.fold(C9, (), ()), ValueError, "Fold: output_sizes has 0 entries; folds have 1 to 6"),
    (lambda: dmlops.fold(np.zeros((1, 1, 1), np.float32), (1,) * 7, (1,) * 7), ValueError,
     "output_sizes has 7 entries"),
    (lambda: dmlops.fold(C9, (5, 0), (3, 3)), ValueError, r"Fold: output sizes\[3\] is 0"),
    # argument types
    (lambda: dmlops.unfold(X, 3.0), TypeError, "Unfold: window_sizes must be a sequence of integers, not float"),
    (lambda: dmlops.unfold(X, (3, 3.0)), TypeError, "window_sizes must contain integers, got 3.0"),
    (lambda: dmlops.unfold(X, (3, 3), strides=(1, True)), TypeError, "strides must contain integers, got True"),
    (lambda: dmlops.fold(C9, 5.0, (3, 3)), TypeError, "Fold: output_sizes must be a sequence of integers"),
    (lambda: dmlops.fold(C9, 5, 3), TypeError, "Fold: output_sizes and window_sizes are both ints"),
    (lambda: dmlops.unfold(None, (3, 3)), TypeError, "Unfold: input must be array_like, not None"),
    (lambda: dmlops.unfold(X.astype(complex), (3, 3)), TypeError, "complex128"),
    (lambda: dmlops.fold(C9.astype(">f4"), (5, 5), (3, 3)), TypeError, "byte order"),
    (lambda: dmlops.unfold(np.zeros((1, 1, 0)), (1,)), ValueError, r"sizes\[2\] is 0"),
    # out=
    (lambda: dmlops.unfold(X, (3, 3), out=np.zeros((2, 27, 9), np.float64)), TypeError, "out has dtype float64"),
    (lambda: dmlops.unfold(X, (3, 3), out=np.zeros((2, 27, 8), np.float32)), ValueError, r"out has shape \(2, 27, 8\)"),
    (lambda: dmlops.fold(C9, (5, 5), (3, 3), out=np.zeros((2, 3, 5, 5), np.int32)), TypeError, "out has dtype int32"),
    (lambda: dmlops.fold(C9, (5, 5), (3, 3), out=[0]), TypeError, "out must be an array to write in place"),
    # descriptors
    (lambda: dmlops.UnfoldDesc((2, 3, 5, 5), window_sizes=(3, 3)), TypeError, "Unfold: input must be a dmlops.Tensor"),
    (lambda: dmlops.FoldDesc(dmlops.TensorDesc("float32", (2, 27, 9)), (2, 3, 5, 5), window_sizes=(3, 3)), TypeError,
     "Fold: output must be a dmlops.TensorDesc"),
    (lambda: dmlops.FoldDesc(dmlops.TensorDesc("float32", (2, 27, 9)), dmlops.TensorDesc("float16", (2, 3, 5, 5)),
                             window_sizes=(3, 3)), TypeError, "Fold: output has dtype float16 but the input is float32"),
    (lambda: dmlops.FoldDesc(dmlops.TensorDesc("float32", (2, 27, 9)), dmlops.TensorDesc("float32", (1, 3, 5, 5)),
                             window_sizes=(3, 3)), ValueError, r"Fold: output sizes\[0\] \(batch\) is 1"),
    (lambda: dmlops.FoldDesc(dmlops.TensorDesc("float32", (2, 27, 9)), dmlops.TensorDesc("float32", (2, 2, 5, 5)),
                             window_sizes=(3, 3)), ValueError,
     r"Fold: output sizes\[1\] \(channels\) is 2 but input sizes\[1\] / prod\(window_sizes\) = 27 / 9 = 3"),
    (lambda: dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (2, 3, 5, 5)), window_sizes=(3, 3),
                               output=dmlops.TensorDesc("int8", (2, 27, 9))), TypeError, "Unfold: output has dtype int8"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_huge_geometry_is_rejected_not_overflowed():
    with pytest.raises(ValueError, match="more than 2\\^62 bytes"):  # 2^64 bytes: the input itself
        dmlops.TensorDesc("float32", (1, 2**40, 2**20, 2**20))
    desc = dmlops.TensorDesc("float32", (1, 2**51, 4, 4))  # fits; its columns would not
    with pytest.raises(ValueError, match="beyond 2\\^62"):
        dmlops.UnfoldDesc(desc, window_sizes=(2**6, 2**6), start_padding=(60, 60), end_padding=(0, 0))


def test_rejected_out_is_untouched():
    sentinel = np.full((2, 27, 9), -123.0, np.float32)
    readonly = sentinel.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dmlops.unfold(X, (3, 3), out=readonly)
    out = sentinel.copy()
    with pytest.raises(ValueError, match="strides has 1 entries"):
        dmlops.unfold(X, (3, 3), strides=(1,), out=out)
    np.testing.assert_array_equal(out, sentinel)
    folded = np.full((2, 3, 5, 5), -7.0, np.float32)
    with pytest.raises(ValueError, match="not divisible"):
        dmlops.fold(np.zeros((2, 26, 9), np.float32), (5, 5), (3, 3), out=folded)
    np.testing.assert_array_equal(folded, -7.0)


def test_out_overlapping_input_or_itself_is_rejected():
    buffer = np.zeros(1000, np.float32)
    x = buffer[:50].reshape(2, 1, 25)
    with pytest.raises(ValueError, match="shares memory with an input"):
        dmlops.unfold(x, (3,), out=buffer[40:178].reshape(2, 3, 23))
    zero_stride = np.lib.stride_tricks.as_strided(buffer[500:], (2, 3, 23), (0, 92, 4))
    with pytest.raises(ValueError, match="overlapping elements"):
        dmlops.unfold(x, (3,), out=zero_stride)
    cols = buffer[:138].reshape(2, 3, 23)
    with pytest.raises(ValueError, match="shares memory with an input"):
        dmlops.fold(cols, (25,), (3,), out=buffer[100:150].reshape(2, 1, 25))
    np.testing.assert_array_equal(buffer, 0)


# ---------------------------------------------------------------------------------------------
# Differential fuzzing against the reference, garbage descriptors, hostile arrays (strategies.py)

@st.composite
def window_geometries(draw):
    """N, C, spatial sizes and a window that slides at least once (paddings up to larger than
    the input)."""
    rank = draw(st.integers(1, 3))
    ints = lambda lo, hi: tuple(draw(st.lists(st.integers(lo, hi), min_size=rank, max_size=rank)))
    spatial, window, strides, dilations = ints(1, 5), ints(1, 3), ints(1, 3), ints(1, 3)
    start, end = ints(0, 6), ints(0, 6)
    end = tuple(max(e, d * (w - 1) + 1 - s - a) for e, d, w, s, a in zip(end, dilations, window, spatial, start))
    return dict(n=draw(st.integers(1, 2)), c=draw(st.integers(1, 3)), spatial=spatial, window=window,
                kwargs=window_kwargs(strides, dilations, start, end))


@given(g=window_geometries(), dtype=st.sampled_from(DTYPES), form=st.sampled_from(["unfold", "UnfoldDesc"]),
       threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_unfold_matches_reference(g, dtype, form, threads, data):
    x = data.draw(arrays((g["n"], g["c"]) + g["spatial"], dtype))
    kw = g["kwargs"]
    expected = unfold_reference(x, g["window"], kw["strides"], kw["dilations"], kw["start_padding"], kw["end_padding"])
    out = data.draw(outs(expected.shape, x.dtype))
    dmlops.set_num_threads(threads)
    if form == "unfold":
        show_call(f"dmlops.unfold(x, {g['window']}, {kwargs_source(**kw)}, out=out)", x=x, out=out)
        run = lambda: dmlops.unfold(x, g["window"], out=out, **kw)
    else:
        show_call(f"dmlops.UnfoldDesc(dmlops.TensorDesc.from_array(x), window_sizes={g['window']}, "
                  f"{kwargs_source(**kw)})(x, out=out)", x=x, out=out)
        run = lambda: dmlops.UnfoldDesc(dmlops.TensorDesc.from_array(x), window_sizes=g["window"], **kw)(x, out=out)
    assert_same_bits(run_and_check_inputs(run, out, x), expected)


@given(g=window_geometries(), dtype=st.sampled_from(FOLD_DTYPES), form=st.sampled_from(["fold", "FoldDesc"]),
       threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_fold_matches_reference(g, dtype, form, threads, data):
    kw = g["kwargs"]
    geometry = (g["spatial"], g["window"], kw["strides"], kw["dilations"], kw["start_padding"], kw["end_padding"])
    blocks = window_blocks(*geometry)
    cols = data.draw(arrays((g["n"], g["c"] * int(np.prod(g["window"])), int(np.prod(blocks))), dtype, kind="finite"))
    expected = fold_reference(cols, *geometry)
    out = data.draw(outs(expected.shape, cols.dtype))
    dmlops.set_num_threads(threads)
    if form == "fold":
        show_call(f"dmlops.fold(cols, {g['spatial']}, {g['window']}, {kwargs_source(**kw)}, out=out)", cols=cols, out=out)
        run = lambda: dmlops.fold(cols, g["spatial"], g["window"], out=out, **kw)
    else:
        output = dmlops.TensorDesc(dtype, expected.shape)
        show_call(f"dmlops.FoldDesc(dmlops.TensorDesc.from_array(cols), {output!r}, window_sizes={g['window']}, "
                  f"{kwargs_source(**kw)})(cols, out=out)", cols=cols, out=out)
        run = lambda: dmlops.FoldDesc(dmlops.TensorDesc.from_array(cols), output, window_sizes=g["window"], **kw)(
            cols, out=out)
    # same terms, same order (increasing tap), same precision: equal bit for bit
    assert_same_bits(run_and_check_inputs(run, out, cols), expected)


WINDOW = dict(window_sizes=(2, 2), strides=(1, 2), dilations=(1, 1), start_padding=(1, 0), end_padding=(0, 1))
WRONG_WINDOW = dict(window_sizes=[(2**62, 1), (0, 1), (2,)], strides=[(0, 1), (2**63 - 1, 1)],
                    dilations=[(2**40, 1), (-1, 1)], start_padding=[(2**62, 0), (-1, 0)],
                    end_padding=[(2**48, 2**48), (0, 0, 0)],
                    input=[dmlops.TensorDesc("float32", (2, 3)), dmlops.TensorDesc("float32", (1, 2**20, 2**20, 2**20))],
                    output=[dmlops.TensorDesc("float32", (1, 4, 16)), dmlops.TensorDesc("int8", (1, 1, 4, 4)),
                            dmlops.TensorDesc("float32", (1, 1, 4, 4), (0, 0, 0, 0))])


@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_unfold_descriptors(data):
    fuzz_garbage(data, dmlops.UnfoldDesc, dict(input=dmlops.TensorDesc("float32", (1, 1, 4, 4)), **WINDOW), WRONG_WINDOW,
                 dmlops.unfold, (np.zeros((1, 1, 4, 4)),), WINDOW, WRONG_WINDOW)


@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_fold_descriptors(data):
    valid = dict(input=dmlops.TensorDesc("float32", (1, 4, 8)), output=dmlops.TensorDesc("float32", (1, 1, 4, 4)),
                 **WINDOW)
    fold_kwargs = dict(output_sizes=(4, 4), **WINDOW)
    fuzz_garbage(data, dmlops.FoldDesc, valid, WRONG_WINDOW, dmlops.fold, (np.zeros((1, 4, 8)),), fold_kwargs,
                 dict(WRONG_WINDOW, output_sizes=[(2**40, 2**40), (0, 4), (4,), (2**62, 2**62)]))


def test_hostile_inputs_are_rejected():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    check_hostile_inputs(lambda bad: dmlops.unfold(bad, **WINDOW), x)
    check_hostile_inputs(dmlops.UnfoldDesc(dmlops.TensorDesc.from_array(x), **WINDOW), x)
    cols = dmlops.unfold(x, **WINDOW)
    check_hostile_inputs(lambda bad: dmlops.fold(bad, (4, 4), **WINDOW), cols)
    check_hostile_inputs(dmlops.FoldDesc(dmlops.TensorDesc.from_array(cols), dmlops.TensorDesc.from_array(x), **WINDOW),
                         cols)


@pytest.mark.parametrize("dtype", ["float32", "int16", "bool"])
def test_bad_outs_are_rejected_and_left_untouched(dtype):
    x = np.ones((1, 2, 4, 4), dtype)
    shape = dmlops.unfold(x, **WINDOW).shape
    check_bad_outs(lambda out: dmlops.unfold(x, out=out, **WINDOW), x, shape, dtype)
    if dtype != "bool":
        cols = np.ones(shape, dtype)
        check_bad_outs(lambda out: dmlops.fold(cols, (4, 4), out=out, **WINDOW), cols, x.shape, dtype)


def test_gigantic_outputs_are_rejected_before_allocating():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match="Unfold: .*(bytes|memory)"):
        dmlops.unfold(x, (1, 1), start_padding=(2**20, 2**20), end_padding=(2**20, 2**20))
    with pytest.raises(ValueError, match="Fold: .*(bytes|memory)"):
        dmlops.fold(np.zeros((1, 1, 1), np.float32), (2**21, 2**21), (1, 1), strides=(2**22, 2**22))
    with pytest.raises(ValueError, match="Unfold: .*(2\\^62|2\\^63|bytes)"):
        dmlops.UnfoldDesc(dmlops.TensorDesc("float64", (1, 2**30, 4, 4)), window_sizes=(2**16, 2**16),
                          start_padding=(2**16, 2**16), end_padding=(2**16, 2**16))
