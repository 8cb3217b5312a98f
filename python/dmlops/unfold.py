"""Unfold and Fold: ``dmlops.unfold``, ``dmlops.fold``, ``UnfoldDesc`` (DML_UNFOLD_OPERATOR_DESC)
and ``FoldDesc`` (DML_FOLD_OPERATOR_DESC). Full semantics:
docs/semantics/unfold.md.

im2col and col2im in 1 to 6 spatial dimensions. A window of ``window_sizes[d]`` taps,
``dilations[d]`` apart, slides with ``strides[d]`` over the input extended by
``start_padding[d]`` / ``end_padding[d]`` zeros::

    Blocks[d] = (S[d] + start[d] + end[d] - dilations[d] * (window_sizes[d] - 1) - 1) // strides[d] + 1
    K = prod(window_sizes), L = prod(Blocks)
    unfold: (N, C, *S) -> (N, C*K, L)        fold: (N, C*K, L) -> (N, C, *S)

Row ``c*K + k`` (``k`` row-major over the window) and column ``b`` (row-major over the blocks)
hold ``x[n, c, p]`` with ``p[d] = b[d]*strides[d] + k[d]*dilations[d] - start_padding[d]``, or 0
where ``p`` falls in the padding. For two spatial dimensions and symmetric padding this is
exactly ``torch.nn.functional.unfold`` / ``fold``; for any rank it is ONNX ``Col2Im``'s layout.

Fold is unfold's adjoint: it sums every column entry into the position it was read from and
drops the entries that read padding. float16 sums in float32 and rounds once; integers wrap in
their own width, as numpy's do. Each element's terms are added in increasing ``k`` whatever the
thread count, so results are deterministic (and match PyTorch's fold bit for bit in float32).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union, cast

import numpy as np
import numpy.typing as npt

from . import _core
from ._args import as_array, check_out, int_tuple, is_integer, keyword_hints, per_axis
from ._descriptor import Descriptor, Field
from ._plan import Plan
from ._tensor import TensorDesc, TensorSpec

_WINDOW_FIELDS = ("window_sizes", "strides", "dilations", "start_padding", "end_padding")
_Dims = tuple[int, ...]
_WindowArrays = tuple[_Dims, _Dims, _Dims, _Dims, _Dims]  # in _WINDOW_FIELDS order
_PerAxis = Union[int, Sequence[int]]


_SCALARS = frozenset((int, type(None)))  # exact types: a bool is not an int here


def _window_arrays(op: str, spatial: int, window_sizes: _PerAxis, strides: Optional[_PerAxis],
                   dilations: Optional[_PerAxis], start_padding: Optional[_PerAxis],
                   end_padding: Optional[_PerAxis]) -> _WindowArrays:
    """The five per-dimension arrays for ``spatial`` dimensions: an int is repeated on each,
    omitted strides and dilations are 1, omitted paddings 0."""
    if (type(window_sizes) is int and type(strides) in _SCALARS and type(dilations) in _SCALARS
            and type(start_padding) in _SCALARS and type(end_padding) in _SCALARS):
        # The common call, every argument an int or omitted, without five per_axis calls: a
        # small unfold's Python overhead 2.6 us, not 3.3, on Zen 5 (its C++ call takes 1.8).
        n = max(spatial, 0)
        return ((window_sizes,) * n, (1 if strides is None else strides,) * n,
                (1 if dilations is None else dilations,) * n, (0 if start_padding is None else start_padding,) * n,
                (0 if end_padding is None else end_padding,) * n)
    return (per_axis(window_sizes, spatial, f"{op}: window_sizes"),
            per_axis(strides, spatial, f"{op}: strides", 1), per_axis(dilations, spatial, f"{op}: dilations", 1),
            per_axis(start_padding, spatial, f"{op}: start_padding", 0),
            per_axis(end_padding, spatial, f"{op}: end_padding", 0))


_PADDING = ("dmlops pads with start_padding and end_padding (each an int or one entry per spatial axis; "
            "PyTorch's padding=p is start_padding=p, end_padding=p)")
_HINTS = {
    "kernel_size": "PyTorch's kernel_size is window_sizes (an int or one entry per spatial axis)",
    "stride": "PyTorch's stride is strides (an int or one entry per spatial axis)",
    "dilation": "PyTorch's dilation is dilations (an int or one entry per spatial axis)",
    "padding": _PADDING,
    "pads": _PADDING,
    "block_shape": "ONNX's block_shape is window_sizes",
}


def _spec(desc: TensorDesc) -> TensorSpec:
    return (desc.dtype, desc.sizes, desc.strides)


class _WindowDescriptor(Descriptor):
    """The fields UnfoldDesc and FoldDesc share, in the DirectML structs' order."""

    window_sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("window_sizes", "WindowSizes", "dims"),
        Field("strides", "Strides", "dims"),
        Field("dilations", "Dilations", "dims"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
    )

    def _check_tensor(self, value: Any, name: str) -> None:
        if not isinstance(value, TensorDesc):
            raise TypeError(f"{self.NAME}: {name} must be a dmlops.TensorDesc, not {type(value).__name__}")

    def _check_arrays(self, x: npt.ArrayLike, out: Optional[npt.ArrayLike]) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """x checked against ``input``, and ``out`` as an array of its dtype."""
        array = self._input_array(x)
        return array, check_out(out, array.dtype, f"{self.NAME}: out")

    def _window_values(self) -> _WindowArrays:
        return cast(_WindowArrays, tuple(self._values[name] for name in _WINDOW_FIELDS))


class UnfoldDesc(_WindowDescriptor):
    """DML_UNFOLD_OPERATOR_DESC: sliding blocks of an ``(N, C, *S)`` tensor as columns (im2col).

    Parameters
    ----------
    input : TensorDesc
        ``(N, C, S0, ..., S(D-1))``, 1 to 6 spatial dimensions, any of the 11 dtypes.
    window_sizes : int or sequence of int
        One entry per spatial dimension (>= 1), or an int for every one; DimensionCount is
        ``input.rank - 2``.
    strides, dilations : int or sequence of int, optional
        One entry per spatial dimension, or an int for every one (>= 1); default all 1.
    start_padding, end_padding : int or sequence of int, optional
        Implicit zeros before / after each spatial dimension, or an int for every one (>= 0);
        default all 0.
    output : TensorDesc, optional
        Checked against the inferred ``(N, C*prod(window_sizes), block count)`` when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or an array field holds non-integers.
    ValueError
        The per-dimension arrays differ in length from ``input.rank - 2`` or from each other,
        a window size, stride or dilation is < 1, a padding is < 0, a window does not fit, or
        ``output`` does not match; the message names the field.

    Examples
    --------
    >>> import dmlops
    >>> d = dmlops.UnfoldDesc(dmlops.TensorDesc("float32", (1, 1, 5, 5)), window_sizes=(3, 3),
    ...                       start_padding=(1, 0), end_padding=(1, 0))
    >>> d.output.sizes
    (1, 9, 15)
    """

    NAME = "Unfold"
    OPERATOR = "UNFOLD"

    def __init__(self, input: TensorDesc, *, window_sizes: _PerAxis, strides: Optional[_PerAxis] = None,
                 dilations: Optional[_PerAxis] = None, start_padding: Optional[_PerAxis] = None,
                 end_padding: Optional[_PerAxis] = None, output: Optional[TensorDesc] = None):
        self._check_tensor(input, "input")
        if output is not None:
            self._check_tensor(output, "output")
        arrays = _window_arrays(self.NAME, input.rank - 2, window_sizes, strides, dilations, start_padding,
                                end_padding)
        sizes = _core.unfold_infer(_spec(input), None if output is None else _spec(output), *arrays)
        self._values = {"input": input, "output": output if output is not None else TensorDesc(input.dtype, sizes),
                        **dict(zip(_WINDOW_FIELDS, arrays))}

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Unfold ``x`` (an array_like matching ``input``: same dtype, bool allowed for uint8,
        same shape; any strides). Returns a new C-contiguous array, or ``out`` filled in place."""
        array, result = self._check_arrays(x, out)
        return _core.unfold(array, result, *self._window_values())

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): ``rows``, each output row (n, c, tap)
        copied run by run, with the pieces a row is cut into when rows are too few for the
        threads; ``tap_triples`` 1 when a window 3 wide along the last axis with stride 2, padded
        by one at its start (ResNet's stride-2 3x3), writes the three taps of a row of the
        window together (with AVX512_VBMI's byte permute, rows of 64 bytes or more); ``streamed``
        1 when the output is larger than the last-level cache (or at least twice the input,
        input and output together more than three quarters of that cache, three eighths on one
        thread of a Zen 4), whose rows then go through a buffer in L1 and out with non-temporal
        stores (a cache line of the output is never read before it is written). The same code
        sets up the calls, so the plan is what they do (for a packed output).

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        return Plan._of(_core.unfold_plan(_spec(self.input), _spec(self.output), *self._window_values()))


class FoldDesc(_WindowDescriptor):
    """DML_FOLD_OPERATOR_DESC: sums columns back into an ``(N, C, *S)`` tensor (col2im).

    Parameters
    ----------
    input : TensorDesc
        ``(N, C*prod(window_sizes), block count)``, any of the 11 dtypes.
    output : TensorDesc
        ``(N, C, S0, ..., S(D-1))``, 1 to 6 spatial dimensions. Required: its spatial sizes are
        what the blocks are folded into (several sizes give the same block count).
    window_sizes, strides, dilations, start_padding, end_padding
        As for :class:`UnfoldDesc`, per spatial dimension of ``output``.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or an array field holds non-integers.
    ValueError
        As for :class:`UnfoldDesc`, and when ``input``'s sizes are not
        ``(N, C*prod(window_sizes), block count)`` for ``output``.

    Examples
    --------
    >>> import dmlops
    >>> d = dmlops.FoldDesc(dmlops.TensorDesc("float32", (1, 9, 4)), dmlops.TensorDesc("float32", (1, 1, 4, 4)),
    ...                     window_sizes=(3, 3))
    >>> d.strides, d.end_padding
    ((1, 1), (0, 0))
    """

    NAME = "Fold"
    OPERATOR = "FOLD"
    INFERRED_OUTPUT = False

    def __init__(self, input: TensorDesc, output: TensorDesc, *, window_sizes: _PerAxis,
                 strides: Optional[_PerAxis] = None, dilations: Optional[_PerAxis] = None,
                 start_padding: Optional[_PerAxis] = None, end_padding: Optional[_PerAxis] = None):
        self._check_tensor(input, "input")
        self._check_tensor(output, "output")
        arrays = _window_arrays(self.NAME, output.rank - 2, window_sizes, strides, dilations, start_padding,
                                end_padding)
        _core.fold_infer(_spec(input), _spec(output), *arrays)
        self._values = {"input": input, "output": output, **dict(zip(_WINDOW_FIELDS, arrays))}

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Fold ``x`` (an array_like matching ``input``; any strides). Returns a new C-contiguous
        array of ``output``'s sizes, or ``out`` filled in place."""
        array, result = self._check_arrays(x, out)
        return _core.fold(array, result, self.output.sizes[2:], *self._window_values())

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): ``slabs``, each task summing every tap
        into a slab of one output plane (``slab_rows`` rows, sized to stay in L2), in the output
        itself (``in_place`` 1: packed planes, not float16, a unit step along the last axis) or
        in an accumulator that is then stored; ``prefetched`` 1 when the columns are larger than
        the last-level cache (and not float16): each run's are asked for 8 KiB ahead. The same code sets up the calls, so the plan is
        what they do (for a packed output; a strided ``out=`` takes the accumulator).

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        return Plan._of(_core.fold_plan(_spec(self.input), _spec(self.output), *self._window_values()))


@keyword_hints("Unfold", _HINTS)
def unfold(x: npt.ArrayLike, window_sizes: _PerAxis, *, strides: Optional[_PerAxis] = None,
           dilations: Optional[_PerAxis] = None, start_padding: Optional[_PerAxis] = None,
           end_padding: Optional[_PerAxis] = None, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Extract sliding blocks as columns (im2col) with DirectML UNFOLD semantics.

    Parameters
    ----------
    x : array_like
        ``(N, C, S0, ..., S(D-1))`` with 1 to 6 spatial dimensions; float16/32/64, int8..int64,
        uint8..uint64 or bool; any strides, read in place without a copy. Other array_likes
        are converted as ``np.asarray`` does; CPU tensors exporting DLPack (PyTorch, JAX) are
        read in place.
    window_sizes : int or sequence of int
        The window, one entry per spatial dimension (>= 1), or an int for every one.
    strides, dilations : int or sequence of int, optional
        Per spatial dimension, or an int for every one (>= 1); default all 1.
    start_padding, end_padding : int or sequence of int, optional
        Implicit zeros before / after each spatial dimension, or an int for every one (>= 0,
        may differ); default all 0.
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, writable, any strides, no overlap with
        ``x``. Untouched when the call is rejected. A tensor exporting DLPack or the buffer
        protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous ``(N, C*prod(window_sizes), prod(Blocks))`` array of ``x``'s dtype;
        bit-exact copies of ``x``'s elements and zeros.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array, not an array or of an unsupported dtype, an array
        argument holds non-integers, or another library's keyword is used (``kernel_size=``,
        ``stride=``: the message names the dmlops argument).
    ValueError
        ``x`` has fewer than 3 or more than 8 dimensions, the per-dimension arrays do not have
        ``x.ndim - 2`` entries, a window size, stride or dilation is < 1, a padding is < 0, the
        dilated window is larger than the padded input, or ``out`` is unusable (shape,
        read-only, overlap); the message names the field.

    See Also
    --------
    fold : the adjoint (col2im).
    UnfoldDesc : the same operator as a descriptor.

    Notes
    -----
    Compared with other libraries: ``torch.nn.functional.unfold`` handles two spatial
    dimensions with symmetric padding only, ONNX has no im2col operator (only ``Col2Im``), and
    ``numpy.lib.stride_tricks.sliding_window_view`` has no strides, dilations or padding and
    returns a read-only view. Here the layout is PyTorch's for every rank from 1 to 6.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    >>> cols = dmlops.unfold(x, (3, 3))
    >>> cols.shape
    (1, 9, 9)
    >>> cols[0, 0]
    array([ 0.,  1.,  2.,  5.,  6.,  7., 10., 11., 12.], dtype=float32)
    >>> dmlops.unfold(np.arange(4).reshape(1, 1, 4), (2,), strides=(2,), start_padding=(1,), end_padding=(1,))
    array([[[0, 1, 3],
            [0, 2, 0]]])
    """
    op = "Unfold"
    array = as_array(x, f"{op}: input")
    arrays = _window_arrays(op, array.ndim - 2, window_sizes, strides, dilations, start_padding, end_padding)
    result = check_out(out, array.dtype, f"{op}: out")
    return _core.unfold(array, result, *arrays)


@keyword_hints("Fold", {**_HINTS, "output_size": "PyTorch's output_size is output_sizes"})
def fold(x: npt.ArrayLike, output_sizes: _PerAxis, window_sizes: _PerAxis, *,
         strides: Optional[_PerAxis] = None, dilations: Optional[_PerAxis] = None,
         start_padding: Optional[_PerAxis] = None, end_padding: Optional[_PerAxis] = None,
         out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Sum columns back into their blocks (col2im) with DirectML FOLD semantics.

    Parameters
    ----------
    x : array_like
        ``(N, C*prod(window_sizes), prod(Blocks))``; float16/32/64, int8..int64 or
        uint8..uint64 (not bool: sums of bools are not bools); any strides. Other array_likes
        are converted as ``np.asarray`` does; CPU tensors exporting DLPack are read in place.
    output_sizes : int or sequence of int
        The spatial sizes ``S`` of the result (1 to 6 entries). Their number is the number of
        spatial dimensions; an int is one size for every spatial dimension, whose number then
        comes from ``window_sizes`` (a sequence).
    window_sizes, strides, dilations, start_padding, end_padding : int or sequence of int
        As for :func:`unfold`, per spatial dimension (an int for every one).
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, writable, any strides, no overlap with
        ``x``. Untouched when the call is rejected. A tensor exporting DLPack or the buffer
        protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous ``(N, C, *output_sizes)`` array of ``x``'s dtype. Entries that read
        padding are dropped; overlapping entries are summed (float16 in float32, rounded once;
        integers wrapping in their own width).

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array or not an array, ``x`` is bool or of an unsupported
        dtype, an array argument holds non-integers, ``output_sizes`` and ``window_sizes`` are
        both ints (the number of spatial dimensions is unknown), or another library's keyword
        is used (``output_size=``, ``kernel_size=``: the message names the dmlops argument).
    ValueError
        ``x`` is not 3-D, ``x.shape[1]`` is not a multiple of ``prod(window_sizes)``, its
        block count does not match ``output_sizes``, a window parameter breaks its rule, or
        ``out`` is unusable; the message names the field.

    See Also
    --------
    unfold : the operation fold is the adjoint of.
    FoldDesc : the same operator as a descriptor.

    Notes
    -----
    ``fold(unfold(x))`` multiplies each element by the number of windows covering it; divide
    by ``fold(ones)`` to invert unfold. The sum per element runs in window-tap order whatever
    the thread count, so results are deterministic and equal ``torch.nn.functional.fold`` bit
    for bit in float32 (which handles 2 spatial dimensions only); ONNX ``Col2Im`` is the same
    operation in any rank.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> cols = np.arange(36, dtype=np.float32).reshape(1, 9, 4)
    >>> dmlops.fold(cols, (4, 4), (3, 3))[0, 0]
    array([[  0.,   5.,  13.,   9.],
           [ 14.,  38.,  54.,  32.],
           [ 38.,  86., 102.,  56.],
           [ 26.,  57.,  65.,  35.]], dtype=float32)
    """
    op = "Fold"
    array = as_array(x, f"{op}: input")
    if is_integer(output_sizes):
        if is_integer(window_sizes):
            raise TypeError(f"{op}: output_sizes and window_sizes are both ints; give output_sizes as a sequence "
                            f"(its length is the number of spatial dimensions)")
        sizes = per_axis(output_sizes, len(int_tuple(window_sizes, f"{op}: window_sizes")), f"{op}: output_sizes")
    else:
        sizes = int_tuple(output_sizes, f"{op}: output_sizes")
    arrays = _window_arrays(op, len(sizes), window_sizes, strides, dilations, start_padding, end_padding)
    result = check_out(out, array.dtype, f"{op}: out")
    return _core.fold(array, result, sizes, *arrays)
