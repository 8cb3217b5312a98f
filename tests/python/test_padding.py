"""Padding / Padding1 (docs/semantics/padding.md) against the plain reference in reference.py."""

from __future__ import annotations

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
from reference import bits, pad_reference, pad_source_index, padding_float_value
from strategies import (ALL_DTYPES, FLOAT_DTYPES, arrays, check_bad_outs, check_hostile_inputs, fuzz_garbage,
                        garbage_settings, kwargs_source, outs, run_and_check_inputs, show_call)

MODES = ("constant", "edge", "reflection", "symmetric", "wrap")
DTYPES = ("float32", "float16", "float64", "uint8", "uint16", "uint32", "uint64",
          "int8", "int16", "int32", "int64", "bool")


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    # random bit patterns: every value, NaN payloads and subnormals included
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray):
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(bits(actual), bits(expected))


# ---------------------------------------------------------------------------------------------
# DirectML's worked examples (seed 000, DML_PADDING1_OPERATOR_DESC), verbatim

SEED_INPUT = np.array([[[[1, 2, 3, 4],
                         [5, 6, 7, 8],
                         [1, 2, 3, 4],
                         [5, 6, 7, 8]]]], dtype=np.float32)
SEED_START, SEED_END = (0, 0, 1, 2), (0, 0, 3, 4)
SEED_OUTPUTS = {
    "constant": [[9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
                 [9, 9, 1, 2, 3, 4, 9, 9, 9, 9],
                 [9, 9, 5, 6, 7, 8, 9, 9, 9, 9],
                 [9, 9, 1, 2, 3, 4, 9, 9, 9, 9],
                 [9, 9, 5, 6, 7, 8, 9, 9, 9, 9],
                 [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
                 [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
                 [9, 9, 9, 9, 9, 9, 9, 9, 9, 9]],
    "edge": [[1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
             [1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
             [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
             [1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
             [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
             [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
             [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
             [5, 5, 5, 6, 7, 8, 8, 8, 8, 8]],
    "reflection": [[7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
                   [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
                   [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
                   [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
                   [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
                   [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
                   [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
                   [3, 2, 1, 2, 3, 4, 3, 2, 1, 2]],
    "symmetric": [[2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
                  [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
                  [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
                  [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
                  [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
                  [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
                  [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
                  [6, 5, 5, 6, 7, 8, 8, 7, 6, 5]],
}


@pytest.mark.parametrize("mode", sorted(SEED_OUTPUTS))
def test_seed_examples(mode):
    expected = np.array([[SEED_OUTPUTS[mode]]], dtype=np.float32)
    y = dmlops.pad(SEED_INPUT, SEED_START, SEED_END, mode=mode, value=9)
    assert y.shape == (1, 1, 8, 10) and y.dtype == np.float32 and y.flags.c_contiguous
    np.testing.assert_array_equal(y, expected)
    desc = dmlops.Padding1Desc(dmlops.TensorDesc("FLOAT32", (1, 1, 4, 4)), padding_mode=mode,
                               padding_value=9, start_padding=SEED_START, end_padding=SEED_END)
    np.testing.assert_array_equal(desc(SEED_INPUT), expected)
    # the reference agrees with DirectML's examples too, so it is a sound oracle
    np.testing.assert_array_equal(pad_reference(SEED_INPUT, SEED_START, SEED_END, mode, 9), expected)


def test_issue_example():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y = dmlops.pad(x, (0, 0, 1, 2), (0, 0, 3, 4), mode="reflection")
    assert_same_bits(y, pad_reference(x, (0, 0, 1, 2), (0, 0, 3, 4), "reflection"))
    d = dmlops.Padding1Desc(input=dmlops.TensorDesc("float32", (1, 1, 4, 4)), padding_mode="symmetric",
                            start_padding=(0, 0, 1, 2), end_padding=(0, 0, 3, 4))
    assert d.output.sizes == (1, 1, 8, 10)
    assert_same_bits(d(x), pad_reference(x, (0, 0, 1, 2), (0, 0, 3, 4), "symmetric"))
    assert dmlops.Padding1Desc.from_dict(d.to_dict()) == d


def test_docstring_examples():
    np.testing.assert_array_equal(dmlops.pad(np.array([1, 2, 3, 4]), (2,), (5,), mode="reflection"),
                                  [3, 2, 1, 2, 3, 4, 3, 2, 1, 2, 3])
    np.testing.assert_array_equal(dmlops.pad(np.array([1, 2, 3, 4]), (2,), (2,), mode="symmetric"),
                                  [2, 1, 1, 2, 3, 4, 4, 3])
    np.testing.assert_array_equal(dmlops.pad(np.array([1, 2, 3, 4]), (2,), (2,), mode="wrap"),
                                  [3, 4, 1, 2, 3, 4, 1, 2])
    np.testing.assert_array_equal(dmlops.pad(np.array([1, 2, 3, 4]), (2,), (2,), mode="edge"),
                                  [1, 1, 1, 2, 3, 4, 4, 4])


# ---------------------------------------------------------------------------------------------
# The periodic rule for pads larger than the input, written out by hand

@pytest.mark.parametrize("mode,expected", [
    # input [a b c] = [1 2 3], start 7, end 8
    ("reflection", [2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3]),
    ("symmetric", [1, 1, 2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1, 2, 3, 3, 2]),
    ("wrap", [3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2]),
    ("edge", [1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]),
])
def test_pads_many_times_the_input(mode, expected):
    y = dmlops.pad(np.array([1, 2, 3], dtype=np.int16), (7,), (8,), mode=mode)
    np.testing.assert_array_equal(y, expected)


def test_reflection_of_a_single_element_repeats_it():
    np.testing.assert_array_equal(dmlops.pad(np.array([5.0]), (3,), (2,), mode="reflection"), [5.0] * 6)


def test_source_index_reference_is_periodic():
    # the reference rule itself: reflection has period 2(n-1), symmetric 2n, wrap n
    for n in (2, 3, 5):
        for o in range(-40, 40):
            s = 50
            assert pad_source_index("reflection", s + o, n, s) == pad_source_index("reflection", s + o + 2 * (n - 1), n, s)
            assert pad_source_index("symmetric", s + o, n, s) == pad_source_index("symmetric", s + o + 2 * n, n, s)
            assert pad_source_index("wrap", s + o, n, s) == pad_source_index("wrap", s + o + n, n, s)


# ---------------------------------------------------------------------------------------------
# Random sweep: ranks 1-8, every dtype and mode, pads up to several times the input

def sweep_case(seed: int):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 9))
    max_size = {1: 40, 2: 12, 3: 7, 4: 5, 5: 4, 6: 3, 7: 3, 8: 2}[rank]
    shape = tuple(int(s) for s in rng.integers(1, max_size + 1, size=rank))
    pads = lambda: tuple(int(p) if rng.random() < 0.8 else int(p) * 4 for p in rng.integers(0, 4, size=rank))
    return rng, shape, pads(), pads(), MODES[seed % 5], DTYPES[seed % len(DTYPES)]


@pytest.mark.parametrize("seed", range(240))
def test_random_sweep_bit_exact(seed):
    rng, shape, start, end, mode, dtype = sweep_case(seed)
    x = random_array(rng, shape, dtype)
    value = {"bool": True, "float16": -2.5, "uint64": 2**64 - 1, "int64": -(2**63)}.get(dtype, 7)
    y = dmlops.pad(x, start, end, mode=mode, value=value)
    assert_same_bits(y, pad_reference(x, start, end, mode, value))


@pytest.mark.parametrize("seed", range(60))
def test_random_strided_views_and_out(seed):
    """Inputs with negative, zero and non-contiguous strides (read in place), and strided out=."""
    rng, shape, start, end, mode, dtype = sweep_case(seed + 1000)
    base = random_array(rng, tuple(s * 2 + 1 for s in shape), dtype)
    view = base[tuple(slice(None, None, int(rng.choice([-2, -1, 1, 2]))) for _ in shape)]
    view = view[tuple(slice(0, s) for s in shape)]
    if len(shape) > 1:
        view = np.moveaxis(view, 0, -1)  # transposed, so the strides are out of order
    if rng.random() < 0.3:  # a broadcast (zero-stride) axis
        axis = int(rng.integers(0, view.ndim))
        view = np.broadcast_to(view.take([0], axis=axis), view.shape)
    value = True if dtype == "bool" else 3
    expected = pad_reference(view, start, end, mode, value)
    big = np.zeros(tuple(s * 2 for s in expected.shape), dtype=view.dtype)
    out = big[tuple(slice(None, None, 2) for _ in expected.shape)]
    if out.ndim > 1:
        out = np.flip(out, axis=0)
    result = dmlops.pad(view, start, end, mode=mode, value=value, out=out)
    assert result is out
    assert_same_bits(out, expected)
    assert_same_bits(dmlops.pad(view, start, end, mode=mode, value=value), expected)


@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    data=st.data(),
    mode=st.sampled_from(MODES),
)
def test_property_matches_reference(shape, data, mode):
    rank = len(shape)
    start = data.draw(st.lists(st.integers(0, 15), min_size=rank, max_size=rank))
    end = data.draw(st.lists(st.integers(0, 15), min_size=rank, max_size=rank))
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    np.testing.assert_array_equal(dmlops.pad(x, start, end, mode=mode, value=-1),
                                  pad_reference(x, start, end, mode, -1))


# ---------------------------------------------------------------------------------------------
# np.pad agrees where it is correct (pads no larger than it supports)

NUMPY_MODE = {"constant": "constant", "edge": "edge", "reflection": "reflect", "symmetric": "symmetric",
              "wrap": "wrap"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64", "float16"])
def test_agrees_with_numpy_pad_for_small_pads(mode, dtype):
    rng = np.random.default_rng(7)
    x = random_array(rng, (3, 5, 6, 4), dtype)
    limit = [n - 1 if mode == "reflection" else n for n in x.shape]
    start = tuple(int(rng.integers(0, m + 1)) for m in limit)
    end = tuple(int(rng.integers(0, m + 1)) for m in limit)
    kwargs = {"constant_values": 5} if mode == "constant" else {}
    expected = np.pad(x, list(zip(start, end)), mode=NUMPY_MODE[mode], **kwargs)
    assert_same_bits(dmlops.pad(x, start, end, mode=mode, value=5), expected)


# ---------------------------------------------------------------------------------------------
# dtypes, values, bit exactness

@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_keeps_its_dtype(dtype):
    x = random_array(np.random.default_rng(1), (4, 5), dtype)
    y = dmlops.pad(x, (1, 2), (3, 0), mode="symmetric")
    assert y.dtype == x.dtype
    assert_same_bits(y, pad_reference(x, (1, 2), (3, 0), "symmetric"))


def test_nan_payloads_move_bit_exactly():
    payloads = np.array([0x7FC00123, 0xFF800001, 0x7F800001], dtype=np.uint32).view(np.float32)
    y = dmlops.pad(payloads, (2,), (2,), mode="reflection")
    assert_same_bits(y, payloads[[2, 1, 0, 1, 2, 1, 0]])
    halves = np.array([0x7E01, 0xFC01, 0x7D55], dtype=np.uint16).view(np.float16)
    assert_same_bits(dmlops.pad(halves, (1,), (1,), mode="edge"), halves[[0, 0, 1, 2, 2]])


@pytest.mark.parametrize("dtype,value", [
    ("int64", 2**63 - 1), ("int64", -(2**63)), ("uint64", 2**64 - 1), ("uint64", 2**63 + 1),
    ("int32", -(2**31)), ("uint8", 255), ("int8", -128), ("float16", 65504.0), ("float32", -0.0),
    ("float64", float("inf")), ("float16", float("-inf")), ("bool", True), ("int16", np.int16(-7)),
    ("float32", np.float32(0.1)), ("uint16", 3.0),
])
def test_padding1_values_are_exact(dtype, value):
    x = np.zeros(2, dtype=dtype)
    y = dmlops.pad(x, (1,), (1,), value=value)
    expected = np.array(value, dtype=dtype) if not isinstance(value, float) else np.array(value).astype(dtype)
    assert_same_bits(y[[0, 3]], np.array([expected, expected], dtype=dtype))
    d = dmlops.Padding1Desc(dmlops.TensorDesc("uint8" if dtype == "bool" else dtype, (2,)), padding_value=value,
                            start_padding=(1,), end_padding=(1,))
    assert_same_bits(d(x), y)


def test_nan_padding_value():
    y = dmlops.pad(np.zeros(2, np.float32), (1,), (0,), value=float("nan"))
    assert np.isnan(y[0]) and y[1] == 0


@pytest.mark.parametrize("dtype,value", [
    ("uint8", 300), ("uint8", -1), ("int8", 128), ("int32", 0.5), ("int64", 2**63), ("uint64", 2**64),
    ("uint64", -1), ("float16", 70000.0), ("float32", 1e39), ("int16", float("nan")), ("uint32", float("inf")),
    ("bool", 2),
])
def test_padding1_value_not_representable(dtype, value):
    with pytest.raises(ValueError, match="padding_value .* not representable|does not fit"):
        dmlops.pad(np.zeros(2, dtype=dtype), (1,), (1,), value=value)


@pytest.mark.parametrize("dtype,value,expected", [
    ("uint8", 300.0, 255), ("uint8", -5.5, 0), ("int8", 3.9, 3), ("int8", -3.9, -3), ("int8", -1000.0, -128),
    ("int32", float("nan"), 0), ("int64", 1e20, 2**63 - 1), ("uint64", 1e30, 2**64 - 1),
    ("float16", 1e6, float("inf")), ("float32", 0.1, float(np.float32(0.1))), ("float64", 0.1, float(np.float32(0.1))),
])
def test_padding_v1_value_truncates_and_saturates(dtype, value, expected):
    d = dmlops.PaddingDesc(dmlops.TensorDesc(dtype, (1,)), padding_value=value, start_padding=(1,),
                           end_padding=(0,))
    y = d(np.zeros(1, dtype=dtype))
    assert y.dtype == np.dtype(dtype)
    assert y[0] == np.array(expected).astype(dtype)


# ---------------------------------------------------------------------------------------------
# threads

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("threads", [1, 2, 3, 7, 17])
def test_rows_folded_many_times_match_at_every_thread_count(mode, threads):
    """Pads several times the input on both axes: most output rows repeat a row written earlier
    (rows back 1 to 2n), which the kernel copies instead of gathering, and each thread's share of
    rows starts anywhere in a plane."""
    rng = np.random.default_rng(17)
    x = random_array(rng, (2, 3, 5, 6), "float32")
    start, end = (0, 1, 23, 17), (1, 0, 19, 29)
    with dmlops.threads(threads):
        assert_same_bits(dmlops.pad(x, start, end, mode=mode), pad_reference(x, start, end, mode))


@pytest.mark.parametrize("mode", ["reflection", "symmetric", "wrap"])
@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_rows_folded_many_times_in_long_copies(mode, threads):
    """Rows of 3.4 KB folded several times on both axes: runs of rows that repeat earlier ones
    are copied several KiB at a time (the C library's memcpy from 4 KiB), into `out` views at
    several alignments."""
    rng = np.random.default_rng(18)
    x = random_array(rng, (1, 2, 5, 260), "float32")
    start, end = (0, 0, 23, 300), (0, 1, 19, 280)
    expected = pad_reference(x, start, end, mode)
    with dmlops.threads(threads):
        assert_same_bits(dmlops.pad(x, start, end, mode=mode), expected)
        for offset in (4, 36):
            buffer = np.zeros(expected.nbytes + 64, np.uint8)
            out = buffer[offset:offset + expected.nbytes].view(np.float32).reshape(expected.shape)
            dmlops.pad(x, start, end, mode=mode, out=out)
            assert_same_bits(out, expected)
            assert not buffer[:offset].any() and not buffer[offset + expected.nbytes:].any()


# Outputs larger than the last-level cache are written with streaming stores; a 1 MiB "L3" makes
# these small ones take that path. Misaligned input and output views move every head and tail.
STREAMING_CHECK = """
import numpy as np, dmlops
from dmlops import _core
assert _core.cache_sizes()["l3"] == 1 << 20
rng = np.random.default_rng(5)
x = rng.integers(0, 256, 1_600_003, dtype=np.uint8)
for threads in (1, 2, 5):
    with dmlops.threads(threads):
        for offset in (0, 1, 3):
            v = x[offset:offset + 1_600_000]
            v = v.view(np.float32) if offset == 0 else v
            for mode, np_mode in (("constant", "constant"), ("reflection", "reflect"), ("wrap", "wrap")):
                expected = np.pad(v, (1000, 999), mode=np_mode)
                assert np.array_equal(dmlops.pad(v, (1000,), (999,), mode=mode).view(np.uint8), expected.view(np.uint8))
                buffer = np.empty(expected.nbytes + 8, np.uint8)
                out = buffer[offset + 1:offset + 1 + expected.nbytes].view(expected.dtype)
                dmlops.pad(v, (1000,), (999,), mode=mode, out=out)
                assert np.array_equal(out.view(np.uint8), expected.view(np.uint8))
        image = rng.standard_normal((2, 8, 130, 130)).astype(np.float32)  # 1.15 MB padded
        assert np.array_equal(dmlops.pad(image, (0, 0, 2, 2), (0, 0, 2, 2), mode="edge"),
                              np.pad(image, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="edge"))
print("ok")
"""


# A padding whose output is too large for the caches and several times its input writes its rows
# (and its rows and planes of the fill value) through a buffer in L1, streamed out whole lines at
# a time (the plan says so), a padding by an edge's copies too (rows that repeat, each gathered
# again rather than read back from the streamed output). A 256 KiB
# "L3", `out` views at every alignment within a line, thread counts that cut the rows unevenly.
STAGED_STREAMING_CHECK = """
import numpy as np, dmlops
from dmlops import _core
rng = np.random.default_rng(6)
x = rng.standard_normal((2, 3, 120, 100)).astype(np.float32)
u8 = rng.integers(0, 256, (1, 4, 300, 257), dtype=np.uint8)
cases = [(x, (0, 1, 40, 30), (0, 2, 41, 29), "constant", True), (x, (0, 0, 0, 90), (0, 0, 0, 95), "reflection", True),
         (u8, (0, 0, 150, 61), (0, 0, 149, 3), "constant", True), (x, (0, 0, 60, 50), (0, 0, 60, 50), "edge", True)]
np_modes = {"constant": "constant", "reflection": "reflect", "edge": "edge"}
for threads in (1, 2, 3, 7):
    with dmlops.threads(threads):
        for v, start, end, mode, staged in cases:
            expected = np.pad(v, tuple(zip(start, end)), mode=np_modes[mode])
            desc = dmlops.PaddingDesc(dmlops.TensorDesc(v.dtype.name, v.shape), start_padding=start, end_padding=end,
                                      padding_mode=mode, padding_value=0.0)
            assert (desc.plan().tiles.get("streamed") == 1) == staged, (v.shape, start, end, mode, threads)
            assert np.array_equal(dmlops.pad(v, start, end, mode=mode).view(np.uint8), expected.view(np.uint8))
            for offset in (1, 24, 63):
                buffer = np.zeros(expected.nbytes + 64, np.uint8)
                out = buffer[offset:offset + expected.nbytes].view(v.dtype).reshape(expected.shape)
                dmlops.pad(v, start, end, mode=mode, out=out)
                assert np.array_equal(out.view(np.uint8), expected.view(np.uint8)), (offset, start, end, mode, threads)
                assert not buffer[:offset].any() and not buffer[offset + expected.nbytes:].any()
print("ok")
"""


def test_outputs_several_times_the_input_and_larger_than_the_cache_stream_their_rows():
    result = subprocess.run([sys.executable, "-c", STAGED_STREAMING_CHECK], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "DMLOPS_CACHE_SIZES": "32K,128K,256K"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_outputs_larger_than_the_cache_stream_bit_exactly():
    result = subprocess.run([sys.executable, "-c", STREAMING_CHECK], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DMLOPS_CACHE_SIZES": "32K,256K,1M"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_thread_counts_give_identical_results(threads):
    rng = np.random.default_rng(threads)
    x = random_array(rng, (3, 67, 129), "float32")
    expected = pad_reference(x, (1, 5, 300), (2, 0, 7), "reflection")
    dmlops.set_num_threads(threads)
    assert dmlops.get_num_threads() == threads
    assert_same_bits(dmlops.pad(x, (1, 5, 300), (2, 0, 7), mode="reflection"), expected)
    long = random_array(rng, (300_001,), "uint16")  # one long row: split into column blocks
    assert_same_bits(dmlops.pad(long, (70_000,), (3,), mode="symmetric"),
                     pad_reference(long, (70_000,), (3,), "symmetric"))


# (shape, start, end, {mode: plan().tiles' (border_elements, border_runs)}): the rows of one
# contiguous copy, at most 16 other elements (edges, short fills, mirrored or wrapped elements:
# runs shorter than 8) and at most 4 fills of 4 or more and mirrored runs; None, rows of another form.
# Input rows of over 128 bytes in every dtype (narrower ones are narrow rows with AVX-512: below).
BORDER_CASES = [
    ((2, 3, 5, 9, 140), (0, 0, 1, 1, 1), (0, 0, 1, 1, 1), dict.fromkeys(MODES, (2, None))),  # a 5-D activation padded by one
    ((3, 6, 133), (1, 2, 8), (0, 3, 8),
     {"constant": (0, 2), "edge": (16, None), "reflection": (0, 2), "symmetric": (0, 2)}),  # fills, mirrors of 8; wraps: copies
    ((3, 6, 133), (1, 2, 9), (0, 3, 8),
     {"constant": (0, 2), "reflection": (0, 2), "symmetric": (0, 2)}),   # 17 edge elements
    ((2, 3, 140), (0, 1, 16), (1, 0, 16),
     {"constant": (0, 2), "reflection": (0, 2), "symmetric": (0, 2)}),   # an image's borders of 16
    ((2, 3, 140), (0, 1, 9), (1, 0, 2),
     {"constant": (2, 1), "edge": (11, None), "reflection": (2, 1), "symmetric": (2, 1)}),  # a run and two elements
    ((4, 5, 7), (2, 3, 0), (1, 0, 0), dict.fromkeys(MODES, (0, None))),  # only outer axes padded
    ((2, 1, 3), (1, 0, 2), (0, 1, 1), {}),                               # a copy of 3 elements: gathered
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "uint8", "float16", "float64"])
def test_rows_of_a_copy_and_a_few_elements(mode, dtype):
    """Rows of one contiguous copy and a few other elements or runs are written without the row
    batches or copies of equal rows (plan(): border_elements, border_runs), a run of rows per
    kernel call where their input rows are under 1 KiB and there are no runs, else one by one:
    every mode, a fill plane and fill rows, thread counts, strided inputs and outputs, all
    against the reference."""
    rng = np.random.default_rng(11)
    for shape, start, end, elements in BORDER_CASES:
        x = random_array(rng, shape, dtype)
        expected = pad_reference(x, start, end, mode)
        desc = dmlops.PaddingDesc(dmlops.TensorDesc(dtype, shape), start_padding=start, end_padding=end,
                                  padding_mode=mode)
        tiles = desc.plan().tiles
        form = elements.get(mode)
        assert (tiles.get("border_elements"), tiles.get("border_runs")) == (form or (None, None)), (shape, tiles)
        wide = np.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), expected.dtype)
        for threads in (1, 2, 3, 7):
            with dmlops.threads(threads):
                assert_same_bits(dmlops.pad(x, start, end, mode=mode), expected)
                out = wide[..., ::2]
                dmlops.pad(x, start, end, mode=mode, out=out)
                assert_same_bits(out, expected)
                assert_same_bits(dmlops.pad(np.flip(x.copy(), -1)[..., ::-1], start, end, mode=mode), expected)
        strided = np.repeat(x, 2, axis=-1)[..., ::2]  # input rows of stride 2: no copy run
        assert "border_elements" not in dmlops.PaddingDesc(dmlops.TensorDesc(dtype, shape, [b // x.itemsize for b in strided.strides]),
                                                           start_padding=start, end_padding=end,
                                                           padding_mode=mode).plan().tiles
        assert_same_bits(dmlops.pad(strided, start, end, mode=mode), expected)


@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_border_row_copies_of_every_length(mode):
    """A border row's copy (copy_bytes) moves 32-byte vectors, the first unaligned, the rest
    stored aligned, the last one ending at the row's end: copies of 96 to 200 bytes (every
    remainder modulo 32) at output offsets of 1 to 3 bytes and of 1 to 3 float16 elements (the
    alignments the vectors take), against the reference."""
    rng = np.random.default_rng(31)
    for dtype, widths in (("uint8", range(96, 201)), ("float16", range(48, 101))):
        for pad in (1, 2, 3):
            for width in widths:
                x = random_array(rng, (2, 3, width), dtype)
                start, end = (0, 1, pad), (0, 0, 4 - pad)
                desc = dmlops.PaddingDesc(dmlops.TensorDesc(dtype, x.shape), start_padding=start, end_padding=end,
                                          padding_mode=mode)
                assert "border_elements" in desc.plan().tiles, (dtype, width, pad)
                assert_same_bits(desc(x), pad_reference(x, start, end, mode))


def narrow_rows_expected(dtype) -> tuple[int, bool]:
    """The longest input row (bytes) this CPU permutes as a narrow row of this dtype, and whether
    it is AVX2's permute (which leaves border rows that write under 6 elements one by one to their
    own kernel): 128 with AVX-512 (BW for 2-byte elements, which every AVX-512 CPU since Skylake
    has; VBMI for bytes, which the unfold plan names), 128 with AVX2 for 4- and 8-byte elements,
    else 0 (none)."""
    itemsize = np.dtype(dtype).itemsize
    if dmlops._core.fma_isa() == "avx2":
        return (128 if itemsize in (4, 8) else 0), True
    if dmlops._core.fma_isa() != "avx512":
        return 0, False
    if itemsize > 1:
        return 128, False
    stride2 = dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 1, 9)), window_sizes=(2,), strides=(2,)).plan()
    return (128 if "byte permute" in stride2.reason else 0), False


@pytest.mark.parametrize("dtype", ["uint8", "float16", "int16", "float32", "int32", "float64", "int64"])
def test_narrow_rows(dtype):
    """Input rows of at most 128 bytes are loaded whole and permuted into place, 64 output bytes
    at a time (plan(): permutes): every mode, row lengths from 1 element to 128 bytes, pads from 0
    to several times the row (reflections folded), fill planes and rows, outputs under and over one
    block and longer than 64 bytes, thread counts and strided outputs, all against the reference.
    Rows whose copy is 96 bytes or more with a few elements each side stay border rows, and with
    AVX2 so do rows that write under 6 elements one by one around their copy."""
    rng = np.random.default_rng(23)
    itemsize = np.dtype(dtype).itemsize
    narrow_bytes, avx2 = narrow_rows_expected(dtype)
    for width in sorted({1, 2, 3, 7, 16 // itemsize, 64 // itemsize - 1, 64 // itemsize, 64 // itemsize + 1, 128 // itemsize}):
        narrow = width * itemsize <= narrow_bytes
        for mode in MODES:
            for start, end in [((0, 1, 1), (0, 0, 2)), ((1, 0, 70), (0, 2, 45)), ((0, 0, 0), (0, 1, 5)), ((0, 2, 3), (2, 0, 0))]:
                shape = (2, 3, width)
                x = random_array(rng, shape, dtype)
                expected = pad_reference(x, start, end, mode)
                tiles = dmlops.PaddingDesc(dmlops.TensorDesc(dtype, shape), start_padding=start, end_padding=end,
                                           padding_mode=mode).plan().tiles
                out_bytes = expected.shape[-1] * itemsize
                border = "border_elements" in tiles
                assert ("permutes" in tiles) == (narrow and start[-1] + end[-1] > 0 and out_bytes <= 4096 and not border), tiles
                if border and narrow:  # only where its own kernel is worth more than the permutes
                    assert width * itemsize >= 96 or (avx2 and tiles["border_elements"] < 6), tiles
                if "permutes" in tiles:
                    assert tiles["permutes"] == max(1, -(-out_bytes // 64)), tiles
                for threads in (1, 3):
                    with dmlops.threads(threads):
                        assert_same_bits(dmlops.pad(x, start, end, mode=mode), expected)
                wide = np.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), expected.dtype)
                dmlops.pad(x, start, end, mode=mode, out=wide[..., ::2])  # strided output rows: no permutes
                assert_same_bits(wide[..., ::2], expected)
                assert not wide[..., 1::2].any()


def test_gather_plans_reused_only_for_the_same_shapes_strides_maps_and_threads():
    """A call reuses the gather plan of an earlier call on its thread only when the shapes,
    strides, element size, maps and thread count are all the same: settings that differ in one
    each (more than the four plans kept), round after round in changing orders, each against
    the reference."""
    rng = np.random.default_rng(7)
    x64 = rng.random((2, 3, 6, 20))
    x32 = x64.astype(np.float32)
    x32_columns = np.asfortranarray(x32)  # the same shape and values, other strides
    wide = np.empty((2, 3, 9, 46), np.float32)
    settings = [
        (x32, (0, 0, 1, 2), (0, 0, 2, 1), "reflection", None),
        (x32, (0, 0, 1, 2), (0, 0, 2, 1), "symmetric", None),   # other maps
        (x32, (0, 0, 2, 1), (0, 0, 1, 2), "reflection", None),  # other maps, the same output shape
        (x64, (0, 0, 1, 2), (0, 0, 2, 1), "reflection", None),  # 8-byte elements
        (x32_columns, (0, 0, 1, 2), (0, 0, 2, 1), "reflection", None),  # input strides
        (x32, (0, 0, 1, 2), (0, 0, 2, 1), "reflection", wide[:, :, :, ::2]),  # output strides
    ]
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [0, 4, 0, 5, 1, 3, 2, 2]):
        for i in order:
            x, start, end, mode, out = settings[i]
            y = dmlops.pad(x, start, end, mode=mode, out=out)
            assert_same_bits(y, pad_reference(x, start, end, mode))
    # The thread count sets whether long rows are split into column blocks.
    desc = dmlops.PaddingDesc(dmlops.TensorDesc("float32", (1, 1, 2, 40000)), start_padding=(0, 0, 1, 1),
                              end_padding=(0, 0, 1, 1))
    for threads in (1, 2, 1, 2):
        with dmlops.threads(threads):
            assert ("column_blocks" in desc.plan().tiles) == (threads == 2)
    # A plan of more than 2^16 positions is not kept: plan() and the call still use it whole
    # (under the sanitizers, a plan freed too early is an error).
    x = np.arange(3 * 70000, dtype=np.float32).reshape(1, 1, 3, 70000)
    long_desc = dmlops.PaddingDesc(dmlops.TensorDesc("float32", x.shape), start_padding=(0, 0, 1, 1),
                                   end_padding=(0, 0, 1, 1), padding_mode="reflection")
    for _ in range(2):
        assert long_desc.plan().tiles["row"] == 70002
        assert_same_bits(long_desc(x), pad_reference(x, (0, 0, 1, 1), (0, 0, 1, 1), "reflection"))


def test_concurrent_python_threads():
    rng = np.random.default_rng(3)
    inputs = [random_array(rng, (40, 50, 60), "int32") for _ in range(6)]
    expected = [pad_reference(x, (2, 3, 4), (4, 3, 2), "wrap") for x in inputs]
    results: dict[int, np.ndarray] = {}

    def work(i):
        for _ in range(5):
            results[i] = dmlops.pad(inputs[i], (2, 3, 4), (4, 3, 2), mode="wrap")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(6):
        assert_same_bits(results[i], expected[i])


# ---------------------------------------------------------------------------------------------
# descriptors

def make_desc(**overrides):
    fields = dict(input=dmlops.TensorDesc("int64", (2, 3)), padding_mode="reflection", padding_value=-(2**63),
                  start_padding=(1, 2), end_padding=(3, 4))
    fields.update(overrides)
    return dmlops.Padding1Desc(**fields)


def test_descriptor_fields_and_output():
    d = make_desc()
    assert d.input == dmlops.TensorDesc("int64", (2, 3))
    assert d.output == dmlops.TensorDesc("int64", (6, 9))
    assert d.output_shape == (6, 9)
    assert d.padding_mode == "reflection" and d.padding_value == -(2**63)
    assert d.start_padding == (1, 2) and d.end_padding == (3, 4)
    with pytest.raises(AttributeError):
        d.padding_mode = "edge"


def test_descriptor_to_dict_is_dxdispatch_json():
    assert make_desc().to_dict() == {
        "InputTensor": {"DataType": "INT64", "Sizes": [2, 3]},
        "OutputTensor": {"DataType": "INT64", "Sizes": [6, 9]},
        "PaddingMode": "DML_PADDING_MODE_REFLECTION",
        "PaddingValueDataType": "INT64",
        "PaddingValue": -(2**63),
        "DimensionCount": 2,
        "StartPadding": [1, 2],
        "EndPadding": [3, 4],
    }
    v1 = dmlops.PaddingDesc(dmlops.TensorDesc("float16", (2,)), padding_value=float("nan"), start_padding=(1,),
                            end_padding=(0,))
    assert v1.to_dict()["PaddingValue"] == "nan"
    assert "PaddingValueDataType" not in v1.to_dict()


@pytest.mark.parametrize("desc", [
    make_desc(),
    make_desc(padding_mode="constant", padding_value=-1.5, input=dmlops.TensorDesc("float16", (2, 3), strides=(1, 2))),
    dmlops.Padding1Desc(dmlops.TensorDesc("float32", (5,)), padding_value=float("nan"), start_padding=(1,),
                        end_padding=(2,)),
    dmlops.PaddingDesc(dmlops.TensorDesc("uint8", (5, 1)), padding_value=-3.5, padding_mode="wrap",
                       start_padding=(1, 0), end_padding=(2, 9)),
])
def test_descriptor_round_trips(desc):
    assert type(desc).from_dict(desc.to_dict()) == desc
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert hash(pickle.loads(pickle.dumps(desc))) == hash(desc)
    assert eval(repr(desc), {"Padding1Desc": dmlops.Padding1Desc, "PaddingDesc": dmlops.PaddingDesc,
                             "TensorDesc": dmlops.TensorDesc, "nan": float("nan")}) == desc


def test_descriptor_equality_compares_every_field():
    d = make_desc()
    assert d == make_desc()
    assert d != make_desc(padding_mode="edge")
    assert d != make_desc(padding_value=0)
    assert d != make_desc(start_padding=(1, 3))
    assert d != make_desc(end_padding=(3, 5))
    assert d != make_desc(input=dmlops.TensorDesc("int64", (2, 4)))
    assert dmlops.PaddingDesc(dmlops.TensorDesc("float32", (1,)), padding_value=0.0, start_padding=(1,), end_padding=(0,)) \
        != dmlops.PaddingDesc(dmlops.TensorDesc("float32", (1,)), padding_value=-0.0, start_padding=(1,), end_padding=(0,))
    assert d != dmlops.PaddingDesc(dmlops.TensorDesc("int64", (2, 3)), padding_mode="reflection",
                                   padding_value=0, start_padding=(1, 2), end_padding=(3, 4))


def test_descriptor_from_dict_accepts_short_enum_names():
    d = dmlops.Padding1Desc.from_dict({
        "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_UINT16", "Sizes": [3]},
        "PaddingMode": "SYMMETRIC", "PaddingValueDataType": "UINT16", "PaddingValue": 7,
        "StartPadding": [1], "EndPadding": [2]})
    assert d.padding_mode == "symmetric" and d.output.sizes == (6,) and d.padding_value == 7


@pytest.mark.parametrize("change,message", [
    ({"Bogus": 1}, "unknown field"),
    ({"DimensionCount": 3}, "DimensionCount"),
    ({"PaddingValueDataType": "FLOAT32"}, "does not match"),
    ({"PaddingMode": "DML_PADDING_MODE_NOPE"}, "padding_mode"),
    ({"OutputTensor": {"DataType": "INT64", "Sizes": [6, 8]}}, "output has sizes"),
])
def test_descriptor_from_dict_rejects(change, message):
    d = make_desc().to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=message):
        dmlops.Padding1Desc.from_dict(d)
    del d["StartPadding"]
    with pytest.raises(ValueError):
        dmlops.Padding1Desc.from_dict(d)


def test_descriptor_checks_arrays_it_runs_on():
    d = make_desc()
    with pytest.raises(TypeError, match="dtype int32 but the descriptor says int64"):
        d(np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
        d(np.zeros((3, 2), np.int64))
    np.testing.assert_array_equal(d([[1, 2, 3], [4, 5, 6]]), d(np.array([[1, 2, 3], [4, 5, 6]])))  # int64
    out = np.empty((6, 9), np.int64)
    assert d(np.zeros((2, 3), np.int64), out=out) is out


def test_uint8_descriptor_runs_on_bool_arrays():
    d = dmlops.Padding1Desc(dmlops.TensorDesc("uint8", (3,)), padding_value=1, start_padding=(1,), end_padding=(1,))
    y = d(np.array([False, True, False]))
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, [True, False, True, False, True])


# ---------------------------------------------------------------------------------------------
# bad input: a clear exception, nothing written

X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("call,error,message", [
    (lambda: dmlops.pad(X, (1,), (1, 1)), ValueError, "start_padding has 1 entries but the input has 2 dimensions"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1, 1)), ValueError, "end_padding has 3 entries"),
    (lambda: dmlops.pad(X, (1, -1), (1, 1)), ValueError, r"start_padding\[1\] is -1; paddings must be >= 0"),
    (lambda: dmlops.pad(X, (1, 2**63 - 1), (1, 1)), ValueError, r"output size on dimension 1 .* exceeds 2\^48"),
    (lambda: dmlops.pad(X, (1, 2**62), (1, 2**62)), ValueError, "exceeds 2"),
    (lambda: dmlops.pad(X, (1, 2**64), (1, 1)), ValueError, "does not fit in 64 bits"),
    (lambda: dmlops.pad(X, (1, 1), (1.5, 1)), TypeError, "end_padding must contain integers, got 1.5"),
    (lambda: dmlops.pad(X, 1.0, 1), TypeError, "start_padding must be a sequence of integers, not float"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), mode="reflect"), ValueError, "numpy's and PyTorch's 'reflect' is 'reflection'"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), mode="replicate"), ValueError, "'replicate' is 'edge'"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), mode=3), TypeError, "padding_mode must be a string"),
    (lambda: dmlops.pad(np.float32(1), (), ()), ValueError, "0 dimensions"),
    (lambda: dmlops.pad(np.array(1.0), (), ()), ValueError, "0 dimensions"),
    (lambda: dmlops.pad(np.zeros((1,) * 9), (0,) * 9, (0,) * 9), ValueError, "9 entries; at most 8"),
    (lambda: dmlops.pad(np.zeros((2, 0)), (1, 1), (1, 1)), ValueError, r"sizes\[1\] is 0"),
    (lambda: dmlops.pad({1: 2}, (1,), (1,)), TypeError, "input has dtype object"),
    (lambda: dmlops.pad(np.zeros(3, complex), (1,), (1,)), TypeError, "complex128"),
    (lambda: dmlops.pad(np.zeros(3, ">f4"), (1,), (1,)), TypeError, "byte order"),
    (lambda: dmlops.pad(np.zeros(3, object), (1,), (1,)), TypeError, "object"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), value="9"), TypeError, "padding_value must be an int, float or bool"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), out=np.zeros((5, 6), np.float64)), TypeError, "out has dtype float64"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), out=[0] * 30), TypeError, "out must be an array to write in place"),
    (lambda: dmlops.pad(X, (1, 1), (1, 1), out=np.zeros((5, 5), np.float32)), ValueError, r"out has shape \(5, 5\)"),
    (lambda: dmlops.Padding1Desc((3, 4), start_padding=(0,), end_padding=(0,)), TypeError, "TensorDesc"),
    (lambda: dmlops.TensorDesc("bool", (3,)), TypeError, "use uint8"),
    (lambda: dmlops.TensorDesc("complex64", (3,)), TypeError, "not supported"),
    (lambda: dmlops.TensorDesc("float32", (3, 0)), ValueError, r"sizes\[1\] is 0"),
    (lambda: dmlops.TensorDesc("float32", (3, 2), strides=(1,)), ValueError, "strides has 1 entries"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_rejected_out_is_untouched():
    sentinel = np.full((5, 6), -123.0, np.float32)
    readonly = sentinel.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dmlops.pad(X, (1, 1), (1, 1), out=readonly)
    out = sentinel.copy()
    with pytest.raises(ValueError, match="start_padding"):
        dmlops.pad(X, (1, 1, 1), (1, 1), out=out)
    with pytest.raises(ValueError, match="not representable"):
        dmlops.pad(X, (1, 1), (1, 1), value=1e39, out=out)
    np.testing.assert_array_equal(out, sentinel)


def test_out_overlapping_input_or_itself_is_rejected():
    buffer = np.zeros(100, np.float32)
    with pytest.raises(ValueError, match="shares memory with an input"):
        dmlops.pad(buffer[:10], (0,), (5,), out=buffer[5:20])
    zero_stride_rows = np.lib.stride_tricks.as_strided(buffer[50:], (5, 6), (0, 4))  # every row aliases one
    with pytest.raises(ValueError, match="overlapping elements"):
        dmlops.pad(X, (1, 1), (1, 1), out=zero_stride_rows)
    np.testing.assert_array_equal(buffer, 0)


# ---------------------------------------------------------------------------------------------
# Differential fuzzing against the reference, garbage descriptors, hostile arrays (strategies.py)

@st.composite
def padding_calls(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    pads = st.lists(st.integers(0, 9), min_size=rank, max_size=rank).map(tuple)  # up to twice the input and more
    dtype = draw(st.sampled_from(ALL_DTYPES))
    x = draw(arrays(shape, dtype))
    info = np.iinfo(np.uint8 if dtype == "bool" else dtype) if dtype not in FLOAT_DTYPES else None
    if dtype == "bool":
        value = draw(st.booleans())
    elif info is not None:
        value = draw(st.integers(int(info.min), int(info.max)))
    else:
        value = draw(st.floats(width=16 if dtype == "float16" else 32) | st.sampled_from([-0.0, float("nan")]))
    return dict(x=x, start=draw(pads), end=draw(pads), mode=draw(st.sampled_from(MODES)), value=value,
                form=draw(st.sampled_from(["pad", "Padding1Desc", "PaddingDesc"])),
                # bool arrays take only 0 and 1 (check_bool_value)
                float_value=draw(st.sampled_from([0.0, 1.0]) if dtype == "bool" else st.floats(width=32)), threads=draw(st.sampled_from([1, 2, 7])))


@given(call=padding_calls(), data=st.data())
def test_fuzz_matches_reference(call, data):
    x, start, end, mode, form = call["x"], call["start"], call["end"], call["mode"], call["form"]
    value = call["value"] if form != "PaddingDesc" else call["float_value"]
    if form == "PaddingDesc":
        expected = pad_reference(x, start, end, mode, padding_float_value(value, x.dtype))
    else:
        expected = pad_reference(x, start, end, mode, value)
    out = data.draw(outs(expected.shape, x.dtype))
    dmlops.set_num_threads(call["threads"])
    kw = kwargs_source(start_padding=start, end_padding=end, padding_mode=mode, padding_value=value)
    if form == "pad":
        show_call(f"dmlops.pad(x, {start}, {end}, mode={mode!r}, value={value!r}, out=out)", x=x, out=out)
        run = lambda: dmlops.pad(x, start, end, mode=mode, value=value, out=out)
    else:
        cls = getattr(dmlops, form)
        show_call(f"dmlops.{form}(dmlops.TensorDesc.from_array(x), {kw})(x, out=out)", x=x, out=out)
        run = lambda: cls(dmlops.TensorDesc.from_array(x), start_padding=start, end_padding=end, padding_mode=mode,
                          padding_value=value)(x, out=out)
    assert_same_bits(run_and_check_inputs(run, out, x), expected)


def test_padding_v1_value_too_large():
    with pytest.raises(ValueError, match="too large for a FLOAT|FLOAT"):
        dmlops.PaddingDesc(dmlops.TensorDesc("float32", (2,)), start_padding=(1,), end_padding=(1,), padding_value=1e300)


VALID_PADDING = dict(input=dmlops.TensorDesc("float32", (2, 3)), start_padding=(0, 1), end_padding=(2, 0),
                     padding_mode="reflection", padding_value=1.5)
PLAUSIBLY_WRONG = dict(input=[dmlops.TensorDesc("int8", (2,)), dmlops.TensorDesc("float16", (2**40, 2**20))],
                       output=[dmlops.TensorDesc("float32", (4, 4)), dmlops.TensorDesc("float32", (2, 3), (3, 1)),
                               dmlops.TensorDesc("float32", (4, 4), (0, 0))],
                       start_padding=[(2**62, 0), (0, -1), (0,), (0, 2**48)],
                       padding_value=[2**64, -2**63 - 1, float("nan"), 1e39, np.float64(3.5), 300])


@pytest.mark.parametrize("cls", [dmlops.Padding1Desc, dmlops.PaddingDesc])
@given(data=st.data())
@garbage_settings
def test_fuzz_garbage_descriptors(cls, data):
    """Garbage in any field of the constructor or of from_dict: ValueError or TypeError, never
    another exception, never a crash."""
    fuzz_garbage(data, cls, VALID_PADDING, PLAUSIBLY_WRONG, dmlops.pad, (np.zeros((2, 3)),),
                 dict(start_padding=(1, 0), end_padding=(0, 2), mode="wrap", value=0),
                 dict(start_padding=[(2**40, 0), (0, 2**62)], value=[2**70, 0.5]))


def test_hostile_inputs_are_rejected():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    desc = dmlops.Padding1Desc(dmlops.TensorDesc("float32", (2, 3)), start_padding=(1, 1), end_padding=(0, 0))
    check_hostile_inputs(lambda bad: dmlops.pad(bad, (1, 1), (0, 0)), x)
    check_hostile_inputs(desc, x)


@pytest.mark.parametrize("dtype", ["float32", "uint8", "bool", "int64"])
def test_bad_outs_are_rejected_and_left_untouched(dtype):
    x = np.ones((2, 3), dtype)
    check_bad_outs(lambda out: dmlops.pad(x, (1, 1), (0, 0), out=out), x, (3, 4), dtype)
    check_bad_outs(lambda out: dmlops.pad(x, (0, 0), (0, 0), out=out), x, (2, 3), dtype)
    check_bad_outs(lambda out: dmlops.PaddingDesc(dmlops.TensorDesc.from_array(x), start_padding=(0, 1),
                                                  end_padding=(0, 0))(x, out=out), x, (2, 4), dtype)
    # the output desc of a descriptor must agree with the rule
    with pytest.raises(ValueError, match="output"):
        dmlops.Padding1Desc(dmlops.TensorDesc("float32", (2, 3)), start_padding=(1, 1), end_padding=(0, 0),
                            output=dmlops.TensorDesc("float32", (3, 3)))


@pytest.mark.parametrize("start,end", [((0, 2**40), (0, 0)), ((2**20, 2**20), (2**20, 2**20)), ((0, 2**46), (0, 2**46))])
def test_gigantic_paddings_are_rejected_before_allocating(start, end):
    """Outputs of terabytes: a ValueError naming the operator, without trying to allocate them."""
    with pytest.raises(ValueError, match="Padding1: .*(bytes|memory)"):
        dmlops.pad(np.zeros((2, 3), np.float32), start, end)


@pytest.mark.parametrize("sizes", [(2**32, 2**32), (2**31, 2**31, 4), (2**16,) * 4 + (2,)])
def test_size_products_that_overflow_64_bits_are_rejected(sizes):
    with pytest.raises(ValueError, match="elements|bytes"):
        dmlops.Padding1Desc(dmlops.TensorDesc("float64", sizes), start_padding=(0,) * len(sizes),
                            end_padding=(0,) * len(sizes))
