"""Upsample2D and Resample/Resample1/2/3 (docs/semantics/resample.md) against the plain references in
reference.py, the spec's DxDispatch table and PyTorch's conventions written as numpy formulas."""

from __future__ import annotations

import math
import pickle
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlops
from reference import (as_float32, bits, resample_antialiased_row, resample_linear_row, resample_magnitude,
                       resample_reference)
from strategies import (arrays, check_bad_outs, check_hostile_inputs, fuzz_garbage, garbage_settings, kwargs_source,
                        outs, run_and_check_inputs, show_call)

DTYPES = ("float32", "float16", "float64", "uint8", "uint16", "uint32", "uint64",
          "int8", "int16", "int32", "int64", "bool")
FLOATS = ("float32", "float16", "float64")
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -23, "float64": 2.0 ** -52}  # working precision


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(-4, 4, size=shape).astype(dtype)
    # integers: random bit patterns, every value
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray):
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(bits(actual), bits(expected))


def assert_linear_close(actual: np.ndarray, expected: np.ndarray, magnitude: np.ndarray, passes: int):
    """One rounding per tap and pass in the working precision, and float16's final rounding."""
    dtype = actual.dtype.name
    assert actual.shape == expected.shape
    tolerance = 4 * (passes + 1) * EPS[dtype] * magnitude
    if dtype == "float16":
        tolerance = tolerance + np.abs(expected) * 2.0 ** -11 + 2.0 ** -24
    error = np.abs(actual.astype(np.float64) - expected)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape) if error.size else ()
    assert np.all(error <= tolerance), (f"{dtype}: at {worst} got {actual[worst]!r}, expected {expected[worst]!r}, "
                                        f"tolerance {tolerance[worst]:.3g}")


# ---------------------------------------------------------------------------------------------
# The spec's DxDispatch check and the issue's examples

DXDISPATCH_INPUT = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
DXDISPATCH_OUTPUT = np.array([[[[1, 1.25, 1.75, 2],
                                 [1.5, 1.75, 2.25, 2.5],
                                 [2.5, 2.75, 3.25, 3.5],
                                 [3, 3.25, 3.75, 4]]]], dtype=np.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_dxdispatch_upsample_table(dtype):
    x = DXDISPATCH_INPUT.astype(dtype)
    expected = DXDISPATCH_OUTPUT.astype(dtype)  # every entry is exact in float16 too
    assert_same_bits(dmlops.upsample_2d(x, (2, 2), "linear"), expected)
    d = dmlops.Upsample2DDesc(dmlops.TensorDesc(dtype, (1, 1, 2, 2)), scale_size=(2, 2), interpolation_mode="linear")
    assert_same_bits(d(x), expected)
    # Upsample2D is Resample with scales (1, 1, 2, 2) and the pixel-centre offsets
    assert_same_bits(dmlops.resample(x, (1, 1, 2, 2), "linear"), expected)
    r = dmlops.Resample1Desc(dmlops.TensorDesc(dtype, (1, 1, 2, 2)), scales=(1, 1, 2, 2), interpolation_mode="linear")
    assert_same_bits(r(x), expected)
    # and the reference reproduces DirectML's table, so it is a sound oracle
    np.testing.assert_array_equal(resample_reference(x, (1, 1, 4, 4), (1, 1, 2, 2), "linear"), expected)


def test_issue_examples():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 8, 12)).astype(np.float32)
    y = dmlops.upsample_2d(x, scale_size=(2, 3), interpolation_mode="linear")
    assert y.shape == (2, 3, 16, 36) and y.dtype == np.float32 and y.flags.c_contiguous
    assert_linear_close(y, resample_reference(x, y.shape, (1, 1, 2, 3), "linear"),
                        resample_magnitude(x, y.shape, (1, 1, 2, 3)), 2)
    x5 = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    y5 = dmlops.upsample_2d(x5, scale_size=(2, 3), interpolation_mode="linear")
    assert_linear_close(y5, resample_reference(x5, y5.shape, (1, 1, 1, 2, 3), "linear"),
                        resample_magnitude(x5, y5.shape, (1, 1, 1, 2, 3)), 2)

    z = dmlops.resample(x, scales=(1, 1, 0.5, 1.75), interpolation_mode="linear", antialiased=True)
    assert z.shape == (2, 3, 4, 21)
    assert_linear_close(z, resample_reference(x, z.shape, (1, 1, 0.5, 1.75), "linear", antialiased=True),
                        resample_magnitude(x, z.shape, (1, 1, 0.5, 1.75), antialiased=True), 2)

    n = dmlops.resample(x, scales=(1, 1, 3, 3), interpolation_mode="nearest_neighbor", rounding_direction="increasing",
                        input_pixel_offsets=(0, 0, 0, 0), output_pixel_offsets=(0, 0, 0, 0))
    assert n.shape == (2, 3, 24, 36)
    # ceil(o / 3): the first output row/column alone, then groups of three
    rows = [min(math.ceil(o / 3), 7) for o in range(24)]
    cols = [min(math.ceil(o / 3), 11) for o in range(36)]
    assert_same_bits(n, x[:, :, rows][:, :, :, cols])

    d = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", x.shape), scale_size=(2, 3), interpolation_mode="linear")
    assert_same_bits(d(x), y)
    r = dmlops.Resample3Desc(dmlops.TensorDesc("float32", x.shape), scales=(1, 1, 0.5, 1.75),
                             interpolation_mode="linear", rounding_direction="decreasing", antialiased=True)
    assert_same_bits(r(x), z)


def test_docstring_examples():
    np.testing.assert_array_equal(dmlops.upsample_2d(np.array([[[[1, 2], [3, 4]]]]), (1, 3))[0, 0],
                                  [[1, 1, 1, 2, 2, 2], [3, 3, 3, 4, 4, 4]])
    np.testing.assert_allclose(dmlops.resample(np.arange(4.0), (1.5,), "linear"), [0, 0.5, 7 / 6, 11 / 6, 2.5, 3])
    np.testing.assert_array_equal(dmlops.resample(np.arange(4), (2,), rounding_direction="increasing",
                                                  input_pixel_offsets=(0,), output_pixel_offsets=(0,)),
                                  [0, 1, 1, 2, 2, 3, 3, 3])
    assert dmlops.ResampleDesc(dmlops.TensorDesc("float32", (1, 3, 10, 10)), scales=(1, 1, 0.7, 2.5)).output.sizes \
        == (1, 3, 7, 25)


# ---------------------------------------------------------------------------------------------
# Upsample2D

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 5])
def test_upsample_nearest_repeats_pixels_bit_exactly(dtype, rank):
    rng = np.random.default_rng(rank)
    shape = (2, 3, 4, 5, 6)[5 - rank:]
    x = random_array(rng, shape, dtype)
    for scale in [(1, 1), (2, 2), (3, 1), (1, 4), (5, 3)]:
        expected = np.repeat(np.repeat(x, scale[0], axis=-2), scale[1], axis=-1)
        assert_same_bits(dmlops.upsample_2d(x, scale), expected)


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
def test_upsample_nearest_rows_past_a_permute_bit_exactly(dtype):
    """Rows of 129 to 511 input bytes (too long to permute whole, short enough for the batched
    repeats: with the byte permute, a batch of rows and their copies per call), every factor along W from 2 to 8 and 1 to 3 along H, on 1 to 3 threads, into
    new and misaligned outputs: bit for bit np.repeat."""
    rng = np.random.default_rng(5)
    itemsize = np.dtype(dtype).itemsize
    for width in sorted({129 // itemsize + 1, 200 // itemsize, 511 // itemsize}):
        x = random_array(rng, (2, 3, 5, width), dtype)
        for sh, sw in [(1, 2), (2, 2), (3, 3), (2, 4), (1, 5), (3, 7), (2, 8)]:
            expected = np.repeat(np.repeat(x, sh, axis=-2), sw, axis=-1)
            reason = dmlops.Upsample2DDesc(dmlops.TensorDesc(dtype, x.shape), scale_size=(sh, sw)).plan().reason
            if "repeats of 2 to 8 as one byte permute" in reason:
                batched = "copied, a batch of rows per call" if sh > 1 else "(avx512 vbmi), a batch of rows per call"
                assert batched in reason, (width, sh, sw, reason)
            for threads in (1, 2, 3):
                with dmlops.threads(threads):
                    assert_same_bits(dmlops.upsample_2d(x, (sh, sw)), expected)
                    buffer = np.zeros(expected.nbytes + itemsize, np.uint8)
                    out = buffer[itemsize:].view(dtype).reshape(expected.shape)
                    dmlops.upsample_2d(x, (sh, sw), out=out)
                    assert_same_bits(out, expected)
                    assert not buffer[:itemsize].any()


def test_upsample_nearest_keeps_nan_payloads_and_bool():
    payloads = np.array([0x7FC00123, 0xFF800001, 0x7F800001, 0x80000000], dtype=np.uint32).view(np.float32)
    x = payloads.reshape(1, 1, 2, 2)
    assert_same_bits(dmlops.upsample_2d(x, (2, 3)), np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    b = np.array([[[[True, False]]]])
    y = dmlops.upsample_2d(b, 2)
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y[0, 0], [[True, True, False, False]] * 2)


def torch_bilinear(x: np.ndarray, sh: int, sw: int) -> np.ndarray:
    """torch.nn.functional.interpolate(mode="bilinear", align_corners=False) as ATen writes it:
    src = max((o + 0.5) / s - 0.5, 0), i0 = floor(src), i1 = i0 + 1 unless at the last pixel,
    l1 = src - i0, out = (1 - l1) * x[i0] + l1 * x[i1], along H then W, in float64."""
    def along(y, axis, s):
        n = y.shape[axis]
        src = np.maximum((np.arange(n * s) + 0.5) / s - 0.5, 0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, n - 1)
        l1 = (src - i0).reshape([-1 if a == axis % y.ndim else 1 for a in range(y.ndim)])
        return (1 - l1) * np.take(y, i0, axis=axis) + l1 * np.take(y, i1, axis=axis)
    return along(along(x.astype(np.float64), -2, sh), -1, sw)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("scale", [(2, 2), (3, 2), (1, 5), (4, 1)])
def test_upsample_linear_is_torch_bilinear_without_aligned_corners(dtype, scale):
    rng = np.random.default_rng(scale[0] * 10 + scale[1])
    x = random_array(rng, (2, 3, 7, 9), dtype)
    y = dmlops.upsample_2d(x, scale, "linear")
    assert y.dtype == x.dtype
    out_shape = (2, 3, 7 * scale[0], 9 * scale[1])
    assert_linear_close(y, torch_bilinear(x, *scale), resample_magnitude(x, out_shape, (1, 1) + scale), 2)
    assert_linear_close(y, resample_reference(x, out_shape, (1, 1) + scale, "linear"),
                        resample_magnitude(x, out_shape, (1, 1) + scale), 2)


def test_upsample_5d_never_mixes_depth():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 2, 3, 5, 4))
    y = dmlops.upsample_2d(x, (2, 3), "linear")
    for d in range(3):
        np.testing.assert_allclose(y[:, :, d], torch_bilinear(x[:, :, d], 2, 3), rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# Resample: random sweeps against the reference

def default_out_shape(shape, scales) -> tuple:
    """The output sizes a resampling takes without output_sizes: floor(size * float32(scale))."""
    return tuple(int(np.floor(n * as_float32(s) + 1e-6)) for n, s in zip(shape, scales))


def sweep_case(seed: int, max_rank: int = 8):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, max_rank + 1))
    max_size = {1: 30, 2: 9, 3: 6, 4: 4, 5: 3, 6: 3, 7: 2, 8: 2}[rank]
    shape = tuple(int(s) for s in rng.integers(1, max_size + 1, size=rank))
    # up- and down-sampling, exact FLOATs and not (0.3, 1.7), integers, 1 (often the identity)
    choices = np.array([0.3, 0.5, 0.75, 1.0, 1.0, 1.5, 1.7, 2.0, 2.5, 3.0, 4.0])
    scales = tuple(float(rng.choice(choices)) for _ in range(rank))
    out_shape = default_out_shape(shape, scales)
    offsets = None, None
    if rng.random() < 0.6:
        offsets = (tuple(float(v) for v in rng.choice([0.0, 0.5, 0.25, -1.0, 1.5], size=rank)),
                   tuple(float(v) for v in rng.choice([0.0, -0.5, 0.5, 2.0], size=rank)))
    explicit = rng.random() < 0.3 or min(out_shape) == 0  # floor(n * scale) = 0 needs explicit sizes
    if explicit:  # DirectML takes any output size: crop or clamp at the edges
        out_shape = tuple(int(s) for s in rng.integers(1, max_size * 2 + 1, size=rank))
    return rng, shape, scales, out_shape, offsets, explicit


@pytest.mark.parametrize("dtype", DTYPES)
def test_nearest_downsampling_by_two_bit_exact(dtype):
    # Rows that read every other input element are copied as stride-2 runs (a narrowing kernel),
    # several evenly spaced rows in one call: long and short rows, odd sizes, a sliced input,
    # another axis resampled by 0.7 (rows not evenly spaced), every rounding, 1 and 3 threads.
    rng = np.random.default_rng(2)
    for shape, scales in [((2, 3, 12, 40), (1, 1, 0.5, 0.5)), ((1, 2, 7, 33), (1, 1, 0.5, 0.5)),
                          ((3, 70), (1, 0.5)), ((2, 5, 9, 18), (1, 0.5, 0.7, 0.5))]:
        x = random_array(rng, shape, dtype)
        for view in (x, random_array(rng, shape[:-1] + (2 * shape[-1],), dtype)[..., 1::2]):
            out_shape = default_out_shape(shape, scales)
            for rounding in (None, "decreasing", "increasing"):
                expected = resample_reference(view, out_shape, scales, "nearest_neighbor", None, None, rounding)
                for threads in (1, 3):
                    with dmlops.threads(threads):
                        assert_same_bits(dmlops.resample(view, scales, rounding_direction=rounding), expected)


@pytest.mark.parametrize("seed", range(150))
def test_random_nearest_sweep_bit_exact(seed):
    rng, shape, scales, out_shape, (in_off, out_off), explicit = sweep_case(seed)
    dtype = DTYPES[seed % len(DTYPES)]
    rounding = (None, "decreasing", "increasing")[seed % 3]
    x = random_array(rng, shape, dtype)
    y = dmlops.resample(x, scales, input_pixel_offsets=in_off, output_pixel_offsets=out_off,
                        rounding_direction=rounding, output_sizes=out_shape if explicit else None)
    assert y.shape == out_shape
    assert_same_bits(y, resample_reference(x, out_shape, scales, "nearest_neighbor", in_off, out_off, rounding))


def test_tables_reused_only_for_the_same_axes_and_options():
    """A call reuses the tables of an earlier call on its thread only when every axis and option
    is the same: six settings that differ in one field each (more than the four kept), taken
    round after round in changing orders, each against the reference."""
    x = random_array(np.random.default_rng(5), (1, 2, 7, 9), np.float32)
    settings = [dict(scales=(1, 1, 1.5, 1.75)), dict(scales=(1, 1, 1.5, 1.7)),
                dict(scales=(1, 1, 1.5, 1.75), input_pixel_offsets=(0.5, 0.5, 0.5, 0.25)),
                dict(scales=(1, 1, 1.5, 1.75), output_pixel_offsets=(-0.5, -0.5, -0.5, 0.0)),
                dict(scales=(1, 1, 1.5, 1.75), rounding_direction="decreasing"),
                dict(scales=(1, 1, 1.5, 1.75), output_sizes=(1, 2, 10, 15))]
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [0, 0, 3, 1, 5, 1]):
        for i in order:
            s = settings[i]
            for mode in ("nearest_neighbor", "linear"):
                if mode == "linear" and "rounding_direction" in s:
                    continue
                y = dmlops.resample(x, interpolation_mode=mode, **s)
                ref = resample_reference(x, y.shape, s["scales"], mode, s.get("input_pixel_offsets"),
                                         s.get("output_pixel_offsets"), s.get("rounding_direction"))
                if mode == "nearest_neighbor":
                    assert_same_bits(y, ref)
                else:
                    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(150))
def test_random_linear_sweep(seed):
    rng, shape, scales, out_shape, (in_off, out_off), explicit = sweep_case(seed + 500, max_rank=6)
    dtype = FLOATS[seed % 3]
    antialiased = seed % 2 == 1
    x = random_array(rng, shape, dtype)
    y = dmlops.resample(x, scales, "linear", input_pixel_offsets=in_off, output_pixel_offsets=out_off,
                        antialiased=antialiased, output_sizes=out_shape if explicit else None)
    assert y.shape == out_shape and y.dtype == x.dtype
    assert_linear_close(y, resample_reference(x, out_shape, scales, "linear", in_off, out_off, None, antialiased),
                        resample_magnitude(x, out_shape, scales, in_off, out_off, antialiased), len(shape))


@given(
    n=st.integers(1, 12),
    m=st.integers(1, 30),
    scale=st.floats(0.05, 20, allow_nan=False, allow_infinity=False),
    in_off=st.floats(-3, 3, allow_nan=False),
    out_off=st.floats(-3, 3, allow_nan=False),
    rounding=st.sampled_from([None, "decreasing", "increasing"]),
)
def test_property_one_axis(n, m, scale, in_off, out_off, rounding):
    x = np.arange(n, dtype=np.int32) * 10
    y = dmlops.resample(x, (scale,), input_pixel_offsets=(in_off,), output_pixel_offsets=(out_off,),
                        rounding_direction=rounding, output_sizes=(m,))
    np.testing.assert_array_equal(y, resample_reference(x, (m,), (scale,), "nearest_neighbor", (in_off,), (out_off,),
                                                        rounding))
    xf = np.linspace(-1, 1, n)
    for antialiased in (False, True):
        yf = dmlops.resample(xf, (scale,), "linear", input_pixel_offsets=(in_off,), output_pixel_offsets=(out_off,),
                             antialiased=antialiased, output_sizes=(m,))
        expected = resample_reference(xf, (m,), (scale,), "linear", (in_off,), (out_off,), None, antialiased)
        np.testing.assert_allclose(yf, expected, rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# PyTorch's and ONNX's conventions, written as numpy expectations

def test_nearest_conventions():
    x = np.arange(7, dtype=np.int64)
    for s in (2, 3, 2.5, 0.5, 1.75):
        m = int(np.floor(7 * s))
        o = np.arange(m)
        # torch "nearest-exact" (and ONNX half_pixel round_prefer_ceil): floor((o + 0.5) / s)
        exact = np.minimum(np.floor((o + 0.5) / as_float32(s)).astype(int), 6)
        np.testing.assert_array_equal(dmlops.resample(x, (s,)), exact)
        # torch "nearest" (ONNX asymmetric floor): floor(o / s)
        floor = np.minimum(np.floor(o / as_float32(s)).astype(int), 6)
        np.testing.assert_array_equal(dmlops.resample(x, (s,), rounding_direction="decreasing",
                                                      input_pixel_offsets=(0,), output_pixel_offsets=(0,)), floor)
    # for integer scales torch's nearest, nearest-exact and Upsample2D all repeat each pixel
    np.testing.assert_array_equal(dmlops.resample(x, (3,)), np.repeat(x, 3))
    # ONNX round_prefer_floor = ceil(x - 0.5): 'increasing' with the input offset raised by 0.5
    # (the mapping ONNX Runtime's DirectML provider uses)
    o = np.arange(14)
    prefer_floor = np.clip(np.ceil((o + 0.5) / 2 - 0.5 - 0.5), 0, 6).astype(int)
    np.testing.assert_array_equal(dmlops.resample(x, (2,), rounding_direction="increasing",
                                                  input_pixel_offsets=(1.0,)), prefer_floor)


def test_linear_align_corners_is_zero_offsets():
    # torch align_corners=True: src = o * (n - 1) / (m - 1); DirectML: offsets 0 and scale (m-1)/(n-1)
    x = np.random.default_rng(1).standard_normal((5, 6))
    m = (9, 16)
    scales = ((m[0] - 1) / 4, (m[1] - 1) / 5)
    y = dmlops.resample(x, scales, "linear", input_pixel_offsets=(0, 0), output_pixel_offsets=(0, 0), output_sizes=m)
    def along(v, axis, n, mm):
        src = np.arange(mm) * (n - 1) / (mm - 1)
        i0 = np.minimum(np.floor(src).astype(int), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        lam = (src - i0).reshape([-1 if a == axis else 1 for a in range(2)])
        return (1 - lam) * np.take(v, i0, axis=axis) + lam * np.take(v, i1, axis=axis)
    np.testing.assert_allclose(y, along(along(x, 0, 5, 9), 1, 6, 16), rtol=0, atol=1e-6)  # FLOAT scales


def test_antialias_averages_and_matches_onnx():
    x = np.arange(16, dtype=np.float64).reshape(4, 4)
    # scale 0.5: each output is the triangle-weighted mean of 4 x 4 pixels, edges repeated
    y = dmlops.resample(x, (0.5, 0.5), "linear", antialiased=True)
    row = np.array([resample_antialiased_row(o, 4, 0.5, 0.5, -0.5) for o in range(2)])
    # x = 0.5: taps -1, 0, 1, 2 weigh 1/8, 3/8, 3/8, 1/8; tap -1 reads pixel 0
    np.testing.assert_allclose(row, [[0.5, 0.375, 0.125, 0], [0, 0.125, 0.375, 0.5]])
    np.testing.assert_allclose(y, row @ x @ row.T, rtol=1e-14)
    # without antialiasing, downsampling by 2 samples halfway between pixel pairs
    np.testing.assert_allclose(dmlops.resample(x, (0.5, 0.5), "linear"), [[2.5, 4.5], [10.5, 12.5]])
    # upsampling: antialiasing changes nothing
    z = np.random.default_rng(2).standard_normal((3, 5))
    np.testing.assert_array_equal(dmlops.resample(z, (1.5, 2.5), "linear", antialiased=True),
                                  dmlops.resample(z, (1.5, 2.5), "linear"))
    # nearest: antialiasing changes nothing either
    np.testing.assert_array_equal(dmlops.resample(z, (0.5, 0.4), antialiased=True), dmlops.resample(z, (0.5, 0.4)))


def test_antialias_rows_match_the_plain_triangle():
    # The ONNX phrasing (reference) and the plain one: weight max(0, 1 - |i - x| * s), normalised.
    for s in (0.5, 0.3, 0.25, 0.7):
        for n in (1, 3, 10):
            for o in range(max(1, int(n * s))):
                x = (o + 0.5) / s - 0.5
                w = np.array([max(0.0, 1 - abs(i - x) * s) for i in range(-20, n + 20)])
                plain = np.zeros(n)
                for i, wi in zip(range(-20, n + 20), w / w.sum()):
                    plain[min(max(i, 0), n - 1)] += wi
                np.testing.assert_allclose(resample_antialiased_row(o, n, s, 0.5, -0.5), plain, atol=1e-15)
    for o in range(6):  # scale >= 1: the linear row
        np.testing.assert_allclose(resample_antialiased_row(o, 4, 1.5, 0.5, -0.5), resample_linear_row(o, 4, 1.5, 0.5, -0.5))


def test_exact_samples_keep_infinities():
    # a pixel sampled exactly is returned as it is, even next to an infinity (inf * 0 is not taken)
    x = np.array([[1.0, np.inf, -np.inf, 4.0]])
    y = dmlops.resample(x, (1, 2), "linear", input_pixel_offsets=(0, 0), output_pixel_offsets=(0, 0))
    np.testing.assert_array_equal(y[0, ::2], [1.0, np.inf, -np.inf, 4.0])
    assert np.isnan(y[0, 3]) and y[0, 1] == np.inf and y[0, 7] == 4.0
    e = dmlops.upsample_2d(np.full((1, 1, 1, 2), np.inf, np.float32), 2, "linear")
    np.testing.assert_array_equal(e, np.inf)


# ---------------------------------------------------------------------------------------------
# Output sizes

def test_output_size_rule():
    x = np.zeros(10, np.float32)
    assert dmlops.resample(x, (0.7,)).shape == (7,)  # the FLOAT 0.7 is 0.69999999
    assert dmlops.resample(x, (0.35,)).shape == (3,)
    assert dmlops.resample(x, (1 / 3,)).shape == (3,)
    assert dmlops.resample(np.zeros(3), (1 / 3,)).shape == (1,)
    assert dmlops.resample(x, (2.55,)).shape == (25,)
    big = np.zeros(2 ** 25 + 1, np.uint8)  # beyond float32's integers the product stays exact
    assert dmlops.resample(big, (1.0,)).shape == big.shape
    d = dmlops.Resample1Desc(dmlops.TensorDesc("float32", (10, 3)), scales=(0.7, 0.34))
    assert d.output.sizes == (7, 1)
    with pytest.raises(ValueError, match=r"output size on dimension 1 is floor\(3 x 0.3.*\) = 0; give the output"):
        dmlops.resample(np.zeros((10, 3)), (0.7, 0.3))


def test_explicit_output_sizes_crop_and_clamp():
    x = np.arange(4, dtype=np.int16)
    # scale 2 into 5 outputs: cropped; into 11 outputs: the last pixel repeated
    np.testing.assert_array_equal(dmlops.resample(x, (2,), output_sizes=(5,)), [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(dmlops.resample(x, (2,), output_sizes=(11,)), [0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 3])
    d = dmlops.Resample2Desc(dmlops.TensorDesc("int16", (4,)), scales=(2,), rounding_direction="decreasing",
                             output=dmlops.TensorDesc("int16", (3,)))
    assert d.output_shape == (3,)
    np.testing.assert_array_equal(d(x), [0, 0, 0])  # floor(o / 2 - 0.25)


# ---------------------------------------------------------------------------------------------
# Memory layouts, out=, threads

@pytest.mark.parametrize("seed", range(40))
def test_strided_views_and_out(seed):
    rng, shape, scales, out_shape, (in_off, out_off), explicit = sweep_case(seed + 2000, max_rank=4)
    mode = ("nearest_neighbor", "linear")[seed % 2]
    dtype = ("float32", "float16", "float64", "int16")[seed % 4] if mode == "nearest_neighbor" else FLOATS[seed % 3]
    base = random_array(rng, tuple(s * 2 + 1 for s in shape), dtype)
    view = base[tuple(slice(None, None, int(rng.choice([-2, -1, 1, 2]))) for _ in shape)]
    view = view[tuple(slice(0, s) for s in shape)]
    if len(shape) > 1:
        view = np.moveaxis(view, 0, -1)  # transposed: strides out of order
    if rng.random() < 0.3:  # a broadcast (zero-stride) axis
        axis = int(rng.integers(0, view.ndim))
        view = np.broadcast_to(view.take([0], axis=axis), view.shape)
    shape = view.shape
    scales = scales[1:] + scales[:1] if len(shape) > 1 else scales
    out_shape = out_shape[1:] + out_shape[:1] if len(shape) > 1 else out_shape
    in_off = None if in_off is None else in_off[1:] + in_off[:1]
    out_off = None if out_off is None else out_off[1:] + out_off[:1]
    kwargs = dict(input_pixel_offsets=in_off, output_pixel_offsets=out_off, output_sizes=out_shape)
    expected = dmlops.resample(np.ascontiguousarray(view), scales, mode, **kwargs)
    big = np.zeros(tuple(s * 2 for s in out_shape), dtype=view.dtype)
    out = big[tuple(slice(None, None, 2) for _ in out_shape)]
    if out.ndim > 1:
        out = np.flip(out, axis=0)
    assert dmlops.resample(view, scales, mode, out=out, **kwargs) is out
    assert_same_bits(out, expected)  # the same arithmetic in the same order, whatever the layout
    assert_same_bits(dmlops.resample(view, scales, mode, **kwargs), expected)
    assert np.all(big[tuple(slice(1, None, 2) for _ in out_shape)] == 0)  # gaps untouched


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_give_identical_results(threads):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 33, 47)).astype(np.float32)
    dmlops.set_num_threads(1)
    single = [dmlops.upsample_2d(x, (2, 3), "linear"), dmlops.upsample_2d(x, (3, 2)),
              dmlops.resample(x, (1, 0.6, 0.45, 1.3), "linear", antialiased=True),
              dmlops.resample(x[0, 0], (17.0, 0.3), "linear")]
    dmlops.set_num_threads(threads)
    again = [dmlops.upsample_2d(x, (2, 3), "linear"), dmlops.upsample_2d(x, (3, 2)),
             dmlops.resample(x, (1, 0.6, 0.45, 1.3), "linear", antialiased=True),
             dmlops.resample(x[0, 0], (17.0, 0.3), "linear")]
    for a, b in zip(single, again):
        assert_same_bits(a, b)
    assert_same_bits(single[1], np.repeat(np.repeat(x, 3, axis=2), 2, axis=3))


def test_concurrent_python_threads():
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((3, 4, 20, 30)).astype(np.float32) for _ in range(4)]
    expected = [dmlops.upsample_2d(x, 2, "linear") for x in inputs]
    results: dict = {}

    def work(i):
        for _ in range(5):
            results[i] = dmlops.upsample_2d(inputs[i], 2, "linear")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert_same_bits(results[i], expected[i])


# ---------------------------------------------------------------------------------------------
# Descriptors

def make_resample3(**overrides):
    fields = dict(input=dmlops.TensorDesc("float16", (1, 2, 3, 4)), scales=(1, 1, 0.5, 1.75),
                  interpolation_mode="linear", rounding_direction="increasing", input_pixel_offsets=(0.5, 0.5, 0, 0.25),
                  output_pixel_offsets=(-0.5, -0.5, 0, 1), antialiased=True)
    fields.update(overrides)
    return dmlops.Resample3Desc(**fields)


def test_descriptor_fields_and_output():
    d = make_resample3()
    assert d.output == dmlops.TensorDesc("float16", (1, 2, 1, 7))
    assert d.output_shape == (1, 2, 1, 7)
    assert d.scales == (1.0, 1.0, 0.5, 1.75) and d.antialiased is True and d.rounding_direction == "increasing"
    assert d.input_pixel_offsets == (0.5, 0.5, 0.0, 0.25) and d.output_pixel_offsets == (-0.5, -0.5, 0.0, 1.0)
    with pytest.raises(AttributeError):
        d.scales = (1, 1, 1, 1)
    assert dmlops.Resample1Desc(dmlops.TensorDesc("int8", (30,)), scales=(0.1,)).scales == (as_float32(0.1),)
    u = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 2, 3, 4, 5)), scale_size=3)
    assert u.scale_size == (3, 3) and u.output.sizes == (1, 2, 3, 12, 15) and u.interpolation_mode == "nearest_neighbor"


def test_descriptors_to_dict_are_dxdispatch_json():
    assert make_resample3().to_dict() == {
        "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2, 3, 4]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2, 1, 7]},
        "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR",
        "RoundingDirection": "DML_AXIS_DIRECTION_INCREASING",
        "DimensionCount": 4,
        "Scales": [1.0, 1.0, 0.5, 1.75],
        "InputPixelOffsets": [0.5, 0.5, 0.0, 0.25],
        "OutputPixelOffsets": [-0.5, -0.5, 0.0, 1.0],
        "Antialiased": True,
    }
    assert dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=(2, 5),
                                 interpolation_mode="linear").to_dict() == {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 3]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 15]},
        "ScaleSize": {"Width": 5, "Height": 2},
        "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR",
    }
    assert dmlops.ResampleDesc(dmlops.TensorDesc("uint8", (4, 4)), scales=(2, 0.5)).to_dict() == {
        "InputTensor": {"DataType": "UINT8", "Sizes": [4, 4]},
        "OutputTensor": {"DataType": "UINT8", "Sizes": [8, 2]},
        "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR",
        "ScaleCount": 2,
        "Scales": [2.0, 0.5],
    }
    r1 = dmlops.Resample1Desc(dmlops.TensorDesc("float32", (4,)), scales=(2,)).to_dict()
    assert r1["InputPixelOffsets"] == [0.5] and r1["OutputPixelOffsets"] == [-0.5] and "RoundingDirection" not in r1
    r2 = dmlops.Resample2Desc(dmlops.TensorDesc("float32", (4,)), scales=(2,), rounding_direction="decreasing").to_dict()
    assert r2["RoundingDirection"] == "DML_AXIS_DIRECTION_DECREASING" and "Antialiased" not in r2


@pytest.mark.parametrize("desc", [
    make_resample3(),
    make_resample3(antialiased=False, interpolation_mode="nearest_neighbor", input=dmlops.TensorDesc("int64", (1, 2, 3, 4))),
    dmlops.Resample2Desc(dmlops.TensorDesc("float32", (5, 2), strides=(1, 5)), scales=(0.4, 3), rounding_direction="decreasing",
                         output=dmlops.TensorDesc("float32", (3, 3))),
    dmlops.Resample1Desc(dmlops.TensorDesc("float64", (5,)), scales=(0.3,), interpolation_mode="linear"),
    dmlops.ResampleDesc(dmlops.TensorDesc("uint16", (2, 3)), scales=(1.5, 2)),
    dmlops.Upsample2DDesc(dmlops.TensorDesc("float16", (1, 3, 4, 5)), scale_size=(2, 3), interpolation_mode="linear"),
])
def test_descriptor_round_trips(desc):
    assert type(desc).from_dict(desc.to_dict()) == desc
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert hash(pickle.loads(pickle.dumps(desc))) == hash(desc)
    names = {n: getattr(dmlops, n) for n in ("Resample3Desc", "Resample2Desc", "Resample1Desc", "ResampleDesc",
                                            "Upsample2DDesc", "TensorDesc")}
    assert eval(repr(desc), names) == desc


def test_descriptor_equality_compares_every_field():
    d = make_resample3()
    assert d == make_resample3()
    assert d != make_resample3(antialiased=False)
    assert d != make_resample3(rounding_direction="decreasing")
    assert d != make_resample3(scales=(1, 1, 0.5, 1.5))
    assert d != make_resample3(input_pixel_offsets=(0.5, 0.5, 0, 0))
    assert d != make_resample3(output_pixel_offsets=(-0.5, -0.5, 0, 0))
    assert d != make_resample3(interpolation_mode="nearest_neighbor")
    assert d != make_resample3(output=dmlops.TensorDesc("float16", (1, 2, 2, 7)))
    u = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=(2, 3))
    assert u != dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=(3, 2))
    assert dmlops.ResampleDesc(dmlops.TensorDesc("float32", (4,)), scales=(2,)) != \
        dmlops.Resample1Desc(dmlops.TensorDesc("float32", (4,)), scales=(2,))


def test_descriptor_from_dict_accepts_short_names_and_integer_bools():
    d = dmlops.Resample3Desc.from_dict({
        "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [4]},
        "InterpolationMode": "LINEAR", "RoundingDirection": "DECREASING", "DimensionCount": 1, "Scales": [0.5],
        "InputPixelOffsets": [0.5], "OutputPixelOffsets": [-0.5], "Antialiased": 1})
    assert d.antialiased is True and d.output.sizes == (2,) and d.interpolation_mode == "linear"


@pytest.mark.parametrize("cls,change,message", [
    ("Resample3Desc", {"Bogus": 1}, "unknown field"),
    ("Resample3Desc", {"DimensionCount": 3}, "DimensionCount is 3"),
    ("Resample3Desc", {"Antialiased": 2}, "antialiased must be a bool"),
    ("Resample3Desc", {"RoundingDirection": "DML_AXIS_DIRECTION_SIDEWAYS"}, "rounding_direction"),
    ("Resample3Desc", {"OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2, 1]}}, "output has 3 dimensions"),
    ("Upsample2DDesc", {"ScaleSize": [2, 2]}, "Width"),
    ("Upsample2DDesc", {"OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 5]}}, "output has sizes"),
    ("ResampleDesc", {"ScaleCount": 5}, "ScaleCount is 5"),
])
def test_descriptor_from_dict_rejects(cls, change, message):
    desc = {
        "Resample3Desc": make_resample3(),
        "Upsample2DDesc": dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=(2, 3)),
        "ResampleDesc": dmlops.ResampleDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scales=(1, 1, 2, 3)),
    }[cls]
    d = desc.to_dict()
    d.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        getattr(dmlops, cls).from_dict(d)


def test_descriptor_checks_arrays_it_runs_on():
    d = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=2)
    with pytest.raises(TypeError, match="dtype float64 but the descriptor says float32"):
        d(np.zeros((1, 1, 2, 3)))
    with pytest.raises(ValueError, match=r"shape \(1, 1, 3, 2\)"):
        d(np.zeros((1, 1, 3, 2), np.float32))
    out = np.empty((1, 1, 4, 6), np.float32)
    assert d(np.ones((1, 1, 2, 3), np.float32), out=out) is out and np.all(out == 1)
    r = dmlops.ResampleDesc(dmlops.TensorDesc("uint8", (3,)), scales=(2,))
    y = r(np.array([True, False, True]))
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, [True, True, False, False, True, True])


# ---------------------------------------------------------------------------------------------
# Bad input: a clear exception, nothing written

X = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)


@pytest.mark.parametrize("call,error,message", [
    (lambda: dmlops.resample(X, (1, 1, 2)), ValueError, "Resample: scales has 3 entries; x has 4 dimensions"),
    (lambda: dmlops.resample(X, (1, 1, 0, 2)), ValueError, r"scales\[2\] is 0; scales must be > 0"),
    (lambda: dmlops.resample(X, (1, 1, -2, 2)), ValueError, r"scales\[2\] is -2; scales must be > 0"),
    (lambda: dmlops.resample(X, (1, 1, float("inf"), 2)), ValueError, r"scales\[2\] is inf; it must be a finite FLOAT"),
    (lambda: dmlops.resample(X, (1, 1, float("nan"), 2)), ValueError, r"scales\[2\] is nan"),
    (lambda: dmlops.resample(X, (1, 1, 1e39, 2)), ValueError, "too large for a FLOAT"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), input_pixel_offsets=(0, 0, 0)), ValueError, "input_pixel_offsets has 3 entries"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), output_pixel_offsets=(0, 0, 0, float("nan"))), ValueError,
     r"output_pixel_offsets\[3\] is nan"),
    (lambda: dmlops.resample(X, (1, 1, 2, "2")), TypeError, "scales must contain numbers"),
    (lambda: dmlops.resample(X, (1, 1, 2, True)), TypeError, "scales must contain numbers"),
    (lambda: dmlops.resample(X, "2"), TypeError, "scales must be a sequence of numbers"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), "bilinear"), ValueError, "'linear' interpolates every resampled axis"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), "nearest"), ValueError, "'nearest' is 'nearest_neighbor'"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), rounding_direction="floor"), ValueError, "'decreasing'"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), antialiased=1), TypeError, "antialiased must be a bool"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), output_sizes=(1, 2, 6)), ValueError, "output_sizes has 3 entries"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), output_sizes=(1, 2, 0, 8)), ValueError, r"sizes\[2\] is 0"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2 ** 60)), ValueError, r"exceeds 2\^48"),
    (lambda: dmlops.resample(X.astype(np.int32), (1, 1, 2, 2), "linear"), TypeError,
     "linear interpolation needs float16, float32 or float64, not int32"),
    (lambda: dmlops.resample(np.zeros((1,) * 9), (1,) * 9), ValueError, "9 entries; at most 8"),
    (lambda: dmlops.resample(np.array(1.0), ()), ValueError, "0 dimensions"),
    (lambda: dmlops.resample(["a"], (2,)), TypeError, "input has dtype <U1"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), out=np.zeros((1, 2, 6, 8))), TypeError, "out has dtype float64"),
    (lambda: dmlops.resample(X, (1, 1, 2, 2), out=np.zeros((1, 2, 6, 7), np.float32)), ValueError, r"out has shape"),
    (lambda: dmlops.upsample_2d(X[0], 2), ValueError, "Upsample2D: input has 3 dimensions; Upsample2D takes 4"),
    (lambda: dmlops.upsample_2d(X, (0, 2)), ValueError, "scale_size height is 0; scales must be integers >= 1"),
    (lambda: dmlops.upsample_2d(X, (2, -1)), ValueError, "scale_size width is -1"),
    (lambda: dmlops.upsample_2d(X, (2, 1.5)), TypeError, "scale_size must contain integers"),
    (lambda: dmlops.upsample_2d(X, (2, 2, 2)), ValueError, r"scale_size has 3 entries; it is \(height, width\)"),
    (lambda: dmlops.upsample_2d(X, (1, 2 ** 50)), ValueError, r"exceeds 2\^48"),
    (lambda: dmlops.upsample_2d(X, 2, "cubic"), ValueError, "interpolation_mode 'cubic' is unknown"),
    (lambda: dmlops.upsample_2d(X.astype(np.uint8), 2, "linear"), TypeError, "linear interpolation needs"),
    (lambda: dmlops.upsample_2d(X, 2, out=np.zeros((1, 2, 6, 9), np.float32)), ValueError, "out has shape"),
    (lambda: dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=2,
                                   output=dmlops.TensorDesc("float32", (1, 1, 4, 7))), ValueError,
     r"output has sizes \(1, 1, 4, 7\) but the input sizes x scale_size are \(1, 1, 4, 6\)"),
    (lambda: dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=2,
                                   output=dmlops.TensorDesc("float16", (1, 1, 4, 6))), TypeError, "output has dtype float16"),
    (lambda: dmlops.Resample2Desc(dmlops.TensorDesc("float32", (3,)), scales=(2,), rounding_direction=None), TypeError,
     "rounding_direction must be a string"),
    (lambda: dmlops.Resample1Desc((3,), scales=(2,)), TypeError, "input must be a dmlops.TensorDesc"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_rejected_out_is_untouched():
    sentinel = np.full((1, 2, 6, 8), -123.0, np.float32)
    out = sentinel.copy()
    with pytest.raises(ValueError, match="scales"):
        dmlops.resample(X, (1, 1, 2, -2), out=out)
    with pytest.raises(ValueError, match="scale_size"):
        dmlops.upsample_2d(X, (2, 0), out=out)
    readonly = sentinel.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dmlops.upsample_2d(X, 2, out=readonly)
    np.testing.assert_array_equal(out, sentinel)


def test_out_overlapping_input_or_itself_is_rejected():
    buffer = np.zeros(200, np.float32)
    x = buffer[:8].reshape(1, 1, 2, 4)
    with pytest.raises(ValueError, match="shares memory with an input"):
        dmlops.upsample_2d(x, 2, out=buffer[4:36].reshape(1, 1, 4, 8))
    zero_stride = np.lib.stride_tricks.as_strided(buffer[100:], (1, 1, 4, 8), (0, 0, 0, 4))
    with pytest.raises(ValueError, match="overlapping elements"):
        dmlops.upsample_2d(np.ones((1, 1, 2, 4), np.float32), 2, "linear", out=zero_stride)
    np.testing.assert_array_equal(buffer, 0)


# ---------------------------------------------------------------------------------------------
# Differential fuzzing against the reference, garbage descriptors, hostile arrays (strategies.py)

SCALES = st.sampled_from([1.0, 2.0, 3.0, 0.5, 0.25, 1.5, 2.5, 0.75, 1 / 3, 1.75]) | st.floats(0.125, 5, width=32)


@st.composite
def resample_calls(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    mode = draw(st.sampled_from(["nearest_neighbor", "linear"]))
    dtype = draw(st.sampled_from(DTYPES if mode == "nearest_neighbor" else FLOATS))
    scales = tuple(draw(st.lists(SCALES, min_size=rank, max_size=rank)))
    offsets = st.lists(st.floats(-2, 2, width=32), min_size=rank, max_size=rank).map(tuple)
    form = draw(st.sampled_from(["resample", "ResampleDesc", "Resample1Desc", "Resample2Desc", "Resample3Desc"]))
    kwargs = {}
    if form != "ResampleDesc" and draw(st.booleans()):
        kwargs.update(input_pixel_offsets=draw(offsets), output_pixel_offsets=draw(offsets))
    if form in ("resample", "Resample2Desc", "Resample3Desc"):
        kwargs["rounding_direction"] = draw(st.sampled_from(["decreasing", "increasing"]
                                                            + ([None] if form == "resample" else [])))
    if form in ("resample", "Resample3Desc"):
        kwargs["antialiased"] = draw(st.booleans())
    out_shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    return dict(shape=shape, mode=mode, dtype=dtype, scales=scales, form=form, kwargs=kwargs, out_shape=out_shape)


@given(call=resample_calls(), threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_resample_matches_reference(call, threads, data):
    x = data.draw(arrays(call["shape"], call["dtype"], kind="bits" if call["mode"] == "nearest_neighbor" else "finite"))
    form, kwargs, out_shape, scales, mode = call["form"], call["kwargs"], call["out_shape"], call["scales"], call["mode"]
    out = data.draw(outs(out_shape, x.dtype))
    dmlops.set_num_threads(threads)
    if form == "resample":
        show_call(f"dmlops.resample(x, {scales!r}, {mode!r}, {kwargs_source(**kwargs)}, output_sizes={out_shape}, "
                  f"out=out)", x=x, out=out)
        run = lambda: dmlops.resample(x, scales, mode, output_sizes=out_shape, out=out, **kwargs)
    else:
        cls = getattr(dmlops, form)
        output = dmlops.TensorDesc(call["dtype"] if call["dtype"] != "bool" else "uint8", out_shape)
        show_call(f"dmlops.{form}(dmlops.TensorDesc.from_array(x), scales={scales!r}, interpolation_mode={mode!r}, "
                  f"{kwargs_source(**kwargs)}, output={output!r})(x, out=out)", x=x, out=out)
        run = lambda: cls(dmlops.TensorDesc.from_array(x), scales=scales, interpolation_mode=mode, output=output,
                          **kwargs)(x, out=out)
    y = run_and_check_inputs(run, out, x)
    in_off, out_off = kwargs.get("input_pixel_offsets"), kwargs.get("output_pixel_offsets")
    if mode == "nearest_neighbor":
        assert_same_bits(y, resample_reference(x, out_shape, scales, mode, in_off, out_off,
                                               kwargs.get("rounding_direction")))
    else:
        antialiased = kwargs.get("antialiased", False)
        assert y.dtype == x.dtype
        assert_linear_close(y, resample_reference(x, out_shape, scales, mode, in_off, out_off, None, antialiased),
                            resample_magnitude(x, out_shape, scales, in_off, out_off, antialiased), len(call["shape"]))


@given(rank=st.sampled_from([4, 5]), sizes=st.lists(st.integers(1, 4), min_size=5, max_size=5),
       scale=st.tuples(st.integers(1, 4), st.integers(1, 4)), mode=st.sampled_from(["nearest_neighbor", "linear"]),
       form=st.sampled_from(["upsample_2d", "Upsample2DDesc"]), threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_upsample_2d_matches_reference(rank, sizes, scale, mode, form, threads, data):
    shape = tuple(sizes[:rank])
    x = data.draw(arrays(shape, data.draw(st.sampled_from(DTYPES if mode == "nearest_neighbor" else FLOATS)),
                         kind="bits" if mode == "nearest_neighbor" else "finite"))
    out_shape = shape[:-2] + (shape[-2] * scale[0], shape[-1] * scale[1])
    out = data.draw(outs(out_shape, x.dtype))
    dmlops.set_num_threads(threads)
    if form == "upsample_2d":
        show_call(f"dmlops.upsample_2d(x, {scale}, {mode!r}, out=out)", x=x, out=out)
        run = lambda: dmlops.upsample_2d(x, scale, mode, out=out)
    else:
        show_call(f"dmlops.Upsample2DDesc(dmlops.TensorDesc.from_array(x), scale_size={scale}, "
                  f"interpolation_mode={mode!r})(x, out=out)", x=x, out=out)
        run = lambda: dmlops.Upsample2DDesc(dmlops.TensorDesc.from_array(x), scale_size=scale,
                                            interpolation_mode=mode)(x, out=out)
    y = run_and_check_inputs(run, out, x)
    scales = (1,) * (rank - 2) + scale
    if mode == "nearest_neighbor":
        assert_same_bits(y, resample_reference(x, out_shape, scales, mode))
    else:
        assert_linear_close(y, resample_reference(x, out_shape, scales, mode), resample_magnitude(x, out_shape, scales), 2)


WRONG_RESAMPLE = dict(input=[dmlops.TensorDesc("float32", (2, 3)), dmlops.TensorDesc("int8", (2, 2, 2))],
                      output=[dmlops.TensorDesc("float32", (4, 4)), dmlops.TensorDesc("float32", (2**30, 2**30, 1)),
                              dmlops.TensorDesc("float16", (2, 4, 6))],
                      scales=[(float("nan"), 1, 1), (0.0, 1, 1), (1e30, 1e30, 1), (1e-30, 1, 1), (-1.0, 2, 2),
                              (1e39, 1, 1), (2**1100, 1, 1)],
                      input_pixel_offsets=[(float("inf"), 0, 0), (1e39, 0, 0), (0, 0)],
                      output_pixel_offsets=[(float("nan"), 0, 0), (0,) * 9],
                      antialiased=[1, 0, np.bool_(True)],
                      rounding_direction=["up", None, 1])
VALID_RESAMPLE = dict(input=dmlops.TensorDesc("float32", (1, 2, 3)), scales=(1.0, 2.0, 1.5),
                      interpolation_mode="linear")


@pytest.mark.parametrize("cls", [dmlops.ResampleDesc, dmlops.Resample1Desc, dmlops.Resample2Desc, dmlops.Resample3Desc])
@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_resample_descriptors(cls, data):
    valid = dict(VALID_RESAMPLE)
    if cls is not dmlops.ResampleDesc:
        valid.update(input_pixel_offsets=(0.5, 0.25, 0.0), output_pixel_offsets=(-0.5, 0.0, 1.0))
    if cls in (dmlops.Resample2Desc, dmlops.Resample3Desc):
        valid["rounding_direction"] = "increasing"
    if cls is dmlops.Resample3Desc:
        valid["antialiased"] = True
    function_kwargs = {k: v for k, v in valid.items() if k != "input"}
    fuzz_garbage(data, cls, valid, WRONG_RESAMPLE, dmlops.resample, (np.zeros((1, 2, 3)),),
                 dict(function_kwargs, output_sizes=(1, 4, 4)), dict(WRONG_RESAMPLE, output_sizes=[(0, 1, 1), (2**62,) * 3]))


@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_upsample_2d_descriptors(data):
    valid = dict(input=dmlops.TensorDesc("float16", (1, 1, 2, 3)), scale_size=(2, 3), interpolation_mode="linear")
    wrong = dict(input=[dmlops.TensorDesc("float32", (2, 3)), dmlops.TensorDesc("int8", (1, 1, 2, 3))],
                 scale_size=[(0, 1), 2**40, (2**62, 2**62), 2.5, (2, 2, 2), -1, (2**33, 1)],
                 output=[dmlops.TensorDesc("float16", (1, 1, 4, 9)), dmlops.TensorDesc("float16", (1, 1, 4, 6), (0, 0, 0, 0))])
    fuzz_garbage(data, dmlops.Upsample2DDesc, valid, wrong, dmlops.upsample_2d, (np.zeros((1, 1, 2, 3)),),
                 dict(scale_size=(2, 3), interpolation_mode="linear"), wrong)


def test_hostile_inputs_are_rejected():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    check_hostile_inputs(lambda bad: dmlops.resample(bad, (1, 1, 2, 2), "linear"), x)
    check_hostile_inputs(lambda bad: dmlops.upsample_2d(bad, 2), x)
    check_hostile_inputs(dmlops.Resample3Desc(dmlops.TensorDesc.from_array(x), scales=(1, 1, 0.5, 2),
                                              rounding_direction="decreasing", antialiased=True), x)
    check_hostile_inputs(dmlops.Upsample2DDesc(dmlops.TensorDesc.from_array(x), scale_size=2), x)


@pytest.mark.parametrize("dtype", ["float32", "uint16", "bool"])
def test_bad_outs_are_rejected_and_left_untouched(dtype):
    x = np.ones((1, 1, 2, 2), dtype)
    check_bad_outs(lambda out: dmlops.resample(x, (1, 1, 2, 1.5), out=out), x, (1, 1, 4, 3), dtype)
    check_bad_outs(lambda out: dmlops.upsample_2d(x, 2, out=out), x, (1, 1, 4, 4), dtype)


@pytest.mark.parametrize("call", [lambda x: dmlops.upsample_2d(x, (2**33, 1)),
                                  lambda x: dmlops.upsample_2d(x, (2**22, 2**22)),
                                  lambda x: dmlops.resample(x, (1, 1, 2**20, 2**20))])
def test_gigantic_outputs_are_rejected_before_allocating(call):
    with pytest.raises(ValueError, match="(Upsample2D|Resample): .*(bytes|memory)"):
        call(np.zeros((1, 1, 2, 2), np.float32))


def test_linear_passes_in_a_given_order():
    """resample_in_order (what dmlops.dask runs a chunk with): the order that the kernel picks
    itself gives its bits; every other order of the resampled axes is the same filter rounded
    in another order (within a few ulps); an identity axis in the list is skipped; an order
    missing an axis, naming one twice or out of range is refused, naming pass_order."""
    from itertools import permutations

    from dmlops.resample import resample_in_order
    x = np.random.default_rng(8).standard_normal((2, 5, 7, 9))
    scales, offsets = (1.0, 0.6, 1.7, 0.45), dict(input_pixel_offsets=(0.5,) * 4, output_pixel_offsets=(-0.5,) * 4)
    kw = dict(rounding_direction=None, antialiased=True, output_sizes=(2, 3, 11, 4), **offsets)
    default = dmlops.resample(x, scales, "linear", antialiased=True)
    tiles = dmlops._core.resample_plan("Resample", ("float64", x.shape, None), None, "linear", None, list(scales),
                                       None, None, True)["tiles"]
    chosen = (tiles["pass1"], tiles["pass2"], tiles["pass3"])
    np.testing.assert_array_equal(resample_in_order(x, scales, chosen, **kw), default)
    np.testing.assert_array_equal(resample_in_order(x, scales, (0,) + chosen, **kw), default)
    for order in permutations((1, 2, 3)):
        np.testing.assert_allclose(resample_in_order(x, scales, order, **kw), default, rtol=1e-13, atol=1e-13)
    for order, match in [((1, 2), "names 2 of the 3"), ((1, 2, 2, 3), "names dimension 2 twice"),
                         ((9, 1, 2), r"pass_order\[0\] is 9"), ((-1, 1, 2, 3), r"pass_order\[0\] is -1")]:
        with pytest.raises(ValueError, match=match):
            resample_in_order(x, scales, order, **kw)


# Nearest upsampling whose output is too large for the caches (and several times its input)
# writes its rows through a buffer in L1, streamed out whole lines at a time; a 256 KiB "L3" makes
# these small ones take that path (the plan says so). Factors that repeat rows, columns or both,
# rows that are not whole lines (uint8 by 3), `out` views at every alignment within a line (the
# lines that start and end a task are written with ordinary stores), a strided `out` (not
# streamed) and thread counts that cut the rows unevenly: every result bit for bit numpy's.
# Whatever the thread count: the 1x4x40x64 input and its output take 200 KiB, past three quarters
# of the "L3" but within half of it per thread at 2 threads and more (the threads share that cache).
STREAMING_CHECK = """
import numpy as np, dmlops
from dmlops import _core
assert _core.cache_sizes()["l3"] == 1 << 18
rng = np.random.default_rng(9)
def nearest(x, sh, sw):
    return np.repeat(np.repeat(x, sh, axis=2), sw, axis=3)
cases = [(rng.standard_normal((2, 5, 96, 80)).astype(np.float32), (2, 2)),
         (rng.standard_normal((1, 7, 64, 200)).astype(np.float32), (2, 1)),
         (rng.standard_normal((1, 7, 64, 200)).astype(np.float32), (1, 2)),
         (rng.integers(0, 256, (1, 3, 200, 170), dtype=np.uint8), (3, 3)),
         (rng.standard_normal((3, 4, 70, 90)).astype(np.float16), (4, 2)),
         (rng.standard_normal((1, 4, 40, 64)).astype(np.float32), (2, 2))]
for threads in (1, 2, 3, 7):
    with dmlops.threads(threads):
        for x, (sh, sw) in cases:
            expected = nearest(x, sh, sw)
            desc = dmlops.Upsample2DDesc(dmlops.TensorDesc(x.dtype.name, x.shape), scale_size=(sh, sw))
            assert desc.plan().tiles.get("streamed") == 1, (x.shape, sh, sw, threads)
            assert np.array_equal(dmlops.upsample_2d(x, (sh, sw)).view(np.uint8), expected.view(np.uint8))
            for offset in (1, 16, 40, 63):
                buffer = np.zeros(expected.nbytes + 64, np.uint8)
                out = buffer[offset:offset + expected.nbytes].view(x.dtype).reshape(expected.shape)
                dmlops.upsample_2d(x, (sh, sw), out=out)
                assert np.array_equal(out.view(np.uint8), expected.view(np.uint8)), (offset, x.shape, sh, sw, threads)
                assert not buffer[:offset].any() and not buffer[offset + expected.nbytes:].any()
            strided = np.zeros(expected.shape[:3] + (expected.shape[3] * 2,), x.dtype)[..., ::2]
            dmlops.upsample_2d(x, (sh, sw), out=strided)
            assert np.array_equal(strided.view(np.uint8) if strided.flags.c_contiguous else strided.copy().view(np.uint8),
                                  expected.view(np.uint8))
print("ok")
"""


def run_with_a_256k_cache(code: str, *args: str):
    """Runs `code` in a new interpreter whose dmlops sees caches of 32K/128K/256K (read once per
    process), so that small arrays take the paths of outputs larger than the cache."""
    import os
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DMLOPS_CACHE_SIZES": "32K,128K,256K"})
    assert result.returncode == 0, result.stderr
    return result


def test_outputs_larger_than_the_cache_stream_bit_exactly():
    result = run_with_a_256k_cache(STREAMING_CHECK)
    assert result.stdout.strip() == "ok"


# Streamed outputs whose rows (and planes) repeat unevenly: nearest resampling by non-integer
# factors writes a row equal to the one before it by gathering it again (a copy would read the
# streamed output back). The 256 KiB "L3" makes these take the streamed path (the plan says so);
# every result bit for bit the reference's, on 1, 2 and 3 threads.
STREAMING_REPEATS = """
import sys
import numpy as np, dmlops
from dmlops import _core
assert _core.cache_sizes()["l3"] == 1 << 18
rng = np.random.default_rng(11)
results = {}
for i, (shape, dtype, scales) in enumerate(CASES):
    x = rng.standard_normal(shape).astype(dtype)
    for threads in (1, 2, 3):
        with dmlops.threads(threads):
            desc = dmlops.ResampleDesc(dmlops.TensorDesc(x.dtype.name, x.shape), scales=scales)
            assert desc.plan().tiles.get("streamed") == 1, (shape, scales, threads)
            results[f"{i}_{threads}"] = dmlops.resample(x, scales)
np.savez(sys.argv[1], **results)
"""
STREAMING_REPEAT_CASES = [((1, 4, 48, 64), "float32", (1, 1, 1.75, 1.75)),
                          ((1, 4, 64, 96), "float16", (1, 1, 2.5, 1.5)),
                          ((1, 2, 6, 32, 48), "float32", (1, 1, 1.5, 1.5, 1.75))]


def test_streamed_outputs_gather_repeated_rows_again_bit_exactly(tmp_path):
    path = tmp_path / "streamed.npz"
    run_with_a_256k_cache(f"CASES = {STREAMING_REPEAT_CASES!r}\n" + STREAMING_REPEATS, str(path))
    saved = np.load(path)
    rng = np.random.default_rng(11)
    for i, (shape, dtype, scales) in enumerate(STREAMING_REPEAT_CASES):
        x = rng.standard_normal(shape).astype(dtype)
        expected = resample_reference(x, default_out_shape(shape, scales), scales, "nearest_neighbor", None, None, None)
        for threads in (1, 2, 3):
            assert_same_bits(saved[f"{i}_{threads}"], expected)
