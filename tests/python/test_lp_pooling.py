"""LpPooling / LpPooling1 (docs/semantics/lp_pooling.md) against the plain reference in reference.py.

Tolerances, relative to the float64 reference, per output (taps = the window's size):
float32 (taps + 4) * 2^-24, float64 (taps + 4) * 2^-53 (the reference itself is float64, so
twice that), float16 2^-10 + taps * 2^-24 (one rounding of an fp32 result); plus a few of the
dtype's smallest subnormals for tiny results. NaN must be NaN, inf +inf, 0 exactly 0.
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlops
from reference import lp_pooling_reference
from strategies import (arrays, check_bad_outs, check_hostile_inputs, fuzz_garbage, garbage_settings, kwargs_source,
                        outs, run_and_check_inputs, show_call)

FLOATS = ("float32", "float16", "float64")


def reference(x, window, strides=None, start=None, end=None, dilations=None, p=2):
    d = x.ndim - 2
    return lp_pooling_reference(x, window, strides or (1,) * d, start or (0,) * d, end or (0,) * d,
                                dilations or (1,) * d, p)


def assert_close(actual: np.ndarray, expected: np.ndarray, taps: int):
    """The module docstring's tolerance table."""
    dtype = actual.dtype
    assert actual.shape == expected.shape
    got = actual.astype(np.float64)
    if dtype == np.float16:
        rel, tiny = 2.0**-10 + taps * 2.0**-24, 2.0**-24
        expected = np.where(np.abs(expected) >= 65520, np.inf, expected)  # rounds to inf in half
    elif dtype == np.float32:
        rel, tiny = (taps + 4) * 2.0**-24, float(np.finfo(np.float32).smallest_subnormal)
        # A norm beyond float32's range is inf in float32; within the tolerance of the edge,
        # either inf or the largest floats are right.
        big = float(np.finfo(np.float32).max)
        edge = (np.abs(expected) >= big * (1 - rel)) & (np.abs(expected) <= big * (1 + rel)) & np.isinf(got)
        expected = np.where((np.abs(expected) > big * (1 + rel)) | edge, np.inf, expected)
    else:
        rel, tiny = 2 * (taps + 4) * 2.0**-53, float(np.finfo(np.float64).smallest_subnormal)
    nan, inf, zero = np.isnan(expected), np.isinf(expected), expected == 0
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg="NaN where the reference has none, or none where it has")
    np.testing.assert_array_equal(got[inf], expected[inf])
    np.testing.assert_array_equal(got[zero], 0.0)
    finite = ~(nan | inf | zero)
    error = np.abs(got[finite] - expected[finite])
    bound = rel * np.abs(expected[finite]) + 4 * tiny
    assert np.all(error <= bound), f"max relative error {np.max(error / np.abs(expected[finite])):.3g}, bound {rel:.3g}"


def random_input(rng, shape, dtype, scale=3.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


# ---------------------------------------------------------------------------------------------
# The issue's examples and the docstrings

def test_issue_examples():
    rng = np.random.default_rng(0)
    x = random_input(rng, (2, 4, 9, 10), "float32")
    y = dmlops.lp_pooling(x, window_size=(3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1), p=2)
    assert y.shape == (2, 4, 5, 5) and y.dtype == np.float32 and y.flags.c_contiguous
    assert_close(y, reference(x, (3, 3), (2, 2), (1, 1), (1, 1), p=2), 9)

    x5d = random_input(rng, (1, 3, 6, 7, 8), "float64")
    y = dmlops.lp_pooling(x5d, window_size=(2, 2, 2), dilations=(2, 2, 2), p=3)
    assert y.shape == (1, 3, 4, 5, 6)
    assert_close(y, reference(x5d, (2, 2, 2), dilations=(2, 2, 2), p=3), 8)

    d1 = dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", x.shape), window_size=(3, 3), strides=(2, 2),
                               start_padding=(1, 1), end_padding=(1, 1), dilations=(1, 1), p=2)
    np.testing.assert_array_equal(d1(x), dmlops.lp_pooling(x, (3, 3), strides=(2, 2), start_padding=(1, 1),
                                                           end_padding=(1, 1)))
    d0 = dmlops.LpPoolingDesc(dmlops.TensorDesc("float32", x.shape), window_size=(3, 3), strides=(2, 2),
                              start_padding=(1, 1), end_padding=(1, 1), p=2)
    np.testing.assert_array_equal(d0(x), d1(x))


def test_docstring_examples():
    x = np.array([[[3.0, -4.0, 0.0, 12.0, -5.0]]])
    np.testing.assert_array_equal(dmlops.lp_pooling(x, (2,), strides=(2,), end_padding=(1,)), [[[5.0, 12.0, 5.0]]])
    np.testing.assert_array_equal(dmlops.lp_pooling(x, (2,), dilations=(3,), p=1), [[[15.0, 9.0]]])
    d = dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", (1, 1, 4, 4)), window_size=(2, 2), strides=(2, 2), p=1)
    assert d.output.sizes == (1, 1, 2, 2)
    np.testing.assert_array_equal(d(np.ones((1, 1, 4, 4), np.float32)), np.full((1, 1, 2, 2), 4.0, np.float32))


def test_hand_computed_values():
    # 3-4-5 and 5-12-13 triangles, a p = 3 norm of (-1, -2, 2) = 17^(1/3), and padding
    # contributing nothing: the first window of [[6, 8]] padded by 1 on the left is (0, 6).
    x = np.array([[[[3.0, 4.0], [5.0, 12.0]]]])
    np.testing.assert_allclose(dmlops.lp_pooling(x, (1, 2)), [[[[5.0], [13.0]]]])
    np.testing.assert_allclose(dmlops.lp_pooling(np.array([[[-1.0, -2.0, 2.0]]]), (3,), p=3), [[[17 ** (1 / 3)]]])
    np.testing.assert_array_equal(dmlops.lp_pooling(np.array([[[6.0, 8.0]]]), (2,), start_padding=(1,)),
                                  [[[6.0, 10.0]]])


# ---------------------------------------------------------------------------------------------
# Random sweep: ranks 3-5, every dtype, windows, strides, dilations, asymmetric paddings, p

def sweep_case(seed: int):
    rng = np.random.default_rng(seed)
    spatial = int(rng.integers(1, 4))
    max_size = {1: 30, 2: 10, 3: 6}[spatial]
    sizes = [int(s) for s in rng.integers(1, max_size + 1, size=spatial)]
    window = [int(w) for w in rng.integers(1, 5, size=spatial)]
    strides = [int(s) for s in rng.integers(1, 4, size=spatial)]
    dilations = [int(s) for s in rng.integers(1, 4, size=spatial)]
    start = [int(s) for s in rng.integers(0, 4, size=spatial)]
    end = [int(s) for s in rng.integers(0, 4, size=spatial)]
    for a in range(spatial):  # make the window fit
        extent = (window[a] - 1) * dilations[a] + 1
        if sizes[a] + start[a] + end[a] < extent:
            end[a] += extent - (sizes[a] + start[a] + end[a])
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *sizes)
    p = (1, 2, 2, 3, 4, 5, 7, 30)[seed % 8]
    dtype = FLOATS[seed % 3]
    return rng, shape, window, strides, dilations, start, end, p, dtype


@pytest.mark.parametrize("seed", range(150))
def test_random_sweep(seed):
    rng, shape, window, strides, dilations, start, end, p, dtype = sweep_case(seed)
    x = random_input(rng, shape, dtype)
    y = dmlops.lp_pooling(x, window, strides=strides, start_padding=start, end_padding=end, dilations=dilations, p=p)
    assert y.dtype == x.dtype
    assert_close(y, reference(x, window, strides, start, end, dilations, p), int(np.prod(window)))


@pytest.mark.parametrize("seed", range(40))
def test_random_strided_views_and_out(seed):
    """Inputs with negative, zero and non-contiguous strides (read in place), and strided out=."""
    rng, shape, window, strides, dilations, start, end, p, dtype = sweep_case(seed + 1000)
    base = random_input(rng, tuple(s * 2 + 1 for s in shape), dtype)
    view = base[tuple(slice(None, None, int(rng.choice([-2, -1, 1, 2]))) for _ in shape)]
    view = view[tuple(slice(0, s) for s in shape)]
    if rng.random() < 0.5:  # channels-last-like memory order, logically NC...
        view = np.moveaxis(np.moveaxis(view, 1, -1).copy(), -1, 1)
    if rng.random() < 0.3:  # a broadcast (zero-stride) axis
        axis = int(rng.integers(0, view.ndim))
        view = np.broadcast_to(view.take([0], axis=axis), view.shape)
    expected = reference(view, window, strides, start, end, dilations, p)
    big = np.full(tuple(s * 2 for s in expected.shape), 7, dtype=view.dtype)
    out = np.flip(big[tuple(slice(None, None, 2) for _ in expected.shape)], axis=-1)
    result = dmlops.lp_pooling(view, window, strides=strides, start_padding=start, end_padding=end,
                               dilations=dilations, p=p, out=out)
    assert result is out
    assert_close(out, expected, int(np.prod(window)))
    untouched = np.ones(big.shape, bool)
    untouched[tuple(slice(None, None, 2) for _ in expected.shape)] = False
    assert np.all(big[untouched] == 7), "out= wrote outside its elements"


@given(data=st.data(), spatial=st.integers(1, 3), p=st.integers(1, 9))
def test_property_matches_reference(data, spatial, p):
    sizes = data.draw(st.lists(st.integers(1, 7), min_size=spatial, max_size=spatial))
    window = data.draw(st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial))
    strides = data.draw(st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial))
    dilations = data.draw(st.lists(st.integers(1, 2), min_size=spatial, max_size=spatial))
    start = data.draw(st.lists(st.integers(0, 3), min_size=spatial, max_size=spatial))
    end = [max(0, (w - 1) * d + 1 - n - s) + e
           for w, d, n, s, e in zip(window, dilations, sizes, start,
                                    data.draw(st.lists(st.integers(0, 3), min_size=spatial, max_size=spatial)))]
    x = np.arange(np.prod(sizes) * 2, dtype=np.float64).reshape((1, 2, *sizes)) - 5.5
    y = dmlops.lp_pooling(x, window, strides=strides, start_padding=start, end_padding=end, dilations=dilations, p=p)
    assert_close(y, reference(x, window, strides, start, end, dilations, p), int(np.prod(window)))


# ---------------------------------------------------------------------------------------------
# Signs, magnitudes, specials

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [1, 3, 5, 7])
def test_negative_inputs_with_odd_p_give_the_norm(dtype, p):
    # PyTorch computes x**p without |x|: an all-negative window gives a negative or NaN result.
    x = np.full((1, 1, 4, 4), -2.0, dtype=dtype)
    y = dmlops.lp_pooling(x, (2, 2), strides=(2, 2), p=p)
    np.testing.assert_allclose(y.astype(np.float64), 2.0 * 4.0 ** (1 / p), rtol=2e-3)
    rng = np.random.default_rng(p)
    x = -np.abs(random_input(rng, (2, 3, 8, 9), dtype))
    assert_close(dmlops.lp_pooling(x, (3, 2), p=p), reference(x, (3, 2), p=p), 6)


@pytest.mark.parametrize("p", range(3, 11))
def test_roots_of_one_tap_are_within_an_ulp(p):
    # One tap: the norm is |x|. In float32 the p-th root of |x|^p (p <= 8: the vectorised Newton
    # root; above, pow and a Newton step) is within an ulp of |x|, over the whole range and past
    # both ends of the fast path (repaired outputs). Every finite float16 comes back exactly: the
    # float32 result rounds to |x| once.
    magnitudes = np.exp2(np.linspace(np.log2(np.finfo(np.float32).tiny) / p - 4, 128 / p, 5001))
    x = (magnitudes * np.resize([1, -1], magnitudes.size)).astype(np.float32).reshape(1, 1, -1)
    y = dmlops.lp_pooling(x, (1,), p=p)
    assert np.all(np.abs(y - np.abs(x)) <= np.spacing(np.abs(x))), f"p={p}: more than an ulp from |x|"
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    halves = halves[np.isfinite(halves)].reshape(1, 1, -1)
    np.testing.assert_array_equal(dmlops.lp_pooling(halves, (1,), p=p), np.abs(halves))


@pytest.mark.parametrize("p", [30, 101, 2**32 - 1])
def test_large_p_with_large_values_does_not_overflow(p):
    rng = np.random.default_rng(p % 1000)
    # Scales keep the norms (up to 9^(1/30) = 1.08 times the largest |x|) finite in each dtype.
    for dtype, scale in (("float32", 1e37), ("float64", 1e300), ("float16", 1e4)):
        x = np.clip(random_input(rng, (1, 3, 7, 8), "float64", scale), -np.finfo(dtype).max, np.finfo(dtype).max)
        x = x.astype(dtype)
        y = dmlops.lp_pooling(x, (3, 3), start_padding=(1, 1), end_padding=(1, 1), p=p)
        assert np.all(np.isfinite(y)), f"{dtype}: overflow"
        assert_close(y, reference(x, (3, 3), start=(1, 1), end=(1, 1), p=p), 9)
    if p == 2**32 - 1:  # the norm is the window's max |x| up to (taps)^(1/p) - 1 ~ 5e-10
        x = random_input(rng, (1, 2, 5, 5), "float64")
        y = dmlops.lp_pooling(x, (2, 2), p=p)
        windows = np.lib.stride_tricks.sliding_window_view(np.abs(x), (2, 2), axis=(2, 3))
        np.testing.assert_allclose(y, windows.max(axis=(-1, -2)), rtol=1e-9)


@pytest.mark.parametrize("dtype,scale", [("float32", 1e30), ("float32", 1e-25), ("float32", 1e-41),
                                         ("float64", 1e300), ("float64", 1e-170), ("float16", 1e-7)])
def test_p2_with_squares_that_overflow_or_underflow(dtype, scale):
    rng = np.random.default_rng(5)
    x = random_input(rng, (1, 2, 7, 7), "float64", scale).astype(dtype)
    y = dmlops.lp_pooling(x, (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1), p=2)
    assert_close(y, reference(x, (3, 3), (2, 2), (1, 1), (1, 1), p=2), 9)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [1, 2, 3, 30])
def test_nan_propagates_and_inf_gives_inf(dtype, p):
    nan, inf = np.nan, np.inf
    x = np.array([[[nan, 1, 2, 3],
                   [4, -inf, 6, 7],
                   [0, 0, inf, nan],
                   [0, 0, 0, 0]]], dtype=dtype)[None]
    y = dmlops.lp_pooling(x, (2, 2), p=p)
    # NaN wins over inf; inf (of either sign) gives +inf; the all-zero window gives 0.
    specials = np.array([[nan, inf, 0], [inf, inf, nan], [0, inf, nan]])
    where = np.isnan(specials) | np.isinf(specials) | (np.arange(9).reshape(3, 3) == 6)
    np.testing.assert_array_equal(y[0, 0][where], specials[where].astype(dtype))
    norm = 18.0 if p == 1 else float(np.sum(np.array([2.0, 3, 6, 7]) ** p) ** (1 / p))
    np.testing.assert_allclose(float(y[0, 0, 0, 2]), norm, rtol=2e-3 if dtype == "float16" else 1e-6)
    assert_close(y, reference(x, (2, 2), p=p), 4)


def test_float16_accumulates_in_float32_and_rounds_once():
    # 4096 terms of 1.0 sum exactly in float32; float16 accumulation would stop at 2048.
    x = np.ones((1, 1, 64, 64), np.float16)
    assert dmlops.lp_pooling(x, (64, 64), p=1)[0, 0, 0, 0] == 4096
    # Beyond the largest half (65504) the rounded result is inf.
    assert np.isinf(dmlops.lp_pooling(np.full((1, 1, 2, 2), 60000, np.float16), (2, 2), p=1)[0, 0, 0, 0])


def test_signed_zeros_give_positive_zero():
    x = np.array([[[[-0.0, 0.0], [-0.0, -0.0]]]], np.float32)
    for p in (1, 2, 3):
        y = dmlops.lp_pooling(x, (2, 2), p=p)
        assert y[0, 0, 0, 0] == 0 and not np.signbit(y[0, 0, 0, 0])


# ---------------------------------------------------------------------------------------------
# threads

@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_thread_counts_give_identical_bits(threads):
    rng = np.random.default_rng(threads)
    x = random_input(rng, (2, 7, 33, 35), "float32")
    long_row = random_input(rng, (1, 1, 50_001), "float32")
    dmlops.set_num_threads(1)
    expected = [dmlops.lp_pooling(x, (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1), p=p)
                for p in (1, 2, 3)]
    expected_row = dmlops.lp_pooling(long_row, (5,), strides=(2,), p=2)
    dmlops.set_num_threads(threads)
    assert dmlops.get_num_threads() == threads
    for p, e in zip((1, 2, 3), expected):
        got = dmlops.lp_pooling(x, (3, 3), strides=(2, 2), start_padding=(1, 1), end_padding=(1, 1), p=p)
        np.testing.assert_array_equal(got.view(np.uint32), e.view(np.uint32))
    np.testing.assert_array_equal(dmlops.lp_pooling(long_row, (5,), strides=(2,), p=2), expected_row)
    assert_close(expected[1], reference(x, (3, 3), (2, 2), (1, 1), (1, 1), p=2), 9)


def test_concurrent_python_threads():
    rng = np.random.default_rng(3)
    inputs = [random_input(rng, (2, 8, 30, 30), "float32") for _ in range(6)]
    expected = [dmlops.lp_pooling(x, (3, 3), strides=(2, 2), p=3) for x in inputs]
    results: dict[int, np.ndarray] = {}

    def work(i):
        for _ in range(5):
            results[i] = dmlops.lp_pooling(inputs[i], (3, 3), strides=(2, 2), p=3)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(6):
        np.testing.assert_array_equal(results[i], expected[i])


# ---------------------------------------------------------------------------------------------
# descriptors

def make_desc(cls=dmlops.LpPooling1Desc, **overrides):
    fields = dict(input=dmlops.TensorDesc("float16", (2, 3, 10, 12)), window_size=(3, 2), strides=(2, 1),
                  start_padding=(1, 0), end_padding=(1, 2), p=3)
    if cls is dmlops.LpPooling1Desc:
        fields["dilations"] = (2, 1)
    fields.update(overrides)
    return cls(**fields)


def test_descriptor_fields_and_defaults():
    d = make_desc()
    assert d.input == dmlops.TensorDesc("float16", (2, 3, 10, 12))
    assert d.output == dmlops.TensorDesc("float16", (2, 3, 4, 13)) and d.output_shape == (2, 3, 4, 13)
    assert (d.window_size, d.strides, d.dilations, d.start_padding, d.end_padding, d.p) == \
        ((3, 2), (2, 1), (2, 1), (1, 0), (1, 2), 3)
    plain = dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", (1, 1, 5, 5)), window_size=(2, 2))
    assert (plain.strides, plain.dilations, plain.start_padding, plain.end_padding, plain.p) == \
        ((1, 1), (1, 1), (0, 0), (0, 0), 2)
    v1 = make_desc(dmlops.LpPoolingDesc)
    assert not hasattr(v1, "dilations") and v1.output.sizes == (2, 3, 5, 13)
    with pytest.raises(AttributeError):
        d.p = 2
    with pytest.raises(TypeError):
        dmlops.LpPoolingDesc(dmlops.TensorDesc("float32", (1, 1, 5, 5)), window_size=(2, 2), dilations=(1, 1))


def test_descriptor_to_dict_is_dxdispatch_json():
    d = make_desc()
    assert d.to_dict() == {
        "InputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3, 10, 12]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3, 4, 13]},
        "DimensionCount": 2,
        "Strides": [2, 1],
        "WindowSize": [3, 2],
        "StartPadding": [1, 0],
        "EndPadding": [1, 2],
        "Dilations": [2, 1],
        "P": 3,
    }
    # DirectML's member order (DML_LP_POOLING1_OPERATOR_DESC)
    assert list(d.to_dict()) == ["InputTensor", "OutputTensor", "DimensionCount", "Strides", "WindowSize",
                                 "StartPadding", "EndPadding", "Dilations", "P"]
    assert list(make_desc(dmlops.LpPoolingDesc).to_dict()) == [
        "InputTensor", "OutputTensor", "DimensionCount", "Strides", "WindowSize", "StartPadding", "EndPadding", "P"]


@pytest.mark.parametrize("desc", [
    make_desc(),
    make_desc(dmlops.LpPoolingDesc),
    make_desc(input=dmlops.TensorDesc("float64", (1, 2, 5, 6, 7), strides=(420, 210, 42, 7, 1)),
              window_size=(2, 2, 2), strides=(1, 1, 1), dilations=(1, 2, 3), start_padding=(0, 0, 0),
              end_padding=(0, 1, 2), p=2**32 - 1),
    dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", (1, 1, 9)), window_size=(4,), p=1),
])
def test_descriptor_round_trips(desc):
    assert type(desc).from_dict(desc.to_dict()) == desc
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert hash(pickle.loads(pickle.dumps(desc))) == hash(desc)
    assert eval(repr(desc), {"LpPooling1Desc": dmlops.LpPooling1Desc, "LpPoolingDesc": dmlops.LpPoolingDesc,
                             "TensorDesc": dmlops.TensorDesc}) == desc


def test_descriptor_equality_compares_every_field():
    d = make_desc()
    assert d == make_desc()
    for change in ({"window_size": (3, 3)}, {"strides": (1, 1)}, {"dilations": (1, 1)}, {"start_padding": (0, 0)},
                   {"end_padding": (1, 1)}, {"p": 2}, {"input": dmlops.TensorDesc("float32", (2, 3, 10, 12))}):
        assert d != make_desc(**change), change
    assert make_desc(dmlops.LpPoolingDesc) != make_desc(dilations=(1, 1))


@pytest.mark.parametrize("change,error,message", [
    ({"Bogus": 1}, ValueError, "unknown field"),
    ({"DimensionCount": 3}, ValueError, "DimensionCount"),
    ({"P": 0}, ValueError, "p is 0"),
    ({"P": 2.5}, TypeError, "p must be an integer"),
    ({"Dilations": [0, 1]}, ValueError, r"dilations\[0\] is 0"),
    ({"OutputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3, 4, 12]}}, ValueError, "output has sizes"),
    ({"OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 13]}}, TypeError, "output has dtype float32"),
])
def test_descriptor_from_dict_rejects(change, error, message):
    d = make_desc().to_dict()
    d.update(change)
    with pytest.raises(error, match=message):
        dmlops.LpPooling1Desc.from_dict(d)


def test_from_dict_needs_every_member():
    for missing in ("P", "Dilations", "WindowSize", "InputTensor"):
        d = make_desc().to_dict()
        del d[missing]
        with pytest.raises(ValueError, match=f"{missing}.* is missing"):
            dmlops.LpPooling1Desc.from_dict(d)
    with pytest.raises(ValueError, match="unknown field.*Dilations"):
        dmlops.LpPoolingDesc.from_dict(make_desc().to_dict())


def test_descriptor_checks_arrays_it_runs_on():
    d = make_desc()
    x = np.zeros((2, 3, 10, 12), np.float16)
    with pytest.raises(TypeError, match="dtype float32 but the descriptor says float16"):
        d(x.astype(np.float32))
    with pytest.raises(ValueError, match=r"shape \(2, 3, 12, 10\)"):
        d(np.zeros((2, 3, 12, 10), np.float16))
    with pytest.raises(TypeError, match="input has dtype float64 but the descriptor says float16"):
        d(x.tolist())
    out = np.empty((2, 3, 4, 13), np.float16)
    assert d(x, out=out) is out
    np.testing.assert_array_equal(out, 0)


# ---------------------------------------------------------------------------------------------
# bad input: a clear exception, nothing written

X = np.arange(2 * 3 * 6 * 7, dtype=np.float32).reshape(2, 3, 6, 7)


@pytest.mark.parametrize("call,error,message", [
    (lambda: dmlops.lp_pooling(X, (3, 3), p=0), ValueError, "LpPooling1: p is 0; it must be >= 1"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p=-2), ValueError, "p is -2"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p=2**32), ValueError, "p is 4294967296; P is a UINT, at most 4294967295"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p=2**64), ValueError, "P is a UINT"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p=2.0), TypeError, "p must be an integer, not float"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p=True), TypeError, "p must be an integer, not bool"),
    (lambda: dmlops.lp_pooling(X, (3, 3), p="2"), TypeError, "p must be an integer, not str"),
    (lambda: dmlops.lp_pooling(X[0, 0], (3, 3)), ValueError, "input has 2 dimensions; it must be 4-D"),
    (lambda: dmlops.lp_pooling(X.reshape(1, 1, 2, 3, 6, 7), (1, 1, 3, 3)), ValueError, "input has 6 dimensions"),
    (lambda: dmlops.lp_pooling(X.astype(np.int32), (3, 3)), TypeError, "input has dtype int32; supported: float32"),
    (lambda: dmlops.lp_pooling(X > 3, (3, 3)), TypeError, "input has dtype bool"),
    (lambda: dmlops.lp_pooling(X, (3,)), ValueError,
     "window_size has 1 entries but the input has 2 spatial dimensions"),
    (lambda: dmlops.lp_pooling(X, (3, 3), strides=(1, 1, 1)), ValueError, "strides has 3 entries"),
    (lambda: dmlops.lp_pooling(X, (3, 3), start_padding=(1,)), ValueError, "start_padding has 1 entries"),
    (lambda: dmlops.lp_pooling(X, (3, 3), end_padding=()), ValueError, "end_padding has 0 entries"),
    (lambda: dmlops.lp_pooling(X, (3, 3), dilations=(1,)), ValueError, "dilations has 1 entries"),
    (lambda: dmlops.lp_pooling(X, (3, 0)), ValueError, r"window_size\[1\] is 0; it must be >= 1"),
    (lambda: dmlops.lp_pooling(X, (3, 3), strides=(0, 1)), ValueError, r"strides\[0\] is 0; it must be >= 1"),
    (lambda: dmlops.lp_pooling(X, (3, 3), dilations=(1, 0)), ValueError, r"dilations\[1\] is 0; it must be >= 1"),
    (lambda: dmlops.lp_pooling(X, (3, 3), start_padding=(0, -1)), ValueError, r"start_padding\[1\] is -1"),
    (lambda: dmlops.lp_pooling(X, (7, 3)), ValueError,
     r"on spatial dimension 0 the window extent 7 \(window_size 7, dilation 1\) is larger than the padded input 6"),
    (lambda: dmlops.lp_pooling(X, (3, 3), dilations=(1, 4)), ValueError, "window extent 9 .* padded input 7"),
    (lambda: dmlops.lp_pooling(X, (3, 3), strides=(2**41, 1)), ValueError, "too large"),
    (lambda: dmlops.lp_pooling(X, (3, 1.5)), TypeError, "window_size must contain integers, got 1.5"),
    (lambda: dmlops.lp_pooling(X, 3.0), TypeError, "window_size must be a sequence of integers, not float"),
    (lambda: dmlops.lp_pooling(None, (3, 3)), TypeError, "input must be array_like, not None"),
    (lambda: dmlops.lp_pooling(X, (3, 3), out=np.zeros((2, 3, 4, 5), np.float64)), TypeError, "out has dtype float64"),
    (lambda: dmlops.lp_pooling(X, (3, 3), out=np.zeros((2, 3, 4, 4), np.float32)), ValueError,
     r"out has shape \(2, 3, 4, 4\) but the result has \(2, 3, 4, 5\)"),
    (lambda: dmlops.lp_pooling(X, (3, 3), out=[0.0]), TypeError, "out must be an array to write in place"),
    (lambda: dmlops.LpPooling1Desc((2, 3, 6, 7), window_size=(3, 3)), TypeError, "TensorDesc"),
    (lambda: dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", (2, 3, 6, 7)), window_size=(3, 3),
                                   output=dmlops.TensorDesc("float32", (2, 3, 4, 4))), ValueError,
     r"LpPooling1: output has sizes \(2, 3, 4, 4\) but the window geometry gives \(2, 3, 4, 5\)"),
    (lambda: dmlops.LpPoolingDesc(dmlops.TensorDesc("int8", (2, 3, 6, 7)), window_size=(3, 3)), TypeError,
     "LpPooling: input has dtype int8"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_rejected_out_is_untouched():
    sentinel = np.full((2, 3, 4, 5), -123.0, np.float32)
    readonly = sentinel.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dmlops.lp_pooling(X, (3, 3), out=readonly)
    out = sentinel.copy()
    for bad in ({"p": 0}, {"strides": (1, 1, 1)}, {"dilations": (9, 9)}):
        with pytest.raises(ValueError):
            dmlops.lp_pooling(X, (3, 3), out=out, **bad)
    np.testing.assert_array_equal(out, sentinel)


def test_out_overlapping_input_or_itself_is_rejected():
    buffer = np.zeros(400, np.float32)
    x = buffer[:252].reshape(2, 3, 6, 7)
    with pytest.raises(ValueError, match="shares memory with an input"):
        dmlops.lp_pooling(x, (3, 3), out=buffer[200:320].reshape(2, 3, 4, 5))
    zero_stride = np.lib.stride_tricks.as_strided(buffer[300:], (2, 3, 4, 5), (0, 80, 20, 4))
    with pytest.raises(ValueError, match="overlapping elements"):
        dmlops.lp_pooling(X, (3, 3), out=zero_stride)
    np.testing.assert_array_equal(buffer, 0)


# ---------------------------------------------------------------------------------------------
# Differential fuzzing against the reference, garbage descriptors, hostile arrays (strategies.py)

@st.composite
def lp_pooling_calls(draw):
    spatial = draw(st.integers(1, 3))
    ints = lambda lo, hi: tuple(draw(st.lists(st.integers(lo, hi), min_size=spatial, max_size=spatial)))
    sizes, window, strides, start, end = ints(1, 5), ints(1, 3), ints(1, 3), ints(0, 4), ints(0, 4)
    form = draw(st.sampled_from(["lp_pooling", "LpPooling1Desc", "LpPoolingDesc"]))
    dilations = ints(1, 3) if form != "LpPoolingDesc" else (1,) * spatial
    end = tuple(max(e, d * (w - 1) + 1 - n - s) for e, d, w, n, s in zip(end, dilations, window, sizes, start))
    p = draw(st.integers(1, 9) | st.sampled_from([16, 31, 1000, 2**32 - 1]))
    return dict(shape=(draw(st.integers(1, 2)), draw(st.integers(1, 3))) + sizes, form=form, p=p,
                window=window, kwargs=dict(strides=strides, start_padding=start, end_padding=end, dilations=dilations))


@given(call=lp_pooling_calls(), dtype=st.sampled_from(FLOATS), kind=st.sampled_from(["finite", "finite", "bits"]),
       threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_matches_reference(call, dtype, kind, threads, data):
    x = data.draw(arrays(call["shape"], dtype, kind=kind))
    window, kw, p, form = call["window"], dict(call["kwargs"]), call["p"], call["form"]
    expected = reference(x, window, kw["strides"], kw["start_padding"], kw["end_padding"], kw["dilations"], p)
    out = data.draw(outs(expected.shape, x.dtype))
    dmlops.set_num_threads(threads)
    if form == "lp_pooling":
        show_call(f"dmlops.lp_pooling(x, {window}, {kwargs_source(**kw)}, p={p}, out=out)", x=x, out=out)
        run = lambda: dmlops.lp_pooling(x, window, p=p, out=out, **kw)
    else:
        if form == "LpPoolingDesc":
            del kw["dilations"]
        cls = getattr(dmlops, form)
        show_call(f"dmlops.{form}(dmlops.TensorDesc.from_array(x), window_size={window}, {kwargs_source(**kw)}, "
                  f"p={p})(x, out=out)", x=x, out=out)
        run = lambda: cls(dmlops.TensorDesc.from_array(x), window_size=window, p=p, **kw)(x, out=out)
    assert_close(run_and_check_inputs(run, out, x), expected, int(np.prod(window)))


VALID_LP = dict(input=dmlops.TensorDesc("float32", (1, 2, 5, 5)), window_size=(2, 3), strides=(1, 2),
                start_padding=(1, 0), end_padding=(0, 1), p=3)
WRONG_LP = dict(input=[dmlops.TensorDesc("int32", (1, 2, 5, 5)), dmlops.TensorDesc("float32", (5, 5)),
                       dmlops.TensorDesc("float32", (1, 2**20, 2**20, 2**20))],
                output=[dmlops.TensorDesc("float32", (1, 2, 5, 2)), dmlops.TensorDesc("float32", (1, 2, 5, 2), (0, 0, 0, 0))],
                window_size=[(2**62, 1), (0, 1), (2, 2, 2)], strides=[(0, 1), (2**63 - 1, 1)],
                start_padding=[(2**62, 0), (-1, 0)], end_padding=[(2**48, 2**48)], p=[0, 2**32, -1, 2.0, 2**64],
                dilations=[(0, 1), (2**40, 2**40)])


@pytest.mark.parametrize("cls", [dmlops.LpPooling1Desc, dmlops.LpPoolingDesc])
@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_descriptors(cls, data):
    valid = dict(VALID_LP, **({"dilations": (2, 1)} if cls is dmlops.LpPooling1Desc else {}))
    function_kwargs = {k: v for k, v in valid.items() if k != "input"}
    fuzz_garbage(data, cls, valid, WRONG_LP, dmlops.lp_pooling, (np.zeros((1, 2, 5, 5), np.float32),), function_kwargs,
                 WRONG_LP)


def test_hostile_inputs_are_rejected():
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    check_hostile_inputs(lambda bad: dmlops.lp_pooling(bad, (2, 2)), x)
    check_hostile_inputs(dmlops.LpPooling1Desc(dmlops.TensorDesc.from_array(x), window_size=(2, 2)), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bad_outs_are_rejected_and_left_untouched(dtype):
    x = np.ones((1, 2, 4, 4), dtype)
    check_bad_outs(lambda out: dmlops.lp_pooling(x, (2, 2), strides=(1, 2), out=out), x, (1, 2, 3, 2), dtype)
    check_bad_outs(lambda out: dmlops.lp_pooling(x, (1, 1), out=out), x, x.shape, dtype)


def test_gigantic_outputs_are_rejected_before_allocating():
    with pytest.raises(ValueError, match="LpPooling1: .*(bytes|memory)"):
        dmlops.lp_pooling(np.zeros((1, 1, 4, 4), np.float32), (1, 1), start_padding=(2**21, 2**21),
                          end_padding=(2**21, 2**21))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [3, 5, 7, 31])
def test_root_of_large_and_small_sums_is_accurate(dtype, p):
    """Regression: y = S^(1/p) took pow's rounded exponent 1/p, which is ln(S) * ulp(1/p) off:
    a one-tap window of 5e24 (float64, p = 3) came out 14 ulps from 5e24. Now a Newton step
    follows; one tap must give |x| back within an ulp or two."""
    info = np.finfo(dtype)
    top = float(info.max) ** (1 / p) / 4  # S = x^p stays finite: the fast path, not the repair
    bottom = (float(info.tiny) * p / float(info.eps)) ** (1 / p) * 4
    x = np.geomspace(bottom, top, 64).astype(dtype).reshape(1, 1, 8, 8)
    y = dmlops.lp_pooling(x * -1, (1, 1), p=p)
    ulps = np.abs(y.astype(np.float64) - x.astype(np.float64)) / np.spacing(x).astype(np.float64)
    assert ulps.max() <= 2, f"{ulps.max()} ulps"
