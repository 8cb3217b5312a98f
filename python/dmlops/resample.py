"""Upsample2D and the Resample family: ``dmlops.upsample_2d``, ``dmlops.resample`` and the
descriptors ``Upsample2DDesc`` (DML_UPSAMPLE_2D_OPERATOR_DESC), ``ResampleDesc``,
``Resample1Desc``, ``Resample2Desc`` and ``Resample3Desc`` (DML_RESAMPLE*_OPERATOR_DESC).
The full semantics: docs/semantics/resample.md.

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

from typing import Any, Callable, Optional, Sequence, TypeVar, Union

import numpy as np
import numpy.typing as npt

from . import _core
from ._args import Enum, as_array, check_out, flag, float_tuple, int_tuple, integer, keyword_hints, real
from ._descriptor import Descriptor, Field
from ._plan import Plan
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
_Reals = Union[float, Sequence[float]]
_Ints = Union[int, Sequence[int]]
_V = TypeVar("_V", int, float)


def _axes(values: Any, rank: int, what: str, scalar: Callable[[Any, str], _V],
          sequence: Callable[[Any, str], tuple[_V, ...]], n_and_c: tuple[_V, _V]) -> tuple[_V, ...]:
    """One of resample's per-axis arguments for every axis of a rank-``rank`` array: ``rank``
    entries as they are; a single number, or ``rank - 2`` entries, for the spatial axes (all
    but the first two, N and C), which get ``n_and_c`` (scale 1 and the default offsets, which
    copy them)."""
    if isinstance(values, (int, float, np.integer, np.floating)) and not isinstance(values, (bool, np.bool_)):
        if rank < 3:
            raise ValueError(f"{what}: a single value is for the spatial axes (all but N and C), and x has {rank} "
                             f"dimension{'s' * (rank != 1)}; give one entry per axis")
        return n_and_c + (scalar(values, what),) * (rank - 2)
    entries = sequence(values, what)
    if len(entries) == rank:
        return entries
    if len(entries) == rank - 2 >= 1:
        return n_and_c + entries
    raise ValueError(f"{what} has {len(entries)} entries; x has {rank} dimensions: give {rank} (every axis)"
                     + (f" or {rank - 2} (the spatial axes)" if rank >= 3 else ""))


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
        Checked against ``(N, C, [D,] H * height, W * width)`` when given.

    Raises
    ------
    TypeError
        ``input`` or ``output`` is not a TensorDesc, ``scale_size`` holds non-integers,
        ``linear`` on an integer dtype, or an ``output`` of another dtype.
    ValueError
        A rank other than 4 or 5, a scale < 1, an unknown mode, or an ``output`` of other
        sizes.

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

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Upsample ``x`` (an array_like matching ``input``; any strides). Returns a new
        C-contiguous array, or ``out`` filled in place."""
        x = self._input_array(x)
        result = check_out(out, x.dtype, f"{self.NAME}: out")
        return _core.upsample_2d(x, result, self.scale_size, self.interpolation_mode)

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): nearest_neighbor, a ``gather`` whose
        rows repeat (``row_copies``: each gathered once and copied) and whose rows are
        ``repeat`` runs (``streamed`` out through a buffer in L1 when the output is at least
        twice the input and both exceed three quarters of the last-level cache, three eighths on
        one thread of a Zen 4); linear, a ``filter`` with its pass order and tiles. The same code
        sets up the calls, so the plan is what they do.

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        return Plan._of(_core.upsample_2d_plan(_spec(self.input), _spec(self.output), self.scale_size,
                                               self.interpolation_mode))


@keyword_hints("Upsample2D", {
    "scale_factor": "PyTorch's scale_factor is scale_size (an int, or (height, width) integer factors)",
    "mode": "PyTorch's mode is interpolation_mode ('nearest_neighbor' or 'linear')",
    "size": "upsample_2d takes integer factors (scale_size); for a target size use resample(x, output_sizes=...)",
})
def upsample_2d(x: npt.ArrayLike, scale_size: _Scale = (2, 2), interpolation_mode: str = "nearest_neighbor", *,
                out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Upsample the last two axes of a 4-D (NCHW) or 5-D (NCDHW) array by integer factors, with
    DirectML UPSAMPLE_2D semantics.

    Parameters
    ----------
    x : array_like
        4 or 5 dimensions, any strides (read in place). ``nearest_neighbor``: any dtype incl.
        bool, bit-exact; ``linear``: float16 (computed in float32, rounded once), float32, float64.
        Other array_likes are converted as ``np.asarray`` does; CPU tensors exporting DLPack
        (PyTorch, JAX) are read in place.
    scale_size : int or (int, int)
        ``(height, width)`` factors >= 1; an int scales both.
    interpolation_mode : str
        ``'nearest_neighbor'``: output ``(h, w)`` is input ``(h // sh, w // sw)``.
        ``'linear'``: half-pixel bilinear over H and W, edges clamped (N, C and D never mixed).
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, no overlap with ``x``. A tensor
        exporting DLPack or the buffer protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous array of shape ``(N, C, [D,] H * sh, W * sw)``.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array, not an array or of an unsupported dtype,
        ``linear`` on an integer or bool array, ``scale_size`` holds non-integers, or another
        library's keyword is used (``scale_factor=``, ``size=``: the message names the dmlops
        argument).
    ValueError
        ``x.ndim`` not 4 or 5, a scale < 1, an unknown mode (with a hint for ``'bilinear'``,
        ``'nearest'``), or an unusable ``out``.

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
    array = as_array(x, f"{op}: input")
    scale = _scale_size(scale_size)
    mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
    result = check_out(out, array.dtype, f"{op}: out")
    return _core.upsample_2d(array, result, scale, mode)


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
            # an empty array means the pixel centres (as None does); the struct holds one per dimension
            "input_pixel_offsets": (tuple(in_offsets) or (0.5,) * rank) if offsets else None,
            "output_pixel_offsets": (tuple(out_offsets) or (-0.5,) * rank) if offsets else None,
            "antialiased": antialiased,
        }

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Resample ``x`` (an array_like matching ``input``; any strides). Returns a new
        C-contiguous array of the descriptor's output sizes, or ``out`` filled in place."""
        x = self._input_array(x)
        result = check_out(out, x.dtype, f"{self.NAME}: out")
        v = self._values
        return _core.resample(self.NAME, x, result, v["output"].sizes, v["interpolation_mode"], v["rounding_direction"],
                              v["scales"], v["input_pixel_offsets"], v["output_pixel_offsets"], v["antialiased"], ())

    def plan(self) -> Plan:
        """How a call computes (a :class:`dmlops.Plan`): nearest_neighbor, the separable gather's
        ``copy`` or ``gather`` (``row_copies`` where an integer scale repeats whole rows,
        ``streamed`` as for :class:`Upsample2DDesc`);
        linear, the separable ``filter``, its pass order (``pass1``, ``pass2``: axes, those that
        shrink first) and tiles. The same code sets up the calls, so the plan is what they do.

        Returns
        -------
        Plan
            The algorithm, reason, instruction set, tiles, tasks and threads.
        """
        v = self._values
        return Plan._of(_core.resample_plan(self.NAME, _spec(v["input"]), _spec(v["output"]), v["interpolation_mode"],
                                            v["rounding_direction"], v["scales"], v["input_pixel_offsets"],
                                            v["output_pixel_offsets"], v["antialiased"]))


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
        ``input`` or ``output`` is not a TensorDesc, a field has the wrong type, ``linear`` on
        an integer dtype, or an ``output`` of another dtype.
    ValueError
        ``scales`` of the wrong length, a scale <= 0 or not finite, an unknown mode, or an
        ``output`` of another rank.

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


_ALIGN = ("align_corners=True is input_pixel_offsets=0, output_pixel_offsets=0 with scales (out - 1) / (in - 1); "
          "align_corners=False is the default offsets")


@keyword_hints("Resample", {
    "scale_factor": "PyTorch's scale_factor is scales (a number or one per spatial axis, or one per axis)",
    "size": "PyTorch's size is output_sizes (an int or one per spatial axis, or the whole shape)",
    "sizes": "ONNX's sizes is output_sizes",
    "output_size": "the output size is output_sizes",
    "mode": "PyTorch's mode is interpolation_mode ('nearest_neighbor' or 'linear')",
    "align_corners": _ALIGN,
    "antialias": "PyTorch's antialias is antialiased",
})
def resample(x: npt.ArrayLike, scales: Optional[_Reals] = None, interpolation_mode: str = "nearest_neighbor", *,
             input_pixel_offsets: Optional[_Reals] = None, output_pixel_offsets: Optional[_Reals] = None,
             rounding_direction: Optional[str] = None, antialiased: bool = False,
             output_sizes: Optional[_Ints] = None, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Resample every axis of an array by its own scale, with DirectML RESAMPLE1/2/3 semantics.

    Parameters
    ----------
    x : array_like
        1 to 8 dimensions, any strides (read in place). ``nearest_neighbor``: any dtype incl.
        bool, bit-exact; ``linear``: float16 (computed in float32, rounded once), float32, float64.
        Other array_likes are converted as ``np.asarray`` does; CPU tensors exporting DLPack
        (PyTorch, JAX) are read in place.
    scales : float or sequence of float, optional
        > 0 and finite; rounded to float32 as DirectML's FLOAT. One per dimension (DirectML's
        form), or, as PyTorch writes them, a number or ``x.ndim - 2`` entries for the spatial
        axes (all but the first two, N and C, which then get scale 1 and the default offsets:
        copied). An axis with scale 1 and the default offsets is copied. None: from
        ``output_sizes``, ``output / input`` per axis (as a FLOAT).
    interpolation_mode : str
        ``'nearest_neighbor'`` or ``'linear'`` (multilinear over every resampled axis).
    input_pixel_offsets, output_pixel_offsets : float or sequence of float, optional
        ``x = (o - output_pixel_offset) / scale - input_pixel_offset``; default 0.5 and -0.5.
        One per dimension, or a number or ``x.ndim - 2`` entries for the spatial axes, as for
        ``scales``.
    rounding_direction : str, optional
        Nearest rounding: None (RESAMPLE1) ``floor(x + 0.5)``; ``'decreasing'`` ``floor(x)``;
        ``'increasing'`` ``ceil(x)`` (RESAMPLE2/3).
    antialiased : bool
        RESAMPLE3: linear downsampling (scale < 1) averages over a triangle of half-width
        ``1/scale`` (ONNX Resize ``antialias=1``).
    output_sizes : int or sequence of int, optional
        The output shape (DirectML takes it from the output tensor): every axis, or an int or
        ``x.ndim - 2`` entries for the spatial axes (N and C kept); default
        ``floor(in * scale)`` per axis (a product within float32 rounding below an integer
        counts as that integer).
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact output shape and dtype, no overlap with ``x``. A tensor
        exporting DLPack or the buffer protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous array of ``x``'s dtype and the output sizes.

    Raises
    ------
    TypeError
        ``x`` or ``out`` is a masked array, not an array or of an unsupported dtype,
        ``linear`` on an integer or bool array, an argument has the wrong type
        (``antialiased`` must be a bool), neither ``scales`` nor ``output_sizes`` is given,
        or another library's keyword is used (``scale_factor=``, ``size=``: the message names
        the dmlops argument).
    ValueError
        ``scales``, offsets or ``output_sizes`` with another number of entries than
        ``x.ndim`` or ``x.ndim - 2`` (or a single value for an array of fewer than 3
        dimensions), a scale <= 0 or not finite, an unknown mode or rounding direction,
        output sizes < 1, or an unusable ``out``.

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

    As PyTorch writes it: one scale, or one per spatial axis, or the spatial output sizes (N
    and C are copied):

    >>> image = np.zeros((1, 3, 4, 6), np.float32)
    >>> dmlops.resample(image, 2, "linear").shape, dmlops.resample(image, (0.5, 2)).shape
    ((1, 3, 8, 12), (1, 3, 2, 12))
    >>> dmlops.resample(image, output_sizes=(5, 5)).shape
    (1, 3, 5, 5)
    """
    return _resample_call(x, scales, interpolation_mode, input_pixel_offsets, output_pixel_offsets, rounding_direction,
                          antialiased, output_sizes, out, ())


def resample_in_order(x: np.ndarray, scales: Sequence[float], pass_order: Sequence[int], *,
                      input_pixel_offsets: Sequence[float], output_pixel_offsets: Sequence[float],
                      rounding_direction: Optional[str], antialiased: bool, output_sizes: Sequence[int],
                      out: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`resample` with linear interpolation's passes over the resampled axes in
    ``pass_order`` rather than the cheapest order for ``x``'s sizes (axes copied unchanged are
    skipped; every resampled axis once). Each pass rounds, so a part of a larger array resampled
    in the larger call's order has that call's bits: ``dmlops.dask`` runs a chunk in one call so.
    Arguments as :func:`resample`'s, one per dimension."""
    return _resample_call(x, scales, "linear", input_pixel_offsets, output_pixel_offsets, rounding_direction,
                          antialiased, output_sizes, out, tuple(pass_order))


def _resample_call(x: Any, scales: Any, interpolation_mode: Any, input_pixel_offsets: Any, output_pixel_offsets: Any,
                   rounding_direction: Any, antialiased: Any, output_sizes: Any, out: Any,
                   pass_order: tuple) -> np.ndarray:
    """The one call of :func:`resample` and :func:`resample_in_order`: arguments checked, then
    the kernel (``pass_order`` empty: its cheapest order)."""
    array = as_array(x, "Resample: input")
    mode, rounding, factors, in_offsets, out_offsets, antialiased, sizes = resample_args(
        array.shape, scales, interpolation_mode, input_pixel_offsets, output_pixel_offsets, rounding_direction,
        antialiased, output_sizes)
    result = check_out(out, array.dtype, "Resample: out")
    return _core.resample("Resample", array, result, sizes, mode, rounding, factors, in_offsets, out_offsets,
                          antialiased, pass_order)


def resample_args(shape: tuple, scales: Any, interpolation_mode: Any, input_pixel_offsets: Any,
                  output_pixel_offsets: Any, rounding_direction: Any, antialiased: Any, output_sizes: Any) -> tuple:
    """:func:`resample`'s arguments for an input of this shape, checked and given one entry per
    axis (offsets may stay None: the defaults); also for dmlops.dask.resample.

    Returns (mode, rounding, scales, input offsets, output offsets, antialiased, output sizes)."""
    op = "Resample"
    rank = len(shape)
    mode = INTERPOLATION_MODE.parse(interpolation_mode, f"{op}: interpolation_mode")
    rounding = None if rounding_direction is None else AXIS_DIRECTION.parse(rounding_direction,
                                                                            f"{op}: rounding_direction")
    sizes = None if output_sizes is None else _axes(output_sizes, rank, f"{op}: output_sizes", integer, int_tuple,
                                                    (shape[0], shape[1]) if rank >= 2 else (1, 1))
    if scales is None:
        if sizes is None:
            raise TypeError(f"{op}: give scales or output_sizes (scales are then output / input per axis)")
        factors = tuple(o / i if i else 1.0 for o, i in zip(sizes, shape))
    else:
        factors = _axes(scales, rank, f"{op}: scales", real, float_tuple, (1.0, 1.0))
    in_offsets, out_offsets = (
        None if offsets is None else _axes(offsets, rank, f"{op}: {name}", real, float_tuple, (default, default))
        for offsets, name, default in ((input_pixel_offsets, "input_pixel_offsets", 0.5),
                                       (output_pixel_offsets, "output_pixel_offsets", -0.5)))
    antialiased = flag(antialiased, f"{op}: antialiased")
    return mode, rounding, factors, in_offsets, out_offsets, antialiased, sizes
