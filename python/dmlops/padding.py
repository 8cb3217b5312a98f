"""Padding: ``dmlops.pad``, ``Padding1Desc`` (DML_PADDING1_OPERATOR_DESC) and ``PaddingDesc``
(DML_PADDING_OPERATOR_DESC). Spec: shared/spec/operators.md section 1.

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

from typing import Any, Optional, Sequence

import numpy as np

from . import _core
from ._args import Enum, as_array, check_bool_value, check_out, int_tuple, number, real
from ._descriptor import Descriptor, Field
from ._tensor import TensorDesc

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


def _value_from_bits(bits: int, dtype: str) -> Any:
    """The padding value exactly as the kernel will write it."""
    raw = int(bits).to_bytes(8, "little")[: np.dtype(dtype).itemsize]
    return np.frombuffer(raw, dtype=dtype)[0].item()


class _PaddingDescriptor(Descriptor):
    EXACT_VALUE: bool  # PADDING1: value must be representable; PADDING: FLOAT, saturated

    def __init__(self, input: TensorDesc, *, start_padding: Sequence[int], end_padding: Sequence[int],
                 padding_mode: str = "constant", padding_value: Any = 0, output: Optional[TensorDesc] = None):
        op = self.NAME
        if not isinstance(input, TensorDesc):
            raise TypeError(f"{op}: input must be a dmlops.TensorDesc, not {type(input).__name__}")
        if output is not None and not isinstance(output, TensorDesc):
            raise TypeError(f"{op}: output must be a dmlops.TensorDesc, not {type(output).__name__}")
        mode = PADDING_MODE.parse(padding_mode, f"{op}: padding_mode")
        start = int_tuple(start_padding, f"{op}: start_padding")
        end = int_tuple(end_padding, f"{op}: end_padding")
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

    def __call__(self, x: np.ndarray, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Pad ``x`` (an array matching ``input``: same dtype, bool allowed for uint8, same shape;
        any strides). Returns a new C-contiguous array, or ``out`` filled in place."""
        op = self.NAME
        x = self._input_array(x)
        check_bool_value(x, self.padding_value, f"{op}: padding_value")
        check_out(out, x.dtype, f"{op}: out")
        return _core.padding(op, x, out, self.padding_mode, self.start_padding, self.end_padding,
                             self.padding_value, self.EXACT_VALUE)


class Padding1Desc(_PaddingDescriptor):
    """DML_PADDING1_OPERATOR_DESC: pads a tensor of 1 to 8 dimensions.

    Parameters
    ----------
    input : TensorDesc
        The input tensor (any of the 11 DirectML dtypes).
    start_padding, end_padding : sequence of int
        Elements added before / after each dimension (>= 0, any size).
    padding_mode : str
        ``'constant'``, ``'edge'``, ``'reflection'``, ``'symmetric'`` or ``'wrap'``.
    padding_value : int, float or bool
        Written by constant mode; must be representable in the input's dtype (300 into uint8
        or 0.5 into int32 is a ValueError), exact for 64-bit integers.
    output : TensorDesc, optional
        Checked against the inferred output when given.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Padding1Desc(dmlops.TensorDesc("float32", (1, 1, 4, 4)), padding_mode="symmetric",
    ...                         start_padding=(0, 0, 1, 2), end_padding=(0, 0, 3, 4))
    >>> d.output.sizes
    (1, 1, 8, 10)
    >>> d(np.zeros((1, 1, 4, 4), np.float32)).shape
    (1, 1, 8, 10)
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

    The value is rounded to float32 (DirectML's FLOAT); into integer tensors it is truncated
    toward zero and saturated to the dtype's range (nan becomes 0).
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


def pad(x: np.ndarray, start_padding: Sequence[int], end_padding: Sequence[int], mode: str = "constant",
        value: Any = 0, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Pad an array with DirectML PADDING1 semantics.

    Parameters
    ----------
    x : numpy.ndarray
        1 to 8 dimensions; float16/32/64, int8..int64, uint8..uint64 or bool; any strides
        (negative, zero, non-contiguous), read in place without a copy.
    start_padding, end_padding : sequence of int
        Elements added before / after each dimension (one entry per dimension, >= 0). May be
        larger than the input in every mode.
    mode : str
        ``'constant'``, ``'edge'``, ``'reflection'``, ``'symmetric'`` or ``'wrap'`` (see the
        module docstring for how these map onto numpy's and PyTorch's names).
    value : int, float or bool
        The constant; must be representable in ``x.dtype`` (ValueError otherwise).
    out : numpy.ndarray, optional
        Written in place: exact output shape and dtype, writable, any strides, no overlap with
        ``x``. Untouched when the call is rejected.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous array of shape ``x.shape + start + end``.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> dmlops.pad(np.array([1, 2, 3, 4]), (2,), (5,), mode="reflection")
    array([3, 2, 1, 2, 3, 4, 3, 2, 1, 2, 3])
    >>> dmlops.pad(np.array([1, 2, 3, 4]), (2,), (2,), mode="symmetric")
    array([2, 1, 1, 2, 3, 4, 4, 3])
    """
    op = "Padding1"
    x = as_array(x, f"{op}: input")
    mode = PADDING_MODE.parse(mode, f"{op}: padding_mode")
    start = int_tuple(start_padding, f"{op}: start_padding")
    end = int_tuple(end_padding, f"{op}: end_padding")
    value = number(value, f"{op}: padding_value")
    check_bool_value(x, value, f"{op}: padding_value")
    check_out(out, x.dtype, f"{op}: out")
    return _core.padding(op, x, out, mode, start, end, value, True)
