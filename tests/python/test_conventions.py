"""numpy conventions across every operator: array_like inputs (lists, scalars, __array__, the
buffer protocol, DLPack, PyTorch tensors) read without a copy, out= written in place, masked
arrays refused, scalar-or-sequence per-axis arguments, spatial-only resampling arguments,
other libraries' keywords and shapes named in errors, and messages that say what the user
passed (bool, tuples, the result rather than a descriptor)."""

from __future__ import annotations

import array

import numpy as np
import pytest

import dmlops
from dmlops._args import as_array

X4 = np.arange(2 * 3 * 6 * 5, dtype=np.float32).reshape(2, 3, 6, 5) / 7
W4 = (np.arange(4 * 3 * 3 * 2, dtype=np.float32).reshape(4, 3, 3, 2) - 30) / 11
C9 = np.arange(2 * 9 * 9, dtype=np.float32).reshape(2, 9, 9) / 3  # columns of a 3x3 window over 3x3 blocks

# Every operator function with a float32 input, as (name, input, call(x, **kwargs)).
OPERATORS = [
    ("pad", X4, lambda x, **kw: dmlops.pad(x, (0, 0, 1, 2), (0, 1, 0, 3), "reflection", **kw)),
    ("convolution", X4, lambda x, **kw: dmlops.convolution(x, W4, strides=(2, 1), start_padding=(1, 0), **kw)),
    ("lp_pooling", X4, lambda x, **kw: dmlops.lp_pooling(x, (2, 3), strides=(2, 1), **kw)),
    ("unfold", X4, lambda x, **kw: dmlops.unfold(x, (2, 2), dilations=(2, 1), **kw)),
    ("upsample_2d", X4, lambda x, **kw: dmlops.upsample_2d(x, (2, 3), "linear", **kw)),
    ("resample", X4, lambda x, **kw: dmlops.resample(x, (1, 1, 1.5, 0.5), "linear", **kw)),
    ("fold", X4.reshape(2, 9, 10), lambda x, **kw: dmlops.fold(x, (4, 7), (3, 3), **kw)),
]
OPERATOR_IDS = [name for name, _, _ in OPERATORS]


class DLPackOnly:
    """A tensor of another library, as dmlops sees it: only __dlpack__ / __dlpack_device__
    (no __array__, no buffer protocol), over a numpy array's memory."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class OnDevice(DLPackOnly):
    """A DLPack exporter on a CUDA device (kDLCUDA = 2)."""

    def __dlpack_device__(self):
        return (2, 0)


class ArrayInterface:
    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


@pytest.mark.parametrize("name,x,call", OPERATORS, ids=OPERATOR_IDS)
def test_array_likes_give_the_ndarray_result(name, x, call):
    expected = call(x)
    as_float64 = call(x.astype(np.float64)) if name != "convolution" else None  # lists convert to float64
    for converted in (x.tolist(), tuple(x.tolist())):
        if as_float64 is None:
            with pytest.raises(TypeError, match="filter has dtype float32 but the input is float64"):
                call(converted)
        else:
            np.testing.assert_array_equal(call(converted), as_float64)
    for converted in (ArrayInterface(x), DLPackOnly(x), memoryview(x)):
        result = call(converted)
        assert type(result) is np.ndarray and result.dtype == expected.dtype
        np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("name,x,call", OPERATORS, ids=OPERATOR_IDS)
def test_results_start_on_a_cache_line_and_behave_as_arrays_of_their_own(name, x, call):
    # numpy's allocations start 16 bytes into a cache line; dmlops' results start on one, so that
    # their rows' vector stores do not split across lines. Each is writable, C-contiguous and
    # keeps its memory alive on its own.
    results = [call(x) for _ in range(8)]
    expected = results[0].copy()
    for result in results:
        assert result.ctypes.data % 64 == 0
        assert result.flags.c_contiguous and result.flags.writeable and result.flags.aligned
        np.testing.assert_array_equal(result, expected)
    result = results.pop()
    del results
    np.ones(10**6)  # reuse freed memory, if any was freed too soon
    np.testing.assert_array_equal(result, expected)
    result[...] = 0
    assert not result.any()


def test_large_results_reuse_freed_memory_until_released():
    # 8 MiB and up: the memory of a freed result goes to the next result of about its size, never
    # to one while any view of the old result lives, and release_memory() frees it.
    dmlops.release_memory()
    x = np.arange(1_200_000, dtype=np.float64)
    expected = np.pad(x, (10, 20), mode="reflect")
    first = dmlops.pad(x, 10, 20, "reflection")
    address, nbytes = first.ctypes.data, first.nbytes
    assert nbytes >= 8 << 20 and address % 64 == 0
    del first
    reused = dmlops.pad(x, 10, 20, "reflection")
    assert reused.ctypes.data == address
    np.testing.assert_array_equal(reused, expected)
    view = reused[5:9]
    del reused
    others = [dmlops.pad(x, 10, 20, "reflection") for _ in range(3)]
    assert all(not np.shares_memory(view, other) for other in others)
    assert len({other.ctypes.data for other in others}) == 3
    np.testing.assert_array_equal(view, expected[5:9])
    for other in others:
        np.testing.assert_array_equal(other, expected)
    del others, other
    assert dmlops.release_memory() >= 3 * nbytes
    assert dmlops.release_memory() == 0
    del view
    assert dmlops.release_memory() == nbytes  # the last view freed its block into the cache


def test_lists_and_scalars_convert_as_np_asarray_does():
    np.testing.assert_array_equal(dmlops.pad([1, 2, 3], 1, 2), [0, 1, 2, 3, 0, 0])  # int64, as np.asarray
    assert dmlops.pad([1.5, 2], 1, 0).dtype == np.float64
    assert dmlops.pad([True, False], 1, 1, value=True).tolist() == [True, True, False, True]
    with pytest.raises(ValueError, match="Padding1: input has 0 dimensions"):
        dmlops.pad(3, (), ())
    with pytest.raises(ValueError, match="Padding1: input is not an array: .*inhomogeneous"):
        dmlops.pad([[1, 2], [3]], 1, 1)
    with pytest.raises(TypeError, match="Padding1: input must be array_like, not None"):
        dmlops.pad(None, 1, 1)
    with pytest.raises(TypeError, match="Padding1: input has dtype <U1"):
        dmlops.pad(["a"], 1, 1)


def test_dlpack_and_buffer_inputs_are_read_without_a_copy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for exported in (DLPackOnly(x), memoryview(x)):
        assert np.shares_memory(as_array(exported, "x"), x)
        # the same memory as input and output: refused, which only happens when nothing was copied
        with pytest.raises(ValueError, match="Padding1: out shares memory with an input"):
            dmlops.pad(exported, 0, 0, out=x)
    signal = array.array("h", [1, -2, 3])
    assert np.shares_memory(as_array(signal, "x"), np.frombuffer(signal, np.int16))
    np.testing.assert_array_equal(dmlops.pad(signal, 1, 1, "edge"), np.array([1, 1, -2, 3, 3], np.int16))


def test_out_may_be_a_dlpack_or_buffer_tensor_and_is_written_in_place():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = dmlops.pad(x, 1, 1, "wrap")
    target = np.zeros((4, 5), np.float32)
    result = dmlops.pad(x, 1, 1, "wrap", out=DLPackOnly(target))
    np.testing.assert_array_equal(target, expected)
    assert type(result) is np.ndarray and np.shares_memory(result, target)
    raw = bytearray(5)
    result = dmlops.pad(np.array([7, 8, 9], np.uint8), 1, 1, value=1, out=raw)
    assert raw == bytearray([1, 7, 8, 9, 1]) and np.shares_memory(result, np.frombuffer(raw, np.uint8))
    with pytest.raises(ValueError, match="Padding1: out is read-only"):
        dmlops.pad(np.array([7, 8, 9], np.uint8), 1, 1, out=bytes(5))


@pytest.mark.parametrize("bad,message", [
    ([0.0] * 20, "out must be an array to write in place .* not list"),
    (3.0, "out must be an array to write in place .* not float"),
    (ArrayInterface(np.zeros((4, 5), np.float32)), "out must be an array to write in place"),
    (np.ma.zeros((4, 5), np.float32), "out is a masked array"),
])
def test_out_that_cannot_be_written_in_place_is_a_type_error(bad, message):
    with pytest.raises(TypeError, match=f"Padding1: {message}"):
        dmlops.pad(np.zeros((2, 3), np.float32), 1, 1, out=bad)


def test_a_tensor_on_another_device_is_a_type_error():
    with pytest.raises(TypeError, match=r"Padding1: input: a OnDevice on DLPack device \(2, 0\) is not in CPU memory"):
        dmlops.pad(OnDevice(np.zeros(3)), 1, 1)


@pytest.mark.parametrize("name,x,call", OPERATORS, ids=OPERATOR_IDS)
def test_masked_arrays_are_refused(name, x, call):
    with pytest.raises(TypeError, match="input is a masked array"):
        call(np.ma.masked_less(x, 1.0))
    with pytest.raises(TypeError, match="out is a masked array"):
        call(x, out=np.ma.array(call(x)))


def test_masked_arrays_are_refused_by_descriptors_and_every_input():
    d = dmlops.Padding1Desc(dmlops.TensorDesc("float32", (2, 3)), start_padding=1, end_padding=0)
    with pytest.raises(TypeError, match="Padding1: input is a masked array"):
        d(np.ma.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="Convolution: filter is a masked array"):
        dmlops.convolution(X4, np.ma.array(W4))
    with pytest.raises(TypeError, match="Convolution: bias is a masked array"):
        dmlops.convolution(X4, W4, np.ma.zeros(4, np.float32))


# --- torch: a real DLPack exporter (the test extra installs it) -------------------------------


def test_torch_tensors_in_and_out_share_memory():
    torch = pytest.importorskip("torch", reason="torch (installed by the test extra) cannot be imported")

    for name, array, call in OPERATORS:
        result = call(torch.from_numpy(array))
        assert type(result) is np.ndarray, name
        np.testing.assert_array_equal(result, call(array), err_msg=name)
    x = torch.from_numpy(X4.copy())
    # no copy: the tensor's own memory, and out= tensors written in place
    assert as_array(x, "x").__array_interface__["data"][0] == x.data_ptr()
    with pytest.raises(ValueError, match="out shares memory with an input"):
        dmlops.pad(x, 0, 0, out=x)
    target = torch.zeros(2, 3, 7, 9)
    result = dmlops.pad(x, (0, 0, 1, 0), (0, 0, 0, 4), "symmetric", out=target)
    np.testing.assert_array_equal(target.numpy(), dmlops.pad(x.numpy(), (0, 0, 1, 0), (0, 0, 0, 4), "symmetric"))
    assert result.__array_interface__["data"][0] == target.data_ptr()
    # the PyTorch idioms: a (OutC,) bias, scale_factor as scales, and what numpy cannot read
    w, b = torch.from_numpy(W4), torch.arange(4, dtype=torch.float32)
    np.testing.assert_allclose(dmlops.convolution(x, w, b, start_padding=1, end_padding=1),
                               torch.nn.functional.conv2d(x, w, b, padding=1).numpy(), rtol=1e-5, atol=1e-5)
    # torch computes the coordinates in float32, dmlops in float64: the last bits may differ
    np.testing.assert_allclose(dmlops.resample(x, 2, "linear"),
                               torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear").numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="Padding1: input: a Tensor is read through DLPack"):
        dmlops.pad(x.requires_grad_(), 1, 1)
    with pytest.raises(TypeError, match="Padding1: input: a Tensor is read through DLPack"):
        dmlops.pad(torch.zeros(3, dtype=torch.bfloat16), 1, 1)


# --- scalar-or-sequence ------------------------------------------------------------------------


@pytest.mark.parametrize("scalar_call,sequence_call", [
    (lambda x: dmlops.pad(x, 1, 2), lambda x: dmlops.pad(x, (1,) * 4, (2,) * 4)),
    (lambda x: dmlops.convolution(x, W4, strides=2, dilations=2, start_padding=1, end_padding=2),
     lambda x: dmlops.convolution(x, W4, strides=(2, 2), dilations=(2, 2), start_padding=(1, 1), end_padding=(2, 2))),
    (lambda x: dmlops.convolution(x, W4.transpose(1, 0, 2, 3).copy(), direction="backward", strides=2,
                                  output_padding=1, output_sizes=12),
     lambda x: dmlops.convolution(x, W4.transpose(1, 0, 2, 3).copy(), direction="backward", strides=(2, 2),
                                  output_padding=(1, 1), output_sizes=(12, 12))),
    (lambda x: dmlops.lp_pooling(x, 2, strides=2, dilations=2, start_padding=1, end_padding=1),
     lambda x: dmlops.lp_pooling(x, (2, 2), strides=(2, 2), dilations=(2, 2), start_padding=(1, 1),
                                 end_padding=(1, 1))),
    (lambda x: dmlops.unfold(x, 3, strides=2, dilations=1, start_padding=1, end_padding=1),
     lambda x: dmlops.unfold(x, (3, 3), strides=(2, 2), dilations=(1, 1), start_padding=(1, 1), end_padding=(1, 1))),
    (lambda x: dmlops.fold(C9, 4, (3, 3), strides=1, end_padding=1),
     lambda x: dmlops.fold(C9, (4, 4), (3, 3), strides=(1, 1), end_padding=(1, 1))),
    (lambda x: dmlops.fold(C9, (4, 4), 3, start_padding=1),
     lambda x: dmlops.fold(C9, (4, 4), (3, 3), start_padding=(1, 1))),
    (lambda x: dmlops.upsample_2d(x, 3), lambda x: dmlops.upsample_2d(x, (3, 3))),
    (lambda x: dmlops.resample(x, 2, input_pixel_offsets=0, output_pixel_offsets=0),
     lambda x: dmlops.resample(x, (1, 1, 2, 2), input_pixel_offsets=(0.5, 0.5, 0, 0),
                               output_pixel_offsets=(-0.5, -0.5, 0, 0))),
    (lambda x: dmlops.resample(x, (2, 0.5), "linear"), lambda x: dmlops.resample(x, (1, 1, 2, 0.5), "linear")),
    (lambda x: dmlops.resample(x, output_sizes=(9, 4)),
     lambda x: dmlops.resample(x, (1, 1, 9 / 6, 4 / 5), output_sizes=(2, 3, 9, 4))),
    (lambda x: dmlops.resample(x, output_sizes=8), lambda x: dmlops.resample(x, (1, 1, 8 / 6, 8 / 5),
                                                                             output_sizes=(2, 3, 8, 8))),
], ids=["pad", "convolution", "convolution-backward", "lp_pooling", "unfold", "fold-sizes", "fold-window",
        "upsample_2d", "resample-offsets", "resample-spatial", "resample-sizes", "resample-int-size"])
def test_an_int_or_spatial_entries_stand_for_every_spatial_axis(scalar_call, sequence_call):
    np.testing.assert_array_equal(scalar_call(X4), sequence_call(X4))


def test_descriptors_take_scalars_and_store_directml_fields():
    t = dmlops.TensorDesc("float32", X4.shape)
    d = dmlops.LpPooling1Desc(t, window_size=2, strides=2, dilations=1, start_padding=0, end_padding=1)
    assert (d.window_size, d.strides, d.end_padding) == ((2, 2), (2, 2), (1, 1))
    assert d.to_dict()["WindowSize"] == [2, 2]
    assert dmlops.Padding1Desc(t, start_padding=1, end_padding=0).start_padding == (1, 1, 1, 1)
    c = dmlops.ConvolutionDesc(t, dmlops.TensorDesc("float32", W4.shape), strides=2, start_padding=1)
    assert (c.strides, c.start_padding, c.end_padding) == ((2, 2), (1, 1), (0, 0))
    u = dmlops.UnfoldDesc(t, window_sizes=2, dilations=2)
    assert (u.window_sizes, u.dilations) == ((2, 2), (2, 2))
    f = dmlops.FoldDesc(u.output, t, window_sizes=2, dilations=2)
    assert f.window_sizes == (2, 2)
    np.testing.assert_array_equal(u(DLPackOnly(X4)), dmlops.unfold(X4, (2, 2), dilations=(2, 2)))


@pytest.mark.parametrize("call,error,message", [
    (lambda: dmlops.resample(np.zeros(4), 2), ValueError,
     "Resample: scales: a single value is for the spatial axes .* x has 1 dimension; give one entry per axis"),
    (lambda: dmlops.resample(X4, (1, 2, 3)), ValueError, r"Resample: scales has 3 entries; x has 4 dimensions: "
                                                        r"give 4 \(every axis\) or 2 \(the spatial axes\)"),
    (lambda: dmlops.resample(X4, 2, output_sizes=(1, 2, 3)), ValueError, "output_sizes has 3 entries"),
    (lambda: dmlops.resample(X4, 2, input_pixel_offsets=(0,)), ValueError, "input_pixel_offsets has 1 entries"),
    (lambda: dmlops.resample(X4), TypeError, "Resample: give scales or output_sizes"),
    (lambda: dmlops.resample(X4, output_sizes=2.5), TypeError, "output_sizes must be an integer"),
    (lambda: dmlops.fold(C9, 4, 3), TypeError, "output_sizes and window_sizes are both ints"),
    (lambda: dmlops.pad(X4, 1.0, 1), TypeError, "start_padding must be a sequence of integers, not float"),
    (lambda: dmlops.pad(X4, True, 1), TypeError, "start_padding must be a sequence of integers, not bool"),
    (lambda: dmlops.lp_pooling(X4, -1), ValueError, "window_size"),
    (lambda: dmlops.convolution(X4, W4, strides=(1, 1, 1)), ValueError, "strides"),
])
def test_per_axis_argument_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- other libraries' names, shapes and orders -------------------------------------------------


@pytest.mark.parametrize("call,foreign,meaning", [
    (lambda **kw: dmlops.pad(X4, 1, 1, **kw), "pad_width", "start_padding and end_padding"),
    (lambda **kw: dmlops.pad(X4, 1, 1, **kw), "padding", "start_padding and end_padding"),
    (lambda **kw: dmlops.pad(X4, 1, 1, **kw), "constant_values", "is value"),
    (lambda **kw: dmlops.convolution(X4, W4, **kw), "padding", "start_padding=p, end_padding=p"),
    (lambda **kw: dmlops.convolution(X4, W4, **kw), "stride", "is strides"),
    (lambda **kw: dmlops.convolution(X4, W4, **kw), "dilation", "is dilations"),
    (lambda **kw: dmlops.convolution(X4, W4, **kw), "groups", "is group_count"),
    (lambda **kw: dmlops.convolution(X4, W4, **kw), "kernel_size", "the filter's shape"),
    (lambda **kw: dmlops.lp_pooling(X4, 2, **kw), "kernel_size", "is window_size"),
    (lambda **kw: dmlops.lp_pooling(X4, 2, **kw), "norm_type", "is p"),
    (lambda **kw: dmlops.lp_pooling(X4, 2, **kw), "stride", "is strides"),
    (lambda **kw: dmlops.unfold(X4, 2, **kw), "kernel_size", "is window_sizes"),
    (lambda **kw: dmlops.unfold(X4, 2, **kw), "padding", "start_padding=p, end_padding=p"),
    (lambda **kw: dmlops.fold(C9, (4, 4), 3, end_padding=1, **kw), "output_size", "is output_sizes"),
    (lambda **kw: dmlops.upsample_2d(X4, 2, **kw), "scale_factor", "is scale_size"),
    (lambda **kw: dmlops.upsample_2d(X4, 2, **kw), "size", "resample"),
    (lambda **kw: dmlops.resample(X4, 2, **kw), "scale_factor", "is scales"),
    (lambda **kw: dmlops.resample(X4, 2, **kw), "size", "is output_sizes"),
    (lambda **kw: dmlops.resample(X4, 2, **kw), "mode", "is interpolation_mode"),
    (lambda **kw: dmlops.resample(X4, 2, **kw), "align_corners", "input_pixel_offsets=0"),
    (lambda **kw: dmlops.resample(X4, 2, **kw), "antialias", "is antialiased"),
])
def test_other_libraries_keywords_name_the_dmlops_argument(call, foreign, meaning):
    with pytest.raises(TypeError, match=rf"\(\) has no argument '{foreign}'; .*{meaning}"):
        call(**{foreign: 1})


def test_an_unknown_keyword_is_still_pythons_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        dmlops.pad(X4, 1, 1, colour=1)


def test_a_pytorch_bias_is_read_as_directml_s():
    b = np.array([0.5, -1, 2, 3], np.float32)
    expected = dmlops.convolution(X4, W4, b.reshape(1, 4, 1, 1), start_padding=1)
    np.testing.assert_array_equal(dmlops.convolution(X4, W4, b, start_padding=1), expected)
    np.testing.assert_array_equal(dmlops.convolution(X4, W4, b[::-1].copy()[::-1], start_padding=1), expected)
    d = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", X4.shape), dmlops.TensorDesc("float32", W4.shape),
                               dmlops.TensorDesc("float32", (1, 4, 1, 1)), start_padding=1)
    np.testing.assert_array_equal(d(X4, W4, b), expected)
    with pytest.raises(ValueError, match=r"bias has shape \(5,\) but there are 4 output channels: "
                                         r"it must be \(4,\) or \(1, 4, 1, 1\)"):
        dmlops.convolution(X4, W4, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"bias has sizes \(1, 5, 1, 1\) but it must be \(1, 4, 1, 1\)"):
        dmlops.convolution(X4, W4, np.zeros((1, 5, 1, 1), np.float32))
    with pytest.raises(ValueError, match=r"bias has shape \(3,\) but there are 4 output channels"):
        d(X4, W4, np.zeros(3, np.float32))


def test_swapped_input_and_filter_are_named():
    with pytest.raises(ValueError, match=r"the filter \(2, 3, 6, 5\) is spatially larger than the input "
                                         r"\(4, 3, 3, 2\): are they swapped\? the order is \(x, filter\)"):
        dmlops.convolution(W4, X4)
    with pytest.raises(ValueError, match="are they swapped"):
        dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", W4.shape), dmlops.TensorDesc("float32", X4.shape))
    with pytest.raises(ValueError) as error:  # a kernel too large for a larger input is no swap
        dmlops.convolution(X4[:, :, :2, :2], W4)
    assert "swapped" not in str(error.value)


# --- messages say what the user passed ---------------------------------------------------------


@pytest.mark.parametrize("call,message", [
    (lambda b: dmlops.lp_pooling(b, 2), "LpPooling1: input has dtype bool; supported: float32"),
    (lambda b: dmlops.convolution(b, W4), "Convolution: input has dtype bool; convolution supports"),
    (lambda b: dmlops.resample(b, 2, "linear"), "Resample: linear interpolation needs float16, float32 or float64, "
                                                "not bool"),
    (lambda b: dmlops.upsample_2d(b, 2, "linear"), "Upsample2D: linear interpolation needs .* not bool"),
])
def test_a_bool_array_is_called_bool(call, message):
    with pytest.raises(TypeError, match=message):
        call(X4 > 1)


def test_out_errors_speak_of_the_result_and_shapes_print_as_tuples():
    with pytest.raises(ValueError, match=r"^Padding1: out has shape \(4, 4\) but the result has \(4, 5\)$"):
        dmlops.pad(np.zeros((2, 3), np.float32), 1, 1, out=np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"Unfold: out has shape \(7,\) but the result has \(2, 12, 20\)"):
        dmlops.unfold(X4, 2, out=np.zeros(7, np.float32))
    with pytest.raises(ValueError, match=r"output has sizes \(1, 1, 4, 7\) but the input sizes x scale_size are "
                                         r"\(1, 1, 4, 6\)"):
        dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 3)), scale_size=2,
                              output=dmlops.TensorDesc("float32", (1, 1, 4, 7)))


@pytest.mark.parametrize("dtype", ["f4,(", "2(", "f4,(99999999999999999999,)", "(" * 5000 + "f4", "bogus", "i4,i4"])
def test_tensor_desc_dtype_strings_numpy_cannot_read_are_type_errors(dtype):
    """numpy reads a dtype string with a comma as a record layout, and its parser raises what it
    meets (a SyntaxError from ast.literal_eval for 'f4,('; found by the from_dict fuzz target):
    each is a TypeError naming the field."""
    with pytest.raises(TypeError, match="TensorDesc: dtype"):
        dmlops.TensorDesc(dtype, (2,))
    with pytest.raises(TypeError, match="TensorDesc: dtype"):
        dmlops.TensorDesc.from_dict({"DataType": dtype, "Sizes": [2]})


@pytest.mark.parametrize("name", ["float", "FLOAT", "Float"])
def test_tensor_desc_float_is_ambiguous(name):
    with pytest.raises(TypeError, match="is ambiguous: numpy's float is float64, DirectML's FLOAT is float32"):
        dmlops.TensorDesc(name, (1,))
    assert dmlops.TensorDesc(float, (1,)).dtype == "float64"  # the Python type is numpy's, unambiguously
    assert dmlops.TensorDesc.from_array([[1.0, 2.0]]) == dmlops.TensorDesc("float64", (1, 2))
