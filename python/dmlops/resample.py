"""Upsample2D and the Resample family: ``dmlops.upsample_2d``, ``dmlops.resample`` and the
descriptors ``Upsample2DDesc`` (DML_UPSAMPLE_2D_OPERATOR_DESC), ``ResampleDesc``,
``Resample1Desc``, ``Resample2Desc`` and ``Resample3Desc`` (DML_RESAMPLE*_OPERATOR_DESC).
Spec: shared/spec/operators.md section 3.

Every axis maps output coordinate ``o`` to the input coordinate

    x = (o - output_pixel_offset) / scale - input_pixel_offset        (float64)

with the offsets 0.5 and -0.5 by default (pixel centres, "half_pixel"). ``nearest_neighbor``
rounds x and clamps it into the input; ``linear`` blends the two neighbours of the clamped x on
every axis (bilinear on two axes, trilinear on three, ...); ``antialiased`` linear widens the
blend to a triangle filter of half-width ``1/scale`` when ``scale < 1``.

How this lines up with other libraries (for integer upsampling the first two rows agree):

===============================================  =============================================
dmlops                                           PyTorch ``F.interpolate`` / ONNX ``Resize``
===============================================  =============================================
``upsample_2d(x, s, "nearest_neighbor")``        ``mode="nearest"`` = ``nearest-exact`` (integer s)
``upsample_2d(x, s, "linear")``                  ``mode="bilinear", align_corners=False``
``resample(..., "nearest_neighbor")``            ``nearest-exact`` (round half up, half_pixel)
``resample(..., rounding_direction="decreasing",  ``mode="nearest"`` (floor(o / scale))
input_pixel_offsets=0, output_pixel_offsets=0)``
``resample(..., "linear", antialiased=True)``    ONNX ``antialias=1``; torch ``antialias=True``
                                                 differs at the borders (it drops taps outside
                                                 the input, ONNX and DirectML repeat the edge)
===============================================  =============================================

PyTorch evaluates ``x`` in float32 from ``1 / scale`` (or from ``in / out`` when only a size is
given); dmlops evaluates the formula above in float64 from DirectML's FLOAT scale. For
non-integer scales an index can therefore differ by one where ``x`` lands on a rounding edge,
and linear weights differ in the last float32 bits.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _core
from ._args import Enum, as_array, check_out, flag, float_tuple, int_tuple
from ._descriptor import Descriptor, Field
from ._tensor import TensorDesc
from ._tensor import tensor_spec as _spec

INTERPOLATION_MODE = Enum(
    "INTERPOLATION_MODE",
    ("nearest_neighbor", "linear"),
    hints={
        "nearest": "PyTorch's and ONNX's 'nearest' is 'nearest_neighbor'",
        "nearest-exact": "PyTorch's 'nearest-exact' is 'nearest_neighbor'",
        "bilinear": "'linear' interpolates every resampled axis (bilinear on two, trilinear on three)",
        "trilinear": "'linear' interpolates every resampled axis (bilinear on two, trilinear on three)",
    },
)

AXIS_DIRECTION = Enum(
    "AXIS_DIRECTION",
    ("increasing", "decreasing"),
    hints={
        "floor": "rounding down (floor) is 'decreasing'",
        "ceil": "rounding up (ceil) is 'increasing'",
    },
)

_Scale = Union[int, Sequence[int]]


def _check_tensor_descs(op: str, input: Any, output: Any) -> None:
    if not isinstance(input, TensorDesc):
        raise TypeError(f"{op}: input must be a dmlops.TensorDesc, not {type(input).__name__}")
    if output is not None and not isinstance(output, TensorDesc):
        raise TypeError(f"{op}: output must be a dmlops.TensorDesc, not {type(output).__name__}")


def _scale_size(scale_size: Any) -> tuple[int, ...]:
    if isinstance(scale_size, (int, np.integer)) and not isinstance(scale_size, (bool, np.bool_)):
        return (int(scale_size), int(scale_size))
    return int_tuple(scale_size, "Upsample2D: scale_size")


# ---------------------------------------------------------------------------------------------
# Upsample2D


class Upsample2DDesc(Descriptor):
    """DML_UPSAMPLE_2D_OPERATOR_DESC: upsamples the last two axes (H, W) of a 4-D NCHW or 5-D
    NCDHW tensor by integer factors; N, C and D are copied.

    Parameters
    ----------
    input : TensorDesc
        4 or 5 dimensions. ``nearest_neighbor``: any dtype (bit-exact); ``linear``: float16/32/64.
    scale_size : int or (int, int)
        ``(height, width)`` factors >= 1 (DirectML's DML_SIZE_2D stores Width first; ``to_dict``
        writes ``{"Width": w, "Height": h}``).
    interpolation_mode : str
        ``'nearest_neighbor'`` (each pixel repeated) or ``'linear'`` (half-pixel bilinear, edges
        clamped, like ``F.interpolate(mode="bilinear", align_corners=False)``).
    output : TensorDesc, optional
        Checked against ``{N, C, [D,] H * height, W * width}`` when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or ``scale_size`` holds non-integers.
    ValueError
        A rank other than 4 or 5, a scale < 1, ``linear`` on an integer dtype, an unknown mode,
        or an ``output`` that does not match.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Upsample2DDesc(dmlops.TensorDesc("float32", (1, 1, 2, 2)), scale_size=(2, 2),
    ...                           interpolation_mode="linear")
    >>> d(np.array([[[[1, 2], [3, 4]]]], np.float32))[0, 0]
    array([[1.  , 1.25, 1.75, 2.  ],
           [1.5 , 1.75, 2.25, 2.5 ],
           [2.5 , 2.75, 3.25, 3.5 ],
           [3.  , 3.25, 3.75, 4.  ]], dtype=float32)
    """

    NAME = "Upsample2D"
    OPERATOR = "UPSAMPLE_2D"
    scale_size: tuple[int, int]
    interpolation_mode: str
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("scale_size", "ScaleSize", "size_2d"),
        Field("interpolation_mode", "InterpolationMode", "enum", INTERPOLATION_MODE),
    )

    def __init__(self, input: TensorDesc, *, scale_size: _Scale, interpolation_mode: str = "nearest_neighbor",
                 output: Optional[TensorDesc] = None):
        op = self.NAME
        _check_tensor_descs(op, input, output)
        scale = _scale_size(scale_size)
        mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
        sizes = _core.upsample_2d_infer(_spec(input), _spec(output), scale, mode)
        self._values = {
            "input": input,
            "output": output if output is not None else TensorDesc(input.dtype, sizes),
            "scale_size": scale,
            "interpolation_mode": mode,
        }

    def __call__(self, x: np.ndarray, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Upsample ``x`` (an array matching ``input``; any strides). Returns a new C-contiguous
        array, or ``out`` filled in place."""
        x = self._input_array(x)
        check_out(out, x.dtype, f"{self.NAME}: out")
        return _core.upsample_2d(x, out, self.scale_size, self.interpolation_mode)


def upsample_2d(x: np.ndarray, scale_size: _Scale = (2, 2), interpolation_mode: str = "nearest_neighbor", *,
                out: Optional[np.ndarray] = None) -> np.ndarray:
    """Upsample the last two axes of a 4-D (NCHW) or 5-D (NCDHW) array by integer factors, with
    DirectML UPSAMPLE_2D semantics.

    Parameters
    ----------
    x : numpy.ndarray
        4 or 5 dimensions, any strides (read in place). ``nearest_neighbor``: any dtype incl.
        bool, bit-exact; ``linear``: float16 (computed in float32, rounded once), float32, float64.
    scale_size : int or (int, int)
        ``(height, width)`` factors >= 1; an int scales both.
    interpolation_mode : str
        ``'nearest_neighbor'``: output ``(h, w)`` is input ``(h // sh, w // sw)``.
        ``'linear'``: half-pixel bilinear over H and W, edges clamped (N, C and D never mixed).
    out : numpy.ndarray, optional
        Written in place: exact output shape and dtype, no overlap with ``x``.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous array of shape ``(N, C, [D,] H * sh, W * sw)``.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is not a numpy array or has an unsupported dtype, or ``scale_size``
        holds non-integers.
    ValueError
        ``x.ndim`` not 4 or 5, a scale < 1, ``linear`` on an integer or bool array, an unknown
        mode (with a hint for ``'bilinear'``, ``'nearest'``), or an unusable ``out``.

    See Also
    --------
    resample : float scales on any axis, pixel offsets, rounding, antialiasing.
    Upsample2DDesc : the same operator as a descriptor.

    Notes
    -----
    Coordinates are half-pixel centred: ``x_in = (o + 0.5) / s - 0.5``. ``linear`` equals
    ``torch.nn.functional.interpolate(mode="bilinear", align_corners=False)`` and ONNX
    ``Resize(mode="linear", coordinate_transformation_mode="half_pixel")``; for integer scales
    ``nearest_neighbor`` equals PyTorch's ``"nearest"`` and ``"nearest-exact"`` (plain
    repetition, ``np.repeat`` on both axes).

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> dmlops.upsample_2d(np.array([[[[1, 2], [3, 4]]]]), (1, 3))[0, 0]
    array([[1, 1, 1, 2, 2, 2],
           [3, 3, 3, 4, 4, 4]])
    """
    op = "Upsample2D"
    x = as_array(x, f"{op}: input")
    scale = _scale_size(scale_size)
    mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
    check_out(out, x.dtype, f"{op}: out")
    return _core.upsample_2d(x, out, scale, mode)


# ---------------------------------------------------------------------------------------------
# Resample


class _ResampleDescriptor(Descriptor):
    """The four DML_RESAMPLE*_OPERATOR_DESC structs share their validation and execution; each
    subclass declares its struct's members and nothing else."""

    HAS_OFFSETS: bool = True  # RESAMPLE1 and later
    HAS_ROUNDING: bool = True  # RESAMPLE2 and later
    interpolation_mode: str
    scales: tuple[float, ...]

    def _setup(self, input: Any, output: Any, scales: Any, interpolation_mode: Any, rounding_direction: Any = None,
               input_pixel_offsets: Any = None, output_pixel_offsets: Any = None, antialiased: Any = False) -> None:
        op = self.NAME
        _check_tensor_descs(op, input, output)
        mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
        rounding = AXIS_DIRECTION.parse(rounding_direction, f"{op}: rounding_direction") if self.HAS_ROUNDING else None
        scales = float_tuple(scales, f"{op}: scales")
        rank = len(input.sizes)
        offsets = self.HAS_OFFSETS
        if offsets:  # None means DirectML's pixel centres
            input_pixel_offsets = (0.5,) * rank if input_pixel_offsets is None else input_pixel_offsets
            output_pixel_offsets = (-0.5,) * rank if output_pixel_offsets is None else output_pixel_offsets
            input_pixel_offsets = float_tuple(input_pixel_offsets, f"{op}: input_pixel_offsets")
            output_pixel_offsets = float_tuple(output_pixel_offsets, f"{op}: output_pixel_offsets")
        antialiased = flag(antialiased, f"{op}: antialiased")
        sizes, scales, in_offsets, out_offsets = _core.resample_infer(
            op, _spec(input), _spec(output), mode, rounding, scales, input_pixel_offsets, output_pixel_offsets,
            antialiased)
        self._values = {
            "input": input,
            "output": output if output is not None else TensorDesc(input.dtype, sizes),
            "interpolation_mode": mode,
            "rounding_direction": rounding,
            "scales": tuple(scales),  # as DirectML's FLOATs
            "input_pixel_offsets": tuple(in_offsets) if offsets else None,
            "output_pixel_offsets": tuple(out_offsets) if offsets else None,
            "antialiased": antialiased,
        }

    def __call__(self, x: np.ndarray, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Resample ``x`` (an array matching ``input``; any strides). Returns a new C-contiguous
        array of the descriptor's output sizes, or ``out`` filled in place."""
        x = self._input_array(x)
        check_out(out, x.dtype, f"{self.NAME}: out")
        v = self._values
        return _core.resample(self.NAME, x, out, v["output"].sizes, v["interpolation_mode"], v["rounding_direction"],
                              v["scales"], v["input_pixel_offsets"], v["output_pixel_offsets"], v["antialiased"])


class ResampleDesc(_ResampleDescriptor):
    """DML_RESAMPLE_OPERATOR_DESC: resamples every axis by a FLOAT scale, pixel centres aligned
    (offsets 0.5 / -0.5), ``nearest_neighbor`` rounding half up.

    Parameters
    ----------
    input : TensorDesc
        1 to 8 dimensions (DirectML: 1 to 4). ``linear`` needs float16/32/64.
    scales : sequence of float
        One per dimension, > 0 and finite (stored as FLOAT, i.e. float32).
    interpolation_mode : str
        ``'nearest_neighbor'`` or ``'linear'``.
    output : TensorDesc, optional
        Any sizes (DirectML crops or clamps at the edges); inferred as ``floor(in * scale)``.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, or a field has the wrong type.
    ValueError
        ``scales`` of the wrong length, a scale <= 0 or not finite, ``linear`` on an integer
        dtype, an unknown mode, or an ``output`` of another rank or dtype.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.ResampleDesc(dmlops.TensorDesc("float32", (1, 3, 10, 10)), scales=(1, 1, 0.7, 2.5)).output.sizes
    (1, 3, 7, 25)
    """

    NAME = "Resample"
    OPERATOR = "RESAMPLE"
    HAS_OFFSETS = False
    HAS_ROUNDING = False
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("interpolation_mode", "InterpolationMode", "enum", INTERPOLATION_MODE),
        Field("scales", "Scales", "floats", count="ScaleCount"),
    )

    def __init__(self, input: TensorDesc, *, scales: Sequence[float], interpolation_mode: str = "nearest_neighbor",
                 output: Optional[TensorDesc] = None):
        self._setup(input, output, scales, interpolation_mode)


class Resample1Desc(_ResampleDescriptor):
    """DML_RESAMPLE1_OPERATOR_DESC: :class:`ResampleDesc` plus per-axis pixel offsets,
    ``x = (o - output_pixel_offset) / scale - input_pixel_offset``; ``nearest_neighbor`` takes
    ``floor(x + 0.5)`` (round half up). Offsets default to 0.5 and -0.5 (pixel centres); 0 and 0
    align the corners of the first pixels instead.

    Parameters
    ----------
    input : TensorDesc
        1 to 8 dimensions. ``linear`` needs float16/32/64.
    scales : sequence of float
        One per dimension, > 0 and finite (stored as float32).
    interpolation_mode : str
        ``'nearest_neighbor'`` or ``'linear'``.
    input_pixel_offsets, output_pixel_offsets : sequence of float, optional
        One per dimension, finite; default 0.5 and -0.5 on every axis.
    output : TensorDesc, optional
        Any sizes; inferred as ``floor(in * scale)``.

    Raises
    ------
    TypeError, ValueError
        As for :class:`ResampleDesc`, and for offsets of the wrong length or not finite.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Resample1Desc(dmlops.TensorDesc("float32", (3,)), scales=(2,), interpolation_mode="linear",
    ...                          input_pixel_offsets=(0,), output_pixel_offsets=(0,))
    >>> d(np.array([0, 1, 2], np.float32))
    array([0. , 0.5, 1. , 1.5, 2. , 2. ], dtype=float32)
    """

    NAME = "Resample1"
    OPERATOR = "RESAMPLE1"
    HAS_ROUNDING = False
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("output", "OutputTensor", "tensor"),
        Field("interpolation_mode", "InterpolationMode", "enum", INTERPOLATION_MODE),
        Field("scales", "Scales", "floats"),
        Field("input_pixel_offsets", "InputPixelOffsets", "floats"),
        Field("output_pixel_offsets", "OutputPixelOffsets", "floats"),
    )
    # RESAMPLE2 inserts RoundingDirection after InterpolationMode; RESAMPLE3 appends Antialiased.

    def __init__(self, input: TensorDesc, *, scales: Sequence[float], interpolation_mode: str = "nearest_neighbor",
                 input_pixel_offsets: Optional[Sequence[float]] = None,
                 output_pixel_offsets: Optional[Sequence[float]] = None, output: Optional[TensorDesc] = None):
        self._setup(input, output, scales, interpolation_mode, None, input_pixel_offsets, output_pixel_offsets)


class Resample2Desc(_ResampleDescriptor):
    """DML_RESAMPLE2_OPERATOR_DESC: :class:`Resample1Desc` with a ``rounding_direction`` for
    ``nearest_neighbor``: ``'decreasing'`` takes ``floor(x)``, ``'increasing'`` ``ceil(x)``
    (linear ignores it). ONNX's ``round_prefer_floor`` is ``'increasing'`` with the input
    offsets raised by 0.5, as ONNX Runtime's DirectML provider maps it.

    Parameters
    ----------
    input, scales, interpolation_mode, input_pixel_offsets, output_pixel_offsets, output
        As for :class:`Resample1Desc`.
    rounding_direction : str
        ``'decreasing'`` (floor) or ``'increasing'`` (ceil); required, as in the struct.

    Raises
    ------
    TypeError, ValueError
        As for :class:`Resample1Desc`, and for an unknown rounding direction.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Resample2Desc(dmlops.TensorDesc("int32", (4,)), scales=(2,), rounding_direction="decreasing",
    ...                          input_pixel_offsets=(0,), output_pixel_offsets=(0,))
    >>> d(np.array([10, 20, 30, 40], np.int32))
    array([10, 10, 20, 20, 30, 30, 40, 40], dtype=int32)
    """

    NAME = "Resample2"
    OPERATOR = "RESAMPLE2"
    rounding_direction: str
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    FIELDS = (Resample1Desc.FIELDS[:3] + (Field("rounding_direction", "RoundingDirection", "enum", AXIS_DIRECTION),)
              + Resample1Desc.FIELDS[3:])

    def __init__(self, input: TensorDesc, *, scales: Sequence[float], rounding_direction: str,
                 interpolation_mode: str = "nearest_neighbor", input_pixel_offsets: Optional[Sequence[float]] = None,
                 output_pixel_offsets: Optional[Sequence[float]] = None, output: Optional[TensorDesc] = None):
        self._setup(input, output, scales, interpolation_mode, rounding_direction, input_pixel_offsets,
                    output_pixel_offsets)


class Resample3Desc(_ResampleDescriptor):
    """DML_RESAMPLE3_OPERATOR_DESC: :class:`Resample2Desc` plus ``antialiased``: ``linear``
    resampling with ``scale < 1`` on an axis averages over a triangle of half-width ``1/scale``
    input pixels (weights normalised, edge pixels repeated: ONNX Resize ``antialias=1``). It
    changes nothing for ``nearest_neighbor`` or ``scale >= 1``.

    Parameters
    ----------
    input, scales, interpolation_mode, rounding_direction, input_pixel_offsets, output_pixel_offsets, output
        As for :class:`Resample2Desc`.
    antialiased : bool
        Widen linear downsampling to a triangle filter (a Python or numpy bool).

    Raises
    ------
    TypeError, ValueError
        As for :class:`Resample2Desc`; ``antialiased`` must be a bool.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.Resample3Desc(dmlops.TensorDesc("float64", (8,)), scales=(0.5,), rounding_direction="increasing",
    ...                          interpolation_mode="linear", antialiased=True)
    >>> d(np.arange(8.0))
    array([0.625, 2.5  , 4.5  , 6.375])
    """

    NAME = "Resample3"
    OPERATOR = "RESAMPLE3"
    rounding_direction: str
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    antialiased: bool
    FIELDS = Resample2Desc.FIELDS + (Field("antialiased", "Antialiased", "bool"),)

    def __init__(self, input: TensorDesc, *, scales: Sequence[float], rounding_direction: str,
                 interpolation_mode: str = "nearest_neighbor", input_pixel_offsets: Optional[Sequence[float]] = None,
                 output_pixel_offsets: Optional[Sequence[float]] = None, antialiased: bool = False,
                 output: Optional[TensorDesc] = None):
        self._setup(input, output, scales, interpolation_mode, rounding_direction, input_pixel_offsets,
                    output_pixel_offsets, antialiased)


def resample(x: np.ndarray, scales: Sequence[float], interpolation_mode: str = "nearest_neighbor", *,
             input_pixel_offsets: Optional[Sequence[float]] = None, output_pixel_offsets: Optional[Sequence[float]] = None,
             rounding_direction: Optional[str] = None, antialiased: bool = False,
             output_sizes: Optional[Sequence[int]] = None, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Resample every axis of an array by its own scale, with DirectML RESAMPLE1/2/3 semantics.

    Parameters
    ----------
    x : numpy.ndarray
        1 to 8 dimensions, any strides (read in place). ``nearest_neighbor``: any dtype incl.
        bool, bit-exact; ``linear``: float16 (computed in float32, rounded once), float32, float64.
    scales : sequence of float
        One per dimension, > 0 and finite; rounded to float32 as DirectML's FLOAT. An axis with
        scale 1 and the default offsets is copied.
    interpolation_mode : str
        ``'nearest_neighbor'`` or ``'linear'`` (multilinear over every resampled axis).
    input_pixel_offsets, output_pixel_offsets : sequence of float, optional
        ``x = (o - output_pixel_offset) / scale - input_pixel_offset``; default 0.5 and -0.5.
    rounding_direction : str, optional
        Nearest rounding: None (RESAMPLE1) ``floor(x + 0.5)``; ``'decreasing'`` ``floor(x)``;
        ``'increasing'`` ``ceil(x)`` (RESAMPLE2/3).
    antialiased : bool
        RESAMPLE3: linear downsampling (scale < 1) averages over a triangle of half-width
        ``1/scale`` (ONNX Resize ``antialias=1``).
    output_sizes : sequence of int, optional
        The output shape (DirectML takes it from the output tensor); default ``floor(in * scale)``
        per axis (a product within float32 rounding below an integer counts as that integer).
    out : numpy.ndarray, optional
        Written in place: exact output shape and dtype, no overlap with ``x``.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous array of ``x``'s dtype and the output sizes.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is not a numpy array or has an unsupported dtype, or an argument has
        the wrong type (``antialiased`` must be a bool).
    ValueError
        ``scales`` or offsets whose length is not ``x.ndim``, a scale <= 0 or not finite,
        ``linear`` on an integer or bool array, an unknown mode or rounding direction, output
        sizes of the wrong rank or < 1, or an unusable ``out``.

    See Also
    --------
    upsample_2d : integer factors on H and W.
    ResampleDesc, Resample1Desc, Resample2Desc, Resample3Desc : the descriptors.

    Notes
    -----
    With the defaults, nearest is PyTorch's ``"nearest-exact"``; ``rounding_direction=
    "decreasing"`` with zero offsets is PyTorch's ``"nearest"`` (``floor(o / scale)``); zero
    offsets and ``scale = (out - 1) / (in - 1)`` is ``align_corners=True``. Antialiasing
    repeats edge pixels like ONNX Resize ``antialias=1`` and DirectML, where PyTorch's
    ``antialias=True`` drops them. Coordinates are computed in float64 from the float32
    scale; PyTorch computes them in float32, so a non-integer scale can pick a neighbouring
    index where a coordinate lands on a rounding edge. Rank 1 to 8 (DirectML: 1 to 4).

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> dmlops.resample(np.arange(4.0), (1.5,), "linear")
    array([0.        , 0.5       , 1.16666667, 1.83333333, 2.5       , 3.        ])
    >>> dmlops.resample(np.arange(4), (2,), rounding_direction="increasing",
    ...                 input_pixel_offsets=(0,), output_pixel_offsets=(0,))
    array([0, 1, 1, 2, 2, 3, 3, 3])
    """
    x = as_array(x, "Resample: input")
    args = resample_args(scales, interpolation_mode, input_pixel_offsets, output_pixel_offsets, rounding_direction,
                         antialiased, output_sizes)
    check_out(out, x.dtype, "Resample: out")
    mode, rounding, scales, input_pixel_offsets, output_pixel_offsets, antialiased, output_sizes = args
    return _core.resample("Resample", x, out, output_sizes, mode, rounding, scales, input_pixel_offsets,
                          output_pixel_offsets, antialiased)


def resample_args(scales: Any, interpolation_mode: Any, input_pixel_offsets: Any, output_pixel_offsets: Any,
                  rounding_direction: Any, antialiased: Any, output_sizes: Any) -> tuple:
    """:func:`resample`'s arguments checked and normalised (also for dmlops.dask.resample)."""
    op = "Resample"
    mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
    rounding = None if rounding_direction is None else AXIS_DIRECTION.parse(rounding_direction,
                                                                            f"{op}: rounding_direction")
    scales = float_tuple(scales, f"{op}: scales")
    if input_pixel_offsets is not None:
        input_pixel_offsets = float_tuple(input_pixel_offsets, f"{op}: input_pixel_offsets")
    if output_pixel_offsets is not None:
        output_pixel_offsets = float_tuple(output_pixel_offsets, f"{op}: output_pixel_offsets")
    antialiased = flag(antialiased, f"{op}: antialiased")
    if output_sizes is not None:
        output_sizes = int_tuple(output_sizes, f"{op}: output_sizes")
    return mode, rounding, scales, input_pixel_offsets, output_pixel_offsets, antialiased, output_sizes
