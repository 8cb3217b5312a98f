"""Argument normalisation shared by every operator's Python face.

Everything here only checks and converts the *arguments*; tensor data is never touched
(it goes to the C++ kernels without a copy). Messages name the operator and the field,
e.g. ``Padding1: start_padding must contain integers, got 1.5``.
"""

from __future__ import annotations

import functools
import math
import itertools
import reprlib
import operator
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, TypeVar, Union, cast

import numpy as np

Number = Union[int, float, bool]
_F = TypeVar("_F", bound=Callable[..., Any])


def _type_name(x: Any) -> str:
    return type(x).__name__


# DLPack device types whose memory the CPU reads: kDLCPU, kDLCUDAHost (pinned), kDLROCMHost.
_HOST_DEVICES = (1, 3, 11)


def _from_dlpack(x: Any, what: str) -> np.ndarray:
    """A DLPack exporter's memory as a numpy array (no copy); TypeError when it is not in host
    memory or numpy cannot read it (a tensor that requires grad, a dtype numpy lacks such as
    bfloat16)."""
    device = tuple(x.__dlpack_device__())
    if int(device[0]) not in _HOST_DEVICES:
        raise TypeError(f"{what}: a {_type_name(x)} on DLPack device {device} is not in CPU memory; dmlops runs "
                        f"on the CPU (copy it there first, e.g. tensor.cpu())")
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError, ValueError) as error:
        raise TypeError(f"{what}: a {_type_name(x)} is read through DLPack without a copy, and numpy cannot read "
                        f"this one ({error}); dmlops runs on CPU memory of its 11 dtypes and bool") from None


def _not_masked(x: np.ndarray, what: str) -> np.ndarray:
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{what} is a masked array; dmlops has no masks and would drop it: pass x.filled(value) "
                        f"or x.data")
    return x


def as_array(x: Any, what: str) -> np.ndarray:
    """An input array_like as a numpy array, converted as ``np.asarray`` does and never copied
    when it already is an array: a numpy array as it is, a tensor exporting DLPack (PyTorch,
    JAX, ... on the CPU) through ``np.from_dlpack``, anything else (the buffer protocol,
    ``__array__``, lists, tuples, scalars) through ``np.asarray``. Masked arrays are refused
    (TypeError): their mask would be dropped."""
    if isinstance(x, np.ndarray):
        return _not_masked(x, what)
    if x is None:
        raise TypeError(f"{what} must be array_like, not None")
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _from_dlpack(x, what)
    try:
        return _not_masked(np.asarray(x), what)
    except ValueError as error:  # ragged nested sequences
        raise ValueError(f"{what} is not an array: {error}") from None


def as_out(out: Any, what: str) -> Optional[np.ndarray]:
    """``out=`` as a numpy array sharing its memory, so that writing it writes ``out``: a numpy
    array as it is, a DLPack exporter through ``np.from_dlpack``, a buffer-protocol object
    through ``memoryview``. Anything that would be copied (a list, a scalar) is a TypeError."""
    if out is None or isinstance(out, np.ndarray):
        return out if out is None else _not_masked(out, what)
    if hasattr(out, "__dlpack__") and hasattr(out, "__dlpack_device__"):
        return _from_dlpack(out, what)
    try:
        return np.asarray(memoryview(out))
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an array to write in place (a numpy.ndarray, or a CPU tensor exporting "
                        f"DLPack or the buffer protocol), not {_type_name(out)}") from None


def keyword_hints(op: str, hints: Mapping[str, str]) -> Callable[[_F], _F]:
    """Decorates an operator function so that another library's keyword (``stride=``) is a
    TypeError naming the dmlops argument it corresponds to, instead of Python's bare
    "unexpected keyword argument"."""
    def decorate(function: _F) -> _F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:  # nothing to check on the way in: a foreign keyword fails the call before it runs
                return function(*args, **kwargs)
            except TypeError:
                foreign = sorted(kwargs.keys() & hints.keys())
                if not foreign:
                    raise
                raise TypeError(f"{op}: {function.__name__}() has no argument {foreign[0]!r}; "
                                f"{hints[foreign[0]]}") from None
        return cast(_F, checked)
    return decorate


def is_integer(value: Any) -> bool:
    """A Python or numpy integer (not a bool): a scalar where a per-axis sequence may stand."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def per_axis(values: Any, count: int, what: str, default: Optional[int] = None) -> tuple[int, ...]:
    """A per-axis integer argument: an integer is repeated on each of ``count`` axes, None is
    ``default`` on each (when there is one), a sequence is taken as it is (its length is checked
    by the C++ layer, which names the rank)."""
    kind = type(values)
    if (kind is tuple or kind is list) and _only_ints(values):  # the common cases first
        return tuple(values)
    if values is None and default is not None:
        return (default,) * max(count, 0)
    if kind is int or is_integer(values):
        return (int(values),) * max(count, 0)
    return int_tuple(values, what)


class _Shown(reprlib.Repr):
    """reprlib's bounded repr (depth, length), with integers too long to print in full (past
    Python's 4300-digit limit) given by their size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, 40, 40, 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_SHOWN = _Shown()


def shown(value: Any) -> str:
    """A user's value for an error message: its repr, cut short (nesting 3 deep, about 40
    characters per item), so that no hostile value makes the message itself fail or explode."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # a user type whose __repr__ raises
        return f"<a {type(value).__name__}>"


# Tensors have at most 8 dimensions, so no per-axis argument has more entries.
MAX_ENTRIES = 8


def _entries(values: Iterable[Any], what: str) -> list[Any]:
    """The entries of a per-axis argument, refused once there are more than MAX_ENTRIES: counted
    before anything is converted, and an iterable without a length is read no further than one
    entry past the limit (``range(10**9)`` or an endless generator costs nothing)."""
    try:
        count = len(values)  # type: ignore[arg-type]
    except OverflowError:  # a length past sys.maxsize: range(2**64)
        raise ValueError(f"{what} has more than 2^63 entries; at most {MAX_ENTRIES}") from None
    except TypeError:  # no length: read one entry past the limit, no further
        count = 0
    if count > MAX_ENTRIES:
        raise ValueError(f"{what} has {count} entries; at most {MAX_ENTRIES}")
    entries = list(itertools.islice(values, MAX_ENTRIES + 1))
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"{what} has more than {MAX_ENTRIES} entries; at most {MAX_ENTRIES}")
    return entries


_INT = frozenset({int})


def _only_ints(values: tuple[Any, ...] | list[Any]) -> bool:
    """A tuple or list of at most MAX_ENTRIES Python ints (bools are not ints here). A set test
    over the entries' types, not all() over a generator: 0.3 us, not 0.8, of a small operator's
    call, which takes a few of these (a 4x4 unfold took 15 us, 3.5 of them in C++)."""
    return len(values) <= MAX_ENTRIES and _INT.issuperset(map(type, values))


def int_tuple(values: Any, what: str) -> tuple[int, ...]:
    """A sequence of integers (Python or numpy) as a tuple of Python ints."""
    # The common case first, in a fraction of the checks below (which cost more than the C++
    # call of a small operator).
    if (type(values) is tuple or type(values) is list) and _only_ints(values):
        return tuple(values)
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of integers, not {type(values).__name__}")
    result = []
    for v in _entries(values, what):
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{what} must contain integers, got {shown(v)}")
        try:
            result.append(operator.index(v))
        except TypeError:
            raise TypeError(f"{what} must contain integers, got {shown(v)}") from None
    return tuple(result)


def float_tuple(values: Any, what: str) -> tuple[float, ...]:
    """A sequence of real numbers (Python or numpy ints and floats, not bools) as Python floats."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of numbers, not {type(values).__name__}")
    result = []
    for v in _entries(values, what):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{what} must contain numbers, got {shown(v)}")
        try:
            result.append(float(v))
        except OverflowError:
            raise ValueError(f"{what} entry {shown(v)} is too large for a FLOAT") from None
    return tuple(result)


def real(value: Any, what: str) -> float:
    """A Python or numpy int or float (not bool) as a Python float; ValueError for an integer
    too large for a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{what} {shown(value)} is too large for a FLOAT") from None


def flag(value: Any, what: str) -> bool:
    """A Python or numpy bool (a DirectML BOOL); 0 and 1 are not accepted in its place."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return bool(value)
def integer(value: Any, what: str) -> int:
    """A Python or numpy integer (not bool) as a Python int."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None


def number(value: Any, what: str) -> Number:
    """A Python or numpy scalar as a Python int, float or bool."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    raise TypeError(f"{what} must be an int, float or bool, not {type(value).__name__}")


class Enum:
    """A DirectML enum: canonical short names <-> ``DML_<PREFIX>_<NAME>`` names.

    ``parse`` accepts the short name (``'reflection'``), the DirectML name with or without
    its prefix (``'DML_PADDING_MODE_REFLECTION'``, ``'REFLECTION'``), in any case; unknown
    names raise ValueError with the valid ones and, where another library uses the name for
    something, a hint (``'reflect'`` is numpy's and PyTorch's name for ``'reflection'``).
    """

    def __init__(self, prefix: str, names: Iterable[str], hints: Optional[Mapping[str, str]] = None):
        self.prefix = prefix
        self.names = tuple(names)
        self._names = frozenset(self.names)
        self.hints = dict(hints or {})

    def parse(self, value: Any, what: str) -> str:
        if type(value) is str and value in self._names:  # a canonical name, as most calls pass it
            return value
        if not isinstance(value, str):
            raise TypeError(f"{what} must be a string, one of {', '.join(self.names)}")
        key = value.lower()
        for p in ("dml_" + self.prefix.lower() + "_", self.prefix.lower() + "_"):
            if key.startswith(p):
                key = key[len(p):]
        if key in self.names:
            return key
        hint = self.hints.get(value.lower())
        raise ValueError(
            f"{what} {value!r} is unknown; expected one of {', '.join(self.names)}"
            + (f" ({hint})" if hint else "")
        )

    def dml(self, name: str) -> str:
        return f"DML_{self.prefix}_{name.upper()}"


def check_bool_value(x: np.ndarray, value: Number, what: str) -> None:
    """A bool array is uint8 storage, but only 0 and 1 are bools: refuse to write anything else."""
    if x.dtype == np.bool_ and value not in (0, 1):
        raise ValueError(f"{what} {value!r} is not representable in bool (0, 1, False or True)")


def check_out(out: Any, dtype: np.dtype, what: str) -> Optional[np.ndarray]:
    """``out=`` as an array (:func:`as_out`) of exactly ``dtype``, or None (shape, writability
    and overlap are checked by the C++ layer before it writes anything)."""
    array = as_out(out, what)
    if array is not None and array.dtype != dtype:
        raise TypeError(f"{what} has dtype {array.dtype} but the result is {dtype}")
    return array


def json_number(value: Any) -> Any:
    """A float for strict JSON: a non-finite one as ``"nan"``, ``"inf"`` or ``"-inf"``, as
    DxDispatch writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def from_json_number(value: Any) -> Any:
    """:func:`json_number`'s inverse (other values unchanged)."""
    if isinstance(value, str) and value.lower() in ("nan", "inf", "-inf", "+inf"):
        return float(value)
    return value
