"""Run DirectML DxDispatch model files (``models/*.json``) on the CPU.

A model has ``resources`` (named buffers with initial values), ``dispatchables`` (named DirectML
operators: ``{"type": "DML_OPERATOR_PADDING1", "desc": {...}}``) and ``commands`` run in order:
``dispatch`` (bind buffers to the operator's tensors and execute it), ``print`` and
``writeFile``::

    results = dmlops.dxdispatch.run("dml_upsample_2d.json")    # {"input": array, "output": array}
    python -m dmlops run dml_upsample_2d.json --out results/    # prints what the model prints

:func:`load` reads and checks the whole file before anything runs; every problem raises
:class:`ModelError` whose message starts with the JSON path of the offending value, e.g.
``dispatchables.conv.desc.Strides: expected 2 entries (DimensionCount is 2), got 3``.

How DxDispatch's rules map onto numpy:

- A buffer is untyped storage of ``sizeInBytes`` bytes (default: its initial values' bytes
  rounded up to 4). ``initialValuesDataType`` types only the initial values, ``print`` and
  ``writeFile``; a dispatch views the bytes with the bound tensor desc's own DataType, Sizes and
  Strides (in elements), so a FLOAT32 buffer may be bound as UINT32 or as a strided tensor.
- A binding is a resource name or ``{"name": ..., "elementOffset": k, "elementCount": n,
  "elementSizeInBytes": s}``: the view starts ``k * s`` bytes in, ``s`` defaulting to the size
  of the buffer's ``initialValuesDataType``, and may use ``n * s`` bytes. As in DirectML, the
  bound range must hold ``DMLCalcBufferTensorSize`` bytes.
- The tensors an operator binds are its descriptor's tensor fields (``InputTensor``,
  ``FilterTensor``, ``BiasTensor``, ..., ``OutputTensor``); a dispatchable's own ``bindings``
  are defaults for its dispatches. Optional tensors (``BiasTensor``) are bound when the desc has them.
- Files (``sourcePath``) resolve next to the model file, then from the current directory;
  ``writeFile`` targets resolve in the output directory and are skipped when there is none.
  ``.npy`` files carry their dtype and shape; any other extension is raw little-endian bytes.
- Like DxDispatch's parser, the JSON may contain ``//`` and ``/* */`` comments and trailing commas.

Not supported (reported by name): HLSL, ONNX and serialized-graph dispatchables, operators other
than those in :data:`OPERATORS`, image files, "deferred" buffers and mixed-type initial value lists.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from ._activation import Activation
from ._descriptor import Descriptor, Field
from ._tensor import DTYPES, TensorDesc, dtype_name
from .convolution import ConvolutionDesc
from .lp_pooling import LpPooling1Desc, LpPoolingDesc
from .padding import Padding1Desc, PaddingDesc
from .resample import Resample1Desc, Resample2Desc, Resample3Desc, ResampleDesc, Upsample2DDesc
from .unfold import FoldDesc, UnfoldDesc

#: DML_OPERATOR_<name> -> descriptor class. The tensors a dispatch binds, and their binding
#: names, are the class's ``tensor`` fields; supporting another operator is one entry here.
OPERATORS: dict[str, type[Descriptor]] = {
    cls.OPERATOR: cls
    for cls in (PaddingDesc, Padding1Desc, ConvolutionDesc, Upsample2DDesc, ResampleDesc, Resample1Desc,
                Resample2Desc, Resample3Desc, UnfoldDesc, FoldDesc, LpPoolingDesc, LpPooling1Desc)
}

_OPERATOR_PREFIX = "DML_OPERATOR_"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class ModelError(ValueError):
    """A model file that cannot be run. ``path`` is the JSON path of the problem
    (``commands[2].bindings.InputTensor``), ``str(error)`` is ``"<path>: <what is wrong>"``;
    ``source`` is the model file the path is in (None for a dict, or a file that cannot be read)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.source: Optional[Path] = None  # the model file, when the model came from one


# ---------------------------------------------------------------------------------------------
# JSON values


def _strip_json_extensions(text: str) -> str:
    """Remove comments and trailing commas (both accepted by DxDispatch's parser), leaving
    string literals alone."""
    keep_strings = lambda m: m.group(1) or ""  # noqa: E731
    text = re.sub(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', keep_strings, text, flags=re.S)
    return re.sub(r'("(?:\\.|[^"\\])*")|,(?=\s*[\]}])', keep_strings, text)


def _expect(value: Any, kind: Union[type, tuple[type, ...]], path: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ModelError(path, f"expected {what}, got {json.dumps(value)}")
    return value


def _object(value: Any, path: str, known: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    obj: dict[str, Any] = _expect(value, dict, path, "an object")
    for key in obj:
        if key not in known:
            raise ModelError(f"{path}.{key}", f"unknown field; expected one of {', '.join(known)}")
    for key in required:
        if key not in obj:
            raise ModelError(f"{path}.{key}", "missing")
    return obj


def _uint(value: Any, path: str) -> int:
    number: int = _expect(value, int, path, "a non-negative integer")
    if number < 0:
        raise ModelError(path, f"expected a non-negative integer, got {number}")
    return number


def _data_type(value: Any, path: str) -> str:
    _expect(value, str, path, "a DML_TENSOR_DATA_TYPE name")
    name: str = value.upper().removeprefix("DML_TENSOR_DATA_TYPE_").lower()
    if name not in DTYPES:
        raise ModelError(path, f"{value!r} is not a DML_TENSOR_DATA_TYPE (FLOAT32, FLOAT16, INT8, ...)")
    return name


def _element(value: Any, dtype: np.dtype, path: str) -> Any:
    """One JSON value as an element of ``dtype``: integers in range for integer types; numbers
    or "nan"/"inf"/"-inf" (any case) for float types, finite values staying finite."""
    name = dtype.name.upper()
    if dtype.kind == "f":
        if isinstance(value, str) and value.lower() in _NON_FINITE:
            return _NON_FINITE[value.lower()]
        _expect(value, (int, float), path, f'a {name} number or "nan", "inf", "-inf"')
        with np.errstate(over="ignore"):
            try:
                fits = np.isfinite(dtype.type(float(value)))
            except OverflowError:  # an integer beyond any float
                fits = False
        if not fits:
            raise ModelError(path, f"{value} is out of range for {name}")
        return value
    _expect(value, int, path, f"an integer of type {name}")
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ModelError(path, f"{value} is out of range for {name} [{info.min}, {info.max}]")
    return value


def _npy_or_raw(path: Path, dtype: Optional[str], where: str) -> tuple[bytes, str]:
    """The bytes and data type of a ``sourcePath`` file."""
    if path.suffix.lower() in _IMAGE_SUFFIXES:
        raise ModelError(where, f"image files are not supported ({path.name})")
    try:
        if path.suffix.lower() != ".npy":
            if dtype is None:
                raise ModelError(where, f"raw file {path.name} needs an initialValuesDataType")
            return path.read_bytes(), dtype
        array = np.load(path, allow_pickle=False)
    except OSError as e:
        raise ModelError(where, f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ModelError(where, f"{path.name} is not a valid .npy file: {e}") from None
    try:
        file_dtype = "uint8" if array.dtype == np.bool_ else dtype_name(array.dtype)
    except TypeError:
        raise ModelError(where, f"{path.name} holds {array.dtype}, not a DirectML data type") from None
    if dtype is not None and dtype != file_dtype:
        raise ModelError(where, f"{path.name} holds {file_dtype.upper()} but initialValuesDataType is {dtype.upper()}")
    return np.ascontiguousarray(array, np.dtype(file_dtype).newbyteorder("<")).tobytes(), file_dtype


# ---------------------------------------------------------------------------------------------
# Resources


@dataclass
class Buffer:
    """A resource: ``size`` bytes, ``initial`` written at ``offset``; ``dtype`` (numpy name)
    types its initial values and its printed and returned form. Like DxDispatch's print, the
    rounding of the size up to 4 bytes is not shown: five FLOAT16 values print as five."""

    name: str
    dtype: str
    size: int
    initial: bytes
    offset: int
    length: int  # elements shown and returned: sizeInBytes' worth, or up to the initial values' end

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def storage(self) -> bytearray:
        data = bytearray(self.size)
        data[self.offset:self.offset + len(self.initial)] = self.initial
        return data

    def typed(self, storage: bytearray) -> np.ndarray:
        """The buffer as a 1-D array of its data type (a view sharing ``storage``)."""
        return np.frombuffer(storage, self.dtype, count=self.length)


def _initial_values(spec: Any, dtype: Optional[str], path: str, base_dir: Path) -> tuple[bytes, str]:
    if isinstance(spec, list):
        if dtype is None:
            raise ModelError(path, "an array of values needs an initialValuesDataType")
        dt = np.dtype(dtype)
        elements = [_element(v, dt, f"{path}[{i}]") for i, v in enumerate(spec)]
        return np.array(elements, dtype=dt).astype(dt.newbyteorder("<")).tobytes(), dtype
    forms = (("value",), ("valueStart", "valueDelta"), ("sourcePath",))
    _object(spec, path, ("valueCount",) + sum(forms, ()))
    present = [form for form in forms if any(key in spec for key in form)]
    if len(present) != 1:
        raise ModelError(path, 'expected exactly one of {"value"}, {"valueStart", "valueDelta"} or {"sourcePath"}')
    form = present[0]
    if form == ("sourcePath",):
        if "valueCount" in spec:
            raise ModelError(f"{path}.valueCount", "not allowed with sourcePath")
        source = _expect(spec["sourcePath"], str, f"{path}.sourcePath", "a file path")
        file = base_dir / source if (base_dir / source).exists() else Path(source)
        return _npy_or_raw(file, dtype, f"{path}.sourcePath")
    if dtype is None:
        raise ModelError(path, "generated values need an initialValuesDataType")
    dt = np.dtype(dtype)
    for key in ("valueCount",) + form:
        if key not in spec:
            raise ModelError(f"{path}.{key}", "missing")
    count = _uint(spec["valueCount"], f"{path}.valueCount")
    if form == ("value",):
        values = np.full(count, _element(spec["value"], dt, f"{path}.value"), dtype=dt)
    else:
        start = _element(spec["valueStart"], dt, f"{path}.valueStart")
        delta = _element(spec["valueDelta"], dt, f"{path}.valueDelta")
        # DxDispatch adds the delta in the element type, one element after another: a running
        # sum rounded (or wrapped) at every step, which is what cumsum in that dtype computes.
        steps = np.full(count, delta, dtype=dt)
        steps[:1] = start
        with np.errstate(over="ignore"):
            values = np.cumsum(steps, dtype=dt)
    return values.astype(dt.newbyteorder("<")).tobytes(), dtype


def _buffer(name: str, spec: Any, base_dir: Path) -> Buffer:
    path = f"resources.{name}"
    _object(spec, path, ("type", "initialValuesDataType", "initialValues", "initialValuesOffsetInBytes",
                         "sizeInBytes"), required=("initialValues",))
    if spec.get("type", "buffer") != "buffer":
        raise ModelError(f"{path}.type", f'only "buffer" resources exist, not {json.dumps(spec["type"])}')
    dtype = None
    if "initialValuesDataType" in spec:
        dtype = _data_type(spec["initialValuesDataType"], f"{path}.initialValuesDataType")
    values = spec["initialValues"]
    if isinstance(values, str):
        raise ModelError(f"{path}.initialValues", f"{json.dumps(values)} buffers (ONNX deferred binding) are not supported")
    if isinstance(values, list) and dtype is None:
        raise ModelError(f"{path}.initialValuesDataType", "missing (mixed-type value lists are not supported)")
    initial, dtype = _initial_values(values, dtype, f"{path}.initialValues", base_dir)
    if not initial:
        raise ModelError(f"{path}.initialValues", "no values")
    offset = _uint(spec.get("initialValuesOffsetInBytes", 0), f"{path}.initialValuesOffsetInBytes")
    end = offset + len(initial)
    if "sizeInBytes" in spec:
        size = _uint(spec["sizeInBytes"], f"{path}.sizeInBytes")
        if end > size:
            raise ModelError(f"{path}.sizeInBytes", f"{size} bytes cannot hold the {len(initial)} bytes of "
                                                    f"initial values at offset {offset}")
        shown = size
    else:
        size, shown = (end + 3) // 4 * 4, end  # DirectML buffers are multiples of 4 bytes
    return Buffer(name, dtype, size, initial, offset, shown // np.dtype(dtype).itemsize)


# ---------------------------------------------------------------------------------------------
# Dispatchables: a desc checked field by field against its descriptor class


def _tensor_desc(value: Any, path: str) -> TensorDesc:
    _expect(value, dict, path, "a tensor desc object")
    if "Desc" in value:  # DML_TENSOR_DESC form: {"Type": "DML_TENSOR_TYPE_BUFFER", "Desc": {...}}
        _object(value, path, ("Type", "Desc"))
        if value.get("Type", "DML_TENSOR_TYPE_BUFFER") not in ("DML_TENSOR_TYPE_BUFFER", "BUFFER"):
            raise ModelError(f"{path}.Type", f"only buffer tensors exist, not {json.dumps(value['Type'])}")
        return _tensor_desc(value["Desc"], f"{path}.Desc")
    _object(value, path, ("DataType", "Sizes", "Strides", "DimensionCount", "Flags", "TotalTensorSizeInBytes",
                          "GuaranteedBaseOffsetAlignment"), required=("DataType", "Sizes"))
    dtype = _data_type(value["DataType"], f"{path}.DataType")
    sizes = [_uint(v, f"{path}.Sizes[{i}]") for i, v in enumerate(_expect(value["Sizes"], list, f"{path}.Sizes",
                                                                             "an array of sizes"))]
    rank = value.get("DimensionCount", len(sizes))
    if rank != len(sizes):
        raise ModelError(f"{path}.Sizes", f"expected {rank} entries (DimensionCount is {rank}), got {len(sizes)}")
    strides = value.get("Strides")
    if strides is not None:
        _expect(strides, list, f"{path}.Strides", "an array of strides")
        for i, v in enumerate(strides):
            _expect(v, int, f"{path}.Strides[{i}]", "an integer stride")
        if len(strides) != len(sizes):
            raise ModelError(f"{path}.Strides", f"expected {len(sizes)} entries (one per size), got {len(strides)}")
    try:
        return TensorDesc(dtype, sizes, strides)
    except (TypeError, ValueError) as e:
        raise ModelError(path, str(e)) from None


def _check_field(f: Field, value: Any, path: str) -> None:
    """The JSON shape each kind of descriptor field must have (the values' rules are the
    descriptor's to check)."""
    if f.kind == "tensor":
        _tensor_desc(value, path)
    elif f.kind == "enum":
        assert f.enum is not None, f"{f.name}: an enum field declares its Enum"
        _expect(value, str, path, f"a DML_{f.enum.prefix}_* name")
    elif f.kind in ("dims", "floats"):
        _expect(value, list, path, "an array")
        for i, v in enumerate(value):
            if f.kind == "dims":
                _expect(v, int, f"{path}[{i}]", "an integer")
            elif not (isinstance(v, str) and v.lower() in _NON_FINITE):
                _expect(v, (int, float), f"{path}[{i}]", "a number")
    elif f.kind == "uint":
        _uint(value, path)
    elif f.kind == "bool":
        if not (isinstance(value, bool) or value in (0, 1)):
            raise ModelError(path, f"expected true, false, 0 or 1, got {json.dumps(value)}")
    elif f.kind == "size_2d":
        _object(value, path, ("Width", "Height"), required=("Width", "Height"))
        _uint(value["Width"], f"{path}.Width")
        _uint(value["Height"], f"{path}.Height")
    elif f.kind == "activation":
        _expect(value, dict, path, 'an operator desc {"Type": "DML_OPERATOR_ACTIVATION_...", ...}')
        if "Type" not in value:
            raise ModelError(f"{path}.Type", "missing")
        try:
            Activation.from_dict(value)
        except (TypeError, ValueError) as e:
            raise ModelError(path, str(e)) from None
    elif not (isinstance(value, str) and value.lower() in _NON_FINITE):  # scalar, float
        kinds = (int, float, dict) if f.kind == "scalar" else (int, float)
        _expect(value, kinds, path, "a number")


def _check_desc(cls: type[Descriptor], desc: dict[str, Any], path: str) -> None:
    counted = [f for f in cls.FIELDS if f.kind in ("dims", "floats")]
    known = [f.dml for f in cls.FIELDS] + sorted({f.count for f in counted})
    known += [f.dml + "DataType" for f in cls.FIELDS if f.kind == "scalar"]
    _object(desc, path, tuple(known))
    for f in cls.FIELDS:
        if f.dml in desc and not (f.optional and desc[f.dml] is None):
            _check_field(f, desc[f.dml], f"{path}.{f.dml}")
        elif not f.optional and not (f.dml == "OutputTensor" and cls.INFERRED_OUTPUT):
            raise ModelError(f"{path}.{f.dml}", f"missing (DML_OPERATOR_{cls.OPERATOR} requires it)")
    for f in cls.FIELDS:
        if f.kind == "scalar" and f.dml + "DataType" in desc:
            _data_type(desc[f.dml + "DataType"], f"{path}.{f.dml}DataType")
    # Arrays that share a count member (DimensionCount) must all have that many entries.
    for count in dict.fromkeys(f.count for f in counted):
        arrays = [f.dml for f in counted if f.count == count and f.dml in desc and desc[f.dml] is not None]
        if count in desc:
            expected, source = _uint(desc[count], f"{path}.{count}"), f"{count} is {desc[count]}"
        elif arrays:
            expected, source = len(desc[arrays[0]]), f"as {arrays[0]}"
        else:
            continue
        for name in arrays:
            if len(desc[name]) != expected:
                raise ModelError(f"{path}.{name}", f"expected {expected} entries ({source}), got {len(desc[name])}")


def _field_path(cls: type[Descriptor], message: str, path: str) -> str:
    """The JSON path of the field a descriptor's message is about: messages start with
    ``"<Operator>: <field name> ..."`` by the package's convention."""
    words = message.split(": ", 1)[-1].split()
    subject = words[0].split("[")[0] if words else ""  # "strides[0] is 0" is about strides
    for f in cls.FIELDS:
        if subject in (f.name, f.dml):
            return f"{path}.{f.dml}"
        if f.kind == "scalar" and subject == f.dml + "DataType":
            return f"{path}.{subject}"
    return path


@dataclass
class Dispatchable:
    name: str
    desc: Descriptor
    bindings: dict[str, Any]  # the dispatchable's own bindings: defaults for its dispatches

    @property
    def tensor_fields(self) -> list[Field]:
        """The tensors a dispatch binds (inputs in call order, then OutputTensor)."""
        fields = [f for f in self.desc.FIELDS if f.kind == "tensor" and getattr(self.desc, f.name) is not None]
        return sorted(fields, key=lambda f: f.dml == "OutputTensor")


def _dispatchable(name: str, spec: Any) -> Dispatchable:
    path = f"dispatchables.{name}"
    _expect(spec, dict, path, "an object")
    if "type" not in spec:
        raise ModelError(f"{path}.type", "missing")
    type_name = _expect(spec["type"], str, f"{path}.type", "an operator type name")
    key = type_name.upper()
    key = key[len(_OPERATOR_PREFIX):] if key.startswith(_OPERATOR_PREFIX) else key
    cls = OPERATORS.get(key)
    if cls is None:
        supported = ", ".join(f"{_OPERATOR_PREFIX}{k}" for k in OPERATORS)
        raise ModelError(f"{path}.type", f"{type_name} is not supported by dmlops; supported: {supported}")
    desc_key = "Desc" if "Desc" in spec else "desc"
    _object(spec, path, ("type", desc_key, "bindings", "executionFlags", "dmlCompileType"), required=(desc_key,))
    desc_path = f"{path}.{desc_key}"
    _check_desc(cls, spec[desc_key], desc_path)
    try:
        desc = cls.from_dict(spec[desc_key])
    except (TypeError, ValueError) as e:
        raise ModelError(_field_path(cls, str(e), desc_path), str(e)) from None
    bindings = _object(spec.get("bindings", {}), f"{path}.bindings", tuple(f.dml for f in cls.FIELDS
                                                                            if f.kind == "tensor"))
    return Dispatchable(name, desc, bindings)


# ---------------------------------------------------------------------------------------------
# Commands


@dataclass
class BoundTensor:
    """One tensor of a dispatch: ``desc`` viewed in ``resource`` from byte ``offset``."""

    field: Field
    resource: str
    desc: TensorDesc
    offset: int

    def view(self, storage: bytearray) -> np.ndarray:
        dtype = np.dtype(self.desc.dtype)
        strides = self.desc.strides or _packed_strides(self.desc.sizes)
        return np.ndarray(self.desc.sizes, dtype, buffer=storage, offset=self.offset,
                          strides=[s * dtype.itemsize for s in strides])


def _packed_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _bind(binding: Any, desc: TensorDesc, f: Field, resources: dict[str, Buffer], path: str) -> BoundTensor:
    if isinstance(binding, str):
        binding = {"name": binding}
    _object(binding, path, ("name", "elementOffset", "elementCount", "elementSizeInBytes", "format"),
            required=("name",))
    name = _expect(binding["name"], str, f"{path}.name", "a resource name")
    if name not in resources:
        raise ModelError(path, f"no resource named {name!r}")
    buffer = resources[name]
    element_size = _uint(binding.get("elementSizeInBytes", 0), f"{path}.elementSizeInBytes") or buffer.itemsize
    offset = _uint(binding.get("elementOffset", 0), f"{path}.elementOffset") * element_size
    end = buffer.size
    if "elementCount" in binding:
        end = offset + _uint(binding["elementCount"], f"{path}.elementCount") * element_size
        if end > buffer.size:
            raise ModelError(path, f"elements [{offset // element_size}, {end // element_size}) of "
                                   f"{element_size} bytes run past the {buffer.size} bytes of resource {name!r}")
    # DirectML's rule: the bound range holds DMLCalcBufferTensorSize bytes; negative strides
    # (a dmlops extension) must also stay after the start of the buffer.
    itemsize = np.dtype(desc.dtype).itemsize
    strides = desc.strides or _packed_strides(desc.sizes)
    lowest = offset + sum((n - 1) * s * itemsize for n, s in zip(desc.sizes, strides) if s < 0)
    if lowest < 0 or offset + desc.buffer_size > end:
        shape = f"{desc.dtype.upper()} {list(desc.sizes)}" + (f" strides {list(desc.strides)}" if desc.strides else "")
        raise ModelError(path, f"{f.dml} ({shape}) needs {desc.buffer_size} bytes from byte {offset}, but resource "
                               f"{name!r} has {end} bytes")
    return BoundTensor(f, name, desc, offset)


@dataclass
class Dispatch:
    path: str
    dispatchable: Dispatchable
    tensors: list[BoundTensor]


@dataclass
class Print:
    path: str
    resource: str
    verbose: bool


@dataclass
class WriteFile:
    path: str
    resource: str
    target: str
    dimensions: Optional[tuple[int, ...]]


Command = Union[Dispatch, Print, WriteFile]


def _resource_name(spec: dict[str, Any], resources: dict[str, Buffer], path: str) -> str:
    name: str = _expect(spec["resource"], str, f"{path}.resource", "a resource name")
    if name not in resources:
        raise ModelError(f"{path}.resource", f"no resource named {name!r}")
    return name


def _command(i: int, spec: Any, resources: dict[str, Buffer], dispatchables: dict[str, Dispatchable]) -> Command:
    path = f"commands[{i}]"
    _expect(spec, dict, path, "a command object")
    kind = spec.get("type")
    if kind == "dispatch":
        _object(spec, path, ("type", "dispatchable", "bindings", "threadGroupCount"),
                required=("dispatchable", "bindings"))
        name = _expect(spec["dispatchable"], str, f"{path}.dispatchable", "a dispatchable name")
        if name not in dispatchables:
            raise ModelError(f"{path}.dispatchable", f"no dispatchable named {name!r}")
        target = dispatchables[name]
        expected = [f.dml for f in target.tensor_fields]
        given = {**target.bindings, **_expect(spec["bindings"], dict, f"{path}.bindings", "an object")}
        for key in given:
            if key not in expected:
                raise ModelError(f"{path}.bindings.{key}", f"{name} binds {', '.join(expected)}")
        tensors = []
        for f in target.tensor_fields:
            if f.dml not in given:
                raise ModelError(f"{path}.bindings.{f.dml}", f"missing ({name} binds {', '.join(expected)})")
            tensors.append(_bind(given[f.dml], getattr(target.desc, f.name), f, resources, f"{path}.bindings.{f.dml}"))
        return Dispatch(path, target, tensors)
    if kind == "print":
        _object(spec, path, ("type", "resource", "verbose"), required=("resource",))
        verbose = _expect(spec.get("verbose", False), bool, f"{path}.verbose", "true or false")
        return Print(path, _resource_name(spec, resources, path), verbose)
    if kind == "writeFile":
        _object(spec, path, ("type", "resource", "targetPath", "dimensions"), required=("resource", "targetPath"))
        name = _resource_name(spec, resources, path)
        target = _expect(spec["targetPath"], str, f"{path}.targetPath", "a file path")
        if Path(target).suffix.lower() in _IMAGE_SUFFIXES:
            raise ModelError(f"{path}.targetPath", f"image files are not supported ({target})")
        dims = None
        if "dimensions" in spec:
            dims = tuple(_uint(v, f"{path}.dimensions[{k}]") for k, v in
                         enumerate(_expect(spec["dimensions"], list, f"{path}.dimensions", "an array of sizes")))
            count = resources[name].length
            if math.prod(dims) != count:
                raise ModelError(f"{path}.dimensions", f"{list(dims)} holds {math.prod(dims)} elements but resource "
                                                       f"{name!r} has {count}")
        return WriteFile(path, name, target, dims)
    raise ModelError(f"{path}.type", f'expected "dispatch", "print" or "writeFile", got {json.dumps(kind)}')


# ---------------------------------------------------------------------------------------------
# The model


def _format(value: Any) -> str:
    # C++ iostream's default float format (6 significant digits), as DxDispatch prints
    return f"{float(value):g}" if isinstance(value, np.floating) else str(value)


@dataclass
class Model:
    """A checked model file; :meth:`run` executes it (any number of times, each from the
    initial values)."""

    resources: dict[str, Buffer]
    dispatchables: dict[str, Dispatchable]
    commands: list[Command]
    source: Optional[Path] = None

    def run(self, out_dir: Union[str, Path, None] = None,
            log: Optional[Callable[[str], None]] = None) -> dict[str, np.ndarray]:
        """Run the commands in order and return every resource as a 1-D array of its
        ``initialValuesDataType``.

        Parameters
        ----------
        out_dir : str or pathlib.Path, optional
            Where ``writeFile`` targets go (created if needed); None skips them.
        log : callable, optional
            Receives each line ``print`` produces (and a note per skipped ``writeFile``).

        Returns
        -------
        dict of str to numpy.ndarray
            ``{resource name: 1-D array}`` after the last command.

        Raises
        ------
        ModelError
            An operator rejects its bound tensors at dispatch time; the message names the
            command.
        """
        storage = {name: buffer.storage() for name, buffer in self.resources.items()}
        arrays = {name: buffer.typed(storage[name]) for name, buffer in self.resources.items()}
        emit = log or (lambda line: None)
        for command in self.commands:
            if isinstance(command, Dispatch):
                views = [t.view(storage[t.resource]) for t in command.tensors]
                try:
                    command.dispatchable.desc(*views[:-1], out=views[-1])
                except (TypeError, ValueError) as e:
                    raise ModelError(command.path, f"{command.dispatchable.name}: {e}") from None
            elif isinstance(command, Print):
                emit(self._printed(command, arrays[command.resource]))
            elif out_dir is None:
                emit(f"writeFile {command.target!r}: skipped (no output directory)")
            else:
                self._write(command, arrays[command.resource], storage[command.resource], Path(out_dir))
        return {name: array.copy() for name, array in arrays.items()}

    @staticmethod
    def _printed(command: Print, values: np.ndarray) -> str:
        if not command.verbose:
            return f"Resource '{command.resource}': " + ", ".join(_format(v) for v in values)
        width = len(str(max(len(values) - 1, 0)))
        raw = values.view(f"u{values.itemsize}")
        lines = [f"[{i:>{width}}] {_format(v)} (0x{int(r):0{2 * values.itemsize}X})"
                 for i, (v, r) in enumerate(zip(values, raw))]
        return f"Resource '{command.resource}':\n" + "\n".join(lines)

    @staticmethod
    def _write(command: WriteFile, values: np.ndarray, storage: bytearray, out_dir: Path) -> None:
        target = out_dir / command.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.suffix.lower() == ".npy":
            np.save(target, values.reshape(command.dimensions or values.shape), allow_pickle=False)
        else:
            target.write_bytes(bytes(storage))


def load(model: Union[str, Path, dict[str, Any]], base_dir: Union[str, Path, None] = None) -> Model:
    """Read and check a model: a path to a ``.json`` file, or its already parsed ``dict``.

    Parameters
    ----------
    model : str, pathlib.Path or dict
        The model file (JSON with DxDispatch's comments and trailing commas allowed), or the
        parsed JSON object.
    base_dir : str or pathlib.Path, optional
        Where relative ``sourcePath`` files are looked for first (default: the model file's
        directory, or the current directory for a dict).

    Returns
    -------
    Model
        The checked model; :meth:`Model.run` executes it.

    Raises
    ------
    ModelError
        The file cannot be read, is not valid JSON, or anything in it is unsupported or
        breaks a rule; ``str(error)`` starts with the JSON path of the problem.

    Examples
    --------
    >>> from dmlops import dxdispatch
    >>> dxdispatch.load({"resources": {}, "dispatchables": {"p": {"type": "DML_OPERATOR_MAX_POOLING", "desc": {}}},
    ...                  "commands": []})
    Traceback (most recent call last):
    ...
    dmlops.dxdispatch.ModelError: dispatchables.p.type: DML_OPERATOR_MAX_POOLING is not supported by dmlops; ...
    """
    source = None
    if isinstance(model, (str, Path)):
        source = Path(model)
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as e:
            raise ModelError(str(source), f"cannot read the model: {e.strerror or e}") from None
        try:
            model = json.loads(_strip_json_extensions(text))
        except json.JSONDecodeError as e:
            raise ModelError(f"{source}:{e.lineno}:{e.colno}", f"not valid JSON: {e.msg}") from None
        base = Path(base_dir) if base_dir is not None else source.parent
    else:
        base = Path(base_dir) if base_dir is not None else Path(".")
    try:
        return _checked(model, base, source)
    except ModelError as e:
        e.source = source
        raise


def _checked(model: Any, base: Path, source: Optional[Path]) -> Model:
    _object(model, "model", ("$schema", "resources", "dispatchables", "commands"),
            required=("resources", "dispatchables", "commands"))
    resources = {name: _buffer(name, spec, base)
                 for name, spec in _expect(model["resources"], dict, "resources", "an object").items()}
    dispatchables = {name: _dispatchable(name, spec)
                     for name, spec in _expect(model["dispatchables"], dict, "dispatchables", "an object").items()}
    commands = [_command(i, spec, resources, dispatchables)
                for i, spec in enumerate(_expect(model["commands"], list, "commands", "an array"))]
    return Model(resources, dispatchables, commands, source)


def run(model: Union[str, Path, dict[str, Any]], out_dir: Union[str, Path, None] = None,
        log: Optional[Callable[[str], None]] = None) -> dict[str, np.ndarray]:
    """Load and run a DxDispatch model file.

    Parameters
    ----------
    model : str, pathlib.Path or dict
        As for :func:`load`.
    out_dir : str or pathlib.Path, optional
        Where ``writeFile`` targets go (created if needed); None skips them.
    log : callable, optional
        Receives each line a ``print`` command produces (``print`` itself, for instance).

    Returns
    -------
    dict of str to numpy.ndarray
        Every resource after the last command, as a 1-D array of its ``initialValuesDataType``.

    Raises
    ------
    ModelError
        The model is invalid (see :func:`load`) or an operator rejects its bound tensors at
        dispatch time; the message names the command.

    Examples
    --------
    >>> import dmlops
    >>> model = {
    ...     "resources": {
    ...         "x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3]},
    ...         "y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 6, "value": 0}}},
    ...     "dispatchables": {"pad": {"type": "DML_OPERATOR_PADDING1", "desc": {
    ...         "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]},
    ...         "PaddingMode": "DML_PADDING_MODE_REFLECTION", "PaddingValueDataType": "FLOAT32",
    ...         "PaddingValue": 0, "DimensionCount": 1, "StartPadding": [2], "EndPadding": [1]}}},
    ...     "commands": [{"type": "dispatch", "dispatchable": "pad", "bindings": {"InputTensor": "x", "OutputTensor": "y"}},
    ...                  {"type": "print", "resource": "y"}]}
    >>> results = dmlops.dxdispatch.run(model, log=print)
    Resource 'y': 3, 2, 1, 2, 3, 2
    >>> results["y"]
    array([3., 2., 1., 2., 3., 2.], dtype=float32)
    """
    return load(model).run(out_dir, log)
