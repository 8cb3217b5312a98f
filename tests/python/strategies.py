"""Shared hypothesis strategies and checks for the differential fuzz tests and the hostile-input
tests in every operator's test file.

Arrays are drawn as (values, layout): the values from a seeded numpy generator (fast, and the
seed shrinks), the layout from a small recipe (flipped axes, gaps between elements, a permuted
memory order, broadcast axes with stride 0, elements off their alignment) applied to a copy, so
every operator is fed the views numpy users hand it. Each drawn call is recorded with
:func:`show_call`, so a falsifying example prints Python lines that reproduce it.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

import numpy as np
from hypothesis import note, settings
from hypothesis import strategies as st

from reference import bits

ALL_DTYPES = ("float32", "float16", "float64", "uint8", "uint16", "uint32", "uint64",
              "int8", "int16", "int32", "int64", "bool")
FLOAT_DTYPES = ("float32", "float16", "float64")


# ---------------------------------------------------------------------------------------------
# Values and layouts

def random_values(rng: np.random.Generator, shape, dtype, kind: str) -> np.ndarray:
    """A C-contiguous array. kind ``bits``: every bit pattern (NaN payloads, subnormals; for
    bit-exact data movement); ``finite``: normal values of mixed sign and magnitude for floats,
    every value for integers (sums wrap)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if kind == "finite" and dtype.kind == "f":
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, size=shape))).astype(dtype)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@st.composite
def layouts(draw, rank: int, zero_strides: bool = True) -> dict:
    """A recipe for laying an array out in memory; see :func:`apply_layout`."""
    axes = st.lists(st.integers(0, rank - 1), unique=True, max_size=rank)
    return dict(
        flip=tuple(draw(axes)),
        gap=tuple(draw(axes)),
        order=tuple(draw(st.permutations(range(rank)))),
        broadcast=tuple(draw(axes)) if zero_strides else (),
        misaligned=draw(st.booleans()),
    )


def apply_layout(a: np.ndarray, layout: dict) -> np.ndarray:
    """A view with ``a``'s values (except broadcast axes, which repeat index 0 with stride 0)
    whose memory order is ``layout['order']``, with negative strides on ``flip`` axes, a gap
    of one element after each element of the ``gap`` axes, and (``misaligned``) its elements one
    byte off their natural alignment."""
    if layout["broadcast"]:
        first = tuple(slice(0, 1) if d in layout["broadcast"] else slice(None) for d in range(a.ndim))
        a = np.broadcast_to(a[first], a.shape)
    order = layout["order"]
    inverse = tuple(np.argsort(order))
    b = np.flip(a, layout["flip"]) if layout["flip"] else a
    b = b.transpose(order)  # memory order of the result
    shape = tuple(n * (2 if order[d] in layout["gap"] else 1) for d, n in enumerate(b.shape))
    if layout["misaligned"] and a.itemsize > 1:
        raw = np.zeros(int(np.prod(shape)) * a.itemsize + 1, np.uint8)
        buffer = raw[1:].view(a.dtype).reshape(shape)
    else:
        buffer = np.zeros(shape, dtype=a.dtype)
    window = tuple(slice(None, None, 2 if order[d] in layout["gap"] else 1) for d in range(b.ndim))
    buffer[window] = b
    view = buffer[window].transpose(inverse)
    if layout["flip"]:
        view = np.flip(view, layout["flip"])
    if layout["broadcast"]:
        first = tuple(slice(0, 1) if d in layout["broadcast"] else slice(None) for d in range(a.ndim))
        view = np.broadcast_to(view[first], a.shape)
    assert np.array_equal(bits(view), bits(a))
    return view


@st.composite
def arrays(draw, shape, dtype, kind: str = "bits", zero_strides: bool = True) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` in a drawn layout (see the module docstring)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = random_values(rng, tuple(shape), dtype, kind)
    layout = draw(layouts(len(shape), zero_strides))
    view = apply_layout(values, layout)
    if len(_layouts) > 1000:  # forget the arrays of examples that are over
        for key in [k for k, (ref, _) in _layouts.items() if ref() is None]:
            del _layouts[key]
    _layouts[id(view)] = (weakref.ref(view), layout)
    return view


# The layout each drawn array was made with, so that show_array can print how to remake it.
_layouts: dict = {}


def layout_of(a: np.ndarray) -> Optional[dict]:
    ref, layout = _layouts.get(id(a), (None, None))
    return layout if ref is not None and ref() is a else None


@st.composite
def outs(draw, shape, dtype) -> Optional[np.ndarray]:
    """None (a new array) or a writable ``out=`` of ``shape`` in a drawn layout (no broadcast
    axes: outputs need distinct elements), filled with garbage the call must overwrite."""
    if not draw(st.booleans()):
        return None
    out = draw(arrays(shape, dtype, zero_strides=False))
    return out


# ---------------------------------------------------------------------------------------------
# Reproducing calls

def show_array(a: np.ndarray) -> str:
    """A Python expression that remakes ``a``: its values, laid out as drawn (apply_layout, from
    tests/python/strategies.py), and a comment with its strides."""
    dtype = a.dtype.name
    if a.dtype.kind == "f":  # through the bits: NaN payloads and -0.0 survive the round trip
        body = f"np.array({bits(a).tolist()!r}, dtype='u{a.itemsize}').view('{dtype}')"
    else:
        body = f"np.array({a.tolist()!r}, dtype='{dtype}')"
    layout = layout_of(a)
    if layout is not None:
        body = f"apply_layout({body}, {layout!r})"
    return f"{body}  # shape {a.shape}, byte strides {a.strides}"


def show_call(call: str, **arrays_: Optional[np.ndarray]) -> None:
    """Note the arrays and the call (Python source) for hypothesis to print on failure."""
    for name, a in arrays_.items():
        note(f"{name} = {show_array(a) if a is not None else None}")
    note(call)


def kwargs_source(**kwargs: Any) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(bits(actual), bits(expected))


def run_and_check_inputs(call: Callable[[], np.ndarray], out: Optional[np.ndarray], *inputs: np.ndarray) -> np.ndarray:
    """Runs ``call``; checks that it returned ``out`` when one was given and left every input's
    bits as they were."""
    before = [bits(x).copy() for x in inputs]
    y = call()
    if out is not None:
        assert y is out
    for x, b in zip(inputs, before):
        np.testing.assert_array_equal(bits(x), b, err_msg="the call modified an input")
    return y


# ---------------------------------------------------------------------------------------------
# Garbage: random Python values for the descriptor constructors and from_dict

GARBAGE_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-2**70, 2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -2**63 - 1, 2**48 + 1]),
    st.floats(),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, -0.0, 0.5]),
    st.text(max_size=8),
    st.sampled_from(["", "nan", "inf", "float32", "FLOAT32", "constant", "linear", "relu", "DML_TENSOR_DATA_TYPE_INT8"]),
    st.binary(max_size=4),
    st.sampled_from([np.float32(1.5), np.int64(3), np.uint64(2**64 - 1), np.bool_(True), np.float16("nan")]),
    st.sampled_from([np.zeros(3, np.int64), np.zeros((2, 2), np.float32), np.array(5), np.array(["a"]),
                     np.zeros(2, object), np.zeros(0)]),
)

GARBAGE_KEYS = st.text(max_size=12) | st.sampled_from(["Width", "Height", "Type", "Desc", "DataType", "Sizes", "Strides"])
GARBAGE = st.deferred(lambda: GARBAGE_LEAVES | st.lists(GARBAGE, max_size=9) | st.lists(GARBAGE, max_size=4).map(tuple)
                      | st.dictionaries(GARBAGE_KEYS, GARBAGE, max_size=4))


# The garbage tests run a quarter of the profile's examples (500 under "ci"): each example is
# cheap to reject, and most of their time goes into drawing the garbage.
garbage_settings = settings(max_examples=max(settings.default.max_examples // 4, 10))


@st.composite
def mutated_kwargs(draw, valid: dict, extra: Optional[dict] = None) -> dict:
    """``valid`` keyword arguments with some replaced by garbage (or by an ``extra`` value:
    a plausible wrong one such as another TensorDesc), some dropped, perhaps an unknown one added."""
    kwargs = dict(valid)
    for key in sorted(valid):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            kwargs[key] = draw(GARBAGE)
        elif choice == 1 and extra and key in extra:
            kwargs[key] = draw(st.sampled_from(extra[key]))
        elif choice == 2 and draw(st.integers(0, 3)) == 0:
            del kwargs[key]
    if draw(st.integers(0, 9)) == 0:
        kwargs[draw(st.text(min_size=1, max_size=6))] = draw(GARBAGE)
    return kwargs


@st.composite
def mutated_json(draw, value: Any, depth: int = 0) -> Any:
    """A JSON-shaped value (dicts, lists, scalars) with parts replaced by garbage, dropped or
    added, at any depth."""
    if draw(st.integers(0, 6)) == 0:
        return draw(GARBAGE)
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if draw(st.integers(0, 9)) == 0:
                continue
            result[key] = draw(mutated_json(item, depth + 1))
        if draw(st.integers(0, 9)) == 0:
            result[draw(st.text(max_size=8))] = draw(GARBAGE)
        return result
    if isinstance(value, list):
        items = [draw(mutated_json(item, depth + 1)) for item in value]
        if items and draw(st.integers(0, 9)) == 0:
            items.pop()
        if draw(st.integers(0, 9)) == 0:
            items.append(draw(GARBAGE))
        return items
    return value


def expect_only_value_or_type_errors(call: Callable[[], Any]) -> None:
    """Runs ``call``: success or ValueError/TypeError only (anything else fails the test, and a
    crash takes the whole run down)."""
    try:
        call()
    except (ValueError, TypeError) as error:
        assert str(error), "an error without a message"


# ---------------------------------------------------------------------------------------------
# Hostile arrays and rejected out=

def hostile_inputs(x: np.ndarray) -> dict:
    """Arrays that stand where ``x`` should and must be refused with TypeError/ValueError:
    object and other foreign dtypes, non-native byte order, 0-d, empty (a dimension of 0:
    DirectML sizes are >= 1), too many dimensions, masked arrays, and things that are not
    arrays."""
    swapped = x.astype(x.dtype.newbyteorder(">")) if x.dtype.itemsize > 1 else None
    cases = {
        "object": x.astype(object),
        "complex": x.astype(np.complex64),
        "str": x.astype(str),
        "datetime": np.zeros(x.shape, "datetime64[s]"),
        "0-d": np.array(x.ravel()[0]),
        "empty": np.zeros((0,) + x.shape[1:], x.dtype),
        "empty last": np.zeros(x.shape[:-1] + (0,), x.dtype),
        "9-d": np.zeros((1,) * 9, x.dtype),
        "ragged list": [x.tolist(), 0],
        "masked": np.ma.masked_array(x),
        "None": None,
        "scalar": x.ravel()[0],
    }
    if swapped is not None:
        cases["big-endian"] = swapped
    return cases


def bad_outs(x: np.ndarray, shape, dtype) -> dict:
    """``out=`` arguments that must be refused: wrong shape, dtype, byte order, read-only,
    non-writeable view, overlapping the input, overlapping itself, not an array."""
    dtype = np.dtype(dtype)
    good = np.zeros(shape, dtype)
    read_only = np.zeros(shape, dtype)
    read_only.flags.writeable = False
    other = np.float32 if dtype != np.float32 else np.float64
    cases = {
        "shape +1": np.zeros(tuple(shape[:-1]) + (shape[-1] + 1,), dtype),
        "shape transposed": np.zeros(tuple(reversed(shape)), dtype) if tuple(reversed(shape)) != tuple(shape) else None,
        "rank +1": np.zeros((1,) + tuple(shape), dtype),
        "dtype": np.zeros(shape, other),
        "big-endian": np.zeros(shape, dtype.newbyteorder(">")) if dtype.itemsize > 1 else None,
        "read-only": read_only,
        "broadcast view": np.broadcast_to(good, shape) if good.size > 1 else None,
        "zero stride": np.lib.stride_tricks.as_strided(good, shape, (0,) * len(shape)) if good.size > 1 else None,
        "list": good.tolist(),
        "object": np.zeros(shape, object),
    }
    if x.dtype == dtype and x.flags.writeable:
        if tuple(x.shape) == tuple(shape):
            cases["the input"] = x
        flat = x.reshape(-1) if x.flags.c_contiguous else None
        if flat is not None and flat.size >= int(np.prod(shape)):
            cases["a view of the input"] = flat[: int(np.prod(shape))].reshape(shape)
    return {k: v for k, v in cases.items() if v is not None}


def assert_rejected_leaves_out_untouched(call: Callable[[np.ndarray], Any], out: np.ndarray) -> None:
    """``call(out)`` must raise ValueError/TypeError and leave ``out``'s bytes as they were."""
    before = np.array(out, copy=True)
    try:
        call(out)
    except (ValueError, TypeError):
        pass
    else:
        raise AssertionError("the call was accepted")
    np.testing.assert_array_equal(bits(out), bits(before), err_msg="a rejected call wrote into out=")


def fuzz_garbage(data, cls, valid: dict, wrong: Optional[dict] = None, function: Optional[Callable] = None,
                 function_args: tuple = (), function_kwargs: Optional[dict] = None,
                 function_wrong: Optional[dict] = None) -> None:
    """One garbage round for an operator (for a ``@given(data=st.data())`` test): the descriptor
    constructor with mutated keyword arguments, ``from_dict`` with a mutated ``to_dict()``, and the
    function with mutated keyword arguments; only ValueError/TypeError may come out."""
    kwargs = data.draw(mutated_kwargs(valid, wrong))
    note(f"dmlops.{cls.__name__}(**{kwargs!r})")
    expect_only_value_or_type_errors(lambda: cls(**kwargs))
    d = data.draw(mutated_json(cls(**valid).to_dict()))
    note(f"dmlops.{cls.__name__}.from_dict({d!r})")
    expect_only_value_or_type_errors(lambda: cls.from_dict(d))
    if function is not None:
        args = data.draw(mutated_kwargs(function_kwargs or {}, function_wrong))
        note(f"dmlops.{function.__name__}(*{function_args!r}, **{args!r})")
        expect_only_value_or_type_errors(lambda: function(*function_args, **args))


def check_hostile_inputs(call: Callable[[Any], Any], x: np.ndarray, allowed: tuple = ()) -> None:
    """``call(bad)`` raises TypeError/ValueError for every :func:`hostile_inputs` of ``x`` but
    those named in ``allowed``."""
    for name, bad in hostile_inputs(x).items():
        if name in allowed:
            continue
        try:
            call(bad)
        except (TypeError, ValueError) as error:
            assert str(error), name
        else:
            raise AssertionError(f"the {name} input was accepted")


def check_bad_outs(call: Callable[[Any], Any], x: np.ndarray, shape, dtype) -> None:
    """``call(out)`` raises TypeError/ValueError for every :func:`bad_outs` and leaves the
    writable ones untouched."""
    for name, out in bad_outs(x, shape, dtype).items():
        if isinstance(out, np.ndarray) and out.flags.writeable and out.strides.count(0) == 0:
            before = bits(out).copy() if out.dtype.kind != "O" else out.copy()
        else:
            before = None
        try:
            call(out)
        except (TypeError, ValueError) as error:
            assert str(error), name
        else:
            raise AssertionError(f"the {name} out= was accepted")
        if before is not None:
            after = bits(out) if out.dtype.kind != "O" else out
            np.testing.assert_array_equal(after, before, err_msg=f"a rejected call wrote into the {name} out=")
