"""Lp pooling: ``dmlops.lp_pooling``, ``LpPooling1Desc`` (DML_LP_POOLING1_OPERATOR_DESC) and
``LpPoolingDesc`` (DML_LP_POOLING_OPERATOR_DESC). Full semantics:
docs/semantics/lp_pooling.md.

Each output is the p-norm of its window, ``(sum |x|^p)^(1/p)``, over the taps that land inside
the input (padded taps contribute 0). Windows have a size, a stride, asymmetric start/end
padding and (LpPooling1) a dilation per spatial axis; the output size on an axis is
``(in + start + end - ((window - 1) * dilation + 1)) // stride + 1``.

How this differs from ``torch.nn.functional.lp_pool2d``:

- ``|x|``: odd p and negative inputs give the norm (PyTorch returns negative values or NaN);
- padding and dilations (PyTorch has neither) and 1-D, 2-D and 3-D windows;
- no overflow for large p where the norm is finite (PyTorch's ``x**p`` overflows first);
- p is an integer >= 1 (DirectML's UINT P).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from . import _core
from ._args import as_array, check_out, integer, keyword_hints, per_axis
from ._descriptor import Descriptor, Field
from ._plan import Plan
from ._tensor import TensorDesc, tensor_spec

_PerAxis = Union[int, Sequence[int]]


class _LpPoolingDescriptor(Descriptor):
    HAS_DILATIONS: bool  # LpPooling1 has a Dilations member; LpPooling does not
    strides: tuple[int, ...]
    window_size: tuple[int, ...]
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]
    p: int

    def _setup(self, input: TensorDesc, window_size: _PerAxis, strides: Optional[_PerAxis],
               start_padding: Optional[_PerAxis], end_padding: Optional[_PerAxis],
               dilations: Optional[_PerAxis], p: int, output: Optional[TensorDesc]) -> None:
        op = self.NAME
        if not isinstance(input, TensorDesc):
            raise TypeError(f"{op}: input must be a dmlops.TensorDesc, not {type(input).__name__}")
        if output is not None and not isinstance(output, TensorDesc):
            raise TypeError(f"{op}: output must be a dmlops.TensorDesc, not {type(output).__name__}")
        spatial = input.rank - 2
        values: dict[str, Any] = {
            "input": input,
            "strides": per_axis(strides, spatial, f"{op}: strides", 1),
            "window_size": per_axis(window_size, spatial, f"{op}: window_size"),
            "start_padding": per_axis(start_padding, spatial, f"{op}: start_padding", 0),
            "end_padding": per_axis(end_padding, spatial, f"{op}: end_padding", 0),
            "p": integer(p, f"{op}: p"),
        }
        if self.HAS_DILATIONS:
            values["dilations"] = per_axis(dilations, spatial, f"{op}: dilations", 1)
        out_spec = None if output is None else (output.dtype, output.sizes, output.strides)
        sizes = _core.lp_pooling_infer(op, (input.dtype, input.sizes, input.strides), out_spec, values["strides"],
                                       values["window_size"], values["start_padding"], values["end_padding"],
                                       values.get("dilations"), values["p"])
        values["output"] = output if output is not None else TensorDesc(input.dtype, sizes)
        self._values = values

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Pool ``x`` (an array_like matching ``input``: same dtype and shape; any strides).
        Returns a new C-contiguous array, or ``out`` filled in place."""
        op = self.NAME
        x = self._input_array(x)
        result = check_out(out, x.dtype, f"{op}: out")
        return _core.lp_pooling(op, x, result, self.strides, self.window_size, self.start_padding, self.end_padding,
                                self._values.get("dilations"), self.p)

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): ``sum_abs`` (p = 1), ``sum_squares``
        (p = 2) or ``sum_powers`` (p >= 3), with its blocks of output rows, the input span a
        block reads, tasks and threads. The same code sets up the calls, so the plan is what
        they do.

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        return Plan._of(_core.lp_pooling_plan(self.NAME, tensor_spec(self.input), tensor_spec(self.output),
                                              self.strides, self.window_size, self.start_padding, self.end_padding,
                                              self._values.get("dilations"), self.p))


class LpPooling1Desc(_LpPoolingDescriptor):
    """DML_LP_POOLING1_OPERATOR_DESC: Lp pooling with dilated windows.

    Parameters
    ----------
    input : TensorDesc
        ``(N, C, H, W)`` or ``(N, C, D, H, W)`` (``(N, C, W)`` as a dmlops extension); float32,
        float16 or float64 (float64 is a dmlops extension).
    window_size : int or sequence of int
        Taps per spatial axis (>= 1); an int for every spatial axis.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, or an int for every one (>= 1); default 1.
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before / after each spatial axis, or an int for every one (>= 0); default 0.
    p : int
        The norm's exponent, 1 to 2**32 - 1 (DirectML's UINT P).
    output : TensorDesc, optional
        Checked against the inferred output when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, a dtype other than float16/32/64, ``p``
        is not an integer, or an array field holds non-integers.
    ValueError
        A rank other than 3 to 5, per-axis arrays of the wrong length, a window, stride or dilation < 1, a padding < 0, a window larger than the
        padded input, p outside 1..2**32-1, or an ``output`` that does not match.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.LpPooling1Desc(dmlops.TensorDesc("float32", (1, 1, 4, 4)), window_size=(2, 2),
    ...                           strides=(2, 2), p=1)
    >>> d.output.sizes
    (1, 1, 2, 2)
    >>> d(np.ones((1, 1, 4, 4), np.float32))[0, 0]
    array([[4., 4.],
           [4., 4.]], dtype=float32)
    """

    NAME = "LpPooling1"
    OPERATOR = "LP_POOLING1"
    HAS_DILATIONS = True
    dilations: tuple[int, ...]
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("strides", "Strides", "dims"),
        Field("window_size", "WindowSize", "dims"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
        Field("dilations", "Dilations", "dims"),
        Field("p", "P", "uint"),
    )

    def __init__(self, input: TensorDesc, *, window_size: _PerAxis, strides: Optional[_PerAxis] = None,
                 start_padding: Optional[_PerAxis] = None, end_padding: Optional[_PerAxis] = None,
                 dilations: Optional[_PerAxis] = None, p: int = 2, output: Optional[TensorDesc] = None):
        self._setup(input, window_size, strides, start_padding, end_padding, dilations, p, output)


class LpPoolingDesc(_LpPoolingDescriptor):
    """DML_LP_POOLING_OPERATOR_DESC: as :class:`LpPooling1Desc` without dilations.

    Parameters
    ----------
    input : TensorDesc
        ``(N, C, H, W)`` or ``(N, C, D, H, W)`` (``(N, C, W)`` as a dmlops extension); float32,
        float16 or float64.
    window_size : int or sequence of int
        Taps per spatial axis (>= 1); an int for every spatial axis.
    strides : int or sequence of int, optional
        Per spatial axis, or an int for every one (>= 1); default 1.
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before / after each spatial axis, or an int for every one (>= 0); default 0.
    p : int
        The norm's exponent, 1 to 2**32 - 1.
    output : TensorDesc, optional
        Checked against the inferred output when given.

    Raises
    ------
    TypeError, ValueError
        As for :class:`LpPooling1Desc`.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.LpPoolingDesc(dmlops.TensorDesc("float64", (1, 1, 3)), window_size=(3,), p=2)
    >>> d(np.array([[[2.0, -3.0, 6.0]]]))
    array([[[7.]]])
    >>> "Dilations" in d.to_dict()
    False
    """

    NAME = "LpPooling"
    OPERATOR = "LP_POOLING"
    HAS_DILATIONS = False
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("strides", "Strides", "dims"),
        Field("window_size", "WindowSize", "dims"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
        Field("p", "P", "uint"),
    )

    def __init__(self, input: TensorDesc, *, window_size: _PerAxis, strides: Optional[_PerAxis] = None,
                 start_padding: Optional[_PerAxis] = None, end_padding: Optional[_PerAxis] = None,
                 p: int = 2, output: Optional[TensorDesc] = None):
        self._setup(input, window_size, strides, start_padding, end_padding, None, p, output)


_PADDING = ("dmlops pads with start_padding and end_padding (each an int or one entry per spatial axis; "
            "padding=p is start_padding=p, end_padding=p)")


@keyword_hints("LpPooling1", {
    "kernel_size": "PyTorch's kernel_size is window_size (an int or one entry per spatial axis)",
    "kernel_shape": "ONNX's kernel_shape is window_size",
    "stride": "PyTorch's stride is strides (an int or one entry per spatial axis)",
    "dilation": "dilation is dilations (an int or one entry per spatial axis)",
    "padding": _PADDING,
    "pads": _PADDING,
    "norm_type": "PyTorch's norm_type is p (an integer >= 1)",
})
def lp_pooling(x: npt.ArrayLike, window_size: _PerAxis, *, strides: Optional[_PerAxis] = None,
               start_padding: Optional[_PerAxis] = None, end_padding: Optional[_PerAxis] = None,
               dilations: Optional[_PerAxis] = None, p: int = 2,
               out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Lp pooling with DirectML LP_POOLING1 semantics: ``y = (sum |x|^p)^(1/p)`` per window.

    Parameters
    ----------
    x : array_like
        ``(N, C, H, W)`` or ``(N, C, D, H, W)`` (``(N, C, W)`` as a dmlops extension); float32,
        float16 (accumulated in float32, rounded once) or float64; any strides, read in place.
        Other array_likes are converted as ``np.asarray`` does; CPU tensors exporting DLPack
        (PyTorch, JAX) are read in place.
    window_size : int or sequence of int
        Taps per spatial axis (>= 1); an int for every spatial axis.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, or an int for every one (>= 1); default 1. The dilated window spans
        ``(window - 1) * dilation + 1`` input elements.
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before / after each spatial axis, or an int for every one (>= 0); default
        0. Padded taps contribute nothing to the norm.
    p : int
        1 to 2**32 - 1. p = 1 sums ``|x|``; p = 2 is the Euclidean norm. Large p approach the
        window's max ``|x|`` without overflowing.
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, writable, any strides, no overlap with
        ``x``. Untouched when the call is rejected. A tensor exporting DLPack or the buffer
        protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous array of shape ``(N, C, out...)``.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array or not an array, a dtype other than float16/32/64
        (bool included), ``p`` is not an integer, an array argument holds non-integers, or
        another library's keyword is used (``kernel_size=``, ``stride=``: the message names
        the dmlops argument).
    ValueError
        ``x.ndim`` not 3 to 5, per-axis arrays of the wrong length, a window, stride or
        dilation < 1, a padding < 0, a window larger than the padded input, p outside
        1..2**32-1, or an unusable ``out``.

    See Also
    --------
    LpPooling1Desc, LpPoolingDesc : the same operator as descriptors.

    Notes
    -----
    The absolute value is dmlops' decision (ONNX LpPool semantics; DirectML's formula
    omits it). ``torch.nn.functional.lp_pool2d`` computes ``avg_pool(x**p) * K`` without it, so
    odd p on negative inputs gives negative numbers or NaN there (pytorch issue #184037); it
    also has no padding and no dilation. Large p is computed relative to the window's largest
    ``|x|``, so ``p = 2**32 - 1`` returns the max instead of overflowing. A NaN in a window
    gives NaN; otherwise an infinity gives infinity.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> x = np.array([[[3.0, -4.0, 0.0, 12.0, -5.0]]])
    >>> dmlops.lp_pooling(x, (2,), strides=(2,), end_padding=(1,))
    array([[[ 5., 12.,  5.]]])
    >>> dmlops.lp_pooling(x, (2,), dilations=(3,), p=1)
    array([[[15.,  9.]]])
    """
    op = "LpPooling1"
    array = as_array(x, f"{op}: input")
    spatial = array.ndim - 2
    window = per_axis(window_size, spatial, f"{op}: window_size")
    steps = per_axis(strides, spatial, f"{op}: strides", 1)
    start = per_axis(start_padding, spatial, f"{op}: start_padding", 0)
    end = per_axis(end_padding, spatial, f"{op}: end_padding", 0)
    dilated = None if dilations is None else per_axis(dilations, spatial, f"{op}: dilations")
    p = integer(p, f"{op}: p")
    result = check_out(out, array.dtype, f"{op}: out")
    return _core.lp_pooling(op, array, result, steps, window, start, end, dilated, p)
