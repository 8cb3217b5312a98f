"""Convolution (docs/semantics/convolution.md) against the plain float64 reference in reference.py, the
adjoint identity, and every rule of the descriptor."""

from __future__ import annotations

import doctest
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlops
import dmlops._activation
import dmlops.convolution
from reference import activation_reference, convolution_reference
from strategies import arrays as drawn_arrays
from strategies import (check_bad_outs, check_hostile_inputs, fuzz_garbage, garbage_settings, kwargs_source, outs,
                        run_and_check_inputs, show_call)

FLOATS = ("float32", "float16", "float64")
ACTIVATIONS = [name for name, _, _ in dmlops._core.activation_table()]
# Non-default parameters for every activation that has some (kept where the formulas are tame).
CUSTOM_PARAMETERS = {
    "elu": dict(alpha=0.7), "hard_sigmoid": dict(alpha=0.3, beta=0.4), "leaky_relu": dict(alpha=0.2),
    "linear": dict(alpha=1.5, beta=-0.25), "parametric_softplus": dict(alpha=0.8, beta=1.3),
    "scaled_elu": dict(alpha=1.2, gamma=0.9), "scaled_tanh": dict(alpha=1.1, beta=0.6), "softplus": dict(steepness=2.0),
    "thresholded_relu": dict(alpha=0.3), "shrink": dict(bias=0.1, threshold=0.3), "celu": dict(alpha=0.6),
    "clip": dict(min=-0.5, max=0.75),
}


def compute_eps(dtype) -> float:
    return float(np.finfo(np.float64 if np.dtype(dtype) == np.float64 else np.float32).eps)


def assert_close(y, x, w, b=None, activation=None, **kw):
    """y against the float64 reference of the same (already rounded) inputs. The bound is the
    classic one for a sum of L products, eps * L * sum|terms|, from the reference run on |x|,
    |w|, |b|; then the activation's own rounding; float16 adds its one final rounding."""
    dtype = y.dtype
    ref = convolution_reference(x, w, b, activation=activation, **kw)
    plain = {k: v for k, v in kw.items()}
    magnitude = convolution_reference(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                                      None if b is None else np.abs(b.astype(np.float64)), **plain)
    forward = kw.get("direction", "forward") == "forward"
    length = (w.shape[1] if forward else x.shape[1] // kw.get("group_count", 1)) * int(np.prod(w.shape[2:]))
    eps = compute_eps(dtype)
    tol = 2 * (length + 2) * eps * magnitude
    if activation is not None:
        tol = 4 * tol + 8 * eps * (np.abs(ref) + 1)
    if dtype == np.float16:
        tol = tol + 2.0 ** -11 * np.abs(ref) + 2.0 ** -24
    assert y.shape == ref.shape
    err = np.abs(y.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    assert np.all(err <= tol + 1e-300), f"at {worst}: got {y[worst]}, expected {ref[worst]} (tol {tol[worst]})"


def random_config(rng: np.random.Generator, direction=None, dims=None, small=False) -> dict:
    D = int(dims or rng.integers(1, 4))
    G = int(rng.integers(1, 4))
    Cg, OCg, N = (int(v) for v in rng.integers(1, 4, size=3))
    K = rng.integers(1, 4, size=D)
    s = rng.integers(1, 4, size=D)
    d = rng.integers(1, 3, size=D)
    start, end = rng.integers(0, 3, size=D), rng.integers(0, 3, size=D)
    extent = (K - 1) * d + 1
    room = 3 if D == 3 or small else 7
    In = np.maximum(extent - start - end, 1) + rng.integers(0, room, size=D)
    direction = direction or ("forward", "backward")[int(rng.integers(0, 2))]
    kw = dict(strides=tuple(map(int, s)), dilations=tuple(map(int, d)), start_padding=tuple(map(int, start)),
              end_padding=tuple(map(int, end)), group_count=G, direction=direction,
              mode=("cross_correlation", "convolution")[int(rng.integers(0, 2))])
    if direction == "forward":
        filter_shape = (G * OCg, Cg, *map(int, K))
    else:
        filter_shape = (G * Cg, OCg, *map(int, K))
        kw["output_padding"] = tuple(int(v) for v in rng.integers(0, 2, size=D))
        nominal = (In - 1) * s + extent - start - end + np.array(kw["output_padding"])
        if np.any(nominal < 1):
            kw["start_padding"] = (0,) * D
            kw["end_padding"] = (0,) * D
    return dict(x_shape=(N, G * Cg, *map(int, In)), w_shape=filter_shape, b_shape=(1, G * OCg) + (1,) * D, kw=kw)


def arrays(rng, config, dtype):
    x = rng.standard_normal(config["x_shape"]).astype(dtype)
    w = rng.standard_normal(config["w_shape"]).astype(dtype)
    b = rng.standard_normal(config["b_shape"]).astype(dtype)
    return x, w, b


# ---------------------------------------------------------------------------------------------
# Worked example


@pytest.mark.parametrize("dtype", FLOATS)
def test_dxdispatch_sample(dtype):
    x = np.arange(1, 10, dtype=dtype).reshape(1, 1, 3, 3)
    w = np.full((1, 1, 2, 2), 0.5, dtype)
    np.testing.assert_array_equal(dmlops.convolution(x, w).ravel(), np.array([6, 8, 12, 14], dtype))
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x.shape), dmlops.TensorDesc(dtype, w.shape))
    np.testing.assert_array_equal(desc(x, w).ravel(), np.array([6, 8, 12, 14], dtype))


def test_issue_examples():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 6, 1, 1)).astype(np.float32)
    kw = dict(strides=(2, 2), dilations=(1, 1), start_padding=(1, 1), end_padding=(0, 0), group_count=2)
    assert_close(dmlops.convolution(x, w, b, fused_activation="relu", **kw), x, w, b, ("relu", {}), **kw)
    wt = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    yt = dmlops.convolution(x, wt, direction="backward", strides=(2, 2), output_padding=(1, 1))
    assert yt.shape == (2, 3, 20, 18)
    assert_close(yt, x, wt, direction="backward", strides=(2, 2), output_padding=(1, 1))
    x5 = rng.standard_normal((1, 2, 4, 5, 3)).astype(np.float32)
    w5 = rng.standard_normal((3, 2, 2, 3, 1)).astype(np.float32)
    act = dmlops.Activation("leaky_relu", alpha=0.2)
    y3 = dmlops.convolution(x5, w5, mode="convolution", fused_activation=act)
    assert_close(y3, x5, w5, None, ("leaky_relu", {"alpha": 0.2}), mode="convolution")


# ---------------------------------------------------------------------------------------------
# Random sweeps


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", FLOATS)
def test_random_sweep(seed, dtype):
    rng = np.random.default_rng([seed, FLOATS.index(dtype)])
    for _ in range(8):
        config = random_config(rng)
        x, w, b = arrays(rng, config, dtype)
        use_bias = bool(rng.integers(0, 2))
        y = dmlops.convolution(x, w, b if use_bias else None, **config["kw"])
        assert y.dtype == np.dtype(dtype) and y.flags.c_contiguous
        assert_close(y, x, w, b if use_bias else None, **config["kw"])


def strided_variants(a: np.ndarray) -> dict:
    """The same values seen through different memory layouts."""
    channels_last = np.ascontiguousarray(np.moveaxis(a, 1, -1))
    reversed_copy = np.ascontiguousarray(a[..., ::-1])
    wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
    wide[..., ::2] = a
    return {
        "channels_last": np.moveaxis(channels_last, -1, 1),
        "negative": reversed_copy[..., ::-1],
        "every_other": wide[..., ::2],
        "fortran": np.asfortranarray(a),
        "transposed_batch": np.ascontiguousarray(np.swapaxes(a, 0, 1)).swapaxes(0, 1),
    }


@pytest.mark.parametrize("layout", ["channels_last", "negative", "every_other", "fortran", "transposed_batch"])
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_strided_inputs_and_out(layout, direction, dtype):
    rng = np.random.default_rng([11, FLOATS.index(dtype), direction == "forward"])
    for dims in (1, 2, 3):
        config = random_config(rng, direction, dims)
        x, w, b = arrays(rng, config, dtype)
        expected = dmlops.convolution(x, w, b, **config["kw"])
        xs, ws, bs = (strided_variants(a)[layout] for a in (x, w, b))
        np.testing.assert_array_equal(dmlops.convolution(xs, ws, bs, **config["kw"]), expected)
        out = strided_variants(np.zeros_like(expected))[layout]
        result = dmlops.convolution(xs, ws, bs, out=out, **config["kw"])
        assert result is out
        np.testing.assert_array_equal(out, expected)


def test_channels_last_view_is_read_in_place():
    rng = np.random.default_rng(3)
    nhwc = rng.standard_normal((2, 10, 9, 8)).astype(np.float32)
    x = nhwc.transpose(0, 3, 1, 2)  # an NCHW view of NHWC memory
    w = rng.standard_normal((5, 8, 3, 3)).astype(np.float32)
    y = dmlops.convolution(x, w, start_padding=(1, 1), end_padding=(1, 1))
    assert_close(y, x, w, start_padding=(1, 1), end_padding=(1, 1))
    assert x.base is nhwc


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_thread_count_does_not_change_bits(direction):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 23, 19)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32) if direction == "forward" else \
        rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    kw = dict(strides=(2, 1), start_padding=(1, 1), end_padding=(1, 0), direction=direction, group_count=2)
    results = []
    for threads in (1, 2, 3, 5):
        dmlops.set_num_threads(threads)
        results.append(dmlops.convolution(x, w, **kw))
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(np.uint32), results[0].view(np.uint32))
    assert_close(results[0], x, w, **kw)


def test_larger_layer_blocks_and_tails():
    """Enough channels and positions for several GEMM row panels, column blocks, position
    blocks and tasks, with tails everywhere (13 output channels, 31 x 29 positions)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 24, 31, 29)).astype(np.float32)
    w = rng.standard_normal((13, 24, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 13, 1, 1)).astype(np.float32)
    kw = dict(start_padding=(1, 1), end_padding=(1, 1))
    for threads in (1, 2):
        dmlops.set_num_threads(threads)
        assert_close(dmlops.convolution(x, w, b, fused_activation="gelu", **kw), x, w, b, ("gelu", {}), **kw)
        wt = rng.standard_normal((24, 7, 3, 3)).astype(np.float32)
        assert_close(dmlops.convolution(x, wt, b[:, :7], direction="backward", strides=(2, 2), **kw), x, wt,
                     b[:, :7], direction="backward", strides=(2, 2), **kw)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("strides,end,groups", [((2, 2), (0, 0), 1), ((3, 3), (0, 0), 2), ((2, 3), (1, 0), 1),
                                                ((3, 2), (2, 2), 1), ((1, 2), (0, 0), 2)])
def test_strided_pointwise(strides, end, groups, dtype):
    """1x1 layers with strides 2 and 3 (they run as stride-1 layers of the strided view when no
    output reaches the padding, else through the padded planes): odd sizes, end padding reached
    or not, groups, bias and an activation, a non-contiguous input and 100 output channels on
    one position block (channel blocks sharing one packed B); the bits do not depend on the
    thread count."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, 12, 15, 23)).astype(dtype)
    views = {"dense": x, "every_other": np.repeat(x, 2, axis=3)[..., ::2], "channels_last":
             np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)}
    w = rng.standard_normal((100, 12 // groups, 1, 1)).astype(dtype)
    b = rng.standard_normal((1, 100, 1, 1)).astype(dtype)
    kw = dict(strides=strides, end_padding=end, group_count=groups)
    for name, xv in views.items():
        assert np.array_equal(xv, x), name
        results = []
        for threads in (1, 2):
            dmlops.set_num_threads(threads)
            results.append(dmlops.convolution(xv, w, b, fused_activation="relu", **kw))
        np.testing.assert_array_equal(results[1], results[0], err_msg=name)
        assert_close(results[0], x, w, b, ("relu", {}), **kw)


def test_backward_input_in_several_blocks():
    """A backward layer whose input positions (17 x 17) outgrow one panel of its 260 input
    channels: each task packs its blocks itself (a smaller input is packed once and shared);
    stride 2 (the vector scatter) and 3; the bits do not depend on the thread count."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((1, 260, 17, 17)).astype(np.float32)
    w = rng.standard_normal((260, 5, 3, 3)).astype(np.float32)
    for strides in ((2, 2), (3, 2)):
        kw = dict(direction="backward", strides=strides, start_padding=(1, 0))
        results = []
        for threads in (1, 2):
            dmlops.set_num_threads(threads)
            results.append(dmlops.convolution(x, w, **kw))
        np.testing.assert_array_equal(results[1], results[0])
        assert_close(results[0], x, w, **kw)


# ---------------------------------------------------------------------------------------------
# The adjoint identity <conv(x, w), g> == <x, conv_backward(g, w)>


@pytest.mark.parametrize("seed", range(10))
def test_adjoint_identity(seed):
    rng = np.random.default_rng([seed, 99])
    for _ in range(6):
        config = random_config(rng, "forward")
        kw = config["kw"]
        x = rng.standard_normal(config["x_shape"])
        w = rng.standard_normal(config["w_shape"])
        y = dmlops.convolution(x, w, **kw)
        g = rng.standard_normal(y.shape)
        back = {k: v for k, v in kw.items() if k != "direction"}
        # The forward filter {OutC, InC/G, K} is the backward filter of the reverse map, read
        # as {InC' = OutC, OutC'/G = InC/G, K}: the same array.
        xt = dmlops.convolution(g, w, direction="backward", output_sizes=x.shape[2:], **back)
        assert xt.shape == x.shape
        lhs, rhs = np.vdot(y, g), np.vdot(x, xt)
        assert abs(lhs - rhs) <= 1e-12 * (np.vdot(np.abs(y), np.abs(g)) + 1), (config, lhs, rhs)


# ---------------------------------------------------------------------------------------------
# Groups, depthwise, backward output sizes


@pytest.mark.parametrize("multiplier", [1, 3])
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_depthwise(multiplier, direction):
    rng = np.random.default_rng(multiplier)
    C = 6
    x = rng.standard_normal((2, C, 11, 9)).astype(np.float32)
    shape = (C * multiplier, 1, 3, 3) if direction == "forward" else (C, multiplier, 3, 3)
    w = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal((1, C * multiplier, 1, 1)).astype(np.float32)
    kw = dict(group_count=C, start_padding=(1, 1), end_padding=(1, 1), strides=(2, 1), direction=direction)
    assert_close(dmlops.convolution(x, w, b, **kw), x, w, b, **kw)


# The two depthwise algorithms run the same chain per output (fused with AVX2 or AVX-512, in
# float64 too): the same bits, so a layer's channels come out the same whichever of them its
# channel count takes (the row one computed float64 with rounded products on AVX2 machines, and
# a one-channel slice of a layer differed from the layer in the last bit).
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_depthwise_algorithms_agree_bit_for_bit(dtype):
    rng = np.random.default_rng(23)
    for shape, kernel in (((1, 6, 5, 9), (3, 3)), ((2, 3, 17), (2,)), ((1, 4, 1, 1), (1, 1))):
        x = rng.standard_normal(shape).astype(dtype)
        w = rng.standard_normal((shape[1], 1) + kernel).astype(dtype)
        desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x.shape), dmlops.TensorDesc(dtype, w.shape),
                                      group_count=shape[1])
        lanes = desc(x, w, algorithm="depthwise_lanes")
        rows = desc(x, w, algorithm="depthwise_rows")
        np.testing.assert_array_equal(lanes, rows, err_msg=f"{shape} {kernel}")
        one = dmlops.convolution(x[:, :1], w[:1])
        np.testing.assert_array_equal(one, lanes[:, :1], err_msg=f"{shape} {kernel}: one channel")


# The channel-interleaved depthwise kernel (at least half a vector of channels: 8 with 16 float32
# lanes): channel counts with block tails, strides 1 to 3, dilation, asymmetric padding, a 5 x 3
# window, multiplier 2, a 1-D row cut into bands, 3-D; each on contiguous, channels-last and
# reversed (negative-stride) inputs and outputs, with bias and an activation, at 1 and 3 threads.
DEPTHWISE_LANES = [  # x shape, kernel, strides, dilations, start, end, multiplier
    ((1, 17, 12, 13), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),
    ((2, 20, 11, 9), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2),
    ((1, 9, 10, 14), (3, 3), (3, 2), (2, 1), (2, 0), (0, 3), 1),
    ((1, 35, 7, 8), (5, 3), (1, 2), (1, 1), (2, 1), (2, 1), 1),
    ((1, 16, 300), (3,), (2,), (1,), (1,), (1,), 2),
    ((1, 24, 5, 6, 7), (3, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
]


@pytest.mark.parametrize("case", DEPTHWISE_LANES, ids=lambda c: "x".join(map(str, c[0][1:])) + f"_s{c[2][-1]}_m{c[6]}")
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "reversed_channels", "reversed_rows"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_depthwise_lanes(case, layout, dtype):
    shape, kernel, strides, dilations, start, end, multiplier = case
    rng = np.random.default_rng(len(shape) * 100 + shape[1])
    C = shape[1]
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((C * multiplier, 1) + kernel).astype(dtype)
    b = rng.standard_normal((1, C * multiplier) + (1,) * len(kernel)).astype(dtype)
    kw = dict(group_count=C, strides=strides, dilations=dilations, start_padding=start, end_padding=end,
              mode="convolution" if C % 2 else "cross_correlation")
    y_shape = dmlops.convolution(x, w, **kw).shape
    if layout == "channels_last":
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
        new_out = lambda: np.moveaxis(np.empty(y_shape[:1] + y_shape[2:] + y_shape[1:2], dtype), -1, 1)
    elif layout == "reversed_channels":
        x = x[:, ::-1]
        new_out = lambda: np.empty(y_shape, dtype)[:, ::-1]
    elif layout == "reversed_rows":  # and a filter whose taps run backwards in memory
        x = x[..., ::-1]
        w = np.ascontiguousarray(w[..., ::-1])[..., ::-1]
        new_out = lambda: np.empty(y_shape, dtype)[..., ::-1]
    else:
        new_out = lambda: None
    results = []
    for threads in (1, 3):
        dmlops.set_num_threads(threads)
        results.append(dmlops.convolution(x, w, b, fused_activation="sigmoid", out=new_out(), **kw))
    np.testing.assert_array_equal(results[1], results[0])
    assert_close(results[0], x, w, b, ("sigmoid", {}), **kw)


@pytest.mark.parametrize("sizes", [(1, 1), (5, 4), (20, 3), (13, 30), (40, 41)])
@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
def test_backward_any_output_size(sizes, mode):
    rng = np.random.default_rng(sum(sizes))
    x = rng.standard_normal((1, 4, 6, 7))
    w = rng.standard_normal((4, 2, 3, 2))
    kw = dict(strides=(2, 3), dilations=(2, 1), start_padding=(1, 2), end_padding=(0, 1), direction="backward",
              mode=mode, group_count=2)
    y = dmlops.convolution(x, w, output_sizes=sizes, **kw)
    assert y.shape == (1, 4) + sizes
    assert_close(y, x, w, output_spatial=sizes, **kw)
    full = dmlops.convolution(x, w, output_sizes=(1, 4) + sizes, **kw)
    np.testing.assert_array_equal(full, y)


# Backward scatter paths: padded planes (taps of a stride-2 last axis added in pairs, a last
# odd tap alone; stride 1 and 3 runs; dilated taps) and, when an output cropped far inside the
# taps' reach would make those margins large, the window walker over the output planes.
BACKWARD_SCATTERS = [
    # (x spatial, filter spatial, strides, dilations, start, end, output_padding, groups)
    ((5, 6), (4, 4), (2, 2), (1, 1), (1, 1), (1, 1), (0, 0), 1),
    ((5, 7), (3, 5), (2, 2), (1, 1), (0, 2), (1, 0), (1, 1), 1),
    ((4, 9), (2, 3), (1, 1), (1, 1), (1, 0), (0, 1), (0, 0), 2),
    ((3, 5), (3, 4), (3, 3), (1, 1), (2, 1), (0, 3), (2, 1), 1),
    ((4, 5), (3, 3), (2, 2), (2, 2), (1, 2), (2, 1), (0, 1), 1),
    ((33,), (6,), (2,), (1,), (2,), (3,), (1,), 3),
    ((3, 4, 5), (2, 3, 4), (2, 1, 2), (1, 1, 1), (1, 0, 1), (0, 1, 1), (1, 0, 0), 1),
    ((70, 70), (3, 3), (1, 1), (1, 1), (34, 34), (34, 34), (0, 0), 1),  # 4 x 4 out of a 72 x 72 reach
    ((5000,), (2,), (2,), (1,), (4000,), (5996,), (0,), 1),  # 4 out of 10000
]


@pytest.mark.parametrize("case", BACKWARD_SCATTERS, ids=lambda c: "x".join(map(str, c[0])) + "s" + "".join(map(str, c[2])))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_backward_scatter_paths(case, dtype):
    spatial, kernel, strides, dilations, start, end, output_padding, groups = case
    rng = np.random.default_rng(len(spatial) * 100 + kernel[-1])
    ic, oc = 3 * groups, 2 * groups
    x = rng.standard_normal((2, ic) + spatial).astype(dtype)
    w = rng.standard_normal((ic, oc // groups) + kernel).astype(dtype)
    b = rng.standard_normal((1, oc) + (1,) * len(spatial)).astype(dtype)
    kw = dict(direction="backward", strides=strides, dilations=dilations, start_padding=start, end_padding=end,
              output_padding=output_padding, group_count=groups)
    y = dmlops.convolution(x, w, **kw)
    assert_close(y, x, w, **kw)
    # from and into strided views, with bias and activation, at 1 and 2 threads (the same bits)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype)
    wide[..., ::2] = x
    results = []
    for threads in (1, 2):
        dmlops.set_num_threads(threads)
        out = np.zeros(y.shape[:-1] + (2 * y.shape[-1],), dtype)[..., ::-2]
        dmlops.convolution(wide[..., ::2], w, b, fused_activation="relu", out=out, **kw)
        results.append(out)
    np.testing.assert_array_equal(results[1], results[0])
    assert_close(results[0], x, w, b, ("relu", {}), **kw)
    # convolution mode (flipped taps) with a filter whose taps run backwards in memory
    reversed_taps = np.ascontiguousarray(w[..., ::-1])[..., ::-1]
    y = dmlops.convolution(x, reversed_taps, mode="convolution", **kw)
    assert_close(y, x, w, mode="convolution", **kw)


# Backward layers run as one forward convolution per output phase (undilated, strided float32
# layers with a window wider than the stride on some axis, 16 output channels per group and
# at least 512 outputs per phase and channel): strides 1 to 3 with windows narrower than (no
# taps: bias only), as wide as and wider than the stride, start padding beyond the window,
# output padding, outputs beyond every input's reach, 1-D to 3-D, groups.
BACKWARD_PHASES = [
    # (x spatial, filter spatial, strides, start, end, output_padding, output sizes, groups)
    ((16, 16), (4, 4), (2, 2), (1, 1), (1, 1), (0, 0), None, 1),
    ((16, 16), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), None, 1),
    ((14, 20), (2, 5), (3, 2), (0, 3), (1, 0), (0, 0), None, 1),
    ((30, 14), (3, 3), (1, 3), (4, 0), (0, 5), (0, 2), None, 1),
    ((12, 12), (3, 3), (2, 2), (0, 1), (0, 0), (0, 0), (40, 33), 1),
    ((300,), (5,), (2,), (2,), (1,), (1,), None, 1),
    ((300,), (7,), (3,), (0,), (0,), (2,), None, 2),
    ((4,), (3,), (2,), (100,), (0,), (0,), (700,), 1),  # every output past the input's reach
    ((8, 9, 7), (3, 2, 4), (2, 2, 3), (1, 0, 2), (0, 0, 0), (1, 0, 0), None, 1),
    ((16, 16), (4, 4), (2, 2), (1, 1), (1, 1), (0, 0), None, 2),
]


@pytest.mark.parametrize("case", BACKWARD_PHASES, ids=lambda c: "x".join(map(str, c[0])) + "k" + "".join(map(str, c[1])) +
                         "s" + "".join(map(str, c[2])) + f"g{c[7]}")
def test_backward_phases(case):
    spatial, kernel, strides, start, end, output_padding, sizes, groups = case
    rng = np.random.default_rng(sum(spatial) + 10 * sum(kernel))
    x = rng.standard_normal((2, 3 * groups) + spatial).astype(np.float32)
    w = rng.standard_normal((3 * groups, 16) + kernel).astype(np.float32)
    b = rng.standard_normal((1, 16 * groups) + (1,) * len(spatial)).astype(np.float32)
    kw = dict(direction="backward", strides=strides, start_padding=start, end_padding=end,
              output_padding=output_padding, group_count=groups)
    if sizes is not None:
        kw["output_sizes"] = sizes
    ref_kw = {k: v for k, v in kw.items() if k != "output_sizes"} | dict(output_spatial=sizes)
    act = ("leaky_relu", {"alpha": 0.2})
    results = []
    for threads in (1, 2, 3):
        dmlops.set_num_threads(threads)
        results.append(dmlops.convolution(x, w, b, fused_activation=dmlops.Activation("leaky_relu", alpha=0.2), **kw))
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(np.uint32), results[0].view(np.uint32))
    assert_close(results[0], x, w, b, act, **ref_kw)
    # no bias or activation, convolution mode, from an every-other-column view into a reversed
    # strided out, and with a filter whose taps run backwards in memory (its phase filters then
    # gathered value by value)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
    wide[..., ::2] = x
    y = dmlops.convolution(x, w, mode="convolution", **kw)
    out = np.zeros(y.shape[:-1] + (2 * y.shape[-1],), np.float32)[..., ::-2]
    assert dmlops.convolution(wide[..., ::2], w, mode="convolution", out=out, **kw) is out
    np.testing.assert_array_equal(out, y)
    assert_close(y, x, w, mode="convolution", **ref_kw)
    reversed_taps = np.ascontiguousarray(w[..., ::-1])[..., ::-1]
    np.testing.assert_array_equal(dmlops.convolution(x, reversed_taps, mode="convolution", **kw), y)


def test_backward_nominal_size_and_output_padding():
    x = np.ones((1, 1, 3), np.float64)
    w = np.ones((1, 1, 3), np.float64)
    y = dmlops.convolution(x, w, direction="backward", strides=(2,), output_padding=(1,))
    assert y.shape == (1, 1, 8)
    np.testing.assert_array_equal(y.ravel(), [1, 1, 2, 1, 2, 1, 1, 0])
    y = dmlops.convolution(x, w, direction="backward", start_padding=(1,), end_padding=(1,))
    np.testing.assert_array_equal(y.ravel(), [2, 3, 2])


def test_convolution_mode_flips_the_kernel():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 5, 6, 4))
    w = rng.standard_normal((3, 2, 2, 3, 2))
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1, ::-1])
    np.testing.assert_allclose(dmlops.convolution(x, w, mode="convolution"), dmlops.convolution(x, flipped),
                               rtol=1e-13, atol=1e-13)
    wt = rng.standard_normal((2, 3, 2, 3, 2))
    np.testing.assert_allclose(dmlops.convolution(x, wt, mode="convolution", direction="backward"),
                               dmlops.convolution(x, np.ascontiguousarray(wt[:, :, ::-1, ::-1, ::-1]), direction="backward"),
                               rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# Fused activations


@pytest.mark.parametrize("custom", [False, True])
@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_every_activation(name, custom, dtype):
    rng = np.random.default_rng(ACTIVATIONS.index(name))
    x = (rng.standard_normal((2, 3, 6, 5)) * 0.7).astype(dtype)
    w = (rng.standard_normal((4, 3, 2, 2)) * 0.5).astype(dtype)
    b = rng.standard_normal((1, 4, 1, 1)).astype(dtype)
    params = CUSTOM_PARAMETERS.get(name, {}) if custom else {}
    if name == "clip" and not custom:
        params = dict(min=-1, max=1)
    act = dmlops.Activation(name, **params)
    full = dict(act.parameters)
    y = dmlops.convolution(x, w, b, fused_activation=act if (params or custom) else name, start_padding=(1, 0))
    assert_close(y, x, w, b, (name, full), start_padding=(1, 0))
    yt = dmlops.convolution(x, w[:3], b[:, :3], fused_activation=act, direction="backward", strides=(2, 1))
    assert_close(yt, x, w[:3], b[:, :3], (name, full), direction="backward", strides=(2, 1))


def test_activation_defaults_and_names():
    assert dmlops.Activation("elu").parameters == {"alpha": 1.0}
    assert dmlops.Activation("hard_sigmoid").parameters == {"alpha": 0.2, "beta": 0.5}
    assert dmlops.Activation("leaky_relu").parameters == {"alpha": 0.01}
    assert dmlops.Activation("linear").parameters == {"alpha": 1.0, "beta": 0.0}
    assert dmlops.Activation("parametric_softplus").parameters == {"alpha": 1.0, "beta": 1.0}
    assert dmlops.Activation("scaled_elu").parameters == {"alpha": 1.67326, "gamma": 1.0507}
    assert dmlops.Activation("scaled_tanh").parameters == {"alpha": 1.0, "beta": 1.0}
    assert dmlops.Activation("softplus").parameters == {"steepness": 1.0}
    assert dmlops.Activation("thresholded_relu").parameters == {"alpha": 1.0}
    assert dmlops.Activation("shrink").parameters == {"bias": 0.0, "threshold": 0.5}
    assert dmlops.Activation("celu").parameters == {"alpha": 1.0}
    for name in ("identity", "relu", "sigmoid", "softsign", "tanh", "gelu"):
        assert dmlops.Activation(name).parameters == {}
    assert len(ACTIVATIONS) == 18
    assert dmlops.Activation("DML_OPERATOR_ACTIVATION_RELU") == dmlops.Activation("relu")
    assert dmlops.Activation("LEAKY_RELU", alpha=0.2) == dmlops.Activation("leaky_relu", alpha=0.2)
    assert repr(dmlops.Activation("leaky_relu", alpha=0.2)) == "Activation('leaky_relu', alpha=0.2)"
    a = dmlops.Activation("shrink", threshold=0.25)
    assert pickle.loads(pickle.dumps(a)) == a
    assert dmlops.Activation.from_dict(a.to_dict()) == a
    assert dmlops.Activation.from_dict({"Type": "DML_OPERATOR_ACTIVATION_SHRINK", "Threshold": 0.25}) == a
    assert a.to_dict() == {"Type": "DML_OPERATOR_ACTIVATION_SHRINK", "Desc": {"Bias": 0.0, "Threshold": 0.25}}


@pytest.mark.parametrize("make,error,match", [
    (lambda: dmlops.Activation("swish"), ValueError, "unknown"),
    (lambda: dmlops.Activation("relu", alpha=1), ValueError, "no parameter"),
    (lambda: dmlops.Activation("leaky_relu", beta=1), ValueError, "no parameter"),
    (lambda: dmlops.Activation("clip", min=0), ValueError, "needs the parameter max"),
    (lambda: dmlops.Activation("clip", min=1, max=0), ValueError, "min"),
    (lambda: dmlops.Activation("celu", alpha=0), ValueError, "alpha != 0"),
    (lambda: dmlops.Activation("softplus", steepness=0), ValueError, "steepness"),
    (lambda: dmlops.Activation("elu", alpha=float("nan")), ValueError, "NaN"),
    (lambda: dmlops.Activation("elu", alpha="1"), TypeError, "number"),
    (lambda: dmlops.Activation("elu", alpha=True), TypeError, "number"),
    (lambda: dmlops.Activation("elu", alpha=1e39), ValueError, "too large"),
    (lambda: dmlops.Activation(3), TypeError, "activation name"),
    (lambda: dmlops.Activation.from_dict({"Type": "DML_OPERATOR_ACTIVATION_ELU", "Desc": {"Beta": 1}}), ValueError,
     "no member"),
])
def test_bad_activations(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ---------------------------------------------------------------------------------------------
# Bad input: every rule, checked before any write


def good_args():
    x = np.ones((1, 4, 5, 5), np.float32)
    w = np.ones((6, 2, 3, 3), np.float32)
    b = np.ones((1, 6, 1, 1), np.float32)
    return x, w, b


BAD_CALLS = [
    ("rank", lambda x, w, b: dmlops.convolution(x[0, 0], w[0, 0]), ValueError, "dimensions; it must have 3, 4 or 5"),
    ("rank6", lambda x, w, b: dmlops.convolution(x[..., None, None], w[..., None, None]), ValueError, "3, 4 or 5"),
    ("filter rank", lambda x, w, b: dmlops.convolution(x, w[..., 0], group_count=2), ValueError, "filter has 3 dimensions"),
    ("filter dtype", lambda x, w, b: dmlops.convolution(x, w.astype(np.float64), group_count=2), TypeError,
     "filter has dtype float64"),
    ("bias dtype", lambda x, w, b: dmlops.convolution(x, w, b.astype(np.float16), group_count=2), TypeError,
     "bias has dtype float16"),
    ("int dtype", lambda x, w, b: dmlops.convolution(x.astype(np.int32), w.astype(np.int32), group_count=2), TypeError,
     "float16, float32 and float64"),
    ("bool", lambda x, w, b: dmlops.convolution(x.astype(bool), w.astype(bool), group_count=2), TypeError, "float16"),
    ("groups input", lambda x, w, b: dmlops.convolution(x, w, group_count=3), ValueError, "group_count 3 does not divide"),
    ("groups output", lambda x, w, b: dmlops.convolution(x, w[:5], group_count=2), ValueError,
     "5 output channels .* group_count 2 does not divide"),
    ("filter channels", lambda x, w, b: dmlops.convolution(x, w), ValueError, "filter sizes\\[1\\] is 2"),
    ("backward filter", lambda x, w, b: dmlops.convolution(x, w, direction="backward"), ValueError,
     "filter sizes\\[0\\] is 6"),
    ("bias shape", lambda x, w, b: dmlops.convolution(x, w, b[:, :5], group_count=2), ValueError, "bias has sizes"),
    ("bias rank", lambda x, w, b: dmlops.convolution(x, w, b[0], group_count=2), ValueError, "bias has 3 dimensions"),
    ("zero stride", lambda x, w, b: dmlops.convolution(x, w, group_count=2, strides=(1, 0)), ValueError,
     "strides\\[1\\] is 0; it must be >= 1"),
    ("zero dilation", lambda x, w, b: dmlops.convolution(x, w, group_count=2, dilations=(0, 1)), ValueError,
     "dilations\\[0\\] is 0"),
    ("negative padding", lambda x, w, b: dmlops.convolution(x, w, group_count=2, start_padding=(-1, 0)), ValueError,
     "start_padding\\[0\\] is -1"),
    ("array length", lambda x, w, b: dmlops.convolution(x, w, group_count=2, strides=(1, 1, 1)), ValueError,
     "strides has 3 entries but there are 2 spatial dimensions"),
    ("kernel too large", lambda x, w, b: dmlops.convolution(x, w, group_count=2, dilations=(3, 1)), ValueError,
     "window extent 7 .* larger than the padded input 5"),
    ("forward output_padding", lambda x, w, b: dmlops.convolution(x, w, group_count=2, output_padding=(1, 0)),
     ValueError, "output_padding\\[0\\] is 1; it must be 0 in the forward direction"),
    ("forward output size", lambda x, w, b: dmlops.convolution(x, w, group_count=2, output_sizes=(4, 3)), ValueError,
     "output has sizes"),
    ("backward output channels", lambda x, w, b: dmlops.convolution(x, w[:4], direction="backward",
                                                                   output_sizes=(1, 5, 7, 7)), ValueError,
     "backward convolution gives"),
    ("backward nominal", lambda x, w, b: dmlops.convolution(x[..., :1, :1], w[:4, :, :1, :1], direction="backward",
                                                           start_padding=(1, 0)), ValueError, "nominal"),
    ("zero output size", lambda x, w, b: dmlops.convolution(x, w[:4], direction="backward", output_sizes=(0, 3)),
     ValueError, ">= 1|sizes"),
    ("mode", lambda x, w, b: dmlops.convolution(x, w, group_count=2, mode="correlation"), ValueError,
     "mode 'correlation' is unknown"),
    ("direction", lambda x, w, b: dmlops.convolution(x, w, group_count=2, direction="transposed"), ValueError,
     "direction 'transposed' is unknown.*backward"),
    ("activation", lambda x, w, b: dmlops.convolution(x, w, group_count=2, fused_activation="swish"), ValueError,
     "unknown"),
    ("activation type", lambda x, w, b: dmlops.convolution(x, w, group_count=2, fused_activation=3), TypeError,
     "activation"),
    ("group type", lambda x, w, b: dmlops.convolution(x, w, group_count=2.0), TypeError, "group_count"),
    ("group zero", lambda x, w, b: dmlops.convolution(x, w, group_count=0), ValueError, "group_count is 0"),
    ("list input", lambda x, w, b: dmlops.convolution(x.tolist(), w), TypeError,
     "filter has dtype float32 but the input is float64"),
    ("not an array", lambda x, w, b: dmlops.convolution(x, None), TypeError, "filter must be array_like, not None"),
]


@pytest.mark.parametrize("case,call,error,match", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input(case, call, error, match):
    x, w, b = good_args()
    with pytest.raises(error, match=match) as info:
        call(x, w, b)
    assert "Convolution" in str(info.value) or "ndarray" in str(info.value)


def test_bad_out_is_untouched():
    x, w, b = good_args()
    y = dmlops.convolution(x, w, b, group_count=2)
    for out, error in [(np.zeros((1, 6, 3, 4), np.float32), ValueError), (np.zeros(y.shape, np.float64), TypeError),
                       (np.zeros(y.shape, np.float32)[..., ::-1], None)]:
        before = out.copy()
        if error is None:
            dmlops.convolution(x, w, b, group_count=2, out=out)
            np.testing.assert_array_equal(out, y)
            continue
        with pytest.raises(error):
            dmlops.convolution(x, w, b, group_count=2, out=out)
        np.testing.assert_array_equal(out, before)
    overlapping = np.zeros((1, 6, 3, 3), np.float32)
    with pytest.raises(ValueError, match="overlap|share"):
        dmlops.convolution(overlapping[:, :4], np.ones((6, 2, 1, 1), np.float32), group_count=2,
                           out=overlapping)
    broadcast = np.broadcast_to(np.zeros(1, np.float32), y.shape)
    with pytest.raises(ValueError):
        dmlops.convolution(x, w, b, group_count=2, out=broadcast)


# ---------------------------------------------------------------------------------------------
# The descriptor


def make_desc(**extra):
    f32 = lambda *s: dmlops.TensorDesc("float32", s)  # noqa: E731
    args = dict(strides=(2, 1), start_padding=(1, 0), end_padding=(0, 1), group_count=2,
                fused_activation=dmlops.Activation("leaky_relu", alpha=0.2))
    args.update(extra)
    return dmlops.ConvolutionDesc(f32(1, 4, 7, 6), f32(6, 2, 3, 3), f32(1, 6, 1, 1), **args)


def test_descriptor_fields_and_call():
    d = make_desc()
    assert d.output.sizes == (1, 6, 3, 5) == d.output_shape
    assert d.mode == "cross_correlation" and d.direction == "forward"
    assert d.dilations == (1, 1) and d.output_padding == (0, 0) and d.group_count == 2
    assert d.fused_activation == dmlops.Activation("leaky_relu", alpha=0.2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 6, 1, 1)).astype(np.float32)
    np.testing.assert_array_equal(d(x, w, b), dmlops.convolution(
        x, w, b, strides=(2, 1), start_padding=(1, 0), end_padding=(0, 1), group_count=2,
        fused_activation=dmlops.Activation("leaky_relu", alpha=0.2)))
    with pytest.raises(ValueError, match="has a bias tensor but the call passes none"):
        d(x, w)
    with pytest.raises(ValueError, match="filter has shape"):
        d(x, w[:3], b)
    with pytest.raises(TypeError, match="input has dtype float64"):
        d(x.astype(np.float64), w, b)


def test_descriptor_round_trips():
    for d in (make_desc(), make_desc(fused_activation=None), make_desc(fused_activation="relu", mode="convolution"),
              dmlops.ConvolutionDesc(dmlops.TensorDesc("float16", (2, 4, 5)), dmlops.TensorDesc("float16", (4, 3, 2)),
                                     direction="backward", strides=(3,), output_padding=(2,),
                                     output=dmlops.TensorDesc("float16", (2, 3, 20)))):
        assert pickle.loads(pickle.dumps(d)) == d
        j = json.loads(json.dumps(d.to_dict()))
        assert type(d).from_dict(j) == d
        rebuilt = repr(d).replace("Activation(", "dmlops.Activation(").replace("TensorDesc(", "dmlops.TensorDesc(")
        assert "strides=" in rebuilt and "fused_activation=" in rebuilt and "group_count=" in rebuilt
    d = make_desc()
    j = d.to_dict()
    assert j["Mode"] == "DML_CONVOLUTION_MODE_CROSS_CORRELATION"
    assert j["Direction"] == "DML_CONVOLUTION_DIRECTION_FORWARD"
    assert j["DimensionCount"] == 2 and j["GroupCount"] == 2 and j["Strides"] == [2, 1]
    assert j["FusedActivation"] == {"Type": "DML_OPERATOR_ACTIVATION_LEAKY_RELU", "Desc": {"Alpha": 0.2}}
    assert j["BiasTensor"] == {"DataType": "FLOAT32", "Sizes": [1, 6, 1, 1]}
    plain = make_desc(fused_activation=None)
    assert "FusedActivation" not in plain.to_dict()
    nobias = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3, 3)), dmlops.TensorDesc("float32", (1, 1, 2, 2)))
    assert "BiasTensor" not in nobias.to_dict() and nobias.bias is None
    assert dmlops.ConvolutionDesc.from_dict({**nobias.to_dict(), "BiasTensor": None}) == nobias
    assert make_desc() != plain and hash(make_desc()) == hash(make_desc())


def test_descriptor_validates():
    f32 = lambda *s: dmlops.TensorDesc("float32", s)  # noqa: E731
    with pytest.raises(ValueError, match="bias has sizes"):
        dmlops.ConvolutionDesc(f32(1, 4, 7, 6), f32(6, 2, 3, 3), f32(1, 5, 1, 1), group_count=2)
    with pytest.raises(ValueError, match="output has sizes"):
        make_desc(output=dmlops.TensorDesc("float32", (1, 6, 4, 4)))
    with pytest.raises(TypeError, match="filter must be a dmlops.TensorDesc"):
        dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3, 3)), (1, 1, 2, 2))
    with pytest.raises(ValueError, match="mode"):
        make_desc(mode="DML_CONVOLUTION_MODE_NONE")
    assert make_desc(mode="DML_CONVOLUTION_MODE_CONVOLUTION").mode == "convolution"


# ---------------------------------------------------------------------------------------------
# The direct forward kernel (core/direct.hpp): dense forward layers of float32 and float16 with a
# window of more than one tap and at least L output channels per group (L = 16 with AVX-512, 8
# otherwise). Output channels go in blocks of 4, 2 and 1 vectors (the last one partial), output
# positions into bands (a tile of positions may span rows), input channels into passes whose packed filter
# fits 32 KiB (taps * 4 * 16 floats per channel on AVX-512, taps * 2 * 8 on AVX2: 14 and 56
# channels of a 3x3 window; one channel for windows of more than 128 and 512 taps).

DIRECT_CASES = [  # x shape, filter shape, strides, dilations, start, end, groups
    ((2, 3, 9, 11), (16, 3, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),  # one vector (AVX-512), batch 2
    ((1, 4, 8, 10), (17, 4, 3, 3), (2, 1), (1, 1), (0, 2), (1, 0), 1),  # a vector and one channel
    ((1, 6, 7, 9), (62, 3, 3, 2), (1, 3), (2, 1), (2, 1), (1, 2), 2),  # 31 per group
    ((1, 2, 6, 13), (32, 2, 2, 3), (3, 2), (1, 2), (0, 0), (0, 0), 1),  # no padding
    ((2, 3, 5, 7), (144, 1, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 3),  # 48 per group, one input channel
    ((1, 30, 9, 8), (64, 30, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),  # 3 passes (AVX-512)
    ((1, 80, 6, 7), (160, 40, 3, 3), (2, 2), (1, 1), (1, 0), (0, 1), 2),  # 80 per group: 4 + 1 vectors
    ((1, 60, 5, 6), (20, 60, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),  # 2 passes on AVX2 too
    ((1, 1, 7, 12), (100, 1, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1),  # 4 + 2 + 1 vectors, the last partial
    ((1, 3, 4, 5), (20, 3, 2, 2), (1, 2), (1, 1), (4, 3), (5, 6), 1),  # padding wider than the window
    ((1, 2, 700), (48, 2, 3), (1,), (1,), (1,), (1,), 1),  # a long row
    ((2, 3, 900), (24, 3, 5), (3,), (2,), (4,), (7,), 1),  # a long row, strided and dilated
    ((1, 120, 40), (16, 120, 9), (1,), (1,), (4,), (4,), 1),  # passes on AVX2 too
    ((1, 3, 140), (16, 3, 129), (1,), (1,), (2,), (1,), 1),  # one channel per pass (AVX-512)
    ((1, 2, 530), (16, 2, 520), (1,), (1,), (0,), (3,), 1),  # one channel per pass (AVX2)
    ((1, 2, 3, 520), (80, 2, 2, 3), (1, 1), (1, 1), (0, 1), (1, 1), 1),  # long 2-D rows
    ((1, 4, 5, 6, 7), (32, 4, 3, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 0, 2), 1),
    ((1, 3, 4, 5, 6), (51, 1, 2, 2, 3), (2, 1, 3), (1, 2, 1), (0, 1, 0), (1, 1, 1), 3),
    ((1, 3, 1), (16, 3, 3), (5,), (1,), (10,), (0,), 1),  # every window in the padding: the bias alone
    ((1, 5, 6, 7), (32, 5, 1, 7), (1, 1), (1, 1), (0, 3), (0, 3), 1),
    ((2, 5, 9, 7), (40, 5, 7, 1), (2, 3), (1, 1), (3, 0), (3, 2), 1),
]


def direct_case_id(case):
    x_shape, w_shape, strides = case[:3]
    return "x".join(map(str, x_shape[1:])) + "_o" + str(w_shape[0]) + "_k" + "x".join(map(str, w_shape[2:])) + \
        "_s" + "".join(map(str, strides)) + "_g" + str(case[6])


def direct_layer(case, dtype, mode="cross_correlation"):
    x_shape, w_shape, strides, dilations, start, end, groups = case
    rng = np.random.default_rng([len(x_shape), *x_shape[1:], *w_shape])
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal((1, w_shape[0]) + (1,) * (len(x_shape) - 2)).astype(dtype)
    kw = dict(strides=strides, dilations=dilations, start_padding=start, end_padding=end, group_count=groups, mode=mode)
    return x, w, b, kw


@pytest.mark.parametrize("case", DIRECT_CASES, ids=direct_case_id)
@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
def test_direct_layers(case, mode):
    """Each layer against the reference, with a bias and an activation, and the same bits at 1, 2
    and 3 threads (the tasks' bands change with the thread count, the FMA chains do not)."""
    x, w, b, kw = direct_layer(case, np.float32, mode)
    results = []
    for threads in (1, 2, 3):
        dmlops.set_num_threads(threads)
        results.append(dmlops.convolution(x, w, b, fused_activation="leaky_relu", **kw))
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(np.uint32), results[0].view(np.uint32))
    assert_close(results[0], x, w, b, ("leaky_relu", {"alpha": 0.01}), **kw)


# (x shape, filter shape, keywords): on several threads each task pads the input rows of its band
# itself; bands of part of a row, of one row and of several, rows wholly in the padding (start
# padding past the kernel), vertical strides and dilations, groups, batches, float16.
OWN_ROWS_CASES = [
    ((1, 5, 9, 7), (32, 5, 3, 3), dict(start_padding=1, end_padding=1)),
    ((2, 4, 11, 6), (20, 4, 3, 2), dict(strides=(3, 1), start_padding=(4, 0), end_padding=(5, 1))),
    ((1, 6, 13, 9), (34, 3, 2, 3), dict(dilations=(3, 1), strides=(2, 2), start_padding=(2, 1), group_count=2)),
    ((1, 3, 4, 40), (16, 3, 5, 1), dict(start_padding=(6, 0), end_padding=(2, 0), mode="convolution")),
    ((3, 8, 6, 6), (32, 8, 1, 3), dict(end_padding=(0, 2))),
]


@pytest.mark.parametrize("case", OWN_ROWS_CASES, ids=lambda c: "x".join(map(str, c[0])) + "_" + "x".join(map(str, c[1])))
@pytest.mark.parametrize("dtype", FLOATS[:2])
def test_direct_tasks_pad_their_own_rows(case, dtype):
    """Each task pads the rows its band reads (plan: padded_per_pass) on 2 to 17 threads, in
    layers of one or two channel blocks; the same bits as one thread, where the planes are padded
    up front, and the reference."""
    x_shape, w_shape, kw = case
    rng = np.random.default_rng(list(x_shape) + list(w_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x_shape), dmlops.TensorDesc(dtype, w_shape), **kw)
    results = {}
    for threads in (1, 2, 3, 5, 8, 17):
        with dmlops.threads(threads):
            plan = desc.plan(algorithm="direct")
            own_rows = threads > 1 and plan.tasks > 1 and plan.tiles["channel_blocks"] <= 2
            assert plan.tiles["padded_per_pass"] == own_rows, threads
            results[threads] = desc(x, w, algorithm="direct")
    assert own_rows or plan.tiles["channel_blocks"] > 2  # on 17 threads every case has several tasks
    assert_close(results[1], x, w, **{name: getattr(desc, name) for name in (
        "strides", "dilations", "start_padding", "end_padding", "group_count", "mode")})
    for threads, y in results.items():
        np.testing.assert_array_equal(y, results[1], err_msg=f"{threads} threads")


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("per_group", [16, 17, 31, 32, 48, 64, 80, 100])
def test_direct_every_output_width(per_group, groups):
    """Rows of 1 to 20 outputs (every tile size and split of a row into tiles), two rows (a
    band's positions run on from one row into the next), for every block structure of the
    output channels."""
    rng = np.random.default_rng([per_group, groups])
    w = rng.standard_normal((per_group * groups, 2, 2, 3)).astype(np.float32)
    kw = dict(start_padding=(0, 1), end_padding=(0, 1), group_count=groups)
    for width in range(1, 21):
        x = rng.standard_normal((1, 2 * groups, 3, width)).astype(np.float32)
        y = dmlops.convolution(x, w, **kw)
        assert y.shape == (1, per_group * groups, 2, width)
        assert_close(y, x, w, **kw)


def direct_views(x, w, y_shape):
    """The layouts the direct kernel must read and write like dense arrays: a channels-last
    input, filters whose rows are not contiguous, and outputs inside bigger arrays."""
    cl_x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
    transposed_w = np.ascontiguousarray(np.swapaxes(w, 0, 1)).swapaxes(0, 1)
    wide_w = np.zeros(w.shape[:2] + tuple(k + 2 for k in w.shape[2:]), w.dtype)
    wide_w[(slice(None), slice(None)) + tuple(slice(1, 1 + k) for k in w.shape[2:])] = w
    sliced_w = wide_w[(slice(None), slice(None)) + tuple(slice(1, 1 + k) for k in w.shape[2:])]
    spatial = y_shape[2:]
    return {
        "channels_last_input": (cl_x, w, None),
        "transposed_filter": (x, transposed_w, None),
        "sliced_filter": (x, sliced_w, None),
        # channels 3 .. 3 + OC of a channels-last array with 7 more channels
        "channels_last_out": (x, w, lambda: np.moveaxis(np.full((y_shape[0], *spatial, y_shape[1] + 7), -9, x.dtype),
                                                        -1, 1)[:, 3:3 + y_shape[1]]),
        "reversed_out": (x, w, lambda: np.full(y_shape, -9, x.dtype)[:, ::-1, ..., ::-1]),
        # with a channels-last input and a transposed filter at once
        "every_other_out": (cl_x, transposed_w, lambda: np.full(y_shape[:-1] + (2 * y_shape[-1],), -9,
                                                                 x.dtype)[..., ::2]),
    }


DIRECT_VIEW_CASES = [DIRECT_CASES[i] for i in (1, 2, 8, 11, 16)]


@pytest.mark.parametrize("case", DIRECT_VIEW_CASES, ids=direct_case_id)
@pytest.mark.parametrize("layout", ["channels_last_input", "transposed_filter", "sliced_filter", "channels_last_out",
                                    "reversed_out", "every_other_out"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_direct_strided_views(case, layout, dtype):
    """Any layout gives the bits of dense arrays (the same chains run on the same values; float16
    rounds once at the end), close to the reference; an out= inside a bigger array is written in
    its elements only."""
    x, w, b, kw = direct_layer(case, dtype)
    expected = dmlops.convolution(x, w, b, fused_activation="sigmoid", **kw)
    xv, wv, new_out = direct_views(x, w, expected.shape)[layout]
    assert np.array_equal(xv, x) and np.array_equal(wv, w)
    out = None if new_out is None else new_out()
    result = dmlops.convolution(xv, wv, b, fused_activation="sigmoid", out=out, **kw)
    if out is not None:
        assert result is out
        base = out.base
        assert np.count_nonzero(base == -9) == base.size - out.size + np.count_nonzero(out == -9)
    np.testing.assert_array_equal(result, expected)
    assert_close(expected, x, w, b, ("sigmoid", {}), **kw)


def test_direct_float32_out_not_in_place():
    """A float32 out= at an odd address, or whose strides are not whole elements (a field of a
    structured array), is not written in place but through the staging rows: the same bits."""
    x, w, b, kw = direct_layer(DIRECT_CASES[0], np.float32)
    expected = dmlops.convolution(x, w, b, **kw)
    raw = np.zeros(expected.nbytes + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, expected.size, offset=1).reshape(expected.shape)
    records = np.zeros(expected.shape, [("value", np.float32), ("tag", np.uint8)])
    records["tag"] = 7
    assert not unaligned.flags.aligned and records["value"].strides[-1] == 5
    for out in (unaligned, records["value"]):
        assert dmlops.convolution(x, w, b, out=out, **kw) is out
        np.testing.assert_array_equal(out, expected)
    assert np.all(records["tag"] == 7)


def test_direct_gives_the_gemms_bits():
    """The promise of core/direct.hpp: its chains are the im2col GEMM's, so the first 7 output
    channels of a direct layer (16 and 40 channels) have the bits of the same layer with only
    those 7 (too few for the direct kernel with any ISA: the GEMM runs), for float32 and float16,
    through padded planes and read in place; likewise the first 17 and 33 (other channel blocks:
    4 + 1 and 4 + 2 + 1 vectors with AVX-512) of the 40; and a pointwise layer of 130 input
    channels (direct's pointwise tile, positions one element apart, rows spanned)."""
    rng = np.random.default_rng(23)
    for dtype in ("float32", "float16"):
        for x_shape, oc, kw in [((2, 20, 9, 10), 16, dict(start_padding=(1, 1), end_padding=(1, 1))),
                                ((1, 40, 8, 300), 40, dict(strides=(1, 2), dilations=(2, 1))),
                                ((1, 6, 11, 12), 16, {}),
                                ((2, 130, 9, 11), 40, dict(kernel=1))]:  # pointwise: its own tile
            size = kw.pop("kernel", 3)
            x = rng.standard_normal(x_shape).astype(dtype)
            w = rng.standard_normal((oc, x_shape[1], size, size)).astype(dtype)
            b = rng.standard_normal((1, oc, 1, 1)).astype(dtype)
            direct = dmlops.convolution(x, w, b, **kw)
            for m in (7, 17, 33)[: 1 if oc == 16 else 3]:
                cut = dmlops.convolution(x, w[:m], b[:, :m], **kw)
                np.testing.assert_array_equal(direct[:, :m], cut, err_msg=f"{dtype} {x_shape} {kw} {m}")


GEMM_IN_PLACE_CASES = [  # (x shape, w shape, kw): K <= 128, output channels and positions around the tiles
    ((1, 64, 9, 7), (256, 64, 1, 1), {}),                          # 63 positions: 3 micro-panels + 15
    ((2, 16, 8, 8), (13, 16, 1, 1), {}),                           # 13 rows: two panels + 1 row
    ((1, 8, 16, 16), (6, 8, 3, 3), dict(start_padding=1, end_padding=1)),  # whole tiles only
    ((1, 4, 5, 5), (5, 4, 3, 3), {}),                               # no whole tile: staged only
    ((2, 12, 20, 19), (30, 6, 3, 3), dict(group_count=2, strides=(1, 2), start_padding=(1, 0))),
    ((1, 100, 30, 31), (50, 100, 1, 1), {}),                        # several position blocks
]


@pytest.mark.parametrize("case", GEMM_IN_PLACE_CASES, ids=lambda c: "x".join(map(str, c[0])) + ">" + str(c[1][0]))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_writes_whole_tiles_in_place(case, dtype):
    """The GEMM writes whole tiles of a short K straight into an output of contiguous planes
    (a new array, or out= with channels reversed: a negative channel stride) and stages the edge
    tiles; an out= whose planes are strided is staged whole. Same bits every way and on every
    thread count, within the reference's bound, with a bias and an activation applied in place."""
    x_shape, w_shape, kw = case
    rng = np.random.default_rng(41)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal((1, w_shape[0], 1, 1)).astype(dtype)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x.shape), dmlops.TensorDesc(dtype, w.shape),
                                  dmlops.TensorDesc(dtype, b.shape),
                                  fused_activation=dmlops.Activation("leaky_relu", alpha=0.2), **kw)
    expected = desc(x, w, b, algorithm="gemm")
    assert_close(expected, x, w, b, ("leaky_relu", {"alpha": 0.2}), **{
        name: getattr(desc, name) for name in ("strides", "dilations", "start_padding", "end_padding", "group_count")})
    for threads in (1, 2, 3, 7):
        with dmlops.threads(threads):
            reversed_channels = np.zeros(expected.shape, dtype)[:, ::-1]
            strided = np.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), dtype)[..., ::2]
            for out in (None, reversed_channels, strided):
                y = desc(x, w, b, out=out, algorithm="gemm")
                np.testing.assert_array_equal(y, expected, err_msg=f"{threads} threads, out strides "
                                              f"{None if out is None else out.strides}")


@pytest.mark.parametrize("switch", ["DMLOPS_DISABLE_AVX2", "DMLOPS_DISABLE_AVX512"])
def test_direct_other_kernels_agree(switch, tmp_path):
    """Direct layers in a child process without AVX-512 (the AVX2 kernel: 8 lanes, tiles of 6 x 2
    vectors, passes of 56 channels of a 3x3 window; the layer of 12 output channels runs direct
    there and on the GEMM here) or without AVX2 (the portable kernel; the switches are read once
    per process). The AVX2 and AVX-512 kernels run the same FMA chains, so without AVX-512 the
    bits are this process's; the portable kernel rounds products apart: close to the reference."""
    layers = [direct_layer(DIRECT_CASES[i], dtype) for i, dtype in ((2, "float32"), (5, "float32"), (6, "float16"),
                                                                    (11, "float32"), (16, "float16"))]
    layers.append(direct_layer(((2, 3, 7, 9), (12, 3, 3, 3), (1, 2), (1, 1), (1, 1), (0, 1), 1), "float32"))
    for i, (x, w, b, kw) in enumerate(layers):
        np.savez(tmp_path / f"{i}.npz", x=x, w=w, b=b)
        (tmp_path / f"{i}.json").write_text(json.dumps(kw))
    code = (
        "import json, pathlib, sys\n"
        "import numpy as np, dmlops\n"
        "folder = pathlib.Path(sys.argv[1])\n"
        "for i in range(int(sys.argv[2])):\n"
        "    a, kw = np.load(folder / f'{i}.npz'), json.loads((folder / f'{i}.json').read_text())\n"
        "    np.save(folder / f'{i}_y.npy', dmlops.convolution(a['x'], a['w'], a['b'], fused_activation='relu', **kw))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path), str(len(layers))], env=dict(os.environ, **{switch: "1"}),
                   check=True)
    for i, (x, w, b, kw) in enumerate(layers):
        there = np.load(tmp_path / f"{i}_y.npy")
        assert_close(there, x, w, b, ("relu", {}), **kw)
        if switch == "DMLOPS_DISABLE_AVX512":
            here = dmlops.convolution(x, w, b, fused_activation="relu", **kw)
            np.testing.assert_array_equal(there, here, err_msg=f"layer {i}")


# ---------------------------------------------------------------------------------------------
# The algorithm list: every algorithm forced, the list's choice pinned, plan(), DMLOPS_VERBOSE,
# prepare()

# (algorithm, x shape, filter shape, keywords): layers each algorithm applies to, with strides,
# dilations, padding, groups, channel multipliers and tails of its vectors, 1-D to 3-D.
FORCED = [
    ("gemm", (2, 6, 9, 11), (10, 3, 3, 2), dict(group_count=2, strides=(2, 1), dilations=(1, 2), start_padding=(1, 0))),
    ("gemm", (1, 3, 30), (7, 3, 4), dict(strides=3, start_padding=2, end_padding=2, mode="convolution")),
    ("gemm", (1, 24, 9, 9), (40, 24, 1, 1), dict(strides=2)),
    ("direct", (2, 8, 10, 9), (32, 8, 3, 3), dict(start_padding=1, end_padding=1)),
    ("direct", (1, 6, 13, 7), (40, 3, 2, 3), dict(group_count=2, strides=(2, 1), dilations=(2, 1), mode="convolution")),
    ("direct", (1, 130, 5, 6), (17, 130, 1, 1), {}),
    ("direct", (1, 12, 5, 6), (20, 12, 1, 1), {}),  # passed over (few input channels), runs when forced
    ("direct", (2, 5, 9, 8), (6, 5, 3, 3), dict(start_padding=1)),  # passed over (6 output channels)
    ("direct", (1, 4, 5, 6, 7), (16, 4, 2, 2, 3), dict(strides=(1, 1, 2), start_padding=(1, 0, 1))),
    ("depthwise_lanes", (2, 20, 11, 12), (20, 1, 3, 3), dict(group_count=20, strides=(1, 2), start_padding=1)),
    ("depthwise_lanes", (1, 9, 40), (18, 1, 5), dict(group_count=9, strides=2, dilations=2, mode="convolution")),
    ("depthwise_lanes", (1, 3, 9, 10), (3, 1, 3, 3), dict(group_count=3, start_padding=1)),  # passed over: 3 lanes
    ("depthwise_rows", (1, 2, 9, 40), (6, 1, 3, 3), dict(group_count=2, start_padding=1, end_padding=1)),
    ("depthwise_rows", (2, 20, 7, 9), (20, 1, 2, 3), dict(group_count=20, strides=(2, 3), dilations=(1, 2))),
    ("backward_phases", (2, 8, 16, 16), (8, 16, 4, 4),
     dict(direction="backward", strides=2, start_padding=1, end_padding=1)),
    ("backward_phases", (2, 4, 20, 23), (4, 18, 3, 5),
     dict(direction="backward", group_count=2, strides=(2, 3), start_padding=(0, 2), mode="convolution")),
    ("backward_scatter", (2, 6, 5, 7), (6, 4, 3, 3),
     dict(direction="backward", group_count=2, strides=(2, 1), dilations=(1, 2), start_padding=(1, 0))),
    ("backward_scatter", (2, 8, 16, 16), (8, 16, 4, 4), dict(direction="backward", strides=2, start_padding=1)),
]


def forced_dtypes(algorithm):
    """backward_phases computes float32 only, direct float32 and float16."""
    return {"backward_phases": FLOATS[:1], "direct": FLOATS[:2]}.get(algorithm, FLOATS)


def test_every_algorithm_is_forced_somewhere():
    assert {case[0] for case in FORCED} == set(dmlops.convolution_algorithms())


@pytest.mark.parametrize("case", FORCED, ids=lambda c: c[0] + "_" + "x".join(map(str, c[1])))
def test_forced_algorithm_matches_the_reference_on_every_thread_count(case):
    algorithm, x_shape, w_shape, kw = case
    rng = np.random.default_rng(7)
    out_channels = w_shape[0] if kw.get("direction", "forward") == "forward" else w_shape[1] * kw.get("group_count", 1)
    for dtype in forced_dtypes(algorithm):
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal((1, out_channels) + (1,) * (len(x_shape) - 2)).astype(dtype)
        desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x.shape), dmlops.TensorDesc(dtype, w.shape),
                                      dmlops.TensorDesc(dtype, b.shape), **kw)
        assert desc.plan(algorithm=algorithm).algorithm == algorithm
        results = []
        for threads in (1, 2, 3, 7):
            with dmlops.threads(threads):
                results.append(desc(x, w, b, algorithm=algorithm))
        assert_close(results[0], x, w, b, **{name: getattr(desc, name) for name in (
            "strides", "dilations", "start_padding", "end_padding", "group_count", "mode", "direction")})
        for threads, y in zip((2, 3, 7), results[1:]):
            np.testing.assert_array_equal(y, results[0], err_msg=f"{algorithm} {dtype} on {threads} threads")


def layer(dtype, x_shape, w_shape, **kw):
    return dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x_shape), dmlops.TensorDesc(dtype, w_shape), **kw)


# The list's choice for representative layers, pinned so that a change of the list or of a
# predicate cannot change it silently. Every layer has at least 16 output channels per group (a
# vector of floats with AVX-512, two with AVX2) or fewer than 8, so the choice is the same on either.
PINNED = [
    ("ResNet 3x3 64@56", layer("float32", (1, 64, 56, 56), (64, 64, 3, 3), start_padding=1, end_padding=1), "direct", ""),
    ("ResNet 1x1 1024>256@14", layer("float32", (1, 1024, 14, 14), (256, 1024, 1, 1)), "direct", ""),
    ("ResNet 1x1 64>256@56", layer("float32", (1, 64, 56, 56), (256, 64, 1, 1)), "gemm", ""),
    ("1x1 512>1024 stride 2", layer("float32", (1, 512, 28, 28), (1024, 512, 1, 1), strides=2), "direct", "sampled"),
    ("3x3 float64", layer("float64", (1, 64, 28, 28), (64, 64, 3, 3), start_padding=1), "gemm", ""),
    ("depthwise 3x3", layer("float32", (1, 32, 112, 112), (32, 1, 3, 3), group_count=32, start_padding=1),
     "depthwise_lanes", ""),
    ("one channel, 16 outputs", layer("float32", (1, 1, 64, 64), (16, 1, 3, 3)), "depthwise_rows", ""),
    ("grouped 3x3", layer("float32", (1, 256, 28, 28), (512, 8, 3, 3), group_count=32, start_padding=1), "direct", ""),
    ("grouped, 4 outputs per group", layer("float32", (1, 64, 28, 28), (64, 4, 3, 3), group_count=16), "gemm", ""),
    ("strided 3x3", layer("float32", (1, 128, 56, 56), (128, 128, 3, 3), strides=2, start_padding=1), "direct", ""),
    ("backward 4x4 stride 2", layer("float32", (1, 64, 28, 28), (64, 32, 4, 4), direction="backward", strides=2,
                                    start_padding=1, end_padding=1), "backward_phases", ""),
    ("backward 2x2 stride 2", layer("float32", (1, 64, 28, 28), (64, 32, 2, 2), direction="backward", strides=2),
     "backward_scatter", ""),
    ("huge dilation", layer("float32", (1, 16, 40), (32, 16, 3), strides=3, dilations=100000, start_padding=100000,
                            end_padding=100000), "direct", "compact"),
]


@pytest.mark.parametrize("case", PINNED, ids=lambda c: c[0])
def test_the_lists_choice_is_pinned(case):
    _, desc, algorithm, rewrite = case
    plan = desc.plan()
    assert (plan.algorithm, plan.rewrite) == (algorithm, rewrite), plan


def test_a_128_channel_pointwise_layer_runs_gemm_on_few_threads_only():
    """1x1 128>512@28: the GEMM (its sums written in place) on up to 4 threads, direct above."""
    desc = layer("float32", (1, 128, 28, 28), (512, 128, 1, 1))
    for threads, algorithm in [(1, "gemm"), (4, "gemm"), (5, "direct"), (16, "direct")]:
        with dmlops.threads(threads):
            assert desc.plan().algorithm == algorithm, threads
    with dmlops.threads(1):  # one channel fewer or more: the 128-channel rule alone
        assert layer("float32", (1, 127, 28, 28), (512, 127, 1, 1)).plan().algorithm == "gemm"
        assert layer("float32", (1, 129, 28, 28), (512, 129, 1, 1)).plan().algorithm == "direct"


@pytest.mark.parametrize("switch", [None, "DMLOPS_DISABLE_AVX512"])
def test_a_pointwise_layer_of_one_block_of_output_channels_runs_direct(switch):
    """1x1 layers with 64 input channels or more whose output channels fill one of the direct
    algorithm's blocks (all of its 4 vectors with AVX-512, 2 otherwise) run direct on
    several threads; on one thread, with fewer input channels, a half block or two blocks, the
    GEMM (below 128 input channels). Judged on the ISA the kernels run."""
    code = ("import dmlops\n"
            "T = dmlops.TensorDesc\n"
            "for ci, co in [(64, 64), (96, 64), (64, 128), (64, 32), (32, 64), (64, 16), (64, 12), (64, 8), (48, 16)]:\n"
            "    d = dmlops.ConvolutionDesc(T('float32', (1, ci, 20, 20)), T('float32', (co, ci, 1, 1)))\n"
            "    for n in (1, 2):\n"
            "        with dmlops.threads(n):\n"
            "            p = d.plan()\n"
            "        print(n, ci, co, p.algorithm, p.isa)\n")
    lines = run_child(code, **({switch: "1"} if switch else {})).stdout.splitlines()
    assert len(lines) == 18, lines
    directs = 0
    for line in lines:
        threads, ci, co, algorithm, isa = line.split()
        lanes = {"avx512": 16, "avx2": 8}.get(isa, 4)
        block = lanes * (4 if isa == "avx512" else 2)
        one_block = threads == "2" and int(ci) >= 64 and -(-int(co) // lanes) == block // lanes
        directs += one_block
        assert algorithm == ("direct" if one_block else "gemm"), line
    assert directs == 2, lines  # (64, 64) and (96, 64) with AVX-512; (64, 16) and (64, 12) with AVX2


def test_a_pointwise_layer_has_the_same_bits_on_gemm_and_direct():
    """The pointwise rule picks the GEMM on one thread and direct on several: both sum each output
    in the same order, so the result does not depend on the thread count."""
    rng = np.random.default_rng(64)
    x = rng.standard_normal((2, 96, 23, 17)).astype(np.float32)
    w = rng.standard_normal((64, 96, 1, 1)).astype(np.float32)
    b = rng.standard_normal((1, 64, 1, 1)).astype(np.float32)
    desc = layer("float32", x.shape, w.shape, bias=dmlops.TensorDesc("float32", (1, 64, 1, 1)))
    results = {}
    for threads in (1, 2, 3, 7):
        with dmlops.threads(threads):
            results[threads] = desc(x, w, b)
    for algorithm in ("gemm", "direct"):
        results[algorithm] = desc(x, w, b, algorithm=algorithm)
    assert_close(results[1], x, w, b)
    for key, y in results.items():
        np.testing.assert_array_equal(y, results[1], err_msg=str(key))


@pytest.mark.parametrize("activation", ["relu", dmlops.Activation("leaky_relu", alpha=0.25), None])
@pytest.mark.parametrize("in_channels", [40, 200])  # sums written in place; sums through a scratch
def test_the_gemm_tiles_bias_and_relu_give_the_bits_of_direct(activation, in_channels):
    """The GEMM's tiles add the bias and apply a relu as they store the sums (other activations
    run over them after): the bits of direct, which applies both after its sums, on every thread
    count. 43 output channels and 23x17 positions leave partial tiles on both edges; zero biases
    and a row of zero inputs give exact zeros for the relu to meet."""
    rng = np.random.default_rng(43)
    x = rng.standard_normal((2, in_channels, 23, 17)).astype(np.float32)
    x[:, :, 3] = 0
    w = rng.standard_normal((43, in_channels, 1, 1)).astype(np.float32)
    b = rng.standard_normal((1, 43, 1, 1)).astype(np.float32)
    b[0, :5] = 0
    desc = layer("float32", x.shape, w.shape, bias=dmlops.TensorDesc("float32", b.shape), fused_activation=activation)
    expected = desc(x, w, b, algorithm="direct")
    spec = None if activation is None else ("relu", {}) if activation == "relu" else ("leaky_relu", {"alpha": 0.25})
    assert_close(expected, x, w, b, spec)
    for threads in (1, 2, 5):
        with dmlops.threads(threads):
            y = desc(x, w, b, algorithm="gemm")
        np.testing.assert_array_equal(y.view(np.uint32), expected.view(np.uint32), err_msg=f"{threads} threads")
    for dtype in ("float16", "float64"):
        xd, wd, bd = x.astype(dtype), w.astype(dtype), b.astype(dtype)
        d = layer(dtype, x.shape, w.shape, bias=dmlops.TensorDesc(dtype, b.shape), fused_activation=activation)
        assert_close(d(xd, wd, bd, algorithm="gemm"), xd, wd, bd, spec)


def test_gemm_tasks_spread_evenly_over_two_threads_with_blocks_that_only_shrink():
    """Each GEMM task packs its own im2col panel, which must fit the cache: on several threads the
    count of position blocks is raised (never lowered) until the tasks spread evenly (5 tasks on 2
    threads take 3 units of time, 6 take 3 units of less work each)."""
    desc = layer("float64", (1, 64, 28, 28), (64, 64, 3, 3), start_padding=1, end_padding=1)
    with dmlops.threads(1):
        alone = desc.plan()
    with dmlops.threads(2):
        two = desc.plan()
    assert alone.algorithm == two.algorithm == "gemm"
    assert two.tasks % 2 == 0, two
    assert two.tiles["position_block"] <= alone.tiles["position_block"], (alone, two)
    x = np.random.default_rng(2).standard_normal((1, 64, 28, 28))
    w = np.random.default_rng(3).standard_normal((64, 64, 3, 3))
    with dmlops.threads(2):
        y = desc(x, w)
    with dmlops.threads(1):
        np.testing.assert_array_equal(desc(x, w), y)


def test_forcing_an_algorithm_that_does_not_apply_raises_naming_it():
    x = np.ones((1, 8, 9, 9))
    w = np.ones((16, 8, 3, 3))
    desc = layer("float64", x.shape, w.shape)
    with pytest.raises(ValueError, match=r"'direct' does not apply to this layer: float32 and float16 sums only"):
        desc.plan(algorithm="direct")
    out = np.full((1, 16, 7, 7), 7.0)
    with pytest.raises(ValueError, match=r"'backward_phases' does not apply to this layer: a backward algorithm"):
        desc(x, w, out=out, algorithm="backward_phases")
    assert np.all(out == 7.0)
    with pytest.raises(ValueError, match=r"'winograd' is unknown; expected one of depthwise_lanes, depthwise_rows"):
        desc(x, w, algorithm="winograd")
    with pytest.raises(TypeError, match="algorithm must be a str"):
        desc.plan(algorithm=3)


def test_direct_splits_the_channels_of_small_planes_on_many_threads():
    # 3x3 192@5: the filter (192 x 192 x 9) far outweighs the input (192 x 25), so on many threads
    # the blocks narrow to 2 vectors and the 2-reader filter is packed per pass; the bits do not move.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 192, 5, 5)).astype(np.float32)
    w = rng.standard_normal((192, 192, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 192, 1, 1)).astype(np.float32)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", x.shape), dmlops.TensorDesc("float32", w.shape),
                                  dmlops.TensorDesc("float32", b.shape), start_padding=1, end_padding=1)
    plans, results = {}, {}
    for threads in (1, 2, 5, 16, 17):
        with dmlops.threads(threads):
            plans[threads] = desc.plan()
            results[threads] = desc(x, w, b)
    assert {p.algorithm for p in plans.values()} == {"direct"}
    if plans[1].isa == "avx512":  # 3 blocks of 4 vectors for one thread, 6 of 2 for 16 threads
        assert (plans[1].tiles["vectors"], plans[16].tiles["vectors"], plans[16].tiles["channel_blocks"]) == (4, 2, 6)
    assert plans[16].tiles["vectors"] == 2
    assert_close(results[1], x, w, b, start_padding=(1, 1), end_padding=(1, 1))
    for threads, y in results.items():
        np.testing.assert_array_equal(y, results[1], err_msg=f"on {threads} threads")


def test_plan_fields():
    desc = layer("float32", (2, 32, 20, 20), (256, 32, 1, 1))
    with dmlops.threads(3):
        plan = desc.plan()
    assert plan.algorithm == "gemm" and plan.threads == 3 and plan.rewrite == ""
    assert plan.isa == dmlops._core.fma_isa()
    assert plan.tiles["MR"] == 6 and plan.tiles["K"] == 32 and plan.tiles["NR"] == 16
    assert plan.tasks >= 2 and plan.reason == "any forward layer"
    assert str(plan).startswith(f"algorithm=gemm isa={plan.isa} MR=6 NR=16 K=32")
    forced = desc.plan(algorithm="gemm")
    assert forced.reason == "forced (any forward layer)"
    direct = layer("float32", (1, 64, 56, 56), (64, 64, 3, 3)).plan()
    assert direct.algorithm == "direct" and {"lanes", "vectors", "bands", "band", "channel_pass"} <= set(direct.tiles)


def test_direct_packs_a_pointwise_filter_per_pass_whatever_the_tasks():
    """A block's filter is packed pass by pass by each task that reads it when a task alone reads
    it, and for pointwise layers always; a window layer read by several tasks shares one packing.
    Same bits either way."""
    x = np.random.default_rng(5).standard_normal((4, 256, 14, 14)).astype(np.float32)
    w1 = (np.random.default_rng(6).standard_normal((64, 256, 1, 1)) / 16).astype(np.float32)
    w3 = (np.random.default_rng(7).standard_normal((64, 256, 3, 3)) / 48).astype(np.float32)
    results, plans = {}, {}
    for threads in (1, 16):
        with dmlops.threads(threads):
            for name, w, pad in (("1x1", w1, 0), ("3x3", w3, 1)):
                desc = layer("float32", x.shape, w.shape, start_padding=pad, end_padding=pad)
                plans[name, threads] = desc.plan()
                results[name, threads] = desc(x, w)
    assert {p.algorithm for p in plans.values()} == {"direct"}
    assert plans["1x1", 16].tiles["bands"] * x.shape[0] > 2 and plans["1x1", 16].tiles["packed_per_pass"] == 1
    assert plans["3x3", 16].tiles["bands"] * x.shape[0] > 2 and plans["3x3", 16].tiles["packed_per_pass"] == 0
    for name, w, pad in (("1x1", w1, 0), ("3x3", w3, 1)):
        assert_close(results[name, 1], x, w, None, start_padding=(pad, pad), end_padding=(pad, pad))
        np.testing.assert_array_equal(results[name, 16], results[name, 1])
    phases = layer("float32", (1, 64, 28, 28), (64, 32, 4, 4), direction="backward", strides=2, start_padding=1,
                   end_padding=1).plan()
    assert phases.algorithm == "backward_phases" and phases.tiles == {"phases": 4} and phases.tasks == 4
    assert phases.reason == "4 phases, each a forward layer; the first phase runs direct", phases


def run_child(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), check=True, capture_output=True,
                          text=True)


def test_verbose_logs_one_line_per_call():
    code = ("import numpy as np, dmlops\n"
            "dmlops.convolution(np.ones((1, 64, 8, 8), np.float32), np.ones((64, 64, 3, 3), np.float32))\n"
            "dmlops.convolution(np.ones((1, 4, 5), np.float64), np.ones((4, 2, 2)), direction='backward', strides=2)\n")
    lines = run_child(code, DMLOPS_VERBOSE="1", DMLOPS_NUM_THREADS="2").stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("dmlops: Convolution forward 1x64x8x8 f32 3x3 -> algorithm=direct isa="), lines[0]
    assert " tasks=" in lines[0] and " threads=2 reason=a window of several taps" in lines[0], lines[0]
    assert lines[1].startswith("dmlops: Convolution backward 1x4x5 f64 2 -> algorithm=backward_scatter"), lines[1]
    assert run_child(code).stderr == ""


def test_the_environment_forces_an_algorithm():
    code = ("import numpy as np, dmlops\n"
            "x, w = np.ones((1, 64, 8, 8), np.float32), np.ones((64, 64, 3, 3), np.float32)\n"
            "d = dmlops.ConvolutionDesc(dmlops.TensorDesc('float32', x.shape), dmlops.TensorDesc('float32', w.shape))\n"
            "print(d.plan().algorithm, d.plan(algorithm='direct').algorithm, d(x, w)[0, 0, 0, 0])\n"
            "try:\n"
            "    dmlops.convolution(x[:, :1], w[:1, :1], direction='backward')\n"
            "except ValueError as e:\n"
            "    print(e)\n")
    out = run_child(code, DMLOPS_CONVOLUTION_ALGORITHM="gemm").stdout.splitlines()
    assert out[0] == "gemm direct 576.0", out
    assert out[1] == "Convolution: the algorithm 'gemm' does not apply to this layer: a forward algorithm", out


PREPARED = [
    ("direct", (1, 64, 7, 7), (64, 64, 3, 3), dict(start_padding=1, end_padding=1)),
    ("direct", (3, 8, 10, 9), (32, 8, 3, 3), dict(strides=2, mode="convolution")),
    ("gemm", (2, 6, 9, 11), (10, 3, 3, 2), dict(group_count=2, strides=(2, 1))),
    ("gemm", (1, 12, 9, 9), (40, 12, 1, 1), dict(strides=2)),
    ("gemm", (1, 64, 7, 7), (512, 64, 1, 1), {}),  # one task per channel block: A packed inside the product
    ("depthwise_lanes", (1, 20, 11, 12), (20, 1, 3, 3), dict(group_count=20, start_padding=1)),
    ("backward_phases", (2, 8, 16, 16), (8, 16, 4, 4), dict(direction="backward", strides=2, start_padding=1)),
]


@pytest.mark.parametrize("case,dtype", [(c, dtype) for c in PREPARED for dtype in forced_dtypes(c[0])[:2]],
                         ids=lambda c: c if isinstance(c, str) else c[0] + "_" + "x".join(map(str, c[1])))
def test_prepare_gives_the_calls_bits(case, dtype):
    algorithm, x_shape, w_shape, kw = case
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    out_channels = w_shape[0] if kw.get("direction", "forward") == "forward" else w_shape[1] * kw.get("group_count", 1)
    b = rng.standard_normal(out_channels).astype(dtype)
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc(dtype, x.shape), dmlops.TensorDesc(dtype, w.shape),
                                  dmlops.TensorDesc(dtype, (1, out_channels) + (1,) * (len(x_shape) - 2)), **kw)
    f = desc.prepare(w[..., ::1], b)  # a (OutC,) bias, as the call takes it
    assert f.plan().algorithm == algorithm and f.packed == (algorithm in ("gemm", "direct"))
    expected = desc(x, w, b)
    for threads in (1, 2, 7):
        with dmlops.threads(threads):
            np.testing.assert_array_equal(f(x), expected, err_msg=f"{threads} threads")
    out = np.empty_like(expected)
    assert f(x, out=out) is out
    np.testing.assert_array_equal(out, expected)
    # The filter and bias were copied: changing the caller's arrays changes nothing.
    w[...] = 0
    b[...] = 0
    np.testing.assert_array_equal(f(x), expected)
    forced = desc.prepare(w, b, algorithm="gemm") if desc.direction == "forward" else None
    if forced is not None:
        assert forced.plan().algorithm == "gemm" and forced.packed


def test_prepare_rejects_wrong_arrays():
    desc = layer("float32", (1, 8, 9, 9), (16, 8, 3, 3), bias=dmlops.TensorDesc("float32", (1, 16, 1, 1)))
    w, b = np.ones((16, 8, 3, 3), np.float32), np.ones(16, np.float32)
    with pytest.raises(ValueError, match=r"filter has shape \(16, 8, 3, 2\) but the descriptor says"):
        desc.prepare(w[..., :2], b)
    with pytest.raises(TypeError, match="filter has dtype float64"):
        desc.prepare(w.astype(np.float64), b)
    with pytest.raises(ValueError, match="the descriptor has a bias tensor but the prepare passes none"):
        desc.prepare(w)
    with pytest.raises(ValueError, match="'depthwise_rows' does not apply"):
        desc.prepare(w, b, algorithm="depthwise_rows")
    f = desc.prepare(w, b)
    with pytest.raises(ValueError, match=r"input has shape \(1, 8, 9, 8\) but the descriptor says"):
        f(np.ones((1, 8, 9, 8), np.float32))
    with pytest.raises(TypeError, match="input has dtype float64"):
        f(np.ones((1, 8, 9, 9)))
    with pytest.raises(ValueError, match="out"):
        f(np.ones((1, 8, 9, 9), np.float32), out=np.empty((1, 16, 7, 6), np.float32))


# ---------------------------------------------------------------------------------------------
# Both instruction-set paths, docstrings


@pytest.mark.parametrize("switch", ["DMLOPS_DISABLE_AVX2", "DMLOPS_DISABLE_AVX512"])
def test_other_kernels_agree(switch):
    """The portable GEMM (DMLOPS_DISABLE_AVX2=1) or the AVX2 one (DMLOPS_DISABLE_AVX512=1; the
    switches are read once per process) in a child process. The AVX2 and AVX-512 kernels run the
    same FMA chains, so without AVX-512 the bits are those of this process."""
    code = (
        "import numpy as np, dmlops\n"
        "rng = np.random.default_rng(1)\n"
        "x = rng.standard_normal((2, 5, 9, 8)); w = rng.standard_normal((7, 5, 3, 2))\n"
        "for dt in ('float32', 'float64', 'float16'):\n"
        "    a, b = x.astype(dt), w.astype(dt)\n"
        "    np.save(f'{OUT}/{dt}_f.npy', dmlops.convolution(a, b, strides=(2, 1), start_padding=(1, 1)))\n"
        "    np.save(f'{OUT}/{dt}_b.npy', dmlops.convolution(a, b[:, :5].transpose(1, 0, 2, 3).copy(),"
        " direction='backward', strides=(2, 1)))\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, **{switch: "1"})
        subprocess.run([sys.executable, "-c", f"OUT = {tmp!r}\n" + code], env=env, check=True)
        rng = np.random.default_rng(1)
        x = rng.standard_normal((2, 5, 9, 8))
        w = rng.standard_normal((7, 5, 3, 2))
        for dt in ("float32", "float64", "float16"):
            a, b = x.astype(dt), w.astype(dt)
            assert_close(np.load(f"{tmp}/{dt}_f.npy"), a, b, strides=(2, 1), start_padding=(1, 1))
            wt = b[:, :5].transpose(1, 0, 2, 3).copy()
            assert_close(np.load(f"{tmp}/{dt}_b.npy"), a, wt, direction="backward", strides=(2, 1))
            if switch == "DMLOPS_DISABLE_AVX512":
                here = dmlops.convolution(a, b, strides=(2, 1), start_padding=(1, 1))
                assert np.array_equal(np.load(f"{tmp}/{dt}_f.npy"), here), dt


@pytest.mark.parametrize("module", ["dmlops.convolution", "dmlops._activation"])
def test_docstrings(module):
    # by name: the package attribute dmlops.convolution is the function, not the module
    result = doctest.testmod(sys.modules[module], optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------------------------------------
# Differential fuzzing against the reference, garbage descriptors, hostile arrays (strategies.py)

FUZZ_ACTIVATIONS = [None, ("relu", {}), ("leaky_relu", {"alpha": 0.2}), ("sigmoid", {}), ("clip", {"min": -0.5, "max": 1.0})]


@st.composite
def convolution_calls(draw):
    D = draw(st.integers(1, 3))
    ints = lambda lo, hi: tuple(draw(st.lists(st.integers(lo, hi), min_size=D, max_size=D)))
    G, Cg, OCg, N = (draw(st.integers(1, 3)) for _ in range(4))
    if draw(st.integers(0, 7)) == 0:  # now and then a depthwise layer with enough channels for the lane kernel
        G, Cg = draw(st.integers(8, 20)), 1
    elif draw(st.integers(0, 6)) == 0:  # or a vector of output channels per group (16, or 8 on AVX2): direct
        OCg = draw(st.integers(8, 40))
    K, s, d = ints(1, 3), ints(1, 3), ints(1, 2)
    start, end = ints(0, 3), ints(0, 3)
    extent = tuple((k - 1) * dd + 1 for k, dd in zip(K, d))
    room = 2 if D == 3 else 5
    In = tuple(max(e - a - b, 1) + draw(st.integers(0, room)) for e, a, b in zip(extent, start, end))
    direction = draw(st.sampled_from(["forward", "backward"]))
    kw = dict(strides=s, dilations=d, start_padding=start, end_padding=end, group_count=G, direction=direction,
              mode=draw(st.sampled_from(["cross_correlation", "convolution"])))
    output_sizes = None
    if direction == "forward":
        filter_shape = (G * OCg, Cg, *K)
    else:
        filter_shape = (G * Cg, OCg, *K)
        kw["output_padding"] = tuple(draw(st.integers(0, max(st_, dd) - 1)) for st_, dd in zip(s, d))
        nominal = [(i - 1) * st_ + e - a - b + o
                   for i, st_, e, a, b, o in zip(In, s, extent, start, end, kw["output_padding"])]
        if min(nominal) < 1 or draw(st.booleans()):
            output_sizes = ints(1, 6)
    return dict(x_shape=(N, G * Cg, *In), w_shape=filter_shape, b_shape=(1, G * OCg) + (1,) * D, kw=kw,
                bias=draw(st.booleans()), activation=draw(st.sampled_from(FUZZ_ACTIVATIONS)),
                output_sizes=output_sizes, form=draw(st.sampled_from(["convolution", "ConvolutionDesc"])))


@given(call=convolution_calls(), dtype=st.sampled_from(FLOATS), threads=st.sampled_from([1, 2, 7]), data=st.data())
def test_fuzz_matches_reference(call, dtype, threads, data):
    x = data.draw(drawn_arrays(call["x_shape"], dtype, kind="finite"))
    w = data.draw(drawn_arrays(call["w_shape"], dtype, kind="finite"))
    b = data.draw(drawn_arrays(call["b_shape"], dtype, kind="finite")) if call["bias"] else None
    kw, activation, output_sizes = call["kw"], call["activation"], call["output_sizes"]
    fused = None if activation is None else dmlops.Activation(activation[0], **activation[1])
    ref_kw = dict(kw, output_spatial=output_sizes)
    expected_shape = convolution_reference(x, w, None, **ref_kw).shape
    out = data.draw(outs(expected_shape, x.dtype))
    dmlops.set_num_threads(threads)
    if call["form"] == "convolution":
        sizes = None if output_sizes is None else expected_shape
        show_call(f"dmlops.convolution(x, w, b, {kwargs_source(**kw)}, fused_activation={fused!r}, "
                  f"output_sizes={sizes}, out=out)", x=x, w=w, b=b, out=out)
        run = lambda: dmlops.convolution(x, w, b, fused_activation=fused, output_sizes=sizes, out=out, **kw)
    else:
        output = None if output_sizes is None else dmlops.TensorDesc(dtype, expected_shape)
        bias = None if b is None else dmlops.TensorDesc.from_array(b)
        show_call(f"dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(w), {bias!r}, "
                  f"{kwargs_source(**kw)}, fused_activation={fused!r}, output={output!r})(x, w, b, out=out)",
                  x=x, w=w, b=b, out=out)
        run = lambda: dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(w), bias,
                                             fused_activation=fused, output=output, **kw)(x, w, b, out=out)
    y = run_and_check_inputs(run, out, *(a for a in (x, w, b) if a is not None))
    assert_close(y, x, w, b, activation, **ref_kw)


VALID_CONV = dict(input=dmlops.TensorDesc("float32", (1, 4, 5, 5)), filter=dmlops.TensorDesc("float32", (6, 2, 3, 3)),
                  bias=dmlops.TensorDesc("float32", (1, 6, 1, 1)), strides=(1, 2), dilations=(1, 1),
                  start_padding=(1, 0), end_padding=(0, 1), group_count=2, fused_activation="relu")
WRONG_CONV = dict(input=[dmlops.TensorDesc("float16", (1, 4, 5, 5)), dmlops.TensorDesc("float32", (4, 5)),
                         dmlops.TensorDesc("float32", (2**20, 2**20, 2**10, 2))],
                  filter=[dmlops.TensorDesc("float32", (6, 4, 3, 3)), dmlops.TensorDesc("float32", (2**30, 2, 2**14, 2**14))],
                  bias=[dmlops.TensorDesc("float32", (6,)), dmlops.TensorDesc("int8", (1, 6, 1, 1))],
                  output=[dmlops.TensorDesc("float32", (1, 6, 4, 4)), dmlops.TensorDesc("float32", (1, 6, 3, 2), (0,) * 4)],
                  strides=[(0, 1), (2**62, 1)], dilations=[(2**40, 1), (0, 0)], start_padding=[(2**62, 0), (-1, 0)],
                  end_padding=[(2**48, 2**48)], output_padding=[(1, 1), (2**63 - 1, 0)], group_count=[0, 3, 2**32, 2**64, 2.0],
                  mode=["correlation", "CONVOLUTION"], direction=["backward", "up"],
                  fused_activation=["gelu", "softmax", dmlops.Activation("elu", alpha=2.0), ("relu",), {"Type": 1}],
                  output_sizes=[(1, 6, 2**40, 2**40), (1, 6, 0, 1)])


@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_descriptors(data):
    x, w, b = good_args()
    function_kwargs = {k: v for k, v in VALID_CONV.items() if k not in ("input", "filter", "bias")}
    fuzz_garbage(data, dmlops.ConvolutionDesc, VALID_CONV, WRONG_CONV, dmlops.convolution, (x, w, b), function_kwargs,
                 WRONG_CONV)


def test_hostile_inputs_are_rejected():
    x, w, b = good_args()
    check_hostile_inputs(lambda bad: dmlops.convolution(bad, w, b, group_count=2), x)
    check_hostile_inputs(lambda bad: dmlops.convolution(x, bad, b, group_count=2), w)
    check_hostile_inputs(lambda bad: dmlops.convolution(x, w, bad, group_count=2), b, allowed=("None",))  # no bias
    desc = dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(w),
                                  dmlops.TensorDesc.from_array(b), group_count=2)
    check_hostile_inputs(lambda bad: desc(bad, w, b), x)
    check_hostile_inputs(lambda bad: desc(x, bad, b), w)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_bad_outs_are_rejected_and_left_untouched(dtype, direction):
    x, w, b = (a.astype(dtype) for a in good_args())
    if direction == "backward":
        w = np.ones((4, 3, 3, 3), dtype)
    shape = dmlops.convolution(x, w, b, group_count=2, direction=direction).shape
    check_bad_outs(lambda out: dmlops.convolution(x, w, b, group_count=2, direction=direction, out=out), x, shape, dtype)
    # overlapping the filter or the bias instead of the input
    for other in (w, b):
        flat = other.reshape(-1)
        if flat.size >= int(np.prod(shape)):
            with pytest.raises(ValueError, match="overlap|shares memory"):
                dmlops.convolution(x, w, b, group_count=2, direction=direction,
                                   out=flat[: int(np.prod(shape))].reshape(shape))


def test_gigantic_outputs_are_rejected_before_allocating():
    x = np.zeros((1, 1, 4, 4), np.float32)
    w = np.zeros((1, 1, 1, 1), np.float32)
    with pytest.raises(ValueError, match="Convolution: .*(bytes|memory)"):
        dmlops.convolution(x, w, start_padding=(2**21, 2**21), end_padding=(2**21, 2**21))
    with pytest.raises(ValueError, match="Convolution: .*(bytes|memory)"):
        dmlops.convolution(x, w, direction="backward", strides=(2**21, 2**21))


@pytest.mark.parametrize("count", [2**32, 2**64, -2**70])
def test_group_count_beyond_a_uint_is_a_clear_value_error(count):
    """Regression: past 64 bits pybind11 refused the call with a generic 'incompatible function
    arguments' TypeError."""
    x, w, b = good_args()
    with pytest.raises(ValueError, match=f"Convolution: group_count is {count}"):
        dmlops.convolution(x, w, b, group_count=count)
    with pytest.raises(ValueError, match=f"Convolution: group_count is {count}"):
        dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(w), group_count=count)
