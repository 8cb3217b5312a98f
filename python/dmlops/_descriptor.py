"""The descriptor pattern shared by every operator class (``Padding1Desc``, ...).

A descriptor mirrors a DirectML ``DML_*_OPERATOR_DESC`` struct field for field. Subclasses
declare their fields once (``FIELDS``) and validate in their constructor (through the C++
``validate``/``infer_output``); this base derives from the declaration everything else:
read-only properties, ``repr``, ``==``/``hash``, pickling, and ``to_dict``/``from_dict`` in
the JSON shape of DirectML's DxDispatch model files (C field names, full enum names), the
per-field property docstrings (``help(dmlops.Padding1Desc)``) and an HTML table for Jupyter.
"""

from __future__ import annotations

import html
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, TypeVar

import numpy as np

from ._activation import Activation
from ._args import Enum, as_array, shown
from ._args import from_json_number as _from_json_number
from ._args import json_number as _json_number
from ._tensor import TensorDesc, array_dtype_name, dml_dtype


@dataclass(frozen=True)
class Field:
    """One member of a DirectML operator struct.

    kind: ``tensor`` (a TensorDesc), ``enum`` (an :class:`Enum` short name), ``dims`` (one
    UINT per dimension) or ``floats`` (one FLOAT per dimension), both with their element count
    derived into the member named ``count``, ``scalar`` (a DML_SCALAR_UNION typed by the input
    tensor's dtype, written with a sibling ``<Name>DataType`` entry), ``float`` (a FLOAT
    member), ``bool`` (a BOOL member), ``size_2d`` (a DML_SIZE_2D: the Python value is
    ``(height, width)`` in axis order, the JSON ``{"Width": w, "Height": h}`` as in the struct),
    ``activation`` (a fused ``DML_OPERATOR_DESC*``: an :class:`Activation`, JSON
    ``{"Type": ..., "Desc": {...}}``) or ``uint`` (a UINT member).

    optional: the member is a pointer DirectML allows to be null (``_Maybenull_``); the Python
    value is then None and ``to_dict`` leaves the key out.

    Each field becomes a read-only property whose docstring (:meth:`describe`) gives the C
    member's name and type and the Python value's type.
    """

    name: str
    dml: str
    kind: str
    enum: Optional[Enum] = None
    count: str = "DimensionCount"
    optional: bool = False

    def describe(self) -> str:
        """The property docstring: the C member's name and type, and the Python value's type."""
        if self.kind == "enum":
            assert self.enum is not None, f"{self.name}: an enum field declares its Enum"
            names = ", ".join(repr(n) for n in self.enum.names)
            what = f"DML_{self.enum.prefix}, one of {names} (JSON: DML_{self.enum.prefix}_<NAME>)"
        elif self.kind in ("dims", "floats"):
            what = _KIND_TYPES[self.kind] + f" ({self.count} entries in the struct)"
        else:
            what = _KIND_TYPES[self.kind]
        if self.optional:
            what += "; None when the struct's pointer is null"
        return f"``{self.dml}``: {what}."


# The C type of each Field kind and the Python value a descriptor holds for it.
_KIND_TYPES = {
    "tensor": "DML_TENSOR_DESC, a dmlops.TensorDesc (dtype, sizes, strides)",
    "dims": "UINT per dimension, a tuple of int",
    "floats": "FLOAT per dimension, a tuple of float (float32 values)",
    "scalar": "DML_SCALAR_UNION of the input's data type, a Python int, float or bool",
    "float": "FLOAT, a Python float (a float32 value; in JSON a number, \"nan\", \"inf\", \"-inf\", "
             "or a NaN with a sign or payload as its bits, {\"UInt32\": bits})",
    "bool": "BOOL, a Python bool",
    "size_2d": "DML_SIZE_2D, a (height, width) tuple of int",
    "activation": "fused activation (const DML_OPERATOR_DESC*), a dmlops.Activation",
    "uint": "UINT, a Python int",
}


def _float_bits(value: float, dtype: str) -> int:
    """The bits of ``value`` (a value of the float ``dtype``, held as a Python float)."""
    return int(np.array(value, dtype).view(_BITS_DTYPE[dtype]).item())


def _json_scalar(value: Any, dtype: str) -> Any:
    """A scalar union's JSON: a number, ``"nan"``/``"inf"``/``"-inf"``, or, for a NaN other than
    the plain quiet one (a sign or a payload), the union's unsigned member of the same width
    holding its bits, which JSON numbers cannot: ``{"UInt32": 2143289345}``."""
    if dtype in _BITS_DTYPE and isinstance(value, float) and math.isnan(value):
        bits = _float_bits(value, dtype)
        if bits != _float_bits(math.nan, dtype):
            return {_BITS_MEMBER[dtype]: bits}
    return _json_number(value)


# DML_SCALAR_UNION's member for each data type, as DxDispatch writes a union spelled out as an
# object ({"Float32": 9}); FLOAT16 has no member of its own and travels as its UInt16 bits.
_UNION_MEMBER = {"float16": "UInt16", "float32": "Float32", "float64": "Float64", "uint8": "UInt8",
                 "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64", "int8": "Int8", "int16": "Int16",
                 "int32": "Int32", "int64": "Int64"}


# The unsigned member of a float type's width: a union of FLOAT16/32/64 read as its bits.
_BITS_MEMBER = {"float16": "UInt16", "float32": "UInt32", "float64": "UInt64"}
_BITS_DTYPE = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}


def _from_scalar_union(value: Any, dtype: str, what: str) -> Any:
    """A scalar union given as a number, or as ``{"<member>": value}`` for ``dtype`` (a float
    type's also as its bits, ``{"UInt<width>": bits}``)."""
    if not isinstance(value, dict):
        return _from_json_number(value)
    member = _UNION_MEMBER[dtype]
    if len(value) != 1 or next(iter(value)) not in (member, _BITS_MEMBER.get(dtype)):
        raise ValueError(f"{what} for {dml_dtype(dtype)} must be a number or {{\"{member}\": ...}}, not {shown(value)}")
    key, bits = next(iter(value.items()))
    if dtype in _BITS_MEMBER and key == _BITS_MEMBER[dtype]:
        width = np.dtype(dtype).itemsize * 8
        if not isinstance(bits, int) or isinstance(bits, bool) or not 0 <= bits < 1 << width:
            raise ValueError(f"{what} {key} must be the {width} bits of a {dml_dtype(dtype)}, not {shown(bits)}")
        return np.array(bits, _BITS_DTYPE[dtype]).view(dtype).item()
    return _from_json_number(bits)


def _identity(value: Any) -> Any:
    # floats compare by bits, so that nan == nan and -0.0 != 0.0 (they pad differently)
    return struct.pack("<d", value) if isinstance(value, float) else value


_D = TypeVar("_D", bound="Descriptor")


def _construct(cls: type[_D], values: dict[str, Any]) -> _D:
    """Unpickles a descriptor: its constructor, given every field."""
    return cls(**values)


def _html_value(value: Any) -> str:
    """One table cell: a tensor as ``dtype (sizes)`` (+ strides), anything else by its repr."""
    if isinstance(value, TensorDesc):
        text = f"{value.dtype} {value.sizes}"
        if value.strides is not None:
            text += f" strides {value.strides}"
    elif isinstance(value, str):
        text = value
    else:
        text = repr(value)
    return html.escape(text)


def _getter(name: str) -> Callable[["Descriptor"], Any]:
    return lambda self: self._values[name]


class Descriptor:
    """Base of the operator descriptor classes; see the module docstring.

    A subclass sets ``NAME``, ``OPERATOR`` and ``FIELDS``, validates and fills ``_values`` in
    its constructor, and defines ``__call__``; everything else comes from here. Subclasses also
    annotate their fields (``start_padding: tuple[int, ...]``) for type checkers: an
    annotation creates no class attribute, so the property derived from ``FIELDS`` stays.
    """

    NAME: ClassVar[str]  # operator name in messages, e.g. "Padding1"
    OPERATOR: ClassVar[str]  # DML_OPERATOR_<OPERATOR>
    FIELDS: ClassVar[tuple[Field, ...]]
    # Whether OutputTensor may be omitted (inferred from the other fields); FOLD's output
    # sizes cannot be inferred.
    INFERRED_OUTPUT: ClassVar[bool] = True

    _values: dict[str, Any]
    input: TensorDesc
    output: TensorDesc
    # Every subclass runs on arrays matching its tensor fields: d(x, [filter, bias,] out=None).
    __call__: Callable[..., np.ndarray]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for field in cls.__dict__.get("FIELDS", ()):
            if field.name not in cls.__dict__:
                setattr(cls, field.name, property(_getter(field.name), doc=field.describe()))

    @property
    def output_shape(self) -> tuple[int, ...]:
        """The output tensor's sizes."""
        sizes: tuple[int, ...] = self._values["output"].sizes
        return sizes

    def _input_array(self, x: Any, field: str = "input") -> np.ndarray:
        """``x`` checked against the TensorDesc ``field`` (``input`` unless the operator has
        several): a numpy array of its dtype (bool where it is uint8) and shape, any strides;
        TypeError / ValueError naming the operator and the field."""
        op = self.NAME
        array = as_array(x, f"{op}: {field}")
        expected: TensorDesc = self._values[field]
        if array_dtype_name(array, f"{op}: {field} dtype") != expected.dtype:
            raise TypeError(f"{op}: {field} has dtype {array.dtype} but the descriptor says {expected.dtype}")
        if array.shape != expected.sizes:
            raise ValueError(f"{op}: {field} has shape {array.shape} but the descriptor says {expected.sizes}")
        return array

    def _key(self) -> tuple[Any, ...]:
        return tuple(_identity(self._values[f.name]) for f in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        # one field per line, in the struct's order; eval(repr(d)) rebuilds d
        fields = ",\n".join(f"    {f.name}={self._values[f.name]!r}" for f in self.FIELDS)
        return f"{type(self).__name__}(\n{fields},\n)"

    def _repr_html_(self) -> str:
        """Jupyter's rich display: a table of the fields (Python name, DirectML member, value),
        headed by the operator and its input -> output shapes."""
        inputs = [f for f in self.FIELDS if f.kind == "tensor" and f.name != "output" and self._values[f.name] is not None]
        shapes = ", ".join(_html_value(self._values[f.name]) for f in inputs)
        rows = "".join(
            f"<tr><td style='text-align:left'><code>{f.name}</code></td>"
            f"<td style='text-align:left'>{f.dml}</td>"
            f"<td style='text-align:left'>{_html_value(self._values[f.name])}</td></tr>"
            for f in self.FIELDS)
        return (f"<table><caption style='text-align:left'><b>{type(self).__name__}</b> "
                f"(DML_{self.OPERATOR}_OPERATOR_DESC): {shapes} &rarr; {_html_value(self._values['output'])}"
                f"</caption><thead><tr><th style='text-align:left'>field</th><th style='text-align:left'>DirectML"
                f"</th><th style='text-align:left'>value</th></tr></thead><tbody>{rows}</tbody></table>")

    def __reduce__(self) -> tuple[Any, tuple[type["Descriptor"], dict[str, Any]]]:
        # The field values themselves (pickle keeps a float's bits, NaN payloads included), not
        # to_dict's JSON, whose numbers cannot carry them.
        return (_construct, (type(self), {f.name: self._values[f.name] for f in self.FIELDS}))

    def to_dict(self) -> dict[str, Any]:
        """The descriptor as DxDispatch JSON: C field names, DML enum names, tensor descs as
        ``{"DataType": "FLOAT32", "Sizes": [...]}``."""
        d: dict[str, Any] = {}
        for f in self.FIELDS:
            value = self._values[f.name]
            if value is None and f.optional:
                continue
            if f.kind in ("tensor", "activation"):
                d[f.dml] = value.to_dict()
            elif f.kind == "enum":
                assert f.enum is not None, f"{f.name}: an enum field declares its Enum"
                d[f.dml] = f.enum.dml(value)
            elif f.kind in ("dims", "floats"):
                d[f.count] = len(value)
                d[f.dml] = list(value)
            elif f.kind == "size_2d":
                d[f.dml] = {"Width": value[1], "Height": value[0]}
            elif f.kind == "scalar":
                d[f.dml + "DataType"] = dml_dtype(self._values["input"].dtype)
                d[f.dml] = _json_scalar(value, self._values["input"].dtype)
            elif f.kind == "float":  # a NaN's sign and payload as {"UInt32": bits}, as a union's
                d[f.dml] = _json_scalar(value, "float32")
            else:
                d[f.dml] = _json_number(value)
        return d

    @classmethod
    def from_dict(cls: type[_D], d: dict[str, Any]) -> _D:
        """Build a descriptor from :meth:`to_dict` output (or a DxDispatch ``desc`` object).
        Enum values may be given with or without their ``DML_..._`` prefix."""
        if not isinstance(d, dict):
            raise TypeError(f"{cls.NAME}: from_dict needs a dict, not {type(d).__name__}")
        known = {f.dml for f in cls.FIELDS} | {f.count for f in cls.FIELDS if f.kind in ("dims", "floats")}
        known |= {f.dml + "DataType" for f in cls.FIELDS if f.kind == "scalar"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"{cls.NAME}: unknown field(s) {sorted(map(shown, unknown))}; expected {sorted(known)}")
        kwargs: dict[str, Any] = {}
        for f in cls.FIELDS:
            if f.dml not in d or (f.optional and d[f.dml] is None):
                if (f.dml == "OutputTensor" and cls.INFERRED_OUTPUT) or f.optional:
                    continue  # inferred, or a null pointer
                raise ValueError(f"{cls.NAME}: field {f.dml!r} is missing")
            value = d[f.dml]
            if f.kind in ("tensor", "activation"):
                try:
                    kwargs[f.name] = (TensorDesc if f.kind == "tensor" else Activation).from_dict(value)
                except (TypeError, ValueError) as e:  # name the operator and the field
                    raise (TypeError if isinstance(e, TypeError) else ValueError)(f"{cls.NAME}: {f.dml}: {e}") from None
            elif f.kind in ("dims", "floats"):
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"{cls.NAME}: {f.dml} must be a list of numbers, not {shown(value)}")
                count = d.get(f.count, len(value))
                if count != len(value):
                    raise ValueError(f"{cls.NAME}: {f.dml} has {len(value)} entries but {f.count} is {shown(count)}")
                kwargs[f.name] = value
            elif f.kind == "bool":
                # DirectML's BOOL is an integer; JSON files may hold 0/1 or true/false
                if isinstance(value, int) and value in (0, 1):
                    value = bool(value)
                kwargs[f.name] = value
            elif f.kind == "scalar" and "input" in kwargs:
                kwargs[f.name] = _from_scalar_union(value, kwargs["input"].dtype, f"{cls.NAME}: {f.dml}")
            elif f.kind == "float":
                kwargs[f.name] = _from_scalar_union(value, "float32", f"{cls.NAME}: {f.dml}")
            elif f.kind == "size_2d":
                if not isinstance(value, dict) or set(value) != {"Width", "Height"}:
                    raise ValueError(f"{cls.NAME}: {f.dml} must be {{\"Width\": ..., \"Height\": ...}}, not {shown(value)}")
                kwargs[f.name] = (value["Height"], value["Width"])
            else:
                kwargs[f.name] = _from_json_number(value)
        for f in cls.FIELDS:
            typed = f.dml + "DataType"
            if f.kind == "scalar" and typed in d and "input" in kwargs:
                if not isinstance(d[typed], str) or TensorDesc(d[typed], (1,)).dtype != kwargs["input"].dtype:
                    raise ValueError(f"{cls.NAME}: {typed} {shown(d[typed])} does not match the input's DataType")
        return cls(**kwargs)
