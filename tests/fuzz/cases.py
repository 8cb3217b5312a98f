"""Hostile cases, as functions a worker of isolated.Child runs (so they take and return plain,
picklable data).

A view is described by a ``View``: a dtype, a shape, byte strides and a byte offset into a named
buffer; views naming the same buffer share memory (an ``out=`` over its input). ``run`` builds
the arrays with numpy.lib.stride_tricks.as_strided, calls one operator with them, and returns its
result next to the same call on C-contiguous copies of the inputs (the reference), so the caller
can compare the two. A view whose strides reach past what dmlops accepts is only described, never
read by numpy (the operator must refuse it before it reads anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

import dmlops

# Every operator under test, with parameters that fit any input of its rank (sizes >= 1).
OPERATORS = ("pad", "convolution", "lp_pooling", "unfold", "fold", "resample")


@dataclass(frozen=True)
class View:
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    offset: int  # bytes into the buffer of element [0, ..., 0]
    buffer: str  # views naming the same buffer share memory

    def reach(self) -> tuple[int, int]:
        """Lowest and one-past-highest byte offset, relative to element [0, ..., 0]."""
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return low, high + np.dtype(self.dtype).itemsize


def _buffers(views: dict[str, Optional[View]]) -> dict[str, np.ndarray]:
    """One byte buffer per name, large enough for every in-bounds view on it, holding small
    integers in every element (so float sums are exact in any order)."""
    sizes: dict[str, int] = {}
    for v in views.values():
        if v is not None:
            low, high = v.reach()
            need = v.offset + high if abs(low) < 1 << 40 and high < 1 << 40 else 64
            sizes[v.buffer] = max(sizes.get(v.buffer, 64), need)
    rng = np.random.default_rng(len(sizes))
    return {name: rng.integers(0, 4, size=n, dtype=np.uint8) for name, n in sizes.items()}


def _array(v: View, buffers: dict[str, np.ndarray]) -> np.ndarray:
    raw = buffers[v.buffer]
    item = np.dtype(v.dtype).itemsize
    base = raw[v.offset:v.offset + item].view(v.dtype) if raw.size >= v.offset + item else raw[:item].view(v.dtype)
    if np.issubdtype(v.dtype, np.floating):  # small integers, not arbitrary bit patterns (NaN)
        raw[:raw.size // item * item].view(v.dtype)[...] = raw[:raw.size // item * item].view(v.dtype) == 0
    return as_strided(base, v.shape, v.strides)


def _call(op: str, x: np.ndarray, arrays: dict[str, Optional[np.ndarray]], out: Optional[np.ndarray]) -> np.ndarray:
    spatial = x.ndim - 2
    if op == "pad":
        return dmlops.pad(x, (1,) * x.ndim, (0,) * (x.ndim - 1) + (2,), "reflection" if min(x.shape) > 1 else "edge",
                          out=out)
    if op == "resample":
        return dmlops.resample(x, (1.0,) * min(2, x.ndim) + (2.0,) * max(0, x.ndim - 2), out=out)
    window = tuple(min(2, n) for n in x.shape[2:])
    if op == "convolution":
        return dmlops.convolution(x, arrays["filter"], arrays.get("bias"), start_padding=(1,) * spatial,
                                  end_padding=(0,) * spatial, out=out)
    if op == "lp_pooling":
        return dmlops.lp_pooling(x, window, p=1, start_padding=(1,) * spatial, end_padding=(0,) * spatial, out=out)
    if op == "unfold":
        return dmlops.unfold(x, window, start_padding=(1,) * spatial, end_padding=(0,) * spatial, out=out)
    if op == "fold":  # the columns (N, C, L) of a 1-tap window over L positions: L outputs
        return dmlops.fold(x, (x.shape[2],), (1,), out=out)
    raise ValueError(f"unknown operator {op}")


def run(op: str, views: dict[str, Optional[View]]) -> tuple[Any, Optional[np.ndarray]]:
    """``op`` on the views ``x``, ``out`` and (convolution) ``filter``, ``bias``: (its result or
    the exception it raised as "Type: message", the result on C-contiguous copies or None when
    some view is out of bounds)."""
    buffers = _buffers(views)
    arrays = {name: None if v is None else _array(v, buffers) for name, v in views.items()}
    in_bounds = all(v is None or (abs(v.reach()[0]) < 1 << 40 and v.reach()[1] < 1 << 40) for v in views.values())
    reference = None
    if in_bounds:
        copies = {k: None if a is None else np.ascontiguousarray(a) for k, a in arrays.items()}
        reference = _call(op, copies["x"], copies, None)
    try:
        return _call(op, arrays["x"], arrays, arrays.get("out")), reference
    except (ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}", reference


def call(fn_name: str, *args: Any) -> Any:
    """dmlops.<fn_name>(*args): for cases that need no arrays built first."""
    return getattr(dmlops, fn_name)(*args)


def evaluate(source: str) -> Any:
    """Runs Python over dmlops and numpy (np) in the worker: an expression's value, or the value
    of ``result`` after statements (the single examples the README's guarantees name)."""
    namespace = {"dmlops": dmlops, "np": np}
    try:
        code = compile(source, "<case>", "eval")
    except SyntaxError:
        exec(compile(source, "<case>", "exec"), namespace)  # noqa: S102 - test sources only
        return namespace.get("result")
    return eval(code, namespace)  # noqa: S307 - test sources only
