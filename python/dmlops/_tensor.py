"""TensorDesc: DirectML's DML_BUFFER_TENSOR_DESC as a Python value."""

from __future__ import annotations

from typing import Any, Optional, Sequence, overload

import numpy as np
import numpy.typing as npt

from . import _core
from ._args import as_array, int_tuple, shown

#: The 11 DirectML data types, by their numpy names.
DTYPES = ("float32", "float16", "float64", "uint8", "uint16", "uint32", "uint64",
          "int8", "int16", "int32", "int64")
_DML_PREFIX = "DML_TENSOR_DATA_TYPE_"

#: How a TensorDesc crosses into dmlops._core: (dtype, sizes, strides or None).
TensorSpec = tuple[str, tuple[int, ...], Optional[tuple[int, ...]]]


# The 11 types as numpy dtypes: every call checks its arrays' dtypes, and this lookup costs a
# fraction of np.dtype(...).name (a few microseconds a call on small operators).
_NAMES = {np.dtype(name): name for name in DTYPES}


def dtype_name(dtype: Any, what: str = "dtype") -> str:
    """Normalise a numpy dtype, type or name, or a DirectML name (``'FLOAT32'``,
    ``'DML_TENSOR_DATA_TYPE_FLOAT32'``) to the numpy name of one of the 11 DirectML types."""
    if isinstance(dtype, np.dtype):
        known = _NAMES.get(dtype)
        if known is not None:
            return known
    if isinstance(dtype, str):
        if dtype.lower() == "float":
            raise TypeError(f"{what} {dtype!r} is ambiguous: numpy's float is float64, DirectML's FLOAT is float32; "
                            f"say 'float32' or 'float64'")
        key = dtype.upper()
        if key.startswith(_DML_PREFIX):
            key = key[len(_DML_PREFIX):]
        if key.lower() in DTYPES:
            return key.lower()
    # numpy raises what its parsers meet: a TypeError, a ValueError, or for a comma-separated
    # layout such as 'f4,(' a SyntaxError from ast.literal_eval.
    try:
        name: str = np.dtype(dtype).name
    except Exception:
        raise TypeError(f"{what} {shown(dtype)} is not a data type") from None
    if name in DTYPES:
        return name
    if name == "bool":
        raise TypeError(f"{what} bool is not a DirectML data type; use uint8 (bool arrays are accepted where uint8 is)")
    raise TypeError(f"{what} {name} is not supported; expected one of {', '.join(DTYPES)}")


def array_dtype_name(x: np.ndarray, what: str = "array dtype") -> str:
    """The DirectML data type an array is read as (bool arrays are uint8 storage)."""
    return "uint8" if x.dtype == np.bool_ else dtype_name(x.dtype, what)


def dml_dtype(name: str) -> str:
    """The DirectML name of a data type (``'float16'`` -> ``'FLOAT16'``)."""
    return name.upper()


class TensorDesc:
    """A tensor's data type, sizes and (optional) strides in elements, as DirectML describes it.

    Parameters
    ----------
    dtype : str or numpy dtype
        One of the 11 DirectML types, by numpy name (``'float32'``) or DirectML name
        (``'FLOAT32'``).
    sizes : sequence of int
        1 to 8 sizes, each >= 1.
    strides : sequence of int, optional
        Strides in elements, one per dimension (may be negative or zero); None = packed.

    Raises
    ------
    TypeError
        ``dtype`` is not one of the 11 types (bool included: use uint8) or is ``'float'``
        (float32 to DirectML, float64 to numpy: say which), or ``sizes`` or ``strides`` hold
        non-integers.
    ValueError
        No sizes or more than 8, a size < 1, or ``strides`` of another length than ``sizes``.

    Notes
    -----
    DirectML's strides are unsigned; these are signed, because numpy views may run backwards
    (``x[::-1]``) or repeat an element (stride 0). Indexing is 64-bit: DirectML's limit of
    2**32 - 1 elements does not apply.

    Examples
    --------
    >>> d = TensorDesc("float16", (1, 3))
    >>> d.buffer_size
    8
    >>> TensorDesc.from_dict(d.to_dict()) == d
    True
    """

    __slots__ = ("_dtype", "_sizes", "_strides")

    def __init__(self, dtype: Any, sizes: Sequence[int], strides: Optional[Sequence[int]] = None):
        self._dtype = dtype_name(dtype, "TensorDesc: dtype")
        self._sizes = int_tuple(sizes, "TensorDesc: sizes")
        self._strides = None if strides is None else int_tuple(strides, "TensorDesc: strides")
        _core.validate_tensor_desc((self._dtype, self._sizes, self._strides), "TensorDesc:")

    @classmethod
    def from_array(cls, x: npt.ArrayLike) -> "TensorDesc":
        """The packed TensorDesc of an array_like's dtype and shape (bool reads as uint8)."""
        array = as_array(x, "TensorDesc.from_array: x")
        return cls(array_dtype_name(array), array.shape)

    @property
    def dtype(self) -> str:
        """The numpy name of the data type (``'float16'``)."""
        return self._dtype

    @property
    def sizes(self) -> tuple[int, ...]:
        """The size of each dimension."""
        return self._sizes

    @property
    def strides(self) -> Optional[tuple[int, ...]]:
        """Strides in elements, or None for packed row-major."""
        return self._strides

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self._sizes)

    @property
    def buffer_size(self) -> int:
        """Bytes DirectML needs for this tensor (``DMLCalcBufferTensorSize``)."""
        return _core.calc_buffer_tensor_size(self._dtype, self._sizes, self._strides)

    def to_dict(self) -> dict[str, Any]:
        """DxDispatch's JSON for a buffer tensor desc: ``{"DataType": "FLOAT16", "Sizes": [...]}``
        (``"Strides"`` only when set)."""
        d: dict[str, Any] = {"DataType": dml_dtype(self._dtype), "Sizes": list(self._sizes)}
        if self._strides is not None:
            d["Strides"] = list(self._strides)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TensorDesc":
        """From :meth:`to_dict` output, a DML_BUFFER_TENSOR_DESC's members (Flags and the size
        and alignment hints are accepted and not needed), or a DML_TENSOR_DESC wrapping one
        (``{"Type": "DML_TENSOR_TYPE_BUFFER", "Desc": {...}}``)."""
        if not isinstance(d, dict):
            raise TypeError(f"TensorDesc: from_dict needs a dict, not {type(d).__name__}")
        if "Desc" in d:  # one level: a DML_TENSOR_DESC wraps a buffer desc, never another wrapper
            if set(d) - {"Type", "Desc"} or d.get("Type", "DML_TENSOR_TYPE_BUFFER") not in (
                    "DML_TENSOR_TYPE_BUFFER", "BUFFER") or not isinstance(d["Desc"], dict) or "Desc" in d["Desc"]:
                raise ValueError(f"TensorDesc: a DML_TENSOR_DESC must be {{\"Type\": \"DML_TENSOR_TYPE_BUFFER\", "
                                 f"\"Desc\": {{...}}}}, not {shown(d)}")
            return cls.from_dict(d["Desc"])
        unknown = set(d) - {"DataType", "Sizes", "Strides", "DimensionCount", "Flags", "GuaranteedBaseOffsetAlignment",
                            "TotalTensorSizeInBytes"}
        if unknown:
            raise ValueError(f"TensorDesc: unknown field(s) {sorted(map(shown, unknown))}")
        for key in ("DataType", "Sizes"):
            if key not in d:
                raise ValueError(f"TensorDesc: missing field {key!r}")
        if not isinstance(d["DataType"], str):
            raise TypeError(f"TensorDesc: DataType must be a string such as \"FLOAT32\", not {shown(d['DataType'])}")
        desc = cls(d["DataType"], d["Sizes"], d.get("Strides"))
        if d.get("DimensionCount", desc.rank) != desc.rank:
            raise ValueError(f"TensorDesc: DimensionCount is {shown(d['DimensionCount'])} but Sizes has {desc.rank} entries")
        return desc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorDesc):
            return NotImplemented
        return (self._dtype, self._sizes, self._strides) == (other._dtype, other._sizes, other._strides)

    def __hash__(self) -> int:
        return hash((self._dtype, self._sizes, self._strides))

    def __repr__(self) -> str:
        strides = "" if self._strides is None else f", strides={self._strides}"
        return f"TensorDesc({self._dtype!r}, {self._sizes}{strides})"

    def __reduce__(self) -> tuple[type["TensorDesc"], tuple[str, tuple[int, ...], Optional[tuple[int, ...]]]]:
        return (TensorDesc, (self._dtype, self._sizes, self._strides))


def calc_buffer_tensor_size(dtype: Any, sizes: Sequence[int], strides: Optional[Sequence[int]] = None) -> int:
    """DirectML's ``DMLCalcBufferTensorSize``: the bytes a buffer needs to hold a tensor.

    Parameters
    ----------
    dtype : str or numpy dtype
        One of the 11 DirectML types, by numpy or DirectML name.
    sizes : sequence of int
        1 to 8 sizes, each >= 1.
    strides : sequence of int, optional
        Strides in elements; None = packed.

    Returns
    -------
    int
        Packed: ``prod(sizes) * element_size``; strided: ``(sum((sizes[i]-1) * |strides[i]|) + 1)
        * element_size``; then rounded up to a multiple of 4. Computed in 64 bits.

    Raises
    ------
    TypeError, ValueError
        As for :class:`TensorDesc`.

    Examples
    --------
    >>> calc_buffer_tensor_size("float16", (1, 3))
    8
    >>> calc_buffer_tensor_size("FLOAT32", (2, 3), strides=(1, 2))
    24
    """
    return TensorDesc(dtype, sizes, strides).buffer_size


@overload
def tensor_spec(desc: TensorDesc) -> TensorSpec: ...
@overload
def tensor_spec(desc: None) -> None: ...
@overload
def tensor_spec(desc: Optional[TensorDesc]) -> Optional[TensorSpec]: ...
def tensor_spec(desc: Optional[TensorDesc]) -> Optional[TensorSpec]:
    """The (dtype, sizes, strides) tuple dmlops._core takes for a TensorDesc; None for None."""
    return None if desc is None else (desc.dtype, desc.sizes, desc.strides)
