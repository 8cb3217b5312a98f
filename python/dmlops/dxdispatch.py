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
- A binding is a resource name, ``{"name": ..., "elementOffset": k, "elementCount": n,
  "elementSizeInBytes": s}``, or either in a one-element array (``["A"]``): the view starts
  ``k * s`` bytes in, ``s`` defaulting to the size of the buffer's ``initialValuesDataType``, and
  may use ``n * s`` bytes. As in DirectML, the bound range must hold ``DMLCalcBufferTensorSize``
  bytes.
- The tensors an operator binds are its descriptor's tensor fields (``InputTensor``,
  ``FilterTensor``, ``BiasTensor``, ..., ``OutputTensor``); a dispatchable's own ``bindings``
  are defaults for its dispatches. Optional tensors (``BiasTensor``) are bound when the desc has them.
  The desc is the dispatchable's ``desc`` (or ``Desc``) object, or, without one, the fields
  written beside ``type``.
- ``print`` shows as many elements as the initial values had, from the buffer's start (not
  ``sizeInBytes``' worth), floats with 6 significant digits, INT8 and UINT8 as characters (as a
  C++ stream shows a char), and with ``"verbose": true`` one ``[index] value (0xBITS)`` line
  per element, exactly as DxDispatch prints them.
- Files (``sourcePath``) resolve in the base directory (the model file's, or ``--input_path``),
  then from the current directory; they must be regular files (not FIFOs or devices) no larger
  than the buffer. ``writeFile`` targets are relative paths that must stay inside the output
  directory, symbolic links included (skipped when there is none). ``.npy`` files carry their
  dtype and shape; any other extension is raw little-endian bytes.
- Like DxDispatch's parser, the JSON may contain ``//`` and ``/* */`` comments, trailing commas
  and a UTF-8 byte-order mark; command types are matched in any case. Fields dmlops does not
  know are ignored, as DxDispatch ignores them, with a :class:`ModelWarning` naming them.
- Hostile files are refused with a ModelError, never a crash or a hang: arrays and objects nest
  at most 64 deep, and every buffer together fits in half the machine's memory.

Not supported (a ModelError says so): HLSL, ONNX and serialized-graph dispatchables, operators
other than those in :data:`OPERATORS`, image files, "deferred" buffers and mixed-type initial
value lists (``[{"type": "UINT32", "value": 1}, ...]``).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
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
    (``commands[2].bindings.InputTensor``), ``message`` what is wrong, ``str(error)`` is
    ``"<path>: <message>"``; ``source`` is the model file the path is in (None for a dict, or a
    file that cannot be read)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        self.source: Optional[Path] = None  # the model file, when the model came from one


class ModelWarning(UserWarning):
    """Something in a model that dmlops ignores, as DxDispatch does (an unknown field):
    ``str(warning)`` is ``"<path>: <message>"``."""


# ---------------------------------------------------------------------------------------------
# JSON values


_MAX_DEPTH = 64  # nesting of arrays and objects; DirectML models nest about 6 deep
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # after the opening quote; never fails
_PLAIN = re.compile(r'[^"/\[\]{}]*')  # up to the next character the scan looks at


def _position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def _strip_json_extensions(text: str) -> str:
    """Remove comments and trailing commas (both accepted by DxDispatch's parser), leaving
    string literals alone; one pass, linear in the text. Nesting deeper than ``_MAX_DEPTH``
    raises ModelError (path ``line:column``) before a recursive parser can overflow."""
    out: list[str] = []
    depth, i, n = 0, 0, len(text)

    def drop_trailing_comma() -> None:
        j = len(out) - 1
        while j >= 0 and (not out[j] or out[j].isspace()):  # each whitespace piece is passed once
            j -= 1
        if j >= 0 and out[j].rstrip().endswith(","):
            kept = out[j].rstrip()
            out[j] = kept[:-1] + out[j][len(kept):]

    while i < n:
        end = _PLAIN.match(text, i).end()
        if end > i:
            out.append(text[i:end])
            i = end
            continue
        c = text[i]
        if c == '"':
            end = _STRING_BODY.match(text, i + 1).end() + 1  # past the closing quote (or the end)
            out.append(text[i:end])
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" ")
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:  # unterminated: left for the JSON parser to report
                out.append(text[i:])
                break
            end = close + 2
            out.append(" ")
        elif c in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                raise ModelError(_position(text, i), f"not valid JSON: nested deeper than {_MAX_DEPTH} arrays and objects")
            end = i + 1
            out.append(c)
        else:  # "]", "}" or a "/" that starts no comment
            if c != "/":
                depth -= 1
                drop_trailing_comma()
            end = i + 1
            out.append(c)
        i = end
    return "".join(out)


def _show(value: Any) -> str:
    """A JSON value for a message, cut short: a file may hold megabytes where a name belongs."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expect(value: Any, kind: Union[type, tuple[type, ...]], path: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ModelError(path, f"expected {what}, got {_show(value)}")
    return value


def _object(value: Any, path: str, known: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``value`` as a JSON object with the ``required`` keys. Other keys than ``known`` are
    ignored, as DxDispatch ignores them, with a :class:`ModelWarning` (a misspelt optional field
    is otherwise silently absent)."""
    obj: dict[str, Any] = _expect(value, dict, path, "an object")
    for key in obj:
        if key not in known:
            warnings.warn(ModelWarning(f"{path}.{key}: unknown field, ignored (known: {', '.join(known)})"),
                          stacklevel=2)
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


def _memory_bytes() -> int:
    """The memory this process may use: physical memory, or less under an address-space limit
    (``ulimit -v``). No model may ask for more: a bound for every size in it."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): a terabyte
        memory = 1 << 40
    try:
        import resource  # POSIX only

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            memory = min(memory, limit)
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    return memory


def _read_regular_file(path: Union[str, Path], limit: int, where: str, name: str = "") -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes (``name``
    is what messages call it, default the path).

    Opened without blocking (a FIFO with no writer would block forever) and checked with
    ``fstat`` on the opened descriptor, so what is read is what was checked: a FIFO, a device
    (``/dev/zero`` never ends) or a directory raises ModelError at ``where``, as does a file
    larger than ``limit``, before anything is read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    name = name or str(path)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        raise ModelError(where, f"cannot read {name}: {getattr(e, 'strerror', None) or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(where, f"{name} is not a regular file")
        if info.st_size > limit:
            raise ModelError(where, f"{name} has {info.st_size} bytes, more than the {limit} it may have here")
        chunks, left = [], info.st_size
        while left > 0:  # a file that shrinks meanwhile ends the loop; one that grows is read to st_size
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise ModelError(where, f"cannot read {name}: {e.strerror or e}") from None
    finally:
        os.close(fd)


_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
_NPY_HEADER_MAX = 12 + (1 << 16)  # magic, version, length, and a header longer than any numpy writes


def _npy_values(data: bytes, name: str, where: str) -> np.ndarray:
    """The array of a .npy file's bytes, its header checked against the data it describes
    (so a header cannot make numpy allocate what the file does not hold)."""
    stream = io.BytesIO(data)
    try:
        read_header = _NPY_HEADERS.get(np.lib.format.read_magic(stream))
        if read_header is None:
            raise ValueError("only .npy format versions 1.0 and 2.0 are read")
        shape, fortran_order, dtype = read_header(stream)
    except (ValueError, TypeError, SyntaxError, EOFError) as e:
        raise ModelError(where, f"{name} is not a valid .npy file: {e}") from None
    if dtype.hasobject:
        raise ModelError(where, f"{name} holds Python objects, not a DirectML data type")
    count = math.prod(shape)
    if len(data) - stream.tell() != count * dtype.itemsize:
        raise ModelError(where, f"{name} has {len(data) - stream.tell()} bytes of data; its header "
                                f"({dtype}, shape {shape}) needs {count * dtype.itemsize}")
    values = np.frombuffer(data, dtype, count, offset=stream.tell())
    return values.reshape(shape[::-1]).T if fortran_order else values.reshape(shape)


def _npy_or_raw(path: Path, dtype: Optional[str], where: str, room: _Room) -> tuple[bytes, str]:
    """The bytes and data type of a ``sourcePath`` file whose values must fit in ``room``."""
    if path.suffix.lower() in _IMAGE_SUFFIXES:
        raise ModelError(where, f"image files are not supported by dmlops ({path.name}); convert the image "
                                f"to a .npy file of the tensor the model expects")
    if path.suffix.lower() != ".npy":
        if dtype is None:
            raise ModelError(where, f"raw file {path.name} needs an initialValuesDataType")
        data = _read_regular_file(path, room.limit, where)
        room.check(len(data))
        return data, dtype
    array = _npy_values(_read_regular_file(path, room.limit + _NPY_HEADER_MAX, where), path.name, where)
    try:
        file_dtype = "uint8" if array.dtype == np.bool_ else dtype_name(array.dtype)
    except TypeError:
        raise ModelError(where, f"{path.name} holds {array.dtype}, not a DirectML data type") from None
    if dtype is not None and dtype != file_dtype:
        raise ModelError(where, f"{path.name} holds {file_dtype.upper()} but initialValuesDataType is {dtype.upper()}")
    room.check(array.nbytes)
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


_MIXED = ("mixed-type initial values (a list of {\"type\", \"value\"} objects, written for HLSL dispatchables) "
          "are not supported by dmlops: give the buffer an initialValuesDataType and a list of numbers")


@dataclass
class _Room:
    """The bytes a buffer's initial values may take: ``limit``, set by the field at ``path``
    (sizeInBytes, or the machine's memory), checked before anything is allocated or read."""

    limit: int
    path: str
    what: str  # the limit in words

    def check(self, nbytes: int) -> None:
        if nbytes > self.limit:
            raise ModelError(self.path, f"{nbytes} bytes of initial values do not fit in {self.what}")


def _initial_values(spec: Any, dtype: Optional[str], path: str, base_dir: Path, room: _Room) -> tuple[bytes, str]:
    """The initial values' bytes (as many as ``room`` allows) and their data type."""
    if isinstance(spec, list):
        if any(isinstance(v, dict) for v in spec):
            raise ModelError(path, _MIXED)
        if dtype is None:
            raise ModelError(path, "an array of values needs an initialValuesDataType")
        dt = np.dtype(dtype)
        room.check(len(spec) * dt.itemsize)
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
        file = base_dir / source if os.path.exists(base_dir / source) else Path(source)
        return _npy_or_raw(file, dtype, f"{path}.sourcePath", room)
    if dtype is None:
        raise ModelError(path, "generated values need an initialValuesDataType")
    dt = np.dtype(dtype)
    for key in ("valueCount",) + form:
        if key not in spec:
            raise ModelError(f"{path}.{key}", "missing")
    count = _uint(spec["valueCount"], f"{path}.valueCount")
    room.check(count * dt.itemsize)
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


def _buffer(name: str, spec: Any, base_dir: Path, memory: int) -> Buffer:
    """A resource whose bytes (all of them, ``sizeInBytes`` included) fit in ``memory``."""
    path = f"resources.{name}"
    # resampleSize and resampleMode belong to image sourcePaths, which are refused by name
    _object(spec, path, ("type", "initialValuesDataType", "initialValues", "initialValuesOffsetInBytes",
                         "sizeInBytes", "resampleSize", "resampleMode"), required=("initialValues",))
    if spec.get("type", "buffer") != "buffer":
        raise ModelError(f"{path}.type", f'only "buffer" resources exist, not {_show(spec["type"])}')
    values = spec["initialValues"]
    dtype = None
    if isinstance(spec.get("initialValuesDataType"), str) and \
            spec["initialValuesDataType"].upper().removeprefix("DML_TENSOR_DATA_TYPE_") == "UNKNOWN":
        raise ModelError(f"{path}.initialValuesDataType", _MIXED)
    if "initialValuesDataType" in spec:
        dtype = _data_type(spec["initialValuesDataType"], f"{path}.initialValuesDataType")
    if isinstance(values, str):
        raise ModelError(f"{path}.initialValues", f"{_show(values)} buffers (ONNX deferred binding) are not "
                                                  f"supported by dmlops")
    offset = _uint(spec.get("initialValuesOffsetInBytes", 0), f"{path}.initialValuesOffsetInBytes")
    if "sizeInBytes" in spec:
        size = _uint(spec["sizeInBytes"], f"{path}.sizeInBytes")
        if size > memory:
            raise ModelError(f"{path}.sizeInBytes", f"{size} bytes is more than the {memory} bytes of memory left")
        room = _Room(size - offset, f"{path}.sizeInBytes", f"sizeInBytes {size} from offset {offset}")
    else:
        room = _Room(memory - 4 - offset, f"{path}.initialValues", f"the {memory} bytes of memory left")
    if room.limit < 0:
        raise ModelError(f"{path}.initialValuesOffsetInBytes", f"{offset} is past the buffer's end")
    initial, dtype = _initial_values(values, dtype, f"{path}.initialValues", base_dir, room)
    if not initial:
        raise ModelError(f"{path}.initialValues", "no values")
    end = offset + len(initial)
    if "sizeInBytes" in spec:
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
            raise ModelError(f"{path}.Type", f"only buffer tensors exist, not {_show(value['Type'])}")
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
    except (TypeError, ValueError, OverflowError) as e:
        raise ModelError(path, str(e)) from None


def _check_field(f: Field, value: Any, path: str) -> Any:
    """The JSON shape each kind of descriptor field must have (the values' rules are the
    descriptor's to check); returns the value for ``from_dict``, a tensor desc without the
    fields that were warned about and ignored."""
    if f.kind == "tensor":
        return _tensor_desc(value, path).to_dict()
    if f.kind == "enum":
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
            raise ModelError(path, f"expected true, false, 0 or 1, got {_show(value)}")
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
        except (TypeError, ValueError, OverflowError) as e:
            raise ModelError(path, str(e)) from None
    elif not (isinstance(value, str) and value.lower() in _NON_FINITE):  # scalar, float
        kinds = (int, float, dict) if f.kind in ("scalar", "float") else (int, float)
        _expect(value, kinds, path, "a number")
    return value


def _desc_keys(cls: type[Descriptor]) -> tuple[str, ...]:
    """The JSON keys of a desc: its fields, their count members and scalar DataTypes."""
    counted = [f for f in cls.FIELDS if f.kind in ("dims", "floats")]
    known = [f.dml for f in cls.FIELDS] + sorted({f.count for f in counted})
    return tuple(known + [f.dml + "DataType" for f in cls.FIELDS if f.kind == "scalar"])


def _check_desc(cls: type[Descriptor], desc: dict[str, Any], path: str) -> dict[str, Any]:
    """The desc's JSON checked field by field, as ``from_dict`` takes it: the fields dmlops
    does not know left out (each warned about)."""
    counted = [f for f in cls.FIELDS if f.kind in ("dims", "floats")]
    known = _desc_keys(cls)
    _object(desc, path, known)
    checked = {key: value for key, value in desc.items() if key in known}
    for f in cls.FIELDS:
        if f.dml in desc and not (f.optional and desc[f.dml] is None):
            checked[f.dml] = _check_field(f, desc[f.dml], f"{path}.{f.dml}")
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
    return checked


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


#: Dispatchable types other than DirectML operators, as DxDispatch names them (any case).
_OTHER_DISPATCHABLES = {
    "hlsl": "HLSL compute shaders",
    "onnx": "ONNX models",
    "dmlserializedgraph": "serialized DirectML graphs",
}
_DISPATCHABLE_KEYS = ("type", "bindings", "executionFlags", "dmlCompileType")


def _dispatchable(name: str, spec: Any) -> Dispatchable:
    path = f"dispatchables.{name}"
    _expect(spec, dict, path, "an object")
    if "type" not in spec:
        raise ModelError(f"{path}.type", "missing")
    type_name = _expect(spec["type"], str, f"{path}.type", "an operator type name")
    if type_name.lower() in _OTHER_DISPATCHABLES:
        raise ModelError(f"{path}.type", f"{_OTHER_DISPATCHABLES[type_name.lower()]} ({type_name!r} dispatchables) "
                                         f"are not supported by dmlops, which runs DirectML operators only")
    key = type_name.upper()
    key = key[len(_OPERATOR_PREFIX):] if key.startswith(_OPERATOR_PREFIX) else key
    cls = OPERATORS.get(key)
    if cls is None:
        supported = ", ".join(f"{_OPERATOR_PREFIX}{k}" for k in OPERATORS)
        raise ModelError(f"{path}.type", f"{type_name} is not supported by dmlops; supported: {supported}")
    desc_key = "Desc" if "Desc" in spec else "desc" if "desc" in spec else None
    if desc_key is None:  # DxDispatch also reads the desc's fields written beside "type"
        desc_json, desc_path = {k: v for k, v in spec.items() if k not in _DISPATCHABLE_KEYS}, path
    else:
        _object(spec, path, _DISPATCHABLE_KEYS + (desc_key,))
        desc_json, desc_path = spec[desc_key], f"{path}.{desc_key}"
    desc_json = _check_desc(cls, desc_json, desc_path)
    try:
        desc = cls.from_dict(desc_json)
    except (TypeError, ValueError, OverflowError) as e:
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
    if isinstance(binding, list):  # DxDispatch's form for operators that bind arrays of tensors
        if len(binding) != 1:
            raise ModelError(path, f"{f.dml} binds one resource, not {len(binding)}")
        binding, path = binding[0], f"{path}[0]"
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


_NPY_MAX_DIMS = 64  # numpy's limit


def _target_path(value: Any, path: str) -> str:
    """A writeFile ``targetPath``: a relative path to a file that stays inside the output
    directory whatever the platform's separator (symbolic links are checked when writing)."""
    target = _expect(value, str, path, "a file path")
    parts = re.split(r"[/\\]", target)
    if not target or "\0" in target:
        raise ModelError(path, f"{_show(target)} is not a file name")
    if target.startswith(("/", "\\")) or PureWindowsPath(target).drive:
        raise ModelError(path, f"{_show(target)} is absolute; targets are relative to the output directory")
    if ".." in parts:
        raise ModelError(path, f"{_show(target)} leaves the output directory")
    if parts[-1] in ("", "."):
        raise ModelError(path, f"{_show(target)} names a directory, not a file")
    if Path(target).suffix.lower() in _IMAGE_SUFFIXES:
        raise ModelError(path, f"image files are not supported by dmlops ({target})")
    return target


def _command(i: int, spec: Any, resources: dict[str, Buffer], dispatchables: dict[str, Dispatchable]) -> Command:
    path = f"commands[{i}]"
    _expect(spec, dict, path, "a command object")
    if "type" not in spec:
        raise ModelError(f"{path}.type", "missing")
    kind = _expect(spec["type"], str, f"{path}.type", 'a command type ("dispatch", "print" or "writeFile")').lower()
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
            if key not in expected:  # DxDispatch binds by bind point name and never looks at others
                warnings.warn(ModelWarning(f"{path}.bindings.{key}: not a tensor {name} binds, ignored "
                                           f"({name} binds {', '.join(expected)})"), stacklevel=2)
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
    if kind == "writefile":
        _object(spec, path, ("type", "resource", "targetPath", "dimensions"), required=("resource", "targetPath"))
        name = _resource_name(spec, resources, path)
        target = _target_path(spec["targetPath"], f"{path}.targetPath")
        dims = None
        if "dimensions" in spec:
            dims = tuple(_uint(v, f"{path}.dimensions[{k}]") for k, v in
                         enumerate(_expect(spec["dimensions"], list, f"{path}.dimensions", "an array of sizes")))
            if len(dims) > _NPY_MAX_DIMS:
                raise ModelError(f"{path}.dimensions", f"{len(dims)} dimensions; a .npy file has at most {_NPY_MAX_DIMS}")
            count = resources[name].length
            if math.prod(dims) != count:
                raise ModelError(f"{path}.dimensions", f"{list(dims)} holds {math.prod(dims)} elements but resource "
                                                       f"{name!r} has {count}")
        return WriteFile(path, name, target, dims)
    raise ModelError(f"{path}.type", f'expected "dispatch", "print" or "writeFile" (any case), got {_show(spec["type"])}')


# ---------------------------------------------------------------------------------------------
# The model


def _format(value: Any) -> str:
    """One element as DxDispatch's ``std::ostream << value`` shows it: floats in the default
    format (6 significant digits), INT8 and UINT8 as the character of their byte (C++ streams
    print (un)signed chars as characters; bytes past ASCII come as surrogate escapes:
    ``line.encode("utf-8", "surrogateescape")`` gives DxDispatch's bytes)."""
    if isinstance(value, np.floating):
        return f"{float(value):g}"
    if value.dtype.itemsize == 1:
        return bytes([int(value) & 0xFF]).decode("utf-8", "surrogateescape")
    return str(value)


def _write_inside(out_dir: Path, target: str, data: bytes, where: str) -> None:
    """Write ``data`` to ``out_dir/target``: its directory, symbolic links resolved, must be
    inside ``out_dir``; the file is opened without following a final symbolic link, without
    blocking (a FIFO with no reader), and must be a regular file."""
    try:
        root = os.path.realpath(out_dir)
        file = Path(root, target)
        parent = os.path.realpath(file.parent)
        if os.path.commonpath([root, parent]) != root:
            raise ModelError(where, f"{target!r} leads outside the output directory {out_dir} (a symbolic link)")
        os.makedirs(parent, exist_ok=True)
        flags = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
        fd = os.open(os.path.join(parent, file.name), flags, 0o666)
    except (OSError, ValueError) as e:  # ValueError: os.path.commonpath across drives
        raise ModelError(where, f"cannot write {target!r} in {out_dir}: {getattr(e, 'strerror', None) or e}") from None
    with os.fdopen(fd, "wb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ModelError(where, f"cannot write {target!r} in {out_dir}: not a regular file")
        stream.write(data)


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
        try:
            storage = {name: buffer.storage() for name, buffer in self.resources.items()}
        except MemoryError:
            raise ModelError("resources", "out of memory for the buffers") from None
        arrays = {name: buffer.typed(storage[name]) for name, buffer in self.resources.items()}
        emit = log or (lambda line: None)
        for command in self.commands:
            if isinstance(command, Dispatch):
                views = [t.view(storage[t.resource]) for t in command.tensors]
                try:
                    command.dispatchable.desc(*views[:-1], out=views[-1])
                except (TypeError, ValueError, OverflowError, MemoryError) as e:
                    raise ModelError(command.path, f"{command.dispatchable.name}: {e or 'out of memory'}") from None
            elif isinstance(command, Print):
                emit(self._printed(command, self.resources[command.resource], storage[command.resource]))
            elif out_dir is None:
                emit(f"writeFile {command.target!r}: skipped (no output directory)")
            else:
                self._write(command, arrays[command.resource], storage[command.resource], Path(out_dir))
        return {name: array.copy() for name, array in arrays.items()}

    @staticmethod
    def _printed(command: Print, buffer: Buffer, storage: bytearray) -> str:
        """What DxDispatch prints: the elements its initial values had (from the buffer's
        start, whatever sizeInBytes or initialValuesOffsetInBytes say), verbose with the index
        right-aligned to the count's width and the bits in hex padded with spaces."""
        values = np.frombuffer(storage, buffer.dtype, count=len(buffer.initial) // buffer.itemsize)
        if not command.verbose:
            return f"Resource '{command.resource}': " + ", ".join(_format(v) for v in values)
        width, digits = len(str(len(values))), 2 * values.itemsize
        raw = values.view(f"u{values.itemsize}")
        return f"Resource '{command.resource}':\n" + "".join(
            f"[{i:>{width}}] {_format(v)} (0x{int(r):>{digits}X})\n" for i, (v, r) in enumerate(zip(values, raw)))

    @staticmethod
    def _write(command: WriteFile, values: np.ndarray, storage: bytearray, out_dir: Path) -> None:
        if command.target.lower().endswith(".npy"):
            stream = io.BytesIO()
            np.save(stream, values.reshape(command.dimensions or values.shape), allow_pickle=False)
            data = stream.getvalue()
        else:
            data = bytes(storage)
        _write_inside(out_dir, command.target, data, f"{command.path}.targetPath")


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
        The file cannot be read (or is not a regular file), is not UTF-8 JSON, or anything in
        it is unsupported or breaks a rule; ``str(error)`` starts with the JSON path of the
        problem. Nothing else is raised, whatever the file holds.

    Warns
    -----
    ModelWarning
        A field dmlops does not know, ignored as DxDispatch ignores it.

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
        model = _parse(source, _read_regular_file(source, _memory_bytes() // 2, str(source), "the model"))
        base = Path(base_dir) if base_dir is not None else source.parent
    else:
        base = Path(base_dir) if base_dir is not None else Path(".")
    try:
        return _checked(model, base, source)
    except ModelError as e:
        e.source = source
        raise
    except RecursionError:  # only a dict built in Python can nest this deep: files are limited
        raise ModelError("model", "nested too deeply") from None


def _parse(source: Path, data: bytes) -> Any:
    """A model file's JSON, as DxDispatch reads it: UTF-8 (a byte-order mark is skipped),
    comments and trailing commas allowed."""
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise ModelError(str(source), f"not UTF-8 text (byte {e.start} is 0x{data[e.start]:02X})") from None
    try:
        return json.loads(_strip_json_extensions(text))
    except ModelError as e:
        raise ModelError(f"{source}:{e.path}", e.message) from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{source}:{e.lineno}:{e.colno}", f"not valid JSON: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # ValueError: an integer of more digits than Python converts
        raise ModelError(str(source), f"not valid JSON: {e}") from None


def _checked(model: Any, base: Path, source: Optional[Path]) -> Model:
    _object(model, "model", ("$schema", "resources", "dispatchables", "commands"),
            required=("resources", "dispatchables", "commands"))
    memory = _memory_bytes() // 2  # the buffers, their initial values and run()'s results fit in memory
    resources = {}
    for name, spec in _expect(model["resources"], dict, "resources", "an object").items():
        resources[name] = _buffer(name, spec, base, memory)
        memory -= resources[name].size
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
