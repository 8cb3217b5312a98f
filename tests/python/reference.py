"""Plain numpy references, written from the spec's formulas and independent of dmlops.

Nothing here calls dmlops; clarity beats speed. Each function names the spec section it
transcribes (shared/spec/operators.md).
"""

from __future__ import annotations

import numpy as np


def pad_source_index(mode: str, o: int, n: int, start: int) -> int:
    """Spec section 1: the input coordinate output coordinate ``o`` reads, or -1 (constant)."""
    i = o - start
    if 0 <= i < n:
        return i
    if mode == "constant":
        return -1
    if mode == "edge":
        return min(max(i, 0), n - 1)
    if mode == "reflection":
        if n == 1:
            return 0
        p = 2 * (n - 1)
        m = i % p  # Python's % is already non-negative for p > 0
        return m if m < n else p - m
    if mode == "symmetric":
        p = 2 * n
        m = i % p
        return m if m < n else p - 1 - m
    if mode == "wrap":
        return i % n
    raise ValueError(mode)


def pad_reference(x: np.ndarray, start, end, mode: str, value=0) -> np.ndarray:
    """Spec section 1, axis by axis: gather with one index list per axis, then overwrite every
    element whose index is -1 on any axis with ``value`` (constant mode)."""
    out_shape = tuple(n + s + e for n, s, e in zip(x.shape, start, end))
    index_lists = []
    for axis, n in enumerate(x.shape):
        index_lists.append([pad_source_index(mode, o, n, start[axis]) for o in range(out_shape[axis])])
    safe = [np.array([max(i, 0) for i in idx], dtype=np.intp) for idx in index_lists]
    y = x[np.ix_(*safe)].copy() if x.ndim else x.copy()
    if mode == "constant":
        fill = np.array(value).astype(x.dtype) if x.dtype != np.bool_ else np.bool_(value)
        for axis, idx in enumerate(index_lists):
            where = [slice(None)] * x.ndim
            where[axis] = np.array([i < 0 for i in idx], dtype=bool)
            y[tuple(where)] = fill
    return y


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an array, for bit-exact comparison (NaN payloads included)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def lp_pooling_reference(x: np.ndarray, window, strides, start, end, dilations, p: int) -> np.ndarray:
    """Spec section 4 in float64: pad |x| explicitly with zeros, then for every output position
    take its (dilated) window and compute (sum |x|^p)^(1/p).

    Written as m * (sum (|x|/m)^p)^(1/p) with m = the window's largest |x| -- the same number,
    but float64 cannot hold |x|^p for large p (1e20**30). NaN anywhere in a window gives NaN;
    otherwise inf gives inf; an all-zero window gives 0.
    """
    spatial = x.ndim - 2
    magnitude = np.abs(x.astype(np.float64))
    padded = np.pad(magnitude, [(0, 0), (0, 0)] + [(s, e) for s, e in zip(start, end)])
    extent = [(window[d] - 1) * dilations[d] + 1 for d in range(spatial)]
    out_shape = [(padded.shape[2 + d] - extent[d]) // strides[d] + 1 for d in range(spatial)]
    y = np.empty(x.shape[:2] + tuple(out_shape), dtype=np.float64)
    for o in np.ndindex(*out_shape):
        taps = tuple(slice(o[d] * strides[d], o[d] * strides[d] + extent[d], dilations[d]) for d in range(spatial))
        w = padded[(slice(None), slice(None)) + taps].reshape(x.shape[0], x.shape[1], -1)
        m = w.max(axis=-1)  # NaN if any tap is NaN
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            scaled = m * np.sum((w / m[..., None]) ** p, axis=-1) ** (1.0 / p)
        finite_nonzero = np.isfinite(m) & (m > 0)
        y[(slice(None), slice(None)) + o] = np.where(finite_nonzero, scaled, m)  # m: 0, inf or NaN
    return y
