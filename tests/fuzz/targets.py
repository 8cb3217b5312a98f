"""Coverage-guided fuzz targets (atheris, libFuzzer's engine for Python), one function per target.

Each target takes libFuzzer's bytes and, through atheris.FuzzedDataProvider, builds a hostile
call: it may raise ValueError or TypeError (dmlops' refusals; dxdispatch.ModelError is a
ValueError), and must do nothing else: any other exception, a crash, a hang (libFuzzer's
-timeout) or memory past the run's limit (-rss_limit_mb and RLIMIT_AS) is a finding.

To add a target, write ``def fuzz_<name>(fdp)`` here (``fdp`` an atheris.FuzzedDataProvider) and
decorate it with ``@target``; ``tests/fuzz/run.py`` and scripts/test pick it up by name.
"""

from __future__ import annotations

import json
import math
import pickle
import struct
import sys
from pathlib import Path
from typing import Any, Callable

import atheris
import numpy as np

import dmlops
from dmlops import _descriptor

TARGETS: dict[str, Callable[[Any], None]] = {}
ALLOWED = (ValueError, TypeError)


def target(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    TARGETS[fn.__name__.removeprefix("fuzz_")] = fn
    return fn


PAD_MODES = ("constant", "edge", "reflection", "symmetric", "wrap")
RESAMPLE_SCALES = (1.0, 2.0, 3.0, 0.5, 0.75, 1.25, 1.75, 1 / 3, 2.5)

# Integers at the edges of int64 (and just past them), where size arithmetic overflows.
EDGES = [0, 1, -1, 2, 3, 2**24 + 1, 2**31, 2**32, 2**40, 2**48, 2**52, 2**62 - 1, 2**62, 2**62 + 1,
         2**63 - 1, 2**63, -(2**62), -(2**63), 2**64, -(2**64), 10**400]


def edge_int(fdp: Any) -> int:
    if fdp.ConsumeBool():
        return EDGES[fdp.ConsumeIntInRange(0, len(EDGES) - 1)]
    return fdp.ConsumeIntInRange(-4, 8)


def number(fdp: Any) -> Any:
    kind = fdp.ConsumeIntInRange(0, 4)
    if kind == 0:
        return edge_int(fdp)
    if kind == 1:
        return struct.unpack("<d", struct.pack("<Q", fdp.ConsumeIntInRange(0, 2**64 - 1)))[0]  # any bits
    if kind == 2:
        return fdp.ConsumeBool()
    return [0.5, 1e-30, 2.0**-149, 1e39, math.inf, -math.inf, math.nan, -0.0][fdp.ConsumeIntInRange(0, 7)]


def int_list(fdp: Any) -> Any:
    n = fdp.ConsumeIntInRange(0, 10)
    return [edge_int(fdp) for _ in range(n)] if fdp.ConsumeIntInRange(0, 9) else number(fdp)


def tensor(fdp: Any) -> Any:
    dtype = dmlops.DTYPES[fdp.ConsumeIntInRange(0, len(dmlops.DTYPES) - 1)] if fdp.ConsumeIntInRange(0, 9) else "bool"
    try:
        return dmlops.TensorDesc(dtype, int_list(fdp), int_list(fdp) if fdp.ConsumeBool() else None)
    except ALLOWED:
        return dmlops.TensorDesc("float32", [fdp.ConsumeIntInRange(1, 4) for _ in range(fdp.ConsumeIntInRange(3, 5))])


def json_value(fdp: Any, depth: int = 0) -> Any:
    """Any JSON value, biased to the shapes from_dict reads, sometimes nested very deep."""
    kind = fdp.ConsumeIntInRange(0, 7)
    if kind == 0 and depth < 4:
        keys = ["DataType", "Sizes", "Strides", "Desc", "Type", "InputTensor", "OutputTensor", "FilterTensor",
                "BiasTensor", "StartPadding", "EndPadding", "Strides", "Dilations", "WindowSize", "Scales",
                "PaddingValue", "PaddingMode", "Alpha", "UInt16", "FusedActivation", "DimensionCount", "P"]
        return {keys[fdp.ConsumeIntInRange(0, len(keys) - 1)]: json_value(fdp, depth + 1)
                for _ in range(fdp.ConsumeIntInRange(0, 6))}
    if kind == 1 and depth < 4:
        return [json_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 6))]
    if kind == 2:
        nested: Any = edge_int(fdp)
        for _ in range(fdp.ConsumeIntInRange(0, 3) * 10000):
            nested = [nested] if fdp.ConsumeBool() else {"Desc": nested}
        return nested
    if kind == 3:
        return fdp.ConsumeUnicodeNoSurrogates(16)
    if kind == 4:
        return ["FLOAT32", "FLOAT16", "DML_TENSOR_DATA_TYPE_UINT8", "nan", "inf", "CONSTANT", "ELU"][
            fdp.ConsumeIntInRange(0, 6)]
    return number(fdp)


def descriptor_classes() -> list[type]:
    return sorted((c for c in vars(dmlops).values() if isinstance(c, type) and issubclass(c, _descriptor.Descriptor)),
                  key=lambda c: c.__name__)


def check_round_trips(desc: Any) -> None:
    """A constructed descriptor survives pickle and strict JSON (no NaN literals) unchanged."""
    again = pickle.loads(pickle.dumps(desc))
    assert again == desc, (desc, again)
    text = json.dumps(desc.to_dict(), allow_nan=False)
    assert type(desc).from_dict(json.loads(text)) == desc, desc


@target
def fuzz_descriptors(fdp: Any) -> None:
    """Every descriptor constructor with hostile fields; what it accepts round-trips."""
    classes = descriptor_classes()
    cls = classes[fdp.ConsumeIntInRange(0, len(classes) - 1)]
    kwargs: dict[str, Any] = {}
    for f in cls.FIELDS:
        if f.optional and fdp.ConsumeBool():
            continue
        if f.kind == "tensor":
            kwargs[f.name] = tensor(fdp) if fdp.ConsumeIntInRange(0, 15) else json_value(fdp)
        elif f.kind == "enum":
            names = f.enum.names
            kwargs[f.name] = names[fdp.ConsumeIntInRange(0, len(names) - 1)] if fdp.ConsumeIntInRange(0, 7) else \
                json_value(fdp)
        elif f.kind == "activation":
            try:
                kwargs[f.name] = dmlops.Activation("elu", alpha=number(fdp)) if fdp.ConsumeBool() else "relu"
            except ALLOWED:
                return
        elif f.kind in ("dims", "size_2d", "uint"):
            kwargs[f.name] = int_list(fdp) if f.kind != "uint" else edge_int(fdp)
        else:
            kwargs[f.name] = number(fdp) if f.kind != "floats" else [number(fdp) for _ in
                                                                       range(fdp.ConsumeIntInRange(0, 9))]
    try:
        desc = cls(**kwargs)
    except ALLOWED:
        return
    check_round_trips(desc)


@target
def fuzz_from_dict(fdp: Any) -> None:
    """Every descriptor's from_dict (and TensorDesc's, Activation's) on any JSON value."""
    classes = descriptor_classes() + [dmlops.TensorDesc, dmlops.Activation]
    cls = classes[fdp.ConsumeIntInRange(0, len(classes) - 1)]
    try:
        desc = cls.from_dict(json_value(fdp))
    except ALLOWED:
        return
    if isinstance(desc, _descriptor.Descriptor):
        check_round_trips(desc)


@target
def fuzz_geometry(fdp: Any) -> None:
    """Every operator on a small array with sizes, strides, dilations, paddings and scales at the
    edges of int64: refused, or the descriptor plans its call (plan(), whatever the output's
    size: the planners' arithmetic) and, when the output is small, the call gives it."""
    rank = fdp.ConsumeIntInRange(3, 5)
    shape = tuple(fdp.ConsumeIntInRange(1, 3) for _ in range(rank))
    x = np.ones(shape, np.float32)
    spatial = rank - 2
    arrays = {name: [edge_int(fdp) for _ in range(spatial if fdp.ConsumeIntInRange(0, 7) else
                                                      fdp.ConsumeIntInRange(0, 9))]
              for name in ("window", "strides", "dilations", "start", "end", "output_padding", "sizes")}
    window = arrays["window"]
    geometry = dict(strides=arrays["strides"], dilations=arrays["dilations"], start_padding=arrays["start"],
                    end_padding=arrays["end"])
    op = fdp.ConsumeIntInRange(0, 7)
    try:
        if op == 0:
            try:  # a broadcast filter of any size (numpy refuses sizes past int64 itself)
                filt = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (1, shape[1], *window),
                                                       (0,) * (2 + len(window)))
            except (OverflowError, ValueError):
                return
            if math.prod(filt.shape) > 1 << 24:
                # Known limit: the kernels pack the filter, so their memory grows with its
                # logical size, even for a broadcast view, by tens of bytes per tap: a 1 x 3 x
                # 16,777,217 filter (dilated 2, padded 2^24) took 6.2 GB in the GEMM (its packed
                # filter padded to 6 rows, the padded planes, a pointer per tap per task).
                return
            desc = dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(filt),
                                          direction="backward" if fdp.ConsumeBool() else "forward",
                                          output_padding=arrays["output_padding"], **geometry)
            call = lambda: desc(x, filt)  # noqa: E731
        elif op == 1:
            desc = dmlops.LpPooling1Desc(dmlops.TensorDesc.from_array(x), window_size=window, p=1, **geometry)
            call = lambda: desc(x)  # noqa: E731
        elif op == 2:
            desc = dmlops.UnfoldDesc(dmlops.TensorDesc.from_array(x), window_sizes=window, **geometry)
            call = lambda: desc(x)  # noqa: E731
        elif op == 3:
            cols = np.ones((1, fdp.ConsumeIntInRange(1, 8), fdp.ConsumeIntInRange(1, 8)), np.float32)
            if all(isinstance(n, int) and n > 0 for n in arrays["sizes"]) and math.prod(arrays["sizes"]) > 1 << 16:
                return  # an accepted large output (fold's sizes are the caller's): a MemoryError is fair
            call = lambda: dmlops.fold(cols, arrays["sizes"], window, **geometry)  # noqa: E731
            desc = None
        elif op == 4:
            desc = dmlops.Padding1Desc(dmlops.TensorDesc.from_array(x), start_padding=arrays["start"],
                                       end_padding=arrays["end"], padding_mode=PAD_MODES[fdp.ConsumeIntInRange(0, 4)])
            call = lambda: desc(x)  # noqa: E731
        elif op == 6:  # integer scales on the last two axes
            desc = dmlops.Upsample2DDesc(dmlops.TensorDesc.from_array(x), scale_size=arrays["sizes"][:2],
                                         interpolation_mode="linear" if fdp.ConsumeBool() else "nearest_neighbor")
            call = lambda: desc(x)  # noqa: E731
        elif op == 7:  # any float scales and pixel offsets
            desc = dmlops.Resample1Desc(dmlops.TensorDesc.from_array(x), scales=[number(fdp) for _ in shape],
                                        interpolation_mode="linear" if fdp.ConsumeBool() else "nearest_neighbor",
                                        input_pixel_offsets=[number(fdp) for _ in shape],
                                        output_pixel_offsets=[number(fdp) for _ in shape])
            call = lambda: desc(x)  # noqa: E731
        else:
            scales = [[1e-30, 2.0**-149, 1e-3, 0.5, 3.0, 2.0**20][fdp.ConsumeIntInRange(0, 5)] for _ in shape]
            call = lambda: dmlops.resample(x, scales, "linear", antialiased=fdp.ConsumeBool(),  # noqa: E731
                                           output_sizes=[fdp.ConsumeIntInRange(1, 3) for _ in shape])
            desc = None
        # The plan, of any output for the window operators (none is allocated); data movement's
        # and resampling's plans hold the call's runs per output row and tables per output
        # coordinate, as long as the output's axes (a MemoryError is fair past the output sizes
        # a call is let allocate, below).
        windows = isinstance(desc, (dmlops.ConvolutionDesc, dmlops.LpPooling1Desc, dmlops.UnfoldDesc))
        if desc is not None and fdp.ConsumeBool() and (windows or math.prod(desc.output_shape) <= 1 << 16):
            if isinstance(desc, dmlops.ConvolutionDesc) and fdp.ConsumeBool():
                names = dmlops.convolution_algorithms()
                desc.plan(algorithm=names[fdp.ConsumeIntInRange(0, len(names) - 1)])
            else:
                desc.plan()
            return
        if desc is not None and math.prod(desc.output_shape) > 1 << 16:
            return  # accepted geometry with a large output: the descriptor's checks were the target
        call()
    except ALLOWED:
        return


# The plain numpy references of the pytest suite (tests/python/reference.py), independent of
# dmlops' kernels.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import reference  # noqa: E402
from test_convolution import assert_close as assert_convolution_close  # noqa: E402
from test_lp_pooling import assert_close as assert_lp_pooling_close  # noqa: E402
from test_resample import assert_linear_close, assert_same_bits  # noqa: E402


def small_array(fdp: Any, rank: int, dtype: str) -> np.ndarray:
    """Up to ~6,000 elements, rows up to 300 long (the row kernels' widths and blocks), as a view
    that is contiguous, strided (every other element), reversed or transposed."""
    shape = [fdp.ConsumeIntInRange(1, 4) for _ in range(rank - 1)] + [fdp.ConsumeIntInRange(1, 300)]
    while math.prod(shape) > 6000:
        shape[-1] = max(1, shape[-1] // 2)
    layout = fdp.ConsumeIntInRange(0, 3)
    base = np.random.default_rng(fdp.ConsumeIntInRange(0, 99)).integers(0, 256, (*shape[:-1], 2 * shape[-1]),
                                                                          dtype=np.uint8)
    base = base.repeat(np.dtype(dtype).itemsize, axis=-1).view(dtype)  # any bits, NaN payloads too
    if layout == 0:
        return np.ascontiguousarray(base[..., : shape[-1]])
    if layout == 1:
        return base[..., ::2]
    if layout == 2:
        return base[..., : shape[-1]][..., ::-1]
    return np.ascontiguousarray(base[..., : shape[-1]].swapaxes(0, -1)).swapaxes(0, -1)


@target
def fuzz_data_movement(fdp: Any) -> None:
    """Padding (every mode), nearest upsampling and resampling, and unfold on small arrays of any
    dtype and layout, on 1 to 3 threads: bit for bit the plain references of the test suite."""
    dtype = dmlops.DTYPES[fdp.ConsumeIntInRange(0, len(dmlops.DTYPES) - 1)]
    op = fdp.ConsumeIntInRange(0, 3)
    rank = fdp.ConsumeIntInRange(4, 5) if op == 1 else fdp.ConsumeIntInRange(3, 5) if op == 2 else \
        fdp.ConsumeIntInRange(1, 5)
    x = small_array(fdp, rank, dtype)
    threads = fdp.ConsumeIntInRange(1, 3)
    if op == 0:
        mode = PAD_MODES[fdp.ConsumeIntInRange(0, 4)]
        start = [fdp.ConsumeIntInRange(0, 9) for _ in range(rank)]
        end = [fdp.ConsumeIntInRange(0, 9) for _ in range(rank)]
        want = reference.pad_reference(x, start, end, mode, 0)
        with dmlops.threads(threads):
            got = dmlops.pad(x, start, end, mode)
        assert_same_bits(got, want)
    elif op == 1:
        scales = (fdp.ConsumeIntInRange(1, 8), fdp.ConsumeIntInRange(1, 8))
        want = x.repeat(scales[0], axis=-2).repeat(scales[1], axis=-1)
        with dmlops.threads(threads):
            got = dmlops.upsample_2d(x, scales)
        assert_same_bits(got, want)
    elif op == 3:
        scales = [RESAMPLE_SCALES[fdp.ConsumeIntInRange(0, len(RESAMPLE_SCALES) - 1)] for _ in range(rank)]
        try:
            with dmlops.threads(threads):
                got = dmlops.resample(x, scales, "nearest_neighbor")
        except ValueError as e:  # an output size that rounds to 0
            assert "is floor(" in str(e) and min(n * s for n, s in zip(x.shape, scales)) < 1.5, e
            return
        want = reference.resample_reference(x, got.shape, scales, "nearest_neighbor")
        assert_same_bits(got, want)
    else:
        spatial = rank - 2
        window = [fdp.ConsumeIntInRange(1, 4) for _ in range(spatial)]
        strides = [fdp.ConsumeIntInRange(1, 3) for _ in range(spatial)]
        dilations = [fdp.ConsumeIntInRange(1, 2) for _ in range(spatial)]
        start = [fdp.ConsumeIntInRange(0, 2) for _ in range(spatial)]
        end = [fdp.ConsumeIntInRange(0, 2) for _ in range(spatial)]
        try:
            with dmlops.threads(threads):
                got = dmlops.unfold(x, window, strides=strides, dilations=dilations, start_padding=start,
                                    end_padding=end)
        except ValueError:  # a window larger than the padded input
            assert min(reference.window_blocks(x.shape[2:], window, strides, dilations, start, end)) < 1
            return
        want = reference.unfold_reference(x, window, strides, dilations, start, end)
        assert_same_bits(got, want)


@target
def fuzz_convolution(fdp: Any) -> None:
    """Small convolutions of every kind (1-3 spatial axes, groups, strides, dilations, paddings,
    both directions, both modes, a bias, a relu), by the chosen algorithm or a forced one, in
    float32, float16 and float64: within the test suite's bound of the float64 reference,
    eps * 2 * (L + 2) * sum |terms| (float16 plus its one rounding), and bit for bit the same on
    1 and on 2-3 threads."""
    dtype = ("float32", "float16", "float64")[fdp.ConsumeIntInRange(0, 2)]
    D = fdp.ConsumeIntInRange(1, 3)
    groups = fdp.ConsumeIntInRange(1, 3)
    cin, cout = groups * fdp.ConsumeIntInRange(1, 8), groups * fdp.ConsumeIntInRange(1, 40)
    kernel = [fdp.ConsumeIntInRange(1, 3) for _ in range(D)]
    strides = [fdp.ConsumeIntInRange(1, 3) for _ in range(D)]
    dilations = [fdp.ConsumeIntInRange(1, 2) for _ in range(D)]
    start = [fdp.ConsumeIntInRange(0, 2) for _ in range(D)]
    end = [fdp.ConsumeIntInRange(0, 2) for _ in range(D)]
    backward = fdp.ConsumeBool()
    spatial = [fdp.ConsumeIntInRange(1, 14 if D < 3 else 6) for _ in range(D)]
    batch = fdp.ConsumeIntInRange(1, 2)
    rng = np.random.default_rng(fdp.ConsumeIntInRange(0, 99))
    x = rng.integers(-8, 9, (batch, cout if backward else cin, *spatial)).astype(dtype) / 8
    w = (rng.integers(-8, 9, (cout, cin // groups, *kernel)).astype(dtype) / 8).astype(dtype)
    b = (rng.integers(-8, 9, (1, cin if backward else cout) + (1,) * D).astype(dtype) / 8).astype(dtype) \
        if fdp.ConsumeBool() else None
    relu = fdp.ConsumeBool()
    kw = dict(strides=strides, dilations=dilations, start_padding=start, end_padding=end, group_count=groups,
              mode="convolution" if fdp.ConsumeBool() else "cross_correlation",
              direction="backward" if backward else "forward")
    names = dmlops.convolution_algorithms()
    algorithm = names[fdp.ConsumeIntInRange(0, len(names) - 1)] if fdp.ConsumeBool() else None
    threads = fdp.ConsumeIntInRange(2, 3)
    try:
        desc = dmlops.ConvolutionDesc(dmlops.TensorDesc.from_array(x), dmlops.TensorDesc.from_array(w),
                                      None if b is None else dmlops.TensorDesc.from_array(b),
                                      fused_activation="relu" if relu else None, **kw)
    except ValueError:  # a window past the padded input
        return
    try:
        with dmlops.threads(1):
            y = desc(x, w, b, algorithm=algorithm)
    except ValueError as e:  # the forced algorithm does not take this layer
        assert algorithm is not None and algorithm in str(e), e
        return
    with dmlops.threads(threads):
        assert_same_bits(desc(x, w, b, algorithm=algorithm), y)
    assert_convolution_close(y, x, w, b, ("relu", {}) if relu else None, **kw)


@target
def fuzz_lp_pooling(fdp: Any) -> None:
    """Small Lp poolings (1-3 spatial axes, strides, dilations, paddings, p of 1 to 9) of values
    from subnormal to near overflow, zeros, inf and NaN, in float32, float16 and float64: the
    float64 reference within the test suite's tolerance (relative (taps + 4) ulps of float32 or
    float64, 2^-10 + taps * 2^-24 for float16, plus a few subnormals), NaN for NaN, inf for inf, 0
    for 0; bit for bit the same on 1 and 2-3 threads."""
    dtype = ("float32", "float16", "float64")[fdp.ConsumeIntInRange(0, 2)]
    D = fdp.ConsumeIntInRange(1, 3)
    window = [fdp.ConsumeIntInRange(1, 4) for _ in range(D)]
    strides = [fdp.ConsumeIntInRange(1, 3) for _ in range(D)]
    dilations = [fdp.ConsumeIntInRange(1, 2) for _ in range(D)]
    start = [fdp.ConsumeIntInRange(0, 2) for _ in range(D)]
    end = [fdp.ConsumeIntInRange(0, 2) for _ in range(D)]
    shape = [fdp.ConsumeIntInRange(1, 2), fdp.ConsumeIntInRange(1, 3)] + \
        [fdp.ConsumeIntInRange(1, 40 if D == 1 else 12 if D == 2 else 6) for _ in range(D)]
    p = fdp.ConsumeIntInRange(1, 9)
    rng = np.random.default_rng(fdp.ConsumeIntInRange(0, 99))
    info = np.finfo(dtype)
    scale = [1.0, float(info.tiny) * 4, float(info.smallest_subnormal) * 3, float(info.max) / 8,
             float(info.max) ** (1 / p)][fdp.ConsumeIntInRange(0, 4)]
    with np.errstate(over="ignore"):  # past the dtype's range: inf, as the input may hold
        x = (rng.standard_normal(shape) * scale).astype(dtype)
    specials = fdp.ConsumeIntInRange(0, 3)
    flat = x.reshape(-1)
    for value in [0.0, np.inf, np.nan][: specials]:
        flat[rng.integers(0, flat.size)] = value
    threads = fdp.ConsumeIntInRange(2, 3)
    try:
        desc = dmlops.LpPooling1Desc(dmlops.TensorDesc.from_array(x), window_size=window, strides=strides,
                                     dilations=dilations, start_padding=start, end_padding=end, p=p)
    except ValueError:  # a window past the padded input
        return
    with dmlops.threads(1):
        y = desc(x)
    with dmlops.threads(threads):
        assert_same_bits(desc(x), y)
    assert_lp_pooling_close(y, reference.lp_pooling_reference(x, window, strides, start, end, dilations, p),
                            math.prod(window))


@target
def fuzz_resampling(fdp: Any) -> None:
    """Small linear resamplings (any rank to 4, scales from 1/3 to 3, pixel offsets, antialiased
    or not) and nearest ones with pixel offsets and either rounding direction, in float32,
    float16 and float64: nearest bit for bit the reference, linear within the test suite's bound
    (4 (passes + 1) eps sum |w| |x|, float16 plus its rounding); the same bits on 1 and 2-3
    threads."""
    dtype = ("float32", "float16", "float64")[fdp.ConsumeIntInRange(0, 2)]
    rank = fdp.ConsumeIntInRange(1, 4)
    shape = [fdp.ConsumeIntInRange(1, 12) for _ in range(rank)]
    scales = [RESAMPLE_SCALES[fdp.ConsumeIntInRange(0, len(RESAMPLE_SCALES) - 1)] for _ in range(rank)]
    offsets = (0.5, -0.5, 0.0, 0.25, -0.3, 1.0)
    inputs = [offsets[fdp.ConsumeIntInRange(0, len(offsets) - 1)] for _ in range(rank)]
    outputs = [offsets[fdp.ConsumeIntInRange(0, len(offsets) - 1)] for _ in range(rank)]
    linear = fdp.ConsumeBool()
    antialiased = linear and fdp.ConsumeBool()
    rounding = None if linear else (None, "increasing", "decreasing")[fdp.ConsumeIntInRange(0, 2)]
    x = np.random.default_rng(fdp.ConsumeIntInRange(0, 99)).standard_normal(shape).astype(dtype)
    threads = fdp.ConsumeIntInRange(2, 3)
    kw = dict(input_pixel_offsets=inputs, output_pixel_offsets=outputs, antialiased=antialiased,
              rounding_direction=rounding)
    mode = "linear" if linear else "nearest_neighbor"
    try:
        with dmlops.threads(1):
            y = dmlops.resample(x, scales, mode, **kw)
    except ValueError as e:  # an output size that rounds to 0
        assert "is floor(" in str(e), e
        return
    with dmlops.threads(threads):
        assert_same_bits(dmlops.resample(x, scales, mode, **kw), y)
    want = reference.resample_reference(x, y.shape, scales, mode, inputs, outputs, rounding, antialiased)
    if not linear:
        assert_same_bits(y, want)
        return
    assert_linear_close(y, want, reference.resample_magnitude(x, y.shape, scales, inputs, outputs, antialiased), rank)
