"""Convolution: ``dmlops.convolution`` and ``ConvolutionDesc`` (DML_CONVOLUTION_OPERATOR_DESC).
The full semantics: docs/semantics/convolution.md.

1 to 3 spatial dimensions (tensors of rank 3, 4, 5), groups, strides, dilations, asymmetric
padding, an optional bias and a fused activation, in two directions:

- ``forward``: ``x (N, InC, *S)`` with ``filter (OutC, InC/G, *K)`` gives ``(N, OutC, *Out)``,
  ``Out = (S + start + end - ((K-1)*dilation + 1)) // stride + 1``. With ``cross_correlation``
  this is ``torch.nn.functional.conv{1,2,3}d`` (whose padding is symmetric).
- ``backward`` (transposed): ``filter (InC, OutC/G, *K)``; output sizes from ``output_sizes``
  or the nominal ``(S-1)*stride + (K-1)*dilation + 1 - start - end + output_padding``. With
  ``cross_correlation`` this is the exact adjoint of ``forward`` and equals
  ``torch.nn.functional.conv_transpose{1,2,3}d``.

``mode="convolution"`` flips the kernel on every spatial axis. The bias (``(1, OutC, 1...)``)
is added before the activation. float16 is computed in float32 and rounded once; float32 and
float64 in their own type. Results do not depend on the thread count.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional, Sequence, TypeVar, Union, cast

import numpy as np
import numpy.typing as npt

from . import _core
from ._activation import Activation
from ._args import Enum, as_array, check_out, keyword_hints, per_axis
from ._descriptor import Descriptor, Field
from ._plan import Plan
from ._tensor import TensorDesc
from ._tensor import tensor_spec as _spec

MODE = Enum("CONVOLUTION_MODE", ("cross_correlation", "convolution"),
            hints={"correlation": "the name is 'cross_correlation'", "conv": "the name is 'convolution'"})
DIRECTION = Enum("CONVOLUTION_DIRECTION", ("forward", "backward"),
                 hints={"transposed": "a transposed convolution is 'backward'",
                        "transpose": "a transposed convolution is 'backward'"})

_ARRAYS = ("strides", "dilations", "start_padding", "end_padding", "output_padding")
# (name, its name in messages, its default), worked out once: a small call's Python costs as
# much as its C++.
_ARRAY_FIELDS = tuple((name, f"Convolution: {name}", 1 if name in ("strides", "dilations") else 0) for name in _ARRAYS)
_ActivationArg = Union[None, str, Activation]
_PerAxis = Optional[Union[int, Sequence[int]]]


def _group_count(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("Convolution: group_count must be an integer, not bool")
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"Convolution: group_count must be an integer, not {type(value).__name__}") from None
    if not -2**63 <= count < 2**32:  # the C++ layer's own checks need it in 64 bits
        raise ValueError(f"Convolution: group_count is {count}; GroupCount is a UINT, at most {2**32 - 1}")
    return count


_Dims = tuple[int, ...]
_Arrays = tuple[_Dims, _Dims, _Dims, _Dims, _Dims]  # in _ARRAYS order


def _arrays(values: dict[str, _PerAxis], D: int) -> _Arrays:
    """The five per-dimension arrays as tuples of D entries: an int is repeated, an omitted one
    is ones (strides, dilations) or zeros (a D < 1 gives empty ones; the C++ layer then reports
    the rank)."""
    arrays = []
    for name, what, default in _ARRAY_FIELDS:
        # An empty sequence also means the default (DirectML's optional arrays): spelled out, so
        # that a descriptor's fields, its DimensionCount and its JSON agree.
        array = per_axis(values[name], D, what, default)
        arrays.append(array if array or D < 1 else (default,) * D)
    return cast(_Arrays, tuple(arrays))


_T = TypeVar("_T")


def _naming_swaps(call: Callable[[], _T], x: tuple[int, ...], filter: tuple[int, ...]) -> _T:
    """``call()``, whose ValueError gets a hint when x and filter look swapped: the filter is
    larger than x on every spatial axis (an image passed as the filter, a kernel as the image)."""
    try:
        return call()
    except ValueError as error:
        if not (len(x) == len(filter) >= 3 and all(k > s for s, k in zip(x[2:], filter[2:]))):
            raise
        raise ValueError(f"{error} (the filter {filter} is spatially larger than the input {x}: are they swapped? "
                         f"the order is (x, filter))") from None


def _bias_view(bias: np.ndarray, rank: int, out_channels: Optional[int]) -> np.ndarray:
    """A ``(OutC,)`` bias (PyTorch's shape) as the ``(1, OutC, 1, ...)`` view DirectML
    describes (no copy); other ranks are left for the C++ layer to check."""
    if bias.ndim != 1 or rank < 3:
        return bias
    if out_channels is not None and bias.shape[0] != out_channels:
        expected = (1, out_channels) + (1,) * (rank - 2)
        raise ValueError(f"Convolution: bias has shape {bias.shape} but there are {out_channels} output channels: "
                         f"it must be ({out_channels},) or {expected}")
    return bias.reshape((1, bias.shape[0]) + (1,) * (rank - 2))


def _activation_spec(activation: Optional[Activation]) -> Optional[tuple[str, tuple[float, ...]]]:
    return None if activation is None else activation._spec()


class ConvolutionDesc(Descriptor):
    """DML_CONVOLUTION_OPERATOR_DESC: forward or transposed convolution with groups, bias and a
    fused activation (see the module docstring for the formulas).

    Parameters
    ----------
    input : TensorDesc
        ``(N, InC, *S)`` with 1 to 3 spatial dimensions; float16, float32 or float64.
    filter : TensorDesc
        forward ``(OutC, InC/G, *K)``; backward ``(InC, OutC/G, *K)``. Same dtype and rank.
    bias : TensorDesc, optional
        ``(1, OutC, 1, ...)`` (DirectML's shape; calls also take a ``(OutC,)`` array).
    mode : str
        ``'cross_correlation'`` (default) or ``'convolution'`` (kernel flipped).
    direction : str
        ``'forward'`` (default) or ``'backward'`` (transposed).
    strides, dilations : int or sequence of int, optional
        Per spatial dimension (an int for every one), >= 1; default all 1.
    start_padding, end_padding : int or sequence of int, optional
        Per spatial dimension (an int for every one), >= 0; default all 0.
    output_padding : int or sequence of int, optional
        Backward only: added to the nominal output size's end; default all 0 (must be 0 forward).
    group_count : int
        >= 1, divides InC and OutC; ``InC`` for depthwise.
    fused_activation : str or Activation, optional
        Applied to the biased result, e.g. ``"relu"`` or ``Activation("leaky_relu", alpha=0.2)``.
    output : TensorDesc, optional
        forward: checked against the computed sizes. backward: any spatial sizes >= 1 (default
        the nominal ones).

    Raises
    ------
    TypeError
        A tensor field is not a TensorDesc, a dtype other than float16/32/64 or mixed dtypes,
        ``fused_activation`` is not a name or an Activation, or an array field holds
        non-integers.
    ValueError
        Mixed ranks, a rank other than 3 to 5, per-dimension arrays of the wrong length,
        strides or dilations < 1, paddings < 0, a nonzero ``output_padding`` forward,
        ``group_count`` not dividing the channels, a filter or bias of the wrong shape, a
        kernel larger than the padded input (with a hint when input and filter look swapped),
        or an ``output`` that does not match.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3, 3)), dmlops.TensorDesc("float32", (1, 1, 2, 2)))
    >>> d.output.sizes
    (1, 1, 2, 2)
    >>> d(np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3), np.full((1, 1, 2, 2), 0.5, np.float32))[0, 0]
    array([[ 6.,  8.],
           [12., 14.]], dtype=float32)
    """

    NAME = "Convolution"
    OPERATOR = "CONVOLUTION"
    filter: TensorDesc
    bias: Optional[TensorDesc]
    mode: str
    direction: str
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]
    output_padding: tuple[int, ...]
    group_count: int
    fused_activation: Optional[Activation]
    FIELDS = (
        Field("input", "InputTensor", "tensor"),
        Field("filter", "FilterTensor", "tensor"),
        Field("bias", "BiasTensor", "tensor", optional=True),
        Field("output", "OutputTensor", "tensor"),
        Field("mode", "Mode", "enum", MODE),
        Field("direction", "Direction", "enum", DIRECTION),
        Field("strides", "Strides", "dims"),
        Field("dilations", "Dilations", "dims"),
        Field("start_padding", "StartPadding", "dims"),
        Field("end_padding", "EndPadding", "dims"),
        Field("output_padding", "OutputPadding", "dims"),
        Field("group_count", "GroupCount", "uint"),
        Field("fused_activation", "FusedActivation", "activation", optional=True),
    )

    def __init__(self, input: TensorDesc, filter: TensorDesc, bias: Optional[TensorDesc] = None, *,
                 mode: str = "cross_correlation", direction: str = "forward",
                 strides: _PerAxis = None, dilations: _PerAxis = None,
                 start_padding: _PerAxis = None, end_padding: _PerAxis = None,
                 output_padding: _PerAxis = None, group_count: int = 1,
                 fused_activation: _ActivationArg = None, output: Optional[TensorDesc] = None):
        op = self.NAME
        for value, name, optional in ((input, "input", False), (filter, "filter", False), (bias, "bias", True),
                                      (output, "output", True)):
            if not (optional and value is None) and not isinstance(value, TensorDesc):
                raise TypeError(f"{op}: {name} must be a dmlops.TensorDesc, not {type(value).__name__}")
        mode = MODE.parse(mode, f"{op}: mode")
        direction = DIRECTION.parse(direction, f"{op}: direction")
        arrays = _arrays(dict(strides=strides, dilations=dilations, start_padding=start_padding,
                              end_padding=end_padding, output_padding=output_padding), input.rank - 2)
        groups = _group_count(group_count)
        activation = Activation.of(fused_activation, f"{op}: fused_activation")
        sizes = _naming_swaps(lambda: _core.convolution_infer(_spec(input), _spec(filter), _spec(bias), _spec(output),
                                                              mode, direction, *arrays, groups,
                                                              _activation_spec(activation)),
                              input.sizes, filter.sizes)
        self._values = {
            "input": input, "filter": filter, "bias": bias,
            "output": output if output is not None else TensorDesc(input.dtype, sizes),
            "mode": mode, "direction": direction, **dict(zip(_ARRAYS, arrays)),
            "group_count": groups, "fused_activation": activation,
        }

    def __call__(self, x: npt.ArrayLike, filter: npt.ArrayLike, bias: Optional[npt.ArrayLike] = None, *,
                 out: Optional[npt.ArrayLike] = None, algorithm: Optional[str] = None) -> np.ndarray:
        """Run on array_likes matching ``input``, ``filter`` and ``bias`` (given exactly when the
        descriptor has one; a ``(OutC,)`` bias is read as ``(1, OutC, 1, ...)``); any strides.
        ``algorithm`` forces one of :func:`convolution_algorithms` (a ValueError saying why when
        it does not apply to this layer). Returns a new C-contiguous array, or ``out``."""
        x = self._input_array(x)
        filter, bias = self._filter_and_bias(filter, bias, "call")
        result = check_out(out, x.dtype, f"{self.NAME}: out")
        return _core.convolution(x, filter, bias, result, self._values["output"].sizes, *self._spec(),
                                 _algorithm(algorithm))

    def plan(self, *, algorithm: Optional[str] = None) -> Plan:
        """How a call computes on the calling thread's thread count: the algorithm (the first of
        :func:`convolution_algorithms` that applies to this layer, or ``algorithm``), why, the
        instruction set, the geometry rewrite, the tiles and blocking, the task count and the
        threads. The same code chooses for the calls, so the plan is what they do.

        >>> import dmlops
        >>> d = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 64, 56, 56)),
        ...                            dmlops.TensorDesc("float32", (64, 64, 3, 3)), start_padding=1, end_padding=1)
        >>> d.plan().algorithm
        'direct'
        """
        v = self._values
        return Plan._of(_core.convolution_plan(
            _spec(v["input"]), _spec(v["filter"]), _spec(v["bias"]), _spec(v["output"]), *self._spec(),
            _algorithm(algorithm)))

    def prepare(self, filter: npt.ArrayLike, bias: Optional[npt.ArrayLike] = None, *,
                algorithm: Optional[str] = None) -> PreparedConvolution:
        """This convolution with ``filter`` (and ``bias``) fixed: a callable ``f(x, out=None)``
        equal bit for bit to ``self(x, filter, bias, out=out)``. The filter and bias are copied
        (later changes to the caller's arrays do not reach it), the algorithm is chosen once
        (``algorithm`` forces one) and, for the ``gemm`` and ``direct`` algorithms, the filter is
        packed once into their layout instead of on every call. It pays for many calls with the
        same filter where packing is a visible share of a call: small inputs against large
        filters (a 3x3 512-channel layer at 7x7, a batch of one), and most layers on many threads
        (on a 16-core Xeon at 16 threads ResNet-50's 3x3 and 1x1 layers took 0.79-0.93x the time
        prepared)."""
        filter, bias = self._filter_and_bias(filter, bias, "prepare")
        filter = np.array(filter, order="C", copy=True)
        bias = None if bias is None else np.array(bias, order="C", copy=True)
        v = self._values
        return PreparedConvolution(self, _core.convolution_prepare(
            _spec(v["input"]), filter, bias, v["output"].sizes, *self._spec(), _algorithm(algorithm)))

    def _filter_and_bias(self, filter: npt.ArrayLike, bias: Optional[npt.ArrayLike],
                         call: str) -> tuple[np.ndarray, Optional[np.ndarray]]:
        op = self.NAME
        filter = self._input_array(filter, "filter")
        if (bias is None) != (self.bias is None):
            raise ValueError(f"{op}: the descriptor {'has a' if self.bias is not None else 'has no'} bias tensor "
                             f"but the {call} passes {'none' if bias is None else 'one'}")
        if bias is not None:
            assert self.bias is not None  # checked above
            bias = self._input_array(_bias_view(as_array(bias, f"{op}: bias"), self.input.rank, self.bias.sizes[1]),
                                     "bias")
        return filter, bias

    def _spec(self) -> tuple[Any, ...]:
        """mode, direction, the five arrays, group_count and the activation, as _core takes them."""
        v = self._values
        return (v["mode"], v["direction"], *(v[name] for name in _ARRAYS), v["group_count"],
                _activation_spec(v["fused_activation"]))


def _algorithm(value: Optional[str]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"Convolution: algorithm must be a str, not {type(value).__name__}")
    return value


def convolution_algorithms() -> list[str]:
    """The convolution algorithms, in the order a call tries them: it takes the first that applies
    to its layer (``DMLOPS_CONVOLUTION_ALGORITHM`` or ``algorithm=`` forces one).

    Returns
    -------
    list of str
        ``depthwise_lanes`` (depthwise layers, channels in the vector lanes), ``depthwise_rows``
        (depthwise, vectors along the rows), ``direct`` (float32/float16 direct tiles, no im2col),
        ``gemm`` (any forward layer: im2col and a packed GEMM), ``backward_phases`` (strided
        transposed float32 layers as one forward layer per output phase) and ``backward_scatter``
        (any transposed layer: a GEMM and a col2im scatter).

    Examples
    --------
    >>> import dmlops
    >>> dmlops.convolution_algorithms()[:4]
    ['depthwise_lanes', 'depthwise_rows', 'direct', 'gemm']
    """
    return list(_core.convolution_algorithms())


class PreparedConvolution:
    """A :class:`ConvolutionDesc` with its filter (and bias) fixed: ``f(x, out=None)`` runs it on
    an input matching the descriptor's, bit for bit as ``desc(x, filter, bias, out=out)``. Made by
    :meth:`ConvolutionDesc.prepare`, which copies the filter and bias and packs the filter once
    for the ``gemm`` and ``direct`` algorithms.

    Parameters
    ----------
    desc : ConvolutionDesc
        The descriptor.
    prepared
        The extension's prepared convolution (from :meth:`ConvolutionDesc.prepare`).

    Raises
    ------
    TypeError
        A call's ``x`` has another dtype than the descriptor's input, or ``out`` the wrong dtype.
    ValueError
        A call's ``x`` has another shape than the descriptor's input, or ``out`` is unusable
        (shape, read-only, overlapping ``x``).

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> d = dmlops.ConvolutionDesc(dmlops.TensorDesc("float32", (1, 1, 3, 3)),
    ...                            dmlops.TensorDesc("float32", (1, 1, 2, 2)))
    >>> w = np.full((1, 1, 2, 2), 0.5, np.float32)
    >>> f = d.prepare(w)
    >>> w[...] = 0  # f holds a copy
    >>> f(np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3))[0, 0]
    array([[ 6.,  8.],
           [12., 14.]], dtype=float32)
    """

    def __init__(self, desc: ConvolutionDesc, prepared: _core._PreparedConvolution):
        self.desc = desc
        self._prepared = prepared

    def __call__(self, x: npt.ArrayLike, *, out: Optional[npt.ArrayLike] = None) -> np.ndarray:
        x = self.desc._input_array(x)
        return cast(np.ndarray, self._prepared(x, check_out(out, x.dtype, f"{self.desc.NAME}: out")))

    def plan(self) -> Plan:
        """The plan its calls follow (see :meth:`ConvolutionDesc.plan`)."""
        return Plan._of(self._prepared.plan())

    @property
    def packed(self) -> bool:
        """Whether the filter was packed once (the ``gemm`` and ``direct`` algorithms)."""
        return bool(self._prepared.packed)

    def __repr__(self) -> str:
        return f"<PreparedConvolution {self.plan()}>"


_PADDING = ("dmlops pads with start_padding and end_padding (each an int or one entry per spatial axis; "
            "PyTorch's padding=p is start_padding=p, end_padding=p)")


@keyword_hints("Convolution", {
    "padding": _PADDING,
    "pads": _PADDING,
    "stride": "PyTorch's stride is strides (an int or one entry per spatial axis)",
    "dilation": "PyTorch's dilation is dilations (an int or one entry per spatial axis)",
    "groups": "PyTorch's groups is group_count",
    "group": "ONNX's group is group_count",
    "weight": "PyTorch's weight is filter",
    "output_size": "the output's spatial sizes are output_sizes",
    "kernel_size": "the kernel size comes from the filter's shape",
})
def convolution(x: npt.ArrayLike, filter: npt.ArrayLike, bias: Optional[npt.ArrayLike] = None, *,
                strides: _PerAxis = None, dilations: _PerAxis = None,
                start_padding: _PerAxis = None, end_padding: _PerAxis = None,
                output_padding: _PerAxis = None, group_count: int = 1,
                mode: str = "cross_correlation", direction: str = "forward",
                fused_activation: _ActivationArg = None, output_sizes: _PerAxis = None,
                out: Optional[npt.ArrayLike] = None) -> np.ndarray:
    """Convolve with DirectML CONVOLUTION semantics (see the module docstring).

    Parameters
    ----------
    x : array_like
        ``(N, InC, *S)``, 1 to 3 spatial dimensions; float16, float32 or float64; any strides
        (e.g. a channels-last view), read in place. Other array_likes are converted as
        ``np.asarray`` does; CPU tensors exporting DLPack (PyTorch, JAX) are read in place.
    filter : array_like
        forward ``(OutC, InC/G, *K)``; backward ``(InC, OutC/G, *K)``; x's dtype.
    bias : array_like, optional
        ``(1, OutC, 1, ...)`` as DirectML has it, or ``(OutC,)`` as PyTorch has it (read as
        the former, without a copy); added before the activation.
    strides, dilations, start_padding, end_padding, output_padding : int or sequence of int, optional
        One entry per spatial axis, or an int for every spatial axis; rules and defaults as
        for :class:`ConvolutionDesc`.
    group_count, mode, direction
        As for :class:`ConvolutionDesc`.
    fused_activation : str or Activation, optional
        ``"relu"``, ``Activation("leaky_relu", alpha=0.2)``, ... (18 kinds).
    output_sizes : int or sequence of int, optional
        The output's spatial sizes (an int for every spatial axis), or its whole shape.
        backward: any sizes >= 1 (default the nominal ones); forward: must equal the computed
        sizes.
    out : numpy.ndarray or CPU tensor, optional
        Written in place: exact shape and dtype, writable, any strides, no overlap with the
        inputs. Untouched when the call is rejected. A tensor exporting DLPack or the buffer
        protocol (a PyTorch tensor) is written in place too.

    Returns
    -------
    numpy.ndarray
        ``out`` (for a tensor ``out``, a numpy array sharing its memory), or a new
        C-contiguous ``(N, OutC, *Out)`` array of x's dtype.

    Raises
    ------
    TypeError
        An input is a masked array or not an array, the dtypes differ or are not
        float16/32/64, an argument has the wrong type, or another library's keyword is used
        (``stride=``, ``padding=``, ``groups=``: the message names the dmlops argument).
    ValueError
        Any rule listed for :class:`ConvolutionDesc` is broken (a kernel larger than the
        input says when x and filter look swapped; a bias of the wrong shape gives the
        expected one), or ``out`` is unusable; the message names the field.

    See Also
    --------
    ConvolutionDesc : the same operator as a descriptor.
    Activation : the fused activations and their parameters.

    Notes
    -----
    Compared with ``torch.nn.functional.conv{1,2,3}d`` / ``conv_transpose{1,2,3}d``: padding may
    differ at the start and the end of each axis (PyTorch pads symmetrically; ``'same'`` with a
    stride needs an ``F.pad`` first), a fused activation runs on the biased result, float16
    computes in float32 on any x86-64 CPU (PyTorch's CPU float16 convolution is slow or
    missing), and ``mode="convolution"`` flips the kernel. In backward, any output size >= 1 is
    accepted (the output tensor is authoritative, as in DirectML). ONNX Runtime's CPU Conv has
    asymmetric pads but runs float32 only on x86-64.

    Examples
    --------
    >>> import numpy as np, dmlops
    >>> x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> dmlops.convolution(x, np.full((1, 1, 2, 2), 0.5, np.float32)).ravel()
    array([ 6.,  8., 12., 14.], dtype=float32)
    >>> dmlops.convolution(np.ones((1, 1, 2), np.float32), np.ones((1, 1, 3), np.float32), direction="backward",
    ...                    strides=(2,)).ravel()
    array([1., 1., 2., 1., 1.], dtype=float32)

    As PyTorch writes it (``F.conv2d(x, w, b, stride=2, padding=1)``): ints for every spatial
    axis and a ``(OutC,)`` bias:

    >>> w, b = np.ones((2, 1, 3, 3), np.float32), np.array([0, 100], np.float32)
    >>> dmlops.convolution(x, w, b, strides=2, start_padding=1, end_padding=1)[0]
    array([[[ 12.,  16.],
            [ 24.,  28.]],
    <BLANKLINE>
           [[112., 116.],
            [124., 128.]]], dtype=float32)
    """
    op = "Convolution"
    xa = as_array(x, f"{op}: input")
    fa = as_array(filter, f"{op}: filter")
    mode = MODE.parse(mode, f"{op}: mode")
    direction = DIRECTION.parse(direction, f"{op}: direction")
    arrays = _arrays(dict(strides=strides, dilations=dilations, start_padding=start_padding,
                          end_padding=end_padding, output_padding=output_padding), xa.ndim - 2)
    groups = _group_count(group_count)
    activation = Activation.of(fused_activation, f"{op}: fused_activation")
    out_channels = (None if fa.ndim < 2 or groups < 1  # the C++ layer reports those
                    else fa.shape[0] if direction == "forward" else fa.shape[1] * groups)
    ba = None if bias is None else _bias_view(as_array(bias, f"{op}: bias"), xa.ndim, out_channels)
    sizes = None
    if output_sizes is not None:
        sizes = per_axis(output_sizes, xa.ndim - 2, f"{op}: output_sizes")
        if len(sizes) == xa.ndim - 2 and out_channels is not None:
            sizes = (xa.shape[0], out_channels) + sizes
    result = check_out(out, xa.dtype, f"{op}: out")
    return _naming_swaps(lambda: _core.convolution(xa, fa, ba, result, sizes, mode, direction, *arrays, groups,
                                                   _activation_spec(activation), ""), xa.shape, fa.shape)
