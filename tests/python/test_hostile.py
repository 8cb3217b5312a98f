"""README's "Guarantees" for hostile input, tested as classes: every case runs in a worker process
under an address-space limit (tests/fuzz/isolated.py), so a crash, a hang or unbounded memory is
one failed test. The coverage-guided fuzzing of the same promises is tests/fuzz/run.py."""

from __future__ import annotations

import json
import math
import pickle
import struct
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlops

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import cases  # noqa: E402
from cases import View  # noqa: E402
from isolated import Child, Outcome  # noqa: E402

LIMIT = 2**62  # byte reach past which a view is refused


@pytest.fixture(scope="module")
def child():
    worker = Child(timeout=60)
    yield worker
    worker.close()


def expect_error(outcome: Outcome, kind: str, *words: str) -> None:
    """The worker raised `kind` (ValueError or TypeError) with every word in the message."""
    assert outcome.how == "raised", outcome
    message = str(outcome.value)
    assert message.startswith(kind + ":"), message
    for word in words:
        assert word in message, message


# ---------------------------------------------------------------------------------------------
# Hostile array views against every operator

DTYPES = {"pad": ("float32", "int16", "uint8", "float64"), "convolution": ("float32", "float64"),
          "lp_pooling": ("float32",), "unfold": ("float32", "int32"), "fold": ("float32", "int64"),
          "resample": ("float32", "uint16")}
RANKS = {"pad": (1, 4), "convolution": (3, 5), "lp_pooling": (3, 4), "unfold": (3, 4), "fold": (3, 3),
         "resample": (1, 4)}


@st.composite
def strides_for(draw: Any, shape: tuple[int, ...], item: int, huge: bool) -> tuple[int, ...]:
    """Byte strides: zero, negative, interleaved, transposed-looking multiples of the item size;
    with `huge`, one axis of size >= 2 whose stride puts the view's reach past 2^62 bytes."""
    strides = [draw(st.integers(-4, 4)) * item for _ in shape]
    if huge:
        axes = [d for d, n in enumerate(shape) if n >= 2]
        d = draw(st.sampled_from(axes))
        step = draw(st.sampled_from([LIMIT // (shape[d] - 1) + item, 2**63 - item, LIMIT + item]))
        step = min(step, (2**63 - 1) // item * item)
        strides[d] = step if draw(st.booleans()) else -step
    return tuple(strides)


def placed(dtype: str, shape: tuple[int, ...], strides: tuple[int, ...], buffer: str) -> View:
    """The view at the smallest offset that keeps every element inside its buffer."""
    low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    return View(dtype, shape, strides, -low if abs(low) < 2**40 else 0, buffer)


@st.composite
def hostile_case(draw: Any) -> tuple[str, dict[str, Optional[View]], Optional[str]]:
    """(operator, views, the field that must be refused or None)."""
    op = draw(st.sampled_from(cases.OPERATORS))
    dtype = draw(st.sampled_from(DTYPES[op]))
    item = np.dtype(dtype).itemsize
    lo, hi = RANKS[op]
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=lo, max_size=hi)))
    fields = ["x", "out"] + (["filter", "bias"] if op == "convolution" else [])
    shapes = {"x": shape}
    if op == "convolution":
        channels_out = draw(st.integers(1, 3))
        shapes["filter"] = (channels_out, shape[1]) + tuple(draw(st.integers(1, n)) for n in shape[2:])
        shapes["bias"] = (1, channels_out) + (1,) * (len(shape) - 2)
    shapes["out"] = _output_shape(op, shape, shapes)
    can_be_huge = [f for f in fields if max(shapes[f]) >= 2]
    refused = draw(st.sampled_from([None, None, None] + can_be_huge))
    views: dict[str, Optional[View]] = {}
    for f in fields:
        if f == "bias" and refused != "bias" and not draw(st.booleans()):
            views[f] = None
            continue
        if f == "out":
            how = draw(st.sampled_from(["none", "own", "own", "over input"]))
            if how == "none" and refused != "out":
                views[f] = None
                continue
            strides = draw(strides_for(shapes[f], item, refused == f))
            views[f] = placed(dtype, shapes[f], strides, "x" if how == "over input" and refused != "out" else "out")
            continue
        views[f] = placed(dtype, shapes[f], draw(strides_for(shapes[f], item, refused == f)), f)
    return op, views, refused


def _output_shape(op: str, shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The operator's output shape, from the same call on contiguous zeros (in this process:
    nothing hostile about it)."""
    arrays: dict[str, Any] = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    return cases._call(op, arrays["x"], arrays, None).shape


FIELD_NAMES = {"x": "input", "out": "out", "filter": "filter", "bias": "bias"}


def overlaps(a: View, b: View) -> bool:
    """Whether two in-bounds views on one buffer share a byte."""
    a_low, a_high = a.reach()
    b_low, b_high = b.reach()
    return a.buffer == b.buffer and a.offset + a_low < b.offset + b_high and b.offset + b_low < a.offset + a_high


def self_overlapping(v: View) -> bool:
    """dmlops' rule: sorted by |stride|, each axis of size > 1 steps past all the smaller ones."""
    span = np.dtype(v.dtype).itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(v.strides, v.shape) if n > 1):
        if stride < span:
            return True
        span += stride * (n - 1)
    return False


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None,
          max_examples=400)
@given(case=hostile_case())
def test_hostile_views_are_refused_or_give_the_contiguous_result(child, case):
    """Any view (zero, negative, interleaved or huge strides, an out= over the input) either gives
    exactly the result of the same call on contiguous copies, or is refused with a ValueError
    naming the field; a view reaching past 2^62 bytes is always refused, before anything is read."""
    op, views, refused = case
    outcome = child.call(cases.run, op, views)
    assert outcome.how == "returned", outcome  # a crash or a hang in the worker
    result, reference = outcome.value
    out = views["out"]
    if refused is not None:
        assert isinstance(result, str), f"{refused} reaching past 2^62 bytes was accepted"
        assert result.startswith("ValueError:"), result
        # refused for its reach, or first for another broken rule: an out= with overlapping elements
        assert ("beyond 2^62" in result and FIELD_NAMES[refused] in result) or (
            out is not None and refused != "out" and self_overlapping(out) and "overlapping" in result), result
        return
    if out is not None and (self_overlapping(out) or overlaps(out, views["x"])):
        assert isinstance(result, str) and result.startswith("ValueError:") and "out" in result, result
        return
    assert not isinstance(result, str), result
    assert result.dtype == reference.dtype and result.shape == reference.shape
    np.testing.assert_array_equal(result, reference)


# ---------------------------------------------------------------------------------------------
# The issue's examples, each the representative of a class above or below

EXAMPLES = [
    # strides: a view reaching past 2^63 bytes, as input, out=, filter
    ("b = np.zeros(256, np.float32); dmlops.pad(np.lib.stride_tricks.as_strided(b[:1], (4,), (2**62,)), (1,), (1,), "
     "out=b[64:70])", "Padding1: input has strides"),
    ("dmlops.pad(np.zeros(3, np.float32), (1,), (1,), out=np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), "
     "(5,), (-2**62,)))", "Padding1: out has strides"),
    ("dmlops.convolution(np.zeros((1, 1, 4), np.float32), np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), "
     "(1, 1, 2), (0, 0, 2**63 - 4)))", "Convolution: filter has strides"),
    # window extents: each factor in range, their product not
    *[(f"dmlops.convolution(np.zeros((1, 1, 4, 4), np.float32), np.lib.stride_tricks.as_strided(np.zeros(1, "
       f"np.float32), (1, 1, 2**24 + 1, 1), (0, 0, 0, 0)), dilations=(2**40, 1), direction='{d}')",
       "Convolution: on spatial dimension 0 the window extent") for d in ("forward", "backward")],
    ("dmlops.lp_pooling(np.zeros((1, 1, 4, 4), np.float32), (2**24 + 1, 1), dilations=(2**40, 1))",
     "LpPooling1: on spatial dimension 0 the window extent"),
    ("dmlops.unfold(np.zeros((1, 1, 4, 4), np.float32), (2**24 + 1, 1), dilations=(2**40, 1))",
     "Unfold: on spatial dimension 0 the window extent"),
    ("dmlops.fold(np.zeros((1, 2**25, 1), np.float32), (4, 4), (2**24 + 1, 2), dilations=(2**40, 1))",
     "Fold: on spatial dimension 0 the window extent"),
    # the backward direction's nominal output size
    ("dmlops.convolution(np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1, 1, 2**40), (0, 0, 0)), "
     "np.zeros((1, 1, 3), np.float32), strides=(2**40,), direction='backward')",
     "nominal backward output size"),
    # per-axis arguments are counted before they are walked
    ("dmlops.pad(np.zeros(3), range(10**9), (1,))", "Padding1: start_padding has 1000000000 entries"),
    ("dmlops.pad(np.zeros(3), (1,), iter(int, 1))", "Padding1: end_padding has more than 8 entries"),
    ("dmlops.resample(np.zeros((1, 1, 2, 2), np.float32), range(2**64))", "scales has more than 2^63 entries"),
    ("dmlops.unfold(np.zeros((1, 1, 4)), (2,), strides=range(10**12))", "Unfold: strides has 1000000000000 entries"),
]


@pytest.mark.parametrize("source, message", EXAMPLES, ids=range(len(EXAMPLES)))
def test_issue_examples_are_value_errors_naming_the_field(child, source, message):
    expect_error(child.call(cases.evaluate, source), "ValueError", message)


# Loops bounded by the output or the input, scratch by what the output reads: each of these ran
# for seconds to forever, or took gigabytes, before; under the worker's 4 GiB limit and a 60 s
# timeout a regression shows as "crashed" or "hung".
BOUNDED = [
    # antialiased taps ~ 1/scale: the taps outside the input are summed in closed form
    ("dmlops.resample(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), (1, 1, 1e-30, 1e-30), 'linear', "
     "antialiased=True, output_sizes=(1, 1, 2, 1)).shape", (1, 1, 2, 1)),
    ("dmlops.resample(np.ones(5, np.float32), (2**-149,), 'linear', antialiased=True, output_sizes=(3,)).tolist()",
     [1.0, 1.0, 1.0]),
    # forward convolution's scratch grows with what the output reads, not the padded input
    ("dmlops.convolution(np.ones((1, 1, 4, 64), np.float32), np.ones((1, 1, 3, 3), np.float32), "
     "strides=(2**24, 1), start_padding=(2**24, 0), end_padding=(2**24, 0)).shape", (1, 1, 3, 62)),
    ("dmlops.convolution(np.ones((1, 1, 64, 4), np.float32), np.ones((1, 1, 3, 3), np.float32), "
     "strides=(1, 2**24), start_padding=(0, 2**24), end_padding=(0, 2**24)).shape", (1, 1, 62, 3)),
    ("dmlops.convolution(np.ones((1, 2, 5, 6, 7), np.float32), np.ones((4, 2, 2, 2, 2), np.float32), "
     "strides=(2**30, 2**30, 2**30), start_padding=(2**30,) * 3, end_padding=(2**30,) * 3).shape",
     (1, 4, 3, 3, 3)),
    # ... and not the dilation: a 3-tap filter dilated by 2^31 reads 3 values, not 2^32
    ("dmlops.convolution(np.ones((1, 1, 1), np.float32), np.ones((1, 1, 3), np.float32), strides=(3,), "
     "dilations=(2**31,), start_padding=(2**31,), end_padding=(2**31,)).tolist()", [[[1.0]]]),
    # Lp pooling's windows of 2^32 and 2^40 taps per axis, padded to a 1x1 output: the rows a
    # window reads are bounded by the input (its scratch was reserved per tap: 32 GB; found by
    # the geometry fuzz target). Dilated by 2 from -2^32, the taps reach input index 0 only.
    ("dmlops.LpPooling1Desc(dmlops.TensorDesc('float32', (1, 1, 2, 2)), window_size=(2**32, 2**32), "
     "strides=(2**32, 2**32), start_padding=(2**32, 2**32), end_padding=(2**32, 2**32), dilations=(2, 2), p=1)"
     "(np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)).tolist()", [[[[1.0]]]]),
    ("dmlops.LpPooling1Desc(dmlops.TensorDesc('float32', (1, 1, 3, 3, 3)), window_size=(2**40,) * 3, "
     "strides=(2**40,) * 3, start_padding=(2**40 - 2,) * 3, end_padding=(0,) * 3, p=1)"
     "(np.ones((1, 1, 3, 3, 3), np.float32)).tolist()", [[[[[8.0]]]]]),
    # ... and its per-output tables are the call's, not the plan's (a plan of 2^30 outputs built
    # 24 GB of them), and hold only the outputs that read the input (the extended geometry target)
    ("dmlops.LpPooling1Desc(dmlops.TensorDesc('float32', (1, 1, 1)), window_size=(4,), strides=(2,), "
     "start_padding=(2,), end_padding=(2**31,), dilations=(4,), p=1).plan().tiles['blocks']", 2**20),
    ("(lambda y: (y.shape, np.count_nonzero(y), y[0, 0, :3].tolist()))(dmlops.LpPooling1Desc("
     "dmlops.TensorDesc('float32', (1, 1, 3)), window_size=(4,), strides=(1,), start_padding=(2,), "
     "end_padding=(2**27,), p=1)(np.array([[[1, 2, 3]]], np.float32)))", ((1, 1, 2**27 + 2), 5, [3.0, 6.0, 6.0])),
]


@pytest.mark.parametrize("source, expected", BOUNDED, ids=range(len(BOUNDED)))
def test_work_and_memory_are_bounded_by_input_and_output(child, source, expected):
    outcome = child.call(cases.evaluate, source)
    assert outcome.how == "returned" and outcome.value == expected, outcome


def conv_reference(x: np.ndarray, w: np.ndarray, strides, dilations, start, end) -> np.ndarray:
    """Forward cross-correlation by its definition, in float64: output o, tap t reads input
    o * stride + t * dilation - start, zero outside the input."""
    k = w.shape[2:]
    extent = [(n - 1) * d + 1 for n, d in zip(k, dilations)]
    out_sizes = [(x.shape[2 + a] + start[a] + end[a] - extent[a]) // strides[a] + 1 for a in range(len(k))]
    y = np.zeros((x.shape[0], w.shape[0], *out_sizes))
    for o in np.ndindex(*out_sizes):
        for t in np.ndindex(*k):
            i = [o[a] * strides[a] + t[a] * dilations[a] - start[a] for a in range(len(k))]
            if all(0 <= i[a] < x.shape[2 + a] for a in range(len(k))):
                y[(slice(None), slice(None)) + o] += x[(slice(None), slice(None)) + tuple(i)].astype(np.float64) @ \
                    w[(slice(None), slice(None)) + t].astype(np.float64).T
    return y


@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_sparse_windows_give_the_reference(data):
    """Windows that read few of their padded positions (strides, dilations and paddings large
    against the taps) run on a compact copy of what they read: same values as the definition."""
    rank = data.draw(st.integers(1, 2))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    kernel = tuple(data.draw(st.integers(1, n + 2)) for n in shape)
    dilation = tuple(data.draw(st.sampled_from([1, 2, 700])) for _ in shape)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    strides = tuple(data.draw(st.sampled_from([1, 2, e + 1, e + 3, 1000, 5000])) for e in extent)
    start = tuple(data.draw(st.integers(0, 4000)) for _ in shape)
    end = tuple(max(0, e - n - s) + data.draw(st.integers(0, 4000)) for e, n, s in zip(extent, shape, start))
    x = np.random.default_rng(0).integers(-3, 4, (1, 2) + shape).astype(np.float32)
    w = np.random.default_rng(1).integers(-3, 4, (3, 2) + kernel).astype(np.float32)
    y = dmlops.convolution(x, w, strides=strides, dilations=dilation, start_padding=start, end_padding=end)
    np.testing.assert_array_equal(y, conv_reference(x, w, strides, dilation, start, end).astype(np.float32))


def test_antialiased_taps_outside_the_input_match_the_reference_loop():
    """The closed-form sum of the taps outside the input equals the tap-by-tap loop (ONNX's
    formulation in tests/python/reference.py) at scales whose support is long but walkable."""
    from reference import resample_antialiased_row
    x = np.random.default_rng(2).random(6)
    for scale in (1e-3, 3e-4):
        for o in range(3):
            row = resample_antialiased_row(o, 6, np.float32(scale).item(), 0.5, -0.5)
            y = dmlops.resample(x, (scale,), "linear", antialiased=True, output_sizes=(3,))
            assert math.isclose(y[o], row @ x, rel_tol=1e-9), (scale, o)


# ---------------------------------------------------------------------------------------------
# Descriptors: garbage in from_dict, values that survive pickle and JSON bit for bit

def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


CONVOLUTION = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3)),
                                     dmlops.TensorDesc("float32", (1, 1, 1))).to_dict()
FROM_DICT_GARBAGE = [
    (dmlops.Padding1Desc, 5, "TypeError", "Padding1: from_dict needs a dict"),
    (dmlops.Padding1Desc, {"InputTensor": 5}, "TypeError", "Padding1: InputTensor: TensorDesc"),
    (dmlops.Padding1Desc, {"InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "StartPadding": 5, "EndPadding": [1],
                           "PaddingMode": "CONSTANT", "PaddingValue": 0}, "TypeError", "Padding1: StartPadding"),
    (dmlops.Padding1Desc, {"InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "StartPadding": deep(10**5),
                           "EndPadding": [1], "PaddingMode": "CONSTANT", "PaddingValue": 0}, "TypeError",
     "Padding1: start_padding must contain integers, got [[[[...]]]]"),
    (dmlops.Padding1Desc, {"InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "StartPadding": [1], "EndPadding": [1],
                           "DimensionCount": "x", "PaddingMode": "CONSTANT", "PaddingValue": 0}, "ValueError",
     "DimensionCount is 'x'"),
    (dmlops.LpPooling1Desc, {"InputTensor": {"Desc": {"Desc": {}}}}, "ValueError", "LpPooling1: InputTensor:"),
    (dmlops.ConvolutionDesc, {"InputTensor": {"DataType": 7, "Sizes": [1, 1, 1]}}, "TypeError",
     "Convolution: InputTensor: TensorDesc: DataType must be a string"),
    (dmlops.ConvolutionDesc, {1: 2, (3,): 4}, "ValueError", "Convolution: unknown field(s)"),
    (dmlops.ConvolutionDesc, dict(CONVOLUTION, FusedActivation={"Type": "ELU", "Desc": 3}), "TypeError",
     "Convolution: FusedActivation: Activation: elu Desc must be a dict"),
    (dmlops.ConvolutionDesc, dict(CONVOLUTION, FusedActivation={"Type": "ELU", "Desc": {"Alpha": 10**400}}), "ValueError",
     "Convolution: FusedActivation: Activation: elu parameter alpha <an integer of 1329 bits> is too large"),
    (dmlops.UnfoldDesc, {"InputTensor": {"DataType": "FLOAT32", "Sizes": [deep(10**5)]}}, "TypeError",
     "Unfold: InputTensor: TensorDesc: sizes must contain integers, got [[[[...]]]]"),
]


@pytest.mark.parametrize("cls, d, kind, message", FROM_DICT_GARBAGE, ids=range(len(FROM_DICT_GARBAGE)))
def test_from_dict_garbage_names_the_operator_and_field(cls, d, kind, message):
    with pytest.raises((TypeError, ValueError)) as e:
        cls.from_dict(d)
    assert type(e.value).__name__ == kind and message in str(e.value), repr(e.value)


@pytest.mark.parametrize("value", [10**400, -(10**5000), 1e300], ids=["1e400", "-1e5000", "1e300"])
def test_activation_parameters_out_of_range_are_value_errors(value):
    with pytest.raises(ValueError, match="Activation: elu parameter alpha"):
        dmlops.Activation("elu", alpha=value)


def float_of_bits(bits: int, dtype: str) -> float:
    return np.array(bits, {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype]).view(dtype).item()


def bits_of(value: float, dtype: str) -> int:
    return int(np.array(value, dtype).view({"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype]))


NANS = [("float16", 0x7C01), ("float16", 0xFE01), ("float16", 0x7D55), ("float16", 0x7E00),
        ("float32", 0x7FC00001), ("float32", 0xFFC12345), ("float64", 0x7FF8000000000001),
        ("float64", 0xFFF0000000000001), ("float64", 0x7FF8DEADBEEF0001)]


@pytest.mark.parametrize("dtype, bits", NANS)
def test_nan_payloads_survive_pickle_and_json(dtype, bits):
    """A padding value's bits, quiet or signalling NaN, with any payload and sign (float32's
    quiet only: a signalling float32 NaN cannot travel as a Python float), are what the kernel writes and what pickle and to_dict/from_dict (through JSON text) give back."""
    value = float_of_bits(bits, dtype)
    if dtype == "float16":  # given as raw bits, DxDispatch's way
        desc = dmlops.Padding1Desc.from_dict({"InputTensor": {"DataType": "FLOAT16", "Sizes": [2]},
                                              "PaddingMode": "CONSTANT", "PaddingValueDataType": "FLOAT16",
                                              "PaddingValue": {"UInt16": bits}, "StartPadding": [1],
                                              "EndPadding": [0]})
    else:
        desc = dmlops.Padding1Desc(dmlops.TensorDesc(dtype, (2,)), start_padding=(1,), end_padding=(0,),
                                   padding_value=value)
    assert bits_of(desc.padding_value, dtype) == bits
    assert bits_of(desc(np.zeros(2, dtype))[0], dtype) == bits
    for again in (pickle.loads(pickle.dumps(desc)),
                  type(desc).from_dict(json.loads(json.dumps(desc.to_dict(), allow_nan=False)))):
        assert struct.pack("<d", again.padding_value) == struct.pack("<d", desc.padding_value)
        assert again == desc


@pytest.mark.parametrize("bits", [0x7FC00001, 0xFFC12345, 0xFFFFFFFF, 0xFFC00000])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_padding_value_keeps_its_nan_bits_through_json(dtype, bits):
    """PaddingDesc's value is a FLOAT, not a union; a NaN with a sign or a payload goes to JSON as
    its bits, {"UInt32": bits} (as "nan" it came back as the plain quiet NaN and padded other
    bits: the descriptors fuzz target found it), and pads the same after pickle and JSON."""
    desc = dmlops.PaddingDesc(dmlops.TensorDesc(dtype, (2,)), start_padding=(1,), end_padding=(0,),
                              padding_value=float_of_bits(bits, "float32"))
    padded = desc(np.zeros(2, dtype))[0]
    if dtype == "float32":
        assert bits_of(padded, dtype) == bits
    assert np.isnan(padded) and np.signbit(padded) == bool(bits >> 31)
    text = json.dumps(desc.to_dict(), allow_nan=False)
    assert json.loads(text)["PaddingValue"] == {"UInt32": bits}
    for again in (pickle.loads(pickle.dumps(desc)), dmlops.PaddingDesc.from_dict(json.loads(text))):
        assert again == desc
        assert bits_of(again(np.zeros(2, dtype))[0], dtype) == bits_of(padded, dtype)


def test_float_padding_value_as_bits_in_a_dxdispatch_model():
    model = {"resources": {"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2]},
                           "y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 3, "value": 0}}},
             "dispatchables": {"pad": {"type": "PADDING", "desc": {
                 "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3]},
                 "PaddingMode": "CONSTANT", "PaddingValue": {"UInt32": 0xFFC12345}, "DimensionCount": 1,
                 "StartPadding": [1], "EndPadding": [0]}}},
             "commands": [{"type": "dispatch", "dispatchable": "pad", "bindings": {"InputTensor": "x", "OutputTensor": "y"}}]}
    results = dmlops.dxdispatch.run(model)
    assert [bits_of(v, "float32") for v in results["y"]] == [0xFFC12345, bits_of(1.0, "float32"), bits_of(2.0, "float32")]
    with pytest.raises(dmlops.dxdispatch.ModelError, match="PaddingValue"):
        dmlops.dxdispatch.run({**model, "dispatchables": {"pad": {"type": "PADDING", "desc": {
            **model["dispatchables"]["pad"]["desc"], "PaddingValue": {"UInt32": -1}}}}})


def test_plain_nan_stays_nan_in_json():
    desc = dmlops.Padding1Desc(dmlops.TensorDesc("float32", (2,)), start_padding=(1,), end_padding=(0,),
                               padding_value=float("nan"))
    assert desc.to_dict()["PaddingValue"] == "nan"
