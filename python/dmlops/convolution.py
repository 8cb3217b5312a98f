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
from typing import Any, Optional, Sequence, Union, cast

import numpy as np

from . import _core
from ._activation import Activation
from ._args import Enum, as_array, check_out, int_tuple
from ._descriptor import Descriptor, Field
from ._tensor import TensorDesc
from ._tensor import tensor_spec as _spec

MODE = Enum("CONVOLUTION_MODE", ("cross_correlation", "convolution"),
            hints={"correlation": "the name is 'cross_correlation'", "conv": "the name is 'convolution'"})
DIRECTION = Enum("CONVOLUTION_DIRECTION", ("forward", "backward"),
                 hints={"transposed": "a transposed convolution is 'backward'",
                        "transpose": "a transposed convolution is 'backward'"})

_ARRAYS = ("strides", "dilations", "start_padding", "end_padding", "output_padding")
_ActivationArg = Union[None, str, Activation]


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


def _arrays(values: dict[str, Optional[Sequence[int]]], D: Optional[int]) -> _Arrays:
    """The five per-dimension arrays as tuples; an omitted one is D ones (strides, dilations)
    or D zeros, or empty when D is unknown (the C++ layer then reports the rank)."""
    result = []
    for name in _ARRAYS:
        v = values[name]
        if v is None:
            result.append((1 if name in ("strides", "dilations") else 0,) * (D or 0))
        else:
            result.append(int_tuple(v, f"Convolution: {name}"))
    return cast(_Arrays, tuple(result))


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
        ``(1, OutC, 1, ...)``.
    mode : str
        ``'cross_correlation'`` (default) or ``'convolution'`` (kernel flipped).
    direction : str
        ``'forward'`` (default) or ``'backward'`` (transposed).
    strides, dilations : sequence of int, optional
        Per spatial dimension, >= 1; default all 1.
    start_padding, end_padding : sequence of int, optional
        Per spatial dimension, >= 0; default all 0.
    output_padding : sequence of int, optional
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
        A tensor field is not a TensorDesc, ``fused_activation`` is not a name or an
        Activation, or an array field holds non-integers.
    ValueError
        A dtype other than float16/32/64, mixed dtypes or ranks, a rank other than 3 to 5,
        per-dimension arrays of the wrong length, strides or dilations < 1, paddings < 0,
        a nonzero ``output_padding`` forward, ``group_count`` not dividing the channels, a filter or bias of the wrong shape, a
        kernel larger than the padded input, or an ``output`` that does not match.

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
                 strides: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None,
                 start_padding: Optional[Sequence[int]] = None, end_padding: Optional[Sequence[int]] = None,
                 output_padding: Optional[Sequence[int]] = None, group_count: int = 1,
                 fused_activation: _ActivationArg = None, output: Optional[TensorDesc] = None):
        op = self.NAME
        for value, name, optional in ((input, "input", False), (filter, "filter", False), (bias, "bias", True),
                                      (output, "output", True)):
            if not (optional and value is None) and not isinstance(value, TensorDesc):
                raise TypeError(f"{op}: {name} must be a dmlops.TensorDesc, not {type(value).__name__}")
        mode = MODE.parse(mode, f"{op}: mode")
        direction = DIRECTION.parse(direction, f"{op}: direction")
        D = len(input.sizes) - 2
        arrays = _arrays(dict(strides=strides, dilations=dilations, start_padding=start_padding,
                              end_padding=end_padding, output_padding=output_padding), D if D > 0 else None)
        groups = _group_count(group_count)
        activation = Activation.of(fused_activation, f"{op}: fused_activation")
        sizes = _core.convolution_infer(_spec(input), _spec(filter), _spec(bias), _spec(output), mode, direction,
                                        *arrays, groups, _activation_spec(activation))
        self._values = {
            "input": input, "filter": filter, "bias": bias,
            "output": output if output is not None else TensorDesc(input.dtype, sizes),
            "mode": mode, "direction": direction, **dict(zip(_ARRAYS, arrays)),
            "group_count": groups, "fused_activation": activation,
        }

    def __call__(self, x: np.ndarray, filter: np.ndarray, bias: Optional[np.ndarray] = None, *,
                 out: Optional[np.ndarray] = None) -> np.ndarray:
        """Run on arrays matching ``input``, ``filter`` and ``bias`` (given exactly when the
        descriptor has one); any strides. Returns a new C-contiguous array, or ``out``."""
        op = self.NAME
        x = self._input_array(x)
        filter = self._input_array(filter, "filter")
        if (bias is None) != (self.bias is None):
            raise ValueError(f"{op}: the descriptor {'has a' if self.bias is not None else 'has no'} bias tensor "
                             f"but the call passes {'none' if bias is None else 'one'}")
        if bias is not None:
            bias = self._input_array(bias, "bias")
        check_out(out, x.dtype, f"{op}: out")
        v = self._values
        arrays = cast(_Arrays, tuple(v[name] for name in _ARRAYS))
        return _core.convolution(x, filter, bias, out, v["output"].sizes, v["mode"], v["direction"], *arrays,
                                 v["group_count"], _activation_spec(v["fused_activation"]))


def convolution(x: np.ndarray, filter: np.ndarray, bias: Optional[np.ndarray] = None, *,
                strides: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None,
                start_padding: Optional[Sequence[int]] = None, end_padding: Optional[Sequence[int]] = None,
                output_padding: Optional[Sequence[int]] = None, group_count: int = 1,
                mode: str = "cross_correlation", direction: str = "forward",
                fused_activation: _ActivationArg = None, output_sizes: Optional[Sequence[int]] = None,
                out: Optional[np.ndarray] = None) -> np.ndarray:
    """Convolve with DirectML CONVOLUTION semantics (see the module docstring).

    Parameters
    ----------
    x : numpy.ndarray
        ``(N, InC, *S)``, 1 to 3 spatial dimensions; float16, float32 or float64; any strides
        (e.g. a channels-last view), read in place.
    filter : numpy.ndarray
        forward ``(OutC, InC/G, *K)``; backward ``(InC, OutC/G, *K)``; x's dtype.
    bias : numpy.ndarray, optional
        ``(1, OutC, 1, ...)``, added before the activation.
    strides, dilations, start_padding, end_padding, output_padding, group_count, mode, direction
        As for :class:`ConvolutionDesc`.
    fused_activation : str or Activation, optional
        ``"relu"``, ``Activation("leaky_relu", alpha=0.2)``, ... (18 kinds).
    output_sizes : sequence of int, optional
        The output's spatial sizes (or its whole shape). backward: any sizes >= 1 (default the
        nominal ones); forward: must equal the computed sizes.
    out : numpy.ndarray, optional
        Written in place: exact shape and dtype, writable, any strides, no overlap with the
        inputs. Untouched when the call is rejected.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous ``(N, OutC, *Out)`` array of x's dtype.

    Raises
    ------
    TypeError
        An input is not a numpy array, the dtypes differ or are not float16/32/64, or an
        argument has the wrong type.
    ValueError
        Any rule listed for :class:`ConvolutionDesc` is broken, or ``out`` is unusable; the
        message names the field.

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
    """
    op = "Convolution"
    x = as_array(x, f"{op}: input")
    filter = as_array(filter, f"{op}: filter")
    if bias is not None:
        bias = as_array(bias, f"{op}: bias")
    mode = MODE.parse(mode, f"{op}: mode")
    direction = DIRECTION.parse(direction, f"{op}: direction")
    arrays = _arrays(dict(strides=strides, dilations=dilations, start_padding=start_padding,
                          end_padding=end_padding, output_padding=output_padding), None)
    groups = _group_count(group_count)
    activation = Activation.of(fused_activation, f"{op}: fused_activation")
    sizes = None
    if output_sizes is not None:
        sizes = int_tuple(output_sizes, f"{op}: output_sizes")
        if len(sizes) == x.ndim - 2 and filter.ndim >= 2:
            out_channels = filter.shape[0] if direction == "forward" else filter.shape[1] * groups
            sizes = (x.shape[0], out_channels) + sizes
    check_out(out, x.dtype, f"{op}: out")
    return _core.convolution(x, filter, bias, out, sizes, mode, direction, *arrays, groups,
                             _activation_spec(activation))
