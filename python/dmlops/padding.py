"""Padding: ``dmlops.pad``, ``Padding1Desc`` (DML_PADDING1_OPERATOR_DESC) and ``PaddingDesc``
(DML_PADDING_OPERATOR_DESC). The full semantics:
docs/semantics/padding.md.

Mode names follow DirectML, which differ from other libraries' (the naming trap):

==============  =========================  =================  ===================
DirectML        pads ``a b c d`` by 2      numpy ``np.pad``   PyTorch ``F.pad``
==============  =========================  =================  ===================
``reflection``  ``c b | a b c d | c b``    ``reflect``        ``reflect``
``symmetric``   ``b a | a b c d | d c``    ``symmetric``      (none)
``edge``        ``a a | a b c d | d d``    ``edge``           ``replicate``
``wrap``        ``c d | a b c d | a b``    ``wrap``           ``circular``
==============  =========================  =================  ===================

Unlike numpy and PyTorch, paddings may be larger than the input in every mode: reflection and
symmetric fold back and forth periodically, wrap repeats.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from . import _core
from ._args import Enum, as_array, check_bool_value, check_out, keyword_hints, number, per_axis, real
from ._descriptor import Descriptor, Field
from ._plan import Plan
from ._tensor import TensorDesc, tensor_spec

PADDING_MODE = Enum(
    "PADDING_MODE",
    ("constant", "edge", "reflection", "symmetric", "wrap"),
    hints={
        "reflect": "numpy's and PyTorch's 'reflect' is 'reflection'; scipy.ndimage's 'reflect' is 'symmetric'",
        "mirror": "scipy.ndimage's 'mirror' is 'reflection'",
        "replicate": "PyTorch's 'replicate' is 'edge'",
        "nearest": "scipy.ndimage's 'nearest' is 'edge'",
        "circular": "PyTorch's 'circular' is 'wrap'",
    },
)


_Paddings = Union[int, Sequence[int]]


def _value_from_bits(bits: int, dtype: str) -> Any:
    """The padding value exactly as the kernel will write it."""
    raw = int(bits).to_bytes(8, "little")[: np.dtype(dtype).itemsize]
    return np.frombuffer(raw, dtype=dtype)[0].item()


class _PaddingDescriptor(Descriptor):
    EXACT_VALUE: bool  # PADDING1: value must be representable; PADDING: FLOAT, saturated
    padding_mode: str
    padding_value: Any
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    def __init__(self, input: TensorDesc, *, start_padding: _Paddings, end_padding: _Paddings,
                 padding_mode: str = "constant", padding_value: Any = 0, output: Optional[TensorDesc] = None):
        op = self.NAME
        if not isinstance(input, TensorDesc):
            raise TypeError(f"{op}: input must be a dmlops.TensorDesc, not {type(input).__name__}")
        if output is not None and not isinstance(output, TensorDesc):
            raise TypeError(f"{op}: output must be a dmlops.TensorDesc, not {type(output).__name__}")
        mode = PADDING_MODE.parse(padding_mode, f"{op}: padding_mode")
        start = per_axis(start_padding, input.rank, f"{op}: start_padding")
        end = per_axis(end_padding, input.rank, f"{op}: end_padding")
        value = self._value_arg(padding_value)
        out_spec = None if output is None else (output.dtype, output.sizes, output.strides)
        sizes, bits = _core.padding_infer(op, (input.dtype, input.sizes, input.strides), out_spec, mode,
                                          start, end, value, self.EXACT_VALUE)
        self._values = {
            "input": input,
            "output": output if output is not None else TensorDesc(input.dtype, sizes),
            "padding_mode": mode,
            "padding_value": self._canonical_value(value, bits, input.dtype),
            "start_padding": start,
            "end_padding": end,
        }

    def _value_arg(self, value: Any) -> Any:
        return number(value, f"{self.NAME}: padding_value")

    def _canonical_value(self, value: Any, bits: int, dtype: str) -> Any:
        return _value_from_bits(bits, dtype)

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Pad ``x`` (an array_like matching ``input``: same dtype, bool allowed for uint8, same
        shape; any strides). Returns a new C-contiguous array, or ``out`` filled in place."""
        op = self.NAME
        x = self._input_array(x)
        check_bool_value(x, self.padding_value, f"{op}: padding_value")
        result = check_out(out, x.dtype, f"{op}: out")
        return _core.padding(op, x, result, self.padding_mode, self.start_padding, self.end_padding,
                             self.padding_value, self.EXACT_VALUE)

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): ``copy`` when nothing is padded,
        ``gather`` otherwise (each output row as runs: the interior one copy, reflected borders
        mirrored or gathered), with its rows, runs, tasks and threads. The same code sets up the
        calls, so the plan is what they do on arrays laid out as ``input`` and ``output`` say.

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        return Plan._of(_core.padding_plan(self.NAME, tensor_spec(self.input), tensor_spec(self.output),
                                           self.padding_mode, self.start_padding, self.end_padding,
                                           self.padding_value, self.EXACT_VALUE))


class Padding1Desc(_PaddingDescriptor):
    """DML_PADDING1_OPERATOR_DESC: pads a tensor of 1 to 8 dimensions (see :func:`pad`).

    Parameters
    ----------
    input : TensorDesc
        The input tensor (any of the 11 DirectML dtypes; bool arrays run where it is uint8).
    start_padding, end_padding : int or sequence of int
        Elements added before / after each dimension (>= 0, any size); an int pads every
        dimension by that much.
    padding_mode : str
        ``'constant'``, ``'edge'``, ``'reflection'``, ``'symmetric'`` or ``'wrap'`` (or the
        DirectML name ``'DML_PADDING_MODE_WRAP'``); see :func:`pad` for what each does.
    padding_value : int, float or bool
        Written by constant mode; must be representable in the input's dtype (300 into uint8
        or 0.5 into int32 is a ValueError), exact for 64-bit integers. Stored as the exact value
        the kernel writes (a float16 value rounded to float16).
    output : TensorDesc, optional
        Checked against the inferred output when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or a field has the wrong type.
    ValueError
        A rule of the operator is broken (padding lengths, negative paddings, an unknown mode,
        an unrepresentable value, an ``output`` that does not match); the message names the
        field.

    Notes
    -----
    Calling the descriptor, ``d(x, out=None)``, runs it on an array matching ``input`` (same
    dtype, bool allowed for uint8, same shape, any strides). ``d.to_dict()`` gives DxDispatch
    JSON (``PaddingValue`` is written with its ``PaddingValueDataType``); ``from_dict``, ``==``,
    ``hash`` and pickling use every field.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Padding1Desc(dmlops.TensorDesc("float32", (1, 1, 4, 4)), padding_mode="symmetric",
    ...                         start_padding=(0, 0, 1, 2), end_padding=(0, 0, 3, 4))
    >>> d.output.sizes
    (1, 1, 8, 10)
    >>> d(np.zeros((1, 1, 4, 4), np.float32)).shape
    (1, 1, 8, 10)
    >>> d.to_dict()["PaddingMode"]
    'DML_PADDING_MODE_SYMMETRIC'
    >>> dmlops.Padding1Desc.from_dict(d.to_dict()) == d
    True
    """

    NAME = "Padding1"
    OPERATOR = "PADDING1"
    EXACT_VALUE = True
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("padding_mode", "PaddingMode", "enum", PADDING_MODE),
        Field("padding_value", "PaddingValue", "scalar"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
    )


class PaddingDesc(_PaddingDescriptor):
    """DML_PADDING_OPERATOR_DESC: as :class:`Padding1Desc`, but ``padding_value`` is a FLOAT.

    Parameters
    ----------
    input : TensorDesc
        The input tensor (any of the 11 DirectML dtypes).
    start_padding, end_padding : int or sequence of int
        Elements added before / after each dimension (>= 0, any size); an int pads every
        dimension by that much.
    padding_mode : str
        ``'constant'``, ``'edge'``, ``'reflection'``, ``'symmetric'`` or ``'wrap'``.
    padding_value : float
        Rounded to float32 (DirectML's FLOAT). Into integer tensors it is truncated toward zero
        and saturated to the dtype's range; NaN becomes 0.
    output : TensorDesc, optional
        Checked against the inferred output when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or a field has the wrong type.
    ValueError
        A rule of the operator is broken; the message names the field.

    Notes
    -----
    The saturating conversion is a dmlops decision (DirectML leaves it unspecified); prefer
    :class:`Padding1Desc`, whose value has the tensor's own type.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.PaddingDesc(dmlops.TensorDesc("uint8", (3,)), start_padding=(1,), end_padding=(2,),
    ...                        padding_value=-7.9)
    >>> d(np.array([1, 2, 3], np.uint8))
    array([0, 1, 2, 3, 0, 0], dtype=uint8)
    >>> dmlops.PaddingDesc(dmlops.TensorDesc("int8", (1,)), start_padding=(1,), end_padding=(0,),
    ...                    padding_value=1000.0)(np.array([5], np.int8))
    array([127,   5], dtype=int8)
    """

    NAME = "Padding"
    OPERATOR = "PADDING"
    EXACT_VALUE = False
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("padding_mode", "PaddingMode", "enum", PADDING_MODE),
        Field("padding_value", "PaddingValue", "float"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
    )

    def _value_arg(self, value: Any) -> Any:
        return real(value, f"{self.NAME}: padding_value")

    def _canonical_value(self, value: Any, bits: int, dtype: str) -> Any:
        return float(np.float32(value))


_PAD_WIDTH = "dmlops pads with start_padding and end_padding, each an int or one entry per axis in axis order"


@keyword_hints("Padding1", {
    "pad_width": f"numpy's pad_width is {_PAD_WIDTH}",
    "pad": f"PyTorch's pad (last axis first, start/end interleaved) is {_PAD_WIDTH}",
    "pads": f"ONNX's pads (all starts, then all ends) are {_PAD_WIDTH}",
    "padding": _PAD_WIDTH,
    "constant_values": "numpy's constant_values is value",
    "fill_value": "the constant is value",
})
def pad(x: npt.ArrayLike, start_padding: _Paddings, end_padding: _Paddings, mode: str = "constant",
        value: Any = 0, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Pad an array with DirectML PADDING1 semantics (DML_PADDING1_OPERATOR_DESC).

    Every axis is extended by ``start_padding[i]`` elements before and ``end_padding[i]`` after.
    Output coordinate ``o`` on an axis of input size ``n`` reads input coordinate ``src(i)`` with
    ``i = o - start``: itself when ``0 <= i < n``, otherwise by the mode's rule. Data is moved
    bit for bit (NaN payloads included); nothing is computed.

    Parameters
    ----------
    x : array_like
        1 to 8 dimensions; float16/32/64, int8..int64, uint8..uint64 or bool; any strides
        (negative, zero, non-contiguous views), read in place without a copy. Other
        array_likes are converted as ``np.asarray`` does; CPU tensors that export DLPack
        (PyTorch, JAX) are read in place through ``np.from_dlpack``.
    start_padding, end_padding : int or sequence of int
        Elements added before / after each dimension (one entry per dimension, or an int for
        every dimension; >= 0). May be larger than the input in every mode.
    mode : str
        How the padding is filled (DirectML's names; see Notes for numpy's and PyTorch's):

        ``'constant'``
            ``value`` everywhere outside the input.
        ``'edge'``
            the nearest edge element, ``clamp(i, 0, n - 1)``: ``a a | a b c d | d d``.
        ``'reflection'``
            mirrored without repeating the edge, period ``2 * (n - 1)``: ``c b | a b c d | c b``
            (an axis of size 1 repeats its element).
        ``'symmetric'``
            mirrored repeating the edge, period ``2 * n``: ``b a | a b c d | d c``.
        ``'wrap'``
            periodic, ``i mod n``: ``c d | a b c d | a b``.

        DirectML's full names (``'DML_PADDING_MODE_REFLECTION'``) are accepted too, in any case.
    value : int, float or bool
        The constant for ``'constant'`` mode; must be representable in ``x.dtype`` exactly (300
        into uint8 or 0.5 into int32 is an error; 64-bit integers are exact). Ignored by the
        other modes but still checked.
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, writable, any strides, no overlap with
        ``x`` or with itself. Untouched when the call is rejected. A tensor exporting DLPack
        or the buffer protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous array of ``x``'s dtype and shape ``x.shape[i] + start_padding[i] +
        end_padding[i]``.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array or not an array, the dtype is not one of the 11
        DirectML types or bool, ``out`` has another dtype, a padding or ``value`` has the
        wrong type, or another library's keyword is used (``pad_width=``, ``padding=``: the
        message says which argument it is).
    ValueError
        Padding lists whose length differs from ``x.ndim``, negative paddings, more than 8
        dimensions, an unknown mode (with a hint when it is another library's name, e.g.
        ``'reflect'``), a ``value`` not representable in the dtype, or an ``out`` of the wrong
        shape, read-only, or overlapping ``x``. Messages name the operator and the field
        (``Padding1: end_padding has 3 entries but the input has 4 dimensions``).

    See Also
    --------
    Padding1Desc : the same operator as a reusable descriptor (JSON, pickling).
    PaddingDesc : DML_PADDING_OPERATOR_DESC, whose value is a FLOAT saturated into integers.

    Notes
    -----
    The mode names are DirectML's, and other libraries use the same words for other things:

    ==============  =================  ==================  ======================
    DirectML        numpy ``np.pad``   PyTorch ``F.pad``   ONNX ``Pad``
    ==============  =================  ==================  ======================
    ``constant``    ``constant``       ``constant``        ``constant``
    ``edge``        ``edge``           ``replicate``       ``edge``
    ``reflection``  ``reflect``        ``reflect``         ``reflect``
    ``symmetric``   ``symmetric``      (none)              (none)
    ``wrap``        ``wrap``           ``circular``        ``wrap``
    ==============  =================  ==================  ======================

    (scipy.ndimage's ``reflect`` is ``symmetric`` and its ``mirror`` is ``reflection``.)

    Differences from those libraries: paddings larger than the input work in every mode and on
    every axis at once (PyTorch and ONNX Runtime refuse reflecting further than the input;
    ``np.pad`` drops or repeats values when it reflects more than once with asymmetric
    paddings, numpy issues #25926 and #28575); every dtype is supported in every mode, float16 included; negative paddings
    (cropping) are not allowed. Results never depend on the thread count
    (:func:`set_num_threads`).

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> x = np.array([1, 2, 3, 4])
    >>> for mode in ("constant", "edge", "reflection", "symmetric", "wrap"):
    ...     print(f"{mode:>10}", dmlops.pad(x, (2,), (2,), mode, value=9))
      constant [9 9 1 2 3 4 9 9]
          edge [1 1 1 2 3 4 4 4]
    reflection [3 2 1 2 3 4 3 2]
     symmetric [2 1 1 2 3 4 4 3]
          wrap [3 4 1 2 3 4 1 2]

    Paddings larger than the input fold back and forth:

    >>> dmlops.pad(x, (2,), (5,), mode="reflection")
    array([3, 2, 1, 2, 3, 4, 3, 2, 1, 2, 3])

    Several axes, any view, and writing into an existing array:

    >>> image = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> dmlops.pad(image.T, (1, 0), (0, 2), mode="edge")
    array([[0., 3., 3., 3.],
           [0., 3., 3., 3.],
           [1., 4., 4., 4.],
           [2., 5., 5., 5.]], dtype=float32)
    >>> buffer = np.empty((4, 5), np.float32)
    >>> dmlops.pad(image, (1, 1), (1, 1), out=buffer) is buffer
    True

    An int pads every axis; lists convert as ``np.asarray`` does:

    >>> dmlops.pad([[1, 2], [3, 4]], 1, (0, 1), mode="wrap")
    array([[4, 3, 4, 3],
           [2, 1, 2, 1],
           [4, 3, 4, 3]])

    Errors name the operator, the field and the rule:

    >>> dmlops.pad(np.zeros(3, np.uint8), (1,), (1,), value=300)
    Traceback (most recent call last):
    ...
    ValueError: Padding1: padding_value 300 is not representable in uint8: range 0..255
    >>> dmlops.pad(x, (1,), (1,), mode="replicate")
    Traceback (most recent call last):
    ...
    ValueError: Padding1: padding_mode 'replicate' is unknown; expected one of constant, edge, reflection, symmetric, wrap (PyTorch's 'replicate' is 'edge')
    """
    op = "Padding1"
    array = as_array(x, f"{op}: input")
    mode = PADDING_MODE.parse(mode, f"{op}: padding_mode")
    start = per_axis(start_padding, array.ndim, f"{op}: start_padding")
    end = per_axis(end_padding, array.ndim, f"{op}: end_padding")
    value = number(value, f"{op}: padding_value")
    check_bool_value(array, value, f"{op}: padding_value")
    result = check_out(out, array.dtype, f"{op}: out")
    return _core.padding(op, array, result, mode, start, end, value, True)
